"""What the risk levels' default thresholds do on pairs with a known human answer (docs/guides/risk-levels.md).

Every pair of ``pairjudge_dev.humaneval`` (public human judgements; sources and licences in ``evaldata/``) is
judged twice by the offline judge through the real core, once as ``normal`` and once as ``high``, each pair
that asks for the tie-break sent through it; audit sampling is off, so every outcome is the route the
thresholds chose. Per level: the share auto-decided, how often those verdicts name the people's choice, and
why the rest went to review. The thresholds were chosen before this was run, not tuned on it.

    python -m pairjudge_dev.risk_levels_eval --split test
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from pairjudge.agents.core import judge_pair, resolve_tiebreak
from pairjudge.agents.judge import Judge
from pairjudge.agents.offline.judge import OfflineJudge
from pairjudge.agents.policy import Policy
from pairjudge.schemas import PairVerdict, TieBreakRequest
from pairjudge.schemas.pair import RiskLevel
from pairjudge_dev.humaneval import LabelledPair, build_pairs


@dataclass(slots=True)
class LevelRun:
    """One level's outcomes over every pair."""

    pairs: int = 0
    verdicts: int = 0
    agreeing: int = 0
    decided_by: Counter[str] = field(default_factory=Counter)
    review_reasons: Counter[str] = field(default_factory=Counter)

    def line(self, risk: RiskLevel) -> str:
        share = self.verdicts / self.pairs if self.pairs else 0.0
        agreement = self.agreeing / self.verdicts if self.verdicts else 0.0
        return (
            f"{risk}: auto-decided {self.verdicts}/{self.pairs} ({share:.1%}), naming the people's choice in "
            f"{self.agreeing}/{self.verdicts} ({agreement:.1%}); verdicts by {dict(self.decided_by)}; "
            f"reviews {dict(self.review_reasons)}"
        )


async def run_level(judge: Judge, pairs: Sequence[LabelledPair], policy: Policy, risk: RiskLevel) -> LevelRun:
    run = LevelRun()
    for labelled in pairs:
        # The known label is dropped: a pair carrying one is a canary, which is not what is measured here.
        pair = labelled.pair.model_copy(update={"risk_level": risk, "human_label": None})
        outcome = (await judge_pair(pair, judge, policy)).outcome
        if isinstance(outcome, TieBreakRequest):
            outcome = (await resolve_tiebreak(outcome, judge, policy)).outcome
        run.pairs += 1
        if isinstance(outcome, PairVerdict):
            run.verdicts += 1
            run.decided_by[outcome.decided_by] += 1
            run.agreeing += outcome.winner == pair.candidates[labelled.human].candidate_id
        else:
            run.review_reasons[outcome.reason] += 1
    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    args = parser.parse_args(argv)
    pairs = build_pairs(args.split)
    policy = Policy(audit_share=0.0, audit_uncertain_share=0.0)
    print(f"split {args.split}: {len(pairs)} pairs, offline judge")
    for risk in ("normal", "high"):
        run = anyio.run(run_level, OfflineJudge(), pairs, policy, risk)
        print(run.line(risk))
    return 0


if __name__ == "__main__":
    sys.exit(main())
