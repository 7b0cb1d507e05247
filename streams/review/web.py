"""The review web app: a server-rendered queue page for reviewers, the drift audit's figures (``/audit``)
and the scoreboards (``/scores``) beside it, and a controls page for operators.

What the page never shows is as deliberate as what it shows: the judge's verdict, confidence and
justification stay out of the page and its source (seed 000, against anchoring), and every piece of
model or user text goes through Jinja2's autoescaping. The Content-Security-Policy allows only this
app's own script and style, so even a missed escape could not run an injected script.

Writes need a session and that session's CSRF token (a form field or the ``X-CSRF-Token`` header). The
session cookie is signed, HttpOnly, SameSite=Strict and Secure (browsers treat localhost as secure).
Unauthenticated requests get 401 (the login form), the wrong role 403, a claim that expired or went to
someone else 409, and a label the broker did not take 503 (the item stays claimed and nothing is lost).

Why one module over 500 lines: the route table, the role guard, the CSRF check and every handler it
guards sit together, so one reading shows that no write route escapes the guard.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import urlencode

import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pairjudge.agents.prompt_blocks import interleave
from pairjudge.schemas import (
    TIE,
    CandidatePair,
    ControlUpdate,
    HeadToHeadRubric,
    HumanLabel,
    PairwiseRubric,
    ToneStyleRubric,
)
from pairjudge.schemas.kinds import CHOICE_KEYS
from pairjudge.schemas.kinds import CONTROLS as CONTROL_SPECS
from pairjudge.schemas.scores import ScoreSnapshot
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder, publish_control
from pairjudge.streams.review.auth import LoginLimiter, Role, User, Users
from pairjudge.streams.review.kafka import AuditFeed, LabelSink, ScoresFeed
from pairjudge.streams.review.probes import ReviewHealth
from pairjudge.streams.review.store import Filters, Item, ReviewStore, StaleClaim
from pairjudge.streams.scores.charts import evidence_chart, strengths_chart, win_rate_chart
from pairjudge.streams.scores.view import board_view

log = logging.getLogger(__name__)

#: Rubric kinds whose reviewers may call a tie (seed 000, tone and style, always names a winner).
TIE_KINDS = frozenset({"head_to_head", "pairwise"})
#: The controls the operators' page can set (docs/design.md §2), with the kind of value each takes: every live
#: control key of the registry but the kappa guard, which has its own resume button.
CONTROLS: dict[str, str] = {key: spec.value for key, spec in CONTROL_SPECS.items() if spec.on_form}
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


class SecurityHeaders:
    """Adds ``SECURITY_HEADERS`` to every response (pure ASGI, so it also covers errors and static files)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                for name, value in SECURITY_HEADERS.items():
                    if name.encode() not in present:
                        headers.append((name.encode(), value.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


@dataclass
class ReviewApp:
    """What the routes share: settings, the store, the label sink, users and the login limiter."""

    settings: Settings
    store: ReviewStore
    labels: LabelSink
    users: Users
    limiter: LoginLimiter
    templates: Jinja2Templates
    #: The live policy read from the control topic (None: the operators' page shows configured values only).
    policy: PolicyHolder | None = None
    #: The latest scoreboard per experiment (None: no scoreboard page data).
    scores: ScoresFeed | None = None
    #: What ``/livez`` and ``/readyz`` report (the service fills in its feed).
    health: ReviewHealth | None = None
    #: The latest audit snapshot per series, for the audit view and the operators' page (None: not followed).
    audit: AuditFeed | None = None


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pairjudge.streams.review", "templates"),
        autoescape=True,  # every {{ }} is escaped; nothing in these templates is marked safe
        undefined=jinja2.StrictUndefined,
    )
    return Jinja2Templates(env=env)


# --- sessions, CSRF, roles --------------------------------------------------------------------


def csrf_token(request: Request) -> str:
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


async def _csrf_ok(request: Request) -> bool:
    expected = request.session.get("csrf")
    if not isinstance(expected, str):
        return False
    given = request.headers.get("x-csrf-token")
    if given is None:
        form = await request.form()
        value = form.get("csrf_token")
        given = value if isinstance(value, str) else None
    return given is not None and hmac.compare_digest(given, expected)


def _user(app: ReviewApp, request: Request) -> User | None:
    name = request.session.get("user")
    return app.users.get(name) if isinstance(name, str) else None


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def _deny(app: ReviewApp, request: Request, status: int, message: str) -> Response:
    if _wants_json(request):
        return JSONResponse({"error": message}, status_code=status)
    if status == 401:
        return _login_page(app, request, message, status=401)
    context = {"status": status, "message": message, "user": _user(app, request), "csrf": csrf_token(request)}
    return app.templates.TemplateResponse(request, "error.html", context, status_code=status)


Handler = Callable[[ReviewApp, Request, User], Awaitable[Response]]


def guarded(
    app: ReviewApp, role: Role, handler: Handler, *, write: bool = False
) -> Callable[[Request], Awaitable[Response]]:
    """A route that needs a signed-in user of ``role`` (and, for writes, the session's CSRF token)."""

    async def endpoint(request: Request) -> Response:
        user = _user(app, request)
        if user is None:
            return _deny(app, request, 401, "Sign in to continue.")
        if not user.may(role):
            return _deny(app, request, 403, f"This page is for the {role} role; you are signed in as a {user.role}.")
        if write and not await _csrf_ok(request):
            return _deny(app, request, 403, "The form's CSRF token is missing or wrong; reload the page and try again.")
        return await handler(app, request, user)

    return endpoint


# --- login -------------------------------------------------------------------------------------


def _login_page(app: ReviewApp, request: Request, error: str | None = None, status: int = 200) -> Response:
    return app.templates.TemplateResponse(
        request, "login.html", {"csrf": csrf_token(request), "error": error, "user": None}, status_code=status
    )


async def login_form(app: ReviewApp, request: Request) -> Response:
    return _login_page(app, request)


async def login(app: ReviewApp, request: Request) -> Response:
    if not await _csrf_ok(request):
        return _login_page(app, request, "The form expired; please try again.", status=403)
    form = await request.form()
    name, password = str(form.get("name", "")), str(form.get("password", ""))
    client = request.client.host if request.client else "?"
    keys = (f"user:{name}", f"addr:{client}")
    wait = app.limiter.blocked_for(*keys)
    if wait > 0:
        response = _login_page(app, request, f"Too many failed sign-ins; try again in {int(wait) + 1} s.", status=429)
        response.headers["retry-after"] = str(int(wait) + 1)
        return response
    user = app.users.authenticate(name, password)
    if user is None:
        app.limiter.failed(*keys)
        return _login_page(app, request, "Wrong name or password.", status=401)
    app.limiter.succeeded(*keys)
    request.session.clear()  # a new session on sign-in: no fixation, and a fresh CSRF token
    request.session["user"] = user.name
    csrf_token(request)
    return RedirectResponse("/", status_code=303)


async def logout(app: ReviewApp, request: Request, user: User) -> Response:
    request.session.clear()
    return RedirectResponse("/login", status_code=303)


# --- reviewing ---------------------------------------------------------------------------------


def _filters(request: Request) -> Filters:
    q = request.query_params
    return Filters(
        experiment=q.get("experiment") or None, rubric_kind=q.get("rubric_kind") or None, reason=q.get("reason") or None
    )


def _filter_query(filters: Filters) -> str:
    values = {
        k: v
        for k, v in (
            ("experiment", filters.experiment),
            ("rubric_kind", filters.rubric_kind),
            ("reason", filters.reason),
        )
        if v
    }
    return urlencode(values)


def _rubric_view(item: Item) -> dict[str, Any]:
    """What the reviewer needs of the rubric: the guide and audience, or the criteria. Never the verdict."""
    rubric = item.request.pair.rubric
    if isinstance(rubric, ToneStyleRubric):
        return {
            "kind": "tone_style",
            "style_guide": rubric.style_guide,
            "audience": rubric.audience,
            "forbidden": list(rubric.forbidden_terms),
            "required": list(rubric.required_terms),
        }
    if isinstance(rubric, HeadToHeadRubric):
        return {
            "kind": "head_to_head",
            "criteria": [(c.name, c.description) for c in rubric.criteria],
            "constraints": rubric.constraints,
        }
    if isinstance(rubric, PairwiseRubric):
        return {"kind": "pairwise", "criteria": [(c, "") for c in rubric.criteria]}
    return {"kind": "named", "name": getattr(rubric, "name", "")}


def _transcript(pair: CandidatePair, candidate_id: str) -> list[tuple[str, str]]:
    """A transcript comparison's candidate, turn by turn up to its last reply (shown as its output)."""
    c = pair.candidate(candidate_id)
    history = tuple((m.role, m.content) for m in pair.task.history)
    return list(interleave(history, c.turns, pair.task.question, c.output)[:-1])


def _item_context(item: Item | None) -> dict[str, Any]:
    if item is None:
        return {"item": None}
    pair = item.request.pair
    transcript = pair.is_transcript
    return {
        "item": {
            "id": item.id,
            "pair_id": item.pair_id,
            "reason": item.reason,
            "audit": item.audit,
            "experiment": item.experiment,
            "task": pair.task.question,
            "context": pair.task.context,
            # A conversation (docs/guides/conversations.md): the turns before the last user turn, in order
            # with their roles; a transcript comparison shows each candidate's whole conversation instead.
            "transcript": transcript,
            "history": [] if transcript else [(m.role, m.content) for m in pair.task.history],
            "left_turns": _transcript(pair, item.left) if transcript else [],
            "right_turns": _transcript(pair, item.right) if transcript else [],
            "rubric": _rubric_view(item),
            "left": pair.candidate(item.left).output,
            "right": pair.candidate(item.right).output,
            "allow_tie": item.rubric_kind in TIE_KINDS,
            "claim_expires": item.claim_expires,
        }
    }


async def _claimed_context(app: ReviewApp, request: Request, user: User) -> dict[str, Any]:
    """Claim the reviewer's next item under the request's filters; the context both views render."""
    filters = _filters(request)
    item = await app.store.claim_next(user.name, filters, app.settings.review.claim_ttl_s)
    stats = await app.store.stats(filters, user.name)
    return {
        "user": user,
        "csrf": csrf_token(request),
        "filters": filters,
        "filter_query": _filter_query(filters),
        "stats": stats,
        "mine": stats.mine,
        **_item_context(item),
    }


async def review_page(app: ReviewApp, request: Request, user: User) -> Response:
    context = await _claimed_context(app, request, user)
    context["choices"] = await app.store.choices()
    return app.templates.TemplateResponse(request, "review.html", context)


async def next_item(app: ReviewApp, request: Request, user: User) -> Response:
    """The next item as an HTML fragment (the page swaps it in without a full reload)."""
    return app.templates.TemplateResponse(request, "_item.html", await _claimed_context(app, request, user))


async def submit_label(app: ReviewApp, request: Request, user: User) -> Response:
    item_id = int(request.path_params["item_id"])
    form = await request.form()
    choice, rationale = str(form.get("choice", "")), str(form.get("rationale", ""))[:5_000]
    try:
        item = await app.store.claimed_item(item_id, user.name)
    except StaleClaim as exc:
        return _deny(app, request, 409, str(exc))
    if choice == "tie" and item.rubric_kind not in TIE_KINDS:
        return _deny(app, request, 400, "This rubric always names a winner: choose A or B.")
    winners = {"left": item.left, "right": item.right, "tie": TIE}
    if choice not in winners:
        return _deny(app, request, 400, "Choose A, B" + (" or tie" if item.rubric_kind in TIE_KINDS else "") + ".")
    label = HumanLabel(
        pair_id=item.pair_id, winner=winners[choice], rationale=rationale, reviewer=user.name, from_audit=item.audit
    )
    try:
        await app.labels.publish(label)
    except Exception as exc:  # noqa: BLE001 - any broker failure: the claim stays, the reviewer can resend
        log.warning("label for %s not published: %s", item.pair_id, type(exc).__name__)
        return _deny(app, request, 503, "The label could not be delivered to Kafka; it was not saved. Try again.")
    try:
        await app.store.complete(item.id, user.name, label.winner)
    except StaleClaim:
        # The label is on the broker (the trust loop has it); the claim lapsed meanwhile. Say so.
        log.warning("label for %s published after its claim lapsed", item.pair_id)
    if _wants_json(request):
        return JSONResponse({"ok": True, "pair_id": item.pair_id})
    query = _filter_query(_filters(request))
    return RedirectResponse("/" + (f"?{query}" if query else ""), status_code=303)


async def skip_item(app: ReviewApp, request: Request, user: User) -> Response:
    await app.store.release(int(request.path_params["item_id"]), user.name)
    if _wants_json(request):
        return JSONResponse({"ok": True})
    return RedirectResponse("/", status_code=303)


# --- operators ---------------------------------------------------------------------------------


async def operators_page(app: ReviewApp, request: Request, user: User, message: str | None = None) -> Response:
    configured = app.settings.policy
    holder = app.policy
    live = holder.current if holder is not None and holder.ready.is_set() else None
    overrides = holder.overrides if holder is not None else {}
    guard = overrides.get("kappa_guard_tripped")
    context = {
        "user": user,
        "csrf": csrf_token(request),
        **controls_context(configured, live, overrides),
        "paused": live.kappa_guard_tripped if live is not None else None,
        "guard_by": f"{guard.updated_by} at {guard.updated_at:%Y-%m-%d %H:%M:%S} UTC" if guard is not None else None,
        "message": message,
        "stats": await app.store.stats(),
        "guard": _guard_context(app),
        "series": _series_rows(app),
    }
    return app.templates.TemplateResponse(request, "operators.html", context)


def controls_context(configured: object, live: object | None, overrides: Mapping[str, ControlUpdate]) -> dict[str, Any]:
    """The live controls form's rows (``CONTROLS``): each key's configured and live value, and who set it."""
    return {
        "controls": CONTROLS,
        "choices": CHOICE_KEYS,
        "configured": {k: getattr(configured, k) for k in CONTROLS},
        "live": {k: getattr(live, k) for k in CONTROLS} if live is not None else None,
        "set_by": {k: f"{u.updated_by} at {u.updated_at:%Y-%m-%d %H:%M:%S} UTC" for k, u in overrides.items()},
    }


def _guard_context(app: ReviewApp) -> dict[str, Any]:
    """The kappa guard as configured here (the workers run with the same settings in a deployment)."""
    audit = app.settings.audit
    return {
        "mode": audit.guard_mode,
        "kappa_min": audit.kappa_min,
        "ratio": audit.relative_kappa_ratio,
        "min_human_pairs": audit.min_human_pairs,
    }


def _fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "n/a" if value is None else pattern.format(value)


def _series_rows(app: ReviewApp) -> list[dict[str, str]]:
    """Per series, its latest window: the judge's kappa against people beside the human ceiling (people
    against each other on audit pairs labelled twice), and the guard's floor as the audit applied it."""
    latest = app.audit.latest if app.audit is not None else {}
    rows = []
    for key, snap in sorted(latest.items()):
        if snap.guard_mode is None:
            guard = "n/a"
        elif snap.guard_mode == "relative" and snap.guard_note is None:
            guard = f"relative: floor {_fmt(snap.guard_kappa_min, '{:.3f}')}"
        else:
            guard = f"{snap.guard_mode}: floor {_fmt(snap.guard_kappa_min, '{:g}')}"
        rows.append(
            {
                "series": key,
                "window": f"{snap.window_start:%Y-%m-%d %H:%M} UTC" + ("" if snap.final else " (open)"),
                "labels": str(snap.human_labels),
                "kappa": _fmt(snap.cohen_kappa),
                "human_pairs": str(snap.human_pairs),
                "human_agreement": _fmt(snap.human_agreement, "{:.0%}"),
                "human_kappa": _fmt(snap.human_kappa),
                "guard": guard,
                "note": snap.guard_note or "",
            }
        )
    return rows


async def set_control(app: ReviewApp, request: Request, user: User) -> Response:
    form = await request.form()
    key, raw = str(form.get("key", "")), str(form.get("value", "")).strip().lower()
    if key not in CONTROLS:
        return _deny(app, request, 400, "Unknown control.")
    value: float | bool | str
    try:
        if CONTROLS[key] == "switch":
            value = raw in ("true", "on", "1", "yes")
        else:
            value = raw if CONTROLS[key] == "choice" else float(raw)
        await publish_control(app.settings, key, value, f"{user.name} (review UI)")
    except ValueError as exc:
        return _deny(app, request, 400, str(exc))
    await _seen(app, key, value)
    return await operators_page(
        app, request, user, f"{key} set to {value} on every worker, recorded as set by {user.name}."
    )


async def resume(app: ReviewApp, request: Request, user: User) -> Response:
    await publish_control(app.settings, "kappa_guard_tripped", False, f"{user.name} (review UI): resumed")
    await _seen(app, "kappa_guard_tripped", False)
    return await operators_page(app, request, user, f"Automatic decisions resumed by {user.name}.")


def audit_context(app: ReviewApp) -> dict[str, Any]:
    """The audit view's figures: each series' latest window as the drift audit published it (pairs, the
    labels on the judge's verdicts, agreement and kappa), and each experiment's two gates."""
    latest = app.audit.latest if app.audit is not None else {}
    rows = []
    for key, snap in sorted(latest.items()):
        info = snap.series_info
        kappa = _fmt(snap.cohen_kappa)
        if snap.cohen_kappa is not None and snap.kappa_low is not None and snap.kappa_high is not None:
            kappa += f" ({snap.kappa_low:.2f}..{snap.kappa_high:.2f})"
        rows.append(
            {
                "series": key,
                "name": f"{info.judge_model} | {info.rubric} | {info.experiment_id or '-'}" if info else key,
                "window": f"{snap.window_start:%Y-%m-%d %H:%M} UTC" + ("" if snap.final else " (open)"),
                "pairs": str(snap.pairs),
                "labels": str(snap.human_labels),
                "human_decided": str(snap.human_decided),
                "agreement": _fmt(snap.agreement, "{:.0%}"),
                "kappa": kappa,
                "tiebreak_rate": _fmt(snap.tiebreak_rate, "{:.0%}"),
                "published": f"{snap.published_at:%H:%M:%S} UTC",
            }
        )
    gates = []
    for _, board in sorted((app.scores.latest if app.scores is not None else {}).items()):
        view = board_view(board)
        gates.append(
            {
                "experiment": board.experiment,
                "human": view.human.gate.text if view.human.gate is not None else view.human.missing or "n/a",
                "judge": view.judge.gate.text if view.judge.gate is not None else "n/a",
                "human_rate": view.human.headline,
                "judge_rate": view.judge.headline,
            }
        )
    return {
        "series": rows,
        "total_labels": sum(s.human_labels for s in latest.values()),
        "total_decided": sum(s.human_decided for s in latest.values()),
        "total_pairs": sum(s.pairs for s in latest.values()),
        "gates": gates,
        "min_labels": app.settings.audit.min_labels,
        "kappa_min": app.settings.audit.kappa_min,
    }


async def audit_page(app: ReviewApp, request: Request, user: User) -> Response:
    """The drift audit as it stands, for reviewers: each series' labels, agreement and kappa, beside the
    scoreboards' gates. The page refreshes its figures itself (``/audit/live``, the app's own script)."""
    context = {"user": user, "csrf": csrf_token(request), **audit_context(app)}
    return app.templates.TemplateResponse(request, "audit.html", context)


async def audit_live(app: ReviewApp, request: Request, user: User) -> Response:
    """The audit view's figures alone (an HTML fragment the page's script swaps in every few seconds)."""
    return app.templates.TemplateResponse(request, "_audit.html", audit_context(app))


async def scores_page(app: ReviewApp, request: Request, user: User) -> Response:
    """Every experiment's scoreboard: the human basis and the judge basis side by side, both gates, the
    splits, and the three charts (inline SVG)."""
    latest = app.scores.latest if app.scores is not None else {}
    context = {"user": user, "csrf": csrf_token(request), "boards": score_boards(latest)}
    return app.templates.TemplateResponse(request, "scores.html", context)


def score_boards(latest: Mapping[str, ScoreSnapshot]) -> list[dict[str, Any]]:
    """The scores page's boards, by experiment: the view (``streams.scores.view``, plain text the
    template escapes) and the charts."""
    # Safe by construction (streams.scores.charts escapes every text it draws; the rest are formatted numbers).
    return [
        {
            "snap": snap,
            "view": board_view(snap),
            "win_rate": Markup(win_rate_chart(snap.history)),  # noqa: S704
            "evidence": Markup(evidence_chart(snap.history, snap.gate.threshold)),  # noqa: S704
            "strengths": Markup(strengths_chart(snap.strengths)),  # noqa: S704
        }
        for _, snap in sorted(latest.items())
    ]


async def _seen(app: ReviewApp, key: str, value: float | bool | str, timeout_s: float = 5.0) -> None:
    """Wait (briefly) until the control follower has read the update, so the page shows it as live."""
    if app.policy is None:
        return
    deadline = asyncio.get_running_loop().time() + timeout_s
    # Polled: the follower applies records as they come and signals only its first catch-up.
    while getattr(app.policy.current, key) != value and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)


