"""Per-text features: marker counts, register, drift and the ``Profile`` the scorers compare.

Each function looks at one text at a time, so an output's features never depend on the position it
was shown in. These are proxies (word lists, regular expressions), not understanding."""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from pairjudge.agents.offline.markers import (
    contraction_count,
    count_phrases,
    emoji_count,
    exclamation_count,
    found_phrases,
    imperative_opener_count,
    jargon_count,
    long_word_fraction,
    number_count,
    passive_count,
    proper_noun_count,
    question_count,
    second_person_count,
    sentiment_counts,
    shouting_count,
)
from pairjudge.agents.offline.text import (
    bullet_count,
    lines,
    numbered_count,
    readability,
    sentence_length_cv,
    split_sentences,
    words,
)
from pairjudge.agents.offline.words import (
    ADVICE_PHRASES,
    DEICTIC_WORDS,
    EMPATHY,
    ENERGY_WORDS,
    EXPLICIT_WORDS,
    FILLERS,
    FORMAL_VOCABULARY,
    HEDGES,
    RUDE,
    SLANG,
    UNSAFE_MARKERS,
    VAGUE,
)

# --- orthography: how carefully a text is written ------------------------------------------------

_REPEATED_PUNCT_RE = re.compile(r"[!?]{2,}|\.{3,}|…|\?!|!\?")
_LOWER_I_RE = re.compile(r"(?<![\w'])i(?![\w'])|(?<![\w'])i'(?:m|ve|ll|d)\b")
_SENTENCE_FINAL = frozenset(".!?…\"')]:;")


def careless_orthography(text: str) -> float:
    """0 (carefully written) .. 1: lower-case sentence starts, a lower-case "I", missing end
    punctuation and repeated punctuation ("!!", "...", "?!"), per sentence.

    Pavlick and Tetreault (2016) found case and punctuation among the strongest markers of informal
    writing; a fluent formal sentence and "in that case something mark." differ here first.
    """
    sentences = split_sentences(text)
    if not sentences:
        return 0.0
    lower_starts = sum(1 for s in sentences if (first := next((c for c in s if c.isalpha()), "")) and first.islower())
    unfinished = 0 if text.rstrip()[-1:] in _SENTENCE_FINAL else 1
    lower_i = len(_LOWER_I_RE.findall(text))
    repeated = len(_REPEATED_PUNCT_RE.findall(text))
    n = len(sentences)
    return clamp((lower_starts + 0.5 * unfinished + lower_i + repeated) / n, 0.0, 1.0)


# --- deixis: Heylighen and Dewaele's formality measure -------------------------------------------


def deixis_balance(text: str) -> float:
    """-1 (deictic, context-bound) .. +1 (explicit): articles and prepositions minus pronouns, place
    words and interjections, per word, scaled so everyday prose sits near 0.

    A word-class stand-in for Heylighen and Dewaele's (2002) F-score, which rises with nouns, articles
    and prepositions and falls with pronouns, adverbs and interjections. It does not grow with length.
    """
    ws = [w.lower() for w in words(text)]
    if not ws:
        return 0.0
    explicit = sum(1 for w in ws if w in EXPLICIT_WORDS)
    deictic = sum(1 for w in ws if w in DEICTIC_WORDS)
    # Shrunk towards 0 for short texts: one pronoun in a four-word sentence is not a style.
    return clamp((explicit - deictic) / (len(ws) + 6) / 0.15, -1.0, 1.0)


# --- politeness: the strategies of Danescu-Niculescu-Mizil et al. (2013) -----------------------------

