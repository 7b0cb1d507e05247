"""A style guide's explicit rules, and which of them a judge's justification cites (docs/guides/drift-audit.md).

Pure and bounded: the drift audit records, per decision, only the *ids* of the rules the judge's
justifications cite (never text), so the report can rank the rules that come up in pairs the judge's
orders, or the judge and the humans, disagree on.

**Rules.** A guide has explicit rules when it is written as numbered lines (``1.``, ``2)``, ``(3)``,
``Rule 4:``, ``2.1``), bulleted lines (``-``, ``*``, ``+``, ``•``) or headed sections (a Markdown heading
``## Voice``, or a short line ending in a colon, ``Voice:``). Plain prose has none. Lines that follow a
rule without a blank line continue it; prose under a heading belongs to the section.

**Ids** (stable: a function of the guide's text alone), each prefixed by the guide's own id (8 hex digits
of a hash of its whitespace-normalised text), because one audit series may see many guides:

- a numbered rule: its number, ``3`` or ``2.1``; when a number occurs twice (two lists each from 1), every
  rule with it is qualified by its section, ``voice/1``, and a ``~2``, ``~3``... is added if that still repeats;
- a section: ``sec-`` and its heading in lower case, words joined by ``-`` (at most 40 characters);
- a bulleted rule: ``b`` and 6 hex digits of a hash of its text.

**Citations.** A justification cites a rule when it

1. names its number: ``rule 3``, ``rules 2 and 4``, ``guideline 3``, ``item 3``, ``point 3``, ``#3``, ``§3``
   (only a number exactly one rule has: a repeated number is ambiguous, so it names none);
2. names its section: the heading's words in a row; a one-word heading only beside ``section``,
   ``heading``, ``part``, ``rule(s)`` or ``guideline(s)`` (``the Voice section``), since a single
   word like "tone" is used in every justification;
3. quotes it: any 4 consecutive words of the rule (3 for a 3-word rule) with at least 2 words that
   are not stop words, and that no other rule of the guide contains (a *distinctive* n-gram). Words are
   compared case-folded, punctuation ignored. Rules of 1 or 2 words can only be cited by number or section.

**Bounds.** At most ``MAX_GUIDE_CHARS`` of a guide and ``MAX_JUSTIFICATION_CHARS`` of a justification are
read, at most ``MAX_RULES`` rules kept (in guide order), ``MAX_RULE_WORDS`` words of each used for
n-grams, and at most ``MAX_CITED`` ids returned, so a huge or hostile guide costs bounded time and space.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = [
    "MAX_CITED",
    "MAX_GUIDE_CHARS",
    "MAX_JUSTIFICATION_CHARS",
    "MAX_RULES",
    "MAX_RULE_WORDS",
    "GuideRule",
    "GuideRules",
    "cited_rules",
    "guide_id",
    "parse_guide",
]

MAX_GUIDE_CHARS = 20_000
MAX_JUSTIFICATION_CHARS = 8_000
MAX_RULES = 64
MAX_RULE_WORDS = 80
MAX_CITED = 16
NGRAM = 4
_MAX_SLUG = 40

_HEADING_MD = re.compile(r"^\s{0,3}#{1,6}\s+(?P<text>.+?)\s*#*\s*$")
_HEADING_COLON = re.compile(r"^\s*(?P<text>[^\W\d_][^:\n]{0,58}):\s*$")
_NUMBERED = re.compile(
    r"^\s*(?:rule\s+)?\(?(?P<num>\d{1,3}(?:\.\d{1,3}){0,2})\s*[.):]\s+(?P<text>\S.*)$", re.IGNORECASE
)
_DOTTED = re.compile(r"^\s*(?P<num>\d{1,3}(?:\.\d{1,3}){1,2})\s+(?P<text>\S.*)$")
_BULLET = re.compile(r"^\s*[-*+\u2022\u2023\u25e6]\s+(?P<text>\S.*)$")
_NUM = r"\d{1,3}(?:\.\d{1,3}){0,2}"
_NUMBER_CITE = re.compile(
    rf"(?:\b(?:rules?|guidelines?|items?|points?)\s+|[#\u00a7]\s?)(?P<first>{_NUM})"
    rf"(?P<rest>(?:\s*(?:,|and|&|or|/)\s*{_NUM})*)",
    re.IGNORECASE,
)
_NUM_ANY = re.compile(_NUM)
#: A word, with its apostrophes ("customer's", "don't"): case-folded, everything else is a separator.
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_MARKERS = frozenset({"section", "heading", "part", "rule", "rules", "guideline", "guidelines"})
#: Words too common to make an n-gram distinctive on their own.
_STOP_WORDS = (
    "a an the and or but if of to in on at by for with from as is are be been was were it its this that "
    "these those you your we our they their he she his her not no do does use used using than then so "
    "such can may must should will would all any each every more most less very also into out up down per"
)
_STOP = frozenset(_STOP_WORDS.split())


def _words(text: str) -> list[str]:
    return [w.replace("\u2019", "'") for w in _WORD.findall(text.casefold())]


def _slug(text: str) -> str:
    return "-".join(_words(text))[:_MAX_SLUG].strip("-") or "section"


def _short_hash(text: str, digits: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:digits]


def guide_id(guide: str) -> str:
    """The guide's own id: 8 hex digits of a hash of its whitespace-normalised text (first ``MAX_GUIDE_CHARS``)."""
    return _short_hash(" ".join(guide[:MAX_GUIDE_CHARS].split()), 8)


