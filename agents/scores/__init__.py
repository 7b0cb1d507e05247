"""Champion-challenger scoring as pure logic: the scoreboard (``board``) and the anytime-valid gate (``gate``)."""

from pairjudge.agents.scores.gate import (
    DEFAULT_GATE,
    GateConfig,
    GateDecision,
    GateState,
    decide,
    log_e_promote,
    log_e_reject,
)

__all__ = ["DEFAULT_GATE", "GateConfig", "GateDecision", "GateState", "decide", "log_e_promote", "log_e_reject"]
