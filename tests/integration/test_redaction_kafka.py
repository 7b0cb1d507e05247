"""The redaction hook on real Kafka: a real ``pairjudge worker`` dead-letters a malformed event carrying an
email redacted when ``PAIRJUDGE_REDACTION__ENABLED`` is on, and the exact bytes when it is off; with it
on, review requests land on ``pairjudge.review`` with their outputs redacted too.

Also checked on the same run: the worker's data directory (Faust's tables) is its owner's only.
"""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest

from pairjudge.schemas import ReviewRequest
from pairjudge.streams.kafka.collector import read_topic
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.poison import read_dead_letters, send_raw
from pairjudge_dev.workers import kafka_run, running_worker
from tests.unit.factories import make_pair

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

EMAIL = "jane.doe@example.com"
TICKET = "TCK-482913"


def malformed(prefix: str) -> list[bytes]:
    """A pair that fails validation and one that is not JSON at all, both quoting an email and a ticket."""
    invalid = json.dumps(
        {"pair_id": f"{prefix}-bad-1", "task": {"prompt": f"Answer {EMAIL} about {TICKET}"}, "candidates": 3}
    ).encode()
    broken = f'{{"pair_id": "{prefix}-bad-2", "note": "write to {EMAIL}", '.encode()
    return [invalid, broken]


def audited_pair(prefix: str) -> bytes:
    pair = make_pair(
        pair_id=f"{prefix}-ok-1",
        outputs=(f"Hi! Your refund is done. Questions? Mail {EMAIL}. Cheers", "Refund processed. Cheers"),
    )
    return pair.model_dump_json().encode()


@pytest.mark.parametrize("enabled", [True, False], ids=["redaction-on", "redaction-off"])
async def test_dead_letters_and_review_requests_are_redacted_only_when_enabled(
    kafka_bootstrap: str, tmp_path: Path, enabled: bool
) -> None:
    settings = await kafka_run(
        kafka_bootstrap,
        tmp_path,
        "redact",
        worker={"concurrency": 4},
        policy={"audit_share": 1.0},  # every automatic verdict also goes to review, as an audit copy
        redaction={"enabled": enabled, "custom": {"ticket": "TCK-[0-9]{6}"}},
    )
    prefix = settings.topics.prefix
    bad = malformed(prefix)

    def reviewed(records: list[tuple[bytes | None, bytes | None]]) -> bool:
        return any(key == f"{prefix}-ok-1".encode() for key, _ in records)

    with running_worker(settings, tmp_path / "worker.log") as worker:
        await send_raw(settings, bad, keyed=True)
        await send_events(settings, [audited_pair(prefix)])
        letters = await read_dead_letters(settings, {hashlib.sha256(b).hexdigest() for b in bad}, timeout=120)
        review = await read_topic(settings, "review", timeout=120, until=reviewed)
        alive = worker.poll() is None

    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert alive, f"the worker exited\n{log[-4000:]}"
    got = {raw: letters.get(hashlib.sha256(raw).hexdigest(), []) for raw in bad}
    assert all(len(found) == 1 for found in got.values()), (
        f"{ {k[:30]: len(v) for k, v in got.items()} }\n{log[-3000:]}"
    )
    for raw, [(letter, _)] in got.items():
        # Either way the letter describes the event as it was received.
        assert letter.original_size == len(raw)
        assert letter.original_sha256 == hashlib.sha256(raw).hexdigest()
        assert letter.pair_id is not None
        assert letter.pair_id.startswith(f"{prefix}-bad-")
        if enabled:
            assert letter.original_redacted
            assert EMAIL.encode() not in letter.original
            assert b"[redacted:email]" in letter.original
            assert EMAIL not in letter.error
            assert letter.original == raw.replace(EMAIL.encode(), b"[redacted:email]").replace(
                TICKET.encode(), b"[redacted:ticket]"
            )
        else:
            assert not letter.original_redacted
            assert letter.original == raw  # the exact bytes, ready to replay

    # The pair reaches review as an audit copy of its verdict, or escalated (the offline judge may find
    # no signal between two such outputs): either way, with its outputs redacted exactly when enabled.
    requests = [
        ReviewRequest.model_validate_json(value) for key, value in review if value and key == f"{prefix}-ok-1".encode()
    ]
    assert requests, f"no review request for the pair\n{log[-3000:]}"
    for request in requests:
        output = request.pair.candidates[0].output
        assert request.redacted is enabled
        assert (EMAIL in output) is not enabled
        assert ("[redacted:email]" in output) is enabled

    data_dir = settings.worker.data_dir
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
