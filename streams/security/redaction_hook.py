"""The redaction hook at the edge: dead letters and review requests, redacted before they are published.

Off by default (``PAIRJUDGE_REDACTION__ENABLED``). When on, the worker passes

* every dead letter's original bytes (and its error detail) through the redactor, and marks the letter
  ``original_redacted=true``: it no longer holds the exact bytes that were sent, so it cannot be
  replayed as it is; ``original_size`` and ``original_sha256`` still describe the event as received;
* every review request's task (prompt and context, or every turn of its conversation), both outputs and
  each candidate's earlier turns (a transcript), and the judge's justifications,
  key differentiators and error texts (they quote the outputs), and marks it ``redacted=true``.

The detectors are pure (``agents.redaction``); the hook, ``module:function``, is imported here. The
redactor fails closed: if the hook raises or returns something other than a string, the whole text
becomes ``[redacted:hook_failed]`` (logged with the error's type only, never the text).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Final

from pairjudge.agents.redaction import Hook, Redactor, builtin_detectors, custom_detector, placeholder
from pairjudge.schemas import ReviewRequest, ToolCall
from pairjudge.schemas.events import OrderingResult

if TYPE_CHECKING:  # the settings' shape only: security sits below the settings (pyproject's layer contract)
    from pairjudge.streams.config.settings import RedactionSettings

log = logging.getLogger(__name__)

HOOK_FAILED: Final = placeholder("hook_failed")


def load_hook(spec: str) -> Hook:
    """The callable named by ``module:function``; ``ValueError`` naming the setting when it is not one."""
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
        hook = getattr(module, attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"PAIRJUDGE_REDACTION__HOOK: cannot load {spec}: {type(exc).__name__}: {exc}") from None
    if not callable(hook):
        raise ValueError(f"PAIRJUDGE_REDACTION__HOOK: {spec} is not callable")
    checked: Hook = hook
    return checked


def build_redactor(settings: RedactionSettings) -> EventRedactor | None:
    """The configured redactor, or None when redaction is off."""
    if not settings.enabled:
        return None
    # Names and regexes were checked when the settings were read (RedactionSettings).
    builtins = builtin_detectors(settings.pattern_names())
    detectors = [*builtins, *(custom_detector(n, r) for n, r in settings.custom.items())]
    hook = load_hook(settings.hook) if settings.hook else None
    return EventRedactor(Redactor(detectors, hook))


class EventRedactor:
    """Redacts the texts of the events that leave the worker for people: dead letters, review requests."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self.failures = 0

    def text(self, text: str) -> str:
        """``text`` redacted; ``[redacted:hook_failed]`` when the redactor fails (fail closed)."""
        try:
            return self._redactor.redact(text)
        except Exception as exc:  # noqa: BLE001 - a hook's bug must not publish what it was meant to hide
            self.failures += 1
            log.error("redaction failed (%s); the whole text was withheld", type(exc).__name__)
            return HOOK_FAILED

    def raw(self, raw: bytes) -> bytes:
        """Bytes redacted as UTF-8 text; bytes that are not UTF-8 pass through unchanged around the matches."""
        return self.text(raw.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def _calls(self, calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
        """Tool calls with their arguments redacted as text (a placeholder has no quote, so JSON stays JSON)."""
        redacted = ((c, c.function.model_copy(update={"arguments": self.text(c.function.arguments)})) for c in calls)
        return tuple(c.model_copy(update={"function": function}) for c, function in redacted)

    def review_request(self, request: ReviewRequest) -> ReviewRequest:
        """``request`` with its task (every turn), outputs (every turn) and judge texts redacted, marked
        ``redacted=True``."""
        pair = request.pair
        text, optional = self.text, self._optional
        # Every turn of a conversation, system turns included: any of them may quote a person. So may a tool's
        # result and a call's arguments (schema version 3): an order lookup returns a customer's address.
        messages = tuple(
            m.model_copy(update={"content": text(m.content), "tool_calls": self._calls(m.tool_calls)})
            for m in pair.task.messages
        )
        asked = len(pair.task.history)  # the last user turn: the candidates reply to it (or to tools after it)
        if messages and not messages[asked].content:
            # The last user turn must not be empty (Task): a redaction that removes all of it says so.
            emptied = messages[asked].model_copy(update={"content": placeholder("empty")})
            messages = (*messages[:asked], emptied, *messages[asked + 1 :])
        described = (
            (t, t.function.model_copy(update={"description": text(t.function.description)})) for t in pair.task.tools
        )
        tools = tuple(t.model_copy(update={"function": function}) for t, function in described)
        task = pair.task.model_copy(
            update={
                "prompt": None if pair.task.prompt is None else text(pair.task.prompt) or placeholder("empty"),
                "context": optional(pair.task.context),
                "messages": messages,
                "tools": tools,
            }
        )
        candidates = tuple(
            c.model_copy(
                update={
                    # In a pair with tools a reply without text needs its calls (CandidatePair): a text the
                    # redactor removed whole says so, like the task's.
                    "output": text(c.output) or (placeholder("empty") if c.output and pair.uses_tools else ""),
                    "turns": tuple(text(t) for t in c.turns),
                    "tool_calls": self._calls(c.tool_calls),
                }
            )
            for c in pair.candidates
        )
        update: dict[str, object] = {"task": task, "candidates": candidates}
        if pair.human_label is not None:
            update["human_label"] = pair.human_label.model_copy(update={"rationale": text(pair.human_label.rationale)})
        return request.model_copy(
            update={
                "pair": pair.model_copy(update=update),
                "orderings": tuple(self._ordering(o) for o in request.orderings),
                "last_justification": optional(request.last_justification),
                # The injection detector's excerpts quote the outputs too.
                "injection": tuple(f.model_copy(update={"excerpt": text(f.excerpt)[:80]}) for f in request.injection),
                "redacted": True,
            }
        )

    def _optional(self, value: str | None) -> str | None:
        return None if value is None else self.text(value)

    def _ordering(self, ordering: OrderingResult) -> OrderingResult:
        return ordering.model_copy(
            update={
                "justification": self._optional(ordering.justification),
                "key_differentiators": tuple(self.text(k) for k in ordering.key_differentiators),
                "error": self._optional(ordering.error),
            }
        )
