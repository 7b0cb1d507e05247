"""The offline judge's word lists: data files in ``words/`` (one term a line), read once at import."""

from __future__ import annotations

from importlib import resources
from typing import Final


def _load(name: str) -> frozenset[str]:
    text = resources.files(__package__).joinpath("words", f"{name}.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


SLANG: Final = _load("slang")
HEDGES: Final = _load("hedges")
FILLERS: Final = _load("fillers")
FORMAL_VOCABULARY: Final = _load("formal_vocabulary")
POSITIVE: Final = _load("positive")
NEGATIVE: Final = _load("negative")
EMPATHY: Final = _load("empathy")
RUDE: Final = _load("rude")
ENERGY_WORDS: Final = _load("energy_words")
IMPERATIVE_VERBS: Final = _load("imperative_verbs")
ADVICE_PHRASES: Final = _load("advice_phrases")
VAGUE: Final = _load("vague")
JARGON: Final = _load("jargon")
ACRONYMS: Final = _load("acronyms")
UNSAFE_MARKERS: Final = _load("unsafe_markers")
SECOND_PERSON: Final = _load("second_person")
EXPLICIT_WORDS: Final = _load("explicit_words")
DEICTIC_WORDS: Final = _load("deictic_words")
