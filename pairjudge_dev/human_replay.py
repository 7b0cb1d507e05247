"""Does the human basis cover what people prefer? A replay on public human judgements (docs/design.md §3a).

The human basis (``pairjudge.agents.scores.human``) estimates the challenger's win rate *as people would
judge it* from the judge's outcome on every pair and human labels on an audit sample. This replays a
stream of pairs whose human outcome is known for every pair, hides every label but the audit sample's,
and counts how often the intervals cover the full-label human win rate.

**Data.** The pairs of ``pairjudge_dev.humaneval`` (sources, licences and checksums in ``evaldata/`` and
each folder's PROVENANCE.md; none of it written by this project):

* ``formal`` / ``casual``: Pavlick & Tetreault (TACL 2016) sentence formality, mean of five raters,
  CC BY 3.0 (as stated by the dataset's public mirrors);
* ``polite``: Stanford Politeness Corpus (Danescu-Niculescu-Mizil et al., ACL 2013), five raters,
  z-normalised, CC BY 4.0 (ConvoKit's distribution);
* ``plain``: OneStopEnglish (Vajjala & Lučić, BEA 2018), advanced vs elementary rewrites by teachers,
  CC BY-SA 4.0. Nothing derived from it is written to disk here.

**Split.** The **test** split by default (40% of items by a hash of their text): the split kept for final
measurements. Everything chosen here (the challenger, ``UNCERTAIN_CONFIDENCE``, the designs) was chosen
looking at the dev split only (``--split dev``); nothing was tuned on test.

**The stream.** One stream per set and one of all four sets together. The **challenger is the candidate
with the longer text** (by characters; the ~1% of pairs with equal lengths are dropped), the champion
the shorter one: a fixed side that is not the label. On the dev split the judge's raw rate differs
visibly from the people's on the per-set streams (formal: people 0.76, judge 0.55; plain: people 0.20,
judge 0.45), while on all sets together the errors happen to cancel (0.44 vs 0.44).

* ``y``: the people's outcome, 1 when the raters' choice is the challenger, else 0 (these pairs are built
  with a clear human preference, so there are no human ties);
* ``f``, in ``--outcome final`` (the deployed pipeline): the offline judge's final decision through the real
  core (``judge_pair``, then ``resolve_tiebreak``): 1 challenger, 0 champion, 0.5 a rule tie. A pair the
  core sends to review has ``f = 0.5``, stratum ``review`` and inclusion probability 1: every review pair
  is labelled. With the default ``Policy`` (primary threshold 0.7) **about half the pairs of this data end
  in review** (``tiebreak_no_signal``), so in this mode half the stream is labelled whatever the audit
  share is, and the audit design acts on the other half only;
* ``f``, in ``--outcome primary``: the judge's primary opinion on every pair (the side both orderings
  chose, else 0.5), no review stratum: the setting where labels are scarce and the judge carries the
  estimate. This is a what-if (a policy that accepts every primary verdict), not the deployed pipeline.

**The designs** (independent Bernoulli draws with the recorded probability, on the non-review pairs):
``uniform 5%``, ``uniform 10%``, and ``active``: pairs the judge was uncertain about at 25%, others at 5%.
Uncertain: in ``final``, decided by the tie-break or with verdict confidence below
``UNCERTAIN_CONFIDENCE``; in ``primary``, no agreed primary side or primary confidence below it.

**Each repetition** shuffles the stream's order, draws the sample, feeds every pair (``add_pair``) and
only the sampled labels (``add_label``, with the probability) to a ``HumanBasis``, and records whether the
fixed-sample interval at the end and the confidence sequence at every checkpoint (every 100 pairs, and
the end) contain the full-label human win rate ``mean(y)``. Also reported: the same for the labels alone
(``lam=0``), and the fixed-sample interval read at every checkpoint (peeking, which it is not made for).

**Assumptions.** A label arrives as soon as its pair is judged (no pending labels); a label is the raters'
aggregate (not one person's noisy vote), so the human outcome has no label noise beyond the raters'; the
target is the finite stream's own mean while the interval is for the superpopulation's, which makes the
fully labelled review stratum somewhat conservative.

Run: ``python -m pairjudge_dev.human_replay --repetitions 1000`` (test split; ``--split dev`` to explore).

**No LLM-judge data set.** MT-Bench human judgements and AlpacaFarm's human cross-annotations are not
shipped by any package on the registries reachable here (``alpaca-farm`` 0.2.0, ``fschat`` 0.2.36 and
``alpaca-eval`` wheels hold prompts, code and leaderboards only; the data lives on a model hub), so there
is no loader for them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import anyio

from pairjudge.agents.core import judge_pair, resolve_tiebreak
from pairjudge.agents.judge import Judge
from pairjudge.agents.offline import OfflineJudge
from pairjudge.agents.policy import Policy
from pairjudge.agents.scores import human
from pairjudge.agents.scores.human import (
    MIN_LABELS,
    HumanBasis,
    HumanEstimate,
    confidence_sequence,
    estimate,
)
from pairjudge.agents.stats import wilson_interval
from pairjudge.schemas import PairVerdict, TieBreakRequest
from pairjudge.schemas.pair import TIE
from pairjudge_dev.humaneval import DATA, PAIRS_PER_SET, LabelledPair, Split, build_pairs

Stage = Literal["primary", "tiebreak", "review"]
Mode = Literal["final", "primary"]
Design = Literal["uniform 5%", "uniform 10%", "active 25/5%"]
MODES: tuple[Mode, ...] = ("final", "primary")
DESIGNS: tuple[Design, ...] = ("uniform 5%", "uniform 10%", "active 25/5%")
SET_ORDER = ("formal", "casual", "polite", "plain")
#: A verdict (or primary opinion) less sure than this counts as uncertain for the active design; about
#: the lowest tenth of final verdict confidences on the dev split.
UNCERTAIN_CONFIDENCE = 0.75
ACTIVE_UNCERTAIN, ACTIVE_CONFIDENT = 0.25, 0.05
CHECKPOINT = 100
#: A diagnostic, not the module's rule: the confidence sequence read only where every stratum with pairs
#: has at least this many labels.
STRATUM_LABELS_CHECK = 20


@dataclass(frozen=True, slots=True)
class StreamPair:
    """One pair of the stream, from the challenger's side."""

    set_name: str
    pair_id: str
    #: The people's outcome: 1 the challenger (the longer text) is their choice, 0 the champion.
    y: float
    #: The judge's final outcome through the core (0.5 for a tie and for review).
    final: float
    stage: Stage
    #: The final verdict's confidence; None for review.
    confidence: float | None
    #: The judge's primary opinion: the side both orderings chose (1 / 0), else 0.5.
    primary: float
    #: The mean confidence of the two orderings when they agree, else 0.
    primary_confidence: float


