"""Numbers and names as a user reads them, shared by the review pages and ``pairjudge report``.

Pure formatting: no markup (whoever renders escapes), no I/O. The rules it keeps, so every page says the same:

- an estimate is shown with the labels it rests on, and only from the project's own minimum of labels
  (the kappa guard's ``audit.min_labels``, the human gate's ``scores.human_min_labels``); below it the
  text says so ("not enough labels yet: 4 of the 30 needed") instead of an interval that only looks exact;
- evidence is shown as how far it has come towards a decision (0-100%), never as a raw e-value;
- no number is written in scientific notation: large counts get thousands separators or "more than …";
- internal names (rubric kinds, series keys, reason codes) get plain words; the raw key is kept for a
  ``<details>`` or a title, never shown in its place.

The words used here are explained on the docs' glossary page (``docs/glossary.md``, :data:`GLOSSARY_URL`).
"""

from __future__ import annotations

import math
from typing import get_args

from pairjudge.schemas.audit import AuditSeries, AuditSnapshot
from pairjudge.schemas.events import ReviewReason

#: The review service's glossary page (the same terms as docs/glossary.md): each page links to it for its terms.
GLOSSARY_URL = "/glossary"
DASH = "–"
#: Counts above this are said as "more than …": a forecast that far out means "no decision in sight".
LARGEST_FORECAST = 100_000


def anchor(term: str) -> str:
    """A term's anchor on the glossary: "judge agreement with people" -> "judge-agreement-with-people"."""
    return "-".join(term.lower().split())


def glossary(term: str) -> str:
    """The link to ``term`` on the review service's glossary page."""
    return f"{GLOSSARY_URL}#{anchor(term)}"


def whole(n: int) -> str:
    """A count with thousands separators: 12345 -> "12,345"."""
    return f"{n:,}"


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def pct(value: float | None, digits: int = 1) -> str:
    """0.6234 -> "62.3%"; None (or not finite) -> "–". Never scientific: a rate lies in 0..1."""
    if value is None or not math.isfinite(value):
        return DASH
    return f"{100 * value:.{digits}f}%"


def not_enough(labels: int, needed: int, what: str = "labels") -> str:
    """The honest state below a minimum: "not enough labels yet: 4 of the 30 needed"."""
    return f"not enough {what} yet: {labels:,} of the {needed:,} needed"


def enough(labels: int, needed: int) -> bool:
    return labels >= needed


def estimate(value: str, labels: int, needed: int, what: str = "label") -> str:
    """An estimate with the labels it rests on ("0.62 (0.41 to 0.80), from 57 labels"), or :func:`not_enough`."""
    if not enough(labels, needed):
        return not_enough(labels, needed, what + "s")
    return f"{value}, from {plural(labels, what)}"


def interval(low: float | None, high: float | None, *, percent: bool = True, digits: int = 1) -> str:
    """An interval as words a user reads: "55.1% to 69.0%" (or "0.41 to 0.80"); "–" when an end is missing."""
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return DASH
    if percent:
        return f"{pct(low, digits)} to {pct(high, digits)}"
    return f"{low:.2f} to {high:.2f}"


def kappa(value: float | None, low: float | None, high: float | None, labels: int, needed: int) -> str:
    """The judge's kappa against people with its interval and the labels it rests on ("0.62 (0.41 to 0.80),
    from 57 labels"), or how many labels it still needs: a kappa of 1.00 (1.00 to 1.00) from 4 labels is not a
    measurement. An interval of no width (every resample the same) is left out and said instead."""
    if not enough(labels, needed):
        return not_enough(labels, needed)
    if value is None:
        return f"not measurable yet: the judge and people always chose the same side on {plural(labels, 'label')}"
    shown = f"{value:.2f}"
    if low is not None and high is not None:
        shown += (
            f" ({interval(low, high, percent=False)})" if high - low >= 0.005 else " (its interval cannot be measured)"
        )
    return f"{shown}, from {plural(labels, 'label')}"


