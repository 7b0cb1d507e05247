"""Strict reply validation and the re-ask loop (docs/design.md §2.4).

A reply is accepted only if it is one JSON object (optionally inside one surrounding markdown
fence, which small models add despite being told not to) that validates *strictly* against the
reply model and names exactly the rubric's criteria. Anything else becomes an ``InvalidReply``
whose message is written to be sent back to the judge as re-ask feedback. Nothing is repaired or
guessed: a reply that never validates leaves its ordering invalid, and the pair escalates.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from pairjudge.agents.errors import InvalidReply, JudgeError
from pairjudge.agents.judge import Judge, JudgeRequest, JudgeResponse
from pairjudge.agents.judge import JudgeCall as JudgeCall  # re-exported: agents.audit imports it from here
from pairjudge.agents.logprobs import choice_probabilities
from pairjudge.agents.prompts import reask
from pairjudge.schemas.events import ErrorKind, Order, Stage
from pairjudge.schemas.replies import HeadToHeadReply, PairwiseReply, Reply, TieBreakReply
from pairjudge.schemas.rubric import HeadToHeadRubric, PairwiseRubric, TieBreakWeights

R = TypeVar("R", bound=Reply)


_MAX_ERRORS_LISTED = 10
_MAX_DETAIL = 500  # characters of a judge exception's message kept in errors and telemetry


# --- parsing ----------------------------------------------------------------------------------

_FENCE = re.compile(r"\A\s*```[ \t]*(?:json|JSON)?[ \t]*\r?\n(?P<body>.*?)\r?\n?[ \t]*```\s*\Z", re.DOTALL)


def strip_fence(text: str) -> str:
    """The body of one ```` ```json ```` fence surrounding the whole reply; otherwise the text unchanged."""
    match = _FENCE.match(text)
    return match.group("body") if match else text


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON number")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads would silently keep the last of two equal keys; a reply saying two things is invalid.
    obj = dict(pairs)
    if len(obj) != len(pairs):  # rare: only then look for the first key seen twice, for the message
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {_clip(key)!r} appears twice in one object")
            seen.add(key)
    return obj


# Built once: json.loads(text, **hooks) builds a decoder, and its scanner, on every call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)


def describe_validation_error(error: ValidationError) -> str:
    """Field paths and messages, without echoing the (untrusted, possibly huge) input values."""
    errors = error.errors(include_url=False, include_input=False)
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in errors[:_MAX_ERRORS_LISTED]]
    if len(errors) > _MAX_ERRORS_LISTED:
        parts.append(f"and {len(errors) - _MAX_ERRORS_LISTED} more errors")
    return "the reply does not match the required JSON schema: " + "; ".join(parts)


def parse_reply(text: str, reply_model: type[R]) -> R:
    """Strictly parse ``text`` as ``reply_model``; raise ``InvalidReply`` with re-ask feedback otherwise."""
    body = strip_fence(text)
    if not body or body.isspace():
        raise InvalidReply("the reply is empty; a JSON object is required", text)
    try:
        if body.startswith("\ufeff"):  # json.loads' own check, before it hands the text to a decoder
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", body, 0)
        data = _DECODER.decode(body)
    except json.JSONDecodeError as exc:
        raise InvalidReply(
            f"the reply is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            " (it must be one complete JSON object and nothing else)",
            text,
        ) from exc
    except ValueError as exc:
        raise InvalidReply(f"the reply is not valid JSON: {exc}", text) from exc
    except RecursionError:
        # A judge's reply is untrusted too; nesting this deep is never a verdict.
        raise InvalidReply("the reply is nested too deeply to be a verdict object", text) from None
    if not isinstance(data, dict):
        raise InvalidReply(f"the reply must be one JSON object, not a JSON {type(data).__name__}", text)
    try:
        # Strict JSON-mode validation: no "0.9" for 0.9, no 4.0 for a 1-5 integer score, no unknown fields
        # (the contracts forbid extras). json.loads has already turned away what JSON-mode parsing would
        # let through (a repeated key, NaN, Infinity), so a body that validates holds exactly the data it
        # re-serialises to: validating it directly saves writing that out.
        return reply_model.model_validate_json(body, strict=True)
    except ValidationError:
        pass
    try:
        # Rejected (or read differently: an escape or number jiter takes otherwise): the re-serialised,
        # duplicate-free data decides, as it always did, and the feedback is word for word the same.
        return reply_model.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        raise InvalidReply(describe_validation_error(exc), text) from exc


# --- context checks ---------------------------------------------------------------------------


def _same_names(what: str, got: Sequence[str], expected: Sequence[str]) -> str | None:
    """A problem statement unless ``got`` names each of ``expected`` exactly once and nothing else."""
    counts = Counter(got)
    missing = [n for n in expected if n not in counts]
    unexpected = [n for n in counts if n not in expected]
    repeated = [n for n, c in counts.items() if c > 1 and n in expected]
    if not (missing or unexpected or repeated):
        return None
    parts = [f"{what} must name exactly these criteria, each once: {json.dumps(list(expected))}"]
    if missing:
        parts.append(f"missing: {json.dumps(missing)}")
    if unexpected:
        shown = [_clip(n) for n in unexpected[:5]]
        parts.append(f"not in the rubric: {json.dumps(shown)}")
    if repeated:
        parts.append(f"named more than once: {json.dumps(repeated)}")
    return "; ".join(parts)


def check_head_to_head(rubric: HeadToHeadRubric) -> Callable[[HeadToHeadReply], str | None]:
    expected = [c.name for c in rubric.criteria]

    def check(reply: HeadToHeadReply) -> str | None:
        return _same_names("criteria_breakdown", list(reply.criteria_breakdown), expected)

    return check


def check_pairwise(rubric: PairwiseRubric) -> Callable[[PairwiseReply], str | None]:
    expected = list(rubric.criteria)

    def check(reply: PairwiseReply) -> str | None:
        return _same_names("comparison", [c.criterion for c in reply.comparison], expected)

    return check


def check_tiebreak(weights: TieBreakWeights) -> Callable[[TieBreakReply], str | None]:
    expected = [c.name for c in weights.criteria]

    def check(reply: TieBreakReply) -> str | None:
        return _same_names("criteria_analysis", [c.criterion for c in reply.criteria_analysis], expected)

    return check


# --- asking with re-asks ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AskResult(Generic[R]):
    """The outcome of one ordering's ask: a validated reply, or the final error. Never both."""

    reply: R | None
    #: The accepted reply's raw text, or the last raw reply seen (for the re-ask echo and audit).
    text: str | None
    error: str | None
    error_kind: ErrorKind | None
    #: Re-asks made after the first ask (validation re-asks only; 0..max_reasks).
    retries: int
    calls: tuple[JudgeCall, ...]
    answered_model: str | None
    #: The accepted reply's token probability per verdict choice, by position letter (``agents.logprobs``);
    #: None when the judge sent no token probabilities, or they could not be lined up with the verdict.
    probabilities: dict[str, float] | None = None


def _error_kind(exc: JudgeError) -> ErrorKind:
    """How a judge failure that is not about the reply is recorded, by its ``retriable`` flag.

    Retry or escalate is decided here, once: "judge_unavailable" (retriable: the judge was down, so the
    edge judges the pair again later) or "judge_rejected" (not retriable: a refusal no retry fixes, so
    the edge dead-letters the pair and raises an alert). Everything downstream reads the kind.
    """
    return "judge_unavailable" if exc.retriable else "judge_rejected"


async def ask_validated(
    judge: Judge,
    request: JudgeRequest,
    reply_model: type[R],
    validate_context: Callable[[R], str | None] | None,
    max_reasks: int,
    *,
    order: Order = "AB",
) -> AskResult[R]:
    """Ask, validate, and re-ask up to ``max_reasks`` times with the validation error appended.

    ``JudgeUnavailable``/``JudgeRejected`` end the ask at once: transport retries are the HTTP judge's
    job, and asking a broken judge again with an error about its *reply* would be meaningless. Their
    ``retriable`` flag gives the ordering's error kind (:func:`_error_kind`) and their HTTP ``status``
    travels on in the recorded call (``JudgeCall.status``), never inside the text.
    ``order`` only labels the recorded calls.
    """
    stage: Stage = "tiebreak" if request.template == "tiebreak" else "primary"
    calls: list[JudgeCall] = []
    last_text: str | None = None
    last_error = ""
    answered: str | None = None

    def record(
        current: JudgeRequest,
        started: float,
        response: JudgeResponse | None,
        kind: ErrorKind | None = None,
        error: str | None = None,
        status: int | None = None,
    ) -> None:
        # Prefer the judge's own latency (it excludes our scheduling); fall back to wall time.
        reported = response.latency_s if response is not None else 0.0
        calls.append(
            JudgeCall(
                stage=stage,
                order=order,
                attempt=current.attempt,
                forced_choice=current.forced_choice,
                latency_s=reported if reported > 0 else time.perf_counter() - started,
                input_tokens=response.input_tokens if response is not None else None,
                output_tokens=response.output_tokens if response is not None else None,
                requested_model=judge.identity.model,
                answered_model=response.model if response is not None else None,
                valid=kind is None,
                error=error,
                error_kind=kind,
                cost_usd=response.cost_usd if response is not None else None,
                cached=response.cached if response is not None else False,
                status=status,
            )
        )

    for k in range(max_reasks + 1):
        current = request if k == 0 else reask(request, last_text or "", last_error, attempt=request.attempt + k)
        started = time.perf_counter()
        try:
            response = await judge.complete(current)
        except InvalidReply as exc:
            # A judge adapter that could not even extract a reply text; treat it like an invalid reply.
            last_text, last_error = exc.raw, str(exc)
            record(current, started, None, "invalid_reply", _clip(last_error, _MAX_DETAIL))
            continue
        except JudgeError as exc:
            kind = _error_kind(exc)
            detail = _clip(str(exc) or type(exc).__name__, _MAX_DETAIL)
            record(current, started, None, kind, detail, exc.status)
            return AskResult(None, last_text, detail, kind, k, tuple(calls), answered)
        answered = response.model
        last_text = response.text
        try:
            reply = parse_reply(response.text, reply_model)
            problem = validate_context(reply) if validate_context is not None else None
            if problem is not None:
                raise InvalidReply(problem, response.text)
        except InvalidReply as exc:
            last_error = str(exc)
            record(current, started, response, "invalid_reply", _clip(last_error, _MAX_DETAIL))
            continue
        record(current, started, response)
        probabilities = choice_probabilities(response.extra.get("logprobs"), current.template, text=response.text)
        return AskResult(reply, response.text, None, None, k, tuple(calls), answered, probabilities)
    return AskResult(None, last_text, last_error, "invalid_reply", max_reasks, tuple(calls), answered)
