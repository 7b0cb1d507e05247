"""A start-up check of a judge's credentials: a bad key stops the worker before it takes a pair.

Without it a wrong or revoked key is found by the first pair, and then by every pair: each is refused
("judge_rejected"). ``preflight`` makes one cheap authenticated call per HTTP judge instead, the model
list, which costs nothing with the providers and needs the same credentials as a judge call:

* OpenAI-compatible: ``GET {base_url}/models`` with ``Authorization: Bearer <key>``;
* Anthropic: ``GET {root}/v1/models`` with ``x-api-key`` and ``anthropic-version``;
* the offline judge (or any judge that is not an HTTP adapter): nothing.

Only a refusal of the credentials stops start-up: HTTP 401 or 403 raises ``JudgeAuthError`` (a
``JudgeRejected``), whose message names the judge (model and host) and the settings to check, never
the key. Everything else only logs a WARNING and lets the worker start, because it says nothing about
the key: a server that is down or slow (the breaker and backpressure deal with that once pairs flow),
a 404 or 405 from a server without a model list (llama.cpp builds, some gateways), a 5xx, a redirect.
A 401/403 whose body says the key lacks a *permission* or *scope* is not a bad key either: a
restricted key may judge without being allowed to list models. That is logged as a WARNING too.

The check runs outside the judge stack: it never touches the response cache or the circuit breaker,
and it is not retried.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Final

import anyio
import httpx

from pairjudge.agents.judge import Judge, JudgeWrapper
from pairjudge.streams.judges.factory import JudgeStack
from pairjudge.streams.judges.http import AUTH_STATUSES, EndpointJudge, JudgeAuthError, ProbeResult

__all__ = ["DEFAULT_PREFLIGHT_TIMEOUT_S", "JudgeAuthError", "endpoint_judge_of", "preflight", "preflight_all"]

log = logging.getLogger(__name__)

#: How long start-up waits for the model list before it goes on without an answer.
DEFAULT_PREFLIGHT_TIMEOUT_S: Final = 10.0

#: Words of a refusal that is about what a valid key may do, not about the key (OpenAI's restricted
#: keys: "insufficient permissions ... Missing scopes: api.model.read"; Anthropic's 403 "permission_error").
_SCOPE_MARKERS: Final = (
    "insufficient permission",
    "missing scope",
    "does not have permission",
    "permission_error",
)

_KEY_SETTINGS: Final = "PAIRJUDGE_JUDGE__API_KEY or PAIRJUDGE_JUDGE__API_KEY_FILE, or the juror's api_key"


def endpoint_judge_of(target: JudgeStack | Judge) -> EndpointJudge | None:
    """The HTTP adapter inside ``target`` (a stack, or a judge wrapped any number of times); else None."""
    judge: object = target.inner if isinstance(target, JudgeStack) else target
    seen = 0
    while isinstance(judge, JudgeWrapper) and seen < 64:  # a bound, should a wrapper ever wrap itself
        judge = judge.inner
        seen += 1
    return judge if isinstance(judge, EndpointJudge) else None


def _is_scope_refusal(detail: str) -> bool:
    text = detail.lower()
    return any(marker in text for marker in _SCOPE_MARKERS)


async def preflight(target: JudgeStack | Judge, *, timeout_s: float = DEFAULT_PREFLIGHT_TIMEOUT_S) -> None:
    """Check ``target``'s credentials with one authenticated GET of the model list (module docstring).

    Raises ``JudgeAuthError`` when the server refuses them (HTTP 401/403); returns otherwise, logging
    a WARNING when the check could not tell. Does nothing for the offline judge.
    """
    judge = endpoint_judge_of(target)
    if judge is None:
        log.debug("judge preflight: %s is not an HTTP judge; nothing to check", type(target).__name__)
        return
    result = await judge.probe_models(timeout_s=timeout_s)
    _judge_result(judge, result)


def _judge_result(judge: EndpointJudge, result: ProbeResult) -> None:
    where = f"GET {httpx.URL(judge.models_url).path}"
    if result.status is None:
        log.warning(
            "judge %s: could not check its API key at start-up (%s: %s); starting anyway",
            judge.label,
            where,
            result.failure,
        )
        return
    status = result.status
    if 200 <= status < 300:
        log.info("judge %s: credentials accepted (%s answered HTTP %d)", judge.label, where, status)
        return
    detail = result.detail or "(empty body)"
    if status in AUTH_STATUSES and not _is_scope_refusal(detail):
        if judge.authenticated:
            hint = f"the configured API key was refused; check {_KEY_SETTINGS}"
        else:
            hint = f"no API key is configured for it; set {_KEY_SETTINGS}"
        raise JudgeAuthError(
            f"judge {judge.label}: {hint} ({where} answered HTTP {status}: {detail})",
            status=status,
        )
    if status in AUTH_STATUSES:
        log.warning(
            "judge %s: the API key may not list models (%s answered HTTP %d: %s); its validity was not"
            " checked, starting anyway",
            judge.label,
            where,
            status,
            detail,
        )
        return
    log.warning(
        "judge %s: could not check its API key at start-up (%s answered HTTP %d: %s); starting anyway",
        judge.label,
        where,
        status,
        detail,
    )


async def preflight_all(
    targets: Sequence[JudgeStack | Judge], *, timeout_s: float = DEFAULT_PREFLIGHT_TIMEOUT_S
) -> None:
    """``preflight`` every target at once (a jury, the tie-break judge); raise the first refusal in order.

    Every check runs to its end, so the log names every judge whose key was refused, not only the first.
    """
    errors: dict[int, JudgeAuthError] = {}

    async def one(index: int, target: JudgeStack | Judge) -> None:
        try:
            await preflight(target, timeout_s=timeout_s)
        except JudgeAuthError as exc:
            errors[index] = exc

    async with anyio.create_task_group() as tg:
        for index, target in enumerate(targets):
            tg.start_soon(one, index, target)
    if not errors:
        return
    for index in sorted(errors)[1:]:
        log.error("%s", errors[index])
    raise errors[min(errors)]


def check_at_start(app: Any, stacks: Sequence[JudgeStack], checked: asyncio.Event) -> None:
    """A start-up task on a worker's ``app`` that checks ``stacks``' keys and then sets ``checked``, which the
    stages wait for: a bad key stops the worker before it judges anything, instead of dead-lettering every pair."""

    async def check_judges() -> None:
        try:
            await preflight_all(stacks)
        except JudgeAuthError as exc:
            log.critical("%s; stopping the worker", exc)
            await app.crash(exc)
            return
        checked.set()

    app.task(check_judges)
