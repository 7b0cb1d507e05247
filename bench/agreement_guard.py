"""Labels to the guard's pause (issue 41 item 4): the agreement guard's bound in simulation, and both guards on a
real judge's recorded verdicts (GAIR-NLP/auto-j), before and after the agreement guard.

Run from the checkout root::

    python -m bench.agreement_guard sim                       # the bound: exact figures and 1,000 simulated runs
    python -m bench.agreement_guard autoj DIR [--part test]   # DIR: a checkout of github.com/GAIR-NLP/auto-j
    python -m bench.agreement_guard autoj DIR --by-group      # one series per Auto-J scenario group

**sim**: a judge whose pairs decided alone (both orders agreeing) agree with people with probability p, each label
independent. For each p: the exact chance of a pause by n labels (``pause_probabilities``: the binomial paths
stopped at the guard's boundary), its median and 90th percentile, the chance of a pause by 50 labels (where the
kappa guard starts to act), 1,000 simulated runs' median, and the closed-form approximation of the guide.

**autoj**: ``data/test/testdata_pairwise.jsonl`` (1,392 pairs, a human label each: 0 the first response, 1 the
second, 2 a tie) with Auto-J 13B's verdicts in the order shown (``data/outputs/pairwise_example_output.jsonl``) and
swapped (``pairwise_exchange_example_output.jsonl``, whose 0 and 1 name the swapped positions). The repository has
no licence: the data is read from DIR, never copied into this project. Pairs are split by
``sha256(prompt, response 1, response 2)``: last hex digit < 4 is the test part (``--part test``, the figures
reported), the rest ``dev``. A pair is decided alone when both orders name the same response (the plain both-orders
rule; a flip or a tie goes to people, and its label is a person's decision, not compared with the judge). Each
stream is the part's pairs in a fresh random order, pass after pass, up to ``--horizon`` pairs; each pair decided
alone is drawn into the audit with probability ``--audit-share`` (the policy's default 0.05) and its label joins
the series' window (one window: the stream fits in it). After every label the project's own guards
(``agents.audit.findings``) run on the window's sums: "before" with the agreement guard off (the kappa guard,
50 labels at least), "after" with the defaults. The first pausing finding stops the stream; pairs and labels to
it are counted over ``--runs`` streams.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from pairjudge.agents.audit import GuardBounds, WindowStats, findings
from pairjudge.agents.audit.agreement_guard import pause_probabilities, trip_boundary
from pairjudge.schemas import TIE, HumanLabel
from pairjudge.schemas.audit import AuditObservation, AuditSeries, DecisionRecord

FLOOR, ALPHA = 0.7, 0.05
PAUSING = frozenset({"kappa_below_threshold", "agreement_below_floor"})
SERIES = AuditSeries(judge_provider="auto-j", judge_model="autoj-13b", prompt_template_hash="autoj", rubric="pairwise")
CANDIDATES = ("response-1", "response-2")


def approximate_labels(p: float, floor: float = FLOOR, alpha: float = ALPHA) -> float:
    """The guide's closed form: n with n KL(p || floor) = log(1/alpha) + log(floor) + 1/2 log(n / (2 pi p (1-p))),
    where the mixture's Laplace approximation reaches 1/alpha when the agreement seen is p (fixed point)."""
    kl = p * math.log(p / floor) + (1 - p) * math.log((1 - p) / (1 - floor))
    n = 10.0
    for _ in range(100):
        n = (math.log(1 / alpha) + math.log(floor) + 0.5 * math.log(n / (2 * math.pi * p * (1 - p)))) / kl
    return n