def challenger_index(lp: LabelledPair) -> int | None:
    """The challenger is the longer candidate (by characters); None when both are equally long."""
    a, b = (len(c.output) for c in lp.pair.candidates)
    return None if a == b else (0 if a > b else 1)


async def judge_stream(pairs: Sequence[LabelledPair], judge: Judge, policy: Policy) -> list[StreamPair]:
    """The offline judge through the real core on every pair that has a challenger, in input order."""
    kept = [(lp, c) for lp in pairs if (c := challenger_index(lp)) is not None]
    out: list[StreamPair | None] = [None] * len(kept)

    async def one(index: int, lp: LabelledPair, challenger: int) -> None:
        ids = [c.candidate_id for c in lp.pair.candidates]

        def side(winner: str | None) -> float:
            return (
                0.5 if winner is None or winner == TIE or winner not in ids else float(ids.index(winner) == challenger)
            )

        decision = await judge_pair(lp.pair, judge, policy)
        outcome = decision.outcome
        first = outcome.primary if isinstance(outcome, TieBreakRequest) else getattr(outcome, "orderings", ())
        valid = [o for o in first[:2] if o.valid and o.mapped_winner in ids and o.confidence is not None]
        winners = {o.mapped_winner for o in valid}
        primary, primary_conf = 0.5, 0.0
        if len(valid) == 2 and len(winners) == 1:
            primary = side(valid[0].mapped_winner)
            primary_conf = sum(o.confidence or 0.0 for o in valid) / 2
        if isinstance(outcome, TieBreakRequest):
            outcome = (await resolve_tiebreak(outcome, judge, policy)).outcome
        if isinstance(outcome, PairVerdict):
            stage: Stage = "tiebreak" if outcome.decided_by == "tiebreak" else "primary"
            final, confidence = side(outcome.winner), outcome.confidence
        else:
            stage, final, confidence = "review", 0.5, None
        y = float(lp.human == challenger)
        out[index] = StreamPair(lp.set_name, lp.pair.pair_id, y, final, stage, confidence, primary, primary_conf)

    limiter = anyio.CapacityLimiter(16)

    async def limited(index: int, lp: LabelledPair, challenger: int) -> None:
        async with limiter:
            await one(index, lp, challenger)

    async with anyio.create_task_group() as tg:
        for index, (lp, challenger) in enumerate(kept):
            tg.start_soon(limited, index, lp, challenger)
    return [p for p in out if p is not None]


