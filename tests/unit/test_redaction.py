"""The redaction hook: built-in detectors (and what they must leave alone), custom patterns, the hook,
and how dead letters and review requests are redacted and marked."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from pydantic import ValidationError

from pairjudge.agents.redaction import BUILTIN_ORDER, Redactor, builtin_detectors, custom_detector, iban_ok, luhn_ok
from pairjudge.schemas import DeadLetter, ReviewRequest, Task
from pairjudge.schemas.events import OrderingResult
from pairjudge.streams.config.settings import RedactionSettings, Settings
from pairjudge.streams.kafka.dead_letters import build_dead_letter
from pairjudge.streams.security.redaction_hook import HOOK_FAILED, EventRedactor, build_redactor, load_hook
from tests.unit.factories import FIRST_ID, SECOND_ID, make_pair

ALL = Redactor(builtin_detectors(list(BUILTIN_ORDER)))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("write to jane.doe+news@example.co.uk.", "write to [redacted:email]."),
        ("<ops@mail.acme-corp.io>", "<[redacted:email]>"),
        ("call +44 20 7946 0958 today", "call [redacted:phone] today"),
        ("call +4915112345678", "call [redacted:phone]"),
        ("(555) 123-4567", "[redacted:phone]"),
        ("tel 555.123.4567, fax", "tel [redacted:phone], fax"),
        ("ring 020 7946 0958", "ring [redacted:phone]"),
        ("card 4111 1111 1111 1111", "card [redacted:credit_card]"),
        ("card 5500-0000-0000-0004.", "card [redacted:credit_card]."),
        ("amex 378282246310005", "amex [redacted:credit_card]"),
        ("from 192.168.1.20, then", "from [redacted:ipv4], then"),
        ("host 8.8.8.8", "host [redacted:ipv4]"),
        ("IBAN DE89 3704 0044 0532 0130 00 please", "IBAN [redacted:iban] please"),
        ("GB82WEST12345698765432", "[redacted:iban]"),
    ],
)
def test_builtin_detectors_redact(text: str, expected: str) -> None:
    assert ALL.redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "order ORD-2024-000123 shipped",
        "order #123456789",
        "ticket 12-345-678",
        "on 2024-01-15 at 10:30",
        "15/01/2024",
        "2024-01-15T10:30:00Z",
        "version 1.2.3",
        "v2.10.4.1",
        "release 10.0.19041.1",
        "1.2.3.4.5",
        "answer 42",
        "pin 1234",
        "ext 555-1234",
        "pi is 3.14159265358979",
        "epoch ms 1700000000000",
        "zip 90210",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "a budget of 100 000 000 euros",
        "4111 1111 1111 1112",  # card-like, fails Luhn
        "4111111111111112",
        "1234 5678 9012 3456",  # fails Luhn
        "DE00 3704 0044 0532 0130 00",  # IBAN-like, fails mod 97
        "at sign @ alone, user@localhost",
        "Cheers, the team",
    ],
)
def test_builtin_detectors_leave_lookalikes_alone(text: str) -> None:
    assert ALL.redact(text) == text


def test_luhn_and_iban_checks() -> None:
    assert luhn_ok("4111111111111111")
    assert luhn_ok("79927398713")
    assert not luhn_ok("79927398710")
    assert not luhn_ok("4111-1111")
    assert iban_ok("DE89 3704 0044 0532 0130 00")
    assert iban_ok("GB82WEST12345698765432")
    assert not iban_ok("GB82WEST12345698765433")
    assert not iban_ok("DE89")


def test_only_the_named_detectors_run_and_custom_ones_add() -> None:
    redactor = Redactor([*builtin_detectors(["email"]), custom_detector("ticket", r"TCK-\d{6}")])
    assert redactor.redact("a@b.io, 555-123-4567, TCK-123456") == "[redacted:email], 555-123-4567, [redacted:ticket]"
    with pytest.raises(ValueError, match="unknown redaction pattern"):
        builtin_detectors(["email", "passport"])
    with pytest.raises(ValueError, match="not a valid regex"):
        custom_detector("bad", "(")
    with pytest.raises(ValueError, match="name"):
        custom_detector("Bad Name", "x")


def shout(text: str) -> str:
    return text.replace("Acme", "[redacted:customer]")


def broken(text: str) -> str:
    raise RuntimeError(f"cannot handle {text}")


def not_text(text: str) -> object:
    return 42


def test_the_hook_runs_after_the_patterns_and_a_failing_one_withholds_the_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hook = load_hook("tests.unit.test_redaction:shout")
    redactor = EventRedactor(Redactor(builtin_detectors(["email"]), hook))
    assert redactor.text("Acme: ops@acme.io") == "[redacted:customer]: [redacted:email]"
    for name in ("broken", "not_text"):
        failing = EventRedactor(Redactor((), load_hook(f"tests.unit.test_redaction:{name}")))
        assert failing.text("secret ops@acme.io") == HOOK_FAILED
        assert failing.failures == 1
    assert "ops@acme.io" not in caplog.text
    with pytest.raises(ValueError, match="PAIRJUDGE_REDACTION__HOOK"):
        load_hook("tests.unit.test_redaction:nowhere")
    with pytest.raises(ValueError, match="PAIRJUDGE_REDACTION__HOOK"):
        load_hook("no_such_module_here:f")


def test_settings_off_by_default_and_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert build_redactor(Settings().redaction) is None
    monkeypatch.setenv("PAIRJUDGE_REDACTION__ENABLED", "true")
    monkeypatch.setenv("PAIRJUDGE_REDACTION__PATTERNS", "email, credit_card")
    monkeypatch.setenv("PAIRJUDGE_REDACTION__CUSTOM", '{"ticket": "TCK-[0-9]{6}"}')
    monkeypatch.setenv("PAIRJUDGE_REDACTION__HOOK", "tests.unit.test_redaction:shout")
    redactor = build_redactor(Settings().redaction)
    assert redactor is not None
    assert redactor.text("Acme a@b.io 4111111111111111 TCK-000001 192.168.0.1") == (
        "[redacted:customer] [redacted:email] [redacted:credit_card] [redacted:ticket] 192.168.0.1"
    )
    with pytest.raises(ValidationError, match="PAIRJUDGE_REDACTION__PATTERNS"):
        RedactionSettings(enabled=True, patterns="email,passport")
    with pytest.raises(ValidationError, match="CUSTOM"):
        RedactionSettings(enabled=True, custom={"x": "("})
    with pytest.raises(ValidationError):
        RedactionSettings(enabled=True, hook="not a hook")


# --- dead letters ---------------------------------------------------------------------------------


def letter_of(raw: bytes, redactor: EventRedactor | None, max_bytes: int = 900_000) -> DeadLetter:
    built = build_dead_letter(
        stage="decode", reason="malformed_json", detail=f"bad event {raw[:40]!r}", raw=raw, redactor=redactor,
        max_bytes=max_bytes,
    )  # fmt: skip
    return DeadLetter.model_validate_json(built.value)


EMAIL_EVENT = b'{"pair_id": "p-7", "task": {"prompt": "Reply to jane@example.com"}, "candidates": 3'


def test_a_dead_letter_is_redacted_and_says_so() -> None:
    redactor = build_redactor(RedactionSettings(enabled=True))
    letter = letter_of(EMAIL_EVENT, redactor)
    assert letter.original == EMAIL_EVENT.replace(b"jane@example.com", b"[redacted:email]")
    assert letter.original_redacted
    assert not letter.original_truncated
    assert "jane@example.com" not in letter.error
    assert "jane@" not in letter.model_dump_json()  # not in the base64 either
    # Size and digest still describe the event as it was received; the pair id is still found.
    assert letter.original_size == len(EMAIL_EVENT)
    assert letter.original_sha256 == hashlib.sha256(EMAIL_EVENT).hexdigest()
    assert letter.pair_id == "p-7"


def test_without_redaction_a_dead_letter_is_the_exact_original() -> None:
    letter = letter_of(EMAIL_EVENT, None)
    assert (letter.original, letter.original_redacted) == (EMAIL_EVENT, False)
    encoded = json.loads(build_dead_letter(stage="decode", reason="r", detail="d", raw=EMAIL_EVENT).value)
    assert base64.b64decode(encoded["original"]) == EMAIL_EVENT
    assert encoded["original_redacted"] is False


def test_bytes_that_are_not_utf8_survive_around_a_redaction() -> None:
    raw = b"\xff\xfe mail a@b.io \x80"
    letter = letter_of(raw, build_redactor(RedactionSettings(enabled=True)))
    assert letter.original == b"\xff\xfe mail [redacted:email] \x80"


def test_a_large_redacted_dead_letter_still_fits() -> None:
    raw = b'{"pair_id": "p-big", "x": "' + b"a@b.io " * 20_000 + b'"'
    letter = letter_of(raw, build_redactor(RedactionSettings(enabled=True)), max_bytes=16_384)
    assert letter.original_truncated
    assert letter.original_redacted
    assert b"a@b.io" not in letter.original
    assert letter.original_size == len(raw)


# --- review requests --------------------------------------------------------------------------------


def test_a_review_request_is_redacted_in_every_text_and_marked() -> None:
    pair = make_pair(
        pair_id="p-9",
        task=Task(prompt="Answer jane@example.com", context="Her card: 4111 1111 1111 1111"),
        outputs=("Hi Jane, call 555-123-4567.", "Dear customer, write to help@acme.io."),
    )
    ordering = OrderingResult(
        order_shown="AB",
        swapped=False,
        shown_as_a=FIRST_ID,
        shown_as_b=SECOND_ID,
        valid=True,
        justification="A quotes 555-123-4567",
        key_differentiators=("mentions help@acme.io",),
    )
    request = ReviewRequest(
        pair_id="p-9",
        reason="audit_sample",
        stage="primary",
        pair=pair,
        orderings=(ordering,),
        last_justification="B gives help@acme.io",
        audit=True,
    )
    redactor = build_redactor(RedactionSettings(enabled=True))
    assert redactor is not None
    out = redactor.review_request(request)
    dumped = out.model_dump_json()
    for secret in ("jane@example.com", "4111 1111 1111 1111", "555-123-4567", "help@acme.io"):
        assert secret not in dumped
    assert out.redacted
    assert out.pair.task.prompt == "Answer [redacted:email]"
    assert out.pair.candidates[0].output == "Hi Jane, call [redacted:phone]."
    assert out.orderings[0].key_differentiators == ("mentions [redacted:email]",)
    # What identifies the pair is untouched, and it is still a valid event.
    assert (out.pair_id, out.pair.candidates[0].candidate_id, out.reason) == ("p-9", FIRST_ID, "audit_sample")
    assert ReviewRequest.model_validate_json(dumped) == out
    assert not request.redacted
