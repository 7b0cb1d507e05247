"""The structured-output schema sent with every judge request, narrowed to the rubric's criteria.

``agents.prompts.render`` puts :func:`response_schema` and the kind's :data:`SCHEMA_NAMES` entry on each
``JudgeRequest``. Constrained decoders (llama.cpp grammars, OpenAI strict mode) then cannot even produce
a criterion the rubric does not have; ``agents.validation`` checks the same thing for judges that ignore
the schema. Kept apart from the renderers: the schema is derived from the reply models
(``schemas.replies``), not from the seed templates' wording, so it is no part of ``template_hash``.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from pairjudge.agents.judge import TemplateKind
from pairjudge.agents.prompt_slots import PromptSlots
from pairjudge.schemas.replies import HeadToHeadReply, PairwiseReply, Reply, TieBreakReply, ToneStyleReply
from pairjudge.schemas.rubric import HeadToHeadRubric, PairwiseRubric

__all__ = ["REPLY_MODELS", "SCHEMA_NAMES", "response_schema"]

#: The reply model each template kind's judge must answer with.
REPLY_MODELS: Final[Mapping[TemplateKind, type[Reply]]] = MappingProxyType(
    {
        "tone_style": ToneStyleReply,
        "head_to_head": HeadToHeadReply,
        "pairwise": PairwiseReply,
        "tiebreak": TieBreakReply,
    }
)

#: The name each kind's schema is sent under (OpenAI's ``json_schema.name``, say).
SCHEMA_NAMES: Final[Mapping[TemplateKind, str]] = MappingProxyType(
    {
        "tone_style": "tone_style_verdict",
        "head_to_head": "head_to_head_verdict",
        "pairwise": "pairwise_verdict",
        "tiebreak": "tiebreak_verdict",
    }
)


def _criterion_names(kind: TemplateKind, slots: PromptSlots) -> tuple[str, ...]:
    if kind == "head_to_head" and isinstance(slots.rubric, HeadToHeadRubric):
        return tuple(c.name for c in slots.rubric.criteria)
    if kind == "pairwise" and isinstance(slots.rubric, PairwiseRubric):
        return slots.rubric.criteria
    if kind == "tiebreak" and slots.tiebreak is not None:
        return tuple(c.name for c in slots.tiebreak.criteria)
    return ()


def response_schema(kind: TemplateKind, slots: PromptSlots) -> dict[str, Any]:
    """The reply model's JSON Schema (by alias), narrowed to this rubric's criteria.

    Constrained decoders (llama.cpp grammars, OpenAI strict mode) then cannot even produce a
    criterion the rubric does not have; the validator checks the same thing for judges that ignore it.

    Built once per template kind and criteria list and shared by every request that uses it (pydantic's
    schema generation was most of a render's time): treat it as read-only.
    """
    return _narrowed_schema(kind, _criterion_names(kind, slots))


@functools.lru_cache(maxsize=512)
def _narrowed_schema(kind: TemplateKind, criteria: tuple[str, ...]) -> dict[str, Any]:
    schema = copy.deepcopy(REPLY_MODELS[kind].model_json_schema(by_alias=True))
    names = list(criteria)
    if kind == "head_to_head":
        breakdown = schema["properties"]["criteria_breakdown"]
        item = breakdown.pop("additionalProperties")
        breakdown["properties"] = {n: copy.deepcopy(item) for n in names}
        breakdown["required"] = names
        breakdown["additionalProperties"] = False
    elif kind in ("pairwise", "tiebreak"):
        array_field, item_def = (
            ("comparison", "CriterionComparison") if kind == "pairwise" else ("criteria_analysis", "CriterionAnalysis")
        )
        schema["$defs"][item_def]["properties"]["criterion"]["enum"] = names
        schema["properties"][array_field]["minItems"] = len(names)
        schema["properties"][array_field]["maxItems"] = len(names)
    return schema
