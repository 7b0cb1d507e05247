"""Alerts to a webhook: one JSON POST per alert, retried in the background, never blocking judging.

Two bodies (``AlertWebhook``'s ``body_format``):

- ``json``, the generic one: a JSON object that both common receiver styles read. Slack-style incoming
  webhooks take its ``text``; receivers written for Alertmanager's webhook payload take ``version``, ``status``
  and ``alerts`` (each with ``labels``, ``annotations`` and ``startsAt``; the annotations carry the plain title,
  the series in words and, when configured, ``runbook_url`` and ``page_url``).
- ``slack``: a Slack incoming webhook's message in Block Kit (``alert_views.slack_body``): the plain title, the
  series in words, the value against its bound, buttons to its page and its runbook.

A rate limit (``rate_window_s``) lets one alert per kind and series through per window; the ones held back are
counted, and the next one sent says how many. The audit raises a bound's alert once per window already; the
limit is for the alerts that recur (a judge down, a spending cap), and for many series breaking at once.

``AlertWebhook.submit`` only queues: the audit agent that raised the alert goes on at once. A bounded
queue keeps a dead receiver from growing memory (the oldest alert is dropped, and that is logged: alerts
stay on ``pairjudge.audit`` and in the logs whatever the webhook does).

What becomes of every alert let through is counted on ``pairjudge.alert.webhook`` (by ``outcome``:
``delivered``; ``lost``, its attempts used up or the worker stopped before it went; ``dropped``, pushed out of a
full queue; ``held_back`` by the rate limit), and each one not delivered is logged with its kind and series: none
goes missing without a trace. A receiver that answers after the timeout may have taken the alert: it is tried
again, so a receiver can see one alert twice (at least once, never silently none).
tests/integration/test_alert_webhook_outage_http.py takes the receiver away mid-run and brings it back.

The URL often carries a token (a Slack webhook's path is its secret), so it is read from the environment or a
secret file and only its scheme and host are ever logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, Literal

import httpx
from opentelemetry import metrics
from pydantic import SecretStr
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from pairjudge.schemas.audit import Alert
from pairjudge.streams.security.cleartext import check_cleartext
from pairjudge.streams.telemetry.alert_views import CRITICAL_KINDS as CRITICAL_KINDS  # re-exported: it was here
from pairjudge.streams.telemetry.alert_views import AlertLinks, slack_body, title, value_text

log = logging.getLogger(__name__)

BodyFormat = Literal["json", "slack"]


def webhook_body(
    alert: Alert, *, series: str | None = None, links: AlertLinks | None = None, held_back: int = 0
) -> dict[str, Any]:
    """The generic POST body for ``alert`` (see the module docstring); ``series`` is the series in words."""
    severity = "critical" if alert.kind in CRITICAL_KINDS else "warning"
    labels = {"alertname": alert.kind, "series": alert.series, "severity": severity, "service": "pairjudge"}
    annotations = {
        "summary": alert.message,
        "title": title(alert),
        "series_name": series or alert.series,
        "value": f"{alert.value:g}",
        "threshold": f"{alert.threshold:g}",
        "value_text": value_text(alert),
    }
    links = links or AlertLinks()
    if (page := links.page(alert)) is not None:
        annotations["page_url"] = page
    if (runbook := links.runbook(alert)) is not None:
        annotations["runbook_url"] = runbook
    if held_back:
        annotations["held_back"] = str(held_back)
    return {
        "text": f"[pairjudge] {severity}: {title(alert)} ({alert.kind}) on {alert.series}: {alert.message}",
        "version": "4",
        "status": "firing",
        "receiver": "pairjudge",
        "groupLabels": {"alertname": alert.kind},
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": annotations,
                "startsAt": alert.raised_at.isoformat(),
            }
        ],
    }


def redacted(url: str) -> str:
    """Scheme and host only: the path and query of a webhook URL are often its secret."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}"


