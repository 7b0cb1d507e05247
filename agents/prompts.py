"""Judge requests (docs/design.md §2.2, seeds 000-003): the first ask of each ordering, the re-asks, and the
template hash every verdict carries.

* **Two messages.** A fixed *system* message (the harness note: delimited text is data, not instructions;
  answer with the JSON object only) and one *user* message holding the seed template filled by
  ``agents.prompt_fill`` (what the judge sees of a pair, and why, is described there).
* **Re-asks** (:func:`reask`, :func:`forced_choice`) are built on the same base request, never on the
  previous re-ask, so a prompt stays bounded and keeps its cacheable prefix.

The prompt depends only on :class:`~agents.prompt_slots.PromptSlots` (plus the kind); the request carries
the slots it shows (``JudgeRequest.slots``), which the offline judge scores instead of reading the prose.

Kept together on purpose: the request builders that add fixed text (the re-ask and forced-choice
instructions, here) and :func:`template_hash`, which must cover every text a judge can be sent: the
templates and the renderers' fillings (``agents.prompt_fill.FILLINGS``), these instructions, and the
conversation blocks (``agents.prompt_blocks``, via :data:`FORM_FILLINGS` and ``RISK_LINE``). What holds no
fixed text lives beside it: the slots and their nonce (``agents.prompt_slots``), the structured-output schema
(``agents.response_schemas``, re-exported here).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

from pairjudge.agents.judge import ChatMessage, JudgeRequest, TemplateKind
from pairjudge.agents.orderings import shown
from pairjudge.agents.prompt_blocks import (
    HISTORY_INTRO,
    QUESTION_INTRO,
    RISK_LINE,
    TRANSCRIPT_INTRO,
    TRANSCRIPT_NOTE,
    PromptForm,
)
from pairjudge.agents.prompt_fill import (
    FILLINGS,
    RENDERERS,
    TOOL_FILLINGS,
    system_prompt,
    template_file,
    template_text,
)
from pairjudge.agents.prompt_slots import PromptSlots as PromptSlots  # re-exported: tests build slots from here
from pairjudge.agents.prompt_slots import visible_slots
from pairjudge.agents.response_schemas import SCHEMA_NAMES as SCHEMA_NAMES  # re-exported: fake judges use it
from pairjudge.agents.response_schemas import response_schema as response_schema  # re-exported for tests
from pairjudge.agents.tool_views import call_view, definition_view, message_views
from pairjudge.agents.untrusted import neutralise as neutralise  # re-exported: tests and callers escape with it
from pairjudge.schemas.events import Order
from pairjudge.schemas.pair import CandidatePair
from pairjudge.schemas.rubric import (
    InlineRubric,
    RubricRef,
    TieBreakWeights,
)

#: Sent after the judge's invalid reply on a re-ask (docs/design.md §2.4).
REASK_INSTRUCTION: Final = template_file("reask.txt")
#: Sent once per tie-break ordering when a valid reply still did not settle the tie (seed 002).
FORCED_CHOICE_INSTRUCTION: Final = template_file("forced_choice.txt")

#: How much of an invalid reply is echoed back on a re-ask; a rambling reply must not grow the prompt unboundedly.
MAX_ECHO_CHARS: Final = 8_000

#: The fixed texts each conversation form adds (``agents.prompt_blocks``), hashed only for that form.
FORM_FILLINGS: Final[Mapping[PromptForm, tuple[str, ...]]] = MappingProxyType(
    {"prompt": (), "reply": (HISTORY_INTRO, QUESTION_INTRO), "transcript": (TRANSCRIPT_INTRO, TRANSCRIPT_NOTE)}
)
#: The template kinds that state a pair's risk level (the tie-break does not: seed 002 has no stakes).
RISK_KINDS: Final = frozenset({"tone_style", "head_to_head", "pairwise"})


def template_parts(
    kind: TemplateKind, form: PromptForm = "prompt", *, risk: bool = False, datamark: bool = False, tools: bool = False
) -> tuple[str, ...]:
    """Every fixed text a judge can be shown for ``kind``: the first ask (:func:`template_text`), the
    fillings put around inserted text, the re-ask instruction and, for the tie-break, the
    forced-choice instruction (only it sends one). A conversation ``form`` adds its fillings, and
    ``risk`` the risk line (for the kinds that show it), after these: a single prompt without a risk
    level hashes exactly as before schema version 2. ``datamark`` puts the datamarking note in the first
    ask's system message (and so in the hash): marked prompts are their own drift series. ``tools`` adds
    the texts a prompt that shows tools carries (schema version 3), last: a pair without tools hashes as before."""
    parts: tuple[str, ...] = (template_text(kind, datamark), *FILLINGS, REASK_INSTRUCTION)
    if kind == "tiebreak":
        parts = (*parts, FORCED_CHOICE_INSTRUCTION)
    parts = (*parts, *FORM_FILLINGS[form])
    parts = (*parts, RISK_LINE) if risk and kind in RISK_KINDS else parts
    return (*parts, *TOOL_FILLINGS) if tools else parts


def prompt_form(pair: CandidatePair) -> PromptForm:
    """Which form ``pair``'s prompts take: a transcript, a reply to a conversation, or a single prompt (a
    conversation of one user turn shows exactly what a prompt does)."""
    if pair.is_transcript:
        return "transcript"
    return "reply" if pair.task.history or pair.task.after_question else "prompt"


def pair_template_hash(kind: TemplateKind, pair: CandidatePair, *, datamark: bool = False) -> str:
    """:func:`template_hash` of what ``pair``'s prompts of ``kind`` can show (its form, its risk line, the marking)."""
    return template_hash(
        kind, prompt_form(pair), risk=pair.risk_level is not None, datamark=datamark, tools=pair.uses_tools
    )


