"""Signed control updates: HMAC-SHA256 over each control record, carried in its Kafka headers.

A Kafka record carries no authenticated principal: whoever may write ``pairjudge.control`` could set
``primary_confidence_threshold=0`` on every worker and write any ``updated_by``. With a signing key
(``PAIRJUDGE_CONTROL__SIGNING_KEY`` or ``_FILE``), ``pairjudge control set/clear/pause/resume``, the review
UI and the kappa guard sign what they write, and a worker ignores (and logs) any update that is
unsigned, signed with another key id, or whose signature does not match.

The signature covers a canonical serialisation of the record, not just its JSON: a version tag, the key
id, the topic, the record key and the record value (or a tombstone marker), each length-prefixed, so no
two different records share one, and a signature for one topic or key cannot be moved to another. It is
sent in two headers, ``pairjudge-key-id`` and ``pairjudge-signature`` (hex), which also works for
tombstones (``control clear``), whose value is empty.

HMAC is symmetric: every holder of the key (operators' tools, workers) can sign. It keeps out writers
that lack the key (another service's principal, a too-broad ACL); ACLs remain the first line. A signed
record can be re-sent by anyone who may write the topic (there is no replay protection, since the
compacted topic keeps only the latest record per key to compare against).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from pairjudge.streams.config.settings import ControlSettings

__all__ = ["KEY_ID_HEADER", "SIGNATURE_HEADER", "ControlSigner", "Verification", "canonical", "signer_from_settings"]

SIGNATURE_HEADER: Final = "pairjudge-signature"
KEY_ID_HEADER: Final = "pairjudge-key-id"
_VERSION: Final = b"pairjudge-control-signature-v1"
_TOMBSTONE: Final = b"\x00tombstone"


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def canonical(key_id: str, topic: str, key: bytes | None, value: bytes | None) -> bytes:
    """The bytes that are signed: every part length-prefixed, a tombstone told apart from an empty value."""
    parts = [_VERSION, key_id.encode(), topic.encode(), key or b""]
    body = b"".join(_field(p) for p in parts)
    return body + (_field(_TOMBSTONE) if value is None else b"\x01" + _field(value))


@dataclass(frozen=True, slots=True)
class Verification:
    ok: bool
    #: The key id the record claims (present even when the signature fails, for the log).
    key_id: str | None
    #: Why it failed: "unsigned", "unknown key id", "bad signature", "malformed signature".
    problem: str = ""


@dataclass(frozen=True, slots=True)
class ControlSigner:
    """Signs and verifies control records with one key (never shown in its repr)."""

    key_id: str
    key: bytes = field(repr=False)

    def signature(self, topic: str, key: bytes | None, value: bytes | None) -> str:
        return hmac.new(self.key, canonical(self.key_id, topic, key, value), hashlib.sha256).hexdigest()

    def headers(self, topic: str, key: bytes | None, value: bytes | None) -> list[tuple[str, bytes]]:
        """The two headers to send with this record."""
        return [
            (KEY_ID_HEADER, self.key_id.encode()),
            (SIGNATURE_HEADER, self.signature(topic, key, value).encode()),
        ]

    def verify(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes]] | None
    ) -> Verification:
        found = _headers(headers or ())
        claimed, signature = found.get(KEY_ID_HEADER), found.get(SIGNATURE_HEADER)
        if claimed is None or signature is None:
            return Verification(False, claimed, "unsigned")
        if claimed != self.key_id:
            return Verification(False, claimed, "unknown key id")
        try:
            given = bytes.fromhex(signature)
        except ValueError:
            return Verification(False, claimed, "malformed signature")
        expected = hmac.new(self.key, canonical(claimed, topic, key, value), hashlib.sha256).digest()
        if not hmac.compare_digest(given, expected):
            return Verification(False, claimed, "bad signature")
        return Verification(True, claimed)


def _headers(headers: Iterable[tuple[str, bytes]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, raw in headers:
        if name in (KEY_ID_HEADER, SIGNATURE_HEADER):
            if name in found:  # two of one header: refuse rather than choose
                return {}
            found[name] = bytes(raw).decode("utf-8", "replace")[:256]
    return found


def signer_from_settings(control: ControlSettings) -> ControlSigner | None:
    """The signer for the configured key, or None when no key is configured."""
    key = control.resolved_signing_key()
    if key is None:
        return None
    return ControlSigner(control.key_id, key.get_secret_value().encode())


def with_signature(
    signer: ControlSigner | None,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes]],
) -> list[tuple[str, bytes]]:
    """``headers`` plus this record's signature headers (unchanged without a signer)."""
    if signer is None:
        return list(headers)
    return [*headers, *signer.headers(topic, key, value)]
