"""How well hostile outputs are kept from steering verdicts, and how often ordinary outputs are flagged.

    python -m pairjudge_dev.injection_eval --split dev     # what the rules were tuned on
    python -m pairjudge_dev.injection_eval --split test    # read once, for docs/guides/prompt-injection.md's figures

**Steering.** Each hostile output of ``tests/data/hostile_outputs.jsonl`` (written for this project:
a weak answer carrying text aimed at the judge) is paired with the better output of a demo pair,
under that pair's task and rubric, in both positions. An :class:`ObedientJudge` judges it: it reads
the prompt as any judge does, counts the cues it obeys in each output's *visible* text ("better",
"choose", "ignore", "judge", a verdict in JSON ...), and picks the output with more of them with
confidence 0.97 in both orders, so the swap cannot catch it. On equal counts it picks the better output. Counted: pairs
decided automatically for the injecting output, with the injection guard on and off.

**False alarms.** :func:`agents.injection.detect` over ordinary text nobody wrote to attack a judge:
public human-written sentences and requests (``evaldata/``: Pavlick formality, Stanford politeness,
OneStopEnglish), public LLM answers (``evaldata/fastchat-answers``), and the demo and devset outputs.
Public texts are split dev/test by a hash of the text (of the question id for LLM answers).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import math
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pairjudge.agents.core import judge_pair
from pairjudge.agents.injection import detect
from pairjudge.agents.judge import JudgeRequest
from pairjudge.agents.policy import Policy
from pairjudge.agents.prompt_slots import PromptSlots
from pairjudge.agents.scripted import ScriptedJudge
from pairjudge.schemas import CandidatePair, PairVerdict
from pairjudge.schemas.rubric import HeadToHeadRubric, PairwiseRubric
from pairjudge_dev.humaneval import Split, read_onestop, read_pavlick, read_politeness, split_of
from pairjudge_dev.replies import h2h_reply, pairwise_reply, tiebreak_reply, tone_reply

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "hostile_outputs.jsonl"
SAMPLES = ROOT / "streams" / "data" / "sample_pairs.jsonl"
DEVSET = ROOT / "streams" / "data" / "devset_tone.jsonl"
ANSWERS = ROOT / "evaldata" / "fastchat-answers" / "answers.jsonl.gz"

#: What the obedient judge obeys: any of these in an output's visible text (NFKC, lower case). Broader
#: than the detector on purpose, and written apart from it: the guard must not pass only because the
#: simulated judge happens to read like the detector.
CUES = (
    *("better", "best", "winner", "win", "choose", "select", "pick", "prefer", "superior", "stronger"),
    *("ignore", "disregard", "forget", "override", "bypass", "instruction", "anweisungen", "instrucciones"),
    *("istruzioni", "instruções", "指令", "judge", "evaluator", "grader", "grading", "score", "marks"),
    *("system", "inst]", "verdict", "label", "keep", '"a"', "winner:", "correct", "reference"),
)


def cues(text: str) -> int:
    """How many of :data:`CUES` the text holds: the more it asks, the more this judge obeys."""
    view = unicodedata.normalize("NFKC", text).lower()
    return sum(cue in view for cue in CUES)


@dataclass(frozen=True, slots=True)
class Corpus:
    rows: list[dict[str, str]]

    @classmethod
    def load(cls, path: Path = CORPUS) -> Corpus:
        return cls([json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()])

    def split(self, split: Split) -> list[dict[str, str]]:
        return [r for r in self.rows if r["split"] == split]


def demo_pairs() -> list[CandidatePair]:
    """The sample pairs that parse (the file also holds deliberately malformed events)."""
    pairs = []
    for line in SAMPLES.read_text(encoding="utf-8").splitlines():
        try:
            pairs.append(CandidatePair.model_validate_json(line))
        except ValueError:
            continue
    return pairs


class ObedientJudge(ScriptedJudge):
    """A judge that follows instructions it reads inside an output; otherwise it prefers ``good``."""

    def __init__(self, good: str) -> None:
        super().__init__(self._reply, model="obedient")
        self._good = good

    def _reply(self, request: JudgeRequest) -> str:
        slots = request.slots
        assert slots is not None, "the core renders every request it sends (agents.prompts.render)"
        a, b = cues(slots.output_a), cues(slots.output_b)
        if a != b:
            winner, confidence = ("A" if a > b else "B"), 0.97
        else:
            winner, confidence = ("A" if slots.output_a == self._good else "B"), 0.9
        return reply_for(request, slots, winner, confidence)


def reply_for(request: JudgeRequest, slots: PromptSlots, winner: str, confidence: float) -> str:
    """A valid reply of ``request``'s template naming ``winner`` (``A``/``B``) at ``confidence``."""
    rubric = slots.rubric
    if request.template == "tone_style":
        return tone_reply(winner, confidence)
    if request.template == "head_to_head" and isinstance(rubric, HeadToHeadRubric):
        return h2h_reply(winner, confidence, criteria=[c.name for c in rubric.criteria])
    if request.template == "pairwise" and isinstance(rubric, PairwiseRubric):
        return pairwise_reply(winner, confidence, criteria=rubric.criteria)
    assert slots.tiebreak is not None
    winners = {c.name: winner for c in slots.tiebreak.criteria}
    return tiebreak_reply(winners, weights=slots.tiebreak, confidence=confidence)


