"""The input checks of the judging core's first step (docs/design.md §2.1): is the pair judgeable, which
rubric it is judged against, and what the injection rules find in it. ``agents.core`` runs them before any
judge call (``judge_pair``, ``capped_decision``).

Pure: no I/O. A pair that cannot be judged raises ``InputRejected`` (the edge dead-letters it).
"""

from __future__ import annotations

from collections.abc import Mapping

from pairjudge.agents.errors import InputRejected
from pairjudge.agents.injection import Finding, detect
from pairjudge.agents.invisible import is_blank
from pairjudge.agents.policy import Policy
from pairjudge.agents.tool_views import call_view, definition_view, reply_length
from pairjudge.schemas.events import InjectionFlag
from pairjudge.schemas.messages import Message, ToolCall
from pairjudge.schemas.pair import Candidate, CandidatePair
from pairjudge.schemas.rubric import InlineRubric, RubricRef

__all__ = ["candidate_texts", "check_pair", "resolve_rubric", "scan_for_injection", "snapshot_pair", "task_texts"]


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

    Tools (schema version 3) are bounded as the judge is shown them (``agents.tool_views``): a reply's text
    and its calls together within ``max_output_chars``; tool calls and results count with the turns they
    are in, and the tools offered with the task, within ``max_prompt_chars``. In a pair with tools a reply of
    hidden characters only and no call is rejected (``empty_output``): it is no answer, and must not be judged
    as an empty one.
    """
    rubric = resolve_rubric(pair, catalog)
    for candidate in pair.candidates:
        # An empty output is an ordinary (losing) answer, settled by ``agents.settle``, not an error.
        what = f"candidate {candidate.candidate_id!r} output"
        _check_text(what, candidate.output, policy.max_output_chars, "output", may_be_empty=True)
        if candidate.tool_calls:
            _check_calls(what, candidate.output, candidate.tool_calls, policy.max_output_chars)
        elif pair.uses_tools and is_blank(candidate.output):
            raise InputRejected(
                "empty_output", f"{what} shows nothing and makes no tool call: in a pair with tools that is no reply"
            )
    _check_text("task prompt", pair.task.question, policy.max_prompt_chars, "prompt")
    _check_conversation(pair, policy)
    if pair.task.context is not None:
        _check_text("task context", pair.task.context, policy.max_prompt_chars, "context", may_be_empty=True)
    if pair.task.tools:
        tools = "\n".join(definition_view(t) for t in pair.task.tools)
        _check_text("the task's tools", tools, policy.max_prompt_chars, "prompt")
    return rubric


def _check_calls(what: str, output: str, calls: tuple[ToolCall, ...], limit: int) -> None:
    """A reply's tool calls: valid text, and the reply (text and calls as shown) within the output limit."""
    for number, call in enumerate(calls, start=1):
        _check_text(f"{what} tool call {number}", call.function.arguments, limit, "output", may_be_empty=True)
    size = reply_length(output, calls)
    if size > limit:
        raise InputRejected(
            "oversized_output",
            f"{what} has {size} characters with its {len(calls)} tool calls; the limit (max_output_chars, for the "
            f"text and the calls together) is {limit}",
        )


def _check_conversation(pair: CandidatePair, policy: Policy) -> None:
    """The turns of a conversation: each one valid text, and each whole within its limit (``check_pair``)."""
    messages = pair.task.messages
    for number, message in enumerate(messages, start=1):
        # An earlier turn may be empty (a user who sent nothing); the question was checked above.
        what = f"task turn {number} ({message.role})"
        _check_text(what, message.content, policy.max_prompt_chars, "prompt", may_be_empty=True)
        for call in message.tool_calls:
            _check_text(
                f"{what} tool call", call.function.arguments, policy.max_prompt_chars, "prompt", may_be_empty=True
            )
    # Tool calls count as the judge is shown them (agents.tool_views); a plain turn as its text, as before.
    total = sum(len(m.content) + sum(len(call_view(c, with_id=True)) for c in m.tool_calls) for m in messages)
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


def task_texts(pair: CandidatePair) -> list[tuple[str, str]]:
    """(where, text) for every turn of the task's conversation but the question, as ``scan_for_injection``
    and the screen read them: a turn's text, each tool call (as the judge sees it, ``agents.tool_views``:
    escapes in the arguments decoded) and each tool result, numbered as the turns are."""
    texts: list[tuple[str, str]] = []
    question = len(pair.task.history) + 1
    for number, m in enumerate(pair.task.messages, start=1):
        if number == question:
            continue
        texts += _message_texts(f"task turn {number} ({m.role})", m)
    return texts


def _message_texts(where: str, m: Message) -> list[tuple[str, str]]:
    texts = [(where, m.content)] if m.content or not m.tool_calls else []
    return texts + [(f"{where} tool call {n}", call_view(c)) for n, c in enumerate(m.tool_calls, start=1)]


def candidate_texts(candidate: Candidate) -> list[tuple[str, str]]:
    """(where, text) for a candidate's earlier turns, its output, and each of its tool calls (as shown)."""
    texts = [*((f"turn {n}", t) for n, t in enumerate(candidate.turns, start=1)), ("output", candidate.output)]
    return texts + [(f"tool call {n}", call_view(c)) for n, c in enumerate(candidate.tool_calls, start=1)]


def scan_for_injection(pair: CandidatePair) -> tuple[InjectionFlag, ...]:
    """What ``agents.injection`` finds in each output, each candidate's earlier turns, and the turns of the
    task's conversation before its last user turn: text aimed at the judge. A hostile instruction in a
    turn of the conversation is the indirect case: the judge is shown every turn. The last user turn is
    the question, read like a single prompt (which is not scanned). Tool calls (a candidate's, and the
    conversation's) and tool results are read as the judge is shown them (``candidate_texts``,
    ``task_texts``)."""
    scanned: dict[str, tuple[Finding, ...]] = {}

    def findings(text: str) -> tuple[Finding, ...]:
        # A text met twice in one pair (identical outputs, a turn repeated) is read once.
        found = scanned.get(text)
        if found is None:
            found = scanned[text] = detect(text)
        return found

    flags = [
        InjectionFlag(candidate_id=None, rule=f.rule, excerpt=f.excerpt, where=where)
        for where, text in task_texts(pair)
        for f in findings(text)
    ]
    for c in pair.candidates:
        texts = candidate_texts(c)
        flags += (
            InjectionFlag(candidate_id=c.candidate_id, rule=f.rule, excerpt=f.excerpt, where=where)
            for where, text in texts
            for f in findings(text)
        )
    return tuple(flags)