def template_hash(
    kind: TemplateKind, form: PromptForm = "prompt", *, risk: bool = False, datamark: bool = False, tools: bool = False
) -> str:
    """First 16 hex chars of sha256 over :func:`template_parts`, each length-prefixed. Carried on every
    verdict, so any change to what the judge can be told, re-asks included, opens a new drift series
    (and each conversation form, and a prompt that states the risk level, is its own series)."""
    return _parts_hash(template_parts(kind, form, risk=risk, datamark=datamark, tools=tools))


# Keyed by the texts themselves, not by the arguments: a few dozen combinations of fixed texts, each
# hashed once, and a text changed at run time (as the tests do) is a new key, never a stale hash.
@functools.lru_cache(maxsize=64)
def _parts_hash(parts: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:16]


# --- requests ---------------------------------------------------------------------------------


def slots_for(
    pair: CandidatePair,
    order: Order,
    rubric: InlineRubric | None,
    tiebreak: TieBreakWeights | None = None,
    *,
    datamark: bool = False,
) -> PromptSlots:
    """What the judge may see of ``pair`` in ``order`` (placed by ``agents.orderings.shown``): texts and
    rubric only, no metadata (``agents.prompt_slots``)."""
    a, b = shown(pair, order)
    return PromptSlots(
        output_a=a.output,
        output_b=b.output,
        task_prompt=pair.task.question,
        task_context=pair.task.context,
        rubric=rubric,
        tiebreak=tiebreak,
        # A transcript's history is the task's user (and system) turns; the replies follow the order, so
        # swapping the order swaps whole transcripts.
        history=tuple(turn for m in pair.task.history for turn in message_views(m)),
        transcript=pair.is_transcript,
        replies_a=a.turns,
        replies_b=b.turns,
        risk_level=pair.risk_level,
        datamark=datamark,
        # Tools (schema version 3) as data, one JSON line each (agents.tool_views); a candidate's calls
        # follow the order like its text.
        calls_a=tuple(call_view(c) for c in a.tool_calls),
        calls_b=tuple(call_view(c) for c in b.tool_calls),
        tools=tuple(definition_view(t) for t in pair.task.tools),
        after=tuple(turn for m in pair.task.after_question for turn in message_views(m)),
    )