#: Strategies their raters found polite: gratitude, apology, deference, greeting, indirect requests,
#: counterfactual modals, hedges, and "please" inside a sentence.
_POLITE_RES = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\b(?:thanks|thank you|thank u|thx|appreciated?|grateful)\b",
        r"\b(?:sorry|apologi[sz]e|apologies|excuse me|pardon|forgive me)\b",
        r"\b(?:great|nice|good|excellent|wonderful|helpful|interesting|impressive) (?:work|job|point|idea|question|"
        r"answer|edit|article|suggestion)\b",
        r"^(?:hi|hello|hey|dear|good (?:morning|afternoon|evening))\b",
        r"\b(?:could|would|might) (?:you|i|we|it)\b",
        r"\b(?:would you mind|do you mind|if you don't mind|if it's not too much)\b",
        r"\bwhen you (?:get|have) a (?:chance|moment)\b",
        r"\b(?:i (?:think|believe|guess|suppose|wonder|was wondering)|perhaps|maybe|possibly|it seems)\b",
        r"(?<!^)\bplease\b",
    )
)
#: Strategies their raters found impolite: direct questions, "you" at the start of a sentence,
#: emphatic or dismissive words, and a sentence that opens with "please" (a bare command).
_IMPOLITE_RES = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"^(?:why|what|how come|so|where|who|when)\b",
        r"^(?:you|your)\b",
        r"\b(?:seriously|really\?|obviously|clearly|in fact|actually|no offen[cs]e|whatever|come on)\b",
        r"^please\b",
        r"\b(?:stupid|idiot|ridiculous|nonsense|pointless|useless|wrong|lazy|dumb|crap)\b",
    )
)


def politeness(text: str) -> float:
    """-1 (rude, blunt) .. +1 (polite): polite minus impolite strategies per sentence, saturating."""
    sentences = split_sentences(text)
    if not sentences:
        return 0.0
    polite = sum(1 for s in sentences for r in _POLITE_RES if r.search(s))
    impolite = sum(1 for s in sentences for r in _IMPOLITE_RES if r.search(s))
    impolite += 2 * len(found_phrases(text, RUDE)) + shouting_count(text)
    n = len(sentences)
    return clamp((polite - impolite) / n, -1.0, 1.0)


# --- the per-text profile ---------------------------------------------------------------------


def _rate(count: float, total: float, per: float = 100.0) -> float:
    return 0.0 if total <= 0 else count * per / total


def _sat(value: float, full: float) -> float:
    """Saturating 0..1: ``value`` / ``full``, capped at 1."""
    return 0.0 if full <= 0 else max(0.0, min(1.0, value / full))


def clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


@dataclass(frozen=True, slots=True)
class Register:
    """Where a text sits on the register axes the style guides talk about."""

    formality: float  # -1 casual .. +1 formal
    warmth: float  # -1 cold/hostile .. +1 warm
    energy: float  # 0 calm .. 1 high-energy
    authority: float  # 0 hedging .. 1 assertive
    politeness: float = 0.0  # -1 rude/blunt .. +1 polite


def register(text: str) -> Register:
    """Score formality, warmth, energy and authority from marker rates (per 100 words / per sentence).

    The weights are hand-set so that plain, marker-free prose sits slightly on the formal side (0.3),
    slang or emoji pull hard towards casual, and formal connectives and passives push towards formal.
    """
    ws = words(text)
    n = len(ws)
    n_sent = max(1, len(split_sentences(text)))
    if n == 0:
        return Register(0.0, 0.0, 0.0, 0.5, 0.0)
    contractions = _sat(_rate(contraction_count(text), n), 5)
    slang = _sat(_rate(count_phrases(text, SLANG), n), 2)
    exclaim = _sat(exclamation_count(text) / n_sent, 0.5)
    emoji = _sat(_rate(emoji_count(text), n), 2)
    shouting = _sat(_rate(shouting_count(text), n), 2)
    you = _sat(_rate(second_person_count(text), n), 5)
    # Shrunk towards an everyday share for short texts: one long name in four words is not a register.
    long_share = (long_word_fraction(text) * n + 0.1 * 8) / (n + 8)
    long_words = clamp((long_share - 0.08) / 0.15, 0.0, 1.0)
    passive = _sat(passive_count(text) / n_sent, 0.3)
    formal_vocab = _sat(_rate(count_phrases(text, FORMAL_VOCABULARY), n), 2)
    formality = (
        0.3
        + 0.3 * long_words
        + 0.15 * passive
        + 0.25 * formal_vocab
        - 0.45 * contractions
        - 0.7 * slang
        - 0.35 * exclaim
        - 0.5 * emoji
        - 0.4 * shouting
        - 0.1 * you
        - 0.6 * careless_orthography(text)
        + 0.25 * deixis_balance(text)
    )
    pos, neg = sentiment_counts(text)
    empathy = _sat(_rate(count_phrases(text, EMPATHY), n), 2)
    rude = _sat(_rate(count_phrases(text, RUDE), n), 1)
    # Negative words weigh less than positive ones: support replies name "the problem" without being cold.
    warmth = (
        0.45 * _sat(_rate(pos, n), 4)
        + 0.4 * empathy
        + 0.25 * you
        + 0.1 * exclaim
        - 0.35 * _sat(_rate(neg, n), 6)
        - 0.8 * rude
    )
    mean_sentence = n / n_sent
    energy = (
        0.4 * exclaim
        + 0.3 * _sat(_rate(count_phrases(text, ENERGY_WORDS), n), 3)
        + 0.2 * _sat(imperative_opener_count(text) / n_sent, 0.5)
        + 0.1 * clamp((14 - mean_sentence) / 8, 0.0, 1.0)
        + 0.1 * shouting
    )
    authority = 1.0 - _sat(_rate(count_phrases(text, HEDGES), n), 3)
    return Register(
        formality=round(clamp(formality, -1.0, 1.0), 4),
        warmth=round(clamp(warmth, -1.0, 1.0), 4),
        energy=round(clamp(energy, 0.0, 1.0), 4),
        authority=round(clamp(authority, 0.0, 1.0), 4),
        politeness=round(politeness(text), 4),
    )


