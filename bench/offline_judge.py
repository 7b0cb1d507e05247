"""The offline judge alone: pairs per second and CPU per pair, this tree beside a baseline commit.

Issue 9 measured 11 pairs/s on long outputs and 69 on short ones, with profiling 86% of the time (each
text profiled again on every call, about five calls a pair). This runs the judging core exactly as
``pairjudge evaluate`` does (both orders, the tie-break where asked) over the same pairs with two code
trees, alternating rounds so machine noise hits both alike, and prints the ratio:

* **this tree** (the checkout the bench runs from);
* **baseline**: ``--baseline`` (default: the commit before issue 9's work), checked out into a
  temporary git worktree.

Pairs are public human-written text from ``evaldata/`` (never judged for accuracy here): *short*, one
sentence per output (formality and politeness data), and *long*, about 400 words per output (20
OneStopEnglish sentences per output). Each tree runs in its own interpreter, the import path pointed at
that tree, so neither run's caches help the other.

    python -m bench.offline_judge [--pairs 400] [--rounds 3] [--baseline 0482828]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "0482828"  # main before issue 9: the "today" of the figures
GOAL = 5.0


def _pairs(kind: str, count: int) -> list[str]:
    """Pair events as JSON lines (tone/style rubric), built from evaldata/ with a fixed seed."""
    from pairjudge.schemas import Candidate, CandidatePair, CandidateSource, Task
    from pairjudge_dev.humaneval import FORMAL_RUBRIC, PLAIN_RUBRIC, build_pairs, read_onestop

    if kind == "short":
        return [lp.pair.model_dump_json() for lp in build_pairs("dev", count // 2)[:count]]
    rng = random.Random(9)
    sentences = [s.text for a, e in read_onestop() for s in (a, e)]
    out = []
    for i in range(count):
        a, b = (" ".join(rng.sample(sentences, 20)) for _ in range(2))
        pair = CandidatePair(
            pair_id=f"bench-long-{i:05d}",
            task=Task(prompt="Rewrite this news story for the audience."),
            candidates=(
                Candidate(candidate_id="c1", output=a, source=CandidateSource(model="human-written")),
                Candidate(candidate_id="c2", output=b, source=CandidateSource(model="human-written")),
            ),
            rubric=PLAIN_RUBRIC if i % 2 else FORMAL_RUBRIC,
        )
        out.append(pair.model_dump_json())
    return out


def _worker(path: Path) -> None:
    """Judge every pair in ``path`` with whatever ``agents`` the import path finds; print figures."""
    import anyio

    from pairjudge import agents
    from pairjudge.agents.core import judge_pair, resolve_tiebreak
    from pairjudge.agents.offline import OfflineJudge
    from pairjudge.agents.policy import Policy
    from pairjudge.schemas import CandidatePair, TieBreakRequest

    pairs = [CandidatePair.model_validate_json(line) for line in path.read_text().splitlines()]
    judge, policy = OfflineJudge(), Policy()

    async def run() -> None:
        for pair in pairs:  # one at a time: this measures the judge's own cost, not concurrency
            outcome = (await judge_pair(pair, judge, policy)).outcome
            if isinstance(outcome, TieBreakRequest):
                await resolve_tiebreak(outcome, judge, policy)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    anyio.run(run)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"pairs": len(pairs), "wall": wall, "cpu": cpu, "rss_mb": rss_mb, "agents": agents.__file__}))


def _run(tree: Path, path: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", str(path)],
        env=env,
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    figures: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    assert str(figures.pop("agents")).startswith(str(tree)), "the worker imported the wrong tree"
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=400, help="pairs per kind (short, long)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker)
        return 0
    with tempfile.TemporaryDirectory(prefix="pairjudge-bench-") as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.baseline],
            check=True,
            capture_output=True,
        )
        try:
            print(f"baseline {args.baseline} vs this tree; {args.pairs} pairs per kind, best of {args.rounds} rounds\n")
            print("| outputs | tree | pairs/s | CPU ms per pair | peak RSS MB |")
            print("|---|---|---|---|---|")
            ratios = []
            for kind in ("short", "long"):
                path = Path(tmp) / f"{kind}.jsonl"
                path.write_text("\n".join(_pairs(kind, args.pairs)) + "\n")
                best: dict[str, dict[str, float]] = {}
                for _ in range(args.rounds):
                    for name, tree in (("baseline", base), ("this tree", ROOT)):
                        fig = _run(tree, path)
                        if name not in best or fig["cpu"] < best[name]["cpu"]:
                            best[name] = fig
                for name in ("baseline", "this tree"):
                    f = best[name]
                    rate, cpu_ms = f["pairs"] / f["wall"], 1000 * f["cpu"] / f["pairs"]
                    print(f"| {kind} | {name} | {rate:.1f} | {cpu_ms:.2f} | {f['rss_mb']:.0f} |")
                ratio = best["baseline"]["cpu"] / best["this tree"]["cpu"]
                ratios.append(ratio)
                print(f"| {kind} | **speed-up** | **{ratio:.1f}x** (CPU per pair, baseline / this tree) | | |")
            print(f"\ngoal: >= {GOAL:.0f}x; met: {all(r >= GOAL for r in ratios)}")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
