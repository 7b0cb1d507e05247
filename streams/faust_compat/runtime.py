"""The start-up guard: refuse a Faust, mode or aiokafka other than the versions ``HOOKS`` was verified on.

``HOOKS`` (this package's index) replaces private methods of one faust-streaming release. Under another
release a renamed hook is not an error: the override is simply never called, Faust's own commit logic comes
back, and pairs can be lost after a rebalance while every unit test of the ledger stays green. So the
versions are read (``importlib.metadata``) before the Faust app is built, and a difference stops the
process unless ``PAIRJUDGE_WORKER__ALLOW_UNVERIFIED_RUNTIME`` says to go on (then a warning names them).

This module imports neither Faust nor mode: the check runs before they are loaded, and a test can fake the
lookup (``check_runtime(lookup=...)``).
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pairjudge.streams.faust_compat import VERIFIED_VERSIONS

log = logging.getLogger("pairjudge.streams.faust_compat")

#: The environment variable of ``WorkerSettings.allow_unverified_runtime``, named in every refusal.
ALLOW_SETTING = "PAIRJUDGE_WORKER__ALLOW_UNVERIFIED_RUNTIME"


@dataclass(frozen=True)
class Mismatch:
    """One distribution whose installed version is not the verified one (``None``: not installed)."""

    name: str
    installed: str | None
    verified: str

    def __str__(self) -> str:
        return f"{self.name} {self.installed or '(not installed)'} (verified: {self.verified})"


class UnverifiedRuntime(RuntimeError):
    """Faust, mode or aiokafka is not the verified version and the setting does not allow it."""

    def __init__(self, mismatches: tuple[Mismatch, ...]) -> None:
        self.mismatches = mismatches
        super().__init__(refusal_message(mismatches))


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def mismatches(
    lookup: Callable[[str], str | None] | None = None, verified: Mapping[str, str] = VERIFIED_VERSIONS
) -> tuple[Mismatch, ...]:
    """Every verified distribution whose installed version (``lookup(name)``, by default what
    ``importlib.metadata`` reads) differs, in ``verified``'s order."""
    version_of = lookup or _installed
    found = ((name, version_of(name), want) for name, want in verified.items())
    return tuple(Mismatch(name, have, want) for name, have, want in found if have != want)


def refusal_message(found: tuple[Mismatch, ...]) -> str:
    listed = "; ".join(str(m) for m in found)
    return (
        f"refusing to start: {listed}. pairjudge overrides private hooks of these exact versions "
        "(streams/faust_compat HOOKS); under another one an override may never be called and pairs can be "
        "lost after a rebalance. Install the verified versions (pip install -c deploy/requirements.lock), or "
        f"set {ALLOW_SETTING}=true to run anyway (after running tests/unit/test_faust_hooks.py and "
        "tests/integration/test_faust_hooks_called_kafka.py on this runtime)."
    )


_warned: set[tuple[Mismatch, ...]] = set()


def check_runtime(*, allow: bool, lookup: Callable[[str], str | None] | None = None) -> tuple[Mismatch, ...]:
    """Raise ``UnverifiedRuntime`` when a version differs and ``allow`` is false; when allowed, warn (once).

    Returns the mismatches (empty on the verified runtime)."""
    found = mismatches(lookup)
    if not found:
        return found
    if not allow:
        raise UnverifiedRuntime(found)
    # The CLI checks before it touches the broker and the app's builder checks again: one warning a process.
    if found not in _warned:
        _warned.add(found)
        log.warning(
            "running on an unverified runtime because %s=true: %s",
            ALLOW_SETTING,
            "; ".join(str(m) for m in found),
        )
    return found
