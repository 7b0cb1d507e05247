"""The offline judge against independent human judgements of style (issue 9).

Pairs are built from public human-labelled data in ``evaldata/`` (sources, licences and checksums in
each folder's PROVENANCE.md; none of it written here):

* ``formal`` / ``casual``: Pavlick & Tetreault (2016) sentence formality, the mean of five raters on
  -3..3. Two sentences of one genre whose means differ by at least ``FORMALITY_GAP``; under a formal
  guide the more formal one is better, under a casual guide the less formal one. The two directions
  keep "longer wins" (formal sentences run longer) from passing as skill.
* ``polite``: the Stanford Politeness Corpus, five raters per request, z-normalised. Two requests of
  one community whose scores differ by at least ``POLITENESS_GAP``; the more polite is better.
* ``plain``: OneStopEnglish, the same news sentence at advanced and elementary level, rewritten by
  teachers; for beginner learners the elementary one is better.
* ``persuade`` (issue 25): UKPConvArg1, two arguments people wrote for the same side of a debate, the one
  crowd workers found more convincing is better, under a generic style guide with no register target
  (``pairjudge_dev.humaneval_writing``).

Every item is assigned to ``dev`` (fitting and calibration) or ``test`` (untouched until the end) by a
hash of its source and text, so no text is in both. Each method is scored as accuracy at 100%, 50%
and 30% coverage (the pairs it is most confident about), with Wilson 95% intervals, beside two
baselines: "longer wins" and a plain formality lexicon.

Run: ``python -m pairjudge_dev.humaneval --split dev`` (``--split test`` once, at the end).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio

from pairjudge.agents.core import judge_pair, resolve_tiebreak
from pairjudge.agents.judge import Judge
from pairjudge.agents.offline import OfflineJudge
from pairjudge.agents.offline.common import CONF_MIN
from pairjudge.agents.offline.markers import count_phrases
from pairjudge.agents.offline.text import words
from pairjudge.agents.offline.words import FORMAL_VOCABULARY, SLANG
from pairjudge.agents.policy import Policy
from pairjudge.agents.stats import expected_calibration_error, reliability_bins, wilson_interval
from pairjudge.schemas import Candidate, CandidatePair, CandidateSource, PairVerdict, Task, TieBreakRequest
from pairjudge.schemas.pair import KnownLabel, PairMetadata
from pairjudge.schemas.rubric import ToneStyleRubric
from pairjudge_dev.humaneval_writing import debate_prompt, read_argument_pairs, select_pairs

DATA = Path(__file__).resolve().parents[1] / "evaldata"
Split = Literal["dev", "test"]
#: The share of items kept for fitting and calibration; the rest is the untouched test split.
DEV_SHARE = 0.6
FORMALITY_GAP = 1.5  # on the -3..3 mean of five raters: a clear human preference
POLITENESS_GAP = 1.0  # in z-normalised units
PAIRS_PER_SET = 700
COVERAGES = (1.0, 0.5, 0.3)


@dataclass(frozen=True, slots=True)
class Item:
    """One human-rated text."""

    source: str
    item_id: str
    group: str
    text: str
    score: float


def split_of(source: str, text: str) -> Split:
    """By the text itself (whitespace-normalised, lower-cased), not its id: the sources repeat some texts
    under several ids (a request posted on two sites, a sentence in two articles)."""
    key = " ".join(text.lower().split())
    digest = hashlib.sha256(f"pairjudge-humaneval:{source}:{key}".encode()).digest()
    return "dev" if int.from_bytes(digest[:4], "big") / 2**32 < DEV_SHARE else "test"


# --- readers ------------------------------------------------------------------------------------

_DETOKENIZE = (
    (re.compile(r" (n't|'s|'re|'ve|'ll|'d|'m)\b", re.IGNORECASE), r"\1"),
    (re.compile(r" ([.,!?;:%)\]])"), r"\1"),
    (re.compile(r"([(\[$]) "), r"\1"),
    (re.compile(r"`` ?| ?''"), '"'),
)


def detokenize(text: str) -> str:
    """Undo Penn-style tokenisation ("do n't" -> "don't", "word ." -> "word."): the answers and email
    files were released tokenised, and a contraction split in two is not what a writer wrote."""
    for pattern, repl in _DETOKENIZE:
        text = pattern.sub(repl, text)
    return text


def _decode(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:  # 27 lines of blog/news are cp1252 (PROVENANCE.md)
        return line.decode("cp1252", errors="replace")


def read_pavlick(root: Path = DATA) -> list[Item]:
    items = []
    for genre in ("answers", "blog", "email", "news"):
        for line in (root / "pavlick-formality" / genre).read_bytes().splitlines():
            mean, ratings, item_id, text = _decode(line).split("\t", 3)
            if not ratings.strip():
                continue  # no rater could tell (PROVENANCE.md): no label
            text = detokenize(text) if genre in ("answers", "email") else text
            items.append(Item("pavlick", f"{genre}:{item_id}", genre, text.strip(), float(mean)))
    return items


def read_politeness(root: Path = DATA) -> list[Item]:
    items = []
    for name in ("wikipedia", "stack-exchange"):
        with (root / "stanford-politeness" / f"{name}.annotated.csv").open(encoding="utf-8", newline="") as fh:
            for row_no, row in enumerate(csv.DictReader(fh)):
                text = row["Request"].strip()
                items.append(
                    Item("politeness", f"{name}:{row_no}:{row['Id']}", name, text, float(row["Normalized Score"]))
                )
    return items


def read_onestop(root: Path = DATA) -> list[tuple[Item, Item]]:
    """(advanced, elementary) renderings of one sentence; the elementary one scores higher (easier)."""
    text = (root / "onestopenglish" / "ADV-ELE.txt").read_text(encoding="utf-8")
    out = []
    for index, block in enumerate(text.split("*******")):
        lines = [ln.strip() for ln in block.strip().splitlines() if ln.strip()]
        if len(lines) != 2 or " ".join(lines[0].split()) == " ".join(lines[1].split()):
            continue
        out.append(
            (
                Item("onestop", f"{index}:adv", "news", lines[0], 0.0),
                Item("onestop", f"{index}:ele", "news", lines[1], 1.0),
            )
        )
    return out


# --- pairs --------------------------------------------------------------------------------------

FORMAL_RUBRIC = ToneStyleRubric(style_guide="Formal and professional.", audience="Professional readers.")
CASUAL_RUBRIC = ToneStyleRubric(style_guide="Casual, relaxed and conversational.", audience="Friends online.")
POLITE_RUBRIC = ToneStyleRubric(
    style_guide="Polite, courteous and respectful.", audience="Members of an online community."
)
PLAIN_RUBRIC = ToneStyleRubric(
    style_guide="Plain, simple English that is easy to read.", audience="Beginner English learners."
)
#: A generic guide: it names qualities of good writing but no register, so the judge's register axes
#: have no direction here (the case issue 25 is about).
PERSUADE_RUBRIC = ToneStyleRubric(
    style_guide="Clear, persuasive and well written.", audience="Readers of an online debate."
)

SETS: dict[str, tuple[ToneStyleRubric, str]] = {
    "formal": (FORMAL_RUBRIC, "Write one sentence in the register this guide asks for."),
    "casual": (CASUAL_RUBRIC, "Write one sentence in the register this guide asks for."),
    "polite": (POLITE_RUBRIC, "Write a request to another member of the community."),
    "plain": (PLAIN_RUBRIC, "Rewrite this news sentence for the audience."),
    "persuade": (PERSUADE_RUBRIC, "Write a short argument for one side of an online debate."),
}


@dataclass(frozen=True, slots=True)
class LabelledPair:
    set_name: str
    pair: CandidatePair
    #: 0 when the first candidate is the humans' choice, 1 when the second is.
    human: int


def _candidate(cid: str, text: str) -> Candidate:
    return Candidate(candidate_id=cid, output=text, source=CandidateSource(model="human-written"))


def _pair(
    set_name: str, index: int, better: Item, worse: Item, rng: random.Random, prompt: str | None = None
) -> LabelledPair:
    rubric, default_prompt = SETS[set_name]
    prompt = prompt or default_prompt
    first_is_better = rng.random() < 0.5
    first, second = (better, worse) if first_is_better else (worse, better)
    pair = CandidatePair(
        pair_id=f"humaneval-{set_name}-{index:05d}",
        task=Task(prompt=prompt),
        candidates=(_candidate("c1", first.text), _candidate("c2", second.text)),
        rubric=rubric,
        metadata=PairMetadata(traffic="offline", experiment_id=f"humaneval-{set_name}"),
        human_label=KnownLabel(winner="c1" if first_is_better else "c2"),
    )
    return LabelledPair(set_name, pair, 0 if first_is_better else 1)


def _rated_pairs(
    set_name: str, items: Sequence[Item], gap: float, prefer_higher: bool, split: Split, count: int
) -> list[LabelledPair]:
    """Disjoint pairs within one group, scores at least ``gap`` apart; each item used at most once."""
    rng = random.Random(f"{set_name}:{split}")
    pool = [i for i in items if split_of(i.source, i.text) == split and len(words(i.text)) >= 3]
    by_group: dict[str, list[Item]] = {}
    for item in pool:
        by_group.setdefault(item.group, []).append(item)
    groups = sorted(by_group)
    used: set[str] = set()
    out: list[LabelledPair] = []
    for _ in range(count * 50):
        if len(out) >= count:
            break
        members = by_group[rng.choice(groups)]
        a, b = rng.sample(members, 2)
        if a.item_id in used or b.item_id in used or abs(a.score - b.score) < gap:
            continue
        used.update((a.item_id, b.item_id))
        high, low = (a, b) if a.score > b.score else (b, a)
        better, worse = (high, low) if prefer_higher else (low, high)
        out.append(_pair(set_name, len(out), better, worse, rng))
    return out


def build_pairs(split: Split, per_set: int = PAIRS_PER_SET, root: Path = DATA) -> list[LabelledPair]:
    pavlick = read_pavlick(root)
    # The formal and casual sets draw from disjoint halves of the items, so no sentence is in both.
    formal_half = [i for i in pavlick if int(hashlib.sha256(i.item_id.encode()).hexdigest(), 16) % 2 == 0]
    casual_half = [i for i in pavlick if int(hashlib.sha256(i.item_id.encode()).hexdigest(), 16) % 2 == 1]
    pairs = _rated_pairs("formal", formal_half, FORMALITY_GAP, True, split, per_set)
    pairs += _rated_pairs("casual", casual_half, FORMALITY_GAP, False, split, per_set)
    pairs += _rated_pairs("polite", read_politeness(root), POLITENESS_GAP, True, split, per_set)
    rng = random.Random(f"plain:{split}")
    # A pair belongs to a split only when both of its sentences do.
    onestop = [
        (a, e) for a, e in read_onestop(root) if split_of("onestop", a.text) == split == split_of("onestop", e.text)
    ]
    rng.shuffle(onestop)
    pairs += [_pair("plain", i, ele, adv, rng) for i, (adv, ele) in enumerate(onestop[:per_set])]
    return pairs + persuade_pairs(split, per_set, root)


def persuade_pairs(split: Split, per_set: int = PAIRS_PER_SET, root: Path = DATA) -> list[LabelledPair]:
    """The ``persuade`` set: UKPConvArg1 arguments for the same debate side (``humaneval_writing``)."""
    rng = random.Random(f"persuade-order:{split}")
    chosen = select_pairs(read_argument_pairs(root / "ukp-convarg"), split, split_of, per_set)
    out = []
    for i, ap in enumerate(chosen):
        better = Item("convarg", ap.better_id, ap.debate, ap.better, 1.0)
        worse = Item("convarg", ap.worse_id, ap.debate, ap.worse, 0.0)
        out.append(_pair("persuade", i, better, worse, rng, debate_prompt(ap.debate)))
    return out


# --- methods ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pick:
    """One method's answer on one pair: which candidate (0/1, None for no preference) and how sure."""

    choice: int | None
    strength: float


