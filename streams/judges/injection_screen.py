"""The injection screen over HTTP: a classifier that reads one untrusted text, says if it addresses the evaluator.

The contract (docs/guides/prompt-injection.md#the-screen), kept small so any classifier can sit behind it::

    POST <url>   {"text": "<one output, turn or task turn>"}
    200          {"flagged": true, "score": 0.93, "label": "addresses the evaluator"}

``flagged`` may be left out when ``score`` (0-1) is given: the text is flagged when the score reaches
``InjectionScreenSettings.threshold``. ``label`` is optional, a short reason shown to the reviewer.

Timeouts, connection errors and 5xx answers are retried (``JSONEndpoint``, the judges' own POST);
still failing, or answering something that is not the contract, the screen raises
``agents.injection_screen.ScreenUnavailable`` and the policy decides (``screen_on_failure``; fail
closed by default). Every failure is logged, so a screen that is down is never silent.
"""

from __future__ import annotations

import json
import logging
from typing import Final

from pydantic import SecretStr

from pairjudge.agents.errors import JudgeRejected, JudgeUnavailable
from pairjudge.agents.injection_screen import ScreenUnavailable, ScreenVerdict
from pairjudge.streams.config.sections import InjectionScreenSettings
from pairjudge.streams.judges.http import JSONEndpoint
from pairjudge.streams.judges.wire import RetryPolicy

__all__ = ["HttpInjectionScreen"]

log = logging.getLogger(__name__)

#: A label longer than this is cut: it travels into review requests as a flag's excerpt.
_MAX_LABEL: Final = 60


class HttpInjectionScreen:
    """``agents.injection_screen.InjectionScreen`` over the JSON contract above. ``aclose()`` when done."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 5.0,
        max_retries: int = 2,
        threshold: float = 0.5,
        api_key: SecretStr | None = None,
        backoff_initial: float = 0.25,
        name: str = "screen",
    ) -> None:
        self._name = name
        self._threshold = threshold
        headers = {"Authorization": f"Bearer {api_key.get_secret_value()}"} if api_key is not None else None
        self._endpoint = JSONEndpoint(
            url=url,
            label=f"injection screen {name}",
            policy=RetryPolicy(max_retries=max_retries, backoff_initial=backoff_initial, backoff_max=2.0),
            connect_timeout=timeout_s,
            read_timeout=timeout_s,
            attempt_timeout=timeout_s,
            max_response_bytes=64_000,
            headers=headers,
            secrets=(api_key,),
        )

    @classmethod
    def from_settings(cls, settings: InjectionScreenSettings) -> HttpInjectionScreen:
        if settings.url is None:
            raise ValueError("injection_screen.url is not set")
        return cls(
            settings.url,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            threshold=settings.threshold,
            api_key=settings.api_key,
        )

    @property
    def name(self) -> str:
        return self._name

    async def screen(self, text: str) -> ScreenVerdict:
        try:
            result = await self._endpoint.post({"text": text})
        except (JudgeUnavailable, JudgeRejected) as exc:
            log.warning("injection screen %s unavailable: %s", self._name, exc)
            raise ScreenUnavailable(str(exc)) from exc
        try:
            return self._verdict(json.loads(result.body))
        except (ValueError, TypeError) as exc:
            detail = f"answer is not the screen contract: {exc}"
            log.warning("injection screen %s unavailable: %s", self._name, detail)
            raise ScreenUnavailable(detail) from exc

    def _verdict(self, body: object) -> ScreenVerdict:
        if not isinstance(body, dict):
            raise TypeError("expected a JSON object")
        score = body.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1):
            raise ValueError("score must be a number within [0, 1]")
        flagged = body.get("flagged")
        if flagged is None:
            if score is None:
                raise ValueError("neither flagged nor score")
            flagged = score >= self._threshold
        if not isinstance(flagged, bool):
            raise TypeError("flagged must be true or false")
        label = body.get("label", "")
        if not isinstance(label, str):
            raise TypeError("label must be a string")
        return ScreenVerdict(flagged, None if score is None else float(score), label[:_MAX_LABEL])

    async def aclose(self) -> None:
        await self._endpoint.aclose()
