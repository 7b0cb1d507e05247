"""The BIPIA harness (``pairjudge_dev.injection_bipia``): its data, its split, and that it can fail.

The figures themselves are in docs/guides/prompt-injection.md (the held-out split was read once); these
tests pin what they rest on: the files are BIPIA's as recorded, the split is the recorded one, the
simulated judge is steered whenever an attack reaches it unmarked (so a datamark with a hole is caught),
and the guard's per-component results agree with the core's own path (``measure`` checks that itself).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

import pytest

from pairjudge.agents import untrusted
from pairjudge_dev.injection_bipia import BIPIA, FILES, measure, read_attacks


def test_the_files_are_the_ones_provenance_records() -> None:
    provenance = (BIPIA / "PROVENANCE.md").read_text(encoding="utf-8")
    for name in (*FILES, "LICENSE"):
        digest = hashlib.sha256((BIPIA / name).read_bytes()).hexdigest()
        assert re.search(rf"\| `{re.escape(name)}` \| `[^`]+` \| `{digest}` \|", provenance), name


def test_the_split_is_fixed_and_about_sixty_forty() -> None:
    attacks = read_attacks()
    assert len(attacks) == 250
    assert Counter(a.kind for a in attacks) == {"text": 150, "code": 100}
    splits = Counter(a.split for a in attacks)
    # Pinned: the held-out part was read once, for the guide's figures; a change here would re-split it.
    assert splits == {"dev": 141, "test": 109}


async def test_the_simulated_judge_obeys_unmarked_attacks_and_the_guard_components_agree() -> None:
    attacks = [a for a in read_attacks() if a.split == "dev"][:4]
    tally = await measure(attacks, forms=("plain",))
    assert tally.pairs == 4 * 3 * 2
    assert tally.steered["none"] == tally.pairs  # the harness can fail: unguarded, every pair is steered
    assert tally.steered["datamark"] == 0
    assert tally.steered["all"] == 0


async def test_a_datamark_that_skips_other_blanks_lets_disguised_attacks_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attacks = [a for a in read_attacks() if a.split == "dev"][:2]
    # Marks spaces (always) and, of the other blanks, newlines only.
    monkeypatch.setattr(untrusted, "_OTHER_GAP", re.compile(r"\n"))
    tally = await measure(attacks, forms=("nbsp", "braille"))
    assert tally.steered["datamark"] == tally.pairs  # every no-break-space or Braille-blank attack is obeyed
