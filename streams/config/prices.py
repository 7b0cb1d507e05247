"""A model's prices, as the settings declare them (``PAIRJUDGE_JUDGE__PRICES``, ``[[tiers]]`` prices).

A settings shape, kept with the settings so that ``streams.config`` depends on nothing above it; the judges'
cost accounting (``streams.judges.cost``) bills calls with it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

#: Prices are per million tokens.
_MTOK = 1_000_000


class ModelPrice(BaseModel):
    """One model's prices in US dollars per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: US dollars per million input tokens (those the cached rates below do not cover).
    input_per_mtok: float = Field(ge=0)
    #: US dollars per million output tokens.
    output_per_mtok: float = Field(ge=0)
    #: Input tokens read from the provider's prompt cache; None bills them as ordinary input.
    cached_input_per_mtok: float | None = Field(default=None, ge=0)
    #: Input tokens written to the provider's prompt cache (Anthropic charges a premium); None bills
    #: them as ordinary input.
    cache_write_input_per_mtok: float | None = Field(default=None, ge=0)

    def cost(
        self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0, cache_write_tokens: int = 0
    ) -> float:
        """Dollars for one call. The cached and written counts are parts of ``input_tokens``."""
        read = min(max(cached_input_tokens, 0), input_tokens)
        written = min(max(cache_write_tokens, 0), input_tokens - read)
        plain = input_tokens - read - written
        read_rate = self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        write_rate = self.input_per_mtok if self.cache_write_input_per_mtok is None else self.cache_write_input_per_mtok
        return (
            plain * self.input_per_mtok + read * read_rate + written * write_rate + output_tokens * self.output_per_mtok
        ) / _MTOK
