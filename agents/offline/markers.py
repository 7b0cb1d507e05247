"""Marker counts of one text: phrases and terms, contractions, second person, exclamations, questions,
emoji, shouting, passives, imperatives, numbers, proper nouns, jargon, long words and sentiment. Word lists
and regular expressions, not understanding; each looks at one text, never at its position."""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable

from pairjudge.agents.offline.text import (
    _BULLET_RE,
    WORD_RE,
    count_syllables,
    normalize,
    split_sentences,
    words,
)
from pairjudge.agents.offline.words import (
    ACRONYMS,
    IMPERATIVE_VERBS,
    JARGON,
    NEGATIVE,
    POSITIVE,
    SECOND_PERSON,
)

_CONTRACTION_RE = re.compile(
    r"\b(?:[a-z]+n't|(?:i|you|we|they|he|she|it|that|there|here|what|who|where|how|let|everyone|"
    r"nobody|someone|this)'s|[a-z]+'(?:re|ve|ll|d)|i'm|y'all|ain't)\b"
)
_EMOJI_RE = re.compile(
    "[\U0001f300-\U0001faff\U00002600-\U000027bf\U0001f000-\U0001f2ff\U0001f600-\U0001f64f\u2b50\u2b55]"
    r"|(?<!\w)(?::-?\)|:-?D|;-?\)|:-?P|<3)(?!\w)"
)
_PASSIVE_RE = re.compile(
    r"\b(?:am|is|are|was|were|be|been|being|get|gets|got)\s+(?:\w+ly\s+)?"
    r"(?:\w+ed|known|shown|given|taken|made|done|seen|written|built|sent|held|kept|found|told|paid|sold|"
    r"brought|bought|thought|caught|left|lost|set|put|driven|chosen|broken|spoken|stolen|forgotten|hidden|"
    r"eaten|drawn|grown|thrown|worn|torn|begun|understood|met|led|fed|heard|won|cut|shut|spent|meant)\b"
)
_NUMBER_RE = re.compile(r"(?<![\w.])\d+(?:[.,:\-]\d+)*%?")
_CODEISH_RE = re.compile(
    r"^(?:[a-z]+[A-Z]\w*|\w+_\w+|v\d+(?:\.\d+)+|0x[0-9a-fA-F]+|"
    r"[\w-]+\.(?:py|js|ts|json|ya?ml|toml|cfg|ini|sh|exe|dll|conf|xml|html|md|log))$"
)


def _word_counts(low: str) -> Counter[str]:
    return Counter(WORD_RE.findall(low))


def count_phrases(text: str, phrases: Iterable[str]) -> int:
    """Case-insensitive whole-word occurrences of each phrase, summed (a phrase may be several words).

    Single words are counted from one tokenisation; only multi-word phrases need a regex scan, which
    keeps long outputs cheap (the lexicons hold hundreds of entries).
    """
    low = normalize(text).lower()
    counts = _word_counts(low)
    total = 0
    for phrase in phrases:
        if WORD_RE.fullmatch(phrase):
            total += counts[phrase]
        elif _may_occur(phrase, low):
            total += len(term_pattern(phrase).findall(low))
    return total


def _may_occur(phrase: str, low: str) -> bool:
    """A cheap necessary condition for ``phrase`` to match in ``low``: its longest word is a substring.
    Most phrases of a long lexicon are absent, and a substring test costs far less than a regex scan."""
    return _longest_word(phrase) in low


@functools.lru_cache(maxsize=8192)
def _longest_word(phrase: str) -> str:
    return max(normalize(phrase).lower().split(), key=len, default="")


def found_phrases(text: str, phrases: Iterable[str]) -> list[str]:
    """The distinct phrases that occur in ``text``, sorted, for citing evidence."""
    low = normalize(text).lower()
    counts = _word_counts(low)
    return sorted(
        {
            p
            for p in phrases
            if (counts[p] if WORD_RE.fullmatch(p) else _may_occur(p, low) and term_pattern(p).search(low) is not None)
        }
    )