@dataclass
class JudgeRun:
    """The offline judge on one pair: its primary answer and what the pipeline finally did."""

    primary: Pick
    #: Per ordering: (confidence, right) for the calibration measures.
    orderings: list[tuple[float, bool]] = field(default_factory=list)
    outcome: str = ""
    reason: str | None = None
    final_choice: int | None = None


async def run_judge(judge: Judge, pairs: Sequence[LabelledPair], policy: Policy) -> list[JudgeRun]:
    runs: list[JudgeRun | None] = [None] * len(pairs)

    async def one(index: int, lp: LabelledPair) -> None:
        ids = [c.candidate_id for c in lp.pair.candidates]
        decision = await judge_pair(lp.pair, judge, policy)
        outcome = decision.outcome
        primary = outcome.judged_orderings
        valid = [o for o in primary[:2] if o.valid and o.mapped_winner in ids and o.confidence is not None]
        run = JudgeRun(Pick(None, 0.0))
        for o in valid:
            assert o.confidence is not None
            assert o.mapped_winner is not None
            run.orderings.append((o.confidence, ids.index(o.mapped_winner) == lp.human))
        winners = {o.mapped_winner for o in valid if o.mapped_winner is not None}
        if len(valid) == 2 and len(winners) == 1:
            conf = sum(o.confidence or 0.0 for o in valid) / 2
            # At the floor of its band the judge says it could not tell: no preference, a coin.
            run.primary = Pick(ids.index(winners.pop()) if conf > CONF_MIN else None, conf)
        if isinstance(outcome, TieBreakRequest):
            outcome = (await resolve_tiebreak(outcome, judge, policy)).outcome
        if isinstance(outcome, PairVerdict):
            run.outcome = f"verdict ({outcome.decided_by})"
            run.final_choice = ids.index(outcome.winner) if outcome.winner in ids else None
        else:
            run.outcome, run.reason = "review", outcome.reason
        runs[index] = run

    limiter = anyio.CapacityLimiter(16)

    async def limited(index: int, lp: LabelledPair) -> None:
        async with limiter:
            await one(index, lp)

    async with anyio.create_task_group() as tg:
        for index, lp in enumerate(pairs):
            tg.start_soon(limited, index, lp)
    return [r for r in runs if r is not None]


