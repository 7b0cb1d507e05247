"""The read API (``/api/v1``): JSON for delivery tools, dashboards and scripts, from the same feeds and the same
read model (``streams.scores.read_model``) as the pages and ``pairjudge gate``.

Every data route needs a bearer token with the ``read`` role (``streams.review.tokens``): none, or one that
is not known, gets 401 with ``WWW-Authenticate: Bearer``; a known token without the role gets 403. The OpenAPI
document is served without a token (it describes, it holds no data). Tokens are never logged.

Answers carry an ``ETag`` (a hash of the body) and ``Cache-Control: private, max-age=5``: a controller that
polls every 30 s and sends ``If-None-Match`` gets ``304 Not Modified`` with no body while nothing changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import get_args

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pairjudge.schemas.read_api import ApiError, AuditSeriesList, Experiments, GateBasis
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.review.kafka import AuditFeed, ScoresFeed
from pairjudge.streams.review.openapi import PATHS, openapi_document
from pairjudge.streams.review.tokens import TokenFile
from pairjudge.streams.scores.read_model import audit_series, scoreboard, snapshot_gate, summary

#: Seconds a reader may reuse an answer without asking again; the feeds move every few seconds at most.
MAX_AGE_S = 5
READ_ROLE = "read"
_BASES: tuple[str, ...] = get_args(GateBasis)


@dataclass
class ReadApi:
    """What the API reads: the scoreboards and audit snapshots the service follows, the live controls (for
    the kappa guard), and the tokens."""

    tokens: TokenFile
    scores: ScoresFeed | None = None
    audit: AuditFeed | None = None
    policy: PolicyHolder | None = None

    def paused_by(self) -> str | None:
        """Who paused automatic decisions (the kappa guard), or None while they run."""
        holder = self.policy
        if holder is None or not holder.ready.is_set() or not holder.current.kappa_guard_tripped:
            return None
        update = holder.overrides.get("kappa_guard_tripped")
        return update.updated_by if update is not None else "configured"


def etag_of(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _matches(if_none_match: str | None, etag: str) -> bool:
    if if_none_match is None:
        return False
    tags = [t.strip() for t in if_none_match.split(",")]
    return "*" in tags or any(t.removeprefix("W/") == etag for t in tags)


def json_answer(request: Request, body: bytes, status: int = 200) -> Response:
    """``body`` with its ETag and a short max-age; 304 when the reader already has it."""
    etag = etag_of(body)
    headers = {"etag": etag, "cache-control": f"private, max-age={MAX_AGE_S}", "vary": "authorization"}
    if status == 200 and _matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers=headers)
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def model_answer(request: Request, model: BaseModel, status: int = 200) -> Response:
    return json_answer(request, model.model_dump_json().encode(), status)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    body = ApiError(error=message).model_dump_json()
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _bearer(request: Request) -> str | None:
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    return credentials.strip() or None if scheme.lower() == "bearer" else None


ApiHandler = Callable[[ReadApi, Request], Awaitable[Response]]


def with_token(api: ReadApi, handler: ApiHandler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        token = _bearer(request)
        if token is None:
            return error(401, "A bearer token is needed.", {"www-authenticate": 'Bearer realm="pairjudge"'})
        entry = api.tokens.find(token)
        if entry is None:
            challenge = 'Bearer realm="pairjudge", error="invalid_token"'
            return error(401, "The token is not known (or was revoked).", {"www-authenticate": challenge})
        if not entry.may(READ_ROLE):
            challenge = f'Bearer realm="pairjudge", error="insufficient_scope", scope="{READ_ROLE}"'
            return error(403, f"This token has no {READ_ROLE} role.", {"www-authenticate": challenge})
        return await handler(api, request)

    return endpoint


async def experiments(api: ReadApi, request: Request) -> Response:
    latest = api.scores.latest if api.scores is not None else {}
    return model_answer(request, Experiments(experiments=[summary(s) for _, s in sorted(latest.items())]))


async def experiment_scoreboard(api: ReadApi, request: Request) -> Response:
    name = request.path_params["experiment"]
    snap = api.scores.latest.get(name) if api.scores is not None else None
    if snap is None:
        return error(404, f"No scoreboard has been published for experiment {name!r}.")
    return model_answer(request, scoreboard(snap, api.paused_by()))


async def experiment_gate(api: ReadApi, request: Request) -> Response:
    """The gate's answer; an experiment with no scoreboard yet answers continue (as ``pairjudge gate`` does)."""
    name = request.path_params["experiment"]
    basis = request.query_params.get("basis", "human")
    if basis not in _BASES:
        return error(400, f"basis is one of {', '.join(_BASES)}.")
    snap = api.scores.latest.get(name) if api.scores is not None else None
    answer = snapshot_gate(snap, name, "human" if basis == "human" else "judge", api.paused_by())
    return model_answer(request, answer)


async def audit(api: ReadApi, request: Request) -> Response:
    latest = api.audit.latest if api.audit is not None else {}
    return model_answer(request, AuditSeriesList(series=[audit_series(k, s) for k, s in sorted(latest.items())]))


async def openapi(request: Request) -> Response:
    return json_answer(request, openapi_document().encode())


HANDLERS: dict[str, ApiHandler] = {
    "experiments": experiments,
    "scoreboard": experiment_scoreboard,
    "gate": experiment_gate,
    "audit": audit,
}


def api_routes(api: ReadApi) -> list[Route]:
    routes = [Route(path.starlette, with_token(api, HANDLERS[path.handler]), methods=["GET"]) for path in PATHS]
    return [*routes, Route("/api/v1/openapi.json", openapi, methods=["GET"])]
