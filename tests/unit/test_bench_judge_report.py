"""bench/judge.py's report survives a column that completed no pair (it divided by it and crashed)."""

from __future__ import annotations

import pytest

from bench.judge import Cell, LowLoad, StreamRun, _ratio, parse_args, report
from pairjudge_dev.bench import console


def cell(client: str, completed: int, *, server: bool = True) -> Cell:
    return Cell(
        inflight=128,
        completed=completed,
        window_s=3.0,
        launched=completed + 128,
        pair_ms=tuple(210.0 + i for i in range(completed)),
        client_cores=0.8,
        server_cores=0.3 if server else None,
        server_peak=256 if server else None,
        client=client,
    )


def render(results: dict[str, list[Cell]], low: LowLoad, runs: list[StreamRun], repeats: int) -> str:
    with console.capture() as captured:
        report(results, low, runs, repeats, parse_args(["--levels", "128"]))
    return captured.get()


def test_a_column_with_no_pair_prints_0_pairs_and_na() -> None:
    results = {
        "shipped": [cell("aiohttp", 0)],  # a collapsed client: nothing in the window
        "inprocess": [cell("no HTTP", 1900, server=False)],
    }
    low = LowLoad(call_ms=(201.0, 203.0), pair_ms=(204.0, 206.0), call_peak=1, pair_peak=2)
    runs = [StreamRun("cache on, empty", 200, 2.0, 280), StreamRun("cache off", 200, 2.1, 400)]
    runs.append(StreamRun("cache on, warm (new stack)", 200, 0.5, 0))
    out = render(results, low, runs, 60)
    assert "0 pairs" in out
    assert "n/a" in out  # the empty cell's percentiles and CPU per pair
    assert "633.3 (0.99)" in out  # the reference is still reported: 1900 pairs in 3 s of an ideal 640/s


def test_the_shipped_column_is_a_share_of_the_ideal_and_of_the_reference() -> None:
    results = {"shipped": [cell("aiohttp", 1800)], "inprocess": [cell("no HTTP", 1900, server=False)]}
    low = LowLoad(call_ms=(201.0, 203.0), pair_ms=(204.0, 206.0), call_peak=1, pair_peak=2)
    runs = [StreamRun(label, 200, 1.0, 400) for label in ("cache on, empty", "cache off", "cache on, warm (new stack)")]
    out = render(results, low, runs, 60)
    assert "600.0 (0.94)" in out  # 1800 pairs in 3 s of an ideal 640/s
    assert "0.95" in out  # shipped ÷ no HTTP


def test_nothing_completed_anywhere_still_reports() -> None:
    results = {kind: [cell(kind, 0, server=kind != "inprocess")] for kind in ("shipped", "inprocess")}
    low = LowLoad(call_ms=(), pair_ms=(), call_peak=0, pair_peak=0)
    runs = [StreamRun(label, 0, 1.0, 0) for label in ("cache on, empty", "cache off", "cache on, warm (new stack)")]
    out = render(results, low, runs, 0)
    assert out.count("0 pairs") >= 2
    assert "nan" not in out


@pytest.mark.parametrize(("num", "den", "shown"), [(1.0, 0.0, "n/a"), (1.0, float("nan"), "n/a"), (3.0, 2.0, "1.50")])
def test_ratio(num: float, den: float, shown: str) -> None:
    assert _ratio(num, den) == shown
