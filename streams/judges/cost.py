"""Token cost accounting: a price table and a ``Judge`` wrapper that prices every reply.

Prices are US dollars per million tokens, per model name. A model missing from the table has an
*unknown* cost (``None``), never zero: a dashboard summing ``cost_usd`` must not show a paid judge as
free because nobody entered its price.

Which name is looked up: the model the server says answered (that is what is billed, and providers
report dated snapshots such as ``gpt-4o-2024-08-06``), then the model requested. So the table may
list either; an entry for the requested alias covers its snapshots.

Provider prompt caching: ``input_tokens`` counts all input, and an adapter that knows the split puts
it in ``JudgeResponse.extra``: tokens *read* from the provider's prompt cache under
``"cached_input_tokens"`` (or Anthropic's ``"cache_read_input_tokens"``), billed at
``cached_input_per_mtok``; tokens *written* to it under ``"cache_creation_input_tokens"`` (Anthropic),
billed at ``cache_write_input_per_mtok``. Either rate falls back to the input price when the table has
none, and input an adapter does not split is billed at the input price.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from pairjudge.agents.judge import Judge, JudgeRequest, JudgeResponse, JudgeWrapper
from pairjudge.streams.config.prices import ModelPrice as ModelPrice  # the settings' shape; billed here

#: ``JudgeResponse.extra`` keys for provider-side prompt-cache reads and writes (see the module docstring).
CACHED_INPUT_TOKENS = "cached_input_tokens"
CACHE_READ_KEYS = (CACHED_INPUT_TOKENS, "cache_read_input_tokens")
CACHE_WRITE_KEY = "cache_creation_input_tokens"


def usage_count(mapping: object, key: str) -> int | None:
    """A token count from a provider's ``usage`` object: a non-negative int, else ``None`` (unreported).

    The single reading of usage counts for every adapter. A count that is missing, not an integer
    (a bool, a float, a string) or negative is garbage, not a number to bill: ``None`` keeps the cost
    unknown, where a negative count would price a call as a discount.
    """
    if not isinstance(mapping, dict):
        return None
    value = mapping.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class PriceTable(BaseModel):
    """Prices by model name (``PAIRJUDGE_JUDGE__PRICES`` as JSON: ``{"gpt-4o": {"input_per_mtok": 2.5, ...}}``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prices: dict[str, ModelPrice] = Field(default_factory=dict)

    @classmethod
    def of(cls, prices: Mapping[str, ModelPrice]) -> PriceTable:
        return cls(prices=dict(prices))

    def price_of(self, *models: str | None) -> ModelPrice | None:
        """The first of ``models`` that the table lists."""
        for model in models:
            if model and model in self.prices:
                return self.prices[model]
        return None

    def cost(self, response: JudgeResponse, requested_model: str) -> float | None:
        """What ``response`` cost: 0.0 for a cached reply, None when the price or the token counts are unknown."""
        if response.cached:
            return 0.0  # served without a judge call
        price = self.price_of(response.model, requested_model)
        if price is None or response.input_tokens is None or response.output_tokens is None:
            return None
        read = next((n for key in CACHE_READ_KEYS if (n := _count(response.extra.get(key))) is not None), 0)
        written = _count(response.extra.get(CACHE_WRITE_KEY)) or 0
        return price.cost(response.input_tokens, response.output_tokens, read, written)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class PricedJudge(JudgeWrapper):
    """Wraps any judge and sets ``JudgeResponse.cost_usd`` on every reply from the price table."""

    def __init__(self, inner: Judge, table: PriceTable) -> None:
        super().__init__(inner)
        self._table = table

    @property
    def table(self) -> PriceTable:
        return self._table

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        response = await self._inner.complete(request)
        return dataclasses.replace(response, cost_usd=self._table.cost(response, self._inner.identity.model))