def build_stream(split: Split, per_set: int = PAIRS_PER_SET, root: Path = DATA) -> list[StreamPair]:
    return anyio.run(judge_stream, build_pairs(split, per_set, root), OfflineJudge(), Policy())


def streams_by_name(stream: Sequence[StreamPair]) -> dict[str, list[StreamPair]]:
    """One stream per set (in a fixed order) and ``all`` of them together."""
    out = {name: [p for p in stream if p.set_name == name] for name in SET_ORDER}
    out = {k: v for k, v in out.items() if v}
    out["all"] = list(stream)
    return out


def outcome(p: StreamPair, mode: Mode) -> float:
    return p.final if mode == "final" else p.primary


def uncertain(p: StreamPair, mode: Mode) -> bool:
    if mode == "final":
        return p.stage == "tiebreak" or (p.confidence is not None and p.confidence < UNCERTAIN_CONFIDENCE)
    return p.primary_confidence < UNCERTAIN_CONFIDENCE


def plan(p: StreamPair, mode: Mode, design: Design) -> tuple[str, float]:
    """(sampling stratum, inclusion probability) of one pair."""
    if mode == "final" and p.stage == "review":
        return "review", 1.0
    if design == "uniform 5%":
        return "audit", 0.05
    if design == "uniform 10%":
        return "audit", 0.10
    return ("uncertain", ACTIVE_UNCERTAIN) if uncertain(p, mode) else ("confident", ACTIVE_CONFIDENT)


def rate(values: Sequence[float]) -> float:
    return sum(values) / len(values)


@dataclass
class ReplayResult:
    stream: str
    mode: Mode
    design: Design
    pairs: int
    human_rate: float
    judge_rate: float
    repetitions: int = 0
    labels: int = 0  # summed over repetitions
    #: Repetitions whose fixed-sample interval at the end contained the human rate (PPI++ / labels alone).
    fixed_covered: int = 0
    fixed_width: float = 0.0
    labels_only_covered: int = 0
    labels_only_width: float = 0.0
    #: Repetitions whose confidence sequence contained it at every checkpoint with >= MIN_LABELS labels.
    cs_covered: int = 0
    #: ... and at every checkpoint with an interval at all (from the first labels).
    cs_covered_from_first: int = 0
    #: ... at every checkpoint where every stratum has >= STRATUM_LABELS_CHECK labels (a diagnostic), over
    #: the repetitions with at least one such checkpoint (``cs_strata_read``).
    cs_covered_strata: int = 0
    cs_strata_read: int = 0
    cs_width: float = 0.0
    labels_only_cs_covered: int = 0
    labels_only_cs_width: float = 0.0
    #: The fixed-sample interval read at every checkpoint with >= MIN_LABELS labels (peeking).
    peeking_covered: int = 0
    lam: float = 0.0  # the pair-weighted lambda, summed over repetitions

    def share(self, count: int, of: int | None = None) -> tuple[float, float, float]:
        total = self.repetitions if of is None else of
        low, high = wilson_interval(count, total)
        return (count / total if total else float("nan")), low, high

    def mean(self, total: float) -> float:
        return total / self.repetitions


