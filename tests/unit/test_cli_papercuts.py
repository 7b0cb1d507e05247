"""What a first-time user meets at the command line: ``--version``, ``evaluate``'s line per pair, one clear
error for a JSON array where JSON Lines is read, and reason codes said in words."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import get_args

import pytest
from typer.testing import CliRunner

from pairjudge.schemas.events import ReviewReason, TieBreakReason
from pairjudge.streams.cli import app
from pairjudge.streams.cli.words import REVIEW_WORDS, TIEBREAK_WORDS, reason_words, shorten
from tests.unit.factories import make_pair


def test_version_comes_from_the_installed_package() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"pairjudge {metadata.version('pairjudge-stream')} (pairjudge-stream)"


def _pairs_file(tmp_path: Path) -> Path:
    pairs = [
        make_pair(pair_id="p-judged"),
        make_pair(pair_id="p-same", outputs=("Same text.", "Same  text.")),
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(p.model_dump_json() + "\n" for p in pairs) + '{"pair_id": "p-cut", "task": \n')
    return path


def test_evaluate_prints_a_line_per_pair_with_its_winner_and_why(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["evaluate", str(_pairs_file(tmp_path))])
    assert result.exit_code == 1, result.output  # the cut line is not judged
    lines = {line.split()[0]: line for line in result.output.splitlines() if line.strip()}
    assert "tie" in lines["p-same"].split()
    assert "settled without a judge" in lines["p-same"]
    assert "not judged" in lines["p-cut"]
    assert "the event is not JSON" in lines["p-cut"]
    judged = lines["p-judged"]
    assert any(word in judged for word in ("champion", "challenger", "needs review", "tie")), judged
    assert "pairs" in result.output  # the totals stay
    for line in (lines["p-same"], lines["p-cut"], judged):
        assert len(line) <= 140, line


def test_evaluate_quiet_prints_only_the_totals(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["evaluate", "--quiet", str(_pairs_file(tmp_path))])
    assert result.exit_code == 1, result.output
    assert "settled without a judge" not in result.output
    assert "p-same" not in result.output
    assert "1 pair(s) not judged" in result.output
    assert "p-cut" in result.output  # a pair not judged is still named


def _array_file(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps([json.loads(make_pair(pair_id=f"p{i}").model_dump_json()) for i in range(51)], indent=2))
    return path


ARRAY_COMMANDS = {
    "evaluate": ["evaluate", "{file}"],
    "send": ["send", "{file}", "--bootstrap", "127.0.0.1:9"],
    "demo": ["demo", "--pairs", "{file}", "--bootstrap", "127.0.0.1:9"],
    "labels import": ["labels", "import", "{file}", "--format", "jsonl", "--dry-run"],
    "canary send": ["canary", "send", "{file}", "--bootstrap", "127.0.0.1:9"],
    "report --from": ["report", "--from", "{file}", "--out", "{out}"],
}


@pytest.mark.parametrize("command", list(ARRAY_COMMANDS))
def test_a_json_array_gets_one_clear_error_wherever_json_lines_is_read(command: str, tmp_path: Path) -> None:
    path = _array_file(tmp_path)
    args = [a.format(file=path, out=tmp_path / "r.html") for a in ARRAY_COMMANDS[command]]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "looks like a JSON array" in text
    assert "pairjudge reads JSON Lines, one object per line" in text
    assert "jq -c '.[]'" in text
    assert "malformed_json" not in text
    assert not (tmp_path / "r.html").exists()


def test_pretty_printed_json_is_named_too(tmp_path: Path) -> None:
    path = tmp_path / "pair.json"
    path.write_text(json.dumps(json.loads(make_pair().model_dump_json()), indent=2))
    result = CliRunner().invoke(app, ["evaluate", str(path)])
    assert result.exit_code == 2, result.output
    assert "pretty-printed JSON" in " ".join(result.output.split())


def test_every_review_and_tiebreak_reason_has_words() -> None:
    assert set(REVIEW_WORDS) == set(get_args(ReviewReason))
    assert set(TIEBREAK_WORDS) == set(get_args(TieBreakReason))
    assert reason_words("tiebreak_no_signal").endswith("(tiebreak_no_signal)")
    assert reason_words("something_new") == "something_new"


def test_shorten_cuts_at_a_word_with_an_ellipsis() -> None:
    assert shorten("short", 10) == "short"
    cut = shorten("the judge could not decide between them at all", 20)
    assert len(cut) <= 20
    assert cut.endswith("…")
    assert not cut[:-1].endswith(" ")
