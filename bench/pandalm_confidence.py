"""Stated against token-probability confidence, one real judge, people's labels: PandaLM's test set.

Source: github.com/WeOpenML/PandaLM (Apache-2.0), ``data/testset-v1.json``: 999 pairs (an instruction, an
optional input, two responses) each labelled by three people (``annotator1..3``: 1 or 2 names the better
response, 0 "similar in quality"). Pair ``idx`` is named ``pandalm-<idx>``; it is in the test part when the last
hex digit of sha256(name) is below 4 (the split ``bench/autoj_to_backtest.py`` uses), fixed before anything
is measured. The sample is the first N test pairs in sha256 order, so a run stopped early is still a random
sample of the test part (pairs are judged in the file's order, one at a time).

Two steps. ``run`` builds the judge the settings configure (``PAIRJUDGE_JUDGE__*``, the worker's own stack:
``streams.judges.factory.build_judge_stack``) and the policy (``PAIRJUDGE_POLICY__*``), and sends each pair
through the core's ``judge_pair`` (both orders), one pair at a time, appending each pair's orderings to the
results file as it is decided (a stopped run keeps what it did; run it again to resume):

    PAIRJUDGE_JUDGE__KIND=openai PAIRJUDGE_JUDGE__BASE_URL=http://127.0.0.1:8080/v1 \\
    PAIRJUDGE_JUDGE__MODEL=smollm2-135m-instruct PAIRJUDGE_JUDGE__RESPONSE_FORMAT=json_object_schema \\
    PAIRJUDGE_JUDGE__CACHE_ENABLED=false PAIRJUDGE_POLICY__TIEBREAK_ENABLED=false \\
        python -m bench.pandalm_confidence run testset-v1.json results.jsonl --n 200
    python -m bench.pandalm_confidence figures testset-v1.json results.jsonl

(The response cache off: a cached reply carries no token probabilities. The tie-break off: its calls would
not change the primary orders measured here.) ``figures`` reads only the results file and the data file, so
it can be re-run without the judge. Per pair it
takes each order's stated confidence and its token probability for its own winner (the rows' orderings),
their means over the two orders (what the policy compares with its threshold: ``stated``, ``token``), and the
judge's pick: the side both orders named, or, when they disagree, the side the chosen confidence favours
(each order's vote weighted by its confidence), so every judged pair has a pick and a confidence; a pair whose
orders flip is a pair the judge is unsure of, and it should say so with a low number.

**Ties.** As everywhere in the project (docs/guides/backtest.md): the majority of the three labels counts, a
split (three different answers) is a tie, and tie labels are left out of agreement: a tie has no right pick.

**Figures**, for ``stated``, ``token`` and the policy's default source (``token_probability`` when both orders
have a token probability, else stated, ``agents.truth_table.reconcile``): accuracy against the majority
label, expected calibration error (``agents.stats.expected_calibration_error``, 10 equal-width bins), accuracy
of the most confident 25/50/75% (ties in confidence broken by pair order), every proportion with its 95% Wilson
interval (``agents.stats.wilson_interval``), and a reliability table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio

from pairjudge.agents.stats import expected_calibration_error, reliability_bins, wilson_interval

COVERAGES = (0.25, 0.5, 0.75)
BINS = 10
#: PandaLM's codes as the project's relative labels.
HUMAN = {1: "first", 2: "second", 0: "tie"}
FIRST, SECOND = "response1", "response2"
CRITERION = (
    "overall quality",
    "Follows the instruction (and its input), is correct and complete, and says it clearly without padding.",
)


def part_of(pair_id: str) -> Literal["test", "dev"]:
    return "test" if int(hashlib.sha256(pair_id.encode()).hexdigest()[-1], 16) < 4 else "dev"


def hash_order(pair_id: str) -> str:
    return hashlib.sha256(pair_id.encode()).hexdigest()


def majority(labels: Sequence[str]) -> str:
    """The label most people gave; a three-way split is a tie."""
    (label, count), *_ = Counter(labels).most_common(1)
    return label if count * 2 > len(labels) else "tie"


def load(data: Path) -> dict[str, dict[str, Any]]:
    rows = json.loads(data.read_text(encoding="utf-8"))
    return {f"pandalm-{int(r['idx'])}": r for r in rows}


def human_label(row: dict[str, Any]) -> str:
    return majority([HUMAN[int(row[f"annotator{i}"])] for i in (1, 2, 3)])


def sample_ids(rows: dict[str, dict[str, Any]], n: int | None) -> list[str]:
    ids = sorted((pid for pid in rows if part_of(pid) == "test"), key=hash_order)
    return ids if n is None else ids[:n]


def to_pair(pair_id: str, row: dict[str, Any]) -> dict[str, Any]:
    """One PandaLM row as a pair event (head-to-head rubric, one criterion); no label rides along."""
    context = str(row["input"] or "").strip()
    task: dict[str, Any] = {"prompt": str(row["instruction"])}
    if context:
        task["context"] = context
    return {
        "pair_id": pair_id,
        "task": task,
        "candidates": [
            {
                "candidate_id": side,
                "output": str(row[side]),
                "source": {"model": model, "version": "pandalm-testset-v1", "role": "candidate"},
            }
            for side, model in zip((FIRST, SECOND), str(row["cmp_key"]).split("_", 1), strict=True)
        ],
        "rubric": {"kind": "head_to_head", "criteria": [{"name": CRITERION[0], "description": CRITERION[1]}]},
        "metadata": {"experiment_id": "pandalm-testset-v1", "traffic": "shadow"},
    }


# --- reading the results -----------------------------------------------------------------------

#: The people's relative label as the candidate id it names.
LABEL_SIDE = {"first": FIRST, "second": SECOND}
#: The readings compared: each order's stated confidence, each order's token probability for its own winner,
#: and the policy's default (``token_probability``: the token reading when both orders have one, else stated).
SOURCES = {"stated": "stated (verbalised)", "token": "token probability", "policy": "policy default"}


@dataclass(frozen=True, slots=True)
class Order:
    winner: str  # a candidate id or "TIE", mapped back to the original sides
    stated: float
    token: float | None  # the token probability of this order's own winner

    def value(self, source: str) -> float | None:
        return self.stated if source == "stated" else self.token

    def p_first(self, source: str) -> float | None:
        """This order's probability that the first response is the better one, under ``source``."""
        value = self.value(source)
        if value is None:
            return None
        if self.winner == FIRST:
            return value
        return 1.0 - value if self.winner == SECOND else 0.5