def _covers(interval: HumanEstimate | None, target: float) -> bool | None:
    return None if interval is None else interval.low <= target <= interval.high


def replay(
    stream: Sequence[StreamPair],
    name: str,
    mode: Mode,
    design: Design,
    repetitions: int,
    *,
    seed: int = 0,
    alpha: float = 0.05,
    checkpoint: int = CHECKPOINT,
) -> ReplayResult:
    ys = [p.y for p in stream]
    fs = [outcome(p, mode) for p in stream]
    plans = [plan(p, mode, design) for p in stream]
    target = rate(ys)
    result = ReplayResult(name, mode, design, len(stream), target, rate(fs))
    n = len(stream)
    for rep in range(repetitions):
        rng = random.Random(f"{seed}:{name}:{mode}:{design}:{rep}")
        order = list(range(n))
        rng.shuffle(order)
        basis = HumanBasis()
        cs_ok = cs_first_ok = cs_strata_ok = lo_cs_ok = peek_ok = True
        strata_read = False
        for k, i in enumerate(order, 1):
            stratum, pi = plans[i]
            sampled = pi >= 1.0 or rng.random() < pi
            basis.add_pair(fs[i], stratum, sampled)
            if sampled:
                basis.add_label(fs[i], ys[i], stratum, pi)
            if k % checkpoint and k != n:
                continue
            enough = basis.labels >= MIN_LABELS
            covered = _covers(confidence_sequence(basis, alpha), target)
            cs_first_ok &= covered is not False
            if enough:
                cs_ok &= covered is True
                if min(s.labels for s in basis.strata.values()) >= STRATUM_LABELS_CHECK:
                    cs_strata_ok &= covered is True
                    strata_read = True
                lo_cs_ok &= _covers(confidence_sequence(basis, alpha, lam=0.0), target) is True
                peek_ok &= _covers(estimate(basis, alpha), target) is True
        result.repetitions += 1
        result.labels += basis.labels
        fixed = estimate(basis, alpha)
        labels_only = estimate(basis, alpha, lam=0.0)
        cs = confidence_sequence(basis, alpha)
        lo_cs = confidence_sequence(basis, alpha, lam=0.0)
        if fixed is None or labels_only is None or cs is None or lo_cs is None:
            raise RuntimeError(f"{name}/{mode}/{design}: no estimate after {n} pairs ({basis.labels} labels)")
        result.fixed_covered += _covers(fixed, target) is True
        result.fixed_width += fixed.high - fixed.low
        result.labels_only_covered += _covers(labels_only, target) is True
        result.labels_only_width += labels_only.high - labels_only.low
        result.cs_covered += cs_ok and _covers(cs, target) is True
        result.cs_covered_from_first += cs_first_ok
        result.cs_covered_strata += strata_read and cs_strata_ok
        result.cs_strata_read += strata_read
        result.cs_width += cs.high - cs.low
        result.labels_only_cs_covered += lo_cs_ok
        result.labels_only_cs_width += lo_cs.high - lo_cs.low
        result.peeking_covered += peek_ok
        result.lam += sum(s.pairs * s.lam for s in fixed.strata) / max(1, sum(s.pairs for s in fixed.strata))
    return result


def _replay_job(args: tuple[list[StreamPair], str, Mode, Design, int, int, float]) -> ReplayResult:
    stream, name, mode, design, repetitions, seed, alpha = args
    return replay(stream, name, mode, design, repetitions, seed=seed, alpha=alpha)


def run_all(
    stream: Sequence[StreamPair],
    repetitions: int,
    *,
    seed: int = 0,
    alpha: float = 0.05,
    modes: Sequence[Mode] = MODES,
    jobs: int = 1,
) -> list[ReplayResult]:
    tasks = [
        (list(s), name, mode, design, repetitions, seed, alpha)
        for mode in modes
        for name, s in streams_by_name(stream).items()
        for design in DESIGNS
    ]
    if jobs <= 1:
        return [_replay_job(t) for t in tasks]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_replay_job, tasks))


