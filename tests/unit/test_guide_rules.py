"""A style guide's explicit rules and the justifications that cite them (agents.guide_rules)."""

from __future__ import annotations

import time

import pytest

from pairjudge.agents.guide_rules import (
    MAX_CITED,
    MAX_RULES,
    cited_rules,
    guide_id,
    parse_guide,
)

GUIDE = """Our house voice, for every reply.

## Voice
Warm and plain, never stiff or bureaucratic.
1. Open with the customer's name.
2. Never promise a delivery date you cannot keep.
3) One exclamation mark at most per message.

## Formatting
1. Keep paragraphs under three sentences long.
- Sign off with the team name, not a person.

Tone:
Calm even when the customer is angry.
"""


def _local(rule_id: str) -> str:
    return rule_id.split(":", 1)[1]


def test_numbers_sections_and_bullets_get_stable_ids_prefixed_by_the_guide() -> None:
    rules = parse_guide(GUIDE)
    gid = guide_id(GUIDE)
    assert rules.guide_id == gid
    assert all(r.rule_id.startswith(f"{gid}:") for r in rules.rules)
    locals_ = [_local(r.rule_id) for r in rules.rules]
    # "1" occurs in both sections, so each is qualified by its section; 2 and 3 are unique.
    assert locals_[:4] == ["sec-voice", "voice/1", "2", "3"]
    assert locals_[4:6] == ["sec-formatting", "formatting/1"]
    assert locals_[6].startswith("b")
    assert len(locals_[6]) == 7
    assert locals_[7] == "sec-tone"
    # Stable: the same text gives the same ids; whitespace changes do not change the guide's id.
    assert parse_guide(GUIDE.replace("\n\n", "\n\n\n")).guide_id == gid
    assert [r.rule_id for r in parse_guide(GUIDE + " ").rules] == [r.rule_id for r in rules.rules]
    # A different guide: a different prefix, so series mixing guides never confuse their rule 2s.
    assert guide_id(GUIDE.replace("Warm", "Cool")) != gid


def test_a_number_citation_names_only_a_number_one_rule_has() -> None:
    gid = guide_id(GUIDE)
    assert cited_rules(GUIDE, ["A breaks rule 2; B is fine."]) == (f"{gid}:2",)
    assert cited_rules(GUIDE, ["A breaks rules 2 and 3."]) == (f"{gid}:2", f"{gid}:3")
    assert cited_rules(GUIDE, ["See #3, and guideline 2."]) == (f"{gid}:2", f"{gid}:3")
    # "rule 1" is ambiguous (two lists start at 1): it names neither.
    assert cited_rules(GUIDE, ["A ignores rule 1."]) == ()
    # Numbers not introduced as a rule are not citations; nor is a number no rule has.
    assert cited_rules(GUIDE, ["Output 2 is longer, rated 3 of 5.", "A breaks rule 9."]) == ()


def test_quoting_a_distinctive_run_of_words_cites_the_rule() -> None:
    gid = guide_id(GUIDE)
    assert cited_rules(GUIDE, ["B does not open with the customer's name."]) == (f"{gid}:voice/1",)
    assert cited_rules(GUIDE, ["A would SIGN OFF with the TEAM name!"]) == (
        f"{gid}:" + _local(parse_guide(GUIDE).rules[6].rule_id),
    )
    # Common words alone never cite: "with the" and stop-word runs are not distinctive.
    assert cited_rules(GUIDE, ["A is with the customer and not a person at all."]) == ()


def test_a_section_is_cited_by_its_heading_a_one_word_heading_only_beside_section() -> None:
    gid = guide_id(GUIDE)
    assert cited_rules(GUIDE, ["A keeps to the Voice section."]) == (f"{gid}:sec-voice",)
    assert cited_rules(GUIDE, ["Per the formatting rules, B wins."]) == (f"{gid}:sec-formatting",)
    # "tone" is in every tone-rubric justification: on its own it cites nothing.
    assert cited_rules(GUIDE, ["A's tone is warmer."]) == ()
    guide = "## Plain words\nShort words over long ones.\n## Brevity\nKeep it short."
    assert cited_rules(guide, ["B honours plain words throughout."]) == (f"{guide_id(guide)}:sec-plain-words",)


@pytest.mark.parametrize(
    "guide",
    [
        "Warm, plain and direct. Use 'you'. Never say 'unfortunately'. Sign off with 'Cheers'.",
        "",
        "   \n\n  ",
        "1 apple and 2 pears are not rules.",
    ],
)
def test_prose_without_explicit_rules_has_none(guide: str) -> None:
    assert parse_guide(guide).rules == ()
    assert cited_rules(guide, ["rule 1", "Use 'you'. Never say 'unfortunately'."]) == ()


def test_duplicate_numbering_without_sections_and_duplicate_bullets_stay_unique() -> None:
    guide = "1. Be brief and to the point.\n1. Be kind to every reader.\n- Same bullet text.\n- Same bullet text."
    ids = [_local(r.rule_id) for r in parse_guide(guide).rules]
    assert ids[0] == "1"
    assert ids[1] == "1~2"
    assert ids[3] == f"{ids[2]}~2"
    assert len(set(ids)) == 4
    assert cited_rules(guide, ["rule 1"]) == ()  # ambiguous


def test_continuation_lines_belong_to_their_rule() -> None:
    guide = "1. Never promise a date\n   you cannot keep for sure.\n2. Be brief."
    gid = guide_id(guide)
    assert cited_rules(guide, ["A says: a date you cannot keep for sure."]) == (f"{gid}:1",)


@pytest.mark.serial  # alone under xdist: its CPU time is asserted
def test_a_huge_hostile_guide_is_bounded_in_rules_citations_and_time() -> None:
    guide = "\n".join(f"{i}. Rule number {i} says word{i} alpha{i} beta{i} gamma{i}." for i in range(1, 5000))
    guide += "\n" + "#" * 5000 + " " + "x" * 100_000
    start = time.perf_counter()
    rules = parse_guide(guide)
    assert len(rules.rules) == MAX_RULES
    justification = " ".join(f"rule {i}, word{i} alpha{i} beta{i} gamma{i}" for i in range(1, 3000))
    cited = rules.cited([justification * 3])
    assert len(cited) == MAX_CITED
    assert time.perf_counter() - start < 2.0
    assert all(len(c) <= 60 for c in cited)


def test_headings_with_odd_text_get_bounded_ascii_free_slugs() -> None:
    guide = "## " + "Ünïcode heading " * 20 + "\n- a rule about émoji usage here\n## !!!\n- another rule with words"
    rules = parse_guide(guide)
    assert all(len(r.rule_id) <= 60 and " " not in r.rule_id for r in rules.rules)
    assert _local(rules.rules[0].rule_id).startswith("sec-ünïcode-heading")
