"""The judging core's own CPU per pair, part by part, this tree beside another (issue 27).

    python -m bench.core_profile                          # this tree alone
    python -m bench.core_profile --tree /tmp/core-old     # beside another checkout (a git worktree), with ratios
    python -m bench.core_profile --load varied            # pairjudge_dev.core_cases that reach the judge
    python -m bench.core_profile --profile                # and cProfile's top functions of judge_pair here

In process, no Kafka and no model: the pairs (``pairjudge_dev.pairgen``'s load by default: the demo's
pairs, varied by a name and a reference) are encoded as events once, then each part of a worker's
per-pair path is timed on its own over every pair, ``time.process_time`` per pass, the best of
``--rounds`` passes, in microseconds of CPU per pair:

==================  ==================================================================================
decode              ``streams.kafka.codecs.decode``: the event's bytes to a ``CandidatePair``
injection scan      ``agents.pair_checks.scan_for_injection``: the rules over every output and turn
render x2           ``render_primary`` in both orders, datamarked as the default policy has it
validate x2         ``agents.validation.parse_reply`` and the rubric's criteria check on both replies
decide              the rest of ``judge_pair`` beside the judge: check the pair, template hash, series
                    threshold, settle rules, both orderings built, reconcile, policy, outcome event,
                    audit draw, facts and evaluation: the calls this tree's ``judge_pair`` makes for one
                    judge, in order (an older tree's may have done more; its judge_pair row counts it)
decision record     ``agents.audit.record_for``: the drift audit's ``DecisionRecord``
encode              ``streams.kafka.codecs.encode`` of the outcome and the record (the edge's, for scale)
judge_pair          the whole primary stage with an instant judge (a fixed valid reply per template,
                    criteria and order, preferring the first candidate: every pair ends in a verdict)
==================  ==================================================================================

Each tree runs in its own interpreter with ``PYTHONPATH`` at that tree (``bench._speed_kit.check_tree``
checks it imports that tree), the trees taking turns ``--repeats`` times so machine noise hits both
alike; each figure is the least seen. ``--tree`` is the baseline: the ratio is its figure over this tree's.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: The worker's default ``max_event_bytes`` (streams.config.settings).
MAX_EVENT_BYTES = 256_000
PARTS = ("decode", "injection scan", "render x2", "validate x2", "decide", "decision record", "encode", "judge_pair")
#: The parts that add up to the core's share of a pair (encode is the edge's).
CORE_PARTS = ("injection scan", "render x2", "validate x2", "decide", "decision record")


def _events(load: str, count: int) -> list[bytes]:
    """``count`` pair events (JSON bytes), built with this tree's development tools."""
    if load == "pairgen":
        from pairjudge_dev.pairgen import many_pairs

        return many_pairs(count, "core")
    from pairjudge.agents.errors import InputRejected
    from pairjudge.agents.pair_checks import check_pair, scan_for_injection
    from pairjudge.agents.policy import Policy
    from pairjudge.agents.settle import settle
    from pairjudge_dev.core_cases import varied_pairs

    def judged(pair: Any) -> bool:
        """Whether the default policy sends ``pair`` to the judge (not rejected, held or settled by rule)."""
        try:
            check_pair(pair, Policy(), {})
        except InputRejected:
            return False
        return not scan_for_injection(pair) and settle(pair) is None

    cases = [pair.model_dump_json().encode() for _, pair in varied_pairs() if judged(pair)]
    return [cases[i % len(cases)] for i in range(count)]


# --- the child: one tree, every part --------------------------------------------------------------


