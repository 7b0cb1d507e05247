"""Who may use the review service: scrypt password hashes, roles, and a limit on failed logins.

Hashes look like ``scrypt$16384$8$1$<salt>$<hash>`` (base64), made by ``pairjudge review hash-password``;
the standard library's ``hashlib.scrypt`` does the work. A login compares in constant time, and an
unknown user costs the same hash as a known one, so timing does not reveal who exists.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

Role = Literal["reviewer", "operator"]
_N, _R, _P = 2**14, 8, 1


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=_N, r=_R, p=_P, dklen=32)
    return "$".join(
        ("scrypt", str(_N), str(_R), str(_P), base64.b64encode(salt).decode(), base64.b64encode(digest).decode())
    )


def verify_password(password: str, encoded: str) -> bool:
    try:
        scheme, n, r, p, salt_b64, digest_b64 = encoded.split("$")
        if scheme != "scrypt":
            return False
        salt, expected = base64.b64decode(salt_b64), base64.b64decode(digest_b64)
        digest = hashlib.scrypt(
            password.encode("utf-8"), salt=salt, n=int(n), r=int(r), p=int(p), dklen=len(expected), maxmem=2**26
        )
    except ValueError:
        return False
    return hmac.compare_digest(digest, expected)


#: Checked when the user is unknown, so a miss costs the same time as a wrong password.
_DUMMY_HASH = hash_password("pairjudge-no-such-user", salt=b"\0" * 16)


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: Role
    password_hash: str

    def may(self, needed: Role) -> bool:
        """Operators may do everything reviewers may; reviewers may not operate."""
        return self.role == "operator" or needed == "reviewer"


class Users:
    def __init__(self, users: Iterable[User]) -> None:
        self._by_name = {u.name: u for u in users}

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> User | None:
        return self._by_name.get(name)

    def authenticate(self, name: str, password: str) -> User | None:
        user = self._by_name.get(name)
        ok = verify_password(password, user.password_hash if user else _DUMMY_HASH)
        return user if ok and user is not None else None


class LoginLimiter:
    """At most ``max_failures`` failed logins per key (a user name, a client address) per ``window_s``."""

    def __init__(self, max_failures: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._max, self._window, self._clock = max_failures, window_s, clock
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, key: str) -> deque[float]:
        times = self._failures.setdefault(key, deque())
        cutoff = self._clock() - self._window
        while times and times[0] < cutoff:
            times.popleft()
        return times

    def blocked_for(self, *keys: str) -> float:
        """Seconds until a login under any of ``keys`` may be tried again; 0 when it may now."""
        waits = [
            times[0] + self._window - self._clock() for key in keys if len(times := self._recent(key)) >= self._max
        ]
        return max(waits, default=0.0)

    def failed(self, *keys: str) -> None:
        now = self._clock()
        for key in keys:
            self._recent(key).append(now)
        if len(self._failures) > 10_000:  # bounded: forget keys with no recent failure
            self._failures = {k: v for k, v in self._failures.items() if self._recent(k)}

    def succeeded(self, *keys: str) -> None:
        for key in keys:
            self._failures.pop(key, None)