class AlertLimiter:
    """One alert per kind and series per ``window_s``; the others are counted against the next one let through.
    ``window_s`` 0 lets every alert through."""

    def __init__(self, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._window_s = window_s
        self._clock = clock
        self._last: dict[tuple[str, str], float] = {}
        self._held: dict[tuple[str, str], int] = {}

    def admit(self, alert: Alert) -> int | None:
        """None when ``alert`` is held back; else how many like it were held back since the last one let through."""
        if self._window_s <= 0:
            return 0
        key, now = (alert.kind, alert.series), self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._window_s:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        return status in (408, 425, 429) or status >= 500
    return isinstance(exc, httpx.TransportError)


class _RedactUrl(logging.Filter):
    """Rewrites any record of the ``httpx`` logger that spells out the webhook URL: httpx logs every
    request's full URL at INFO, and a worker logs at INFO."""

    def __init__(self, secret: str) -> None:
        super().__init__()
        self._secret = secret

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self._secret in message:
            record.msg = message.replace(self._secret, redacted(self._secret) + "/[REDACTED]")
            record.args = ()
        return True


class AlertWebhook:
    """POSTs alerts to one URL from a background task; ``submit`` never waits."""

    def __init__(
        self,
        url: SecretStr,
        *,
        attempts: int = 5,
        timeout_s: float = 5.0,
        queue_size: int = 100,
        backoff_s: float = 1.0,
        allow_cleartext: bool = False,
        body_format: BodyFormat = "json",
        rate_window_s: float = 0.0,
        links: AlertLinks | None = None,
        series_name: Callable[[str], str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        # The start-up check (streams.config.settings.check_webhook_url) again, for webhooks built by other
        # paths: the URL's token never goes over plain HTTP off this machine unless allowed.
        check_cleartext(
            url.get_secret_value(),
            allowed=allow_cleartext,
            what="the alert webhook URL (it carries its token)",
            setting="PAIRJUDGE_AUDIT__WEBHOOK_URL",
            allow_setting="PAIRJUDGE_AUDIT__WEBHOOK_ALLOW_CLEARTEXT",
        )
        self._url = url
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._timeout = httpx.Timeout(timeout_s)
        self._queue: asyncio.Queue[tuple[Alert, int]] = asyncio.Queue(maxsize=queue_size)
        self._task: asyncio.Task[None] | None = None
        self._format = body_format
        self._limiter = AlertLimiter(rate_window_s, clock)
        self._links = links or AlertLinks()
        # The series in words (experiment · rubric · judge): the composition root knows how to name one.
        self._series_name = series_name or (lambda key: key)
        self.delivered = 0
        self.failed = 0
        self.dropped = 0
        #: Alerts the rate limit kept back (each counted in the next one sent for its kind and series).
        self.held_back = 0
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("pairjudge.alerts")
        self._outcomes = meter.create_counter(
            "pairjudge.alert.webhook",
            description="Alerts for the webhook by what became of them: delivered, lost, dropped, held_back",
        )
        #: The alert being sent (or waiting between attempts), so a stop can say it was lost.
        self._sending: Alert | None = None
        self._redact = _RedactUrl(url.get_secret_value())
        logging.getLogger("httpx").addFilter(self._redact)

    @property
    def where(self) -> str:
        return redacted(self._url.get_secret_value())

    def body(self, alert: Alert, held_back: int = 0) -> dict[str, Any]:
        """The POST body for ``alert`` in this webhook's format."""
        series = self._series_name(alert.series)
        if self._format == "slack":
            return slack_body(alert, series=series, links=self._links, held_back=held_back)
        return webhook_body(alert, series=series, links=self._links, held_back=held_back)

    def submit(self, alert: Alert) -> None:
        """Queue ``alert`` for delivery (unless the rate limit holds it back); when the queue is full, the oldest
        waiting alert gives way."""
        held = self._limiter.admit(alert)
        if held is None:
            self.held_back += 1
            self._count("held_back", alert)
            log.info(
                "alert webhook %s: held back a %s alert (one per kind and series a window)", self.where, alert.kind
            )
            return
        if self._queue.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                old, _ = self._queue.get_nowait()
                self._queue.task_done()
                self.dropped += 1
                self._count("dropped", old)
                log.error(
                    "alert webhook %s is behind; dropped the queued %s alert on %s (it is on the audit topic)",
                    self.where,
                    old.kind,
                    old.series,
                )
        self._queue.put_nowait((alert, held))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._deliver_all(), name="alert-webhook")

    async def drain(self) -> None:
        """Wait until every queued alert was delivered or given up (tests, and a clean stop)."""
        await self._queue.join()

    async def aclose(self) -> None:
        """Stop sending; alerts not delivered yet are counted and logged as lost (they stay on the audit topic)."""
        logging.getLogger("httpx").removeFilter(self._redact)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        unsent = [self._sending] if self._sending is not None else []
        while not self._queue.empty():
            unsent.append(self._queue.get_nowait()[0])
            self._queue.task_done()
        self._sending = None
        for alert in unsent:
            self._lose(alert, "stopped before it was delivered")

    def _count(self, outcome: str, alert: Alert) -> None:
        self._outcomes.add(1, {"outcome": outcome, "pairjudge.alert": alert.kind})

    def _lose(self, alert: Alert, why: str) -> None:
        self.failed += 1
        self._count("lost", alert)
        log.error(
            "alert webhook %s: could not deliver the %s alert (%s) on %s", self.where, alert.kind, why, alert.series
        )

    async def _deliver_all(self) -> None:
        # No redirects: a redirect would carry the alert (and any token in the body) somewhere else.
        async with httpx.AsyncClient(timeout=self._timeout, follow_redirects=False) as client:
            while not self._queue.empty():
                alert, held = await self._queue.get()
                self._sending = alert
                try:
                    await self._deliver(client, alert, held)
                    self._sending = None  # left set when a stop cancels the sending: aclose counts it lost
                finally:
                    self._queue.task_done()

    async def _deliver(self, client: httpx.AsyncClient, alert: Alert, held: int) -> None:
        body = self.body(alert, held)
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self._attempts),
                wait=wait_exponential_jitter(
                    multiplier=self._backoff_s, max=30 * self._backoff_s, jitter=self._backoff_s
                ),
                retry=retry_if_exception(_retryable),
                reraise=True,
            ):
                with attempt:
                    response = await client.post(self._url.get_secret_value(), json=body)
                    response.raise_for_status()
        except (httpx.HTTPError, OSError) as exc:
            # The exception's text may carry the URL (httpx puts it in messages): name only its type.
            status = exc.response.status_code if isinstance(exc, httpx.HTTPStatusError) else None
            self._lose(alert, f"{type(exc).__name__}{f', HTTP {status}' if status else ''}")
            return
        self.delivered += 1
        self._count("delivered", alert)