def _worker(path: Path, rounds: int, profile: bool) -> dict[str, Any]:
    """Time every part over the events in ``path`` with whatever ``pairjudge`` the import path finds."""
    from pairjudge import agents
    from pairjudge.agents.audit import record_for
    from pairjudge.agents.builders import primary_outcome
    from pairjudge.agents.core import judge_pair

    try:
        from pairjudge.agents.pair_checks import check_pair, scan_for_injection, snapshot_pair
    except ImportError:  # a tree from before the checks had their own module (--tree): they were in agents.core
        from pairjudge.agents.core import check_pair, scan_for_injection, snapshot_pair  # type: ignore[attr-defined]
    from pairjudge.agents.facts import decision_facts, evaluation
    from pairjudge.agents.judge import JudgeIdentity, JudgeRequest, JudgeResponse, judge_info
    from pairjudge.agents.jury import juror, jury_info, reconcile_jury
    from pairjudge.agents.orderings import build_ordering
    from pairjudge.agents.policy import Policy
    from pairjudge.agents.policy_overlay import apply_policy
    from pairjudge.agents.prompts import pair_template_hash, render_primary
    from pairjudge.agents.response_schemas import REPLY_MODELS
    from pairjudge.agents.sampling import audit, verdict_class
    from pairjudge.agents.settle import settle
    from pairjudge.agents.validation import AskResult, ask_validated, check_head_to_head, check_pairwise, parse_reply
    from pairjudge.schemas import CandidatePair
    from pairjudge.schemas.audit import AuditSeries
    from pairjudge.schemas.events import Order
    from pairjudge.schemas.rubric import HeadToHeadRubric, PairwiseRubric
    from pairjudge.streams.kafka.codecs import decode, encode
    from pairjudge_dev.replies import h2h_reply, pairwise_reply, tiebreak_reply, tone_reply

    class InstantJudge:
        """Answers at once with a valid reply for the request's template and criteria, preferring the
        pair's first candidate (A in AB, B in BA): built once per (schema, order), then reused."""

        def __init__(self) -> None:
            # Keyed by the schema object's id; the schema is kept in the value so its id is never reused.
            self._replies: dict[tuple[int, str], tuple[object, str]] = {}

        @property
        def identity(self) -> JudgeIdentity:
            return JudgeIdentity(provider="bench", model="instant")

        async def complete(self, request: JudgeRequest) -> JudgeResponse:
            key = (id(request.response_schema), request.order)
            known = self._replies.get(key)
            if known is None:
                known = self._replies[key] = (request.response_schema, self._reply(request))
            return JudgeResponse(text=known[1], model="instant", input_tokens=1000, output_tokens=100, latency_s=0.01)

        @staticmethod
        def _reply(request: JudgeRequest) -> str:
            winner = "A" if request.order == "AB" else "B"
            schema = request.response_schema
            if request.template == "tone_style":
                return tone_reply(winner, 0.95)
            if request.template == "head_to_head":
                return h2h_reply(winner, 0.95, criteria=schema["properties"]["criteria_breakdown"]["required"])
            if request.template == "pairwise":
                names = schema["$defs"]["CriterionComparison"]["properties"]["criterion"]["enum"]
                return pairwise_reply(winner, 0.95, criteria=names)
            return tiebreak_reply(winner=winner)

    raws = path.read_bytes().splitlines()
    pairs = [decode(CandidatePair, raw, max_bytes=MAX_EVENT_BYTES) for raw in raws]
    judge, policy = InstantJudge(), Policy()
    catalog: dict[str, Any] = {}

    def check_of(rubric: object) -> Callable[[Any], str | None] | None:
        if isinstance(rubric, HeadToHeadRubric):
            return check_head_to_head(rubric)
        if isinstance(rubric, PairwiseRubric):
            return check_pairwise(rubric)
        return None

    async def asks(pair: CandidatePair) -> tuple[AskResult[Any], AskResult[Any]]:
        rubric = check_pair(pair, policy, catalog)
        model = REPLY_MODELS[rubric.kind]
        results = []
        for order in ("AB", "BA"):
            request = render_primary(pair, rubric, order, datamark=policy.datamark)
            results.append(await ask_validated(judge, request, model, check_of(rubric), policy.max_reasks, order=order))
        return results[0], results[1]

    async def prepare() -> list[tuple[AskResult[Any], AskResult[Any]]]:
        return [await asks(pair) for pair in pairs]

    answered = asyncio.run(prepare())
    texts = [(ab.text or "", ba.text or "") for ab, ba in answered]

    def decide(pair: CandidatePair, ab_ask: AskResult[Any], ba_ask: AskResult[Any]) -> Any:
        # judge_pair's steps beside the scan, the renders and the asks (agents/core.py), for one judge.
        rubric = check_pair(pair, policy, catalog)
        judged = snapshot_pair(pair, rubric)
        prompt_hash = pair_template_hash(rubric.kind, pair, datamark=policy.datamark)
        info = jury_info((judge,), prompt_hash)
        threshold = policy.primary_threshold_for(AuditSeries.for_pair(info, pair).key, pair.risk)
        settle(judged)
        orderings = []
        answers: tuple[tuple[Order, AskResult[Any]], ...] = (("AB", ab_ask), ("BA", ba_ask))
        for order, ask in answers:
            orderings.append(
                build_ordering(
                    judged,
                    order,
                    reply=ask.reply,
                    calls=ask.calls,
                    retries=ask.retries,
                    answered_model=ask.answered_model,
                    error=ask.error,
                    error_kind=ask.error_kind,
                )
            )
        ab, ba = orderings
        one = juror(judge_info(judge, prompt_hash), ab, ba, ab_ask.calls + ba_ask.calls, threshold)
        raw = reconcile_jury([one], 1, threshold)
        rec = apply_policy(raw, policy, pair.risk)
        outcome = primary_outcome(judged, rubric, rec, info, orderings=(ab, ba), judged=(ab, ba), votes=())
        sampling_class = verdict_class(
            stage="primary",
            mean_confidence=rec.mean_confidence,
            threshold=threshold,
            margin=policy.audit_uncertain_margin,
            winner=rec.winner,
        )
        sampled, copy = audit(outcome, judged, "primary", policy, sampling_class)
        decision_facts(
            judged,
            "primary",
            outcome,
            rec,
            prompt_hash=prompt_hash,
            rubric_kind=rubric.kind,
            calls=one.calls,
            audit=copy is not None,
            sampled=sampled,
            policy_overrode=raw.outcome if rec is not raw else None,
            judged=raw,
            primary_threshold=threshold,
        )
        return evaluation(f"pairwise_{rubric.kind}", outcome, (ab, ba), rec.mean_confidence)

    async def judge_all() -> list[Any]:
        return [await judge_pair(pair, judge, policy, catalog) for pair in pairs]

    decisions = asyncio.run(judge_all())
    if not all(type(d.outcome).__name__ == "PairVerdict" for d in decisions):
        kinds = sorted({type(d.outcome).__name__ for d in decisions})
        print(f"note: not every pair ended in a verdict ({', '.join(kinds)})", file=sys.stderr)
    records = [record_for(d, pair, catalog) for d, pair in zip(decisions, pairs, strict=True)]
    rubrics = [check_pair(pair, policy, catalog) for pair in pairs]
    checks = [(REPLY_MODELS[r.kind], check_of(r)) for r in rubrics]

    def run_decode() -> None:
        for raw in raws:
            decode(CandidatePair, raw, max_bytes=MAX_EVENT_BYTES)

    def run_scan() -> None:
        for pair in pairs:
            scan_for_injection(pair)

    def run_render() -> None:
        for pair, rubric in zip(pairs, rubrics, strict=True):
            render_primary(pair, rubric, "AB", datamark=policy.datamark)
            render_primary(pair, rubric, "BA", datamark=policy.datamark)

    def run_validate() -> None:
        for (ab, ba), (model, check) in zip(texts, checks, strict=True):
            for text in (ab, ba):
                reply = parse_reply(text, model)
                if check is not None:
                    check(reply)

    def run_decide() -> None:
        for pair, (ab, ba) in zip(pairs, answered, strict=True):
            decide(pair, ab, ba)

    def run_record() -> None:
        for decision, pair in zip(decisions, pairs, strict=True):
            record_for(decision, pair, catalog)

    def run_encode() -> None:
        for decision, record in zip(decisions, records, strict=True):
            encode(decision.outcome)
            if record is not None:
                encode(record)

    def run_judge_pair() -> None:
        asyncio.run(judge_all())

    runs: dict[str, Callable[[], None]] = dict(
        zip(
            PARTS,
            (run_decode, run_scan, run_render, run_validate, run_decide, run_record, run_encode, run_judge_pair),
            strict=True,
        )
    )
    best = dict.fromkeys(PARTS, float("inf"))
    for _ in range(rounds):
        for name, run in runs.items():
            gc.collect()
            started = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - started)
    if profile:
        profiler = cProfile.Profile()
        profiler.runcall(run_judge_pair)
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(40)
    return {
        "pairs": len(pairs),
        "us_per_pair": {name: 1e6 * seconds / len(pairs) for name, seconds in best.items()},
        "agents": agents.__file__,
    }


