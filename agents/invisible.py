"""Is there anything to see? Text made only of invisible characters is no output at all.

An output of zero-width spaces (U+200B), joiners (U+200C, U+200D), word joiners (U+2060) or byte-order
marks (U+FEFF) passes a "non-empty" check and ``str.strip()``, yet shows a reader nothing. Judging it
would only measure how a judge reacts to an empty box, so ``check_pair`` rejects it like an empty output.
"""

from __future__ import annotations

import unicodedata
from typing import Final

#: Categories that never draw a glyph: controls, format characters (zero-width, joiners, bidi marks,
#: invisible operators, tags, soft hyphen) and separators (every kind of space, line and paragraph).
_INVISIBLE_CATEGORIES: Final = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


def _chars(*ranges: tuple[int, int]) -> frozenset[str]:
    return frozenset(chr(c) for first, last in ranges for c in range(first, last + 1))


#: Invisible characters of other categories: Unicode's default-ignorable marks and fillers (combining
#: grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian and standard variation selectors,
#: the reserved ignorable ranges), and the blank Braille pattern that is used as an invisible filler.
_INVISIBLE_OTHERS: Final = _chars(
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2065, 0x2065),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0xE0000, 0xE0FFF),
)


def is_blank(text: str) -> bool:
    """True when ``text`` has no visible character: empty, whitespace, or only invisible characters.

    Stops at the first visible character, so ordinary text costs one or two lookups.
    """
    return not any(
        ch not in _INVISIBLE_OTHERS and unicodedata.category(ch) not in _INVISIBLE_CATEGORIES for ch in text.strip()
    )
