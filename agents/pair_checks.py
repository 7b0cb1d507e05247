"""The input checks of the judging core's first step (docs/design.md §2.1): is the pair judgeable, which
rubric it is judged against, and what the injection rules find in it. ``agents.core`` runs them before any
judge call (``judge_pair``, ``capped_decision``).

Pure: no I/O. A pair that cannot be judged raises ``InputRejected`` (the edge dead-letters it).
"""

from __future__ import annotations

from collections.abc import Mapping

from pairjudge.agents.errors import InputRejected
from pairjudge.agents.injection import Finding, detect
from pairjudge.agents.policy import Policy
from pairjudge.schemas.events import InjectionFlag
from pairjudge.schemas.pair import CandidatePair
from pairjudge.schemas.rubric import InlineRubric, RubricRef

__all__ = ["check_pair", "resolve_rubric", "scan_for_injection", "snapshot_pair"]


def resolve_rubric(pair: CandidatePair, catalog: Mapping[str, InlineRubric]) -> InlineRubric:
    """The pair's inline rubric, or the catalog's rubric of that name."""
    rubric = pair.rubric
    if not isinstance(rubric, RubricRef):
        return rubric
    try:
        return catalog[rubric.name]
    except KeyError:
        known = ", ".join(sorted(catalog)) or "none"
        raise InputRejected(
            "unknown_rubric", f"rubric {rubric.name!r} is not in the catalog (known: {known})"
        ) from None


def _check_text(what: str, text: str, limit: int, reason: str, *, may_be_empty: bool = False) -> None:
    if not may_be_empty and not text.strip():
        raise InputRejected(f"empty_{reason}", f"{what} is empty or only whitespace")
    if len(text) > limit:
        raise InputRejected(f"oversized_{reason}", f"{what} has {len(text)} characters; the limit is {limit}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates cannot be sent to any judge as UTF-8; reject the pair rather than mangle it.
        raise InputRejected("malformed_text", f"{what} is not valid Unicode text (lone surrogate)") from None


def check_pair(pair: CandidatePair, policy: Policy, catalog: Mapping[str, InlineRubric]) -> InlineRubric:
    """Check that ``pair`` can be judged (docs/design.md §2.1) and return its rubric; raise ``InputRejected``.

    Reasons: ``unknown_rubric``, ``oversized_output``, ``empty_prompt``,
    ``oversized_prompt``, ``oversized_context``, ``malformed_text``. Details name the candidate id and
    sizes, never the text itself. Every rubric's template needs the task (the tie-break shows it even
    when the primary template does not), so a blank task prompt is rejected for all kinds.

    A conversation (schema version 2) is bounded as a whole, because the judge is shown all of it:
    ``max_prompt_chars`` for every turn of the task's messages together, ``max_output_chars`` for each
    candidate's whole transcript (its turns and its output together).
    """
    rubric = resolve_rubric(pair, catalog)
    for candidate in pair.candidates:
        # An empty output is an ordinary (losing) answer, settled by ``agents.settle``, not an error.
        what = f"candidate {candidate.candidate_id!r} output"
        _check_text(what, candidate.output, policy.max_output_chars, "output", may_be_empty=True)
    _check_text("task prompt", pair.task.question, policy.max_prompt_chars, "prompt")
    _check_conversation(pair, policy)
    if pair.task.context is not None:
        _check_text("task context", pair.task.context, policy.max_prompt_chars, "context", may_be_empty=True)
    return rubric


def _check_conversation(pair: CandidatePair, policy: Policy) -> None:
    """The turns of a conversation: each one valid text, and each whole within its limit (``check_pair``)."""
    messages = pair.task.messages
    for number, message in enumerate(messages[:-1], start=1):
        # An earlier turn may be empty (a user who sent nothing); the last one is the question, checked above.
        _check_text(
            f"task turn {number} ({message.role})",
            message.content,
            policy.max_prompt_chars,
            "prompt",
            may_be_empty=True,
        )
    total = sum(len(m.content) for m in messages)
    if total > policy.max_prompt_chars:
        raise InputRejected(
            "oversized_prompt",
            f"the task's conversation has {total} characters in {len(messages)} turns; the limit "
            f"(max_prompt_chars, for all turns together) is {policy.max_prompt_chars}",
        )
    for candidate in pair.candidates:
        if not candidate.turns:
            continue
        for number, turn in enumerate(candidate.turns, start=1):
            what = f"candidate {candidate.candidate_id!r} turn {number}"
            _check_text(what, turn, policy.max_output_chars, "output", may_be_empty=True)
        size = len(candidate.output) + sum(len(t) for t in candidate.turns)
        if size > policy.max_output_chars:
            raise InputRejected(
                "oversized_output",
                f"candidate {candidate.candidate_id!r} transcript has {size} characters in {len(candidate.turns) + 1} "
                f"replies; the limit (max_output_chars, for a whole transcript) is {policy.max_output_chars}",
            )


def snapshot_pair(pair: CandidatePair, rubric: InlineRubric) -> CandidatePair:
    """``pair`` carrying the inline rubric it was judged against.

    A pair that named a catalog rubric is forwarded to tie-break and review with the rubric itself, so
    later stages and human reviewers see what the judge saw even if the catalog changes meanwhile.
    """
    # ``is`` first: an inline rubric is the pair's own object, and comparing models field by field is not free.
    return pair if pair.rubric is rubric or pair.rubric == rubric else pair.model_copy(update={"rubric": rubric})


def scan_for_injection(pair: CandidatePair) -> tuple[InjectionFlag, ...]:
    """What ``agents.injection`` finds in each output, each candidate's earlier turns, and the turns of the
    task's conversation before its last user turn: text aimed at the judge. A hostile instruction in a
    turn of the conversation is the indirect case: the judge is shown every turn. The last user turn is
    the question, read like a single prompt (which is not scanned)."""
    scanned: dict[str, tuple[Finding, ...]] = {}

    def findings(text: str) -> tuple[Finding, ...]:
        # A text met twice in one pair (identical outputs, a turn repeated) is read once.
        found = scanned.get(text)
        if found is None:
            found = scanned[text] = detect(text)
        return found

    flags = [
        InjectionFlag(candidate_id=None, rule=f.rule, excerpt=f.excerpt, where=f"task turn {number} ({m.role})")
        for number, m in enumerate(pair.task.history, start=1)
        for f in findings(m.content)
    ]
    for c in pair.candidates:
        texts = [*((f"turn {n}", t) for n, t in enumerate(c.turns, start=1)), ("output", c.output)]
        flags += (
            InjectionFlag(candidate_id=c.candidate_id, rule=f.rule, excerpt=f.excerpt, where=where)
            for where, text in texts
            for f in findings(text)
        )
    return tuple(flags)
