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

The route table, the role guard, the CSRF check and every handler it guards sit together here, so one
reading shows that no write route escapes the guard; what each page shows (the template contexts, pure
reads) is ``streams.review.views``'s.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pairjudge.schemas import TIE, HumanLabel
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.live import PolicyHolder, publish_control, publish_tiebreak_on
from pairjudge.streams.review.auth import LoginLimiter, Role, User, Users
from pairjudge.streams.review.kafka import AuditFeed, LabelSink, ScoresFeed
from pairjudge.streams.review.probes import ReviewHealth
from pairjudge.streams.review.read_api import ReadApi, api_routes
from pairjudge.streams.review.store import ReviewStore, StaleClaim
from pairjudge.streams.review.tokens import TokenFile
from pairjudge.streams.review.views import (
    CONTROLS,
    TIE_KINDS,
    audit_context,
    controls_context,
    filter_query,
    filters_of,
    glossary_context,
    guard_context,
    item_context,
    score_boards,
    series_rows,
    templates,
    tiebreak_off_rows,
    tiebreak_on_rows,
)

log = logging.getLogger(__name__)

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
    #: The read API (``/api/v1``, bearer tokens): the same feeds, for programs.
    read_api: ReadApi | None = None


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
        # Not signed in (yet): information, not an error.
        return _login_page(app, request, notice=message, status=401)
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


def _login_page(
    app: ReviewApp, request: Request, error: str | None = None, status: int = 200, *, notice: str | None = None
) -> Response:
    return app.templates.TemplateResponse(
        request,
        "login.html",
        {"csrf": csrf_token(request), "error": error, "notice": notice, "user": None},
        status_code=status,
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


async def _claimed_context(app: ReviewApp, request: Request, user: User) -> dict[str, Any]:
    """Claim the reviewer's next item under the request's filters; the context both views render."""
    filters = filters_of(request)
    item = await app.store.claim_next(user.name, filters, app.settings.review.claim_ttl_s)
    stats = await app.store.stats(filters, user.name)
    return {
        "user": user,
        "csrf": csrf_token(request),
        "filters": filters,
        "filter_query": filter_query(filters),
        "stats": stats,
        "mine": stats.mine,
        **item_context(item),
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
    query = filter_query(filters_of(request))
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
        "guard": guard_context(app.settings.audit),
        "series": series_rows(app.audit, app.settings.audit.min_labels),
        "tiebreaks_off": tiebreak_off_rows(holder.tiebreaks if holder is not None else {}, app.audit),
        "tiebreaks_on": tiebreak_on_rows(holder.tiebreaks if holder is not None else {}, app.audit),
    }
    return app.templates.TemplateResponse(request, "operators.html", context)


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


async def tiebreak_on(app: ReviewApp, request: Request, user: User) -> Response:
    """Switch a series' tie-break back on (``pairjudge control tiebreak-on``), recorded with the operator's name and
    reason; only a series whose tie-break the audit switched off."""
    form = await request.form()
    series, why = str(form.get("series", "")).strip(), str(form.get("why", "")).strip()
    switched_off = app.policy.tiebreaks.get(series) if app.policy is not None else None
    if switched_off is None or not switched_off.switched_off:
        return _deny(app, request, 400, "That series' tie-break is not switched off.")
    if not why:
        return _deny(app, request, 400, "Say what changed: it is kept with your name.")
    update = await publish_tiebreak_on(app.settings, series, f"{user.name} (review UI): {why[:150]}")
    await _tiebreak_seen(app, series, update.updated_at)
    name = tiebreak_off_rows({series: switched_off}, app.audit)[0]["name"]
    return await operators_page(
        app,
        request,
        user,
        f"The tie-break of {name} is switched back on by {user.name}; the audit judges it afresh from now on.",
    )


async def _tiebreak_seen(app: ReviewApp, series: str, at: datetime) -> None:
    """Wait (briefly) until the control follower has read the "on" record, so the page shows it."""

    def applied(holder: PolicyHolder) -> bool:
        record = holder.tiebreaks.get(series)
        return record is not None and record.updated_at >= at

    await _until_applied(app, applied)


async def audit_page(app: ReviewApp, request: Request, user: User) -> Response:
    """The drift audit as it stands, for reviewers: each series' labels, agreement and kappa, beside the
    scoreboards' gates. The page refreshes its figures itself (``/audit/live``, the app's own script)."""
    context = {"user": user, "csrf": csrf_token(request), **audit_context(app.audit, app.scores, app.settings.audit)}
    return app.templates.TemplateResponse(request, "audit.html", context)


async def audit_live(app: ReviewApp, request: Request, user: User) -> Response:
    """The audit view's figures alone (an HTML fragment the page's script swaps in every few seconds)."""
    return app.templates.TemplateResponse(
        request, "_audit.html", audit_context(app.audit, app.scores, app.settings.audit)
    )


async def scores_page(app: ReviewApp, request: Request, user: User) -> Response:
    """Every experiment's scoreboard: the human basis and the judge basis side by side, both gates, the
    splits, and the three charts (inline SVG)."""
    latest = app.scores.latest if app.scores is not None else {}
    context = {"user": user, "csrf": csrf_token(request), "boards": score_boards(latest)}
    return app.templates.TemplateResponse(request, "scores.html", context)


async def glossary_page(app: ReviewApp, request: Request, user: User) -> Response:
    """What the words on the pages mean (the same terms as docs/glossary.md)."""
    context = {"user": user, "csrf": csrf_token(request), **glossary_context()}
    return app.templates.TemplateResponse(request, "glossary.html", context)


async def _seen(app: ReviewApp, key: str, value: float | bool | str) -> None:
    """Wait (briefly) until the control follower has read the update, so the page shows it as live."""
    await _until_applied(app, lambda holder: getattr(holder.current, key) == value)


async def _until_applied(app: ReviewApp, applied: Callable[[PolicyHolder], bool], timeout_s: float = 5.0) -> None:
    """Wait until ``applied`` holds for the service's policy (no follower: at once), or ``timeout_s`` passed."""
    if app.policy is None:
        return
    holder = app.policy
    deadline = asyncio.get_running_loop().time() + timeout_s
    # Polled: the follower applies records as they come and signals only its first catch-up.
    while not applied(holder) and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
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
        Route("/glossary", guarded(review, "reviewer", glossary_page), methods=["GET"]),
        Route("/audit/live", guarded(review, "reviewer", audit_live), methods=["GET"]),
        Route("/operators", guarded(review, "operator", operators_page), methods=["GET"]),
        Route("/operators/control", guarded(review, "operator", set_control, write=True), methods=["POST"]),
        Route("/operators/resume", guarded(review, "operator", resume, write=True), methods=["POST"]),
        Route("/operators/tiebreak-on", guarded(review, "operator", tiebreak_on, write=True), methods=["POST"]),
        # The probes: the only routes served without signing in.
        Route("/livez", bind(livez), methods=["GET"]),
        Route("/healthz", bind(livez), methods=["GET"]),  # the name used before /livez and /readyz
        Route("/readyz", bind(readyz), methods=["GET"]),
        Mount("/static", app=static, name="static"),
        # The read API: bearer tokens, not sessions (streams.review.read_api).
        *(api_routes(review.read_api) if review.read_api is not None else []),
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
    read_api = ReadApi(TokenFile(settings.review.api_tokens_file), scores, audit, policy)
    return ReviewApp(
        settings, store, labels, users, limiter, templates(), policy, scores, ReviewHealth(store), audit, read_api
    )