# --- the parent: trees side by side ---------------------------------------------------------------


def _run(tree: Path, path: Path, rounds: int, profile: bool) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAIRJUDGE_")}
    env["PYTHONPATH"] = str(tree)
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", str(path), "--rounds", str(rounds)]
    done = subprocess.run(
        [*argv, *(["--profile"] if profile else [])], env=env, cwd=tree, check=False, capture_output=True, text=True
    )
    if done.stderr.strip():
        print(done.stderr, file=sys.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"the child for {tree} failed (exit {done.returncode}); its stderr is above")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(figures.pop("agents")).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"the child for {tree} imported another tree's agents")
    return figures


def _table(names: Sequence[str], best: dict[str, dict[str, float]]) -> str:
    base = names[0] if len(names) > 1 else None
    head = "| part | " + " | ".join(f"{n} (µs/pair)" for n in names) + (" | baseline ÷ this |" if base else " |")
    lines = [head, "|---" * (len(names) + 1 + (1 if base else 0)) + "|"]
    rows = [*PARTS, "core (sum)"]
    for part in rows:
        values = [sum(best[n][p] for p in CORE_PARTS) if part == "core (sum)" else best[n][part] for n in names]
        cells = " | ".join(f"{v:,.1f}" for v in values)
        ratio = f" | {values[0] / values[-1]:.2f}x" if base else ""
        lines.append(f"| {part} | {cells}{ratio} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tree", help="the baseline: another checkout (e.g. a git worktree of an older commit)")
    parser.add_argument("--load", choices=("pairgen", "varied"), default="pairgen")
    parser.add_argument("--pairs", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=5, help="passes per part in one child; the best is kept")
    parser.add_argument("--repeats", type=int, default=2, help="children per tree, taking turns; the best is kept")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions of judge_pair here")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker, args.rounds, args.profile)))
        return 0
    from bench._speed_kit import check_tree

    trees: dict[str, Path] = {}
    if args.tree:
        tree = Path(args.tree).resolve()
        print(f"baseline: {check_tree(tree)}")
        trees["baseline"] = tree
    print(f"this tree: {check_tree(ROOT)}")
    trees["this tree"] = ROOT
    best: dict[str, dict[str, float]] = {name: dict.fromkeys(PARTS, float("inf")) for name in trees}
    with tempfile.TemporaryDirectory(prefix="pairjudge-core-") as tmp:
        path = Path(tmp) / "events.jsonl"
        path.write_bytes(b"\n".join(_events(args.load, args.pairs)) + b"\n")
        for _ in range(args.repeats):
            for name, tree in trees.items():
                figures = _run(tree, path, args.rounds, args.profile and name == "this tree")
                for part, value in figures["us_per_pair"].items():
                    best[name][part] = min(best[name][part], value)
    print(
        f"\n{args.pairs} pairs ({args.load}), CPU µs per pair, best of {args.rounds} passes x {args.repeats} children\n"
    )
    print(_table(list(trees), best))
    return 0


if __name__ == "__main__":
    sys.exit(main())
