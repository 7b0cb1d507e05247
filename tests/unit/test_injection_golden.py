"""The injection scan pinned text by text (issue 27: trimmed, not changed).

``tests/data/injection_golden.json`` holds, taken with the code before issue 27's trimming:

* ``hostile``: every finding (rule and excerpt) of ``agents.injection.detect`` on each output of the
  injection corpus (``tests/data/hostile_outputs.jsonl``), by id;
* ``bipia``: per BIPIA attack, a digest of its findings alone and embedded in a demo output in each of
  ``injection_bipia``'s disguises (the positions taking turns);
* ``edge``: the findings on ``pairjudge_dev.core_cases.EDGE_TEXTS``;
* ``ordinary``: per source of ordinary text (``injection_bipia.ordinary``, both splits), how many texts,
  the findings on each text flagged (by a digest of the text) and a digest of every text's findings;
* ``views``: per corpus, a digest of what ``agents.untrusted`` and ``agents.injection`` make of each text
  (hidden characters out, tags revealed, folded, normalised, neutralised, datamarked and unmarked), so
  a faster path through any of them shows here first.

``PAIRJUDGE_REPIN=1 pytest tests/unit/test_injection_golden.py`` re-pins after a deliberate change (and
still fails once, so a re-pin is never silent).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pairjudge.agents.injection import detect, normalise
from pairjudge.agents.untrusted import (
    datamark,
    fold,
    has_tag_text,
    neutralise,
    reveal_tags,
    strip_hidden,
    unmark,
)
from pairjudge_dev.core_cases import EDGE_TEXTS
from pairjudge_dev.injection_bipia import FORMS, POSITIONS, disguised, embed, ordinary, read_attacks
from pairjudge_dev.injection_eval import Corpus, demo_pairs
from tests.fixtures.golden import current_or_repin, read_pins

# On one worker under xdist: the corpus is scanned once (module fixtures), and only it may re-pin the file.
pytestmark = pytest.mark.xdist_group("injection-golden")

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "injection_golden.json"


def _digest(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _findings(text: str) -> list[list[str]]:
    return [[f.rule, f.excerpt] for f in detect(text)]


def _view(text: str) -> list[object]:
    shown = neutralise(text)
    marked = datamark(shown)
    return [
        strip_hidden(text),
        reveal_tags(text),
        fold(text),
        normalise(text),
        has_tag_text(text),
        shown,
        # Where the view held restore(shown) when these were pinned: that was strip_hidden(text) for every
        # text (restore went with the prompt reader, issue 36), so the pins stand unchanged.
        strip_hidden(text),
        marked,
        unmark(marked),
        datamark(text),
    ]


def _bipia_texts() -> Iterator[tuple[int, list[str]]]:
    carriers = [p.candidates[1].output for p in demo_pairs()]
    for i, attack in enumerate(read_attacks()):
        carrier = carriers[i % len(carriers)]
        # Every disguise, in one position per attack (they take turns): each pairing is met about 80 times.
        position = POSITIONS[i % len(POSITIONS)]
        yield i, [attack.text, *(embed(carrier, disguised(attack.text, form), position) for form in FORMS)]


def _ordinary() -> dict[str, list[str]]:
    by_source: dict[str, list[str]] = {}
    for split in ("dev", "test"):
        for source, text in ordinary(split):
            by_source.setdefault(source, []).append(text)
    return by_source


def _views(texts: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(_digest(_view(text)).encode())
    return digest.hexdigest()[:24]


def _ordinary_pins(texts: list[str]) -> dict[str, object]:
    findings = [_findings(t) for t in texts]
    return {
        "texts": len(texts),
        "flagged": {_digest(t): f for t, f in zip(texts, findings, strict=True) if f},
        "digest": _digest(findings),
    }


def _current() -> dict[str, Any]:
    hostile = Corpus.load().rows
    bipia = dict(_bipia_texts())
    plain = _ordinary()
    return {
        "hostile": {row["id"]: _findings(row["output"]) for row in hostile},
        "bipia": {str(i): _digest([_findings(t) for t in texts]) for i, texts in bipia.items()},
        "edge": [_findings(t) for t in EDGE_TEXTS],
        "ordinary": {source: _ordinary_pins(texts) for source, texts in plain.items()},
        "views": {
            "hostile": _views(row["output"] for row in hostile),
            "bipia": _views(t for texts in bipia.values() for t in texts),
            "edge": _views(EDGE_TEXTS),
            **{f"ordinary {source}": _views(texts) for source, texts in plain.items()},
        },
    }


@pytest.fixture(scope="module")
def current() -> dict[str, Any]:
    pins = _current()
    return current_or_repin(GOLDEN, pins, "the injection scan")


@pytest.fixture(scope="module")
def pinned(current: dict[str, Any]) -> dict[str, Any]:  # after ``current``, which may re-pin
    return read_pins(GOLDEN)


def test_the_hostile_corpus_is_flagged_as_pinned(current: dict[str, Any], pinned: dict[str, Any]) -> None:
    assert len(pinned["hostile"]) >= 120
    changed = {
        k: (v, current["hostile"].get(k)) for k, v in pinned["hostile"].items() if current["hostile"].get(k) != v
    }
    assert changed == {}
    assert current["edge"] == pinned["edge"]


def test_bipia_attacks_are_flagged_as_pinned(current: dict[str, Any], pinned: dict[str, Any]) -> None:
    assert len(pinned["bipia"]) >= 250
    changed = sorted(k for k, v in pinned["bipia"].items() if current["bipia"].get(k) != v)
    assert changed == []


def test_ordinary_text_is_flagged_as_pinned(current: dict[str, Any], pinned: dict[str, Any]) -> None:
    assert sum(s["texts"] for s in pinned["ordinary"].values()) >= 25_000
    assert current["ordinary"] == pinned["ordinary"]


def test_every_view_of_every_text_is_as_pinned(current: dict[str, Any], pinned: dict[str, Any]) -> None:
    assert current["views"] == pinned["views"]
