"""Untrusted text on its way into a judge's prompt: what is removed, what is escaped, and how to read it.

Outputs, task prompts and contexts come from models and end users. Before any of it is put into a
prompt (``agents.prompts``) it goes through :func:`neutralise`, in two steps:

1. **Hidden characters are removed** (:func:`strip_hidden`): zero-width spaces, word joiners and byte
   order marks, bidirectional embeddings, overrides and isolates ("Trojan Source" reordering), Unicode
   tag characters (U+E0000-E007F, which some models read as ASCII: hidden instructions), invisible
   operators, the soft hyphen. A zero-width (non-)joiner is kept only between two non-ASCII characters
   (of the text shown, once the other hidden ones are gone), where scripts (Persian, Indic) and emoji
   sequences need it. This step is lossy on purpose: what a judge is shown is what a person reading the
   text would see. ``agents.injection`` flags the text
   when something was hidden in it.
2. **Structure-like sequences are escaped**: delimiter tags of our templates (``<output_a …>``,
   ``</response_b>``, ``<task>``, ``<context>``, a conversation's ``<user_turn>``, ``<assistant_turn>``,
   ``<system_turn>``, ``<tool_turn>`` and ``<tool_call_turn>``, a reply's ``<tool_call>``, the ``<tools>``
   offered), and chat-template special tokens that servers may parse into real role
   markers when they render the prompt (``<|im_start|>``, ``<|eot_id|>``, ``<s>``, ``</s>``, ``<<SYS>>``,
   ``<start_of_turn>``, ``[INST]``, ``[/INST]``, ``[SYSTEM_PROMPT]`` …). Only the opening bracket is
   escaped (``<`` becomes ``&lt;``, any other bracket a numeric reference such as ``&#x5B;``), so the
   judge still reads what was written. Look-alikes count: the sequences are found on a *folded* view
   of the text, where each character that NFKC maps to one ASCII character (fullwidth ``＜``,
   mathematical letters) or that is a known confusable (Cyrillic ``е``, Greek ``ο``, angle quotes
   ``‹``, ``〈``) reads as that ASCII character. The fold maps one character to one, so positions in
   the folded view are positions in the text.

An ``&`` already written before such an escape is escaped too (``&amp;``), so no two texts are shown
alike: ``&lt;task`` written by an output is shown as ``&amp;lt;task``, never as the harness's escape of
``<task``.

**Datamarking** (:func:`datamark`, Hines et al. 2024, "Defending Against Indirect Prompt Injection
Attacks With Spotlighting") is a third, optional step, applied after :func:`neutralise` where the
policy asks for it (``Policy.datamark``): :data:`MARK` (U+02C6 ˆ) is put at every gap between words, so
the whole untrusted text carries a mark the system note names, and no sentence of it can read like the
prompt's own unmarked text. Every whitespace character counts as a gap (a no-break space or a tab
too), and so do the blank-looking characters that are not whitespace to Python (:data:`_BLANKS`):
otherwise an output could join its words with one of them and reach the judge unmarked. A mark
already in the text is escaped first (``&#x2C6;``, with the ``&amp;`` rule above), so an output
cannot place a mark of its own. :func:`unmark` undoes it exactly (``unmark(datamark(t)) == t`` for every
text), for a test's stand-in of an HTTP judge that finds an output in the marked prompt it was sent.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Final

__all__ = ["MARK", "datamark", "fold", "has_tag_text", "neutralise", "reveal_tags", "strip_hidden", "unmark"]

# --- hidden characters ------------------------------------------------------------------------

_BIDI: Final = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_ZERO_WIDTH: Final = "\u00ad\u180e\u200b\u2060\u2061\u2062\u2063\u2064\ufeff"
_JOINERS: Final = "\u200c\u200d"
# Tag characters: U+E0001 LANGUAGE TAG and U+E0020-E007F mirror ASCII ("ASCII smuggling").
_TAGS: Final = "\U000e0001-\U000e007f"

# Removed wherever they stand.
_ALWAYS_HIDDEN: Final = re.compile(f"[{_BIDI}{_ZERO_WIDTH}{_TAGS}]")
# A run of joiners is judged as one, by the characters around it once the others are gone: judged one by
# one against the neighbours they had, a joiner next to a removed character (or next to a joiner that goes)
# could outlive its reason to stay ("💻\u200d\u200b<s>" kept the joiner before "<s>"). A run goes unless
# both its neighbours are non-ASCII: one after ASCII or the start (the lookbehind only holds at a run's
# start), or one before ASCII or the end. The second alternative starts only at a run's start and never
# backtracks into it (possessive), so a long run costs one scan, not one per joiner.
_STRAY_JOINERS: Final = re.compile(
    f"(?<![^\\x00-\\x7f])[{_JOINERS}]+|(?<![{_JOINERS}])[{_JOINERS}]++(?![^\\x00-\\x7f])"
)
# Any character strip_hidden may remove: one class, which a search skips through in C. Most non-ASCII
# text (accents, quotes, emoji) has none of them.
_MAYBE_HIDDEN: Final = re.compile(f"[{_BIDI}{_ZERO_WIDTH}{_TAGS}{_JOINERS}]")
_TAG_RUN: Final = re.compile("[\U000e0020-\U000e007e]+")


def strip_hidden(text: str) -> str:
    """``text`` without the characters that show nothing yet can steer a reader (see the module doc).

    One pass is enough: ``strip_hidden(strip_hidden(t)) == strip_hidden(t)``.
    """
    if text.isascii() or _MAYBE_HIDDEN.search(text) is None:
        return text
    return _STRAY_JOINERS.sub("", _ALWAYS_HIDDEN.sub("", text))


def reveal_tags(text: str) -> str:
    """``text`` with each run of Unicode tag characters (U+E0020-E007E) replaced by the ASCII it mirrors."""
    if text.isascii():
        return text
    return _TAG_RUN.sub(lambda m: "".join(chr(ord(c) - 0xE0000) for c in m.group(0)), text)


def has_tag_text(text: str) -> bool:
    """True when ``text`` hides ASCII in Unicode tag characters."""
    return not text.isascii() and _TAG_RUN.search(text) is not None


# --- the folded view --------------------------------------------------------------------------

# Confusables that NFKC leaves alone but a reader (or a model) takes for ASCII: letters of the
# Cyrillic, Greek and IPA blocks drawn like Latin ones, and brackets, bars and slashes. A subset of
# Unicode's confusables.txt: the characters that can spell our tag names and special tokens.
_CONFUSABLES: Final = {
    **dict(zip("аеорсухіјѕԁһӏԛԝ", "aeopcyxijsdhlqw", strict=True)),
    **dict(zip("АВЕКМНОРСТХІЈЅ", "ABEKMHOPCTXIJS", strict=True)),
    **dict(zip("αοριτνκυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "aopitvkuxABEZHIKMNOPTYX", strict=True)),
    **dict(zip("ıɑɡ", "iag", strict=True)),
    **dict.fromkeys("‹〈〈⟨˂ᐸ❬❮", "<"),
    **dict.fromkeys("›〉〉⟩˃ᐳ❭❯", ">"),
    **dict.fromkeys("∣ǀ│❘", "|"),
    **dict.fromkeys("⁄∕⧸", "/"),
    **dict.fromkeys("⟦［", "["),
    **dict.fromkeys("⟧］", "]"),
}


class _FoldTable(dict[int, str]):
    """``str.translate`` table that works out each non-ASCII character's fold once, on first sight."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        folded = _CONFUSABLES.get(char)
        if folded is None:
            nfkc = unicodedata.normalize("NFKC", char)
            folded = nfkc if len(nfkc) == 1 and nfkc.isascii() else char
        self[code] = folded
        return folded


