"""Tokens, sentences, syllables and readability formulas: the measurements every feature builds on."""

from __future__ import annotations

import functools
import re
import statistics
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

# --- tokenising -------------------------------------------------------------------------------

#: A word: letters/digits, with inner apostrophes ("don't", "it’s") and hyphens ("sign-in") kept.
WORD_RE = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*")
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'"})

#: Abbreviations whose trailing period does not end a sentence.
_ABBREVIATIONS = frozenset(
    {
        "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "no", "approx",
        "inc", "ltd", "co", "corp", "fig", "cf", "al", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
        "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "a.m", "p.m",
    }
)  # fmt: skip
_SENTENCE_END_RE = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s|$)")
_BULLET_RE = re.compile(r"^\s*(?:[-*•‣▪◦–]|\d{1,3}[.)]|[a-zA-Z][.)])\s+")
_NUMBERED_RE = re.compile(r"^\s*\d{1,3}[.)]\s+")


def normalize(text: str) -> str:
    """NFKC-normalise and straighten curly apostrophes, so word lists match either spelling."""
    return unicodedata.normalize("NFKC", text).translate(_APOSTROPHES)


def words(text: str) -> list[str]:
    """The words of ``text`` in order, original case kept."""
    return list(_words(text))


@functools.lru_cache(maxsize=256)
def _words(text: str) -> tuple[str, ...]:
    # A profile tokenises the same text (and its halves) in a dozen features: once is enough.
    return tuple(WORD_RE.findall(normalize(text)))


def split_sentences(text: str) -> list[str]:
    """Split into sentences. Each non-empty line is at least its own unit (bullets, headings).

    A period after a known abbreviation or a single initial does not end a sentence. Segments with
    no word characters (a stray "---") are dropped.
    """
    sentences: list[str] = []
    for line in normalize(text).splitlines():
        line = line.strip()
        if not line:
            continue
        start = 0
        for match in _SENTENCE_END_RE.finditer(line):
            candidate = line[start : match.end()]
            if match.group().startswith(".") and _ends_with_abbreviation(line[start : match.start()]):
                continue
            sentences.append(candidate.strip())
            start = match.end()
        if start < len(line):
            sentences.append(line[start:].strip())
    return [s for s in sentences if WORD_RE.search(s)]


def _ends_with_abbreviation(segment: str) -> bool:
    tail = segment.rsplit(maxsplit=1)[-1].lower() if segment.strip() else ""
    tail = tail.lstrip("(\"'")
    return tail in _ABBREVIATIONS or (len(tail) == 1 and tail.isalpha())


def lines(text: str) -> list[str]:
    return [ln for ln in normalize(text).splitlines() if ln.strip()]


def bullet_count(text: str) -> int:
    """Lines that start with a bullet marker or a list number ("- ", "* ", "1. ", "a) ")."""
    return sum(1 for ln in lines(text) if _BULLET_RE.match(ln))


def numbered_count(text: str) -> int:
    return sum(1 for ln in lines(text) if _NUMBERED_RE.match(ln))


# --- syllables and readability ----------------------------------------------------------------

_VOWEL_GROUP_RE = re.compile(r"[aeiouy]+")
#: Vowel pairs that are usually two syllables ("ratio", "actual", "medium"), but not "-tion", "-cial".
_HIATUS_RE = re.compile(r"(?<![ct])ia|(?<![qg])ua|(?<![qg])uo|iu|io(?!n)")


@functools.lru_cache(maxsize=65_536)
def count_syllables(word: str) -> int:
    """Estimate the syllables of one English word (a heuristic: vowel groups, silent endings).

    Tokens without letters (numbers) count as one syllable; an empty token counts zero.
    """
    letters = "".join(ch for ch in normalize(word).lower() if "a" <= ch <= "z")
    if not letters:
        return 1 if any(ch.isdigit() for ch in word) else 0
    if len(letters) <= 3:
        return 1
    count = len(_VOWEL_GROUP_RE.findall(letters))
    count += len(_HIATUS_RE.findall(letters))
    if letters.endswith("e") and not letters.endswith(("ee", "ye")):
        # A final "e" is silent ("make") except in consonant + "le" ("table").
        if not (letters.endswith("le") and letters[-3] not in "aeiouy"):
            count -= 1
    elif letters.endswith("es") and not letters.endswith(("ses", "xes", "zes", "ches", "shes", "ces", "ges")):
        count -= 1  # "makes", "times"; but "boxes", "houses" keep the extra syllable
    elif letters.endswith("ed") and not letters.endswith(("ted", "ded")):
        count -= 1  # "jumped"; but "wanted", "added" keep it
    return max(1, count)


@dataclass(frozen=True, slots=True)
class Readability:
    words: int
    sentences: int
    syllables: int
    flesch_reading_ease: float
    fk_grade: float


def readability(text: str) -> Readability:
    """Flesch reading ease and Flesch-Kincaid grade. A text with no words scores 0 on both."""
    ws = words(text)
    n_sent = max(1, len(split_sentences(text)))
    if not ws:
        return Readability(0, 0, 0, 0.0, 0.0)
    syl = sum(count_syllables(w) for w in ws)
    return Readability(
        words=len(ws),
        sentences=n_sent,
        syllables=syl,
        flesch_reading_ease=flesch_reading_ease(len(ws), n_sent, syl),
        fk_grade=flesch_kincaid_grade(len(ws), n_sent, syl),
    )


def flesch_reading_ease(n_words: int, n_sentences: int, n_syllables: int) -> float:
    """206.835 - 1.015 (words/sentence) - 84.6 (syllables/word); higher is easier. 0 if no words."""
    if n_words <= 0 or n_sentences <= 0:
        return 0.0
    return 206.835 - 1.015 * (n_words / n_sentences) - 84.6 * (n_syllables / n_words)


def flesch_kincaid_grade(n_words: int, n_sentences: int, n_syllables: int) -> float:
    """0.39 (words/sentence) + 11.8 (syllables/word) - 15.59: a US school grade. 0 if no words."""
    if n_words <= 0 or n_sentences <= 0:
        return 0.0
    return 0.39 * (n_words / n_sentences) + 11.8 * (n_syllables / n_words) - 15.59


def coefficient_of_variation(values: Iterable[float]) -> float:
    """Population standard deviation over the mean; 0 for fewer than two values or a zero mean."""
    vals = list(values)
    if len(vals) < 2:
        return 0.0
    mean = statistics.fmean(vals)
    if mean == 0:
        return 0.0
    return statistics.pstdev(vals) / mean


def sentence_length_cv(text: str) -> float:
    """How much sentence lengths (in words) vary: a proxy for an even, consistent rhythm."""
    return coefficient_of_variation(len(words(s)) for s in split_sentences(text))