def progress(log_e: float | None, threshold: float) -> float:
    """How far an e-process has come towards its decision threshold, 0..1 (1: decided).

    Measured on the log scale, where evidence adds up: an e-value of 1 (no evidence) is 0, the threshold
    1/alpha is 1. Evidence against (an e-value below 1) counts as none."""
    if log_e is None or math.isnan(log_e) or threshold <= 1:
        return 0.0
    return min(1.0, max(0.0, log_e / math.log(threshold)))


def progress_text(share: float) -> str:
    """ "40% of the way to a decision"; "decided" at the threshold."""
    if share >= 1.0:
        return "enough evidence to decide"
    return f"{math.floor(100 * share):.0f}% of the way to a decision"


def labels_forecast(needed: int | None) -> str:
    """The labels a gate expects to still need, in words: never a count past :data:`LARGEST_FORECAST`."""
    if needed is None or needed > LARGEST_FORECAST:
        return "no decision in sight: at the current estimate the two are too close to tell apart"
    if needed <= 0:
        return "the next labels should be enough to decide"
    return f"about {plural(needed, 'more label')} expected to be needed"


#: What each review reason means to a reviewer: every ``ReviewReason`` has a sentence (tests check it).
REASONS: dict[str, str] = {
    "ordering_invalid": "the judge's reply could not be read, even after asking again",
    "tiebreak_disagreement": "the judge chose differently when the two replies were swapped",
    "tiebreak_equal_scores": "the judge scored both replies the same",
    "tiebreak_no_signal": "the judge could not decide: it found nothing that sets the two replies apart",
    "tiebreak_invalid": "the judge's tie-break reply contradicted itself",
    "tiebreak_disabled": "the second look by the judge is switched off, so close calls come to people",
    "judge_unavailable": "the judge could not be reached",
    "judge_rejected": "the judge's service refused the request",
    "audit_sample": "a random check of a verdict the judge made on its own",
    "kappa_guard": "automatic decisions are paused: the judge agreed too little with people",
    "suspected_injection": "a reply seems to carry instructions aimed at the judge",
    "risk_review": "a high-risk pair the judge was not sure enough about",
    "spend_capped": "over the spending limit, so a person decides instead of the judge",
}
assert set(REASONS) == set(get_args(ReviewReason)), "every review reason needs a plain sentence"


def reason_text(code: str) -> str:
    """ "needs review: the judge could not decide: …" for a review reason code; the code itself if unknown."""
    return REASONS.get(code, code.replace("_", " "))


_RUBRIC_KINDS = {"tone_style": "tone and style", "head_to_head": "head to head", "pairwise": "pairwise"}


def rubric_name(rubric: str) -> str:
    """A series' rubric as a user names it: "tone_style" -> "tone and style", "named:brand-voice" -> "brand-voice"."""
    if rubric.startswith("named:"):
        return rubric.removeprefix("named:")
    return _RUBRIC_KINDS.get(rubric, rubric.replace("_", " "))


def series_name(info: AuditSeries | None, key: str) -> str:
    """A series as experiment · rubric · judge ("brand-voice-q4 · tone and style · pairjudge-heuristic");
    the raw key (template hash and all) belongs in a details element or a title beside it."""
    if info is None:
        return "a series from before its parts were recorded"
    parts = [info.experiment_id or "no experiment", rubric_name(info.rubric), info.judge_model]
    if info.risk_level:
        parts.append(f"{info.risk_level} risk")
    if info.judge_tier:
        parts.append(f"tier {info.judge_tier}")
    return " · ".join(parts)


def alert_series_name(key: str) -> str:
    """An alert's series in words, from its key (``AuditSeries.key``); the key itself when it names no audit
    series (a judge's or a spending cap's alerts)."""
    info = AuditSeries.from_key(key)
    return key if info is None else series_name(info, key)


