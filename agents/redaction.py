"""Personal data out of free text: built-in detectors, custom patterns, and a hook. Pure logic.

``Redactor.redact`` replaces every match with ``[redacted:<name>]``. The built-in detectors aim at
few false positives, because a redacted dead letter or review request loses what it redacted:

* ``email``: ``local@domain.tld``.
* ``phone``: international numbers (``+`` and 8 to 15 digits, separators allowed), North American
  ``(555) 123-4567`` / ``555-123-4567`` / ``555.123.4567``, and national numbers with a trunk ``0`` and
  a separator (``020 7946 0958``): 9 to 15 digits. Bare digit runs, dates and short numbers are not phones.
* ``credit_card``: 13 to 19 digits in the groupings cards are printed in (4-4-4-4, 4-6-5, …, or none),
  starting with 2 to 6 (the card networks' ranges) and passing the Luhn check.
* ``ipv4``: four dotted octets of at most 255, not part of a longer dotted run (``1.2.3.4.5``) nor
  after a letter (``v1.2.3.4``). A bare four-part version number with every part at most 255 is
  indistinguishable from an address, and is redacted.
* ``iban``: two letters, two check digits and 11 to 30 letters or digits (spaces allowed), passing the
  ISO 7064 mod-97 check.

Custom detectors are any regexes, by name. The hook (a ``str -> str`` callable) runs last, on the text
the detectors left. This module loads nothing: the edge (``streams.security.redaction_hook``) imports the hook.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

#: A redaction hook: the text in, the text to publish out.
Hook = Callable[[str], str]

_NAME: Final = re.compile(r"^[a-z0-9_]{1,40}$")


def placeholder(name: str) -> str:
    """What a match of the detector ``name`` is replaced with."""
    return f"[redacted:{name}]"


def luhn_ok(digits: str) -> bool:
    """The Luhn (mod 10) check of a string of digits, as card numbers carry it."""
    if not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2 == 1:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def iban_ok(text: str) -> bool:
    """The ISO 13616 / ISO 7064 mod-97 check of an IBAN (spaces ignored)."""
    compact = text.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34 or not compact[:2].isalpha() or not compact[2:4].isdigit():
        return False
    if not compact.isalnum() or not compact.isascii():
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def _card_ok(match: str) -> bool:
    digits = _digits(match)
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_ok(digits)


def _phone_ok(match: str) -> bool:
    return 9 <= len(_digits(match)) <= 15


@dataclass(frozen=True, slots=True)
class Detector:
    """A named pattern; a match counts only if ``check`` (when given) accepts its text."""

    name: str
    pattern: re.Pattern[str]
    check: Callable[[str], bool] | None = None

    def sub(self, text: str) -> str:
        mark = placeholder(self.name)
        check = self.check

        def replace(match: re.Match[str]) -> str:
            found = match.group(0)
            return mark if check is None or check(found) else found

        return self.pattern.sub(replace, text)


_OCTET: Final = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"

BUILTIN: Final[Mapping[str, Detector]] = {
    "email": Detector(
        "email",
        re.compile(
            r"(?<![\w.%+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
            r"[A-Za-z]{2,63}(?![\w-])"
        ),
    ),
    "iban": Detector(
        "iban",
        re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])"),
        iban_ok,
    ),
    "credit_card": Detector(
        "credit_card",
        re.compile(r"(?<![\w.+-])(?:\d{4}([ -]?)\d{4}\1\d{4}\1\d{1,7}|\d{4}([ -]?)\d{6}\2\d{4,5})(?![\w-]|\.\d)"),
        _card_ok,
    ),
    "ipv4": Detector(
        "ipv4",
        re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.\d)"),
    ),
    "phone": Detector(
        "phone",
        re.compile(
            r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,6}(?![\w])"  # international
            # North American; then national with a trunk 0. Neither continues a run of digit groups.
            r"|(?<![\w.+-])(?<!\d[ .-])(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w]|[ .-]\d)"
            r"|(?<![\w.+-])(?<!\d[ .-])0\d{1,4}[ .-]\d{3,4}[ .-]?\d{3,4}(?![\w]|[ .-]\d)"
        ),
        _phone_ok,
    ),
}

#: The order detectors run in: the most specific first, so a card number is not taken for a phone.
BUILTIN_ORDER: Final = ("email", "iban", "credit_card", "ipv4", "phone")


def custom_detector(name: str, regex: str) -> Detector:
    """A detector for a custom regex; ``ValueError`` (naming it) for a bad name or regex."""
    if not _NAME.match(name):
        raise ValueError(f"custom redaction pattern name {name!r}: use 1-40 of a-z, 0-9 and _")
    try:
        return Detector(name, re.compile(regex))
    except re.error as exc:
        raise ValueError(f"custom redaction pattern {name!r} is not a valid regex: {exc}") from None


def builtin_detectors(names: Sequence[str]) -> tuple[Detector, ...]:
    """The built-in detectors named, in ``BUILTIN_ORDER``; ``ValueError`` for an unknown name."""
    unknown = [n for n in names if n not in BUILTIN]
    if unknown:
        raise ValueError(f"unknown redaction pattern(s) {unknown}; built in: {', '.join(BUILTIN_ORDER)}")
    return tuple(BUILTIN[n] for n in BUILTIN_ORDER if n in names)


class Redactor:
    """Applies ``detectors`` in order, then ``hook``. Safe to share; holds no state between calls."""

    def __init__(self, detectors: Sequence[Detector], hook: Hook | None = None) -> None:
        self.detectors = tuple(detectors)
        self.hook = hook

    def redact(self, text: str) -> str:
        for detector in self.detectors:
            text = detector.sub(text)
        if self.hook is not None:
            result = self.hook(text)
            if not isinstance(result, str):
                raise TypeError(f"the redaction hook returned {type(result).__name__}, not str")
            text = result
        return text
