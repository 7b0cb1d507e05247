"""The topics of docs/design.md §1, their partition counts, and their explicit creation.

Faust never creates source topics, and a topic auto-created with one partition crash-loops an agent
whose tables have more (``PartitionsMismatch``), so every topic is created here, up front.
"""

from __future__ import annotations

from typing import Literal

from aiokafka.partitioner import murmur2

from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import TopicSpec

#: Topic kinds. ``control`` is compacted: the latest value per key is the live setting.
KINDS = (
    "pairs",
    "verdicts",
    "tiebreak",
    "review",
    "labels",
    "deadletter",
    "audit",
    "control",
    # The drift audit's internal topics: each stage's decision records (keyed by pair id, beside the
    # outcomes) and the joined observations (keyed by series). See streams.audit.handlers.
    "decisions",
    "observations",
    # The calibrated auto-decision thresholds by series, compacted like control: every worker follows it.
    "thresholds",
    # The champion-challenger scoreboard (streams.scores.handlers): its input keyed by experiment, its snapshots,
    # and the gate's latest decision per experiment (compacted).
    "score-events",
    "scores",
    "gate",
    # What each worker spent on judge calls per clock hour (compacted, latest per worker and hour): every worker
    # follows it for the spending caps (streams.worker.spend).
    "spend",
)
#: Compacted, one partition, read whole by every worker (streams.control.live, streams.worker.spend).
FOLLOWED_KINDS = ("control", "thresholds", "spend")
#: Compacted, one partition, read whole by whoever asks (``pairjudge gate``).
LATEST_KINDS = ("gate",)
#: Where a pair's story ends. ``tiebreak`` is a way-station, not an outcome.
FINAL_KINDS = ("verdicts", "review", "deadletter")
#: The stages that record their outcomes in a table of their own (streams.worker.published).
STAGES: tuple[Literal["primary", "tiebreak"], ...] = ("primary", "tiebreak")


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
    for kind in KINDS:
        single = kind in FOLLOWED_KINDS or kind in LATEST_KINDS
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
