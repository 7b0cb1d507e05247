"""The deterministic offline judge: the embedded default, scoring from measurable text features.

It answers every template (tone_style, head_to_head, pairwise, tiebreak) with JSON that matches the
template's reply model, so its replies go through the same strict validation as any LLM judge's.
Its scores come from text features (word lists in ``words/``, readability formulas, regex markers),
not from understanding, and every reply says so.

Two properties matter more than the scores themselves:

* **Position independence.** Each output is measured on its own and every comparison is symmetric,
  so swapping ``output_a``/``output_b`` mirrors the answer. Where nothing distinguishes the two, the
  forced choice comes from the texts' content (their SHA-256), never from their positions.
* **Honest confidence.** Confidence grows with the measured margin and is capped where criteria
  cannot be measured ("accuracy", "helpfulness"), so close or unmeasurable pairs escalate to the
  tie-break and to humans instead of getting a confident guess.

Modules: ``judge`` (the judge and its dispatch), ``tone`` (seed 000), ``criteria`` (seeds 001 and
003), ``tiebreak`` (seed 002), ``common`` (limits, confidence band, helpers); the text features
under them: ``text`` (tokens, readability), ``words`` (the word lists), ``features`` (per-text
profile) and ``reading`` (reading rubrics and prompts).
"""

from pairjudge.agents.offline.common import (
    HEURISTIC_PREFIX,
    OFFLINE_IDENTITY,
    OFFLINE_JUDGE_VERSION,
    OFFLINE_MODEL,
    PHRASE_MAX,
    PROSE_MAX,
    content_tiebreak,
    margin_confidence,
    unmeasured_cap,
)
from pairjudge.agents.offline.criteria import criterion_family
from pairjudge.agents.offline.judge import SCORERS, OfflineJudge, judge_reply
from pairjudge.agents.offline.tone import ToneGuide, score_tone_dimensions

__all__ = [
    "HEURISTIC_PREFIX",
    "OFFLINE_IDENTITY",
    "OFFLINE_JUDGE_VERSION",
    "OFFLINE_MODEL",
    "PHRASE_MAX",
    "PROSE_MAX",
    "SCORERS",
    "OfflineJudge",
    "ToneGuide",
    "content_tiebreak",
    "criterion_family",
    "judge_reply",
    "margin_confidence",
    "score_tone_dimensions",
    "unmeasured_cap",
]
