"""Signed control updates: the canonical form, signatures that fail for any change, and a worker that
applies only what was signed with its key once one is configured."""

from __future__ import annotations

import logging

import pytest

from pairjudge.agents.policy import Policy
from pairjudge.schemas import ControlUpdate
from pairjudge.streams.config.settings import ControlSettings, Settings
from pairjudge.streams.control.live import PolicyHolder, apply_record
from pairjudge.streams.control.signing import (
    KEY_ID_HEADER,
    SIGNATURE_HEADER,
    ControlSigner,
    canonical,
    signer_from_settings,
    with_signature,
)
from pairjudge.streams.kafka.codecs import encode

KEY = b"0123456789abcdef-test-signing-key"
TOPIC = "pairjudge.control"


def _signer(key: bytes = KEY, key_id: str = "ops") -> ControlSigner:
    return ControlSigner(key_id, key)


def _update(value: float = 0.0, by: str = "mallory") -> tuple[bytes, bytes]:
    update = ControlUpdate(key="primary_confidence_threshold", value=value, updated_by=by)
    return b"primary_confidence_threshold", encode(update)


def test_the_canonical_form_tells_every_field_apart() -> None:
    forms = {
        canonical("ops", TOPIC, b"k", b"v"),
        canonical("ops", TOPIC, b"k", None),  # a tombstone
        canonical("ops", TOPIC, b"k", b""),  # an empty value is not a tombstone
        canonical("ops", TOPIC, b"kv", b""),  # no shifting bytes between fields
        canonical("ops", TOPIC + "x", b"k", b"v"),
        canonical("ops2", TOPIC, b"k", b"v"),
        canonical("ops", TOPIC, None, b"v"),
    }
    assert len(forms) == 7


def test_a_signature_verifies_and_fails_for_any_change() -> None:
    signer = _signer()
    key, value = _update()
    headers = signer.headers(TOPIC, key, value)
    assert signer.verify(TOPIC, key, value, headers).ok
    assert signer.verify(TOPIC, key, value, headers).key_id == "ops"
    _, other_value = _update(0.5)
    assert signer.verify(TOPIC, key, other_value, headers).problem == "bad signature"
    assert signer.verify(TOPIC, b"audit_share", value, headers).problem == "bad signature"
    assert signer.verify("staging.control", key, value, headers).problem == "bad signature"
    assert signer.verify(TOPIC, key, None, headers).problem == "bad signature"
    assert _signer(b"another-key-of-enough-length").verify(TOPIC, key, value, headers).problem == "bad signature"
    assert _signer(key_id="other").verify(TOPIC, key, value, headers).problem == "unknown key id"
    assert signer.verify(TOPIC, key, value, []).problem == "unsigned"
    assert signer.verify(TOPIC, key, value, None).problem == "unsigned"
    broken = [(KEY_ID_HEADER, b"ops"), (SIGNATURE_HEADER, b"not hex")]
    assert signer.verify(TOPIC, key, value, broken).problem == "malformed signature"
    # Two signature headers: refused, not one picked.
    assert not signer.verify(TOPIC, key, value, [*headers, (SIGNATURE_HEADER, b"00")]).ok


def test_tombstones_are_signed_too() -> None:
    signer = _signer()
    headers = signer.headers(TOPIC, b"tiebreak_enabled", None)
    assert signer.verify(TOPIC, b"tiebreak_enabled", None, headers).ok
    assert not signer.verify(TOPIC, b"primary_confidence_threshold", None, headers).ok


def test_the_key_never_shows_and_settings_build_the_signer(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    assert KEY.decode() not in repr(_signer())
    assert signer_from_settings(ControlSettings()) is None
    signer = signer_from_settings(ControlSettings(signing_key=KEY.decode(), key_id="ops-1"))
    assert signer is not None
    assert (signer.key_id, signer.key) == ("ops-1", KEY)
    assert with_signature(None, TOPIC, b"k", b"v", [("traceparent", b"x")]) == [("traceparent", b"x")]
    assert len(with_signature(signer, TOPIC, b"k", b"v", [("traceparent", b"x")])) == 3


def test_a_short_key_or_an_unreadable_key_file_fails_at_start_up(tmp_path: object) -> None:
    with pytest.raises(ValueError, match="PAIRJUDGE_CONTROL__SIGNING_KEY") as info:
        Settings(control={"signing_key": "short"})
    assert "short" not in str(info.value).replace("too short", "")
    with pytest.raises(ValueError, match="PAIRJUDGE_CONTROL__SIGNING_KEY_FILE"):
        Settings(control={"signing_key_file": "/nonexistent/control-key"})


def test_a_worker_with_a_key_applies_only_signed_updates(caplog: pytest.LogCaptureFixture) -> None:
    signer = _signer()
    holder = PolicyHolder(Policy(primary_confidence_threshold=0.7))
    key, forged = _update(0.0, by="alice (really mallory)")
    with caplog.at_level(logging.WARNING, logger="pairjudge.streams.control.live"):
        apply_record(holder, key, forged, headers=[], verifier=signer, topic=TOPIC)
        # Signed with another key: the same.
        other = _signer(b"mallory-made-this-key-herself").headers(TOPIC, key, forged)
        apply_record(holder, key, forged, headers=other, verifier=signer, topic=TOPIC)
        # A tombstone that is not signed does not clear anything either.
    assert holder.current.primary_confidence_threshold == 0.7
    assert "unsigned" in caplog.text
    assert "bad signature" in caplog.text
    assert KEY.decode() not in caplog.text

    key, good = _update(0.8, by="alice")
    apply_record(holder, key, good, headers=signer.headers(TOPIC, key, good), verifier=signer, topic=TOPIC)
    assert holder.current.primary_confidence_threshold == 0.8
    # updated_by names the verified key first; the free text is only what the signer wrote.
    assert holder.overrides["primary_confidence_threshold"].updated_by == "key ops: alice"

    apply_record(holder, key, None, headers=[], verifier=signer, topic=TOPIC)
    assert holder.current.primary_confidence_threshold == 0.8  # unsigned tombstone ignored
    apply_record(holder, key, None, headers=signer.headers(TOPIC, key, None), verifier=signer, topic=TOPIC)
    assert holder.current.primary_confidence_threshold == 0.7


def test_without_a_key_a_worker_applies_unsigned_updates_as_before() -> None:
    holder = PolicyHolder(Policy(primary_confidence_threshold=0.7))
    key, value = _update(0.9, by="bob")
    apply_record(holder, key, value)
    assert holder.current.primary_confidence_threshold == 0.9
    assert holder.overrides["primary_confidence_threshold"].updated_by == "bob"
