"""The offline judge abstains where the guide gives its measures no direction (issue 25).

Under a generic guide ("clear and well written", general readers) register and reading-ease differences
between two texts carried no signal on human-judged persuasive writing (evaldata/ukp-convarg): the judge
then answers at confidence 0.5, which the pipeline escalates. The same difference under a guide that
names a register is still evidence.
"""

from __future__ import annotations

import anyio
import pytest

from pairjudge.agents.offline import OfflineJudge
from pairjudge.agents.offline.calibration import tone_confidence
from pairjudge.agents.offline.tone import ToneGuide, compare_tone
from pairjudge.agents.policy import Policy
from pairjudge.schemas.replies import ToneStyleReply
from pairjudge.schemas.rubric import ToneStyleRubric
from pairjudge_dev.humaneval import decided_share, persuade_pairs, run_judge, split_of
from pairjudge_dev.humaneval_writing import read_argument_pairs

GENERIC = ToneStyleRubric(style_guide="Clear, persuasive and well written.", audience="Readers of an online debate.")
FORMAL = ToneStyleRubric(style_guide="Formal and professional.", audience="Readers of an online debate.")
CAREFUL = "We should therefore reconsider the proposal, because the evidence does not support it."
CASUAL = "nah thats not gonna work lol, total mess tbh!!"


def test_register_difference_is_no_evidence_under_a_generic_guide() -> None:
    generic = compare_tone(CAREFUL, CASUAL, ToneGuide.from_rubric(GENERIC))
    formal = compare_tone(CAREFUL, CASUAL, ToneGuide.from_rubric(FORMAL))
    assert generic.margin == 0.0
    assert tone_confidence(generic.margin) == 0.5
    # The same two texts under a guide that names the register: the formal one wins, confidently.
    assert formal.winner == "A"
    assert tone_confidence(formal.margin) >= 0.7


def test_guide_directions_are_read_from_the_rubric() -> None:
    generic = ToneGuide.from_rubric(GENERIC)
    assert not generic.register_directed
    assert not generic.audience_directed
    assert not generic.asks_consistency
    children = ToneGuide.from_rubric(ToneStyleRubric(style_guide="Clear.", audience="Children aged 8."))
    assert children.audience_directed  # a reading level (and, for children, a warmer register)
    formal = ToneGuide.from_rubric(FORMAL)
    assert formal.register_directed
    assert formal.audience_directed  # reading ease moves with register
    consistent = ToneGuide.from_rubric(ToneStyleRubric(style_guide="Keep one consistent voice.", audience="Anyone."))
    assert consistent.asks_consistency


def test_the_reply_says_why_it_has_no_signal() -> None:
    from pairjudge.agents.offline import judge_reply
    from pairjudge.agents.prompts import render_primary
    from pairjudge.schemas import Candidate, CandidatePair, CandidateSource, Task

    def pair(rubric: ToneStyleRubric) -> CandidatePair:
        source = CandidateSource(model="m")
        return CandidatePair(
            pair_id="no-signal",
            task=Task(prompt="Argue one side."),
            candidates=(
                Candidate(candidate_id="c1", output=CAREFUL, source=source),
                Candidate(candidate_id="c2", output=CASUAL, source=source),
            ),
            rubric=rubric,
        )

    generic = judge_reply(render_primary(pair(GENERIC), GENERIC, "AB"))
    assert isinstance(generic, ToneStyleReply)
    assert generic.confidence == 0.5
    assert "No signal: the guide names no register" in generic.justification
    formal = judge_reply(render_primary(pair(FORMAL), FORMAL, "AB"))
    assert isinstance(formal, ToneStyleReply)
    assert formal.confidence >= 0.7
    assert "No signal" not in formal.justification


def test_a_margin_of_zero_is_could_not_tell_and_a_large_one_is_confident() -> None:
    assert tone_confidence(0.0) == 0.5
    assert tone_confidence(-1.0) == 0.5
    assert tone_confidence(3.0) >= 0.9


def test_the_published_labels_are_read_whole_and_split_by_argument() -> None:
    pairs = read_argument_pairs()
    assert len(pairs) == 11_650  # UKPConvArg1Strict, as published
    assert len({p.debate for p in pairs}) == 32
    dev, test = persuade_pairs("dev", 200), persuade_pairs("test", 200)
    dev_texts = {c.output for lp in dev for c in lp.pair.candidates}
    test_texts = {c.output for lp in test for c in lp.pair.candidates}
    assert not dev_texts & test_texts
    assert all(split_of("convarg", t) == "dev" for t in dev_texts)
    assert 0.4 < sum(lp.human == 0 for lp in dev) / len(dev) < 0.6


@pytest.mark.slow
def test_on_human_judged_persuasive_writing_the_judge_rarely_decides() -> None:
    # heuristic-3 decided 46% of these dev pairs (274 of 594) and was right 55% of the time.
    dev = persuade_pairs("dev", 300)
    runs = anyio.run(run_judge, OfflineJudge(), dev, Policy())
    picks = [r.primary for r in runs]
    decided = [p for p in picks if p.choice is not None and p.strength >= Policy().primary_confidence_threshold]
    assert len(decided) / len(dev) <= 0.05, decided_share(picks, [lp.human for lp in dev])
    assert sum(r.outcome.startswith("verdict") for r in runs) / len(runs) <= 0.06
