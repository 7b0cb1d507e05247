"""The shadow stage's pure part: which experiments a capture joins, what the challenger is asked, what its reply
is worth, and the pair the two replies make (docs/guides/production-traffic.md).

No I/O: the stage (``streams.shadow``) sends the request this module builds and hands the reply's body back.

* ``joins``: the experiments a capture matches and is drawn into, in file order. The draw hashes the capture id
  with the experiment id, so a redelivered capture makes the same choice and two experiments draw independently.
* ``set_aside``: why the judge cannot see a capture whole (an image or audio part, a provider's built-in tool,
  context stored at the provider, a conversation that does not end on the user's or a tool's turn), or None.
* ``challenger_request``: the capture's request, as an OpenAI chat completions body, for the challenger's model,
  its system prompt and parameters. The champion's reply is never in it; the challenger's tool calls are never run.
* ``read_reply``: the challenger's reply, or ``Unusable`` (refused, filtered, empty, not a chat completion): those
  are retried and then dead-lettered, never made into a pair the challenger would lose for an empty answer.
* ``cut_off``: one side's reply stopped by its token limit and the other not: compared, the cut one would lose
  for its length, so the pair is set aside.
* ``build_pair``: the ``CandidatePair``; its id derives from (capture id, experiment) alone (``shadow_pair_id``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from pairjudge.agents.sampling import audit_fraction
from pairjudge.schemas.captures import Capture, CapturedMessage, CapturedToolCall, FinishReason
from pairjudge.schemas.experiments import Experiment, Selector
from pairjudge.schemas.messages import FunctionCall, Message, ToolCall, ToolDefinition
from pairjudge.schemas.pair import Candidate, CandidatePair, CandidateSource, PairMetadata, Task

__all__ = [
    "CHALLENGER_ID",
    "CHAMPION_ID",
    "ChallengerReply",
    "SetAside",
    "Unusable",
    "admits",
    "build_pair",
    "challenger_request",
    "cut_off",
    "drawn",
    "joins",
    "matches",
    "read_reply",
    "set_aside",
    "shadow_pair_id",
]

CHAMPION_ID = "champion"
CHALLENGER_ID = "challenger"
#: The draw's seed: a capture's draw into an experiment says nothing about its audit or spend-cap draws.
SHADOW_SEED = "shadow"


class Unusable(Exception):
    """The challenger answered nothing a pair can hold: ``reason`` names why (``challenger_refused``,
    ``challenger_filtered``, ``challenger_empty``, ``challenger_unreadable``)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class SetAside(Exception):
    """A capture the judge cannot see whole, or cannot compare fairly: ``reason`` names why."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class ChallengerReply:
    """What the challenger answered: its next message (text, tool calls or both), why it stopped, its tokens."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    model: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0


# --- which experiments -------------------------------------------------------------------------------


def matches(experiment: Experiment, capture: Capture) -> bool:
    """Whether ``capture`` meets every criterion of the experiment's selector."""
    return admits(
        experiment.select,
        model=capture.source.model,
        route=capture.source.route,
        tags=capture.hints.tags,
        headers=capture.hints.headers,
    )


def admits(
    select: Selector, *, model: str | None, route: str, tags: Collection[str], headers: Mapping[str, str]
) -> bool:
    """Whether an exchange with this model, route, tags and (lower-case named) header values meets every criterion
    of ``select``: ``matches`` for a capture, and a producer's draw before it has made one (the gateway, the
    LiteLLM callback). ``model=None``: not known yet (the gateway, before it reads the body), so the ``models``
    criterion is left to the stage."""
    if select.models and model is not None and model not in select.models:
        return False
    if select.routes and route not in select.routes:
        return False
    if select.tags and not set(select.tags) & set(tags):
        return False
    return all(headers.get(name.lower()) in values for name, values in select.headers.items())


def drawn(capture_id: str, experiment_id: str, share: float) -> bool:
    """Whether the capture is in the experiment's ``share``: by the two ids alone, so the same every time."""
    if share >= 1.0:
        return True
    return audit_fraction(f"{experiment_id}\x1f{capture_id}", seed=SHADOW_SEED) < share


