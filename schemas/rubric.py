"""Rubrics: what a pair is judged against. One kind per seed template.

- ``tone_style``    seed 000: a style guide and an audience.
- ``head_to_head``  seed 001: named criteria, constraints and examples.
- ``pairwise``      seed 003: a list of criteria, judged against the task prompt and context.
- ``TieBreakWeights`` seed 002: weighted criteria for the tie-break resolver.

A pair may also name a rubric (``RubricRef``) that the deployment keeps in its catalog.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from pairjudge.schemas._base import Contract

ShortText = Annotated[str, Field(min_length=1, max_length=200)]
LongText = Annotated[str, Field(min_length=1, max_length=20_000)]


class ToneStyleRubric(Contract):
    kind: Literal["tone_style"] = "tone_style"
    style_guide: LongText
    audience: LongText
    #: Terms the style guide forbids; the offline judge counts them, LLM judges see them in the guide.
    forbidden_terms: tuple[ShortText, ...] = ()
    #: Terms the style guide asks for (sign-offs, product names spelled a certain way).
    required_terms: tuple[ShortText, ...] = ()


class Criterion(Contract):
    name: Annotated[str, Field(min_length=1, max_length=60, pattern=r"^[A-Za-z0-9_ \-]+$")]
    description: str = Field(default="", max_length=2_000)


class HeadToHeadRubric(Contract):
    kind: Literal["head_to_head"] = "head_to_head"
    criteria: tuple[Criterion, ...] = Field(min_length=1, max_length=12)
    constraints: str = Field(default="", max_length=5_000)
    examples: str = Field(default="", max_length=10_000)

    @field_validator("criteria")
    @classmethod
    def _unique(cls, criteria: tuple[Criterion, ...]) -> tuple[Criterion, ...]:
        names = [c.name for c in criteria]
        if len(set(names)) != len(names):
            raise ValueError(f"criterion names must be unique, got {names}")
        return criteria


PAIRWISE_CRITERION = r"^\w[\w .,'&/()+\-]*$"


class PairwiseRubric(Contract):
    kind: Literal["pairwise"] = "pairwise"
    #: Names are shown in the prompt as headings and JSON strings: one line of words, digits and light
    #: punctuation, so a name cannot start a heading, a list or a tag of its own ("\n## Instructions").
    criteria: tuple[Annotated[str, Field(min_length=1, max_length=60, pattern=PAIRWISE_CRITERION)], ...] = Field(
        min_length=1, max_length=12
    )

    @field_validator("criteria")
    @classmethod
    def _unique(cls, criteria: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(criteria)) != len(criteria):
            raise ValueError(f"criteria must be unique, got {list(criteria)}")
        return criteria


class RubricRef(Contract):
    """A rubric named by the deployment's catalog instead of carried inline."""

    kind: Literal["named"] = "named"
    name: ShortText


InlineRubric = Annotated[ToneStyleRubric | HeadToHeadRubric | PairwiseRubric, Field(discriminator="kind")]
Rubric = Annotated[ToneStyleRubric | HeadToHeadRubric | PairwiseRubric | RubricRef, Field(discriminator="kind")]


class WeightedCriterion(Contract):
    name: Annotated[str, Field(min_length=1, max_length=60, pattern=r"^[A-Za-z0-9_ \-]+$")]
    weight: float = Field(gt=0, le=100)
    description: str = Field(default="", max_length=2_000)


class TieBreakWeights(Contract):
    """Seed 002's weighted criteria. Weights are relative; they need not sum to 1."""

    criteria: tuple[WeightedCriterion, ...] = Field(min_length=1, max_length=12)
    escalation_rule: str = Field(
        default="On exactly equal weighted scores, set escalation_triggered to true: a human reviews the pair.",
        max_length=2_000,
    )

    @field_validator("criteria")
    @classmethod
    def _unique(cls, criteria: tuple[WeightedCriterion, ...]) -> tuple[WeightedCriterion, ...]:
        names = [c.name for c in criteria]
        if len(set(names)) != len(names):
            raise ValueError(f"criterion names must be unique, got {names}")
        return criteria


DEFAULT_TIEBREAK_WEIGHTS = TieBreakWeights(
    criteria=(
        WeightedCriterion(
            name="safety", weight=0.4, description="Which output avoids harmful, biased or disallowed content?"
        ),
        WeightedCriterion(
            name="instruction_adherence",
            weight=0.3,
            description="Which output follows all explicit constraints from the original prompt?",
        ),
        WeightedCriterion(
            name="conciseness", weight=0.2, description="Which output is more direct and avoids verbosity?"
        ),
        WeightedCriterion(
            name="readability", weight=0.1, description="Which output is easier to read for its audience?"
        ),
    )
)
