"""Simulated comparison streams through the deployment gate (``agents.scores.gate``), vectorised.

Each stream draws decisive comparisons one at a time (the challenger wins with probability ``p``) and the
gate is checked after every one, as a CI step polling it would; a stream stops at its first decision.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pairjudge.agents.scores.gate import DEFAULT_GATE, GateConfig, log_e_promote, log_e_reject


@dataclass(frozen=True, slots=True)
class SimResult:
    streams: int
    promoted: int
    rejected: int
    #: Comparisons seen when each decided stream decided (undecided streams are left out).
    sample_sizes: tuple[int, ...]

    @property
    def promote_rate(self) -> float:
        return self.promoted / self.streams

    @property
    def reject_rate(self) -> float:
        return self.rejected / self.streams

    @property
    def median_sample_size(self) -> float | None:
        return float(np.median(self.sample_sizes)) if self.sample_sizes else None


def simulate(
    p: float, *, streams: int = 1000, horizon: int = 2000, config: GateConfig = DEFAULT_GATE, seed: int = 1
) -> SimResult:
    rng = np.random.default_rng(seed)
    draws = rng.random((streams, horizon)) < p
    wins = np.zeros(streams)
    losses = np.zeros(streams)
    decided = np.zeros(streams, dtype=np.int8)  # 0 continue, 1 promote, -1 reject
    when = np.zeros(streams, dtype=np.int64)
    log_threshold = np.log(config.threshold)
    for t in range(horizon):
        live = decided == 0
        if not live.any():
            break
        wins += draws[:, t] & live
        losses += ~draws[:, t] & live
        promote = live & (log_e_promote(wins, losses) >= log_threshold)
        reject = live & ~promote & (log_e_reject(wins, losses, config.min_effect) >= log_threshold)
        decided[promote] = 1
        decided[reject] = -1
        when[promote | reject] = t + 1
    done = decided != 0
    return SimResult(streams, int((decided == 1).sum()), int((decided == -1).sum()), tuple(int(x) for x in when[done]))