_FOLD: Final = _FoldTable()
_NON_ASCII: Final = re.compile(r"[^\x00-\x7f]")


def fold(text: str) -> str:
    """``text`` with every character that reads as one ASCII character replaced by it; same length."""
    if text.isascii():
        return text
    # What text.translate(_FOLD) gives, without a table lookup per character: only the distinct non-ASCII
    # characters can change (ASCII folds to itself), and each into ASCII, so one str.replace per
    # character that folds, in any order, writes the same text.
    for char in set(_NON_ASCII.findall(text)):
        folded = _FOLD[ord(char)]
        if folded != char:
            text = text.replace(char, folded)
    return text


# --- escaping structure-like sequences --------------------------------------------------------

# What may follow an opening "<" (case-insensitive, spaces allowed where parsers allow them):
_ANGLE_TAILS: Final = (
    # our delimiters, any attributes (a conversation's turns too: <user_turn>, <assistant_turn>, <system_turn>)
    r"\s*/?\s*(?:output_[ab]|response_[ab]|task|context|(?:user|assistant|system|tool|tool_call)_turn"
    r"|tool_call|tools)\b"  # a reply's tool calls, the tools offered (schema version 3)
    r"|\|[^|<>\s]{1,40}\|>"  # <|im_start|>, <|eot_id|>, <|start_header_id|>, <|channel|> ...
    r"|/?s>"  # <s>, </s>
    r"|<\s*/?\s*sys\s*>>"  # <<SYS>>, <</SYS>>
    r"|/?(?:start_of_turn|end_of_turn|bos|eos|eot|pad|unk|sep|cls|mask)>"
)
_SQUARE_TAILS: Final = r"/?(?:inst|system_prompt|available_tools|tool_calls|tool_results)\]"
_DANGER: Final = re.compile(rf"(?i)<(?={_ANGLE_TAILS})|\[(?={_SQUARE_TAILS})")
_ENTITY: Final = r"(?:lt|#x[0-9A-F]{1,6});"
# An "&" already before an escape-shaped entity that precedes a dangerous tail, so it cannot pass for our escape.
_AMPERSAND: Final = re.compile(rf"(?i)&(?=(?:amp;)*{_ENTITY}(?:{_ANGLE_TAILS}|{_SQUARE_TAILS}))")
_LITERAL: Final = re.compile(rf"(?i)&(?:amp;)*{_ENTITY}")


