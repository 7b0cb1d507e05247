"""Bearer tokens for the read API, kept only as hashes in a file an operator owns.

A token is 32 random bytes (``pjt_`` + URL-safe base64), made by ``pairjudge review token new``; the file
(``PAIRJUDGE_REVIEW__API_TOKENS_FILE``) holds one line per token, ``sha256:<hex> <name> <role>[,<role>…]``,
and never the token itself. Because a token carries 256 bits of randomness, a plain SHA-256 is enough to keep
it (a slow password hash guards guessable secrets; this one is not guessable), and it is cheap enough to
check on every request. Every known hash is compared in constant time, so timing says nothing about which
ones exist.

Revoking is deleting the line: the file is stat'ed on each request and read again when it changed (its
modification time, size or inode), so no restart is needed. A line that cannot be read is skipped with a
warning that names its line number, never its content. Tokens are never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

TOKEN_PREFIX = "pjt_"  # noqa: S105 - a prefix that marks a token as pairjudge's (for secret scanners), not one
#: A role name: what a token may do. The read API needs ``read``; other names grant nothing it serves.
ROLE_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}$")
_LINE = re.compile(r"^sha256:(?P<hash>[0-9a-f]{64})\s+(?P<name>\S+)\s+(?P<roles>\S+)\s*$")


@dataclass(frozen=True, slots=True)
class ApiToken:
    name: str
    roles: frozenset[str]
    digest: str

    def may(self, role: str) -> bool:
        return role in self.roles


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token(name: str, roles: tuple[str, ...]) -> tuple[str, str]:
    """(the token, to give to its user once; the line for the tokens file, which holds only its hash)."""
    if not NAME_PATTERN.match(name):
        raise ValueError("a token's name is letters, digits and . _ @ - (at most 100), starting with a letter or digit")
    bad = [r for r in roles if not ROLE_PATTERN.match(r)]
    if not roles or bad:
        raise ValueError(f"roles are lower-case words (a-z, 0-9, _ -): {', '.join(bad) or 'none given'}")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, f"sha256:{token_digest(token)} {name} {','.join(roles)}"


def parse_tokens(text: str, source: str = "tokens file") -> list[ApiToken]:
    tokens = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.match(stripped)
        roles = frozenset(match.group("roles").split(",")) if match else frozenset()
        if match is None or not all(ROLE_PATTERN.match(r) for r in roles):
            log.warning("%s line %d is not `sha256:<64 hex> <name> <role>[,<role>]`: skipped", source, number)
            continue
        tokens.append(ApiToken(match.group("name"), roles, match.group("hash")))
    return tokens


class TokenFile:
    """The tokens in ``path``, read again whenever the file changes (None: no file, so no token is valid)."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._seen: tuple[int, int, int] | None = None
        self._tokens: list[ApiToken] = []

    def _refresh(self) -> None:
        if self._path is None:
            return
        try:
            st = os.stat(self._path)
        except OSError:
            if self._seen != (0, 0, 0):
                log.warning("API tokens file %s cannot be read: no token is accepted", self._path)
            self._seen, self._tokens = (0, 0, 0), []
            return
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp == self._seen:
            return
        try:
            text = self._path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            log.warning("API tokens file %s cannot be read: no token is accepted", self._path)
            self._seen, self._tokens = (0, 0, 0), []
            return
        self._seen, self._tokens = stamp, parse_tokens(text, str(self._path))

    def find(self, token: str) -> ApiToken | None:
        """The token's entry, comparing its hash with every entry's in constant time; None when unknown."""
        self._refresh()
        digest = token_digest(token).encode()
        found = None
        for entry in self._tokens:  # no early exit: the time does not depend on where (or whether) it matches
            if hmac.compare_digest(digest, entry.digest.encode()):
                found = entry
        return found
