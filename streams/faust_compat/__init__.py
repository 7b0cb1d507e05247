"""Every place pairjudge replaces or reads a private part of Faust (faust-streaming) or mode, in one package.

faust-streaming is pinned (pyproject.toml) because of what is listed here. ``HOOKS`` is the index: each
entry names the Faust class, the attribute pairjudge replaces, reads or calls, the pairjudge code that does
it, the Faust code that calls it (so an upgrade that stops calling it is noticed), and why.
``tests/unit/test_faust_hooks.py`` checks every entry against the installed Faust: the attribute exists,
pairjudge's class really overrides it, the named Faust caller still calls it, and a member pairjudge calls
still has the signature (or declared type) it was verified with.
``tests/integration/test_faust_hooks_called_kafka.py`` runs a real worker on Kafka and checks that Faust
calls every override; ``tests/unit/test_rocksdb_store_contacts.py`` runs ``rocksdb_store`` on a real store
and checks it uses every member it is indexed for. The worker refuses other versions than
``VERIFIED_VERSIONS`` (``runtime``).

- ``offsets``: commits follow the project's offset ledger (faust-streaming#606).
- ``shutdown``: the shutdown's wait for in-flight pairs, bounded.
- ``worker``: the worker without its spinner, with the quiet log filter.
- ``recovery_watch``: reads table recovery's progress and the consumer's fetch state.
- ``rocksdb_store``: the RocksDB table store read and written by partition (``streams.worker.tables``).
- ``runtime``: the start-up guard that refuses versions other than ``VERIFIED_VERSIONS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

#: The versions every entry of ``HOOKS`` was verified on: tests/unit/test_faust_hooks.py (the hooks exist and
#: are named by their callers) and tests/integration/test_faust_hooks_called_kafka.py (a real worker calls
#: each override). The worker refuses to start on others (``runtime.check_runtime``) unless
#: ``PAIRJUDGE_WORKER__ALLOW_UNVERIFIED_RUNTIME`` is set; pyproject.toml and deploy/requirements.lock pin the
#: same versions (tests/unit/test_faust_runtime.py holds the three together).
VERIFIED_VERSIONS: Mapping[str, str] = MappingProxyType(
    {
        "faust-streaming": "0.15.3",
        "mode-streaming": "0.7.1",
        "aiokafka": "0.12.0",
    }
)


@dataclass(frozen=True)
class Hook:
    """One point of contact with Faust's internals."""

    #: The Faust (or mode) class, as ``module:Class``.
    faust_class: str
    #: The attribute replaced (or set, read, called or updated: see ``kind``).
    attribute: str
    #: pairjudge's class or function, as ``module:name``; for an override, the class that defines it.
    ours: str
    #: The Faust function that calls (or sets) it, as ``module:Class.method``; its source names the attribute.
    caller: str
    why: str
    #: "overrides" (pairjudge's subclass replaces it), "wraps", "sets" (pairjudge puts its own object there),
    #: "reads", "calls" (pairjudge calls Faust's private method) or "updates" (pairjudge changes its state).
    kind: str = "overrides"
    #: For a member pairjudge calls, reads or updates whose shape it relies on: the method's signature, or
    #: the attribute's declared type (its value when undeclared), as ``inspect`` shows them under
    #: ``VERIFIED_VERSIONS`` (tests/unit/test_faust_hooks.py compares). None: not pinned.
    signature: str | None = None


_CONSUMER = "faust.transport.drivers.aiokafka:Consumer"
_ROCKSDB = "faust.stores.rocksdb:Store"
_TABLES = "pairjudge.streams.faust_compat.rocksdb_store"
#: Why ``rocksdb_store`` reaches past the store's mapping interface (see its docstring).
_BY_PARTITION = "outside a stream (timers, sweeps), by the partition the changelog record goes to"
_BASE_CONSUMER = "faust.transport.consumer"
_LEDGER = "pairjudge.streams.faust_compat.offsets:LedgerConsumer"

