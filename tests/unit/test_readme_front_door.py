"""The README as a front door for a first-time reader (issue 39): no seed numbers, and the upgrade notes moved
to CHANGELOG.md, whose links resolve as the README's do (tests/unit/test_docs_reference.py)."""

from __future__ import annotations

import re

from tests.unit.test_docs_reference import ROOT, _anchors


def test_the_upgrade_notes_live_in_the_changelog_and_its_links_resolve() -> None:
    readme, changelog = (ROOT / "README.md").read_text(), (ROOT / "CHANGELOG.md").read_text()
    assert "### Upgrading" not in readme
    assert "](CHANGELOG.md)" in readme
    for note in ("schema version 3", "schema version 2", "on-disk tables", "the batched audit", "judge tiers"):
        assert f"## Upgrading workers to {note}" in changelog or f"## Upgrading to {note}" in changelog, note
    links = re.findall(r"\]\(([^)\s]+)\)", changelog)
    assert len(links) > 10
    for link in links:
        path, _, anchor = link.partition("#")
        assert (ROOT / path).exists(), link
        if anchor:
            assert anchor in _anchors(ROOT / path), f"{link}: no such heading"


def test_the_readme_says_no_seed_numbers() -> None:
    assert not re.search(r"\bseed 00\d", (ROOT / "README.md").read_text())