def shown_slots(kind: TemplateKind, slots: PromptSlots) -> PromptSlots:
    """``slots`` as far as ``kind``'s prompt shows them, so a judge given the slots sees no text a model is not
    shown: seed 000 shows a single prompt's task nowhere, seed 002 no risk level (:data:`RISK_KINDS`)."""
    if kind == "tone_style" and slots.form == "prompt":
        slots = dataclasses.replace(slots, task_prompt="", task_context=None)
    return slots if kind in RISK_KINDS or slots.risk_level is None else dataclasses.replace(slots, risk_level=None)


def render(kind: TemplateKind, slots: PromptSlots, order: Order = "AB", *, fresh: bool = False) -> JudgeRequest:
    """The first ask for one ordering: system note + the filled seed template, and the slots it shows
    (:func:`shown_slots`). ``order`` only labels the request (which candidate the slots put at A); the
    prompt never depends on it. ``fresh`` asks for the judge's own reply, never a cached one
    (``JudgeRequest.fresh``)."""
    slots = visible_slots(slots)
    return JudgeRequest(
        template=kind,
        messages=(ChatMessage("system", system_prompt(slots.datamark)), ChatMessage("user", RENDERERS[kind](slots))),
        response_schema=response_schema(kind, slots),
        schema_name=SCHEMA_NAMES[kind],
        order=order,
        fresh=fresh,
        slots=shown_slots(kind, slots),
    )


def needs_fresh_reply(pair: CandidatePair) -> bool:
    """Whether ``pair``'s judge calls must reach the judge whatever a response cache holds: canary pairs
    (seed 000). Every canary round sends the same prompts again to see how the judge answers *now*; a
    cached reply would hide a model that changed behind its name."""
    return pair.metadata.traffic == "canary"


def render_primary(pair: CandidatePair, rubric: InlineRubric, order: Order, *, datamark: bool = False) -> JudgeRequest:
    """The primary-stage request for ``pair`` in ``order``, with the rubric's own seed template (its untrusted
    texts datamarked when ``datamark``: ``agents.core`` passes ``Policy.datamark``)."""
    slots = slots_for(pair, order, rubric, datamark=datamark)
    return render(rubric.kind, slots, order, fresh=needs_fresh_reply(pair))


def render_tiebreak(
    pair: CandidatePair, weights: TieBreakWeights, order: Order, *, datamark: bool = False
) -> JudgeRequest:
    """The seed 002 tie-break request for ``pair`` in ``order`` (datamarked like :func:`render_primary`)."""
    rubric = None if isinstance(pair.rubric, RubricRef) else pair.rubric
    slots = slots_for(pair, order, rubric, weights, datamark=datamark)
    return render("tiebreak", slots, order, fresh=needs_fresh_reply(pair))


def _echo(previous_reply: str) -> str:
    if not previous_reply.strip():
        return "(empty reply)"  # some chat APIs reject an empty assistant message
    if len(previous_reply) > MAX_ECHO_CHARS:
        return previous_reply[:MAX_ECHO_CHARS] + "\n[... reply truncated by the harness ...]"
    return previous_reply


def reask(request: JudgeRequest, previous_reply: str, error: str, *, attempt: int) -> JudgeRequest:
    """``request`` plus the judge's invalid reply (as the assistant) and the validation error.

    Always built on the same base request rather than on the previous re-ask, so the prompt stays
    bounded and keeps its cacheable prefix.
    """
    return dataclasses.replace(
        request,
        messages=(
            *request.messages,
            ChatMessage("assistant", _echo(previous_reply)),
            ChatMessage("user", REASK_INSTRUCTION.format(error=error)),
        ),
        attempt=attempt,
    )


def forced_choice(request: JudgeRequest, previous_reply: str, problems: Sequence[str], *, attempt: int) -> JudgeRequest:
    """Seed 002's re-ask: the judge's unsettled reply plus an explicit instruction to choose A or B."""
    return dataclasses.replace(
        request,
        messages=(
            *request.messages,
            ChatMessage("assistant", _echo(previous_reply)),
            ChatMessage("user", FORCED_CHOICE_INSTRUCTION.format(problems="; ".join(problems))),
        ),
        attempt=attempt,
        forced_choice=True,
    )
