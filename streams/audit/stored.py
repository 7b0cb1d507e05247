"""How the drift audit's tables store a value: prefixed with the partition its changelog record goes to.

A join entry is written as ``"<partition>:"`` and its bytes, so the join's sweep
(``streams.audit.handlers.Audit.sweep_join``) knows from the stored value alone which partition to tombstone it
in, and whether this worker owns it; a series' calibration histogram is stored the same way.
"""

from __future__ import annotations

__all__ = ["split_partition", "with_partition"]


def with_partition(partition: int, value: bytes) -> bytes:
    """A join entry as stored: prefixed with the partition its changelog record goes to, for the sweep."""
    return f"{partition}:".encode("ascii") + value


def split_partition(stored: bytes) -> tuple[int, bytes]:
    """The partition and the value of what ``with_partition`` stored."""
    partition, value = stored.split(b":", 1)
    return int(partition), value
