"""A circuit breaker for a judge endpoint (docs/design.md §5): stop calling a judge that is down, probe it, resume.

States::

    closed ──N consecutive outages──► open ──cooldown elapsed, or a check──► half-open ──probe ok──► closed
                                        ▲        saw the judge come back          │
                                        └──── probe failed: cooldown × backoff (≤ max) ◄┘

* **closed**: calls go through. ``failure_threshold`` consecutive ``JudgeUnavailable`` open it.
* **open**: calls fail at once with ``CircuitOpen`` (a ``JudgeUnavailable``) without touching the
  network, for ``cooldown_s``.
* **half-open**: once the cooldown has elapsed, exactly ONE call goes through as the probe; the others
  keep failing fast while it is in flight. Success closes the breaker (and resets the cooldown); an
  outage re-opens it with the cooldown multiplied by ``backoff`` up to ``max_cooldown_s``.

**Checks** (when the breaker is given a ``check``: a cheap request such as a GET of the model list).
The doubled cooldown keeps real judge calls away from a judge that stays down, but it also means a judge
that comes back after a long outage waits up to ``max_cooldown_s`` to be used. So once the cooldown has
grown past its base (a real probe already failed), the breaker also runs a check every
``check_interval_s`` while it is open. A check that finds the judge up makes the breaker ready for its
half-open probe at once, before the cooldown ends. It never closes the breaker by itself: a server
may list its models while its completions fail (a load balancer in front of crashed workers, a model
still loading), and only a real call proves the judge can judge. The check is only believed while it has
been right: if a probe it let through fails, its "up" answers are ignored (the cooldown rules alone)
until a check sees the judge down again, so a judge whose model list always answers gets one extra
probe, not a probe every interval. While the cooldown is at its base the breaker does not check: the
base cooldown is short, and it gives an overloaded judge its rest.

Checks run inside ``wait_until_closed``, in one waiter at a time: the breaker starts no task of its
own, and nobody checks a judge nobody is waiting for.

What counts as an outage: only ``JudgeUnavailable`` (transport failures, timeouts, 5xx/429 after the
adapter's own retries). A ``JudgeRejected`` (auth, bad request) or an ``InvalidReply`` means the
endpoint *answered*: it is up, and opening the breaker would not fix a wrong key or a bad prompt, only
hide it behind "circuit open". So they count as answers: they end a run of outages and close a
half-open breaker. (The breaker asks whether the endpoint answered, not whether asking again can
help, which is ``retriable``: an invalid reply is retriable, by a re-ask, and still an answer.) A call
cancelled (or failing with a non-judge error) counts as neither; a cancelled probe frees the probe slot
for the next call.

Outcomes of calls (and checks) admitted before the breaker last changed state are ignored: a slow call
that fails after the breaker already opened does not lengthen the cooldown, and one that fails after it
closed again does not count towards the next opening.

Backpressure: ``is_open`` is True while a call would be refused, and ``wait_until_closed()`` returns
when one would be admitted again. The stream edge stops taking new pairs meanwhile. Because only a
call can close a half-open breaker, ``wait_until_closed()`` also returns when the breaker is ready for
its probe, and then to one waiter at a time (each gets ``probe_lease_s`` to start its call), so a
worker that waits is the one that probes and the rest do not all rush in.

All state changes happen on the event loop thread without awaiting in between, so no lock is needed.
The clock is injectable (``time.monotonic`` by default) so tests need not sleep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import anyio

from pairjudge.agents.errors import JudgeError, JudgeUnavailable
from pairjudge.agents.judge import Judge, JudgeRequest, JudgeResponse, JudgeWrapper

log = logging.getLogger(__name__)

State = Literal["closed", "open", "half_open"]

#: A cheap request to the judge: True when it answered as a judge that is up does, False when not.
Check = Callable[[], Awaitable[bool]]


class CircuitOpen(JudgeUnavailable):
    """The breaker refused the call without trying: the judge is considered down for now."""


@dataclass(frozen=True, slots=True)
class Ticket:
    """An admitted call. Hand it back with the call's outcome."""

    generation: int
    probe: bool
    #: A probe let through early by a check, before the cooldown ended.
    early: bool = False


@dataclass(frozen=True, slots=True)
class CheckTicket:
    """A check the breaker asked for. Hand it back with its result (``record_check``)."""

    generation: int