@dataclass(frozen=True, slots=True)
class GuideRule:
    """One rule: its id (with the guide's prefix), how it can be named, and its distinctive n-grams."""

    rule_id: str
    kind: str  # "numbered", "bullet" or "section"
    number: str | None
    heading: tuple[str, ...]
    ngrams: frozenset[tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class GuideRules:
    """A guide's rules, and its numbers that name exactly one rule."""

    guide_id: str
    rules: tuple[GuideRule, ...]
    by_number: dict[str, str] = field(default_factory=dict)

    def cited(self, justifications: Iterable[str | None]) -> tuple[str, ...]:
        """The ids of the rules any of ``justifications`` cites (module docstring), sorted, at most ``MAX_CITED``."""
        found: set[str] = set()
        for text in justifications:
            if text and self.rules:
                found |= self._cited_by(text[:MAX_JUSTIFICATION_CHARS])
        return tuple(sorted(found)[:MAX_CITED])

    def _cited_by(self, text: str) -> set[str]:
        found: set[str] = set()
        for match in _NUMBER_CITE.finditer(text):
            for number in (match["first"], *_NUM_ANY.findall(match["rest"])):
                if number in self.by_number:
                    found.add(self.by_number[number])
        words = _words(text)
        grams: dict[int, set[tuple[str, ...]]] = {
            n: {tuple(words[i : i + n]) for i in range(len(words) - n + 1)} for n in (3, NGRAM)
        }
        for rule in self.rules:
            if rule.rule_id in found:
                continue
            if any(gram in grams[len(gram)] for gram in rule.ngrams) or _names_heading(words, rule.heading):
                found.add(rule.rule_id)
        return found


def _names_heading(words: list[str], heading: tuple[str, ...]) -> bool:
    n = len(heading)
    if n == 0:
        return False
    content = any(w not in _STOP for w in heading)
    for i in range(len(words) - n + 1):
        if tuple(words[i : i + n]) != heading:
            continue
        if n >= 2 and content:
            return True
        beside = {words[j] for j in (i - 1, i + n) if 0 <= j < len(words)}
        if beside & _MARKERS:
            return True
    return False


@dataclass
class _Draft:
    kind: str
    number: str | None
    section: str | None  # the enclosing section's slug
    heading: str
    lines: list[str]


def _drafts(guide: str) -> list[_Draft]:
    """The guide's rules in order, before ids: each numbered or bulleted item, each headed section."""
    drafts: list[_Draft] = []
    section: _Draft | None = None
    item: _Draft | None = None
    for line in guide[:MAX_GUIDE_CHARS].splitlines():
        if not line.strip():
            item = None
            continue
        heading = _HEADING_MD.match(line) or _HEADING_COLON.match(line)
        numbered = _NUMBERED.match(line) or _DOTTED.match(line)
        bullet = None if numbered else _BULLET.match(line)
        if heading and not numbered and not bullet:
            section = _Draft("section", None, None, heading["text"], [heading["text"]])
            drafts.append(section)
            item = None
        elif numbered or bullet:
            found = numbered or bullet
            assert found is not None
            slug = _slug(section.heading) if section else None
            item = _Draft("numbered" if numbered else "bullet", numbered["num"] if numbered else None, slug, "", [])
            item.lines.append(found["text"])
            drafts.append(item)
        elif item is not None:
            item.lines.append(line)  # a rule continued on the next line
        elif section is not None:
            section.lines.append(line)  # the section's own prose
        if len(drafts) > MAX_RULES:
            break
    return drafts[:MAX_RULES]


def _local_ids(drafts: list[_Draft]) -> tuple[list[str], dict[str, int]]:
    numbers = Counter(d.number for d in drafts if d.number is not None)
    ids: list[str] = []
    for d in drafts:
        if d.kind == "section":
            ids.append(f"sec-{_slug(d.heading)}")
        elif d.number is not None:
            repeated = numbers[d.number] > 1 and d.section is not None
            ids.append(f"{d.section}/{d.number}" if repeated else d.number)
        else:
            ids.append("b" + _short_hash(" ".join(_words(" ".join(d.lines))), 6))
    seen: Counter[str] = Counter()
    unique: list[str] = []
    for local in ids:
        seen[local] += 1
        unique.append(local if seen[local] == 1 else f"{local}~{seen[local]}")
    return unique, dict(numbers)


def _candidate_ngrams(words: list[str]) -> set[tuple[str, ...]]:
    words = words[:MAX_RULE_WORDS]
    n = NGRAM if len(words) >= NGRAM else 3
    grams = {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
    return {g for g in grams if sum(w not in _STOP for w in g) >= 2}


@lru_cache(maxsize=128)
def parse_guide(guide: str) -> GuideRules:
    """The guide's explicit rules (module docstring); none for plain prose. Cached: a series sees few guides."""
    gid = guide_id(guide)
    drafts = _drafts(guide)
    local, numbers = _local_ids(drafts)
    grams = [_candidate_ngrams(_words(" ".join(d.lines))) for d in drafts]
    counts: Counter[tuple[str, ...]] = Counter(g for rule_grams in grams for g in rule_grams)
    rules = tuple(
        GuideRule(
            rule_id=f"{gid}:{lid}",
            kind=d.kind,
            number=d.number,
            heading=tuple(_words(d.heading)) if d.kind == "section" else (),
            ngrams=frozenset(g for g in rule_grams if counts[g] == 1),
        )
        for d, lid, rule_grams in zip(drafts, local, grams, strict=True)
    )
    by_number = {r.number: r.rule_id for r in rules if r.number is not None and numbers[r.number] == 1}
    return GuideRules(gid, rules, by_number)


def cited_rules(guide: str, justifications: Iterable[str | None]) -> tuple[str, ...]:
    """The ids of ``guide``'s rules that ``justifications`` cite; empty for a guide without explicit rules."""
    return parse_guide(guide).cited(justifications)
