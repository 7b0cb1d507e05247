"""Human preferences between two pieces of persuasive writing, for ``pairjudge_dev.humaneval`` (issue 25).

UKPConvArg1 (Habernal & Gurevych, ACL 2016; ``evaldata/ukp-convarg/``, CC BY 4.0): short arguments that
people wrote on debate sites, grouped by debate and side (the *prompt*). Crowd workers (five per pair)
chose the more convincing of two arguments for the same side; the authors kept only the pairs whose
labels survived their cleaning (MACE competence weighting and a transitivity check: "UKPConvArg1Strict",
11,650 pairs). Those labels are the human judgements used here.

This is a writing task judged as a whole, under a style guide with no register target, which is where
a measured register or readability difference between two competent texts says nothing about what
people prefer: the set exists to check that the offline judge then abstains instead of guessing.

A pair belongs to a split only when both of its arguments do (split by a hash of each argument's text,
as every other set), and each argument is used in at most ``MAX_USES`` pairs, so no text dominates.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[1] / "evaldata" / "ukp-convarg"
#: An argument may be one side of this many pairs at most (each argument is in about 22 published pairs).
MAX_USES = 2
#: The published file name of one debate's ranking CSV differs from its pairs' file name by a typo.
_FILE_TYPOS = {"advancing-the-commond-good": "advancing-the-common-good"}


@dataclass(frozen=True, slots=True)
class ArgumentPair:
    """Two arguments for one side of one debate; ``better`` is the one people found more convincing."""

    debate: str
    better: str
    worse: str
    better_id: str
    worse_id: str


def debate_prompt(debate: str) -> str:
    """The writing task of a debate side, from its published file name ("topic_side")."""
    topic, _, side = debate.partition("_")
    topic_text = topic.replace("-", " ").strip()
    side_text = side.replace("-", " ").strip()
    return f"Write a short argument for one side of an online debate. Debate: {topic_text}. Side: {side_text}."


def read_arguments(root: Path = ROOT) -> dict[str, str]:
    """Argument id -> text, from the ranking CSV files (tab-separated ``#id, rank, argument``)."""
    texts: dict[str, str] = {}
    for path in sorted((root / "UKPConvArg1-Ranking-CSV").glob("*.csv")):
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            arg_id, _rank, text = line.split("\t", 2)
            texts[arg_id] = text.strip()
    return texts


def read_argument_pairs(root: Path = ROOT) -> list[ArgumentPair]:
    """Every labelled pair of ``strict-labels.tsv`` (debate, ``a1id_a2id``, winner ``a1``/``a2``)."""
    texts = read_arguments(root)
    pairs = []
    for line in (root / "strict-labels.tsv").read_text(encoding="utf-8").splitlines():
        debate, pair_id, label = line.split("\t")
        first, second = pair_id.split("_")
        for typo, fixed in _FILE_TYPOS.items():
            debate = debate.replace(typo, fixed)
        if label not in ("a1", "a2"):
            raise ValueError(f"unexpected label {label!r} for pair {pair_id} in {debate}")
        better, worse = (first, second) if label == "a1" else (second, first)
        pairs.append(ArgumentPair(debate, texts[better], texts[worse], better, worse))
    return pairs


def select_pairs(
    pairs: list[ArgumentPair],
    split: Literal["dev", "test"],
    split_of: Callable[[str, str], str],
    count: int,
    seed: str = "persuade",
) -> list[ArgumentPair]:
    """Up to ``count`` pairs of ``split`` in a fixed shuffled order, each argument in at most ``MAX_USES``."""
    rng = random.Random(f"{seed}:{split}")
    order = list(pairs)
    rng.shuffle(order)
    uses: dict[str, int] = {}
    out: list[ArgumentPair] = []
    for p in order:
        if len(out) >= count:
            break
        if split_of("convarg", p.better) != split or split_of("convarg", p.worse) != split:
            continue
        if uses.get(p.better_id, 0) >= MAX_USES or uses.get(p.worse_id, 0) >= MAX_USES:
            continue
        if " ".join(p.better.split()).lower() == " ".join(p.worse.split()).lower():
            continue  # the same text posted twice: nothing to prefer
        uses[p.better_id] = uses.get(p.better_id, 0) + 1
        uses[p.worse_id] = uses.get(p.worse_id, 0) + 1
        out.append(p)
    return out
