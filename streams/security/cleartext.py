"""Secrets never travel in clear text off the host: the rule, in one place.

A secret (a judge's API key, an alert webhook URL, OTLP export headers) may go over plain ``http://``
only to a loopback address (``127.0.0.0/8``, ``::1``, ``localhost``), where no network carries it, or
when a setting named for exactly that says so. Anything else needs ``https://``.

The rule is checked twice: at start-up, on the settings (``streams.config.settings``), so a misconfigured worker
stops with a message naming the variable and the host, and again where the secret is put on a request
(``streams.judges.http``, ``streams.telemetry.alerts``, ``streams.telemetry.tracing``), so no other path (a ``base_url``
built elsewhere, a redirect) can carry it off. Messages name hosts, never the secret or a URL's path.
"""

from __future__ import annotations

import ipaddress
import urllib.parse


class CleartextSecretError(ValueError):
    """A secret would go over plain HTTP to a host off this machine."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine's loopback.

    ``localhost`` (and names under ``.localhost``, RFC 6761) counts, as do ``127.0.0.0/8``, ``::1`` and an
    IPv4-mapped loopback address (``::ffff:127.0.0.1``). Other names do not, even if they happen to
    resolve to a loopback address: what a name resolves to can change.
    """
    name = host.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if not name:
        return False
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])  # a zone id (fe80::1%lo) is not part of it
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def cleartext_host(url: str) -> str | None:
    """The host ``url`` would send a secret to in clear text off this machine; None when it would not.

    None for ``https://`` (and any scheme other than ``http``) and for ``http://`` to a loopback host.
    A URL without a host (unparseable, relative) is reported as ``"?"``: it cannot be shown to be safe.
    """
    try:
        parts = urllib.parse.urlsplit(url.strip())
        host = parts.hostname
    except ValueError:
        return "?"
    if parts.scheme.lower() != "http":
        return None
    if not host:
        return "?"
    return None if is_loopback(host) else host


def check_cleartext(url: str, *, allowed: bool, what: str, setting: str, allow_setting: str) -> None:
    """Raise ``CleartextSecretError`` when ``what`` would go over plain HTTP off this machine.

    ``setting`` names where the URL comes from, ``allow_setting`` the switch that allows it anyway. The
    message names both and the host, never the secret or the rest of the URL.
    """
    host = cleartext_host(url)
    if host is None or allowed:
        return
    raise CleartextSecretError(
        f"{setting}: refusing to send {what} over plain http:// to {host}, which is not a loopback address; "
        f"use https://, or set {allow_setting}=true to allow it"
    )