@dataclass(frozen=True, slots=True)
class Judged:
    pair_id: str
    #: The order shown as recorded (response 1 first), then the swapped one.
    ab: Order
    ba: Order

    @property
    def consistent(self) -> bool:
        return self.ab.winner == self.ba.winner

    def reading(self, source: str) -> str:
        """``stated`` or ``token``; the policy default is the token reading when both orders have one."""
        if source != "policy":
            return source
        return "token" if self.ab.token is not None and self.ba.token is not None else "stated"

    def confidence(self, source: str) -> float | None:
        """The mean over both orders of each order's confidence in its own winner: what the policy compares
        with its threshold (``agents.truth_table.reconcile``); None without a value in both orders."""
        a, b = (o.value(self.reading(source)) for o in (self.ab, self.ba))
        return None if a is None or b is None else (a + b) / 2

    def pick(self, source: str) -> tuple[str, float] | None:
        """The side the two orders together favour and the judge's probability for it: each order's
        probability for the first response (its confidence for its winner, one minus it for the other side,
        a half for a TIE), averaged. For orders that agree this is :meth:`confidence`; for a flip it is near a
        half. At exactly a half (a flip at equal confidences, say both 0.5) the first-shown order's side is
        taken, at 0.5, so every reading covers the same pairs. None when an order has no value or both orders
        said TIE."""
        a, b = (o.p_first(self.reading(source)) for o in (self.ab, self.ba))
        if a is None or b is None:
            return None
        first = (a + b) / 2
        if first == 0.5:
            side = next((o.winner for o in (self.ab, self.ba) if o.winner in (FIRST, SECOND)), None)
            return None if side is None else (side, 0.5)
        return (FIRST, first) if first > 0.5 else (SECOND, 1.0 - first)


def _order(ordering: dict[str, Any]) -> Order | None:
    if not ordering.get("valid", False) or ordering.get("mapped_winner") is None:
        return None
    winner = str(ordering["mapped_winner"])
    token = (ordering.get("token_probabilities") or {}).get(winner)
    return Order(winner, float(ordering["confidence"]), None if token is None else float(token))


def read_results(path: Path) -> tuple[list[Judged], Counter[str]]:
    """Each pair with two valid orderings, and a count of the rest by what happened to them."""
    judged: list[Judged] = []
    other: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        orders = [_order(o) for o in row.get("orderings", ())[:2]]
        ab, ba = [*orders, None, None][:2]
        if ab is None or ba is None:
            other[f"{row['kind']} ({row.get('reason')})"] += 1
            continue
        judged.append(Judged(str(row["pair_id"]), ab, ba))
    return judged, other


