"""Champion-challenger scoring as pure logic: the anytime-valid deployment gate (``gate``)."""

from agents.scores.gate import DEFAULT_GATE, GateConfig, GateDecision, GateState, decide, log_e_promote, log_e_reject

__all__ = ["DEFAULT_GATE", "GateConfig", "GateDecision", "GateState", "decide", "log_e_promote", "log_e_reject"]
