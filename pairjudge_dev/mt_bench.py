"""MT-Bench two-turn questions and two models' answers as pairjudge transcript comparisons.

MT-Bench (Zheng et al., 2023, in lm-sys/FastChat) asks each model two user turns per question; a model's
answer holds its reply to each. :func:`to_pairs` makes one ``CandidatePair`` per question: the task's
messages are the user turns, each candidate's ``turns`` its first reply and its ``output`` its second
(a transcript comparison, docs/guides/conversations.md). No judgement of MT-Bench's (human or GPT-4) is
read: the pairs carry no label. The sample and its provenance are in evaldata/mt-bench/.

    python -m pairjudge_dev.mt_bench > mt_bench_pairs.jsonl    # the sample, one pair a line
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from pairjudge.schemas import Candidate, CandidatePair, CandidateSource, Message, PairwiseRubric, Task

ROOT: Final = Path(__file__).resolve().parent.parent
SAMPLE: Final = ROOT / "evaldata" / "mt-bench"
#: The sample's two models: answers file stem -> the model named on the candidate's source.
MODELS: Final = ("gpt-4o", "llama-2-chat13b")
#: MT-Bench's own criteria for its pairwise judge ("helpfulness, relevance, accuracy, depth, creativity,
#: and level of detail"), as a pairwise rubric.
RUBRIC: Final = PairwiseRubric(criteria=("helpfulness", "relevance", "accuracy", "depth", "creativity", "detail"))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def answers_by_question(rows: Iterable[Mapping[str, Any]]) -> dict[int, tuple[str, ...]]:
    """A FastChat model-answer file's first choice, by question id: the model's reply to each turn."""
    return {int(r["question_id"]): tuple(r["choices"][0]["turns"]) for r in rows}


def to_pair(
    question: Mapping[str, Any], first: tuple[str, tuple[str, ...]], second: tuple[str, tuple[str, ...]]
) -> CandidatePair:
    """One question and two models' (name, replies) as a transcript comparison; ``ValueError`` when a
    model did not answer every turn."""
    turns = tuple(question["turns"])
    candidates = []
    for model, replies in (first, second):
        if len(replies) != len(turns):
            raise ValueError(
                f"{model} has {len(replies)} replies to question {question['question_id']}'s {len(turns)} turns"
            )
        candidates.append(
            Candidate(
                candidate_id=f"mtb-{question['question_id']}-{model}",
                output=replies[-1],
                turns=replies[:-1],
                source=CandidateSource(model=model, version="fastchat", prompt_version="mt-bench", role="candidate"),
            )
        )
    return CandidatePair(
        pair_id=f"mtb-{question['question_id']}",
        task=Task(messages=tuple(Message(role="user", content=t) for t in turns)),
        candidates=(candidates[0], candidates[1]),
        rubric=RUBRIC,
    )


def to_pairs(
    questions: Iterable[Mapping[str, Any]],
    answers: Mapping[str, Mapping[int, tuple[str, ...]]],
    models: tuple[str, str],
) -> list[CandidatePair]:
    """Every question both models answered, as pairs (first model first)."""
    a, b = models
    return [
        to_pair(q, (a, answers[a][int(q["question_id"])]), (b, answers[b][int(q["question_id"])]))
        for q in questions
        if int(q["question_id"]) in answers[a] and int(q["question_id"]) in answers[b]
    ]


def sample_pairs(root: Path = SAMPLE) -> list[CandidatePair]:
    """The sample in evaldata/mt-bench/ as pairs: gpt-4o's transcript first, Llama-2-13B-chat's second."""
    answers = {m: answers_by_question(read_jsonl(root / f"answer-{m}.jsonl")) for m in MODELS}
    return to_pairs(read_jsonl(root / "question.jsonl"), answers, MODELS)


def main() -> None:
    for pair in sample_pairs():
        sys.stdout.write(pair.model_dump_json() + "\n")


if __name__ == "__main__":
    main()
