"""The alert webhook against a real HTTP server on 127.0.0.1: the body both receiver styles read,
retries on 5xx, no retry on 4xx, a dead receiver that never holds anyone up, and a URL never logged."""

from __future__ import annotations

import logging

import pytest
from pydantic import SecretStr

from pairjudge.schemas.audit import Alert, AlertKind
from pairjudge.streams.telemetry.alerts import AlertWebhook
from tests.fixtures.fake_judge_server import FakeJudgeServer, closed_port, fake_judge_server, hang, status

__all__ = ["closed_port", "fake_judge_server"]  # fixtures, imported for pytest

SECRET_PATH = "/services/T0001/B0002/s3cr3t-t0k3n"


def alert(kind: AlertKind = "tiebreak_rate_high") -> Alert:
    return Alert(
        kind=kind,
        series="offline:m|h|tone_style|-",
        message="the tie-break ran on 67% of 30 pairs",
        value=0.67,
        threshold=0.2,
    )


def url(server: FakeJudgeServer) -> SecretStr:
    return SecretStr(f"http://127.0.0.1:{server.port}{SECRET_PATH}")


async def test_a_failing_receiver_is_retried_until_it_takes_the_alert(fake_judge_server: FakeJudgeServer) -> None:
    fake_judge_server.script(status(503), status(502), status(200, body=b"ok"))
    hook = AlertWebhook(url(fake_judge_server), attempts=5, backoff_s=0.01)
    hook.submit(alert("kappa_below_threshold"))
    await hook.drain()
    requests = fake_judge_server.requests
    assert len(requests) == 3
    assert (hook.delivered, hook.failed) == (1, 0)
    body = requests[-1].json()
    assert requests[-1].path == SECRET_PATH
    # Slack-style receivers read ``text``; Alertmanager-style ones read ``alerts``.
    assert body["text"].startswith(
        "[pairjudge] critical: the judge agrees too little with people (kappa_below_threshold) "
        "on offline:m|h|tone_style|-"
    )
    assert (body["version"], body["status"]) == ("4", "firing")
    (item,) = body["alerts"]
    assert item["labels"] == {
        "alertname": "kappa_below_threshold",
        "series": "offline:m|h|tone_style|-",
        "severity": "critical",
        "service": "pairjudge",
    }
    assert item["annotations"]["summary"] == "the tie-break ran on 67% of 30 pairs"
    assert item["startsAt"].endswith("+00:00")


async def test_a_refusal_is_not_retried_and_the_url_is_never_logged(
    fake_judge_server: FakeJudgeServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_judge_server.script(status(404))
    hook = AlertWebhook(url(fake_judge_server), attempts=5, backoff_s=0.01)
    with caplog.at_level(logging.DEBUG):
        hook.submit(alert())
        await hook.drain()
    assert fake_judge_server.request_count == 1
    assert (hook.delivered, hook.failed) == (0, 1)
    assert "could not deliver the tiebreak_rate_high alert (HTTPStatusError, HTTP 404)" in caplog.text
    assert "s3cr3t" not in caplog.text
    assert "http://127.0.0.1" in caplog.text


async def test_a_dead_receiver_is_given_up_and_a_full_queue_drops_the_oldest(
    fake_judge_server: FakeJudgeServer, closed_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Nothing listens: every attempt is refused; submit itself never waits (it is not even async).
    dead = AlertWebhook(SecretStr(f"http://127.0.0.1:{closed_port}{SECRET_PATH}"), attempts=3, backoff_s=0.01)
    dead.submit(alert())
    await dead.drain()
    assert (dead.delivered, dead.failed) == (0, 1)
    # A receiver that hangs past the timeout while alerts keep coming: the queue stays bounded.
    fake_judge_server.set_default(hang(3.0))
    slow = AlertWebhook(url(fake_judge_server), attempts=1, timeout_s=0.5, queue_size=2, backoff_s=0.01)
    for _ in range(5):
        slow.submit(alert())
    with caplog.at_level(logging.WARNING):
        await slow.drain()
    assert slow.dropped >= 2
    assert slow.delivered + slow.failed + slow.dropped == 5
    assert "s3cr3t" not in caplog.text
    await slow.aclose()