def joins(
    capture: Capture,
    experiments: Sequence[Experiment],
    *,
    paused: Collection[str] = (),
    shares: Mapping[str, float] | None = None,
) -> list[Experiment]:
    """The experiments ``capture`` is asked for: matching, not paused, and drawn into the share. ``paused`` and
    ``shares`` are the live changes (``Policy.shadow_live``): experiments paused, and shares replaced, by id."""
    live = shares or {}
    return [
        e
        for e in experiments
        if not e.paused
        and e.id not in paused
        and matches(e, capture)
        and drawn(capture.capture_id, e.id, live.get(e.id, e.share))
    ]


def shadow_pair_id(capture_id: str, experiment_id: str) -> str:
    """The pair id of (capture, experiment): the same for every redelivery, so a duplicate pair dedupes."""
    digest = hashlib.sha256(f"{capture_id}\x1f{experiment_id}".encode()).hexdigest()[:24]
    return f"shadow-{experiment_id}-{digest}"[:128]


# --- what the judge cannot see ------------------------------------------------------------------------


def set_aside(capture: Capture) -> SetAside | None:
    """Why the judge cannot see ``capture`` whole, or None."""
    unseen = capture.unseen
    if unseen:
        return SetAside(
            f"capture_unseen_{unseen[0]}",
            f"the capture holds what the judge cannot see ({', '.join(unseen)}); not judged blind",
        )
    messages = capture.request.messages
    last = messages[-1].role
    if last not in ("user", "tool"):
        return SetAside(
            "capture_not_a_question",
            f"the conversation ends on a {last} turn: both replies must answer the user's or a tool's turn",
        )
    return None


def cut_off(champion: FinishReason | str | None, challenger: str | None) -> SetAside | None:
    """One reply stopped by its token limit and the other not: set aside (the cut one would lose for its length)."""
    champion_cut, challenger_cut = champion == "length", challenger == "length"
    if champion_cut == challenger_cut:
        return None
    who = "champion" if champion_cut else "challenger"
    return SetAside(f"{who}_cut_off", f"the {who}'s reply stopped at its token limit and the other's did not")


# --- the request ---------------------------------------------------------------------------------------


def _wire_message(message: CapturedMessage, *, system: str | None) -> dict[str, Any]:
    role = "system" if message.role == "developer" else message.role
    out: dict[str, Any] = {"role": role, "content": system if system is not None else message.text}
    if message.tool_calls:
        out["tool_calls"] = [c.model_dump(mode="json") for c in message.tool_calls]
        if not out["content"]:
            out["content"] = None
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None and role != "tool":
        out["name"] = message.name
    return out


def challenger_request(capture: Capture, experiment: Experiment) -> dict[str, Any]:
    """The OpenAI chat completions body that asks the challenger the capture's request."""
    challenger = experiment.challenger
    messages: list[dict[str, Any]] = []
    replaced = False
    for m in capture.request.messages:
        if m.role in ("system", "developer") and challenger.system_prompt is not None:
            if not replaced:
                messages.append(_wire_message(m, system=challenger.system_prompt))
                replaced = True
            continue
        messages.append(_wire_message(m, system=None))
    if challenger.system_prompt is not None and not replaced:
        messages.insert(0, {"role": "system", "content": challenger.system_prompt})
    body: dict[str, Any] = {"model": challenger.model, "messages": messages}
    request = capture.request
    if request.tools:
        body["tools"] = [t.model_dump(mode="json", exclude_none=True) for t in request.tools]
        if request.tool_choice is not None:
            choice = request.tool_choice
            body["tool_choice"] = choice if isinstance(choice, str) else choice.model_dump(mode="json")
    if request.response_format is not None:
        body["response_format"] = request.response_format.model_dump(mode="json", exclude_none=True)
    sampling = request.sampling.model_dump(mode="json", exclude_none=True)
    if not sampling.get("stop"):
        sampling.pop("stop", None)
    body.update(sampling)
    body.update(challenger.params)
    return body


# --- the reply -----------------------------------------------------------------------------------------