def longer_wins(lp: LabelledPair) -> Pick:
    a, b = (len(c.output) for c in lp.pair.candidates)
    if a == b:
        return Pick(None, 0.0)
    return Pick(0 if a > b else 1, abs(a - b) / max(a, b))


#: Which way a set's guide points on the formality axis, for the lexicon baseline.
_WANTS_FORMAL = {"formal": True, "polite": True, "casual": False, "plain": False, "persuade": True}


def lexicon_score(text: str) -> float:
    """Formal-vocabulary words minus slang words, per 100 words (the judge's own plain word lists)."""
    n = max(1, len(words(text)))
    return 100.0 * (count_phrases(text, FORMAL_VOCABULARY) - count_phrases(text, SLANG)) / n


def formality_lexicon(lp: LabelledPair) -> Pick:
    a, b = (lexicon_score(c.output) for c in lp.pair.candidates)
    if math.isclose(a, b):
        return Pick(None, 0.0)
    higher = 0 if a > b else 1
    return Pick(higher if _WANTS_FORMAL[lp.set_name] else 1 - higher, abs(a - b))


# --- scoring ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CoverageScore:
    coverage: float
    n: int
    accuracy: float
    low: float
    high: float


def accuracy_at_coverage(picks: Sequence[Pick], human: Sequence[int], coverage: float) -> CoverageScore:
    """Accuracy on the ``coverage`` share of pairs the method is surest of (strength, then a fixed order).

    A pick with no preference counts half right (a coin), so 100% coverage is comparable across
    methods that abstain and methods that never do."""
    order = sorted(range(len(picks)), key=lambda i: (-picks[i].strength, i))
    kept = order[: max(1, round(coverage * len(order)))]
    right = sum(1.0 if picks[i].choice == human[i] else 0.5 if picks[i].choice is None else 0.0 for i in kept)
    low, high = wilson_interval(right, len(kept))
    return CoverageScore(coverage, len(kept), right / len(kept), low, high)


