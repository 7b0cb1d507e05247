"""FastChat's pairwise judging, driven as its ``gen_judgment.py`` drives it (run in the FastChat venv).

``bench.speed`` runs this file by path with the interpreter of ``~/.cache/pairjudge/fastchat-venv``
(``fschat==0.2.36`` with the legacy ``openai==0.28.1`` it was written for). It imports nothing from
pairjudge. It reads a JSON spec (``argv[1]``): the judge server's ``api_base``, ``parallel`` and the
matches. It builds ``MatchPair`` objects with a ``Judge("gpt-4", pair-v2)`` and plays them with
``fastchat.llm_judge.common.play_a_match_pair`` in ``concurrent.futures.ThreadPoolExecutor(parallel)``,
the loop of ``gen_judgment.py`` without its progress bar and its "Press Enter" prompt. Each thread asks
the two orders one after the other (AB, then BA) through ``chat_completion_openai``, so at most
``parallel`` calls are in flight. Results go to ``output_file``, one JSON line per match with FastChat's
own ``tstamp``, which the parent reads; the parent also samples this process's CPU from /proc.

FastChat's ``common.py`` imports ``fastchat.model.model_adapter``, which imports torch, transformers,
accelerate, peft and huggingface_hub at module level (and ``common.py`` imports anthropic), though none
of them is used to judge with an OpenAI model: the adapter lookup for "gpt-4" only picks the "chatgpt"
conversation template. Installing torch would mean gigabytes for a CI smoke run, so those top-level
modules are replaced by inert stand-ins before the import; every line FastChat runs per match is its own.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import json
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

#: Imported at module level by FastChat's model code, never called on the OpenAI judging path.
STUBBED = frozenset({"torch", "transformers", "accelerate", "peft", "huggingface_hub", "anthropic"})

#: FastChat's "pair-v2" judge prompt (fastchat/llm_judge/data/judge_prompts.jsonl), used when the
#: installed package does not ship the data file (the 0.2.36 wheel does not).
PAIR_V2: dict[str, str] = {
    "name": "pair-v2",
    "type": "pairwise",
    "system_prompt": (
        "Please act as an impartial judge and evaluate the quality of the responses provided by two AI "
        "assistants to the user question displayed below. You should choose the assistant that follows the "
        "user's instructions and answers the user's question better. Your evaluation should consider factors "
        "such as the helpfulness, relevance, accuracy, depth, creativity, and level of detail of their "
        "responses. Begin your evaluation by comparing the two responses and provide a short explanation. "
        "Avoid any position biases and ensure that the order in which the responses were presented does not "
        "influence your decision. Do not allow the length of the responses to influence your evaluation. Do "
        "not favor certain names of the assistants. Be as objective as possible. After providing your "
        'explanation, output your final verdict by strictly following this format: "[[A]]" if assistant A '
        'is better, "[[B]]" if assistant B is better, and "[[C]]" for a tie.'
    ),
    "prompt_template": (
        "[User Question]\n{question}\n\n[The Start of Assistant A's Answer]\n{answer_a}\n"
        "[The End of Assistant A's Answer]\n\n[The Start of Assistant B's Answer]\n{answer_b}\n"
        "[The End of Assistant B's Answer]"
    ),
    "description": "Prompt for general questions",
    "category": "general",
    "output_format": "[[A]]",
}


class _Inert:
    """Stands for any class, function or decorator of a stubbed module."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Used as a decorator: hand the function back unchanged.
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return _Inert()

    def __getattr__(self, name: str) -> Any:
        return _Inert()

    def __class_getitem__(cls, item: Any) -> Any:
        return cls


class _InertModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _InertModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def judge_prompt() -> tuple[dict[str, Any], str]:
    """FastChat's own pair-v2 prompt when the package ships it, else the copy above; and its source."""
    try:
        shipped = resources.files("fastchat.llm_judge").joinpath("data/judge_prompts.jsonl").read_text()
    except (FileNotFoundError, ModuleNotFoundError, OSError):
        return dict(PAIR_V2), "bench copy"
    for line in shipped.splitlines():
        if line.strip():
            prompt: dict[str, Any] = json.loads(line)
            if prompt.get("name") == "pair-v2":
                return prompt, "shipped"
    return dict(PAIR_V2), "bench copy"


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    sys.meta_path.insert(0, _StubFinder())
    common = importlib.import_module("fastchat.llm_judge.common")
    openai: Any = importlib.import_module("openai")
    openai.api_base = spec["api_base"]
    openai.api_key = "bench"  # the legacy client refuses to send without one; the server ignores it
    prompt, source = judge_prompt()
    judge = common.Judge("gpt-4", prompt)
    matches = [
        common.MatchPair(
            {"question_id": m["id"], "category": "writing", "turns": [m["question"]]},
            m["model_1"],
            m["model_2"],
            {"choices": [{"turns": [m["answer_1"]]}]},
            {"choices": [{"turns": [m["answer_2"]]}]},
            judge,
        )
        for m in spec["matches"]
    ]
    output_file = spec["output_file"]

    def play_a_match_wrapper(match: Any) -> None:
        common.play_a_match_pair(match, output_file=output_file)

    started, cpu0 = time.time(), time.process_time()
    with ThreadPoolExecutor(spec["parallel"]) as executor:
        for _ in executor.map(play_a_match_wrapper, matches):
            pass
    summary = {
        "started": started,
        "ended": time.time(),
        "cpu_s": time.process_time() - cpu0,
        "prompt_source": source,
        "openai_version": openai.version.VERSION,
    }
    Path(spec["summary_file"]).write_text(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
