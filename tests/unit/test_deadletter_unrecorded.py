"""A dead letter is never recorded as a pair's outcome, so a replay of the pair is judged again.

Recorded, it would be re-published for every redelivery of the pair within the outcome retention, and
``pairjudge deadletter replay`` would bring back the letter instead of asking the fixed judge
(tests/integration/test_deadletter_replay_kafka.py shows it on a real worker).
"""

from __future__ import annotations

from pairjudge.streams.worker.pipeline import StageResult
from tests.unit.test_delivery import ORIGIN, out, rig


async def test_a_dead_letter_of_a_decoded_pair_is_published_and_its_claim_released_not_recorded() -> None:
    result = StageResult(outgoing=[out("deadletter")], pair_id="pair-1", alerts=[out("alerts")])
    r = rig(result=result)
    await r.delivery.deliver("primary", result, b"raw", ORIGIN)
    assert r.log == [
        ("release", "primary", "pair-1"),
        ("send", "deadletter", b"pair-1"),
        ("send", "alerts", b"pair-1"),
    ]


async def test_an_outcome_with_anything_beside_a_letter_is_still_recorded_first() -> None:
    result = StageResult(outgoing=[out("review"), out("decisions")], pair_id="pair-1")
    r = rig(result=result)
    await r.delivery.deliver("tiebreak", result, b"raw", ORIGIN)
    assert r.log[0] == ("record", "tiebreak", "pair-1", 2, ["review", "decisions"])
