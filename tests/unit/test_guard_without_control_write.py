"""The kappa guard on a worker that may not write the control topic (the operator-only ACL): it pauses
itself and says so, instead of stopping the worker; any other failure still propagates."""

from __future__ import annotations

import logging

import pytest
from aiokafka.errors import TopicAuthorizationFailedError

from pairjudge.agents.policy import Policy
from pairjudge.streams.audit.handlers import Audit
from pairjudge.streams.control.live import PolicyHolder
from pairjudge.streams.worker.pipeline import Outgoing


def _audit(error: Exception) -> tuple[Audit, PolicyHolder]:
    # Only the guard's parts: no Faust app or tables are needed to publish a pause.
    audit = Audit.__new__(Audit)
    holder = PolicyHolder(Policy())

    async def publish(messages: list[Outgoing]) -> None:
        raise error

    audit._publish = publish
    audit._policy = holder
    audit._control_signer = None
    audit.topic_names = {"control": "p.control"}
    return audit, holder


async def test_a_refused_pause_pauses_this_worker_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    wrapped = RuntimeError("Error while sending")  # what Faust's producer raises, wrapping aiokafka's error
    wrapped.__cause__ = TopicAuthorizationFailedError("p.control")
    audit, holder = _audit(wrapped)
    [trip] = audit._trip_guard("series-1")
    with caplog.at_level(logging.CRITICAL, logger="pairjudge.streams.audit.handlers"):
        await audit._publish_guard(trip)
    assert holder.current.kappa_guard_tripped
    assert "not authorised to write the kappa guard's pause to p.control" in caplog.text


async def test_other_failures_still_stop_the_worker() -> None:
    audit, holder = _audit(RuntimeError("broker gone"))
    [trip] = audit._trip_guard("series-1")
    with pytest.raises(RuntimeError, match="broker gone"):
        await audit._publish_guard(trip)
    assert not holder.current.kappa_guard_tripped