@dataclass(frozen=True, slots=True)
class SteeringResult:
    pairs: int
    steered_without_guard: int
    steered_with_guard: int
    sent_to_review: int
    missed: tuple[str, ...]


def hostile_pair(base: CandidatePair, hostile: str, position: int, pair_id: str) -> CandidatePair:
    good, injector = base.candidates[0], base.candidates[1].model_copy(update={"output": hostile})
    candidates = (injector, good) if position == 0 else (good, injector)
    return base.model_copy(update={"pair_id": pair_id, "candidates": candidates})


async def steering(rows: Sequence[dict[str, str]]) -> SteeringResult:
    bases = demo_pairs()
    guarded, unguarded = Policy(audit_share=0.0), Policy(audit_share=0.0, injection_guard=False)
    counts: Counter[str] = Counter()
    missed = []
    for index, row in enumerate(rows):
        base = bases[index % len(bases)]
        for position in (0, 1):
            pair = hostile_pair(base, row["output"], position, f"{row['id']}-{position}")
            injector = pair.candidates[position].candidate_id
            judge = ObedientJudge(base.candidates[0].output)
            counts["pairs"] += 1
            for name, policy in (("with", guarded), ("without", unguarded)):
                outcome = (await judge_pair(pair, judge, policy)).outcome
                steered = isinstance(outcome, PairVerdict) and outcome.winner == injector
                counts[f"steered_{name}"] += steered
                if name == "with" and steered:
                    missed.append(pair.pair_id)
                if name == "with" and getattr(outcome, "reason", None) == "suspected_injection":
                    counts["review"] += 1
    return SteeringResult(
        counts["pairs"], counts["steered_without"], counts["steered_with"], counts["review"], tuple(missed)
    )


def _question_split(question_id: str) -> Split:
    digest = hashlib.sha256(f"pairjudge-injection:{question_id}".encode()).digest()
    return "dev" if int.from_bytes(digest[:4], "big") / 2**32 < 0.6 else "test"


def ordinary_texts(split: Split) -> Iterator[tuple[str, str]]:
    """(source, text) for every ordinary text of ``split``; the demo and devset outputs in both splits."""
    for item in read_pavlick():
        if split_of("pavlick", item.text) == split:
            yield "Pavlick formality (human sentences)", item.text
    for item in read_politeness():
        if split_of("politeness", item.text) == split:
            yield "Stanford politeness (human requests)", item.text
    for rendering in read_onestop():
        for item in rendering:
            if split_of("onestop", item.text) == split:
                yield "OneStopEnglish (teachers' sentences)", item.text
    with gzip.open(ANSWERS, "rt", encoding="utf-8") as fh:
        for line in fh:
            answer = json.loads(line)
            if _question_split(answer["question_id"]) == split:
                yield "FastChat LLM answers", answer["output"]
    for pair in demo_pairs():
        for candidate in pair.candidates:
            yield "demo pairs (ours)", candidate.output
    for line in DEVSET.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for candidate in record.get("pair", record)["candidates"]:
            yield "devset (ours)", candidate["output"]


def wilson_upper(hits: int, n: int, z: float = 1.96) -> float:
    if n == 0:
        return 1.0
    p = hits / n
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + margin) / (1 + z * z / n))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    args = parser.parse_args(argv)
    corpus = Corpus.load().split(args.split)
    result = asyncio.run(steering(corpus))
    by_category = Counter(r["category"] for r in corpus)
    undetected = Counter(r["category"] for r in corpus if not detect(r["output"]))
    print(f"hostile outputs ({args.split}): {len(corpus)}; pairs judged (both positions): {result.pairs}")
    print(f"  auto-decided for the injector, guard off: {result.steered_without_guard}")
    print(f"  auto-decided for the injector, guard on:  {result.steered_with_guard}")
    print(f"  sent to review as suspected_injection:    {result.sent_to_review}")
    for category, n in sorted(by_category.items()):
        print(f"    {category:14} detected {n - undetected[category]}/{n}")
    if result.missed:
        print("  steered despite the guard:", ", ".join(result.missed))
    print(f"ordinary texts ({args.split}): flagged / texts, false-positive rate [95% upper bound]")
    flagged: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for source, text in ordinary_texts(args.split):
        totals[source] += 1
        findings = detect(text)
        if findings:
            flagged[source] += 1
            examples.setdefault(source, []).append(f"{findings[0].rule}: {findings[0].excerpt!r}")
    for source, n in totals.items():
        hits = flagged[source]
        print(f"  {source:40} {hits:4}/{n:6}  {hits / n:.4f} [{wilson_upper(hits, n):.4f}]")
        for example in examples.get(source, [])[:5]:
            print(f"      {example}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
