"""Token probabilities read at the verdict token (``agents.logprobs``), in the shapes the servers send, and what the
core makes of them: one probability per candidate per order, mapped back through the swap, averaged over orders."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pairjudge.agents.audit import WindowStats
from pairjudge.agents.audit.windows import snapshot
from pairjudge.agents.logprobs import choice_probabilities, verdict_value_offset
from pairjudge.agents.orderings import build_ordering
from pairjudge.agents.truth_table import reconcile, token_mean
from pairjudge.schemas._base import WIRE_CONTEXT
from pairjudge.schemas.audit import AuditObservation, AuditSeries, DecisionRecord
from pairjudge.schemas.events import HumanLabel, Order, OrderingResult
from pairjudge.schemas.pair import CandidatePair
from pairjudge.schemas.replies import ToneStyleReply
from pairjudge.streams.audit.report_charts import calibration_chart
from tests.unit.factories import FIRST_ID, SECOND_ID, make_pair

DATA = Path(__file__).resolve().parents[1] / "data" / "logprobs"


def entry(token: str, logprob: float, top: list[tuple[str, float]], *, shape: str = "openai") -> dict[str, Any]:
    """One ``logprobs.content`` item as a server sends it: OpenAI's with byte lists, llama.cpp's with ids."""
    item: dict[str, Any] = {"token": token, "logprob": logprob}
    alts: list[dict[str, Any]] = [{"token": t, "logprob": lp} for t, lp in top]
    if shape == "openai":
        item["bytes"] = list(token.encode())
        for alt, (t, _) in zip(alts, top, strict=True):
            alt["bytes"] = list(t.encode())
    elif shape == "llama.cpp":
        item["id"] = 330
        for n, (alt, (t, _)) in enumerate(zip(alts, top, strict=True)):
            alt["id"] = 300 + n
            alt["bytes"] = list(t.encode())
    item["top_logprobs"] = alts
    return item


def plain(tokens: list[str], at: int, top: list[tuple[str, float]], *, shape: str = "openai") -> list[dict[str, Any]]:
    """Tokens spelling a reply, each certain except the one at ``at``, whose alternatives are ``top``."""
    chosen = dict(top)[tokens[at]]
    return [
        entry(tok, chosen if i == at else 0.0, top if i == at else [(tok, 0.0)], shape=shape)
        for i, tok in enumerate(tokens)
    ]


# --- where the verdict is ------------------------------------------------------------------------------


def test_the_verdict_offset_follows_the_path_not_the_first_key_of_that_name() -> None:
    text = json.dumps(
        {
            "analysis": {"responseA": {"strengths": ["x"], "weaknesses": []}},
            "comparison": [{"criterion": "c", "winner": "B", "reasoning": 'r {"winner": "B"}'}],
            "result": {"winner": "A", "confidence": 0.9},
        }
    )
    offset = verdict_value_offset(text, ("result", "winner"))
    assert offset is not None
    assert text[offset] == "A"
    assert text[offset - 11 : offset] == '"winner": "'
    # The criterion's own "winner" and the one quoted inside a string are not the verdict.
    assert verdict_value_offset(text, ("winner",)) is None


def test_a_top_level_winner_after_nested_winners() -> None:
    text = '{"criteria_analysis": [{"winner": "B"}, {"winner": "B"}], "winner": "A", "confidence": 0.7}'
    offset = verdict_value_offset(text, ("winner",))
    assert offset is not None
    assert text[offset] == "A"
    assert offset > text.index('"winner": "A"')


# --- the servers' shapes ----------------------------------------------------------------------------


def test_llama_cpp_python_recorded_reply() -> None:
    """A real reply of llama-cpp-python 0.3.36's server (SmolLM2-135M, logprobs with top_logprobs 5), recorded.

    Its alternatives are the model's raw distribution (C and D are among them although the grammar forbids
    them): only the choice letters count, renormalised: e^-0.110 / (e^-0.110 + e^-2.476) = 0.914."""
    body = json.loads((DATA / "llama_cpp_python_0.3.36.json").read_text())
    choice = body["choices"][0]
    got = choice_probabilities(choice["logprobs"]["content"], "tone_style", text=choice["message"]["content"])
    assert got is not None
    top = {t["token"]: t["logprob"] for t in choice["logprobs"]["content"][5]["top_logprobs"]}
    expected_a = math.exp(top["A"]) / (math.exp(top["A"]) + math.exp(top["B"]))
    assert got["A"] == pytest.approx(expected_a)
    assert got["A"] + got["B"] == pytest.approx(1.0)
    assert 0.9 < got["A"] < 0.92


def test_openai_shape_quote_and_letter_split() -> None:
    tokens = ['{"', "winner", '":"', "B", '","', "confidence", '":', "0", ".", "8", "}"]
    content = plain(tokens, 3, [("B", -0.2), ("A", -1.8), ("The", -6.0)])
    got = choice_probabilities(content, "tone_style", text="".join(tokens))
    assert got is not None
    pb, pa = math.exp(-0.2), math.exp(-1.8)
    assert got == pytest.approx({"A": pa / (pa + pb), "B": pb / (pa + pb)})


def test_vllm_shape_quote_merged_with_the_letter_and_minus_9999() -> None:
    """vLLM writes impossible alternatives as -9999.0, and its tokenizer may merge the quote into the letter."""
    tokens = ["{", '"preference', '":', ' "A', '",', ' "confidence', '":', " 0.9", "}"]
    content = plain(tokens, 3, [(' "A', -0.05), (' "B', -3.0), (' "TIE', -4.5), (' "', -9999.0)])
    got = choice_probabilities(content, "head_to_head", text="".join(tokens))
    assert got is not None
    masses = {"A": math.exp(-0.05), "B": math.exp(-3.0), "TIE": math.exp(-4.5)}
    total = sum(masses.values())
    assert got == pytest.approx({k: v / total for k, v in masses.items()})


def test_llama_cpp_shape_with_ids() -> None:
    tokens = ["{", ' "', "winner", '":', ' "', "A", '",', ' "', "confidence", '":', " 0.6", "}"]
    content = plain(tokens, 5, [("A", -0.7), ("B", -0.7)], shape="llama.cpp")
    got = choice_probabilities(content, "tiebreak", text="".join(tokens))
    assert got == pytest.approx({"A": 0.5, "B": 0.5})


def test_a_choice_missing_from_the_alternatives_gets_zero() -> None:
    tokens = ['{"', "winner", '":"', "A", '"}']
    got = choice_probabilities(plain(tokens, 3, [("A", -0.01), ("The", -5.0)]), "tone_style")
    assert got == {"A": 1.0, "B": 0.0}


@pytest.mark.parametrize(
    "content",
    [None, [], "text", [{"token": "{", "logprob": "x"}], [{"token": "{}", "logprob": 0.0, "top_logprobs": []}]],
)
def test_unreadable_logprobs_give_none(content: object) -> None:
    assert choice_probabilities(content, "tone_style") is None


def test_tokens_that_do_not_spell_the_validated_text_give_none() -> None:
    tokens = ['{"', "winner", '":"', "A", '"}']
    content = plain(tokens, 3, [("A", -0.1), ("B", -2.0)])
    assert choice_probabilities(content, "tone_style", text='{"winner":"B"}') is None
    assert choice_probabilities(content, "tone_style", text='{"winner":"A"}') is not None


def test_no_choice_among_the_alternatives_gives_none() -> None:
    tokens = ['{"', "winner", '":"', "A", '"}']
    content = plain(tokens, 3, [("A", -0.1), ("B", -2.0)])
    content[3]["token"] = "Z"
    content[3]["top_logprobs"] = [{"token": "Z", "logprob": -0.1}]
    assert choice_probabilities(content, "tone_style") is None


# --- mapped back through the swap, averaged over the orders ----------------------------------------


def _reply(winner: str, confidence: float) -> ToneStyleReply:
    score = {"A": 3, "B": 3}
    return ToneStyleReply.model_validate(
        {
            "winner": winner,
            "confidence": confidence,
            "justification": "j",
            "dimension_scores": {
                "tone_match": score,
                "audience_suitability": score,
                "stylistic_consistency": score,
                "guideline_adherence": score,
            },
            "key_differentiator": "k",
        }
    )


def _ordering(pair: CandidatePair, order: Order, winner: str, confidence: float, p_a: float | None) -> OrderingResult:
    return build_ordering(
        pair,
        order,
        reply=_reply(winner, confidence),
        calls=(),
        retries=0,
        answered_model="m",
        error=None,
        error_kind=None,
        probabilities=None if p_a is None else {"A": p_a, "B": 1 - p_a},
    )


@pytest.fixture
def pair() -> CandidatePair:
    return make_pair()


def test_the_swapped_orders_a_is_the_original_b(pair: CandidatePair) -> None:
    first, second = (c.candidate_id for c in pair.candidates)
    ab = _ordering(pair, "AB", "A", 0.9, 0.8)  # first shown as A: 0.8 for first
    ba = _ordering(pair, "BA", "B", 0.9, 0.3)  # first shown as B: 0.7 for first
    assert ab.token_probabilities == pytest.approx({first: 0.8, second: 0.2})
    assert ba.token_probabilities == pytest.approx({second: 0.3, first: 0.7})
    assert token_mean(ab, ba) == pytest.approx(0.75)


def test_the_policy_picks_which_confidence_meets_the_threshold(pair: CandidatePair) -> None:
    first = pair.candidates[0].candidate_id
    ab = _ordering(pair, "AB", "A", 0.9, 0.6)
    ba = _ordering(pair, "BA", "B", 0.9, 0.4)  # 0.6 for first
    stated = reconcile(ab, ba, 0.7)
    assert (stated.outcome, stated.winner, stated.confidence_source) == ("verdict", first, "stated")
    assert stated.mean_confidence == pytest.approx(0.9)
    assert (stated.token_confidence, stated.stated_confidence) == pytest.approx((0.6, 0.9))
    tokens = reconcile(ab, ba, 0.7, token_probability=True)
    assert (tokens.outcome, tokens.reason, tokens.confidence_source) == (
        "tiebreak",
        "low_confidence",
        "token_probability",
    )
    assert tokens.mean_confidence == pytest.approx(0.6)
    assert (tokens.token_confidence, tokens.stated_confidence) == pytest.approx((0.6, 0.9))


def test_without_token_probabilities_in_both_orders_the_stated_one_decides(pair: CandidatePair) -> None:
    ab = _ordering(pair, "AB", "A", 0.9, 0.6)
    ba = _ordering(pair, "BA", "B", 0.8, None)
    rec = reconcile(ab, ba, 0.7, token_probability=True)
    assert (rec.outcome, rec.confidence_source) == ("verdict", "stated")
    assert rec.mean_confidence == pytest.approx(0.85)
    assert rec.token_confidence is None
    assert rec.stated_confidence is None


# --- the audit's reliability curves ------------------------------------------------------------------


def _record(confidence: float, **extra: object) -> DecisionRecord:
    return DecisionRecord.model_validate(
        {
            "pair_id": "pair-0001-factory",
            "series": AuditSeries(judge_provider="p", judge_model="m", prompt_template_hash="h", rubric="tone_style"),
            "stage": "primary",
            "outcome": "verdict",
            "auto_decided": True,
            "candidates": (FIRST_ID, SECOND_ID),
            "judge_winner": FIRST_ID,
            "confidence": confidence,
            **extra,
        }
    )


def _labelled(record: DecisionRecord, winner: str) -> AuditObservation:
    label = HumanLabel(pair_id=record.pair_id, winner=winner, reviewer="ana")
    return AuditObservation(kind="labelled", series=record.series, record=record, label=label)


def test_old_records_decode_and_read_as_stated() -> None:
    series = {"judge_provider": "p", "judge_model": "m", "prompt_template_hash": "h", "rubric": "tone_style"}
    old = {"pair_id": "p", "series": series}
    body = {**old, "stage": "primary", "outcome": "verdict", "auto_decided": True, "candidates": ["a", "b"]}
    record = DecisionRecord.model_validate_json(json.dumps({**body, "confidence": 0.8}), context=WIRE_CONTEXT)
    assert (record.confidence_source, record.token_confidence, record.stated) == ("stated", None, 0.8)
    tokens = record.model_copy(update={"confidence_source": "token_probability", "token_confidence": 0.6})
    assert tokens.stated is None  # which stated confidence it had is not known: no curve point is made up


def test_the_reliability_plot_shows_both_curves_when_records_carry_both() -> None:
    stats = WindowStats()
    stats.add(_labelled(_record(0.9), FIRST_ID))
    assert "token_bins" not in stats.as_json()  # an older worker still reads this window
    assert not any(row[0] for row in stats.token_bins)
    both = {"confidence_source": "token_probability", "token_confidence": 0.62, "stated_confidence": 0.95}
    stats.add(_labelled(_record(0.62, **both), SECOND_ID))
    assert [row for row in stats.token_bins if row[0]] == [[1, 0.62, 0]]
    assert [row for row in stats.stated_bins if row[0]] == [[1, 0.95, 0]]
    stored = WindowStats(**json.loads(json.dumps(stats.as_json())))
    assert stored.token_bins == stats.token_bins
    start = datetime(2026, 12, 6, tzinfo=UTC)
    series = AuditSeries(judge_provider="p", judge_model="m", prompt_template_hash="h", rubric="tone_style")
    window = snapshot(stats, series, start, start, final=True)
    assert sum(b.count for b in window.token_reliability) == 1
    assert sum(b.count for b in window.stated_reliability) == 1
    chart = calibration_chart([window])
    assert isinstance(chart, str)
    assert "token probability" in chart
    assert "stated confidence" in chart
    plain = calibration_chart([window.model_copy(update={"token_reliability": (), "stated_reliability": ()})])
    assert isinstance(plain, str)
    assert "token probability" not in plain
