"""What every offline scorer shares: the reply limits, the confidence band and small text helpers."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pairjudge.agents.judge import JudgeIdentity
from pairjudge.agents.offline.markers import count_term
from pairjudge.schemas.replies import (
    Phrase,
    Position,
    Prose,
)

#: Bump whenever scoring changes: a new judge version opens a new drift series (docs/design.md §3).
OFFLINE_JUDGE_VERSION = "heuristic-4"
OFFLINE_MODEL = "pairjudge-heuristic"
HEURISTIC_PREFIX = "Heuristic offline judge: "
OFFLINE_IDENTITY = JudgeIdentity(
    provider="offline", model=OFFLINE_MODEL, version=OFFLINE_JUDGE_VERSION, temperature=0.0, heuristic=True
)


def _max_length(annotated: object, default: int) -> int:
    """The ``max_length`` declared on a constrained string type in ``schemas.replies``.

    Read from the schema rather than copied, so a tightened limit there (for small constrained
    decoders) cannot make this judge emit replies that fail validation.
    """
    for field_info in getattr(annotated, "__metadata__", ()):
        for constraint in getattr(field_info, "metadata", ()):
            limit = getattr(constraint, "max_length", None)
            if isinstance(limit, int):
                return limit
    return default


PROSE_MAX = _max_length(Prose, 1_000)
PHRASE_MAX = _max_length(Phrase, 300)
MAX_LIST = 8

#: Confidence never leaves this band: 0.5 means "could not tell", 0.95 "clear on every measure".
CONF_MIN, CONF_MAX = 0.5, 0.95
#: Head-to-head/pairwise: an overall feature margin below this is a TIE.
TIE_MARGIN = 0.05
#: Sentence-length coefficient of variation above which rhythm is erratic rather than varied.
ERRATIC_CV = 0.8
#: Register drift this small can come from one saturated marker (a sign-off emoji, one contraction) in a
#: half of about 15 words, after ``textfeatures.register_drift``'s shrinkage: noise, not a change of voice.
DRIFT_NOISE = 0.25
#: The floor of the unmeasurable cap: with half or more of the criteria unmeasurable, confidence is at most this.
UNMEASURABLE_CAP = 0.55


# --- small shared helpers ---------------------------------------------------------------------


def clip(text: str, limit: int) -> str:
    """Shorten to ``limit`` characters at a word boundary, marking the cut; never returns ''."""
    text = " ".join(text.split()) or "-"
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:") + "…"


def content_tiebreak(text_a: str, text_b: str) -> Position:
    """A forced choice that depends only on the two texts, never on their positions: the output whose
    SHA-256 is smaller. Identical texts give "A" (both orders then name the same *text*, so the
    pair still flips between candidates and escalates)."""
    ha = hashlib.sha256(text_a.encode("utf-8")).hexdigest()
    hb = hashlib.sha256(text_b.encode("utf-8")).hexdigest()
    return "B" if hb < ha else "A"


def margin_confidence(margin: float, full: float) -> float:
    """Map a non-negative margin to [0.5, 0.95]: 0 -> 0.5, ``full`` or more -> 0.95."""
    if full <= 0 or margin <= 0:
        return CONF_MIN
    return round(CONF_MIN + (CONF_MAX - CONF_MIN) * min(1.0, margin / full), 3)


def unmeasured_cap(unmeasured_share: float) -> float:
    """The highest confidence allowed when ``unmeasured_share`` of the criteria (by count or weight)
    could not be measured: 0.95 with none, 0.725 with one in four, 0.65 with one in three (below the
    0.7 verdict threshold, so the pair escalates), and 0.55 from just under half upwards."""
    return round(max(UNMEASURABLE_CAP, CONF_MAX - 0.9 * unmeasured_share), 3)


def fmt_terms(terms: Sequence[str], limit: int = 4) -> str:
    shown = ", ".join(f"'{t}'" for t in list(terms)[:limit])
    return shown + (f" (+{len(terms) - limit} more)" if len(terms) > limit else "")


def dedupe_terms(terms: Sequence[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    out: list[str] = []
    for t in terms:
        key = " ".join(t.lower().split())
        if key and key not in seen:
            seen.add(key)
            out.append(t.strip())
    return tuple(out)


def used_terms(text: str, terms: Sequence[str]) -> list[str]:
    return [t for t in terms if count_term(text, t) > 0]


def missing_terms(text: str, terms: Sequence[str]) -> list[str]:
    return [t for t in terms if count_term(text, t) == 0]