# --- figures ------------------------------------------------------------------------------------


def ranked_accuracy(confidences: Sequence[float], corrects: Sequence[bool], coverage: float) -> tuple[int, int]:
    """(right, taken) among the most confident ``coverage`` share (at least one); equal confidences keep
    their given order (the sample's hash order, a random one)."""
    order = sorted(range(len(confidences)), key=lambda i: -confidences[i])
    take = max(1, round(coverage * len(order)))
    return sum(bool(corrects[i]) for i in order[:take]), take


def share(right: int, total: int) -> str:
    """A proportion with its 95% Wilson interval and its counts."""
    if total == 0:
        return "-"
    lo, hi = wilson_interval(right, total)
    return f"{right / total:.3f} [{lo:.3f}, {hi:.3f}] ({right}/{total})"


@dataclass(frozen=True, slots=True)
class Scored:
    """One reading's confidences and whether each pick agreed with the people."""

    confidences: list[float]
    corrects: list[bool]

    def row(self, name: str) -> str:
        if not self.confidences:
            return f"| {name} | 0 |" + " - |" * (3 + len(COVERAGES))
        ece = expected_calibration_error(self.confidences, self.corrects, bins=BINS)
        at = " | ".join(share(*ranked_accuracy(self.confidences, self.corrects, c)) for c in COVERAGES)
        distinct = len(set(self.confidences))
        return (
            f"| {name} | {len(self.corrects)} | {share(sum(self.corrects), len(self.corrects))} | {ece:.3f} "
            f"| {distinct} | {at} |"
        )

    def reliability(self, name: str) -> list[str]:
        lines = [
            "",
            f"reliability, {name}:",
            "| bin | pairs | mean confidence | accuracy |",
            "| --- | --- | --- | --- |",
        ]
        for b in reliability_bins(self.confidences, self.corrects, BINS):
            if b.count and b.mean_confidence is not None and b.accuracy is not None:
                lines.append(
                    f"| [{b.lower:.1f}, {b.upper:.1f}{']' if b.upper == 1.0 else ')'} | {b.count} "
                    f"| {b.mean_confidence:.3f} | {b.accuracy:.3f} |"
                )
        return lines


def scored_picks(labelled: Sequence[tuple[Judged, str]], source: str) -> Scored:
    """Every pair with a pick under ``source``: the pick's probability, and whether it names the people's side."""
    picks = [(j.pick(source), LABEL_SIDE[h]) for j, h in labelled]
    return Scored([p[1] for p, _ in picks if p is not None], [p[0] == h for p, h in picks if p is not None])


def scored_agreeing(labelled: Sequence[tuple[Judged, str]], source: str) -> Scored:
    """The pairs whose two orders named the same side, at the confidence the policy compares with its threshold."""
    rows = [(j.confidence(source), j.ab.winner == LABEL_SIDE[h]) for j, h in labelled if j.consistent]
    return Scored([c for c, _ in rows if c is not None], [ok for c, ok in rows if c is not None])


def scored_orders(labelled: Sequence[tuple[Judged, str]], source: str) -> Scored:
    """Each order on its own (two per pair, not independent): its confidence in its winner, and whether its
    winner is the people's side (a TIE order is never right: the label names a side)."""
    conf: list[float] = []
    right: list[bool] = []
    for j, h in labelled:
        for order in (j.ab, j.ba):
            value = order.value(j.reading(source))
            if value is not None:
                conf.append(value)
                right.append(order.winner == LABEL_SIDE[h])
    return Scored(conf, right)


