"""``pairjudge gate --experiment X``: the deployment gate's latest decision, as an exit code for CI.

Reads the compacted gate topic to its end (the latest decision per experiment) and the control topic
(is the kappa guard holding automatic decisions?). Exit codes: 0 promote, 1 reject, 2 continue (not
enough evidence yet, no decision published yet, or the gate refuses because automation is paused).
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition

from pairjudge.schemas import ControlUpdate
from pairjudge.schemas.scores import GateUpdate
from pairjudge.streams.codecs import decode
from pairjudge.streams.control_signing import signer_from_settings
from pairjudge.streams.kafka_security import client_config
from pairjudge.streams.settings import Settings

EXIT_CODES = {"promote": 0, "reject": 1, "continue": 2}


async def _latest(settings: Settings, kind: str) -> dict[bytes, bytes | None]:
    """Every key's latest value on a one-partition compacted topic, read to its current end."""
    consumer = AIOKafkaConsumer(**client_config(settings.kafka).kwargs(enable_auto_commit=False))
    signer = signer_from_settings(settings.control) if kind == "control" else None
    await consumer.start()
    try:
        tp = TopicPartition(settings.topics.name(kind), 0)
        end = (await consumer.end_offsets([tp]))[tp]
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        latest: dict[bytes, bytes | None] = {}
        while await consumer.position(tp) < end:
            batch = await consumer.getmany(tp, timeout_ms=1000)
            for record in batch.get(tp, []):
                # With a control signing key, an unsigned or badly signed update is not the latest word.
                verified = signer is None or signer.verify(tp.topic, record.key, record.value, record.headers).ok
                if record.key is not None and verified:
                    latest[record.key] = record.value
        return latest
    finally:
        await consumer.stop()


async def gate_status(settings: Settings, experiment: str) -> tuple[int, str]:
    """(exit code, what to print) for ``experiment``."""
    control = await _latest(settings, "control")
    guard = control.get(b"kappa_guard_tripped")
    if guard is not None:
        control_update = decode(ControlUpdate, guard, max_bytes=64_000)
        if control_update.value is True:
            return 2, (
                f"gate for {experiment}: refused. Automatic decisions are paused by the kappa guard"
                f" ({control_update.updated_by or 'unknown'}); the gate decides again once a person resumes them."
            )
    raw = (await _latest(settings, "gate")).get(experiment.encode())
    if raw is None:
        return 2, f"gate for {experiment}: no decision published yet (continue)."
    update = decode(GateUpdate, raw, max_bytes=64_000)
    g = update.gate
    if g.refused:
        return 2, f"gate for {experiment}: refused when last computed: {g.refused}"
    text = (
        f"gate for {experiment}: {g.decision.upper()} (at {update.decided_at:%Y-%m-%d %H:%M:%S} UTC)\n"
        f"  challenger wins {g.wins}, losses {g.losses} (decisive pairs; ties left out)\n"
        f"  evidence for promotion {g.e_promote:.3g}, for rejection {g.e_reject:.3g}; either decides at {g.threshold:g}"
        f" (alpha {g.alpha:g}, minimum effect {g.min_effect:g}, valid under continuous monitoring)"
    )
    return EXIT_CODES[g.decision], text
