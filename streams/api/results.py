"""One summary row per pair, and the results file that holds them: appended as pairs are decided, resumable.

A row (``PairResult``) is what ``pairjudge evaluate --out`` writes and what its report is computed from:
the outcome, the winner, and what scoring needs (the human label, the candidates' ids and lengths, each
judge's winners in both orders). It never holds the pair's text.

The file is JSON Lines, one row a line, each written whole and flushed as its pair is decided. A killed
process therefore leaves whole lines, except perhaps a torn last one (a write cut short): reading the
file for a resume drops that tail and truncates the file to its last whole line, so the next row starts
on a line of its own. A complete line that is not a row is an error: it is not ours to guess.
Guarantees are for a killed process; after a machine crash, lines the OS had not yet put on disk are
lost (they are judged again), as nothing is fsync'd.

Which input a row belongs to (its ``key``): the pair id, or for a line with no readable pair id the
SHA-256 of the line, so even an unreadable line is judged once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any, Final

from pairjudge.agents.scores.events import stratum_of
from pairjudge.agents.tool_views import reply_length
from pairjudge.schemas import CandidatePair, PairVerdict
from pairjudge.schemas.outcomes import OUTCOMES
from pairjudge.streams.api.outcomes import Outcome
from pairjudge.streams.kafka.dead_letters import guess_pair_id
from pairjudge.streams.security.files import open_private_append, open_private_write

#: What the file is, in the permission warnings of ``streams.security.files``.
WHAT = "evaluate output"
#: A row's ``outcome`` for each outcome kind (``OutcomeEntry.row``: the names ``pairjudge evaluate`` always wrote).
ROW_OUTCOME: Final[Mapping[str, str]] = MappingProxyType({kind: entry.row for kind, entry in OUTCOMES.items()})


@dataclass
class PairResult:
    pair_id: str
    outcome: str  # the outcome kind's ``row`` (schemas.outcomes: "verdict", "review", "rejected", "error", ...)
    winner: str | None = None  # a candidate id, None when undecided
    #: The winner's role ("champion", "challenger", ...) where the pair names one; None for a tie or none.
    winner_role: str | None = None
    decided_by: str | None = None
    reason: str | None = None
    #: Why a pair was not judged (rejected, an error, ...), readable; never the pair's text.
    detail: str | None = None
    confidence: float | None = None
    human: str | None = None  # the known label: a candidate id or TIE
    candidate_ids: tuple[str, str] | None = None
    #: (AB mapped, BA mapped) per judge whose two orders were both valid: one entry, or one per juror.
    primary_winners: tuple[tuple[str, str], ...] = ()
    raw_winners: tuple[str, ...] = ()
    lengths: tuple[int, int] | None = None  # characters of each candidate's output, for the length baseline
    #: SHA-256 of the input line: how a line with no readable pair id is recognised on a resume.
    input_sha256: str | None = None
    #: How the audit sampled a decided pair, as the human basis counts it (``agents.scores.events.stratum_of``):
    #: its sampling class ("confident", "uncertain", "review" for an escalation, "rule" for a rule's verdict),
    #: the probability it was drawn for a label with (None: auditing off), and whether it was drawn (a label is
    #: expected). None for a pair not decided. A replay reads them instead of rebuilding the draw.
    sampling_class: str | None = None
    inclusion_probability: float | None = None
    audit_sample: bool | None = None

    @property
    def key(self) -> str:
        return input_key(self.pair_id if self.pair_id != "?" else None, self.input_sha256 or "")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, line: str | bytes) -> PairResult:
        """A row read back; raises ``ValueError`` (or ``TypeError``) when the line is not one."""
        data: Any = json.loads(line)
        if not isinstance(data, dict) or not isinstance(data.get("pair_id"), str):
            raise ValueError("not a result row (a JSON object with a pair_id)")
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        # JSON has no tuples: give back the shapes the row was written with.
        if known.get("candidate_ids") is not None:
            known["candidate_ids"] = tuple(known["candidate_ids"])
        if known.get("lengths") is not None:
            known["lengths"] = tuple(known["lengths"])
        known["primary_winners"] = tuple(tuple(w) for w in known.get("primary_winners") or ())
        known["raw_winners"] = tuple(known.get("raw_winners") or ())
        return cls(**known)


def input_key(pair_id: str | None, sha256: str) -> str:
    return pair_id if pair_id else f"sha256:{sha256}"


def line_key(raw: bytes) -> str:
    """The key of an input line (module docstring)."""
    return input_key(guess_pair_id(raw), hashlib.sha256(raw).hexdigest())


def result_for(outcome: Outcome, raw: bytes) -> PairResult:
    """The row for ``outcome``, the decision on the input line ``raw``."""
    pair = outcome.pair
    row = PairResult(
        pair_id=outcome.pair_id or guess_pair_id(raw) or "?",
        outcome=ROW_OUTCOME[outcome.kind],
        winner=outcome.winner,
        reason=outcome.reason,
        confidence=outcome.confidence,
        input_sha256=hashlib.sha256(raw).hexdigest(),
    )
    row.detail = outcome.detail
    if isinstance(outcome.event, PairVerdict):
        row.decided_by = outcome.event.decided_by
        row.winner_role = outcome.event.winner_role
    if pair is not None:
        _describe_pair(row, pair)
    record = outcome.record
    if record is not None and OUTCOMES[record.outcome].ends_story:
        row.sampling_class, row.inclusion_probability, row.audit_sample = stratum_of(record)
    primary = outcome.primary_orderings
    row.raw_winners = tuple(o.raw_winner for o in primary if o.raw_winner)
    # Orderings come AB then BA, per judge (per juror for a jury).
    row.primary_winners = tuple(
        (ab.mapped_winner, ba.mapped_winner)
        for ab, ba in zip(primary[0::2], primary[1::2], strict=True)
        if ab.valid and ba.valid and ab.mapped_winner and ba.mapped_winner
    )
    return row


def _describe_pair(row: PairResult, pair: CandidatePair) -> None:
    first, second = pair.candidates
    row.candidate_ids = (first.candidate_id, second.candidate_id)
    row.human = pair.human_label.winner if pair.human_label else None
    # A reply with tool calls counts them as the judge is shown them (agents.tool_views, schema version 3).
    row.lengths = (
        reply_length(first.output.strip(), first.tool_calls),
        reply_length(second.output.strip(), second.tool_calls),
    )


@dataclass(frozen=True, slots=True)
class ResultsFile:
    """What a results file held when it was opened for a resume."""

    path: Path
    rows: tuple[PairResult, ...]
    #: Bytes of a torn last line that were dropped (0: the file ended on a whole line).
    dropped_bytes: int

    @classmethod
    def load(cls, path: Path) -> ResultsFile:
        """Read ``path`` (missing: empty), truncating a torn last line away; ``ValueError`` names a bad line."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return cls(path, (), 0)
        whole = data[: data.rfind(b"\n") + 1]
        dropped = len(data) - len(whole)
        if dropped:
            # Appending after a torn line would glue the next row onto it: cut the file back first.
            os.truncate(path, len(whole))
        rows: list[PairResult] = []
        for number, line in enumerate(whole.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append(PairResult.from_json(line))
            except (ValueError, TypeError) as exc:
                raise ValueError(
                    f"{path}, line {number}: not a pairjudge evaluate result ({exc}); "
                    "resume only into a file this command wrote, or start over (--fresh)"
                ) from None
        return cls(path, tuple(rows), dropped)


def open_results(path: Path, *, fresh: bool) -> IO[str]:
    """``path`` for appending rows, owner-only (0o600) whatever the umask; emptied first when ``fresh``."""
    if fresh:
        open_private_write(path, what=WHAT).close()
    return open_private_append(path, what=WHAT)


def append_row(out: IO[str], row: PairResult) -> None:
    """One whole line, flushed, so a process killed after this call keeps the row."""
    out.write(row.to_json() + "\n")
    out.flush()
