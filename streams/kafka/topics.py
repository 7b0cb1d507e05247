"""The topics of docs/design.md §1, their partition counts, and their explicit creation.

Faust never creates source topics, and a topic auto-created with one partition crash-loops an agent
whose tables have more (``PartitionsMismatch``), so every topic is created here, up front.
"""

from __future__ import annotations

from aiokafka.partitioner import murmur2

from pairjudge.schemas.kinds import STAGES as STAGE_SPECS
from pairjudge.schemas.kinds import TOPICS, TopicKind, WorkerStage
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import TopicSpec

#: Topic kinds, each declared once with its layout in ``schemas.kinds.TOPICS``.
KINDS: tuple[TopicKind, ...] = tuple(TOPICS)
#: Compacted, one partition, read whole by every worker (streams.control.live, streams.worker.spend).
FOLLOWED_KINDS: tuple[TopicKind, ...] = tuple(k for k, spec in TOPICS.items() if spec.layout == "followed")
#: Compacted, one partition, read whole by whoever asks (``pairjudge gate``).
LATEST_KINDS: tuple[TopicKind, ...] = tuple(k for k, spec in TOPICS.items() if spec.layout == "latest")
#: Where a pair's story ends. ``tiebreak`` is a way-station, not an outcome.
FINAL_KINDS: tuple[TopicKind, ...] = tuple(k for k, spec in TOPICS.items() if spec.final)
#: The stages that record their outcomes in a table of their own (streams.worker.published).
STAGES: tuple[WorkerStage, ...] = tuple(STAGE_SPECS)
#: The topics the stages consume, in stage order.
STAGE_SOURCES: tuple[TopicKind, ...] = tuple(spec.source for spec in STAGE_SPECS.values())


def outcome_table_name(stage: str) -> str:
    return f"outcomes-{stage}"


#: The drift audit's tables (streams.audit.handlers): the label join by pair id, the window sums by series.
AUDIT_JOIN_TABLE = "audit-join"
AUDIT_WINDOWS_TABLE = "audit-windows"
#: The scoreboards by experiment (streams.scores.handlers).
SCORES_TABLE = "scores"


def table_names() -> tuple[str, ...]:
    """Every changelog-backed table a worker keeps."""
    return (*(outcome_table_name(stage) for stage in STAGES), AUDIT_JOIN_TABLE, AUDIT_WINDOWS_TABLE, SCORES_TABLE)


def changelog_topic(app_id: str, table: str) -> str:
    """A table's changelog topic, named as Faust names it (``<app id>-<table>-changelog``)."""
    return f"{app_id}-{table}-changelog"


def topic_specs(settings: Settings) -> dict[str, TopicSpec]:
    partitions = settings.kafka.partitions
    replication = settings.kafka.replication_factor
    specs = {}
    for kind, spec in TOPICS.items():
        single = spec.single_partition
        specs[settings.topics.name(kind)] = TopicSpec(
            partitions=1 if single else partitions,
            compacted=single,
            replication=replication,
        )
    # Faust declares nothing here (topic_allow_declare=False), so the tables' changelogs are created
    # with the same partition count as their source topics, compacted.
    for table in table_names():
        specs[changelog_topic(settings.worker.app_id, table)] = TopicSpec(
            partitions=partitions, compacted=True, replication=replication
        )
    return specs


def partition_of(key: bytes, partitions: int) -> int:
    """The partition the workers' producer (aiokafka's default partitioner, Kafka's murmur2) puts ``key`` in,
    of a topic with ``partitions`` partitions: where a pair's decision records and labels land."""
    hashed: int = murmur2(key)
    return (hashed & 0x7FFFFFFF) % partitions