HOOKS: tuple[Hook, ...] = (
    Hook(
        _CONSUMER,
        "_new_offset",
        _LEDGER,
        f"{_BASE_CONSUMER}:Consumer._filter_committable_offsets",
        "the committable offset is the ledger's (lowest pending), not Faust's off-by-one gap check (#606)",
    ),
    Hook(
        _CONSUMER,
        "_filter_tps_with_pending_acks",
        _LEDGER,
        f"{_BASE_CONSUMER}:Consumer.force_commit",
        "a partition is a commit candidate when the ledger has moved, whatever Faust's acks say",
    ),
    Hook(
        _CONSUMER,
        "_commit_tps",
        _LEDGER,
        f"{_BASE_CONSUMER}:Consumer.force_commit",
        "no commit between a revocation and the next assignment",
    ),
    Hook(
        _CONSUMER,
        "perform_seek",
        _LEDGER,
        f"{_BASE_CONSUMER}:Consumer.getmany",
        "a partition with no committed offset gets one at its start, so the ledger has a floor; the stream "
        "partitions held by resume_partitions fetch only after the seek",
    ),
    Hook(
        _CONSUMER,
        "resume_partitions",
        _LEDGER,
        "faust.tables.recovery:Recovery._resume_streams",
        "a new assignment's stream partitions are held until perform_seek has sought them: records fetched "
        "in between came from a stale position (one was committed), and can move Faust's read offset past "
        "what the seek re-reads",
    ),
    Hook(
        _CONSUMER,
        "_getmany",
        _LEDGER,
        f"{_BASE_CONSUMER}:Consumer._wait_next_records",
        "aiokafka gets a snapshot of the active partitions (an emptied live set meant every partition, and "
        "Faust dropped the paused ones' records); every record fetched is pending in the ledger",
    ),
    Hook(
        _CONSUMER,
        "ack",
        _LEDGER,
        "faust.types.tuples:ConsumerMessage.on_final_ack",
        "Faust's acks (also for messages it skips) never count as done; only the agent's done() does",
    ),
    Hook(
        _CONSUMER,
        "on_partitions_revoked",
        _LEDGER,
        "faust.transport.drivers.aiokafka:ConsumerRebalanceListener.on_partitions_revoked",
        "the ledger forgets every partition and commits stop until the next assignment",
    ),
    Hook(
        _CONSUMER,
        "on_partitions_assigned",
        _LEDGER,
        "faust.transport.drivers.aiokafka:ConsumerRebalanceListener.on_partitions_assigned",
        "what was tracked while flow was suspended is forgotten: it is fetched again",
    ),
    Hook(
        f"{_BASE_CONSUMER}:Consumer",
        "callback",
        _LEDGER,
        f"{_BASE_CONSUMER}:Consumer.__init__",
        "wrapped: a message is tracked as pending before the conductor may await",
        kind="wraps",
    ),
    Hook(
        "faust.transport.drivers.aiokafka:Transport",
        "Consumer",
        "pairjudge.streams.faust_compat.offsets:_LedgerTransport",
        "faust.transport.base:Transport.create_consumer",
        "the app's consumer is the LedgerConsumer",
    ),
    Hook(
        "mode.utils.queues:FlowControlEvent",
        "resume",
        "pairjudge.streams.faust_compat.offsets:BuffersKeptOnResume",
        "faust.tables.recovery:Recovery._resume_streams",
        "marks the resume, so the clear inside it is skipped",
    ),
    Hook(
        "mode.utils.queues:FlowControlEvent",
        "clear",
        "pairjudge.streams.faust_compat.offsets:BuffersKeptOnResume",
        "mode.utils.queues:FlowControlEvent.resume",
        "resuming the flow keeps the stream buffers: records fetched between two resumes were lost",
    ),
    Hook(
        "faust.app.base:App",
        "flow_control",
        "pairjudge.streams.faust_compat.offsets:install_commit_ledger",
        "faust.streams:Stream._py_aiter",
        "the app's flow control is a BuffersKeptOnResume",
        kind="sets",
    ),
    Hook(
        "faust.app.base:App",
        "_consumer_wait_empty",
        "pairjudge.streams.faust_compat.shutdown:GracefulApp",
        "faust.app.base:App._stop_consumer",
        "the shutdown's wait for in-flight pairs is bounded by the grace",
    ),
    Hook(
        "faust.app.base:App",
        "on_stop",
        "pairjudge.streams.faust_compat.shutdown:GracefulApp",
        "mode.services:Service.stop",
        "readiness goes 503 before anything else stops",
    ),
    Hook(
        "faust.worker:Worker",
        "spinner",
        "pairjudge.streams.faust_compat.worker:QuietWorker",
        "faust.worker:Worker._setup_spinner_handler",
        "no spinner: it turned every debug line into work",
        kind="sets",
    ),
    Hook(
        "faust.worker:Worker",
        "on_setup_root_logger",
        "pairjudge.streams.faust_compat.worker:QuietWorker",
        "mode.worker:Worker._setup_logging",
        "the quiet log filter goes on Faust's own root handlers",
    ),
    Hook(
        "mode.worker:Worker",
        "on_execute",
        "pairjudge.streams.faust_compat.worker:QuietWorker",
        "mode.worker:Worker.default_on_first_start",
        "the health server and the stall watch start on the app's loop, before the app",
    ),
    Hook(
        "mode.services:Service",
        "on_shutdown",
        "pairjudge.streams.faust_compat.worker:QuietWorker",
        "mode.services:Service.stop",
        "the judges' HTTP pools, the cache and the webhook close on the loop that opened them",
    ),
    Hook(
        "faust.transport.drivers.aiokafka:Consumer",
        "_thread",
        "pairjudge.streams.faust_compat.recovery_watch:_consumer_view",
        "faust.transport.drivers.aiokafka:ConsumerRebalanceListener.on_partitions_assigned",
        "the stall watch's report of the consumer's fetch state (diagnostics: a failure reads 'unavailable')",
        kind="reads",
    ),
    Hook(
        "faust.transport.drivers.aiokafka:AIOKafkaConsumerThread",
        "_ensure_consumer",
        "pairjudge.streams.faust_compat.recovery_watch:_consumer_view",
        "faust.transport.drivers.aiokafka:ConsumerRebalanceListener.on_partitions_assigned",
        "the stall watch's report of the consumer's fetch state (diagnostics: a failure reads 'unavailable')",
        kind="reads",
    ),
    Hook(
        "faust.transport.consumer:Consumer",
        "_active_partitions",
        "pairjudge.streams.faust_compat.recovery_watch:_consumer_view",
        "faust.transport.consumer:Consumer._get_active_partitions",
        "the stall watch's report of the consumer's fetch state (diagnostics: a failure reads 'unavailable')",
        kind="reads",
    ),
    Hook(
        "faust.transport.consumer:Consumer",
        "_paused_partitions",
        "pairjudge.streams.faust_compat.recovery_watch:_consumer_view",
        "faust.transport.consumer:Consumer._set_active_tps",
        "the stall watch's report of the consumer's fetch state (diagnostics: a failure reads 'unavailable')",
        kind="reads",
    ),
    Hook(
        "faust.transport.consumer:Consumer",
        "_buffered_partitions",
        "pairjudge.streams.faust_compat.recovery_watch:_consumer_view",
        "faust.transport.consumer:Consumer.__init__",
        "the stall watch's report of the consumer's fetch state (diagnostics: a failure reads 'unavailable')",
        kind="reads",
    ),
    Hook(
        "aiokafka.consumer.consumer:AIOKafkaConsumer",
        "_subscription",
        "pairjudge.streams.faust_compat.recovery_watch:_consumer_view",
        "aiokafka.consumer.consumer:AIOKafkaConsumer.start",
        "the stall watch's report of the consumer's fetch state (diagnostics: a failure reads 'unavailable')",
        kind="reads",
    ),
    Hook(
        "aiokafka.consumer.consumer:AIOKafkaConsumer",
        "_fetcher",
        "pairjudge.streams.faust_compat.recovery_watch:_consumer_view",
        "aiokafka.consumer.consumer:AIOKafkaConsumer.start",
        "the stall watch's report of the consumer's fetch state (diagnostics: a failure reads 'unavailable')",
        kind="reads",
    ),
    Hook(
        "faust.tables.recovery:Recovery",
        "active_remaining_total",
        "pairjudge.streams.faust_compat.recovery_watch:records_left",
        "faust.tables.recovery:Recovery._publish_stats",
        "table recovery's progress, for /readyz and the stall watch",
        kind="reads",
    ),
    Hook(
        _ROCKSDB,
        "_get_bucket_for_key",
        f"{_TABLES}:get",
        f"{_ROCKSDB}._get",
        f"a table read {_BY_PARTITION}: every open database, the last one the key was seen in first",
        kind="calls",
        signature="(self, key: bytes) -> Optional[faust.stores.rocksdb._DBValueTuple]",
    ),
    Hook(
        _ROCKSDB,
        "_db_for_partition",
        f"{_TABLES}:put",
        f"{_ROCKSDB}._set",
        f"a table write {_BY_PARTITION}, opening its database if need be",
        kind="calls",
        signature="(self, partition: int) -> Rdict",
    ),
    Hook(
        _ROCKSDB,
        "_key_index",
        f"{_TABLES}:put",
        f"{_ROCKSDB}._set",
        "a write points Faust's key index at its partition, as Faust's own write does, so reads look there first",
        kind="updates",
        signature="mode.utils.collections.LRUCache[bytes, int]",
    ),
    Hook(
        _ROCKSDB,
        "_del",
        f"{_TABLES}:delete",
        "faust.stores.base:SerializedStore.__delitem__",
        f"a table delete {_BY_PARTITION}: the database the key was last seen in, else every open one",
        kind="calls",
        signature="(self, key: bytes) -> None",
    ),
    Hook(
        _ROCKSDB,
        "_dbs",
        f"{_TABLES}:page",
        f"{_ROCKSDB}._db_for_partition",
        "the sweeps walk every open database (owned and standby) with an iterator, a page at a time, not a full "
        "list of the active partitions' entries",
        kind="reads",
        signature="typing.MutableMapping[int, Rdict]",
    ),
    Hook(
        _ROCKSDB,
        "offset_key",
        f"{_TABLES}:page",
        f"{_ROCKSDB}.set_persisted_offset",
        "the changelog offset Faust keeps in each database is not a table entry: the sweeps leave it out",
        kind="reads",
        signature="b'__faust\\x00offset__'",
    ),
)