async def livez(review: ReviewApp, request: Request) -> Response:
    """200 "ok" unless the service needs a restart (streams.review.probes); also served as ``/healthz``."""
    reason = review.health.not_live() if review.health is not None else None
    if reason is None:
        return PlainTextResponse("ok")
    return JSONResponse({"status": "not live", "reason": reason}, status_code=503)


async def readyz(review: ReviewApp, request: Request) -> Response:
    """200 when the database answers and the feed is storing requests; else 503 with the reasons."""
    reasons = await review.health.not_ready() if review.health is not None else []
    body = {"status": "not ready" if reasons else "ready", "reasons": reasons}
    return JSONResponse(body, status_code=503 if reasons else 200)


# --- the app -----------------------------------------------------------------------------------


def build_app(review: ReviewApp, session_secret: str) -> Starlette:
    def bind(fn: Callable[[ReviewApp, Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await fn(review, request)

        return endpoint

    static = StaticFiles(directory=str(resources.files("pairjudge.streams.review") / "static"))
    routes = [
        Route("/login", bind(login_form), methods=["GET"]),
        Route("/login", bind(login), methods=["POST"]),
        Route("/logout", guarded(review, "reviewer", logout, write=True), methods=["POST"]),
        Route("/", guarded(review, "reviewer", review_page), methods=["GET"]),
        Route("/item", guarded(review, "reviewer", next_item), methods=["GET"]),
        Route("/items/{item_id:int}/label", guarded(review, "reviewer", submit_label, write=True), methods=["POST"]),
        Route("/items/{item_id:int}/skip", guarded(review, "reviewer", skip_item, write=True), methods=["POST"]),
        Route("/scores", guarded(review, "reviewer", scores_page), methods=["GET"]),
        Route("/audit", guarded(review, "reviewer", audit_page), methods=["GET"]),
        Route("/audit/live", guarded(review, "reviewer", audit_live), methods=["GET"]),
        Route("/operators", guarded(review, "operator", operators_page), methods=["GET"]),
        Route("/operators/control", guarded(review, "operator", set_control, write=True), methods=["POST"]),
        Route("/operators/resume", guarded(review, "operator", resume, write=True), methods=["POST"]),
        # The probes: the only routes served without signing in.
        Route("/livez", bind(livez), methods=["GET"]),
        Route("/healthz", bind(livez), methods=["GET"]),  # the name used before /livez and /readyz
        Route("/readyz", bind(readyz), methods=["GET"]),
        Mount("/static", app=static, name="static"),
    ]
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(
            SessionMiddleware,
            secret_key=session_secret,
            session_cookie="pairjudge_review",
            max_age=review.settings.review.session_max_age_s,
            same_site="strict",
            https_only=review.settings.review.cookie_secure,
        ),
    ]
    return Starlette(routes=routes, middleware=middleware)


def new_review_app(
    settings: Settings,
    store: ReviewStore,
    labels: LabelSink,
    policy: PolicyHolder | None = None,
    scores: ScoresFeed | None = None,
    audit: AuditFeed | None = None,
) -> ReviewApp:
    users = Users(User(u.name, u.role, u.password_hash.get_secret_value()) for u in settings.review.resolved_users())
    limiter = LoginLimiter(settings.review.login_max_failures, settings.review.login_window_s)
    return ReviewApp(settings, store, labels, users, limiter, _templates(), policy, scores, ReviewHealth(store), audit)