def read_reply(body: bytes) -> ChallengerReply:
    """The challenger's chat completion, or ``Unusable`` naming why it cannot stand in a pair."""
    try:
        data = json.loads(body)
        choice = data["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise Unusable("challenger_unreadable", f"not a chat completion ({type(exc).__name__})") from None
    if not isinstance(message, dict):
        raise Unusable("challenger_unreadable", "the choice's message is not an object")
    finish = choice.get("finish_reason")
    if message.get("refusal"):
        raise Unusable("challenger_refused", "the challenger refused the request")
    if finish == "content_filter":
        raise Unusable("challenger_filtered", "the challenger's reply was stopped by its content filter")
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    try:
        calls = tuple(
            ToolCall(
                id=c["id"],
                function=FunctionCall(name=c["function"]["name"], arguments=c["function"].get("arguments") or ""),
            )
            for c in message.get("tool_calls") or ()
        )
    except (KeyError, TypeError, ValidationError) as exc:
        raise Unusable("challenger_unreadable", f"a tool call could not be read ({type(exc).__name__})") from None
    if not text.strip() and not calls:
        raise Unusable("challenger_empty", "the challenger answered no text and no tool call")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return ChallengerReply(
        text=text,
        tool_calls=calls,
        finish_reason=finish if isinstance(finish, str) else None,
        model=data.get("model") if isinstance(data.get("model"), str) else None,
        prompt_tokens=_tokens(usage.get("prompt_tokens")),
        completion_tokens=_tokens(usage.get("completion_tokens")),
    )


def _tokens(value: object) -> int:
    return value if type(value) is int and value >= 0 else 0


# --- the pair ------------------------------------------------------------------------------------------


def _calls(calls: Sequence[CapturedToolCall]) -> tuple[ToolCall, ...]:
    return tuple(
        ToolCall(id=c.id, function=FunctionCall(name=c.function.name, arguments=c.function.arguments)) for c in calls
    )


def _task_message(message: CapturedMessage) -> Message:
    role = "system" if message.role == "developer" else message.role
    calls = _calls(message.tool_calls)
    if calls and not message.text:
        return Message(role="assistant", tool_calls=calls)
    return Message(role=role, content=message.text, tool_calls=calls, tool_call_id=message.tool_call_id)


def build_pair(capture: Capture, experiment: Experiment, reply: ChallengerReply) -> CandidatePair:
    """The pair: the capture's request as the task, the champion's reply as it was, the challenger's next message.

    Raises ``SetAside`` when the request cannot be a task (a shape the pair contract does not take)."""
    champion = capture.response.message
    if not champion.text.strip() and not champion.tool_calls:
        raise SetAside("champion_empty", "the champion's reply holds no text and no tool call")
    challenger = experiment.challenger
    try:
        task = Task(
            messages=tuple(_task_message(m) for m in capture.request.messages),
            tools=tuple(ToolDefinition.model_validate(t.model_dump(mode="json")) for t in capture.request.tools),
        )
        candidates = (
            Candidate(
                candidate_id=CHAMPION_ID,
                output=champion.text,
                tool_calls=_calls(champion.tool_calls),
                source=CandidateSource(
                    model=capture.response.model or capture.source.model,
                    prompt_version=capture.source.prompt_version,
                    role="champion",
                ),
            ),
            Candidate(
                candidate_id=CHALLENGER_ID,
                output=reply.text,
                tool_calls=reply.tool_calls,
                source=CandidateSource(
                    model=reply.model or challenger.model,
                    prompt_version=challenger.prompt_version,
                    role="challenger",
                ),
            ),
        )
    except ValidationError as exc:
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_input=False)[:3]
        )
        raise SetAside("capture_not_a_pair", f"the capture cannot be a pair: {where}") from None
    return CandidatePair(
        pair_id=shadow_pair_id(capture.capture_id, experiment.id),
        task=task,
        candidates=candidates,
        rubric=experiment.rubric,
        tiebreak=experiment.tiebreak,
        metadata=PairMetadata(traffic="shadow", experiment_id=experiment.id, created_at=capture.captured_at),
        risk_level=experiment.risk_level,
    )


def challenger_usd(experiment: Experiment, reply: ChallengerReply) -> float:
    """What the challenger's reply cost, at the experiment's prices (0 when it names none)."""
    c = experiment.challenger
    return (reply.prompt_tokens * c.usd_per_million_input + reply.completion_tokens * c.usd_per_million_output) / 1e6
