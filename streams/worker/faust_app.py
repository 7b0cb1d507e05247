"""The Faust app the worker runs, and its raw topics: every Faust setting pairjudge chooses, and why."""

from __future__ import annotations

from collections.abc import Sequence

import faust

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.faust_compat.offsets import install_commit_ledger
from pairjudge.streams.faust_compat.runtime import check_runtime
from pairjudge.streams.faust_compat.shutdown import GracefulApp
from pairjudge.streams.judges.breaker import CircuitBreaker
from pairjudge.streams.kafka.topics import KINDS
from pairjudge.streams.security.kafka_clients import faust_credentials


def _broker_url(bootstrap_servers: str) -> str:
    hosts = [h.strip() for h in bootstrap_servers.split(",") if h.strip()]
    return ";".join(f"kafka://{h}" for h in hosts)


def build_faust_app(settings: Settings, *, breakers: Sequence[CircuitBreaker]) -> GracefulApp:
    """The configured ``faust.App``, committing through the offset ledger; nothing is declared on it yet."""
    kafka = settings.kafka
    # Every path to a Faust app comes here (the worker, the demo's worker, the benches' workers): the overrides
    # installed below are only known to be called on the verified versions (streams.faust_compat.runtime).
    check_runtime(allow=settings.worker.allow_unverified_runtime)
    # A faust.App whose shutdown on SIGTERM is bounded by the grace (streams.faust_compat.inflight).
    app = GracefulApp(
        settings.worker.app_id,
        broker=_broker_url(kafka.bootstrap_servers),
        # TLS/SASL (streams.security.kafka_clients): Faust hands these to its consumer
        # (streams.faust_compat.offsets' subclass too), producer and every other client it creates.
        broker_credentials=faust_credentials(kafka),
        datadir=str(settings.worker.data_dir),
        # The tables' store (streams.worker.tables): RocksDB under datadir, or Faust's dict.
        store=f"{settings.worker.table_store}://",
        # Topics are created explicitly (streams.kafka.topics); faust must not declare anything itself,
        # and the leader topic is not used.
        topic_allow_declare=False,
        topic_disable_leader=True,
        topic_partitions=kafka.partitions,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=kafka.session_timeout_s,
        broker_heartbeat_interval=kafka.heartbeat_interval_s,
        broker_commit_every=50,
        broker_commit_interval=1.0,
        web_enabled=settings.worker.web_enabled,
        web_bind=settings.worker.web_host,
        web_host=settings.worker.web_host,
        web_port=settings.worker.web_port,
        # Bounded per-partition buffers: when judges are slow the worker stops fetching, it does not queue.
        stream_buffer_maxsize=max(64, settings.worker.concurrency * 4),
        producer_acks=-1,
        # Batching (KafkaSettings.producer_linger_ms, max_poll_records): a produce request costs a syscall and
        # a broker round trip whatever it carries, and a worker's outputs, changelog records and marks
        # come in bursts.
        producer_linger=kafka.producer_linger_ms / 1000,
        broker_max_poll_records=kafka.max_poll_records,
    )

    # Before anything builds the consumer: commits follow the project's offset ledger (streams.faust_compat.offsets).
    install_commit_ledger(app)
    app.shutdown_grace_s = settings.worker.shutdown_grace_s
    app.breakers = breakers
    return app


def raw_topics(app: faust.App, settings: Settings) -> dict[str, faust.TopicT]:
    """Every topic of ``streams.kafka.topics.KINDS`` on ``app``, as raw bytes (the codecs decode them)."""

    def raw_topic(kind: str) -> faust.TopicT:
        return app.topic(
            settings.topics.name(kind),
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=settings.kafka.partitions,
        )

    return {kind: raw_topic(kind) for kind in KINDS}
