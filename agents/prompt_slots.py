"""What a judge's prompt shows: :class:`PromptSlots`, and its delimiter nonce.

``agents.prompts`` fills the slots from a pair in one ordering (``slots_for``), renders a template from
them alone, and hands them to the judge with the rendered messages (``JudgeRequest.slots``): a model
reads the messages, the offline judge scores the slots, and both are given the same texts. Kept apart
from the renderers because it holds no fixed text a judge is shown (nothing here needs hashing with the
templates, ``agents.prompts.template_parts``), and so the ``Judge`` port can name the type without
importing the renderers:

* **Slots, not pairs.** The slots hold the texts and the rubric only, placed by ``agents.orderings.shown``:
  never the candidate ids, source model, version, prompt version or role, nor the pair's metadata.
* **Hidden characters removed up front.** :func:`visible_slots` strips them (``agents.untrusted``), so a
  context of nothing but zero-width characters is no context, and the slots a judge gets hold exactly the
  texts its prompt shows.
* **The delimiter nonce** (:func:`slots_nonce`) is derived from every text the slots show: deterministic,
  so the prompt and any response cache stay stable, yet unguessable by an output.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

from pairjudge.agents.prompt_blocks import PromptForm, Turn, conversation_nonce, interleave
from pairjudge.agents.untrusted import neutralise, strip_hidden
from pairjudge.schemas.pair import RiskLevel
from pairjudge.schemas.rubric import HeadToHeadRubric, PairwiseRubric, TieBreakWeights, ToneStyleRubric

__all__ = ["PromptSlots", "delimiter_nonce", "slots_nonce", "tools_nonce", "visible_slots"]


@dataclass(frozen=True, slots=True)
class PromptSlots:
    """Everything a rendered prompt shows, in the positions shown: ``agents.prompts.render`` fills a template
    from it, and the request carries it to the judge (``JudgeRequest.slots``).

    Model-identifying metadata never gets here. ``rubric`` is the pair's own rubric (for the
    tie-break, the primary rubric it shows as context; None when the pair names a catalog rubric).

    A conversation: ``task_prompt`` is its last user turn and ``output_a``/``output_b`` the replies to
    it; ``history`` holds the turns before it. In a ``transcript`` comparison the history holds the user
    (and system) turns only, and ``replies_a``/``replies_b`` each candidate's replies to the earlier user
    turns (:func:`agents.prompt_blocks.interleave` puts them together).
    """

    output_a: str
    output_b: str
    task_prompt: str
    task_context: str | None
    rubric: ToneStyleRubric | HeadToHeadRubric | PairwiseRubric | None
    tiebreak: TieBreakWeights | None = None
    history: tuple[Turn, ...] = ()
    transcript: bool = False
    replies_a: tuple[str, ...] = ()
    replies_b: tuple[str, ...] = ()
    risk_level: RiskLevel | None = None
    #: Datamark every untrusted text the prompt shows (``agents.untrusted.datamark``; ``Policy.datamark``):
    #: outputs, turns, the task and its context, with the system note that says what the mark means.
    datamark: bool = False
    #: Tools (schema version 3; ``agents.tool_views`` makes each text one line of JSON): each output's tool
    #: calls, the tools offered, and the calls and results after the last user turn (``task_prompt``).
    calls_a: tuple[str, ...] = ()
    calls_b: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    after: tuple[Turn, ...] = ()

    @property
    def has_tools(self) -> bool:
        """Whether the prompt shows anything of tools: then it carries the tool notes (and their hash)."""
        return bool(
            self.calls_a
            or self.calls_b
            or self.tools
            or self.after
            or any(role in ("tool", "tool_call") for role, _ in self.history)
        )

    @property
    def form(self) -> PromptForm:
        if self.transcript:
            return "transcript"
        return "reply" if self.history or self.after else "prompt"

    def transcripts(self) -> tuple[tuple[Turn, ...], tuple[Turn, ...]]:
        """Both candidates' whole conversations, as their output slots show them (transcript form)."""
        return (
            interleave(self.history, self.replies_a, self.task_prompt, self.output_a),
            interleave(self.history, self.replies_b, self.task_prompt, self.output_b),
        )


def visible_slots(slots: PromptSlots) -> PromptSlots:
    """The slots with hidden characters removed (``agents.untrusted``), up front: a context of nothing but
    zero-width characters is no context, and the slots a judge gets hold the texts as its prompt shows them."""
    texts = (
        slots.output_a,
        slots.output_b,
        slots.task_prompt,
        slots.task_context or "",
        *(text for _, text in slots.history),
        *slots.replies_a,
        *slots.replies_b,
        *slots.calls_a,
        *slots.calls_b,
        *slots.tools,
        *(text for _, text in slots.after),
    )
    if all(t.isascii() for t in texts):
        return slots
    return dataclasses.replace(
        slots,
        output_a=strip_hidden(slots.output_a),
        output_b=strip_hidden(slots.output_b),
        task_prompt=strip_hidden(slots.task_prompt),
        task_context=strip_hidden(slots.task_context or "") or None,
        history=tuple((role, strip_hidden(text)) for role, text in slots.history),
        replies_a=tuple(strip_hidden(t) for t in slots.replies_a),
        replies_b=tuple(strip_hidden(t) for t in slots.replies_b),
        calls_a=tuple(strip_hidden(t) for t in slots.calls_a),
        calls_b=tuple(strip_hidden(t) for t in slots.calls_b),
        tools=tuple(strip_hidden(t) for t in slots.tools),
        after=tuple((role, strip_hidden(text)) for role, text in slots.after),
    )


def delimiter_nonce(output_a: str, output_b: str) -> str:
    """A nonce derived from both shown outputs: deterministic, so the prompt and any response cache stay
    stable, yet unguessable by an output, which would have to contain a hash of itself. Length-prefixed
    so (a, b) is unambiguous. Every delimiter of one prompt carries it, the task's and context's too."""
    digest = hashlib.sha256(b"pairjudge-delimiter-v2")
    for text in (output_a, output_b):
        data = neutralise(text).encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:16]


def slots_nonce(slots: PromptSlots) -> str:
    """The nonce every delimiter of the slots' prompt carries: :func:`delimiter_nonce` for a single prompt,
    ``agents.prompt_blocks.conversation_nonce`` (over the history and replies too) for a conversation."""
    if slots.has_tools:
        return tools_nonce(slots)
    if slots.form == "prompt":
        return delimiter_nonce(slots.output_a, slots.output_b)
    return conversation_nonce(slots.output_a, slots.output_b, slots.history, (slots.replies_a, slots.replies_b))


def tools_nonce(slots: PromptSlots) -> str:
    """The nonce of a prompt that shows tools: like :func:`delimiter_nonce`, over every text its delimited
    blocks show (outputs, calls, turns, tools), each with its section, so no call can carry the nonce of the
    prompt it ends up in. Pairs without tools keep their own nonces (and so their prompts, byte for byte)."""
    digest = hashlib.sha256(b"pairjudge-delimiter-tools-v1")
    texts = [
        f"a:{slots.output_a}",
        f"b:{slots.output_b}",
        *(f"{role}:{text}" for role, text in slots.history),
        *(f"after {role}:{text}" for role, text in slots.after),
        *(f"a call:{text}" for text in slots.calls_a),
        *(f"b call:{text}" for text in slots.calls_b),
        *(f"tool:{text}" for text in slots.tools),
        *(f"a:{text}" for text in slots.replies_a),
        *(f"b:{text}" for text in slots.replies_b),
    ]
    for text in texts:
        data = neutralise(text).encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()[:16]
