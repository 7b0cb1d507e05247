"""Asking a challenger: an OpenAI-compatible chat completions endpoint or Anthropic's Messages API, with the judges'
HTTP machinery.

``JSONEndpoint`` (``streams.judges.http``) does the HTTP: timeouts, a concurrency cap, a body cap, retries with
backoff on a failed connection, a timeout, a 429 or a 5xx (``Retry-After`` honoured), and the key kept to its
origin and scrubbed from every message. On top, an answer a pair cannot hold (refused, filtered, empty,
unreadable: ``agents.shadow.read_reply``) is asked again, ``attempts`` times in all with backoff between, and a
challenger that stays down is asked again the same way; then ``ChallengerFailed`` names the last reason. A 4xx
that no retry fixes (a bad key, a request over the model's context) fails at once. The challenger's tool calls
are read as its answer and never run.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from pairjudge.agents.errors import JudgeRejected, JudgeUnavailable
from pairjudge.agents.shadow import ChallengerReply, Unusable, read_reply
from pairjudge.agents.shadow_anthropic import messages_request, read_messages_reply
from pairjudge.schemas.experiments import Challenger
from pairjudge.streams.config.sections import ShadowSettings
from pairjudge.streams.judges.http import JSONEndpoint
from pairjudge.streams.judges.wire import RetryPolicy

log = logging.getLogger(__name__)

#: The ``anthropic-version`` header an Anthropic challenger is asked with.
ANTHROPIC_VERSION = "2023-06-01"


class ChallengerFailed(Exception):
    """No usable answer after every attempt: ``reason`` is the dead letter's (``challenger_unavailable``,
    ``challenger_rejected``, or ``agents.shadow.Unusable``'s), ``asks`` how many were made."""

    def __init__(self, reason: str, detail: str, *, asks: int) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.asks = asks


class ChallengerClient:
    """One experiment's challenger. Safe to use concurrently; ``aclose()`` when done."""

    def __init__(self, challenger: Challenger, settings: ShadowSettings, *, env: Mapping[str, str] | None = None):
        environ = os.environ if env is None else env
        key = environ.get(challenger.api_key_env, "") if challenger.api_key_env else ""
        if challenger.api_key_env and not key:
            raise ValueError(f"the challenger's key variable {challenger.api_key_env} is not set")
        secret = SecretStr(key) if key else None
        self.model = challenger.model
        self._settings = settings
        self._policy = RetryPolicy(
            max_retries=settings.http_retries,
            backoff_initial=settings.backoff_s,
            backoff_max=settings.backoff_max_s,
        )
        self.where = urlsplit(challenger.base_url).netloc or challenger.base_url
        root = challenger.base_url.rstrip("/")
        self._anthropic = challenger.api == "anthropic"
        if self._anthropic:
            url = root.removesuffix("/v1") + "/v1/messages"
            headers = {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": key} if key else {})}
        else:
            url = root + "/chat/completions"
            headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._endpoint = JSONEndpoint(
            url=url,
            label=f"challenger {challenger.model} at {self.where}",
            policy=self._policy,
            connect_timeout=settings.connect_timeout_s,
            read_timeout=settings.timeout_s,
            max_concurrency=settings.max_concurrency,
            headers=headers or None,
            secrets=(secret,),
            allow_cleartext_secrets=settings.allow_cleartext_key,
        )

    async def aclose(self) -> None:
        await self._endpoint.aclose()

    async def ask(self, body: Mapping[str, Any]) -> tuple[ChallengerReply, int]:
        """The challenger's usable reply to ``body`` and how many asks it took; ``ChallengerFailed`` otherwise."""
        attempts = self._settings.attempts
        last: tuple[str, str] = ("challenger_unavailable", "not asked")
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                await asyncio.sleep(self._policy.backoff(attempt - 1))
            try:
                if self._anthropic:
                    posted = await self._endpoint.post(messages_request(dict(body)))
                    return read_messages_reply(posted.body), attempt
                posted = await self._endpoint.post(body)
                return read_reply(posted.body), attempt
            except Unusable as exc:
                last = (exc.reason, exc.detail)
            except JudgeRejected as exc:
                raise ChallengerFailed("challenger_rejected", str(exc), asks=attempt) from None
            except JudgeUnavailable as exc:
                last = ("challenger_unavailable", str(exc))
            log.warning("challenger %s at %s, ask %d of %d: %s", self.model, self.where, attempt, attempts, last[1])
        raise ChallengerFailed(last[0], f"{last[1]} (after {attempts} asks)", asks=attempts)