#: The pipeline's default verdict threshold (``Policy.primary_confidence_threshold``).
DECIDE_AT = Policy().primary_confidence_threshold


def decided_share(picks: Sequence[Pick], human: Sequence[int], at: float = DECIDE_AT) -> str:
    """How often the judge's own answer is a verdict (both orderings agree at ``at`` or more), and how
    often those verdicts match the humans, with a Wilson 95% interval."""
    kept = [i for i, p in enumerate(picks) if p.choice is not None and p.strength >= at]
    if not kept:
        return f"0 of {len(picks)} (0%)"
    right = sum(picks[i].choice == human[i] for i in kept)
    low, high = wilson_interval(right, len(kept))
    return (
        f"{len(kept)} of {len(picks)} ({len(kept) / len(picks):.0%}), right {right / len(kept):.3f}"
        f" [{low:.2f}-{high:.2f}]"
    )


def _row(name: str, picks: Sequence[Pick], human: Sequence[int]) -> str:
    cells = []
    for c in COVERAGES:
        s = accuracy_at_coverage(picks, human, c)
        cells.append(f"{s.accuracy:.3f} [{s.low:.2f}-{s.high:.2f}]")
    return f"| {name} | " + " | ".join(cells) + " |"


def report(
    pairs: Sequence[LabelledPair], runs: Sequence[JudgeRun], out: Callable[[str], None] = print
) -> dict[str, object]:
    summary: dict[str, object] = {}
    sets = [*sorted({lp.set_name for lp in pairs}), "all"]
    out("| set / method | acc @100% | acc @50% | acc @30% |")
    out("|---|---|---|---|")
    for name in sets:
        idx = [i for i, lp in enumerate(pairs) if name in ("all", lp.set_name)]
        human = [pairs[i].human for i in idx]
        judge = [runs[i].primary for i in idx]
        longer = [longer_wins(pairs[i]) for i in idx]
        lexicon = [formality_lexicon(pairs[i]) for i in idx]
        out(f"| **{name}** ({len(idx)} pairs) | | | |")
        out(_row("offline judge", judge, human))
        out(_row("longer wins", longer, human))
        out(_row("formality lexicon", lexicon, human))
        decided = decided_share(judge, human)
        out(f"| judge decides (both orders agree, confidence >= {DECIDE_AT}) | {decided} | | |")
        figures: dict[str, object] = {
            method: [_cov(accuracy_at_coverage(p, human, c)) for c in COVERAGES]
            for method, p in (("judge", judge), ("longer", longer), ("lexicon", lexicon))
        }
        summary[name] = {**figures, "decided": decided}
    confs = [c for r in runs for c, _ in r.orderings]
    rights = [ok for r in runs for _, ok in r.orderings]
    ece = expected_calibration_error(confs, rights)
    out(f"\nECE (per ordering, 10 bins): {ece:.4f}" if ece is not None else "\nECE: n/a")
    for b in reliability_bins(confs, rights):
        if b.count:
            out(
                f"  conf {b.lower:.2f}-{b.upper:.2f}: n={b.count:5d}"
                f" mean conf {b.mean_confidence:.3f} right {b.accuracy:.3f}"
            )
    outcomes: dict[str, int] = {}
    for r in runs:
        key = r.outcome if r.reason is None else f"review: {r.reason}"
        outcomes[key] = outcomes.get(key, 0) + 1
    out("\noutcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    summary["ece"] = ece
    summary["outcomes"] = outcomes
    summary["reliability"] = [
        {"lower": b.lower, "upper": b.upper, "count": b.count, "confidence": b.mean_confidence, "right": b.accuracy}
        for b in reliability_bins(confs, rights)
        if b.count
    ]
    return summary


def plot_reliability(out: Path, runs: Sequence[tuple[str, Path]]) -> None:
    """A reliability diagram (share right against stated confidence) of one or more ``--json`` results."""
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4.2))
    ax.plot([0.5, 1.0], [0.5, 1.0], color="#999999", linestyle="--", linewidth=1, label="perfectly calibrated")
    for label, path in runs:
        data = json.loads(path.read_text())
        bins = data["reliability"]
        xs = [b["confidence"] for b in bins]
        ys = [b["right"] for b in bins]
        ax.plot(xs, ys, marker="o", label=f"{label} (ECE {data['ece']:.3f})")
        for b in bins:
            low, high = wilson_interval(b["right"] * b["count"], b["count"])
            ax.vlines(b["confidence"], low, high, alpha=0.5)
    ax.set_xlim(0.45, 1.0)
    ax.set_ylim(0.3, 1.0)
    ax.set_xlabel("confidence the offline judge stated (per ordering)")
    ax.set_ylabel("share that matched the human judgement")
    ax.set_title("Tone/style confidence on public human judgements")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, format="svg", metadata={"Date": None})
    plt.close(fig)


def _cov(s: CoverageScore) -> dict[str, float]:
    return {"coverage": s.coverage, "n": s.n, "accuracy": s.accuracy, "low": s.low, "high": s.high}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--per-set", type=int, default=PAIRS_PER_SET)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--plot", type=Path, help="draw a reliability diagram of --runs LABEL=FILE.json ... here, and judge nothing"
    )
    parser.add_argument("--runs", nargs="*", default=(), help="LABEL=FILE.json pairs for --plot")
    args = parser.parse_args(argv)
    if args.plot:
        plot_reliability(args.plot, [(r.split("=", 1)[0], Path(r.split("=", 1)[1])) for r in args.runs])
        return 0
    pairs = build_pairs(args.split, args.per_set)
    started = time.perf_counter()
    runs = anyio.run(run_judge, OfflineJudge(), pairs, Policy())
    elapsed = time.perf_counter() - started
    print(f"split {args.split}: {len(pairs)} pairs judged in {elapsed:.1f} s ({len(pairs) / elapsed:.0f} pairs/s)\n")
    summary = report(pairs, runs)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
