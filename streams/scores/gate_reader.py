"""``pairjudge gate --experiment X [--basis human|judge]``: the deployment gate's latest decision, as an
exit code for CI.

Reads the compacted gate topic to its end (the latest decision per experiment). Two bases:

* ``human`` (the default): the human basis's gate (``GateUpdate.human``, ``agents.scores.human``): what
  people would decide, from the judge's verdicts and the audit sample's labels. It never falls back to
  the judge: without enough labels it says continue, and how many more labels are expected to be needed.
  It keeps deciding while the kappa guard holds automatic decisions (it never relied on the judge).
* ``judge``: the judge basis's gate (``GateUpdate.gate``): the judge's opinion, not people's. It also
  reads the control topic, and refuses while the kappa guard holds automatic decisions.

Exit codes: 0 promote, 1 reject, 2 continue (not enough evidence yet, no decision published yet, or the
judge gate refuses because automation is paused).
"""

from __future__ import annotations

from typing import Literal

from pairjudge.schemas import ControlUpdate
from pairjudge.schemas.read_api import EXIT_CODES
from pairjudge.schemas.scores import GateUpdate, HumanGateSnapshot
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.control.signing import signer_from_settings
from pairjudge.streams.kafka.codecs import decode
from pairjudge.streams.kafka.readers import from_start
from pairjudge.streams.scores.plain import not_enough
from pairjudge.streams.scores.read_model import gate_answer
from pairjudge.streams.scores.view import human_gate_view, judge_gate_view
from pairjudge.streams.security.kafka_clients import client_config

__all__ = ["EXIT_CODES", "Basis", "gate_status", "human_text"]
Basis = Literal["human", "judge"]
JUDGE_BASIS = "judge basis (the judge's opinion, not people's)"
HUMAN_BASIS = "human basis (what people would decide)"


async def _latest(settings: Settings, kind: str) -> dict[bytes, bytes | None]:
    """Every key's latest value on a one-partition compacted topic, read to its current end."""
    signer = signer_from_settings(settings.control) if kind == "control" else None
    topic = settings.topics.name(kind)
    latest: dict[bytes, bytes | None] = {}
    async with from_start(client_config(settings.kafka), [topic], partitions={topic: [0]}) as reader:
        while not await reader.caught_up():
            for records in (await reader.batches(timeout_ms=1000)).values():
                for record in records:
                    # With a control signing key, an unsigned or badly signed update is not the latest word.
                    verified = signer is None or signer.verify(topic, record.key, record.value, record.headers).ok
                    if record.key is not None and verified:
                        latest[record.key] = record.value
    return latest


async def gate_status(settings: Settings, experiment: str, basis: Basis = "human") -> tuple[int, str]:
    """(exit code, what to print) for ``experiment`` on ``basis``."""
    if basis == "human":
        return await _human_status(settings, experiment)
    return await _judge_status(settings, experiment)


async def _human_status(settings: Settings, experiment: str) -> tuple[int, str]:
    raw = (await _latest(settings, "gate")).get(experiment.encode())
    update = decode(GateUpdate, raw, max_bytes=64_000) if raw is not None else None
    if update is None or update.human is None:
        return 2, f"gate for {experiment}, {HUMAN_BASIS}: no decision published yet (continue)."
    answer = gate_answer(experiment, "human", update.gate, update.human, update.decided_at)
    return answer.exit_code, human_text(experiment, update.human, update)


def human_text(experiment: str, g: HumanGateSnapshot, update: GateUpdate) -> str:
    """What ``pairjudge gate --basis human`` prints."""
    lines = [
        f"gate for {experiment}, {HUMAN_BASIS}: {g.decision.upper()} (at {update.decided_at:%Y-%m-%d %H:%M:%S} UTC)"
    ]
    if g.labels < g.min_labels:  # an interval from fewer labels only looks exact
        lines.append(f"  no interval yet: {not_enough(g.labels, g.min_labels)}")
    elif g.rate is not None and g.low is not None and g.high is not None:
        lines.append(
            f"  challenger win rate as people would judge it {g.rate:.3f}, {1 - g.alpha:.0%} anytime-valid interval"
            f" [{g.low:.3f}, {g.high:.3f}] (valid under continuous monitoring)"
        )
    else:
        lines.append("  no interval yet: no sampling stratum has enough human labels")
    lines.append(f"  human labels used {g.labels}, pending {g.pending}, expired {g.expired}")
    lines.append(
        f"  promotes above 0.5, rejects below {0.5 + g.min_effect:g} (alpha {g.alpha:g}, minimum effect"
        f" {g.min_effect:g}, at least {g.min_labels} labels)"
    )
    lines.append(f"  {human_gate_view(g).text}")  # in the pages' words (streams.scores.plain)
    if g.decision == "continue" and update.gate.decision != "continue":
        lines.append(f"  (the judge basis says {update.gate.decision}: the judge's opinion, not people's)")
    return "\n".join(lines)


async def _judge_status(settings: Settings, experiment: str) -> tuple[int, str]:
    control = await _latest(settings, "control")
    guard = control.get(b"kappa_guard_tripped")
    if guard is not None:
        control_update = decode(ControlUpdate, guard, max_bytes=64_000)
        if control_update.value is True:
            return 2, (
                f"gate for {experiment}, {JUDGE_BASIS}: refused. Automatic decisions are paused by the kappa guard"
                f" ({control_update.updated_by or 'unknown'}); the gate decides again once a person resumes them."
            )
    raw = (await _latest(settings, "gate")).get(experiment.encode())
    if raw is None:
        return 2, f"gate for {experiment}, {JUDGE_BASIS}: no decision published yet (continue)."
    update = decode(GateUpdate, raw, max_bytes=64_000)
    g = update.gate
    answer = gate_answer(experiment, "judge", g, update.human, update.decided_at)
    if answer.refused:
        return answer.exit_code, f"gate for {experiment}, {JUDGE_BASIS}: refused when last computed: {g.refused}"
    text = (
        f"gate for {experiment}, {JUDGE_BASIS}: {g.decision.upper()} (at {update.decided_at:%Y-%m-%d %H:%M:%S} UTC)\n"
        f"  challenger wins {g.wins}, losses {g.losses} (decisive pairs; ties left out)\n"
        f"  {judge_gate_view(g).detail}"
    )
    return answer.exit_code, text