class CircuitBreaker:
    """The breaker's state machine (see the module docstring). One per judge endpoint, shared by its callers."""

    def __init__(
        self,
        *,
        failure_threshold: int = 5,
        cooldown_s: float = 5.0,
        max_cooldown_s: float = 60.0,
        backoff: float = 2.0,
        probe_lease_s: float = 1.0,
        max_wait_poll_s: float = 1.0,
        check: Check | None = None,
        check_interval_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        name: str = "judge",
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be >= 1")
        if cooldown_s <= 0 or max_cooldown_s < cooldown_s:
            raise ValueError("need 0 < cooldown_s <= max_cooldown_s")
        if backoff < 1 or probe_lease_s <= 0 or max_wait_poll_s <= 0:
            raise ValueError("backoff must be >= 1; probe_lease_s and max_wait_poll_s positive")
        if check is not None and check_interval_s <= 0:
            raise ValueError("check_interval_s must be positive (or pass no check)")
        self._threshold = failure_threshold
        self._base_cooldown = cooldown_s
        self._max_cooldown = max_cooldown_s
        self._backoff = backoff
        self._probe_lease = probe_lease_s
        self._max_poll = max_wait_poll_s
        self._clock = clock
        self._name = name
        self._check = check
        self._check_interval = check_interval_s

        self._state: State = "closed"
        #: Bumped on every state change; outcomes of calls admitted under an older one are ignored.
        self._generation = 0
        self._failures = 0
        self._cooldown = cooldown_s
        self._opened_at = 0.0
        self._probe_in_flight = False
        #: Until when a waiter released by ``wait_until_closed`` holds the right to probe first.
        self._lease_until = 0.0
        #: Set (and replaced) on every state change, to wake waiters. Created on first wait, in a loop.
        self._changed: anyio.Event | None = None
        #: A check found the judge up: the half-open probe may go before the cooldown ends.
        self._ready = False
        #: When the next check is due, and whether one is out now.
        self._next_check_at = 0.0
        self._check_in_flight = False
        #: Whether a check's "up" is believed: false once a probe it let through failed, true again
        #: once a check sees the judge down (module docstring).
        self._trust_checks = True
        #: How often the breaker opened, for metrics.
        self.opened_count = 0
        #: How many checks ran, and how many half-open probes they let through early, for metrics.
        self.checks_count = 0
        self.early_probes = 0

    # --- observing ------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The judge this breaker guards, as named in its messages (and in /readyz and /metrics)."""
        return self._name

    @property
    def state(self) -> State:
        """The state now: "open" turns into "half_open" by itself once the cooldown has elapsed."""
        if self._state == "open" and (self._ready or self._clock() - self._opened_at >= self._cooldown):
            return "half_open"
        return self._state

    @property
    def is_open(self) -> bool:
        """True while a call now would be refused: open in its cooldown, or half-open with its probe out."""
        state = self.state
        return state == "open" or (state == "half_open" and self._probe_in_flight)

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    @property
    def cooldown_s(self) -> float:
        """The current cooldown (it grows while probes keep failing)."""
        return self._cooldown

    @property
    def checks_enabled(self) -> bool:
        """Whether the open breaker checks its judge with a cheap request (module docstring)."""
        return self._check is not None

    def retry_in(self) -> float:
        """Seconds until the breaker is ready for a probe; 0 when not open."""
        if self._state != "open" or self._ready:
            return 0.0
        return max(0.0, self._cooldown - (self._clock() - self._opened_at))

    # --- calls ----------------------------------------------------------------------------------

    def admit(self) -> Ticket:
        """Admit a call or raise ``CircuitOpen``. Every ticket must be handed back exactly once."""
        state = self.state
        if state == "closed":
            return Ticket(self._generation, probe=False)
        if state == "half_open" and not self._probe_in_flight:
            early = self._state == "open" and self._ready and self._clock() - self._opened_at < self._cooldown
            if self._state == "open":
                self._transition("half_open")
            self._probe_in_flight = True
            if early:
                self.early_probes += 1
            return Ticket(self._generation, probe=True, early=early)
        detail = "a probe call is in flight" if state == "half_open" else f"retry in {self.retry_in():.1f} s"
        raise CircuitOpen(f"judge {self._name}: circuit open after {self._failures} consecutive failures ({detail})")

    def record_success(self, ticket: Ticket) -> None:
        """The call got an answer from the endpoint (a reply, or a rejection: the endpoint is up)."""
        if ticket.generation != self._generation:
            return
        if ticket.probe:
            self._probe_in_flight = False
            self._cooldown = self._base_cooldown
            self._failures = 0
            self._trust_checks = True
            self._transition("closed")
        elif self._state == "closed":
            self._failures = 0

    def record_failure(self, ticket: Ticket) -> None:
        """The call ended in an outage (``JudgeUnavailable``)."""
        if ticket.generation != self._generation:
            return
        if ticket.probe:
            self._probe_in_flight = False
            self._failures += 1
            self._cooldown = min(self._cooldown * self._backoff, self._max_cooldown)
            if ticket.early:
                # The check said "up" and the judge was not: its answers say nothing about this outage.
                self._trust_checks = False
            self._open()
        elif self._state == "closed":
            self._failures += 1
            if self._failures >= self._threshold:
                self._cooldown = self._base_cooldown
                self._trust_checks = True
                self._open()

    def release(self, ticket: Ticket) -> None:
        """The call ended with no verdict on the endpoint (cancelled, or a bug): free the probe slot."""
        if ticket.probe and ticket.generation == self._generation:
            self._probe_in_flight = False
            self._notify()

    # --- checks -------------------------------------------------------------------------------

    def check_due_in(self) -> float | None:
        """Seconds until the next check is due (0: now); None while no check is wanted.

        Checks are wanted while the breaker is open in a cooldown that has grown past its base, with
        no check out and no probe already allowed.
        """
        if self._check is None or self._check_in_flight or self.state != "open":
            return None
        if self._cooldown <= self._base_cooldown:
            return None
        return max(0.0, self._next_check_at - self._clock())

    def begin_check(self) -> CheckTicket | None:
        """Claim the check that is due now, if one is; run it and hand the result to ``record_check``."""
        if self.check_due_in() != 0.0:
            return None
        self._check_in_flight = True
        self._next_check_at = self._clock() + self._check_interval
        self.checks_count += 1
        return CheckTicket(self._generation)

    def record_check(self, ticket: CheckTicket, up: bool | None) -> None:
        """The check's result: True (the judge answered), False (it did not), None (no result: cancelled)."""
        self._check_in_flight = False
        if up is not None and ticket.generation == self._generation and self._state == "open":
            if not up:
                self._trust_checks = True
            elif self._trust_checks and not self._ready:
                self._ready = True
                log.info("judge %s: a check found it answering; letting a probe call through", self._name)
        self._notify()

    async def _run_check(self, ticket: CheckTicket) -> None:
        assert self._check is not None
        up: bool | None = None
        try:
            up = await self._check()
        except Exception as exc:  # noqa: BLE001 - a broken check must not stop the worker: the cooldown still rules
            log.warning("judge %s: the breaker's check failed: %s: %s", self._name, type(exc).__name__, exc)
        finally:
            self.record_check(ticket, up)

    # --- transitions ----------------------------------------------------------------------------

    def _open(self) -> None:
        self._opened_at = self._clock()
        # The first check of a (re)opened breaker is due at once; a check already out belongs to the
        # previous generation and its result will be ignored.
        self._next_check_at = self._opened_at
        self.opened_count += 1
        self._transition("open")

    def _transition(self, state: State) -> None:
        self._state = state
        self._generation += 1
        self._lease_until = 0.0
        self._ready = False
        self._notify()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    # --- backpressure ---------------------------------------------------------------------------

    async def wait_until_closed(self) -> None:
        """Return once a call would be admitted: closed, or ready for its half-open probe.

        While the breaker is open, one waiter at a time runs its check (module docstring). While the
        breaker is ready for a probe, waiters are released one at a time: each released waiter has
        ``probe_lease_s`` to make its call before the next is let go.
        """
        while True:
            now = self._clock()
            state = self.state
            if state == "closed":
                return
            if state == "half_open" and not self._probe_in_flight and now >= self._lease_until:
                self._lease_until = now + self._probe_lease
                return
            if state == "open":
                check = self.begin_check()
                if check is not None:
                    # This waiter runs the check; the others wait for its outcome (or their deadlines).
                    await self._run_check(check)
                    continue
                delay = self.retry_in()
                check_in = self.check_due_in()
                if check_in is not None:
                    delay = min(delay, check_in)
            elif not self._probe_in_flight:
                delay = self._lease_until - now
            else:
                delay = self._max_poll  # the probe's outcome wakes us
            if self._changed is None:
                self._changed = anyio.Event()
            changed = self._changed
            # Bounded by max_wait_poll_s so an injected clock (tests) or a lost wake-up cannot strand us.
            with anyio.move_on_after(min(max(delay, 0.0), self._max_poll)):
                await changed.wait()


class BreakerJudge(JudgeWrapper):
    """Wraps any judge with a ``CircuitBreaker``: while open, calls raise ``CircuitOpen`` at once."""

    def __init__(self, inner: Judge, breaker: CircuitBreaker) -> None:
        super().__init__(inner)
        self._breaker = breaker

    @property
    def breaker(self) -> CircuitBreaker:
        return self._breaker

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        ticket = self._breaker.admit()
        try:
            response = await self._inner.complete(request)
        except JudgeUnavailable:
            self._breaker.record_failure(ticket)
            raise
        except JudgeError:
            # Rejected or an unreadable reply: the endpoint answered, so it is not down.
            self._breaker.record_success(ticket)
            raise
        except BaseException:
            self._breaker.release(ticket)
            raise
        self._breaker.record_success(ticket)
        return response