#: Words per half at which a half's register counts half (shrinkage): rates per 100 words saturate on one
#: marker in a short half, so without it a lone sign-off emoji or contraction reads as a change of voice.
DRIFT_HALF_WORDS = 15
#: Sentences shorter than this carry too few markers to place on the register scale ("Okay, fair.").
DRIFT_MIN_SENTENCE_WORDS = 4


def register_drift(text: str) -> float:
    """How far the register moves between the first and second half of the sentences.

    The larger of the formality shift and half the warmth shift (a warm closing line in a formal letter
    is normal; a switch from formal to slang is not), scaled by how much text each half holds
    (``n / (n + DRIFT_HALF_WORDS)`` for the shorter half). Fragments are left out, and the result is 0
    for fewer than four sentences, where halves are single sentences and the difference would be noise.
    """
    sentences = [s for s in split_sentences(text) if len(words(s)) >= DRIFT_MIN_SENTENCE_WORDS]
    if len(sentences) < 4:
        return 0.0
    mid = len(sentences) // 2
    first_text, second_text = " ".join(sentences[:mid]), " ".join(sentences[mid:])
    first, second = register(first_text), register(second_text)
    shift = max(abs(first.formality - second.formality), 0.5 * abs(first.warmth - second.warmth))
    shorter = min(len(words(first_text)), len(words(second_text)))
    return round(shift * shorter / (shorter + DRIFT_HALF_WORDS), 4)


_SALUTATION_RE = re.compile(
    r"^(?:dear|hi|hello|hey|hiya|greetings|good\s+(?:morning|afternoon|evening))\b[^.!?]{0,60}[,:]?$", re.IGNORECASE
)
_SIGN_OFF_RE = re.compile(
    r"^(?:yours(?:\s+(?:sincerely|faithfully|truly))?|sincerely|(?:(?:kind|warm|warmest|best|with\s+(?:warm|kind|best))\s+)?"
    r"regards|best(?:\s+wishes)?|all\s+the\s+best|cheers|thanks|many\s+thanks|with\s+thanks|thank\s+you|take\s+care)"
    r"(?:,[^.!?]*)?$",
    re.IGNORECASE,
)


