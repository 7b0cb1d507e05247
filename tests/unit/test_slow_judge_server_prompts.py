"""The LLM-like judge server (``pairjudge_dev.slow_judge_server``) takes every prompt a worker renders.

It answers 400 to a prompt it does not recognise, and the pair then ends as a dead letter instead of being
judged. After issue 12 changed how seed 003 renders (a heading first, a nonce on its ``<response_x>`` tags)
the server refused every pairwise prompt, and the benchmarks and tests built on it quietly stopped judging
those pairs. This renders every sample pair in every template and order, as the worker sends them.
"""

from __future__ import annotations

from typing import Any

import pytest

from pairjudge.agents.judge import JudgeRequest
from pairjudge.agents.pair_checks import resolve_rubric
from pairjudge.agents.prompts import render_primary, render_tiebreak
from pairjudge.schemas import CandidatePair
from pairjudge.schemas.events import Order
from pairjudge.schemas.rubric import DEFAULT_TIEBREAK_WEIGHTS
from pairjudge_dev.pairgen import sample_dicts
from pairjudge_dev.slow_judge_server import BadRequest, parse_call


def _payload(request: JudgeRequest) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "response_format": {"type": "json_schema", "json_schema": {"schema": request.response_schema}},
    }


PAIRS = [CandidatePair.model_validate(d) for d in sample_dicts()]


def test_the_samples_cover_every_rubric_kind() -> None:
    assert {p.rubric.kind for p in PAIRS} >= {"tone_style", "head_to_head", "pairwise"}


@pytest.mark.parametrize("order", ["AB", "BA"])
def test_every_primary_prompt_is_taken_and_its_outputs_found(order: Order) -> None:
    for pair in PAIRS:
        request = render_primary(pair, resolve_rubric(pair, {}), order)
        call = parse_call(_payload(request))
        shown = (call.output_a, call.output_b) if order == "AB" else (call.output_b, call.output_a)
        # The server reads the outputs as shown (after the data note): each candidate's text is in its slot.
        for text, candidate in zip(shown, pair.candidates, strict=True):
            assert candidate.output.strip()[:40] in text, (pair.pair_id, pair.rubric.kind, order)


@pytest.mark.parametrize("order", ["AB", "BA"])
def test_every_tiebreak_prompt_is_taken(order: Order) -> None:
    for pair in PAIRS:
        parse_call(_payload(render_tiebreak(pair, DEFAULT_TIEBREAK_WEIGHTS, order)))


def test_a_prompt_it_does_not_know_is_refused() -> None:
    with pytest.raises(BadRequest):
        parse_call({"model": "m", "messages": [{"role": "user", "content": "Rate this essay."}]})
