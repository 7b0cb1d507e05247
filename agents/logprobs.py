"""Confidence from token probabilities: the judge's probability for each side, read at its verdict token.

An OpenAI-compatible server (OpenAI, vLLM, the llama.cpp server) asked for ``logprobs`` with ``top_logprobs``
returns, for every generated token, its log probability and the most likely alternatives at that position
(``choices[0].logprobs.content``). The judge's JSON reply names its preference in one field (seed 000's
``winner``, seed 001's ``preference``, seed 003's ``result.winner``, seed 002's ``winner``); the token that
writes that field's value carries the preference, and the alternatives at that position say how likely the
judge was to write the other letter instead.

:func:`choice_probabilities` finds that token and turns its alternatives into one probability per choice
(``"A"``, ``"B"``, and ``"TIE"`` where the template allows one), renormalised over the choice tokens present
among the alternatives: mass on tokens that are no choice at all (which the reply's grammar usually rules
out anyway) is not spread over the choices. A choice absent from the alternatives gets probability 0; with
``top_logprobs`` of 5 or more that is a few thousandths at most.

Pure logic: the HTTP client only passes the server's ``logprobs.content`` list through
(``JudgeResponse.extra["logprobs"]``); everything here reads plain JSON values, in any of the shapes the
servers send (OpenAI's and vLLM's ``{token, logprob, bytes, top_logprobs}``, llama.cpp's with an ``id`` too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final

from pairjudge.agents.judge import TemplateKind

__all__ = ["CHOICES", "VERDICT_PATHS", "choice_probabilities", "verdict_value_offset"]

#: Where each template's reply names its preference, as a path of object keys from the top of the reply.
VERDICT_PATHS: Final[Mapping[TemplateKind, tuple[str, ...]]] = {
    "tone_style": ("winner",),
    "head_to_head": ("preference",),
    "pairwise": ("result", "winner"),
    "tiebreak": ("winner",),
}

#: The values each template's verdict field takes (``schemas.replies``): TIE only where a tie is a verdict.
CHOICES: Final[Mapping[TemplateKind, tuple[str, ...]]] = {
    "tone_style": ("A", "B"),
    "head_to_head": ("A", "B", "TIE"),
    "pairwise": ("A", "B", "TIE"),
    "tiebreak": ("A", "B"),
}

#: Servers write an impossible alternative's log probability as a large negative number (vLLM: -9999.0).
_FLOOR: Final = -1000.0


def _skip_string(text: str, start: int) -> int:
    """The index just past the JSON string whose opening quote is at ``start``; ``-1`` when it never ends."""
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == '"':
            return i + 1
        i += 1
    return -1


def verdict_value_offset(text: str, path: Sequence[str]) -> int | None:
    """The index in ``text`` of the first character of the string value at ``path`` (just after its opening
    quote), scanning the first JSON object in ``text``; None when there is no string value at ``path``.

    A scanner rather than ``json.loads``: the parser gives values, not where they stand, and the offset is
    what lines the value up with the tokens that wrote it. Only the nesting and the keys are followed; the
    reply's validity is the core's validator's business (it has already accepted this text).
    """
    start = text.find("{")
    if start < 0:
        return None
    # One frame per open container: its key path, and for an object the key just read (None: a key is next).
    keys: list[str | None] = []
    in_object: list[bool] = []
    prefix: list[str] = []
    i = start
    while i < len(text):
        ch = text[i]
        if ch in "{[":
            if keys and in_object[-1]:
                prefix.append(keys[-1] or "")
            elif keys:
                prefix.append("[]")
            keys.append(None)
            in_object.append(ch == "{")
            i += 1
        elif ch in "}]":
            keys.pop()
            in_object.pop()
            if not keys:
                return None
            prefix.pop()
            if in_object[-1]:
                keys[-1] = None
            i += 1
        elif ch == '"':
            end = _skip_string(text, i)
            if end < 0:
                return None
            if in_object and in_object[-1] and keys[-1] is None:
                keys[-1] = text[i + 1 : end - 1]
            elif in_object and in_object[-1]:
                if (*prefix, keys[-1] or "") == tuple(path):
                    return i + 1
                keys[-1] = None
            i = end
        elif ch == "," and in_object and in_object[-1]:
            keys[-1] = None
            i += 1
        else:
            i += 1
    return None


def _logprob(entry: object) -> tuple[str, float] | None:
    if not isinstance(entry, Mapping):
        return None
    token, logprob = entry.get("token"), entry.get("logprob")
    if not isinstance(token, str) or isinstance(logprob, bool) or not isinstance(logprob, int | float):
        return None
    if math.isnan(logprob):
        return None
    return token, max(float(logprob), _FLOOR)


def _choice_of(alternative: str, lead: str, choices: Sequence[str]) -> str | None:
    """The choice a token at the verdict position writes: it must start with the same characters as the
    chosen token did before the value (``lead``, e.g. the opening quote), then begin a choice's letters."""
    if not alternative.startswith(lead):
        return None
    rest = alternative[len(lead) :].split('"', 1)[0]
    if not rest:
        return None
    for choice in choices:
        if choice.startswith(rest) or rest == choice:
            return choice
    return None


def choice_probabilities(
    content: object, template: TemplateKind, *, text: str | None = None
) -> dict[str, float] | None:
    """The judge's probability for each verdict choice, by position letter (``{"A": p, "B": 1-p}``), read
    from a chat completion's ``logprobs.content``; None when they cannot be read (no logprobs, no verdict
    field among the tokens, no alternatives at its position, no choice among them).

    ``text`` is the reply text the core validated; the tokens are read only when they spell it (a server
    that strips or rewrites the content would otherwise line the wrong token up). Without it, the tokens'
    own text is scanned.
    """
    if not isinstance(content, Sequence) or isinstance(content, str | bytes) or not content:
        return None
    tokens: list[str] = []
    entries: list[Mapping[str, object]] = []
    for entry in content:
        read = _logprob(entry)
        if read is None or not isinstance(entry, Mapping):
            return None
        tokens.append(read[0])
        entries.append(entry)
    spelled = "".join(tokens)
    if text is not None and spelled.strip() != text.strip():
        return None
    offset = verdict_value_offset(spelled, VERDICT_PATHS[template])
    if offset is None:
        return None
    found = _token_at(tokens, offset)
    if found is None:
        return None
    index, start = found
    lead = tokens[index][: offset - start]
    choices = CHOICES[template]
    entry = entries[index]
    alternatives = [a for a in (_logprob(x) for x in _as_list(entry.get("top_logprobs"))) if a is not None]
    chosen = _logprob(entry)
    if chosen is not None and all(token != chosen[0] for token, _ in alternatives):
        alternatives.append(chosen)
    mass: dict[str, float] = {}
    for token, logprob in alternatives:
        choice = _choice_of(token, lead, choices)
        if choice is not None:
            mass[choice] = mass.get(choice, 0.0) + math.exp(logprob)
    total = sum(mass.values())
    if total <= 0.0 or not math.isfinite(total):
        return None
    return {choice: mass.get(choice, 0.0) / total for choice in choices}


def _token_at(tokens: Sequence[str], offset: int) -> tuple[int, int] | None:
    """The index of the token that holds character ``offset`` of the tokens' text, and where it starts."""
    position = 0
    for index, token in enumerate(tokens):
        if position + len(token) > offset:
            return index, position
        position += len(token)
    return None


def _as_list(value: object) -> list[object]:
    return list(value) if isinstance(value, list | tuple) else []
