"""The one URL cleaner behind cache keys and the one reading of provider token counts.

Two cleaners used to feed one cache key: the factory's dropped the brackets of an IPv6 literal, so
``http://[::1]:8080/v1`` and ``http://[::1:8080]/v1`` (another host, no port) cleaned to the same text
and two servers could share replies. Two ``_int_or_none`` helpers disagreed on negative counts.
"""

from __future__ import annotations

import json

import httpx
import pytest

from pairjudge.streams.config.settings import JudgeSettings
from pairjudge.streams.judges.cost import usage_count
from pairjudge.streams.judges.factory import cache_params
from pairjudge.streams.judges.wire import public_url


@pytest.mark.parametrize(
    ("base_url", "cleaned"),
    [
        ("http://[::1]:8080/v1", "http://[::1]:8080/v1"),
        ("http://[2001:db8::7]/v1/", "http://[2001:db8::7]/v1"),
        ("http://[::1:8080]/v1", "http://[::1:8080]/v1"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("https://judge.example:8443/v1", "https://judge.example:8443/v1"),
        # The scheme's own port says nothing more than its absence.
        ("https://judge.example:443/v1", "https://judge.example/v1"),
        ("http://judge.example/v1//", "http://judge.example/v1"),
        ("http://judge.example/", "http://judge.example"),
        ("http://judge.example", "http://judge.example"),
        ("https://user:s3cret@judge.example:8443/v1?api_key=abc#frag", "https://judge.example:8443/v1"),
        ("http://token@[::1]:9000/v1", "http://[::1]:9000/v1"),
        ("HTTP://Judge.Example/v1", "http://judge.example/v1"),
    ],
)
def test_public_url_keeps_who_answers_and_nothing_secret(base_url: str, cleaned: str) -> None:
    assert public_url(httpx.URL(base_url)) == cleaned


def test_ipv6_hosts_with_and_without_a_port_do_not_share_a_cache_key() -> None:
    with_port = cache_params(JudgeSettings(kind="openai", base_url="http://[::1]:8080/v1"))
    other_host = cache_params(JudgeSettings(kind="openai", base_url="http://[::1:8080]/v1"))
    assert with_port["endpoint"] == "http://[::1]:8080/v1"
    assert with_port != other_host


def test_the_cache_key_endpoint_ignores_credentials_and_a_trailing_slash() -> None:
    plain = cache_params(JudgeSettings(kind="openai", base_url="http://[::1]:8080/v1"))
    dressed = cache_params(JudgeSettings(kind="openai", base_url="http://key:s3cret@[::1]:8080/v1/?api_key=abc"))
    assert dressed == plain
    assert "s3cret" not in json.dumps(dressed)
    assert "abc" not in json.dumps(dressed)


@pytest.mark.parametrize(
    ("usage", "count"),
    [
        ({"prompt_tokens": 12}, 12),
        ({"prompt_tokens": 0}, 0),
        # Garbage is unreported, never a number to bill: a negative count would price a discount.
        ({"prompt_tokens": -3}, None),
        ({"prompt_tokens": True}, None),
        ({"prompt_tokens": 12.0}, None),
        ({"prompt_tokens": "12"}, None),
        ({"prompt_tokens": None}, None),
        ({}, None),
        (None, None),
        ([12], None),
    ],
)
def test_usage_counts_are_non_negative_integers_or_unreported(usage: object, count: int | None) -> None:
    assert usage_count(usage, "prompt_tokens") == count