def _pct(share: tuple[float, float, float]) -> str:
    value, low, high = share
    return f"{value:.3f} [{low:.3f}-{high:.3f}]"


def table(results: Sequence[ReplayResult], out: Callable[[str], None] = print) -> None:
    """Two Markdown tables: the fixed-sample interval at the end, and the anytime reading."""
    out(
        "| stream (N) | human | judge | design | labels | fixed-n covers | width | labels-only covers | width"
        " | width ratio | lambda |"
    )
    out("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        width, lo_width = r.mean(r.fixed_width), r.mean(r.labels_only_width)
        out(
            f"| {r.stream} ({r.pairs}) | {r.human_rate:.3f} | {r.judge_rate:.3f} | {r.design}"
            f" | {r.mean(r.labels):.0f} | {_pct(r.share(r.fixed_covered))} | {width:.3f}"
            f" | {_pct(r.share(r.labels_only_covered))} | {lo_width:.3f} | {width / lo_width:.2f}"
            f" | {r.mean(r.lam):.2f} |"
        )
    out("")
    out(
        f"| stream | design | CS covers at every checkpoint (>= {MIN_LABELS} labels) | CS width"
        " | labels-only CS covers | width | CS covers from the first label"
        f" | CS covers where every stratum has >= {STRATUM_LABELS_CHECK} labels (repetitions with such a checkpoint)"
        " | fixed-n peeked at every checkpoint |"
    )
    out("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        out(
            f"| {r.stream} | {r.design} | {_pct(r.share(r.cs_covered))} | {r.mean(r.cs_width):.3f}"
            f" | {_pct(r.share(r.labels_only_cs_covered))} | {r.mean(r.labels_only_cs_width):.3f}"
            f" | {_pct(r.share(r.cs_covered_from_first))}"
            f" | {_pct(r.share(r.cs_covered_strata, r.cs_strata_read))} ({r.cs_strata_read})"
            f" | {_pct(r.share(r.peeking_covered))} |"
        )


#: The first 12 hex digits of the estimator package's sources as imported (its modules in name order): the
#: figures belong to it.
ESTIMATOR_SHA256 = hashlib.sha256(
    b"".join(path.read_bytes() for path in sorted(Path(human.__file__).parent.glob("*.py")))
).hexdigest()[:12]


def estimator_version() -> str:
    return ESTIMATOR_SHA256


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=1000)
    parser.add_argument("--split", choices=("dev", "test"), default="test")
    parser.add_argument("--per-set", type=int, default=PAIRS_PER_SET)
    parser.add_argument("--outcome", choices=(*MODES, "both"), default="both")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    stream = build_stream(args.split, args.per_set)
    judged = time.perf_counter() - started
    stages = Counter(p.stage for p in stream)
    print(
        f"split {args.split}: {len(stream)} pairs (challenger = the longer text) judged in {judged:.1f} s;"
        f" final stage: " + ", ".join(f"{k} {v}" for k, v in sorted(stages.items()))
    )
    print(f"estimator: pairjudge/agents/scores/human/ sha256 {estimator_version()}...")
    modes: tuple[Mode, ...] = MODES if args.outcome == "both" else (args.outcome,)
    results = run_all(stream, args.repetitions, seed=args.seed, alpha=args.alpha, modes=modes, jobs=args.jobs)
    level = f"{1 - args.alpha:.0%}"
    for mode in modes:
        print(f"\n### f = the judge's {mode} outcome; {args.repetitions} repetitions, {level} intervals\n")
        table([r for r in results if r.mode == mode])
    print(
        f"\nCoverage: share of repetitions, Wilson 95% interval on it. CS: the confidence sequence at every"
        f" checkpoint ({CHECKPOINT} pairs) with >= {MIN_LABELS} labels and at the end. Widths are means at the"
        f" end of the stream. {time.perf_counter() - started:.0f} s in all."
    )
    if args.json:
        payload = {"estimator_sha256": estimator_version(), "results": [asdict(r) for r in results]}
        args.json.write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