def letter_body(text: str) -> str:
    """``text`` without a letter's frame: a salutation line at the start ("Dear Ms Hartley,") and a
    sign-off line near the end with the signature after it ("Yours sincerely," / "Edward Lyle").

    The frame is a convention, not the writer's voice: a three-word "Yours sincerely," between body
    sentences would otherwise count as uneven rhythm. Only whole short lines are removed, so a reply
    that opens "Hey Tom, ugh, sorry about the bag..." keeps its opening.
    """
    ls = [ln.strip() for ln in lines(text)]
    start, end = 0, len(ls)
    if ls and len(words(ls[0])) <= 6 and _SALUTATION_RE.match(ls[0]):
        start = 1
    for i in range(len(ls) - 1, max(start, len(ls) - 5) - 1, -1):
        if len(words(ls[i])) <= 6 and _SIGN_OFF_RE.match(ls[i]) and all(len(words(x)) <= 6 for x in ls[i + 1 :]):
            end = i
            break
    body = ls[start:end]
    return "\n".join(body) if body else text


@dataclass(frozen=True, slots=True)
class Profile:
    """Every feature the offline judge uses for one text, measured once."""

    word_count: int
    sentence_count: int
    flesch_reading_ease: float
    fk_grade: float
    sentence_length_cv: float
    mean_sentence_words: float
    contractions: int
    second_person: int
    exclamations: int
    questions: int
    hedges: int
    slang: tuple[str, ...]
    emoji: int
    shouting: int
    imperatives: int
    passives: int
    jargon: int
    numbers: int
    proper_nouns: int
    vague: int
    fillers: int
    advice: int
    bullets: int
    numbered: int
    positive: int
    negative: int
    empathy: int
    rude: tuple[str, ...]
    unsafe: tuple[str, ...]
    register: Register
    drift: float

    def per100(self, count: float) -> float:
        return _rate(count, self.word_count)


#: Profiles kept, by content hash. A pair is read about five times (two primary orders, two tie-break
#: orders, a forced-choice re-ask), and profiling was 86% of the judge's time (issue 9); a few thousand
#: entries cover every pair in flight on a worker. Keyed by digest so the cache never holds the texts.
PROFILE_CACHE_SIZE = 4096
_profiles: OrderedDict[bytes, Profile] = OrderedDict()
_profiles_lock = threading.Lock()


def profile(text: str) -> Profile:
    """The profile of ``text``, measured once per distinct text (an LRU cache keyed by BLAKE2b)."""
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    with _profiles_lock:
        cached = _profiles.get(key)
        if cached is not None:
            _profiles.move_to_end(key)
            return cached
    measured = measure_profile(text)
    with _profiles_lock:
        _profiles[key] = measured
        while len(_profiles) > PROFILE_CACHE_SIZE:
            _profiles.popitem(last=False)
    return measured


def measure_profile(text: str) -> Profile:
    """Measure every feature of ``text`` (uncached: use :func:`profile`)."""
    rd = readability(text)
    body = letter_body(text)  # rhythm and drift are about the writer's voice, not a letter's frame
    sentences = split_sentences(text)
    pos, neg = sentiment_counts(text)
    return Profile(
        word_count=rd.words,
        sentence_count=len(sentences),
        flesch_reading_ease=round(rd.flesch_reading_ease, 2),
        fk_grade=round(rd.fk_grade, 2),
        sentence_length_cv=round(sentence_length_cv(body), 4),
        mean_sentence_words=round(rd.words / max(1, len(sentences)), 2),
        contractions=contraction_count(text),
        second_person=second_person_count(text),
        exclamations=exclamation_count(text),
        questions=question_count(text),
        hedges=count_phrases(text, HEDGES),
        slang=tuple(found_phrases(text, SLANG)),
        emoji=emoji_count(text),
        shouting=shouting_count(text),
        imperatives=imperative_opener_count(text),
        passives=passive_count(text),
        jargon=jargon_count(text),
        numbers=number_count(text),
        proper_nouns=proper_noun_count(text),
        vague=count_phrases(text, VAGUE),
        fillers=count_phrases(text, FILLERS),
        advice=count_phrases(text, ADVICE_PHRASES),
        bullets=bullet_count(text),
        numbered=numbered_count(text),
        positive=pos,
        negative=neg,
        empathy=count_phrases(text, EMPATHY),
        rude=tuple(found_phrases(text, RUDE)),
        unsafe=tuple(found_phrases(text, UNSAFE_MARKERS)),
        register=register(text),
        drift=register_drift(body),
    )