#: The terms the pages use, each with what it means to a user: served at the review service's ``/glossary``
#: and written out in docs/glossary.md (a unit test keeps the two the same).
GLOSSARY: dict[str, str] = {
    "judge agreement with people": (
        "How often the judge picked the same reply as a person did, on the verdicts people checked. Shown as "
        "a share of those labels, and as Cohen's kappa, which discounts the agreement two coin flips would reach."
    ),
    "kappa": (
        "Cohen's kappa: agreement beyond chance, from -1 to 1 (0 is chance, 1 is always agreeing). Shown with "
        "its interval only from the minimum of labels the kappa guard needs; before that the page says how "
        "many labels there are and how many are needed."
    ),
    "people agreeing with each other": (
        "Kappa between two reviewers on the pairs both labelled: the best a judge can be expected to reach."
    ),
    "kappa guard": (
        "A safety switch: when the judge's agreement with people falls below its floor (0.7 unless configured), "
        "automatic decisions pause and every pair goes to people until an operator resumes them."
    ),
    "labels": "Decisions people made on pairs (in the review queue, or imported from a file).",
    "not enough labels yet": (
        "An estimate from a handful of labels looks exact but is not: below the minimum a number needs, the "
        "page shows how many labels there are and how many are needed instead."
    ),
    "random check": (
        "A share of the verdicts the judge made on its own is sent to people at random, so the judge's "
        "agreement with people is measured on ordinary traffic (an audit sample)."
    ),
    "needs review": "A pair the judge could not settle, sent to a person; the page says why in words.",
    "measured against people": (
        "The challenger's win rate as people would judge it, estimated from every pair and the labels of the "
        "random checks. It stays right when the judge is wrong; a poor judge only makes it need more labels."
    ),
    "measured against the judge": (
        "The challenger's share of the judge's own decisive verdicts: the judge's opinion, not people's."
    ),
    "champion and challenger": "The model in production (champion) and the one that may replace it (challenger).",
    "win rate": "How often the challenger wins; a tie counts as half a win.",
    "interval": (
        "The range the true value lies in with 95% confidence. An interval that may be read at any time "
        "(anytime-valid) stays right however often the page is reloaded; it is the one the gate reads."
    ),
    "gate": (
        "The rule that decides whether the challenger replaces the champion: promote, reject, or keep "
        "collecting. It decides only when the evidence is strong enough that a wrong call is rare (5%)."
    ),
    "way to a decision": (
        "How far the evidence has come towards the gate's threshold: 0% is no evidence, 100% decides. "
        "It can fall back when new pairs point the other way."
    ),
    "length-controlled win rate": (
        "The win rate after allowing for reply length, so a judge that favours longer replies does not make a "
        "longer challenger look better than it is."
    ),
    "series": (
        "The verdicts measured together: one experiment, one rubric, one judge (and its prompt version). "
        "The raw key that identifies it is shown folded beside the name."
    ),
    "tie-break rate": (
        "The share of pairs the judge looked at twice because its first look was not clear (a tie, low "
        "confidence, or different answers when the replies were swapped)."
    ),
    "sampling group": (
        "Pairs are checked at different rates (confident and unsure verdicts apart); each group's labels count "
        "for the pairs of that group (a stratum)."
    ),
}


def agreement_guard_text(snap: AuditSnapshot) -> str:
    """The agreement guard in words (the audit page and the report): its counts on the pairs the judge decided
    alone, its floor, and how much of the evidence that pauses is in."""
    floor, evidence, alpha = snap.agreement_guard_floor, snap.agreement_guard_evidence, snap.agreement_guard_alpha
    if floor is None or evidence is None or alpha is None:
        return "agreement guard: off"
    n = snap.orders_agreed_labels
    if n == 0 or snap.orders_agreed_agreement is None:
        return f"agreement guard (floor {floor:.0%}): no label yet on a pair the judge decided alone"
    agreed = round(snap.orders_agreed_agreement * n)
    return (
        f"agreement guard (floor {floor:.0%}): people agreed with {agreed:,} of the {plural(n, 'pair')} "
        f"the judge decided alone ({pct(snap.orders_agreed_agreement, 0)}); "
        f"evidence {evidence:.3g} of the {1 / alpha:g} that pauses"
    )