def _escape(char: str) -> str:
    return "&lt;" if char == "<" else f"&#x{ord(char):X};"


# Each output is neutralised four times a pair (each order's nonce and its slot): kept for the last few
# texts, so a pair pays once. Bounded: texts are at most ``Policy.max_output_chars`` long.
@functools.lru_cache(maxsize=64)
def neutralise(text: str) -> str:
    """``text`` as it may appear in a prompt: hidden characters removed, structure-like sequences escaped."""
    text = strip_hidden(text)
    folded = fold(text)
    if "<" not in folded and "[" not in folded and "&" not in folded:
        return text  # the common case: nothing to escape
    spots = {m.start(): _escape(text[m.start()]) for m in _DANGER.finditer(folded)}
    # Only a literal ASCII "&amp;…&lt;" run can be mistaken for an escape (a look-alike "＆lt;" is no entity).
    spots.update((m.start(), "&amp;") for m in _AMPERSAND.finditer(folded) if _LITERAL.match(text, m.start()))
    if not spots:
        return text
    pieces: list[str] = []
    last = 0
    for at in sorted(spots):
        pieces += (text[last:at], spots[at])
        last = at + 1
    pieces.append(text[last:])
    return "".join(pieces)


# --- datamarking --------------------------------------------------------------------------------

#: The datamark (U+02C6 MODIFIER LETTER CIRCUMFLEX ACCENT, the paper's own choice): rare in ordinary text,
#: one token-ish character, and not ASCII, so it cannot come from a keyboard's "^" by accident.
MARK: Final = "\u02c6"
# Characters that show as blank yet are not whitespace to Python's ``\s``: Braille blank, Hangul fillers,
# the Mongolian vowel separator. strip_hidden removes the zero-width ones; these stay, so they are marked.
_BLANKS: Final = "\u115f\u1160\u180e\u2800\u3164\uffa0"
#: Every character Python's ``\s`` matches (``str.isspace``) but the space: tests/unit/test_core_fastpaths.py
#: checks the list against every code point.
_WHITESPACE_BUT_SPACE: Final = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# Every gap but the plain space (``[\s{_BLANKS}]`` less " "): the kinds that get the mark before them rather
# than in their place. One class listed out, not "[^\S ]|[...]": a single class is scanned for in C.
_OTHER_GAP: Final = re.compile(f"[{_WHITESPACE_BUT_SPACE}{_BLANKS}]")
_MARK_ESCAPE: Final = "&#x2C6;"
# An "&" before an escape-shaped run ("&#x2C6;", "&amp;#x2C6;" ...) already in the text, so unmark
# cannot mistake it for an escaped mark.
_MARK_AMPERSAND: Final = re.compile(r"&(?=(?:amp;)*#x2C6;)")
_MARK_ESCAPES: Final = re.compile(r"&amp;(?=(?:amp;)*#x2C6;)|&#x2C6;")
_MARKED_GAP: Final = re.compile(f"{MARK}([\\s{_BLANKS}]?)")


def datamark(text: str) -> str:
    """``text`` with :data:`MARK` at every gap between words: a space becomes the mark, any other blank
    character (a newline, a tab, a no-break space) keeps its place after one, so lines stay lines.
    Marks already in ``text`` are escaped first (``&#x2C6;``), so every mark shown is one this function put."""
    if MARK in text or "&" in text:
        text = _MARK_AMPERSAND.sub("&amp;", text).replace(MARK, _MARK_ESCAPE)
    # One str.replace per kind of gap present rather than a Python call per gap: a space becomes the mark,
    # then each other kind gets the mark before it. The mark is no gap, so no replacement meets another's.
    marked = text.replace(" ", MARK)
    for gap in set(_OTHER_GAP.findall(text)):
        marked = marked.replace(gap, MARK + gap)
    return marked


def unmark(text: str) -> str:
    """The inverse of :func:`datamark`: ``unmark(datamark(t)) == t``."""
    if MARK in text:
        text = _MARKED_GAP.sub(lambda m: m.group(1) or " ", text)
    if "&" not in text:
        return text
    return _MARK_ESCAPES.sub(lambda m: "&" if m.group(0).startswith("&amp;") else MARK, text)
