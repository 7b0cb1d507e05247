"""Preference data for training: each decided pair as one chosen/rejected row, with where it came from.

Pure logic, no I/O: ``pairjudge export preferences`` (``streams.cli.export``) reads the topics and hands every
event to a :class:`PreferenceLedger`; the ledger joins them by pair id and :meth:`PreferenceLedger.select` says,
for each pair, whether it becomes a row, and if not, why.

The rows are in the shape TRL's ``DPOTrainer`` reads: ``prompt``, ``chosen``, ``rejected``. Plain strings for a
task given as one prompt; lists of ``{"role", "content"}`` messages (OpenAI's chat shape, tool calls included)
for a conversation ("conversational" in TRL's words). One file holds one style: a plain prompt can be written as
a conversation of one user turn, but a conversation cannot be flattened into a string without inventing a
template, so an export that has seen a conversation is conversational (:func:`choose_style`).

Who decided a pair, strongest first:

1. people: the pair's human labels. Labels override the judge. Labels that disagree leave the pair undecided,
   a label of "TIE" makes it a tie; either way it is left out (and counted).
2. the judge's verdict (``decided_by`` judge, tie-break or rule). A verdict of "TIE" (a rule: identical outputs)
   is left out. A verdict drawn for a person's check (an audit sample) waits for that label, unless told not to:
   the label may overturn it, and a row once written is never written again.
3. nothing yet: a pair at the tie-break or in the review queue waits, and is not written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pairjudge.schemas.events import DecidedBy, HumanLabel, PairVerdict, ReviewRequest, TieBreakRequest
from pairjudge.schemas.messages import Message, ToolCall
from pairjudge.schemas.pair import TIE, Candidate, CandidatePair, CandidateSource
from pairjudge.schemas.rubric import RubricRef

__all__ = [
    "COLUMNS",
    "DECIDERS",
    "ExportFilters",
    "PreferenceLedger",
    "Selection",
    "Style",
    "choose_style",
    "messages_of",
]

#: ``plain``: prompt/chosen/rejected are strings. ``conversational``: lists of chat messages.
Style = Literal["plain", "conversational"]

#: ``decided_by`` in the rows: the verdict's ``decided_by`` in the words the docs use.
DECIDERS: dict[DecidedBy, str] = {"primary": "judge", "tiebreak": "tie-break", "human": "person", "rule": "rule"}

#: Every column of a row, in order, with what it holds (docs/guides/preference-export.md renders the same list).
COLUMNS: dict[str, str] = {
    "prompt": "the task: a string, or a list of chat messages (conversational)",
    "chosen": "the preferred reply: a string, or a list of assistant messages",
    "rejected": "the other reply, in the same shape",
    "pair_id": "the pair's id",
    "experiment": "the pair's experiment id (metadata.experiment_id), or null",
    "traffic": "production, shadow, canary or offline (metadata.traffic)",
    "rubric": "the rubric's kind, or named:<name> for a catalog rubric",
    "chosen_candidate": "the chosen candidate's id",
    "rejected_candidate": "the rejected candidate's id",
    "chosen_source": "where the chosen reply came from: model, version, prompt_version, role",
    "rejected_source": "the same for the rejected reply",
    "judge_provider": "the judge's provider, or null when no judge looked at the pair",
    "judge_model": "the judge's model, or null",
    "judge_version": "the judge's version (JudgeInfo.version), or null",
    "judge_winner": "the candidate the judge's verdict named, or null when the judge reached none",
    "confidence": "the judge's confidence in its verdict (0 to 1), or null",
    "orders_agreed": "whether the judge named the same winner in both orders, or null without a verdict",
    "decided_by": "judge, tie-break, rule or person: who settled the row's choice",
    "human_label": "the candidate people chose, or null when no person labelled the pair",
    "human_labels": "how many labels people gave the pair (a label the pair carries itself counts as one)",
    "decided_at": "when the choice was made (the verdict's decided_at, or the last label's labelled_at), UTC",
}


@dataclass(frozen=True)
class ExportFilters:
    """What to leave out (``pairjudge export preferences``' options). A row must pass every one set."""

    #: Only pairs a person labelled.
    people_only: bool = False
    #: Only rows whose judge confidence is at least this (rows without a judge verdict are left out).
    min_confidence: float | None = None
    #: Only rows whose judge named the same winner in both orders.
    orders_agreed: bool = False
    #: Leave out pairs the judge could not decide and sent to people (a review, not an audit sample).
    exclude_review: bool = False
    #: Only rows decided at or after ``since`` and before ``until``.
    since: datetime | None = None
    until: datetime | None = None
    #: Hold a verdict drawn for a person's check until its label comes (it may overturn the verdict).
    wait_for_labels: bool = True
    #: Keep canary pairs: known-answer pairs sent again and again under fresh ids, the same comparison many times.
    include_canaries: bool = False
    #: Hold a verdict decided after this moment for a later run: a worker publishes a verdict and its
    #: request for a person's check one after the other, so a verdict read a moment ago may have its check
    #: still on the way (and written now, it could never take the label that comes).
    settled_before: datetime | None = None


@dataclass
class _Story:
    """Everything read about one pair."""

    pair: CandidatePair | None = None
    verdict: PairVerdict | None = None
    #: A review request that is not an audit sample: the judge did not decide, a person must.
    review: ReviewRequest | None = None
    #: Drawn for a person's check of the judge's verdict.
    audited: bool = False
    at_tiebreak: bool = False
    labels: dict[str, HumanLabel] = field(default_factory=dict)  # reviewer -> their latest label


@dataclass
class Selection:
    """What one pass over the ledger found: the rows to write, and a count of every pair left out, by why."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    #: Why pairs were left out -> how many (keys in plain words, printed by the command).
    left_out: Counter[str] = field(default_factory=Counter)
    #: Pairs held back that a later run may write (waiting for a label, a person, or the tie-break).
    waiting: Counter[str] = field(default_factory=Counter)
    #: Rows an earlier run already wrote.
    already_written: int = 0
    #: Conversational pairs met by a plain export (left out: they cannot be written as strings).
    wrong_style: int = 0


class PreferenceLedger:
    """The events read so far, joined by pair id."""

    def __init__(self) -> None:
        self._stories: dict[str, _Story] = {}
        #: Events added, of every kind (the command's summary).
        self.events = 0

    def _story(self, pair_id: str) -> _Story:
        return self._stories.setdefault(pair_id, _Story())

    def __len__(self) -> int:
        return len(self._stories)

    def add_pair(self, pair: CandidatePair) -> None:
        self.events += 1
        story = self._story(pair.pair_id)
        story.pair = story.pair or pair

    def add_verdict(self, verdict: PairVerdict) -> None:
        # A redelivered pair gets the same verdict again (streams.worker.published): the first one stands.
        self.events += 1
        story = self._story(verdict.pair_id)
        story.verdict = story.verdict or verdict

    def add_tiebreak(self, request: TieBreakRequest) -> None:
        self.events += 1
        story = self._story(request.pair_id)
        story.pair = story.pair or request.pair
        story.at_tiebreak = True

    def add_review(self, request: ReviewRequest) -> None:
        self.events += 1
        story = self._story(request.pair_id)
        story.pair = story.pair or request.pair
        if request.audit:
            story.audited = True
        else:
            story.review = story.review or request

    def add_label(self, label: HumanLabel) -> None:
        # One answer per person: a reviewer who changes their mind replaces their earlier label.
        self.events += 1
        self._story(label.pair_id).labels[label.reviewer] = label

    def select(
        self, filters: ExportFilters, *, written: Iterable[str] = (), style: Style = "conversational"
    ) -> Selection:
        """The rows not yet ``written`` that pass ``filters``, in ``style``, and the count of the rest."""
        done = set(written)
        selection = Selection()
        for pair_id in sorted(self._stories):
            if pair_id in done:
                selection.already_written += 1
                continue
            story = self._stories[pair_id]
            row = _decide(pair_id, story, filters, selection)
            if row is None:
                continue
            assert story.pair is not None  # _decide returns a row only with the pair's text
            if style == "plain" and _is_conversation(story.pair):
                selection.wrong_style += 1
                continue
            why = _filtered_out(row, story, filters)
            if why is not None:
                selection.left_out[why] += 1
                continue
            selection.rows.append(_texts(story.pair, row, style) | row)
        return selection

    def any_conversation(self) -> bool:
        return any(s.pair is not None and _is_conversation(s.pair) for s in self._stories.values())


def choose_style(kept: Style | None, ledger: PreferenceLedger, wanted: Literal["auto"] | Style = "auto") -> Style:
    """The export's style: what an earlier run of the same export chose (``kept``), else what was asked for;
    ``auto`` is conversational as soon as any pair read is a conversation."""
    if kept is not None:
        return kept
    if wanted != "auto":
        return wanted
    return "conversational" if ledger.any_conversation() else "plain"


def _decide(pair_id: str, story: _Story, filters: ExportFilters, selection: Selection) -> dict[str, Any] | None:
    """The row's choice and provenance (without its texts), or None with the reason counted."""
    verdict = story.verdict
    labels = sorted(story.labels.values(), key=lambda label: label.labelled_at)
    # A pair may carry its people's answer itself (a canary's, a labelled evaluation set's): a label like any other,
    # once a stage has decided the pair (so the row has what the judge said).
    known = story.pair.human_label if story.pair is not None and (verdict or story.review) else None
    winners = {label.winner for label in labels} or ({known.winner} if known is not None else set())
    human: str | None = None
    if winners:
        if len(winners) > 1:
            selection.left_out["people disagreed"] += 1
            return None
        (human,) = winners
        if human == TIE:
            selection.left_out["a tie (people)"] += 1
            return None
        if labels:
            decided_at = labels[-1].labelled_at
        else:
            assert story.pair is not None  # a known label is the pair's
            decided_at = verdict.decided_at if verdict is not None else story.pair.metadata.created_at
        chosen, decided_by = human, "person"
    elif verdict is not None:
        if verdict.tie:
            selection.left_out["a tie (identical or empty replies)"] += 1
            return None
        if story.audited and filters.wait_for_labels:
            selection.waiting["drawn for a person's check, waiting for the label"] += 1
            return None
        if filters.settled_before is not None and verdict.decided_at > filters.settled_before:
            selection.waiting["decided moments ago (its check may be on the way)"] += 1
            return None
        chosen, decided_by, decided_at = verdict.winner, DECIDERS[verdict.decided_by], verdict.decided_at
    elif story.review is not None:
        selection.waiting["in the review queue, waiting for a person"] += 1
        return None
    elif story.at_tiebreak:
        selection.waiting["at the tie-break, not decided yet"] += 1
        return None
    else:
        selection.waiting["not decided yet"] += 1
        return None
    if story.pair is None:
        selection.left_out["the pair's text is no longer on the pairs topic"] += 1
        return None
    try:
        winner = story.pair.candidate(chosen)
    except KeyError:
        selection.left_out["the chosen candidate is not one of the pair's"] += 1
        return None
    (loser,) = (c for c in story.pair.candidates if c.candidate_id != winner.candidate_id)
    judge = verdict.judge if verdict is not None else story.review.judge if story.review is not None else None
    return {
        "pair_id": pair_id,
        "experiment": story.pair.metadata.experiment_id,
        "traffic": story.pair.metadata.traffic,
        "rubric": _rubric_name(story.pair),
        "chosen_candidate": winner.candidate_id,
        "rejected_candidate": loser.candidate_id,
        "chosen_source": _source(winner.source),
        "rejected_source": _source(loser.source),
        "judge_provider": judge.provider if judge is not None else None,
        "judge_model": judge.model if judge is not None else None,
        "judge_version": judge.version if judge is not None else None,
        "judge_winner": verdict.winner if verdict is not None else None,
        "confidence": verdict.confidence if verdict is not None else None,
        "orders_agreed": verdict.consistent if verdict is not None else None,
        "decided_by": decided_by,
        "human_label": human,
        "human_labels": len(labels) or (1 if human is not None else 0),
        "decided_at": decided_at.isoformat(),
    }


def _filtered_out(row: dict[str, Any], story: _Story, filters: ExportFilters) -> str | None:
    """The first filter ``row`` fails, in the words the summary prints; None when it passes them all."""
    if row["traffic"] == "canary" and not filters.include_canaries:
        return "a canary, the same known-answer pair sent again and again (--include-canaries)"
    if filters.people_only and row["human_label"] is None:
        return "no person labelled it (--people-only)"
    if filters.min_confidence is not None and (row["confidence"] is None or row["confidence"] < filters.min_confidence):
        return "judge confidence below the minimum, or no verdict (--min-confidence)"
    if filters.orders_agreed and row["orders_agreed"] is not True:
        return "the judge's two orders did not agree (--orders-agreed)"
    if filters.exclude_review and story.review is not None:
        return "sent to people for review (--exclude-review)"
    decided_at = datetime.fromisoformat(row["decided_at"])
    if (filters.since is not None and decided_at < filters.since) or (
        filters.until is not None and decided_at >= filters.until
    ):
        return "decided outside the time range (--since/--until)"
    return None


def _rubric_name(pair: CandidatePair) -> str:
    """As the audit's series name it (``AuditSeries.for_pair``)."""
    rubric = pair.rubric
    return f"named:{rubric.name}" if isinstance(rubric, RubricRef) else rubric.kind


def _source(source: CandidateSource) -> dict[str, str]:
    return {
        "model": source.model,
        "version": source.version,
        "prompt_version": source.prompt_version,
        "role": source.role,
    }


def _is_conversation(pair: CandidatePair) -> bool:
    return bool(pair.task.messages) or pair.uses_tools


def _texts(pair: CandidatePair, row: dict[str, Any], style: Style) -> dict[str, Any]:
    winner, loser = pair.candidate(row["chosen_candidate"]), pair.candidate(row["rejected_candidate"])
    if style == "plain":
        task = pair.task
        text = task.question if task.context is None else f"{task.context}\n\n{task.question}"
        return {"prompt": text, "chosen": winner.output, "rejected": loser.output}
    prompt, chosen = messages_of(pair, winner)
    _, rejected = messages_of(pair, loser)
    return {"prompt": prompt, "chosen": chosen, "rejected": rejected}


def messages_of(pair: CandidatePair, candidate: Candidate) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The conversation as TRL's conversational prompt, and ``candidate``'s part of it.

    A reply to the last user turn: the prompt is every turn so far (tool calls and results included), the reply
    one assistant message. A transcript comparison (candidates with ``turns``): the prompt ends at the first user
    turn, and the reply carries the candidate's answers with the later user turns between them. The task's
    ``context``, when given, is a system turn first.
    """
    task = pair.task
    lead: list[dict[str, Any]] = [{"role": "system", "content": task.context}] if task.context else []
    if task.prompt is not None:
        return [*lead, {"role": "user", "content": task.prompt}], [_assistant(candidate.output, candidate.tool_calls)]
    turns = [_message(m) for m in task.messages]
    if not candidate.turns:
        return lead + turns, [_assistant(candidate.output, candidate.tool_calls)]
    first_user = next(i for i, m in enumerate(task.messages) if m.role == "user")
    later_users = [m.content for m in task.messages[first_user + 1 :] if m.role == "user"]
    reply: list[dict[str, Any]] = []
    for answer, question in zip(candidate.turns, later_users, strict=True):
        reply += [_assistant(answer, ()), {"role": "user", "content": question}]
    return lead + turns[: first_user + 1], [*reply, _assistant(candidate.output, candidate.tool_calls)]


def _assistant(text: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [call.model_dump(mode="json") for call in calls]
    return message


def _message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [call.model_dump(mode="json") for call in message.tool_calls]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out
