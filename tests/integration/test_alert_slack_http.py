"""A Slack-format alert delivered to a real HTTP sink on 127.0.0.1: the body Slack's incoming webhook is sent is
valid Block Kit (tests/fixtures/block_kit.py: the schema from Slack's reference, and Slack's own SDK), it names the
series in words and links its page and runbook; the rate limit holds back repeats of one kind and series and the
next alert through says so; the webhook's URL, from a secret file, is never logged."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pairjudge.schemas.audit import Alert, AuditSeries
from pairjudge.streams.app import _alert_webhook
from pairjudge.streams.config.oversight import AuditSettings
from pairjudge.streams.config.settings import Settings
from tests.fixtures.block_kit import check_block_kit
from tests.fixtures.fake_judge_server import FakeJudgeServer, fake_judge_server, status

__all__ = ["fake_judge_server"]  # a fixture, imported for pytest

SECRET_PATH = "/services/T0001/B0002/s3cr3t-t0k3n"
SERIES = AuditSeries(
    judge_provider="openai",
    judge_model="gpt-judge",
    prompt_template_hash="9f8e7d",
    rubric="tone_style",
    experiment_id="brand-voice-q4",
)


def alert(kind: str = "kappa_below_threshold", series: str = SERIES.key) -> Alert:
    return Alert.model_validate(
        {"kind": kind, "series": series, "message": "kappa 0.52 on 60 labels", "value": 0.52, "threshold": 0.7}
    )


async def test_a_slack_alert_reaches_the_sink_as_block_kit_and_repeats_are_held_back(
    fake_judge_server: FakeJudgeServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake_judge_server.set_default(status(200, body=b"ok"))
    secret = tmp_path / "slack-webhook"
    secret.write_text(f"http://127.0.0.1:{fake_judge_server.port}{SECRET_PATH}\n")
    secret.chmod(0o600)
    settings = Settings(
        audit=AuditSettings(
            webhook_url_file=secret,
            webhook_format="slack",
            webhook_rate_window_s=3600,
            webhook_review_url="https://review.example.com",
            webhook_runbook_url="https://docs.example.com/operations/alerts/",
        )
    )
    hook = _alert_webhook(settings)
    assert hook is not None
    with caplog.at_level(logging.DEBUG):
        hook.submit(alert())
        hook.submit(alert())  # the same kind and series within the window: held back
        hook.submit(alert("tiebreak_rate_high"))  # another kind: through
        await hook.drain()
    await hook.aclose()
    assert (hook.delivered, hook.failed, hook.held_back) == (2, 0, 1)
    requests = fake_judge_server.requests
    assert [r.path for r in requests] == [SECRET_PATH, SECRET_PATH]
    first = requests[0].json()
    check_block_kit(first)
    header, section, _, actions = first["blocks"]
    assert header["text"]["text"] == "pairjudge: the judge agrees too little with people"
    assert "*Series:* brand-voice-q4 · tone and style · gpt-judge" in section["text"]["text"]
    assert "*Value:* 0.52, below its floor of 0.70" in section["text"]["text"]
    assert [b["url"] for b in actions["elements"]] == [
        "https://review.example.com/audit",
        "https://docs.example.com/operations/alerts/#pairjudgekappaguardtripped",
    ]
    check_block_kit(requests[1].json())
    assert "s3cr3t" not in caplog.text
    assert "held back a kappa_below_threshold alert" in caplog.text
