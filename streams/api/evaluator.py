"""The ``Evaluator``: the worker's judging path for one pair, many pairs or a file, without Kafka.

It runs the worker's own stage (``streams.worker.pipeline.Pipeline.decide``: the handler without its bytes, on
the decoded pair, returning the events it built) on the worker's judge
stacks, policy and rubric catalog (``streams.judges.panel``), so a pair meets exactly what the worker
would do to it: the input checks, both orders at once, reconciliation, the tie-break stage fed with the
request the primary stage would have published, retries of a judge outage (``OUTAGE_RETRIES`` more
attempts, and waiting while a circuit breaker is open), redaction when it is on, and dead letters for
what cannot be judged. What only the stream has is left out: the control topic (live settings), the
recorded outcomes that make a redelivery replay, the audit copies and decision records, and alerts.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import anyio
from pydantic_core import to_json

from pairjudge.agents import InputRejected, Judge
from pairjudge.schemas import CandidatePair, InlineRubric, TieBreakRequest
from pairjudge.schemas.audit import DecisionRecord
from pairjudge.schemas.outcomes import OutcomeEvent
from pairjudge.streams.api.outcomes import Outcome, wrap
from pairjudge.streams.api.results import PairResult, ResultsFile, append_row, line_key, open_results, result_for
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.judges.panel import JudgePanel
from pairjudge.streams.kafka.codecs import decode
from pairjudge.streams.services import build_services
from pairjudge.streams.telemetry.tracing import Telemetry
from pairjudge.streams.worker.pipeline import Origin, StageResult

#: A pair as ``compare`` takes it: the contract itself, its JSON (text or bytes), or a dict of it.
PairInput = CandidatePair | Mapping[str, Any] | str | bytes
K = TypeVar("K")

#: Concurrent pairs by default; each pair makes two (or, with a jury, 2 x jurors) calls at once.
DEFAULT_CONCURRENCY = 8


def event_bytes(pair: PairInput) -> bytes:
    """``pair`` as the bytes the worker would read from the pairs topic."""
    if isinstance(pair, CandidatePair):
        return pair.model_dump_json().encode()
    if isinstance(pair, bytes):
        return pair
    if isinstance(pair, str):
        return pair.encode("utf-8")
    return to_json(dict(pair))


class Evaluator:
    """The judging core behind an async context manager that owns the judges' HTTP clients.

    ``settings`` default to ``Settings()`` (the environment and ``PAIRJUDGE_CONFIG``, as the worker
    reads them). ``judge`` or ``panel`` replace the configured judges (tests, a custom ``Judge``); they
    are used as given, like the worker's ``create_app(judge=...)``, so only a panel with breakers retries
    an outage. ``catalog`` replaces the configured named rubrics.

    The configured spending caps apply to this evaluator's own spend (``streams.worker.spend.in_process_tracker``);
    a cap with ``spend_action = "queue"`` is refused here (``SpendCapUnsupported``), as nothing in-process would
    release a waiting pair but the hour turning.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        judge: Judge | None = None,
        panel: JudgePanel | None = None,
        catalog: Mapping[str, InlineRubric] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings()
        # The same parts a worker judges with (streams.services), in-process: the configured policy, and the
        # spending caps on this evaluator's own spend. Raises SpendCapUnsupported for a cap it cannot honour.
        self._services = build_services(
            self.settings, "api", judge=judge, panel=panel, catalog=catalog, telemetry=telemetry
        )
        judging = self._services.require_judging()
        self.panel = judging.panel
        self.policy = self._services.policy.current
        self.catalog = judging.catalog
        self.telemetry = judging.telemetry
        self._pipeline = self._services.pipeline()
        self._closed = False

    @property
    def judge(self) -> Judge:
        """The judge that names a run: the one judge, or with a jury or a cascade the tie-break resolver."""
        several = len(self.panel.primary) > 1 or self.panel.cascade is not None
        return self.panel.tiebreak if several else self.panel.primary[0]

    async def __aenter__(self) -> Evaluator:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the judges' HTTP clients and caches (and a telemetry this evaluator made)."""
        if self._closed:
            return
        self._closed = True
        await self._services.aclose()

    async def compare(self, pair: PairInput, *, tiebreak: bool = True) -> Outcome:
        """Decide one pair as the worker would; never raises for a bad input or a failing judge.

        ``tiebreak=False`` stops after the primary stage: a pair it cannot decide comes back as
        ``TieBreakPending`` carrying the request the worker would publish to the tie-break topic.
        """
        raw = event_bytes(pair)
        decoded = pair if isinstance(pair, CandidatePair) else self._decoded(raw)
        if decoded is None:
            # Not a pair: the worker's own decoding writes the dead letter it would write.
            first = await self._pipeline.handle("primary", raw, None, Origin())
        else:
            first = await self._pipeline.decide("primary", decoded, raw)
        event = _published(first)
        if not isinstance(event, TieBreakRequest) or not tiebreak:
            return wrap(event, decoded, None, _record(first))
        # The request as the worker would publish it (its trace headers too) to its tie-break stage.
        request = first.outgoing[0]
        second = await self._pipeline.decide("tiebreak", event, request.value, request.headers)
        return wrap(_published(second), decoded, event, _record(second))

    async def resolve_tiebreak(self, request: TieBreakRequest) -> Outcome:
        """The tie-break stage alone, on a request such as the worker's tie-break topic carries."""
        result = await self._pipeline.decide("tiebreak", request, request.model_dump_json().encode())
        return wrap(_published(result), request.pair, request, _record(result))

    def _decoded(self, raw: bytes) -> CandidatePair | None:
        """The pair as the worker decodes it; None when it would not decode (its dead letter says why)."""
        try:
            return decode(CandidatePair, raw, max_bytes=self.settings.max_event_bytes)
        except InputRejected:
            return None

    async def compare_many(
        self, pairs: Iterable[PairInput], *, concurrency: int = DEFAULT_CONCURRENCY, tiebreak: bool = True
    ) -> AsyncGenerator[Outcome, None]:
        """Decide ``pairs`` with at most ``concurrency`` at once, yielding each outcome as it is decided
        (not in input order: match them by ``pair_id``). ``pairs`` is read lazily."""
        async for _, outcome in self.as_decided(((None, p) for p in pairs), concurrency=concurrency, tiebreak=tiebreak):
            yield outcome

    async def as_decided(
        self, items: Iterable[tuple[K, PairInput]], *, concurrency: int = DEFAULT_CONCURRENCY, tiebreak: bool = True
    ) -> AsyncGenerator[tuple[K, Outcome], None]:
        """``(key, outcome)`` for each ``(key, pair)`` as it is decided, at most ``concurrency`` at once.

        A sliding window of tasks rather than a task group: a task group may not stay open across a
        ``yield``, and a caller that stops iterating early must not leave pairs being judged (the
        pending ones are cancelled when the iterator is closed).
        """
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        source: Iterator[tuple[K, PairInput]] = iter(items)
        pending: dict[asyncio.Task[Outcome], K] = {}
        try:
            while True:
                for key, pair in source:
                    pending[asyncio.ensure_future(self.compare(pair, tiebreak=tiebreak))] = key
                    if len(pending) >= concurrency:
                        break
                if not pending:
                    return
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    yield pending.pop(task), task.result()
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    def compare_file(
        self,
        source: str | os.PathLike[str] | Iterable[PairInput],
        *,
        out: str | os.PathLike[str] | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        fresh: bool = False,
        tiebreak: bool = True,
    ) -> FileRun:
        """Decide every pair of a JSONL file (or an iterable of pairs), appending each one's row to ``out``
        as it is decided and skipping pairs ``out`` already holds (``fresh``: start ``out`` over).

        Iterate the answer for the new outcomes; its ``results()`` are then every pair's row."""
        return FileRun(self, source, out=out, concurrency=concurrency, fresh=fresh, tiebreak=tiebreak)


