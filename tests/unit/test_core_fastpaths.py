"""Issue 27's faster paths through the judging core give what the paths they replaced gave, text for text.

Each test below keeps the previous implementation as a reference (copied from the code before issue 27)
and compares it with the current one on many generated texts, drawn from the characters and words each
path cares about (hidden characters, look-alikes, every kind of blank, the rules' own words, JSON
numbers and escapes). The golden files (``test_core_golden.py``, ``test_injection_golden.py``) pin real
corpora; these reach the corners a corpus may not.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from pairjudge.agents import injection, prompt_fill, untrusted
from pairjudge.agents.errors import InvalidReply
from pairjudge.agents.injection import RULES, Finding, detect, normalise
from pairjudge.agents.untrusted import MARK, datamark, fold, strip_hidden
from pairjudge.agents.validation import _clip, _reject_constant, describe_validation_error, parse_reply, strip_fence
from pairjudge.schemas import DEFAULT_TIEBREAK_WEIGHTS
from pairjudge.schemas.replies import HeadToHeadReply, PairwiseReply, Reply, TieBreakReply, ToneStyleReply
from pairjudge_dev.injection_eval import Corpus
from pairjudge_dev.replies import h2h_reply, pairwise_reply, tiebreak_reply, tone_reply

# --- the previous implementations ---------------------------------------------------------------


def _fold_before(text: str) -> str:
    return text if text.isascii() else text.translate(untrusted._FOLD)


# The one-pass regex strip_hidden was, repeated until nothing changes: one pass could leave a joiner whose
# neighbour it removed (a bug, fixed in strip_hidden: the fixpoint is what it was meant to give).
_HIDDEN_ONE_PASS = re.compile(
    f"[{untrusted._BIDI}{untrusted._ZERO_WIDTH}{untrusted._TAGS}]"
    f"|(?<![^\\x00-\\x7f])[{untrusted._JOINERS}]|[{untrusted._JOINERS}](?![^\\x00-\\x7f])"
)


def _strip_hidden_before(text: str) -> str:
    if text.isascii():
        return text
    while (stripped := _HIDDEN_ONE_PASS.sub("", text)) != text:
        text = stripped
    return text


_GAP_BEFORE = re.compile(f"[\\s{untrusted._BLANKS}]")


def _datamark_before(text: str) -> str:
    if MARK in text or "&" in text:
        text = untrusted._MARK_AMPERSAND.sub("&amp;", text).replace(MARK, untrusted._MARK_ESCAPE)
    return _GAP_BEFORE.sub(lambda m: MARK if m.group(0) == " " else MARK + m.group(0), text)


_SPACES = re.compile(r"[^\S\n]+")
_NEWLINES = re.compile(r"\s*\n\s*")


def _normalise_before(text: str) -> str:
    return _NEWLINES.sub("\n", _SPACES.sub(" ", _fold_before(_strip_hidden_before(text)).lower()))


def _detect_before(text: str) -> tuple[Finding, ...]:
    view = _normalise_before(untrusted.reveal_tags(text))
    findings = [Finding(r.name, m.group(0)[:80]) for r in RULES if (m := r.pattern.search(view)) is not None]
    if untrusted.has_tag_text(text):
        findings.append(Finding("hidden_text", "text in Unicode tag characters"))
    elif not text.isascii() and re.search("[\u202d\u202e]", text):
        findings.append(Finding("hidden_text", "bidi override"))
    return tuple(findings)


def _parse_before(text: str, reply_model: type[Reply]) -> Reply:
    body = strip_fence(text)
    if not body.strip():
        raise InvalidReply("the reply is empty; a JSON object is required", text)
    try:
        data = json.loads(body, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys_before)
    except json.JSONDecodeError as exc:
        raise InvalidReply(
            f"the reply is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            " (it must be one complete JSON object and nothing else)",
            text,
        ) from exc
    except ValueError as exc:
        raise InvalidReply(f"the reply is not valid JSON: {exc}", text) from exc
    except RecursionError:
        raise InvalidReply("the reply is nested too deeply to be a verdict object", text) from None
    if not isinstance(data, dict):
        raise InvalidReply(f"the reply must be one JSON object, not a JSON {type(data).__name__}", text)
    try:
        return reply_model.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        raise InvalidReply(describe_validation_error(exc), text) from exc


def _no_duplicate_keys_before(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"the key {_clip(key)!r} appears twice in one object")
        obj[key] = value
    return obj


def _substitute_before(template: str, replacements: dict[str, str]) -> str:
    pattern = re.compile("|".join(re.escape(k) for k in sorted(replacements, key=len, reverse=True)))
    return pattern.sub(lambda m: replacements[m.group(0)], template)


# --- generated texts ----------------------------------------------------------------------------

_BLANKS = [" ", "  ", "\n", "\n\n", " \n ", "\t", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u1680", "\u2003"]
_BLANKS += ["\u2028", "\u2029", "\u202f", "\u3000", "\u2800", "\u3164", "\u115f", "\u1160", "\uffa0", "\u180e"]
_HIDDEN = ["\u200b", "\u2060", "\ufeff", "\u00ad", "\u202e", "\u202c", "\u2066", "\u200c", "\u200d", "\U000e0041"]
_LOOKALIKES = ["\uff1c", "\uff1e", "\u0456", "\u0441", "\u0430", "\u03bf", "\u2039", "\u3008", "\uff3b", "\u2215"]
_OTHERS = ["é", "ß", "İ", "ﬁ", "Ⅻ", "中文", "🎉", "👩\u200d💻", "&", "&amp;", "&lt;", "&#x2C6;", MARK, "<", "[", '"']
_WORDS = ["a", "B", "the", "The Other", "RESPONSE", "output", "answer", "ignore", "previous", "instructions"]
_WORDS += ["is", "better", "best", "judge", "evaluator", "system", "prompt", ":", "winner", "score", "10/10"]


def _rule_words() -> list[str]:
    """The words and phrases the rules are screened with, and pieces of the hostile corpus."""
    words = [w for _, first, second in injection._SCREENED for group in (first, second) for w in group or ()]
    for row in Corpus.load().rows:
        words += row["output"].split()[:12]
    return words


def _texts(rng: random.Random, pieces: list[str], count: int, longest: int = 12) -> list[str]:
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, longest))) for _ in range(count)]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    rng = random.Random(27)
    pieces = _BLANKS + _HIDDEN + _LOOKALIKES + _OTHERS + _WORDS
    return _texts(rng, pieces, 20_000) + _texts(rng, pieces + _rule_words(), 5_000, 40)


# --- the tests ----------------------------------------------------------------------------------


def test_the_whitespace_list_is_every_whitespace_character_but_the_space() -> None:
    everything = (chr(c) for c in range(sys.maxunicode + 1))
    assert "".join(c for c in everything if c.isspace() and c != " ") == untrusted._WHITESPACE_BUT_SPACE


@pytest.mark.parametrize(
    ("now", "before"),
    [(fold, _fold_before), (strip_hidden, _strip_hidden_before), (datamark, _datamark_before)],
    ids=["fold", "strip_hidden", "datamark"],
)
def test_untrusted_text_is_treated_as_before(
    now: Callable[[str], str], before: Callable[[str], str], texts: list[str]
) -> None:
    assert [t for t in texts if now(t) != before(t)] == []


def test_the_view_the_rules_read_is_as_before(texts: list[str]) -> None:
    assert [t for t in texts if normalise(t) != _normalise_before(t)] == []


def test_the_rules_find_what_they_found_before(texts: list[str]) -> None:
    rng = random.Random(2027)
    words = _rule_words() + _BLANKS[:6] + [".", ",", "!", '"', "{", "}", "<", ">", "|", "#", "[", "]"]
    texts = texts[::4] + _texts(rng, words, 6_000, 30)
    changed = [t for t in texts if detect(t) != _detect_before(t)]
    assert changed == []
    assert sum(bool(_detect_before(t)) for t in texts) > 1_000  # the texts do reach the rules


def test_every_rule_match_holds_one_of_its_screening_strings() -> None:
    # The screen may only skip searches that would find nothing: checked on every hostile output's view.
    for row in Corpus.load().rows:
        view = normalise(row["output"])
        for rule, words, phrases in injection._SCREENED:
            match = rule.pattern.search(view)
            if match is not None:
                assert words is None or any(w in view for w in words), (rule.name, row["id"])
                assert phrases is None or any(p in view for p in phrases), (rule.name, row["id"])


def _mutations(rng: random.Random, text: str) -> list[str]:
    numbers = ["0.9", "1", "1.0", "-0", "-0.0", "1e400", "-1e400", "1E-2", "0.90000000000000000001", "9" * 30]
    numbers += ["NaN", "Infinity", '"0.9"', "true", "null", "[]", "{}", "5", "5.0", "3e0"]
    out = [text]
    for _ in range(12):
        t = re.sub(r"(?<=: )-?[0-9][0-9.eE+-]*", lambda _: rng.choice(numbers), text, count=rng.randint(1, 3))
        out.append(t)
    out.append(text[:-1] + ', "confidence": 0.5}')
    out.append(text.replace('"', '"\\u0041', 1))
    out.append(text.replace("judged", "\\ud800 judged").replace("overall", "\ud800 overall"))
    out.append(text.replace("A", "\\u0041"))
    out.append("```json\n" + text + "\n```")
    out.append(text[: rng.randint(0, len(text))])
    out.append(text.replace(",", ",,", 1))
    out.append(text.replace("}", "} ", 2) + "\n")
    return out


def _outcome(parse: Callable[[str, type[Reply]], Reply], text: str, model: type[Reply]) -> tuple[str, str]:
    try:
        reply: BaseModel = parse(text, model)
    except InvalidReply as exc:
        return "invalid", str(exc)
    return type(reply).__name__, reply.model_dump_json(by_alias=True)


def test_replies_are_parsed_as_before() -> None:
    rng = random.Random(7)
    replies: list[tuple[type[Reply], str]] = [
        (ToneStyleReply, tone_reply()),
        (ToneStyleReply, tone_reply("B", 0.55)),
        (HeadToHeadReply, h2h_reply()),
        (PairwiseReply, pairwise_reply()),
        (TieBreakReply, tiebreak_reply(weights=DEFAULT_TIEBREAK_WEIGHTS)),
    ]
    checked = 0
    for model, text in replies:
        for variant in _mutations(rng, text):
            assert _outcome(parse_reply, variant, model) == _outcome(_parse_before, variant, model), variant
            checked += 1
    assert checked > 100


def test_templates_are_filled_as_before() -> None:
    rng = random.Random(3)
    fills = ["", "x", "[OUTPUT_B]", "{{context}}", "\\1", "\\g<0>", "$1", "&amp;", "a\nb", "[CRITERIA] [EXAMPLES]"]
    for template, keys in (
        (prompt_fill.TONE_STYLE_TEMPLATE, ("[STYLE_GUIDE]", "[AUDIENCE_DESCRIPTION]", "[OUTPUT_A]", "[OUTPUT_B]")),
        (prompt_fill.TIEBREAK_TEMPLATE, ("[ORIGINAL_PROMPT]", "[OUTPUT_A]", "[OUTPUT_B]", "[CRITERIA]")),
        (prompt_fill.PAIRWISE_TEMPLATE, (prompt_fill.PW_TASK, prompt_fill.PW_RESPONSE_A, prompt_fill.PW_EACH_LIST)),
    ):
        for _ in range(50):
            replacements = {k: rng.choice(fills) + rng.choice(fills) for k in keys}
            assert prompt_fill._substitute(template, replacements) == _substitute_before(template, replacements)
