"""A shadow experiment: which captures join it, what share of them, which challenger answers them, and how the
pairs it makes are judged (docs/guides/production-traffic.md).

The shadow stage (``streams.shadow``) reads the experiments from a file named by ``PAIRJUDGE_SHADOW__EXPERIMENTS_FILE``
(TOML, YAML or JSON: a list under ``experiments``). Each capture that matches an experiment and is drawn into its
share is asked again of the experiment's challenger, and the two replies become one ``CandidatePair``.

Pure contracts: no I/O. The challenger's key is never in the file: ``api_key_env`` names the environment variable
that holds it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from pairjudge.schemas._base import Contract
from pairjudge.schemas.pair import RiskLevel
from pairjudge.schemas.rubric import Rubric, TieBreakWeights

__all__ = ["Challenger", "Experiment", "ExperimentFile", "ExperimentId", "Selector"]

#: An experiment's id: it names the pairs' ``metadata.experiment_id`` (the scoreboard's and the spending caps'
#: experiment) and is part of every pair id the experiment makes.
ExperimentId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]

#: Sampling parameters a challenger may override (OpenAI chat's names).
OVERRIDABLE_PARAMS = frozenset(
    {"temperature", "top_p", "max_tokens", "seed", "presence_penalty", "frequency_penalty", "stop"}
)


class Selector(Contract):
    """Which captures join: every listed criterion must hold (an empty list holds for every capture).

    ``models`` against the model the request named, ``routes`` against the app's route, ``tags``: the capture
    carries at least one of them; ``headers``: for each header named, the capture's value is one of those listed.
    """

    models: tuple[str, ...] = ()
    routes: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    headers: dict[str, tuple[str, ...]] = Field(default_factory=dict)


class Challenger(Contract):
    """Who answers the capture's request again: an OpenAI-compatible chat completions endpoint or Anthropic's
    Messages API, and a model, with an optional system prompt and sampling parameters of its own (a new prompt
    version is a challenger too).
    """

    api: Literal["openai", "anthropic"] = "openai"
    #: The endpoint's base URL: for ``openai`` e.g. ``https://api.openai.com/v1`` (``/chat/completions`` is appended),
    #: for ``anthropic`` the API root, ``https://api.anthropic.com`` (``/v1/messages`` is appended).
    base_url: str = Field(min_length=1, max_length=500)
    model: str = Field(min_length=1, max_length=200)
    #: The environment variable holding the API key ("" for a local server without one).
    api_key_env: str = Field(default="", max_length=100)
    #: Replaces the request's system (or developer) turns, or adds one when it had none.
    system_prompt: str | None = Field(default=None, max_length=50_000)
    #: Overrides the request's sampling parameters (``OVERRIDABLE_PARAMS``).
    params: dict[str, Any] = Field(default_factory=dict)
    #: The challenger's prompt version, as the pair's candidate source names it.
    prompt_version: str = Field(default="", max_length=100)
    #: US dollars per million input and output tokens, for the spending caps (0: not priced, not counted).
    usd_per_million_input: float = Field(default=0.0, ge=0.0)
    usd_per_million_output: float = Field(default=0.0, ge=0.0)

    @model_validator(mode="after")
    def _known_params(self) -> Challenger:
        unknown = sorted(set(self.params) - OVERRIDABLE_PARAMS)
        if unknown:
            raise ValueError(f"params may override {sorted(OVERRIDABLE_PARAMS)} only, not {unknown}")
        return self


class Experiment(Contract):
    """One champion-challenger experiment on production traffic."""

    id: ExperimentId
    #: The share of matching captures asked of the challenger, drawn by capture id (stable across redeliveries).
    share: float = Field(default=1.0, ge=0.0, le=1.0)
    #: A paused experiment makes no pairs (live: ``pairjudge control set``, docs/guides/production-traffic.md).
    paused: bool = False
    select: Selector = Field(default_factory=Selector)
    challenger: Challenger
    rubric: Rubric
    tiebreak: TieBreakWeights | None = None
    risk_level: RiskLevel | None = None


class ExperimentFile(Contract):
    """The experiments file's whole content."""

    experiments: tuple[Experiment, ...] = ()

    @model_validator(mode="after")
    def _distinct_ids(self) -> ExperimentFile:
        ids = [e.id for e in self.experiments]
        if len(set(ids)) != len(ids):
            raise ValueError("two experiments share an id")
        return self