class FileRun:
    """One pass over a file of pairs (``Evaluator.compare_file``): an async iterator of new outcomes.

    ``prepare()`` (called by the first iteration if not before) reads the input and, with ``out``, what
    ``out`` already holds; then ``total``, ``already`` and ``dropped_bytes`` are known. A pair id that
    occurs twice in the input is judged once, as the worker replays a redelivered pair.
    """

    def __init__(
        self,
        evaluator: Evaluator,
        source: str | os.PathLike[str] | Iterable[PairInput],
        *,
        out: str | os.PathLike[str] | None,
        concurrency: int,
        fresh: bool,
        tiebreak: bool,
    ) -> None:
        self._evaluator = evaluator
        self._source = source
        self.out = Path(out) if out is not None else None
        self._concurrency = concurrency
        self._fresh = fresh
        self._tiebreak = tiebreak
        self._prepared = False
        self._lines: list[bytes] = []
        self._keys: list[str] = []
        self._earlier: dict[str, PairResult] = {}
        self._new: dict[str, PairResult] = {}
        #: Distinct pairs (by key) in the input.
        self.total = 0
        #: Of those, how many ``out`` already held.
        self.already = 0
        #: Input lines skipped because their pair id came earlier in the input.
        self.duplicates = 0
        #: Rows in ``out`` for pairs not in this input: kept in the file, left out of ``results()``.
        self.foreign = 0
        #: Bytes of a torn last line dropped from ``out`` (a run killed mid-write).
        self.dropped_bytes = 0

    async def prepare(self) -> None:
        if self._prepared:
            return
        self._prepared = True
        if isinstance(self._source, str | os.PathLike):
            data = await anyio.Path(self._source).read_bytes()
            self._lines = [line for line in data.splitlines() if line.strip()]
        else:
            self._lines = [event_bytes(p) for p in self._source]
        self._keys = [line_key(raw) for raw in self._lines]
        distinct = set(self._keys)
        self.total = len(distinct)
        self.duplicates = len(self._keys) - len(distinct)
        if self.out is not None and not self._fresh:
            existing = await anyio.to_thread.run_sync(ResultsFile.load, self.out)
            self.dropped_bytes = existing.dropped_bytes
            for row in existing.rows:
                self._earlier.setdefault(row.key, row)
            self.already = len(distinct & self._earlier.keys())
            self.foreign = len(self._earlier.keys() - distinct)

    def _pending(self) -> Iterator[tuple[str, bytes]]:
        seen: set[str] = set()
        for key, raw in zip(self._keys, self._lines, strict=True):
            if key in seen or key in self._earlier:
                continue
            seen.add(key)
            yield key, raw

    async def __aiter__(self) -> AsyncGenerator[Outcome, None]:
        await self.prepare()
        out = open_results(self.out, fresh=self._fresh) if self.out is not None else None
        raw_of = dict(zip(self._keys, self._lines, strict=True))
        try:
            async for key, outcome in self._evaluator.as_decided(
                self._pending(), concurrency=self._concurrency, tiebreak=self._tiebreak
            ):
                row = result_for(outcome, raw_of[key])
                if out is not None:
                    append_row(out, row)
                self._new[key] = row
                yield outcome
        finally:
            if out is not None:
                out.close()

    def results(self) -> list[PairResult]:
        """A row per distinct input pair decided so far, earlier runs' included, in input order."""
        rows: list[PairResult] = []
        seen: set[str] = set()
        for key in self._keys:
            row = self._new.get(key) or self._earlier.get(key)
            if row is not None and key not in seen:
                seen.add(key)
                rows.append(row)
        return rows


def _record(result: StageResult) -> DecisionRecord | None:
    """The decision record a stage published with its outcome, if any."""
    return next((o.event for o in result.outgoing if isinstance(o.event, DecisionRecord)), None)


def _published(result: StageResult) -> OutcomeEvent:
    """The event a stage would publish first, as the stage built it: the outcome (audit copies and records
    follow it) or the dead letter."""
    event = result.outgoing[0].event
    if not isinstance(event, OutcomeEvent):  # pragma: no cover
        raise TypeError(f"a stage published {type(event).__name__} first, not an outcome")
    return event
