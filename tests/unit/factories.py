"""Builders for pairs and rubrics, and the judge replies of ``pairjudge_dev.replies`` (the JSON text a
judge would send; shared with the fake judge servers and the benchmarks).

The candidates' metadata is deliberately distinctive (see ``MODEL_METADATA``) so tests can assert
that none of it ever reaches a prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pairjudge.agents.judge import JudgeRequest
from pairjudge.schemas import (
    Candidate,
    CandidatePair,
    CandidateSource,
    Criterion,
    HeadToHeadRubric,
    PairMetadata,
    PairwiseRubric,
    Task,
    ToneStyleRubric,
)

# Re-exported: the unit tests build their scripted replies from here.
from pairjudge_dev.replies import H2H_CRITERIA as H2H_CRITERIA
from pairjudge_dev.replies import PAIRWISE_CRITERIA as PAIRWISE_CRITERIA
from pairjudge_dev.replies import h2h_reply as h2h_reply
from pairjudge_dev.replies import pairwise_reply as pairwise_reply
from pairjudge_dev.replies import tiebreak_reply as tiebreak_reply
from pairjudge_dev.replies import tone_reply as tone_reply

FIRST_ID = "cand-champ-7f3a"
SECOND_ID = "cand-chall-91bc"
FIRST_OUTPUT = "Hi there! Thanks for reaching out - we have refunded your order and it should land in 3 days."
SECOND_OUTPUT = "Dear customer, your refund request has been processed. Funds will be credited within 3 business days."

#: Everything about the candidates and the pair that a judge must never see.
MODEL_METADATA: tuple[str, ...] = (
    FIRST_ID,
    SECOND_ID,
    "acme-frontier-xl",
    "2031-04-01-preview",
    "prompt-v17-champ",
    "zeta-small-chat",
    "2030-12-24",
    "prompt-v18-chall",
    "champion",
    "challenger",
    "pair-0001-factory",
    "exp-tone-42",
    "tenant-secret-co",
)


def tone_rubric(**overrides: Any) -> ToneStyleRubric:
    values: dict[str, Any] = {
        "style_guide": "Warm, plain and direct. Use 'you'. Never say 'unfortunately'. Sign off with 'Cheers'.",
        "audience": "Retail customers on a mobile app; general reading level.",
        "forbidden_terms": ("unfortunately",),
        "required_terms": ("Cheers",),
    }
    return ToneStyleRubric(**(values | overrides))


def h2h_rubric(criteria: Sequence[str] = H2H_CRITERIA, **overrides: Any) -> HeadToHeadRubric:
    values: dict[str, Any] = {
        "criteria": tuple(Criterion(name=n, description=f"Which output is better on {n}?") for n in criteria),
        "constraints": "At most 80 words.",
        "examples": "",
    }
    return HeadToHeadRubric(**(values | overrides))


def pairwise_rubric(criteria: Sequence[str] = PAIRWISE_CRITERIA) -> PairwiseRubric:
    return PairwiseRubric(criteria=tuple(criteria))


def make_pair(*, outputs: tuple[str, str] | None = None, **overrides: Any) -> CandidatePair:
    """A valid pair (tone_style rubric by default). ``outputs`` replaces both output texts; any
    ``CandidatePair`` field can be overridden by keyword."""
    first_output, second_output = outputs or (FIRST_OUTPUT, SECOND_OUTPUT)
    values: dict[str, Any] = {
        "pair_id": "pair-0001-factory",
        "task": Task(prompt="Tell the customer their refund was processed.", context=None),
        "candidates": (
            Candidate(
                candidate_id=FIRST_ID,
                output=first_output,
                source=CandidateSource(
                    model="acme-frontier-xl",
                    version="2031-04-01-preview",
                    prompt_version="prompt-v17-champ",
                    role="champion",
                ),
            ),
            Candidate(
                candidate_id=SECOND_ID,
                output=second_output,
                source=CandidateSource(
                    model="zeta-small-chat",
                    version="2030-12-24",
                    prompt_version="prompt-v18-chall",
                    role="challenger",
                ),
            ),
        ),
        "rubric": tone_rubric(),
        "metadata": PairMetadata(traffic="shadow", experiment_id="exp-tone-42", tenant="tenant-secret-co"),
    }
    return CandidatePair(**(values | overrides))


# --- scripting a judge by ordering ------------------------------------------------------------

Answer = str | Exception


def per_order(
    pair: CandidatePair, ab: Answer | Sequence[Answer], ba: Answer | Sequence[Answer]
) -> Callable[[JudgeRequest], Answer]:
    """A ``ScriptedJudge`` script answering each ordering from its own queue (a single answer repeats)."""
    queues: dict[str, list[Answer] | Answer] = {
        "AB": ab if isinstance(ab, str | Exception) else list(ab),
        "BA": ba if isinstance(ba, str | Exception) else list(ba),
    }

    def answer(request: JudgeRequest) -> Answer:
        queue = queues[request.order]
        if isinstance(queue, str | Exception):
            return queue
        if not queue:
            raise AssertionError(f"no scripted answer left for {request.order}")
        return queue.pop(0)

    return answer