def simulate(runs: int, seed: int) -> None:
    horizon = 3000
    boundary = trip_boundary(FLOOR, ALPHA, horizon)
    rng = np.random.default_rng(seed)
    print(f"floor {FLOOR}, alpha {ALPHA}; exact figures over {horizon} labels, {runs} simulated runs each")
    print(
        "| agreement | median labels | 90% by | mean | paused by 50 labels | simulated median | closed form "
        "| first order |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for p in (0.3, 0.5, 0.6, 0.7, 0.8, 0.85):
        paused = pause_probabilities(p, FLOOR, ALPHA, horizon)
        agreeing = np.cumsum(rng.random((runs, horizon)) < p, axis=1)
        trips = agreeing <= boundary[None, :]
        first = np.where(trips.any(axis=1), np.argmax(trips, axis=1) + 1, horizon + 1)
        if p < FLOOR:
            median, q90 = int(np.searchsorted(paused, 0.5)) + 1, int(np.searchsorted(paused, 0.9)) + 1
            mean = 1 + float(np.sum(1 - paused[:-1]))
            kl = p * math.log(p / FLOOR) + (1 - p) * math.log((1 - p) / (1 - FLOOR))
            print(
                f"| {p:.0%} | {median} | {q90} | {mean:.0f} | {paused[49]:.1%} | {np.median(first):.0f} | "
                f"{approximate_labels(p):.0f} | {math.log(1 / ALPHA) / kl:.0f} |"
            )
        else:
            print(
                f"| {p:.0%} | never: paused by {horizon} labels {paused[-1]:.2%} exactly, "
                f"{np.mean(first <= horizon):.1%} of runs | | | {paused[49]:.2%} | | | |"
            )


@dataclass(frozen=True)
class Pair:
    key: str
    human: str  # the relative label: a candidate id or TIE
    judge: str | None  # the candidate both orders named, or None (a flip, or a tie in either order)
    scenario: str = ""


def scenario_groups(root: Path) -> dict[str, str]:
    """Scenario -> its group, as Auto-J's own leaderboard groups them (``scenario_group`` in
    codes/leaderboard/utils_constants.py, read as a literal, never run)."""
    source = (root / "codes/leaderboard/utils_constants.py").read_text(encoding="utf-8")
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "scenario_group" for t in node.targets
        ):
            groups: dict[str, list[str]] = ast.literal_eval(node.value)
            return {scenario: group for group, members in groups.items() for scenario in members}
    raise SystemExit("scenario_group not found in codes/leaderboard/utils_constants.py")


def _label(code: str) -> str:
    return {"0": CANDIDATES[0], "1": CANDIDATES[1]}.get(code.strip(), TIE)


def load_autoj(root: Path) -> list[Pair]:
    def lines(rel: str) -> list[dict[str, str]]:
        return [json.loads(line) for line in (root / rel).read_text(encoding="utf-8").splitlines() if line.strip()]

    rows = lines("data/test/testdata_pairwise.jsonl")
    shown = lines("data/outputs/pairwise_example_output.jsonl")
    swapped = lines("data/outputs/pairwise_exchange_example_output.jsonl")
    if not len(rows) == len(shown) == len(swapped):
        raise SystemExit(f"the three files differ in length: {len(rows)}, {len(shown)}, {len(swapped)}")
    pairs = []
    for row, first, second in zip(rows, shown, swapped, strict=True):
        key = hashlib.sha256("\x00".join((row["prompt"], row["response 1"], row["response 2"])).encode()).hexdigest()
        in_order = _label(str(first["output"]))
        # The swapped run saw response 2 first: its "0" names response 2.
        out_of_order = {"0": CANDIDATES[1], "1": CANDIDATES[0]}.get(str(second["output"]).strip(), TIE)
        judge = in_order if in_order == out_of_order and in_order != TIE else None
        pairs.append(Pair(key, _label(str(row["label"])), judge, row.get("scenario", "")))
    return pairs


def _observation(i: int, pair: Pair) -> AuditObservation:
    record = DecisionRecord(
        pair_id=f"autoj-{i:05d}",
        series=SERIES,
        stage="primary",
        outcome="verdict",
        auto_decided=True,
        candidates=CANDIDATES,
        judge_winner=pair.judge,
        audit_sample=True,
    )
    label = HumanLabel(pair_id=record.pair_id, winner=pair.human, reviewer="autoj", from_audit=True)
    return AuditObservation(kind="labelled", series=SERIES, record=record, label=label)


def _to_pause(
    observations: list[AuditObservation], order: NDArray[np.int64], drawn: NDArray[np.bool_], bounds: GuardBounds
) -> tuple[int, int, str] | None:
    """Pairs and labels to the first pausing finding along one stream, and its kind; None: no pause."""
    stats = WindowStats()
    for labels, position in enumerate(np.flatnonzero(drawn), start=1):
        stats.add(observations[order[position]])
        kinds = [f.kind for f in findings(stats, bounds) if f.kind in PAUSING]
        if kinds:
            return int(position) + 1, labels, kinds[0]
    return None