@functools.lru_cache(maxsize=4096)
def term_pattern(term: str) -> re.Pattern[str]:
    """A case-insensitive whole-word pattern for ``term``; inner whitespace matches any whitespace."""
    parts = [re.escape(p) for p in normalize(term).lower().split()]
    body = r"\s+".join(parts)
    # Word boundaries only where the term starts/ends with a word character ("C++" has none at the end).
    left = r"(?<!\w)" if parts and re.match(r"\w", parts[0][:1]) else ""
    right = r"(?!\w)" if parts and re.search(r"\w$", normalize(term)) else ""
    return re.compile(left + body + right, re.IGNORECASE)


def count_term(text: str, term: str) -> int:
    return len(term_pattern(term).findall(normalize(text)))


def contraction_count(text: str) -> int:
    return len(_CONTRACTION_RE.findall(normalize(text).lower()))


def second_person_count(text: str) -> int:
    return sum(1 for w in words(text) if w.lower() in SECOND_PERSON)


def exclamation_count(text: str) -> int:
    return text.count("!") + text.count("！")


def question_count(text: str) -> int:
    return text.count("?") + text.count("？")


def emoji_count(text: str) -> int:
    return len(_EMOJI_RE.findall(text))


def shouting_count(text: str) -> int:
    """All-caps words of three or more letters that are not known acronyms ("FREE", "NOW")."""
    return sum(1 for w in words(text) if len(w) >= 3 and w.isalpha() and w.isupper() and w not in ACRONYMS)


def passive_count(text: str) -> int:
    """Passive-voice proxy: a form of "be"/"get" followed by a past participle."""
    return len(_PASSIVE_RE.findall(normalize(text).lower()))


def imperative_opener_count(text: str) -> int:
    """Sentences (or list items) that open with a base-form verb: "Click...", "Please send...", "Don't..."."""
    count = 0
    for sentence in split_sentences(text):
        ws = [w.lower() for w in words(_BULLET_RE.sub("", sentence))]
        if not ws:
            continue
        first = ws[1] if ws[0] == "please" and len(ws) > 1 else ws[0]
        if first in IMPERATIVE_VERBS:
            count += 1
    return count


def number_count(text: str) -> int:
    return len(_NUMBER_RE.findall(normalize(text)))


def proper_noun_count(text: str) -> int:
    """Capitalised words not at a sentence start (names, products, places): a concreteness proxy."""
    count = 0
    for sentence in split_sentences(text):
        ws = words(_BULLET_RE.sub("", sentence))
        for w in ws[1:]:
            if w[:1].isupper() and not w.isupper() and w != "I":
                count += 1
    return count


def jargon_count(text: str) -> int:
    """Technical or business jargon: listed terms, acronyms, and code-like tokens (camelCase, snake_case)."""
    ws = words(text)
    listed = sum(1 for w in ws if w.lower() in JARGON)
    acronyms = sum(1 for w in ws if 2 <= len(w) <= 6 and w.isupper() and w.isalpha() and w != "I")
    acronyms -= sum(1 for w in ws if w.lower() in JARGON and w.isupper())  # "API" counted once
    codeish = sum(1 for tok in normalize(text).split() if _CODEISH_RE.match(tok.strip(".,;:!?()\"'")))
    return listed + max(0, acronyms) + codeish


def long_word_fraction(text: str) -> float:
    """Share of words with three or more syllables (a formality and difficulty signal)."""
    ws = [w for w in words(text) if any(c.isalpha() for c in w)]
    if not ws:
        return 0.0
    return sum(1 for w in ws if count_syllables(w) >= 3) / len(ws)


def sentiment_counts(text: str) -> tuple[int, int]:
    """(positive, negative) word counts from the built-in lexicons. A negator just before flips a word."""
    ws = [w.lower() for w in words(text)]
    pos = neg = 0
    for i, w in enumerate(ws):
        negated = i > 0 and ws[i - 1] in {"not", "no", "never", "isn't", "wasn't", "don't", "doesn't", "hardly"}
        if w in POSITIVE:
            if negated:
                neg += 1
            else:
                pos += 1
        elif w in NEGATIVE:
            if negated:
                pos += 1
            else:
                neg += 1
    return pos, neg
