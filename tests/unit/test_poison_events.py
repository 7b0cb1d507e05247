"""Poison events: every malformed input becomes ``InputRejected`` with a clear reason, never a crash.

Deep nesting and huge numbers used to escape ``json.loads`` as ``RecursionError`` and ``ValueError``;
``schema_version`` was coerced or ignored; an output of zero-width characters was judged. These tests go
through the real codec (``streams.kafka.codecs.decode``), the real ``check_pair`` and the real stage handler.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

from pairjudge.agents.errors import InputRejected
from pairjudge.agents.offline import OfflineJudge
from pairjudge.agents.pair_checks import check_pair
from pairjudge.agents.policy import Policy
from pairjudge.agents.settle import settle
from pairjudge.schemas import SCHEMA_VERSION, CandidatePair, DeadLetter, PairVerdict, TieBreakRequest
from pairjudge.schemas._base import SUPPORTED_SCHEMA_VERSIONS
from pairjudge.streams.app import create_app
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.codecs import MAX_DEPTH, MAX_NUMBER_CHARS, decode, nesting_depth, parse_object
from pairjudge.streams.kafka.dead_letters import DEFAULT_MAX_LETTER_BYTES, guess_pair_id
from pairjudge.streams.kafka.producer import key_of
from pairjudge.streams.worker.pipeline import Origin, Pipeline
from tests.unit.factories import make_pair

MAX_EVENT = 256_000  # the worker's default max_event_bytes


def _good() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(make_pair().model_dump_json())
    return data


def _event(data: dict[str, Any]) -> bytes:
    return json.dumps(data).encode()


def _rejected(raw: bytes | None, max_bytes: int = MAX_EVENT) -> InputRejected:
    with pytest.raises(InputRejected) as info:
        decode(CandidatePair, raw, max_bytes=max_bytes)
    return info.value


def _nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


def _deep_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


# --- nesting ----------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize("shape", ["arrays", "objects", "unclosed"])
def test_deep_nesting_is_too_deep_not_a_recursion_error(depth: int, shape: str) -> None:
    body = {"arrays": _nested(depth), "objects": _deep_object(depth), "unclosed": "[" * depth}[shape]
    raw = f'{{"pair_id": "p-deep", "x": {body}}}'.encode()
    error = _rejected(raw, max_bytes=len(raw))
    assert error.reason == "too_deep"
    assert f"limit is {MAX_DEPTH}" in error.detail


def test_a_2kb_event_nested_1000_deep_crashes_plain_json() -> None:
    # The bug being guarded against: without the depth scan, this is what the agent would meet.
    with pytest.raises(RecursionError):
        json.loads(_nested(1_000))


def test_depth_limit_is_inclusive() -> None:
    assert parse_object(f'{{"a": {_nested(MAX_DEPTH - 1)}}}'.encode(), max_bytes=MAX_EVENT)
    with pytest.raises(InputRejected) as info:
        parse_object(f'{{"a": {_nested(MAX_DEPTH)}}}'.encode(), max_bytes=MAX_EVENT)
    assert info.value.reason == "too_deep"


def test_brackets_inside_strings_do_not_count() -> None:
    data = _good()
    data["task"]["prompt"] = "[" * 5_000 + "{" * 5_000
    # An output ending in a backslash: its closing quote is real, the brackets after it are in a string.
    data["candidates"][0]["output"] = 'C:\\temp\\ and a quote " and \\" and [[[' + "\\"
    data["candidates"][1]["output"] = '\\"' + "[" * 3_000 + '\\"'
    raw = _event(data)
    assert decode(CandidatePair, raw, max_bytes=MAX_EVENT).task.prompt == data["task"]["prompt"]
    assert nesting_depth(raw) == 4  # pair > candidates > candidate > source


def _random_json(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.3:
        # Strings full of what a naive scan would miscount: brackets, quotes, backslashes.
        return "".join(rng.choice('[]{}"\\ax\n\u00e9\u200b') for _ in range(rng.randrange(12)))
    if rng.random() < 0.5:
        return [_random_json(rng, depth - 1) for _ in range(rng.randrange(1, 4))]
    return {_random_json(rng, 0): _random_json(rng, depth - 1) for _ in range(rng.randrange(1, 4))}


def _true_depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_true_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_true_depth(v) for v in value.values()), default=0)
    return 0


def test_nesting_depth_matches_the_parsed_depth_on_random_documents() -> None:
    rng = random.Random(20240601)
    for _ in range(3_000):
        value = _random_json(rng, rng.randrange(1, 12))
        raw = json.dumps(value, ensure_ascii=rng.random() < 0.5).encode()
        assert nesting_depth(raw) == _true_depth(value), raw


def test_an_unterminated_string_of_escaped_quotes_scans_in_linear_time() -> None:
    # With a mandatory closing quote every '"' would restart a scan to the end: 10^11 steps here.
    raw = b'{"a": "' + b'\\"[' * 300_000
    error = _rejected(raw, max_bytes=len(raw))
    assert error.reason == "malformed_json"


# --- numbers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "literal",
    [
        "9" * 5_000,  # over Python's 4,300-digit int limit: ValueError in json.loads
        "-" + "9" * 4_000,  # under it, still far past any contract
        "1" * (MAX_NUMBER_CHARS + 1),
        "1." + "0" * 5_000,
        "1e999",
        "-1E+400",
        "0." + "1" * 200 + "e5",
    ],
)
def test_huge_numbers_are_rejected(literal: str) -> None:
    data = _good()
    raw = _event(data)[:-1] + f', "tiebreak": {{"weights": [{literal}]}}}}'.encode()
    error = _rejected(raw)
    assert error.reason == "number_too_large"
    assert literal not in error.detail or len(literal) < 10


def test_number_length_limit_is_inclusive() -> None:
    assert parse_object(b'{"n": ' + b"1" * MAX_NUMBER_CHARS + b"}", max_bytes=MAX_EVENT)["n"] > 0
    assert parse_object(b'{"n": 1e308, "m": -1e-999}', max_bytes=MAX_EVENT) == {"n": 1e308, "m": -0.0}


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(constant: str) -> None:
    raw = f'{{"pair_id": "p-1", "x": {constant}}}'.encode()
    assert _rejected(raw).reason == "malformed_json"


# --- size, encoding, shape --------------------------------------------------------------------


@pytest.mark.parametrize("size", [750_000, 900_000, 1_000_000, 1_048_000])
@pytest.mark.parametrize("shape", ["valid_pair", "deep"])
def test_events_between_750kb_and_1mb_are_oversized(size: int, shape: str) -> None:
    if shape == "valid_pair":
        data = _good()
        data["candidates"][0]["output"] = "x"
        pad = size - len(_event(data)) + 1
        data["candidates"][0]["output"] = "x" * pad
        raw = _event(data)
    else:
        raw = b"[" * size
    assert len(raw) == size
    error = _rejected(raw)
    assert error.reason == "oversized_event"
    assert str(size) in error.detail


def test_a_1mb_deep_event_under_a_large_limit_is_too_deep() -> None:
    raw = b'{"pair_id": "p-1", "x": ' + _nested(500_000).encode() + b"}"
    assert _rejected(raw, max_bytes=len(raw)).reason == "too_deep"


@pytest.mark.parametrize(
    "raw",
    [b"\xff\xfe{}", b'{"pair_id": "caf\xc3"}', b'{"a": "\xed\xa0\x80"}', b"\xc0\xaf", b'{"a": 1}\x80'],
)
def test_invalid_utf8_is_not_utf8(raw: bytes) -> None:
    assert _rejected(raw).reason == "not_utf8"


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"pair"', b"42", b"null", b"true", b"[]", b"\xef\xbb\xbf{}", b"{,}"])
def test_json_that_is_not_an_object_is_malformed(raw: bytes) -> None:
    assert _rejected(raw).reason == "malformed_json"


@pytest.mark.parametrize("raw", [None, b""])
def test_no_value_is_an_empty_event(raw: bytes | None) -> None:
    assert _rejected(raw).reason == "empty_event"


def test_decode_never_raises_anything_but_input_rejected_on_mangled_events() -> None:
    rng = random.Random(7)
    base = _event(_good())
    noise = [b"[", b"{", b"]", b"}", b'"', b"\\", b"\xff", b"9" * 50, b"1e999", b"NaN", b"\x00", b"\xe2\x80\x8b"]
    rejected: list[InputRejected] = []
    for _ in range(2_000):
        raw = bytearray(base)
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(raw) + 1)
            if rng.random() < 0.5:
                raw[at:at] = rng.choice(noise) * rng.randrange(1, 200)
            else:
                del raw[at : at + rng.randrange(1, 40)]
        try:
            decode(CandidatePair, bytes(raw), max_bytes=MAX_EVENT)
        except InputRejected as exc:
            rejected.append(exc)
    assert len(rejected) > 1_000  # the mutations did break events
    assert all(exc.reason and len(exc.detail) < 2_000 for exc in rejected)


# --- schema versions --------------------------------------------------------------------------


@pytest.mark.parametrize("version", [99, -1, 4, 0, "2", "1", True, 1.0, 2.0, None, [1], {"v": 1}])
def test_unknown_or_malformed_schema_versions_are_unsupported(version: object) -> None:
    raw = _event({**_good(), "schema_version": version})
    error = _rejected(raw)
    assert error.reason == "unsupported_schema_version"
    supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
    assert f"accepts schema_version {supported}" in error.detail


def test_the_known_version_and_a_missing_one_are_accepted() -> None:
    assert SCHEMA_VERSION in SUPPORTED_SCHEMA_VERSIONS
    assert decode(CandidatePair, _event({**_good(), "schema_version": 1}), max_bytes=MAX_EVENT).schema_version == 1
    legacy = {k: v for k, v in _good().items() if k != "schema_version"}
    assert decode(CandidatePair, _event(legacy), max_bytes=MAX_EVENT).schema_version == 1


def test_the_version_is_the_reason_even_when_other_fields_differ() -> None:
    # A version-4 producer may add fields; "unknown_field" would hide the real cause.
    raw = _event({**_good(), "schema_version": 4, "field_of_v4": {"x": 1}})
    assert _rejected(raw).reason == "unsupported_schema_version"


def test_a_nested_event_with_an_unknown_version_is_unsupported() -> None:
    request = json.loads(
        TieBreakRequest.model_validate(
            {
                "pair_id": "p-1",
                "reason": "tie",
                "pair": _good(),
                "primary": [],
                "primary_judge": {"provider": "x", "model": "m", "prompt_template_hash": "h"},
            }
        ).model_dump_json()
    )
    request["pair"]["schema_version"] = 4
    with pytest.raises(InputRejected) as info:
        decode(TieBreakRequest, _event(request), max_bytes=MAX_EVENT)
    assert info.value.reason == "unsupported_schema_version"
    assert info.value.detail.startswith("pair.schema_version 4 ")


def test_a_huge_version_string_is_not_echoed() -> None:
    error = _rejected(_event({**_good(), "schema_version": "9" * 10_000}))
    assert error.reason == "unsupported_schema_version"
    assert len(error.detail) < 300


# --- empty and invisible outputs --------------------------------------------------------------

INVISIBLE = [
    "\u200b",  # zero-width space
    "\u200c",  # zero-width non-joiner
    "\u200d",  # zero-width joiner
    "\u2060",  # word joiner
    "\ufeff",  # byte-order mark / zero-width no-break space
    "\u00ad",  # soft hyphen
    "\u200e\u200f\u202a\u202c",  # bidi marks and embeddings
    "\u2061\u2062\u2063\u2064",  # invisible operators
    "\u034f",  # combining grapheme joiner
    "\ufe0f",  # variation selector 16
    "\u3164\u115f\uffa0",  # Hangul fillers
    "\U000e0041\U000e007f",  # tag characters
    "\u2800",  # blank Braille pattern
    "\u00a0\u3000\u2028\t\n",  # no-break and ideographic spaces, line separator, whitespace
]


@pytest.mark.parametrize("chars", INVISIBLE)
def test_an_output_of_only_invisible_characters_is_an_empty_output(chars: str) -> None:
    # Not an error any more: an empty answer is ordinary traffic, and it loses (agents.settle).
    pair = make_pair(outputs=("A real answer.", (chars + " ") * 50))
    check_pair(pair, Policy(), {})
    settled = settle(pair)
    assert settled is not None
    assert (settled.winner, settled.rule) == (pair.candidates[0].candidate_id, "empty_output")


@pytest.mark.parametrize("text", ["\u200bOK", "a\u200d", "\u2800x", "\ufeff.", "\U0001f600", "\u0301", "0"])
def test_visible_text_among_invisible_characters_is_judged(text: str) -> None:
    pair = make_pair(outputs=("A real answer.", text))
    check_pair(pair, Policy(), {})
    assert settle(pair) is None


def test_an_empty_output_decodes_as_a_valid_pair() -> None:
    data = _good()
    for empty in ("", "\u200b\u200c\u200d\u2060\ufeff"):
        data["candidates"][1]["output"] = empty
        pair = decode(CandidatePair, _event(data), max_bytes=MAX_EVENT)
        check_pair(pair, Policy(), {})
        settled = settle(pair)
        assert settled is not None
        assert settled.winner == data["candidates"][0]["candidate_id"]


# --- pair-id guesses and keys -----------------------------------------------------------------

POISON: dict[str, bytes] = {
    "deep_1000": b'{"pair_id": "p-deep", "x": ' + _nested(1_000).encode() + b"}",
    "deep_100k_unclosed": b'{"pair_id": "p-deep2", "x": ' + b"[" * 100_000,
    "huge_int": b'{"pair_id": "p-int", "n": ' + b"9" * 5_000 + b"}",
    "huge_float": b'{"pair_id": "p-float", "n": 1e999}',
    "deep_1mb": b'{"pair_id": "p-big", "x": ' + b"{" * 1_000_000,
    "not_utf8": b'{"pair_id": "p-bytes", "x": "\xff"}',
    "truncated": b'{"pair_id": "p-cut", "task": {"prom',
    "nan": b'{"pair_id": "p-nan", "x": NaN}',
}


@pytest.mark.parametrize("name", sorted(POISON))
def test_guess_pair_id_reads_the_id_of_poison_events_without_raising(name: str) -> None:
    raw = POISON[name]
    expected = json.loads(raw.split(b",")[0] + b"}")["pair_id"]
    assert guess_pair_id(raw) == expected
    # The producer's key is a claim about the pair: only an event that parses gets one.
    assert key_of(raw) is None


@pytest.mark.parametrize(
    "raw",
    [
        None,
        b"",
        _nested(100_000).encode(),
        b"\xff" * 100,
        b'{"pair_id": 12}',
        b'{"pair_id": "has spaces"}',
        b'{"pair_id": "' + b"p" * 129 + b'"}',
        b'{"pair_id": "a", "x": {"pair_id": "b"}, ' + b"[" * 100,  # two different ids: no guess
        b'{"x": "' + b"\\" * 1_000,
    ],
)
def test_guess_pair_id_gives_up_quietly(raw: bytes | None) -> None:
    assert guess_pair_id(raw) is None
    if raw is not None:
        assert key_of(raw) is None


def test_guess_pair_id_takes_the_top_level_id_of_a_parsable_event() -> None:
    raw = b'{"x": {"pair_id": "nested"}, "pair_id": "top"}'
    assert guess_pair_id(raw) == "top"
    assert key_of(raw) == b"top"
    # Parsed, with no usable id at the top: a nested one is not the event's id.
    assert guess_pair_id(b'{"pair_id": 12, "x": {"pair_id": "nested"}}') is None


def test_key_of_reads_large_valid_events_and_unsupported_versions() -> None:
    data = _good()
    data["candidates"][0]["output"] = "x" * 1_100_000
    assert key_of(_event(data)) == data["pair_id"].encode()
    assert key_of(_event({**_good(), "schema_version": 99})) == _good()["pair_id"].encode()


# --- the stage handler ------------------------------------------------------------------------


def _pipeline(tmp_path: Path) -> Pipeline:
    # Wired by the composition root, as the worker is: the handler is the worker's own.
    settings = Settings(worker={"data_dir": tmp_path})
    return create_app(settings, judge=OfflineJudge(), follow_control=False).pipeline


def _zero_width_pair() -> bytes:
    data = _good()
    data["pair_id"] = "p-invisible"
    data["candidates"][0]["output"] = "\u200b" * 40
    return _event(data)


async def test_the_stage_handler_settles_an_empty_output_with_a_verdict(tmp_path: Path) -> None:
    origin = Origin(topic="pairjudge.pairs", partition=0, offset=7, key=None)
    result = await asyncio.wait_for(_pipeline(tmp_path).on_pair(_zero_width_pair(), None, origin), timeout=30)
    # The verdict, and the decision record the audit and the scoreboard read (marked as settled by rule).
    assert sorted(o.kind for o in result.outgoing) == ["decisions", "verdicts"]
    [out] = [o for o in result.outgoing if o.kind == "verdicts"]
    verdict = PairVerdict.model_validate_json(out.value)
    assert (verdict.decided_by, verdict.orderings, verdict.confidence) == ("rule", (), 1.0)
    assert verdict.loser == _good()["candidates"][0]["candidate_id"]


STAGE_CASES: dict[str, tuple[bytes, str]] = {
    "deep_1000": (POISON["deep_1000"], "too_deep"),
    "huge_int": (POISON["huge_int"], "number_too_large"),
    "deep_1mb": (POISON["deep_1mb"], "oversized_event"),
    "big_1mb": (b'{"pair_id": "p-1mb", "x": "' + b"y" * 1_040_000 + b'"}', "oversized_event"),
    "version_99": (_event({**_good(), "pair_id": "p-v99", "schema_version": 99}), "unsupported_schema_version"),
}


@pytest.mark.parametrize("name", sorted(STAGE_CASES))
async def test_the_stage_handler_dead_letters_each_poison_event_within_bounds(name: str, tmp_path: Path) -> None:
    raw, reason = STAGE_CASES[name]
    origin = Origin(topic="pairjudge.pairs", partition=2, offset=41, key=b"k" * 10_000)
    result = await asyncio.wait_for(_pipeline(tmp_path).on_pair(raw, None, origin), timeout=30)
    [out] = result.outgoing
    assert out.kind == "deadletter"
    assert len(out.key) + len(out.value) <= DEFAULT_MAX_LETTER_BYTES
    letter = DeadLetter.model_validate_json(out.value)
    assert letter.reason == reason
    assert letter.original_size == len(raw)
    assert letter.original_truncated == (len(raw) > 600_000)
    assert raw.startswith(letter.original)
    assert (letter.topic, letter.partition, letter.offset) == ("pairjudge.pairs", 2, 41)
    assert letter.pair_id is not None
    assert out.key == letter.pair_id.encode()


def test_a_version_1_event_may_not_carry_version_2_fields() -> None:
    # A v1 producer cannot have meant a conversation or a risk level: the fields arrived with version 2.
    raw = _event({**_good(), "schema_version": 1, "risk_level": "high"})
    error = _rejected(raw)
    assert "schema_version 2" in error.detail
    assert decode(CandidatePair, _event({**_good(), "risk_level": "high"}), max_bytes=MAX_EVENT).risk == "high"