def replay(root: Path, part: str, runs: int, horizon: int, audit_share: float, seed: int, by_group: bool) -> None:
    pairs = [p for p in load_autoj(root) if (int(p.key[-1], 16) < 4) == (part == "test")]
    if by_group:
        group_of = scenario_groups(root)
        for group in sorted({group_of.get(p.scenario, "Others") for p in pairs}):
            print(f"\n## {group}")
            members = [p for p in pairs if group_of.get(p.scenario, "Others") == group]
            _replay(members, part, runs, horizon, audit_share, seed)
        return
    _replay(pairs, part, runs, horizon, audit_share, seed)


def _replay(pairs: list[Pair], part: str, runs: int, horizon: int, audit_share: float, seed: int) -> None:
    alone = [p for p in pairs if p.judge is not None]
    agreeing = sum(p.judge == p.human for p in alone)
    print(
        f"Auto-J pairwise, {part} part: {len(pairs)} pairs, {len(alone)} decided alone ({len(alone) / len(pairs):.0%}),"
        f" agreeing with people on {agreeing} ({agreeing / len(alone):.1%}; human ties count as disagreement);"
        f" {sum(p.human == TIE for p in pairs)} human ties"
    )
    observations = [_observation(i, p) for i, p in enumerate(pairs)]
    decided = np.array([p.judge is not None for p in pairs])
    rng = np.random.default_rng(seed)
    passes = math.ceil(horizon / len(pairs))
    results: dict[str, list[tuple[int, int, str] | None]] = {"before": [], "after": []}
    started = time.process_time()
    for _ in range(runs):
        order = np.concatenate([rng.permutation(len(pairs)) for _ in range(passes)])[:horizon]
        drawn = decided[order] & (rng.random(horizon) < audit_share)
        results["before"].append(_to_pause(observations, order, drawn, GuardBounds(agreement_alpha=None)))
        results["after"].append(_to_pause(observations, order, drawn, GuardBounds()))
    cpu = time.process_time() - started
    print(f"{runs} streams of up to {horizon} pairs, audit share {audit_share}; {cpu:.0f} s CPU")
    print("| guards | streams paused | median pairs to pause | median labels | labels 10%-90% | paused by |")
    print("|---|---|---|---|---|---|")
    for name, got in results.items():
        hit = [r for r in got if r is not None]
        if not hit:
            print(f"| {name} | 0 of {runs} | - | - | - | - |")
            continue
        pairs_to, labels_to = np.array([r[0] for r in hit]), np.array([r[1] for r in hit])
        kinds = {k: sum(r[2] == k for r in hit) for k in sorted(PAUSING)}
        print(
            f"| {name} | {len(hit)} of {runs} | {np.median(pairs_to):.0f} | {np.median(labels_to):.0f} | "
            f"{np.quantile(labels_to, 0.1):.0f}-{np.quantile(labels_to, 0.9):.0f} | "
            + ", ".join(f"{k} {v}" for k, v in kinds.items() if v)
            + " |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("sim", help="the bound, exactly and in simulation")
    sim.add_argument("--runs", type=int, default=1000)
    sim.add_argument("--seed", type=int, default=41)
    autoj = sub.add_parser("autoj", help="both guards on Auto-J's recorded verdicts")
    autoj.add_argument("root", type=Path, help="a checkout of github.com/GAIR-NLP/auto-j")
    autoj.add_argument("--part", choices=("dev", "test"), default="dev")
    autoj.add_argument("--runs", type=int, default=1000)
    autoj.add_argument("--horizon", type=int, default=5000, help="pairs per stream at most")
    autoj.add_argument("--audit-share", type=float, default=0.05)
    autoj.add_argument("--seed", type=int, default=41)
    autoj.add_argument("--by-group", action="store_true", help="one series per Auto-J scenario group")
    args = parser.parse_args(argv)
    if args.command == "sim":
        simulate(args.runs, args.seed)
    else:
        replay(args.root, args.part, args.runs, args.horizon, args.audit_share, args.seed, args.by_group)
    return 0


if __name__ == "__main__":
    sys.exit(main())
