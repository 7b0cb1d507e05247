"""strip_hidden finishes in one pass: what it means to hide never survives, and stripping twice changes nothing.

A zero-width (non-)joiner is kept only between two non-ASCII characters *of the text shown*: when its
neighbour is itself hidden and removed, the joiner's new neighbour decides. Checked over seeded random
mixes of hidden characters, joiners, emoji, scripts that need joiners, ASCII text and special tokens.
"""

from __future__ import annotations

import random

import pytest

from pairjudge.agents import untrusted
from pairjudge.agents.untrusted import strip_hidden

_JOINERS = untrusted._JOINERS
_ALWAYS_HIDDEN = untrusted._BIDI + untrusted._ZERO_WIDTH + "\U000e0001\U000e0020\U000e0041\U000e007f"
_PIECES = [
    *_ALWAYS_HIDDEN,
    *_JOINERS,
    *_JOINERS,
    "💻",
    "👩",
    "🏽",
    "\ufe0f",
    "ی",
    "क्ष",
    "é",
    "a",
    "<s>",
    " ",
    "\n",
    "text",
]


def _mixes(seed: int, count: int, longest: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_PIECES) for _ in range(rng.randint(0, longest))) for _ in range(count)]


def _survivors(shown: str) -> list[tuple[int, str]]:
    """The characters in ``shown`` that strip_hidden means to hide: any of the always-hidden ones, and a
    joiner that does not stand between two non-ASCII characters."""
    found = []
    for i, char in enumerate(shown):
        if char in _JOINERS:
            joins = 0 < i < len(shown) - 1 and not shown[i - 1].isascii() and not shown[i + 1].isascii()
            if not joins:
                found.append((i, char))
        elif untrusted._MAYBE_HIDDEN.fullmatch(char):
            found.append((i, char))
    return found


@pytest.mark.parametrize(
    "text",
    [
        "💻\u200d\u200b<s>",  # the joiner's right neighbour is hidden; after it goes, '<' is
        "<s>\u200b\u200d💻",
        "💻\u200d\u200d<s>",  # a run of joiners ending at ASCII
        "a\u200c\u200c\u200cی",
        "💻\u200d\u202e\u200d\U000e0041👩",  # kept: both ends of the run are non-ASCII once the rest is gone
        "\u200d💻",
        "💻\u200c",
    ],
)
def test_a_joiner_is_judged_by_the_neighbours_left_once_the_hidden_ones_are_gone(text: str) -> None:
    shown = strip_hidden(text)
    assert _survivors(shown) == []
    assert strip_hidden(shown) == shown


def test_the_joiners_that_join_non_ascii_characters_are_kept() -> None:
    assert strip_hidden("👩\u200d💻") == "👩\u200d💻"
    assert strip_hidden("👩\u200d\u200b💻") == "👩\u200d💻"
    assert strip_hidden("می\u200cخواهم") == "می\u200cخواهم"
    assert strip_hidden("💻\u200d\u200b<s>") == "💻<s>"


def test_a_long_run_of_joiners_goes_or_stays_whole() -> None:
    run = "\u200d\u200c" * 50_000
    assert strip_hidden("💻" + run + "<s>") == "💻<s>"
    assert strip_hidden("<s>" + run + "💻") == "<s>💻"
    assert strip_hidden("👩" + run + "\u200b💻") == "👩" + run + "💻"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stripping_is_idempotent_and_leaves_nothing_it_means_to_hide(seed: int) -> None:
    texts = _mixes(seed, 4_000, 16)
    assert [t for t in texts if strip_hidden(strip_hidden(t)) != strip_hidden(t)] == []
    assert [t for t in texts if _survivors(strip_hidden(t))] == []
    # Nothing else is removed: what is shown is the text minus hidden characters, in order.
    for text in texts:
        visible = "".join(c for c in text if not untrusted._MAYBE_HIDDEN.fullmatch(c))
        assert "".join(c for c in strip_hidden(text) if c not in _JOINERS) == visible