def figures(rows: dict[str, dict[str, Any]], judged: list[Judged], other: Counter[str]) -> list[str]:
    labelled_all = [(j, human_label(rows[j.pair_id])) for j in judged]
    labelled = [(j, h) for j, h in labelled_all if h != "tie"]
    agree_side = sum(j.consistent and j.ab.winner != "TIE" for j in judged)
    position_a = sum(o.winner == side for j in judged for o, side in ((j.ab, FIRST), (j.ba, SECOND)))
    lines = [
        f"pairs judged with both orders valid: {len(judged)}; others: {dict(other) or 'none'}",
        f"tie or split labels (left out of agreement): {len(labelled_all) - len(labelled)}; "
        f"with a majority for one response: {len(labelled)}",
        f"orders named the same response: {agree_side} of {len(judged)}; the order's first-shown response "
        f"won {position_a} of {2 * len(judged)} orders; token probability in both orders: "
        f"{sum(j.ab.token is not None and j.ba.token is not None for j in judged)}",
    ]
    header = (
        "| confidence | pairs | accuracy | ECE (10 bins) | distinct values | "
        + " | ".join(f"accuracy, most confident {round(c * 100)}%" for c in COVERAGES)
        + " |"
    )
    rule = "|" + " --- |" * (5 + len(COVERAGES))
    tables: list[str] = []
    for title, scorer in (
        ("every pair, the side both orders together favour", scored_picks),
        ("pairs whose orders agree (what the policy can decide alone), at the policy's mean", scored_agreeing),
        ("each order on its own (two per pair)", scored_orders),
    ):
        lines += ["", f"{title}:", header, rule]
        for source, name in SOURCES.items():
            scored = scorer(labelled, source)
            lines.append(scored.row(name))
            if scorer is scored_picks:
                tables += scored.reliability(name)
    return lines + tables


def done_ids(out: Path) -> set[str]:
    """The pairs already in the results file (a resumed run skips them)."""
    if not out.exists():
        return set()
    return {json.loads(line)["pair_id"] for line in out.read_text(encoding="utf-8").splitlines() if line.strip()}


def append(out: Path, record: dict[str, Any]) -> None:
    """One pair's line, written whole and flushed, so a stopped run keeps every pair decided so far."""
    with out.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


async def run(rows: dict[str, dict[str, Any]], ids: Sequence[str], out: Path, done: set[str]) -> None:
    # Imported here: ``figures`` needs none of the service.
    from pairjudge.agents.core import judge_pair
    from pairjudge.agents.errors import InputRejected
    from pairjudge.schemas import CandidatePair
    from pairjudge.streams.config.settings import load_settings
    from pairjudge.streams.judges.factory import build_judge_stack

    settings = load_settings()
    policy = settings.policy.to_policy()
    stack = build_judge_stack(settings.judge)
    print(f"judge {stack.inner.identity.model}, {len(done)} pairs already in {out}", file=sys.stderr)
    try:
        for pair_id in ids:
            if pair_id in done:
                continue
            pair = CandidatePair.model_validate(to_pair(pair_id, rows[pair_id]))
            started = time.monotonic()
            try:
                decision = await judge_pair(pair, stack.judge, policy)
            except InputRejected as exc:
                record: dict[str, Any] = {"pair_id": pair_id, "kind": "rejected", "reason": str(exc)}
            else:
                facts = decision.facts
                record = {
                    "pair_id": pair_id,
                    "kind": facts.outcome,
                    "reason": getattr(decision.outcome, "reason", None),
                    "orderings": [o.model_dump(mode="json") for o in decision.outcome.judged_orderings],
                    "confidence_source": facts.confidence_source,
                    "token_confidence": facts.token_confidence,
                    "stated_confidence": facts.stated_confidence,
                    "seconds": round(time.monotonic() - started, 1),
                }
            append(out, record)
            print(f"{pair_id} {record['kind']} {record.get('seconds', '')}", file=sys.stderr, flush=True)
    finally:
        await stack.aclose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("pairs", help="the test sample as pair events, one a line, on stdout")
    make.add_argument("data", type=Path, help="PandaLM's data/testset-v1.json")
    make.add_argument("--n", type=int, default=None, help="the first N test pairs in sha256 order (default all)")
    go = sub.add_parser("run", help="judge the sample with the configured judge, appending to RESULTS")
    go.add_argument("data", type=Path, help="PandaLM's data/testset-v1.json")
    go.add_argument("results", type=Path, help="the results file (appended to; pairs in it are skipped)")
    go.add_argument("--n", type=int, default=200, help="the first N test pairs in sha256 order (default 200)")
    show = sub.add_parser("figures", help="the figures from a `pairjudge evaluate --out` file")
    show.add_argument("data", type=Path, help="PandaLM's data/testset-v1.json")
    show.add_argument("results", type=Path, help="the --out file")
    args = parser.parse_args(argv)
    rows = load(args.data)
    if args.command == "pairs":
        for pair_id in sample_ids(rows, args.n):
            sys.stdout.write(json.dumps(to_pair(pair_id, rows[pair_id]), ensure_ascii=False) + "\n")
        return
    if args.command == "run":
        anyio.run(run, rows, sample_ids(rows, args.n), args.results, done_ids(args.results))
        return
    judged, other = read_results(args.results)
    print("\n".join(figures(rows, judged, other)))


if __name__ == "__main__":
    main()
