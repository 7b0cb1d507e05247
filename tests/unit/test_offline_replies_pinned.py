"""The offline judge's replies to the repository's own pairs, pinned byte for byte.

The pins (sha256 of each reply's JSON) were taken with the code before issue 7, when the offline
judge still read the pair from structured slots instead of from the rendered prompt. A scoring change must change a
pin and bump ``OFFLINE_JUDGE_VERSION``; a refactoring must change neither. After a deliberate scoring change,
``PAIRJUDGE_REPIN=1 pytest tests/unit/test_offline_replies_pinned.py`` rewrites the pins (and still fails once,
so a re-pin is never silent); the version bump is checked here too.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import ValidationError

from pairjudge import streams
from pairjudge.agents.offline import OFFLINE_JUDGE_VERSION, judge_reply
from pairjudge.agents.prompts import render_primary, render_tiebreak
from pairjudge.schemas import DEFAULT_TIEBREAK_WEIGHTS, CandidatePair
from pairjudge.schemas.rubric import RubricRef

PINS = Path(__file__).parent / "data" / "offline_replies.json"
PAIR_FILES = ("devset_tone.jsonl", "sample_pairs.jsonl")


def _pairs() -> dict[str, CandidatePair]:
    """Every valid pair, by file, line and pair id (two files may reuse an id)."""
    pairs = {}
    for name in PAIR_FILES:
        lines = (Path(streams.__file__).parent / "data" / name).read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            try:
                pair = CandidatePair.model_validate_json(line)
            except (ValidationError, ValueError):
                continue  # the samples hold malformed events on purpose (dead-letter demo)
            pairs[f"{name}:{number}:{pair.pair_id}"] = pair
    return pairs


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def test_replies_to_every_repo_pair_are_unchanged() -> None:
    replies: dict[str, str] = {}
    for where, pair in _pairs().items():
        for order in ("AB", "BA"):
            if not isinstance(pair.rubric, RubricRef):
                primary = judge_reply(render_primary(pair, pair.rubric, order))
                replies[f"{where}|{order}|primary"] = _digest(primary.model_dump_json(by_alias=True))
            tiebreak = judge_reply(render_tiebreak(pair, DEFAULT_TIEBREAK_WEIGHTS, order))
            replies[f"{where}|{order}|tiebreak"] = _digest(tiebreak.model_dump_json(by_alias=True))
    if os.environ.get("PAIRJUDGE_REPIN") == "1":
        PINS.write_text(
            json.dumps({"version": OFFLINE_JUDGE_VERSION, **dict(sorted(replies.items()))}, indent=1) + "\n"
        )
        raise AssertionError(
            f"re-pinned {len(replies)} replies at {OFFLINE_JUDGE_VERSION}; run again without PAIRJUDGE_REPIN"
        )
    pinned = json.loads(PINS.read_text(encoding="utf-8"))
    # A new scoring must come with a new version, which opens a new drift series (docs/design.md §3).
    assert pinned.pop("version", None) == OFFLINE_JUDGE_VERSION, "re-pin after bumping OFFLINE_JUDGE_VERSION"
    assert len(replies) >= 400  # every pair in both orders, primary and tie-break
    changed = sorted(k for k in pinned if replies.get(k) != pinned[k])
    assert (changed, sorted(replies.keys() - pinned.keys())) == ([], []), (
        f"offline replies changed for {len(changed)} request(s), e.g. {changed[:3]}; "
        f"if scoring changed on purpose, bump OFFLINE_JUDGE_VERSION (now {OFFLINE_JUDGE_VERSION}) and the pins"
    )
