"""What a first-time user meets at the command line: ``--version``, ``evaluate``'s line per pair, one clear
error for a JSON array where JSON Lines is read, and reason codes said in words."""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path
from typing import get_args

import pytest
from rich.console import Console
from typer.testing import CliRunner

from pairjudge.schemas.events import ReviewReason, TieBreakReason
from pairjudge.streams.cli import app
from pairjudge.streams.cli.base import PIPED_WIDTH, output_console, pairjudge_command
from pairjudge.streams.cli.demo import DemoResult, _print_audit, _print_next, _print_summary
from pairjudge.streams.cli.words import REVIEW_WORDS, TIEBREAK_WORDS, reason_words, shorten
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.collector import Outcomes
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


# --- the demos' printouts --------------------------------------------------------------------------------


def _demo_result(**extra: object) -> DemoResult:
    outcomes = Outcomes(expected={"r1-docs-pagination-with-a-long-id", "r1-docs-auth", "r1-bad-missing-rubric"})
    outcomes.final = {
        "r1-docs-pagination-with-a-long-id": ("review", {"reason": "tiebreak_no_signal"}),
        "r1-docs-auth": (
            "verdicts",
            {"winner": "champion", "winner_role": "champion", "confidence": 0.92, "decided_by": "primary"},
        ),
        "r1-bad-missing-rubric": ("deadletter", {"reason": "missing_field"}),
    }
    return DemoResult(outcomes=outcomes, wall_seconds=3.0, **extra)  # type: ignore[arg-type]


def test_the_demo_outcome_table_folds_rather_than_cuts_at_80_columns(tmp_path: Path) -> None:
    console = Console(record=True, width=80)
    _print_summary(console, _demo_result(), tmp_path / "o.jsonl", Settings())
    text = console.export_text()
    assert "…" not in text
    # A folded cell continues on the next line: every word of the reason is there, and the whole pair id.
    for word in ("the judge could", "not decide:", "nothing", "apart", "(tiebreak_no_sign"):
        assert word in text, word
    assert "docs-pagination-with" in text
    assert "-a-long-id" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "bad-missing-rubric" in text


def test_the_demo_shows_a_line_without_a_pair_id_as_a_dead_letter(tmp_path: Path) -> None:
    console = Console(record=True, width=120)
    _print_summary(console, _demo_result(keyless={16: "malformed_json"}), tmp_path / "o.jsonl", Settings())
    text = console.export_text()
    assert "line 16 (no pair id)" in text
    assert "not JSON (malformed_json)" in text
    assert "4 of 4 lines sent have an outcome" in text
    assert "dead letters 2" in text


def test_a_piped_console_is_wide_enough_for_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert output_console().width == PIPED_WIDTH >= 120
    monkeypatch.setenv("COLUMNS", "90")
    assert output_console().width == 90


def test_printed_commands_can_be_pasted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "pairjudge").write_text("#!/bin/sh\n")
    (bin_dir / "pairjudge").chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert pairjudge_command() == ".venv/bin/pairjudge"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin")
    assert pairjudge_command() == "pairjudge"


def test_the_batch_demo_ends_pointing_at_the_next_step(tmp_path: Path) -> None:
    console = Console(record=True, width=100)
    _print_next(console, _demo_result(), True)
    text = console.export_text()
    assert f"{pairjudge_command()} demo --serve" in text
    assert f"{pairjudge_command()} evaluate" in text
    assert "docs/getting-started/index.md" in text


def test_the_live_demo_prints_a_report_command_that_can_be_pasted(capsys: pytest.CaptureFixture[str]) -> None:
    from pairjudge.streams.cli.live_demo import _print_ready, demo_users, parse_output

    _print_ready(Settings(), demo_users(), 1.0, Path("/tmp/x"))
    fields = parse_output(capsys.readouterr().out.splitlines())
    assert fields["report"].startswith(f"{pairjudge_command()} report --bootstrap ")


def test_the_demo_names_series_in_words_and_holds_kappa_back_on_few_labels(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from pairjudge.schemas.audit import Alert, AuditSeries, AuditSnapshot

    key = "offline:pairjudge-heuristic@heuristic-4|7e0945bc9b57c410|tone_style|brand-voice-q4"
    start = datetime(2026, 12, 6, tzinfo=UTC)
    snapshot = AuditSnapshot(
        series=key,
        series_info=AuditSeries(
            judge_provider="offline",
            judge_model="pairjudge-heuristic",
            prompt_template_hash="7e0945bc9b57c410",
            rubric="tone_style",
            experiment_id="brand-voice-q4",
        ),
        window_start=start,
        window_end=start.replace(day=7),
        pairs=7,
        verdicts=4,
        flips=0,
        tiebreaks=3,
        reviews=3,
        invalid_replies=0,
        position_a_wins=2,
        human_labels=4,
        human_decided=4,
        agreement=1.0,
        cohen_kappa=1.0,
        kappa_low=1.0,
        kappa_high=1.0,
    )
    alert = Alert(
        kind="tiebreak_rate_high", series=key, message="the tie-break ran on 43% of 7 pairs", value=0.43, threshold=0.2
    )
    console = Console(record=True, width=120)
    _print_audit(console, _demo_result(snapshots=[snapshot], alerts=[alert]), Settings())
    text = console.export_text()
    assert "7e0945bc" not in text
    assert "brand-voice-q4" in text
    assert "1.00 (1.00" not in text
    assert "too few labels (4 of 50)" in " ".join(text.split())
