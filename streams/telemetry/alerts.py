"""Alerts to a webhook: one plain JSON POST per alert, retried in the background, never blocking judging.

The body is one JSON object that both common receiver styles read: Slack-style incoming webhooks take
its ``text``; receivers written for Alertmanager's webhook payload take ``version``, ``status`` and
``alerts`` (each with ``labels``, ``annotations`` and ``startsAt``). Nothing else is needed on either side.

``AlertWebhook.submit`` only queues: the audit agent that raised the alert goes on at once. A bounded
queue keeps a dead receiver from growing memory (the oldest alert is dropped, and that is logged: alerts
stay on ``pairjudge.audit`` and in the logs whatever the webhook does). The URL often carries a token (a
Slack webhook's path is its secret), so it is read from the environment or a secret file and only its
scheme and host are ever logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
from typing import Any

import httpx
from pydantic import SecretStr
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from pairjudge.schemas.audit import ALERT_TITLES, Alert
from pairjudge.streams.security.cleartext import check_cleartext

log = logging.getLogger(__name__)

#: Alerts that pause automation, or say the judge is not what was asked for: "critical"; others "warning".
CRITICAL_KINDS = frozenset({"kappa_below_threshold", "judge_model_mismatch", "judge_rejected", "canary_accuracy_low"})


def webhook_body(alert: Alert) -> dict[str, Any]:
    """The POST body for ``alert`` (see the module docstring)."""
    severity = "critical" if alert.kind in CRITICAL_KINDS else "warning"
    labels = {"alertname": alert.kind, "series": alert.series, "severity": severity, "service": "pairjudge"}
    annotations = {
        "summary": alert.message,
        "value": f"{alert.value:g}",
        "threshold": f"{alert.threshold:g}",
    }
    return {
        "text": f"[pairjudge] {severity}: {ALERT_TITLES.get(alert.kind, alert.kind)} ({alert.kind}) on {alert.series}: "
        f"{alert.message}",
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
        self._queue: asyncio.Queue[Alert] = asyncio.Queue(maxsize=queue_size)
        self._task: asyncio.Task[None] | None = None
        self.delivered = 0
        self.failed = 0
        self.dropped = 0
        self._redact = _RedactUrl(url.get_secret_value())
        logging.getLogger("httpx").addFilter(self._redact)

    @property
    def where(self) -> str:
        return redacted(self._url.get_secret_value())

    def submit(self, alert: Alert) -> None:
        """Queue ``alert`` for delivery; when the queue is full, the oldest waiting alert gives way."""
        if self._queue.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                old = self._queue.get_nowait()
                self._queue.task_done()
                self.dropped += 1
                log.warning("alert webhook %s is behind; dropped the queued %s alert", self.where, old.kind)
        self._queue.put_nowait(alert)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._deliver_all(), name="alert-webhook")

    async def drain(self) -> None:
        """Wait until every queued alert was delivered or given up (tests, and a clean stop)."""
        await self._queue.join()

    async def aclose(self) -> None:
        logging.getLogger("httpx").removeFilter(self._redact)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _deliver_all(self) -> None:
        # No redirects: a redirect would carry the alert (and any token in the body) somewhere else.
        async with httpx.AsyncClient(timeout=self._timeout, follow_redirects=False) as client:
            while not self._queue.empty():
                alert = await self._queue.get()
                try:
                    await self._deliver(client, alert)
                finally:
                    self._queue.task_done()

    async def _deliver(self, client: httpx.AsyncClient, alert: Alert) -> None:
        body = webhook_body(alert)
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
            self.failed += 1
            # The exception's text may carry the URL (httpx puts it in messages): name only its type.
            status = exc.response.status_code if isinstance(exc, httpx.HTTPStatusError) else None
            log.error(
                "alert webhook %s: could not deliver the %s alert (%s%s)",
                self.where,
                alert.kind,
                type(exc).__name__,
                f", HTTP {status}" if status else "",
            )
            return
        self.delivered += 1
