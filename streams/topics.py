"""The topics of DESIGN §1, their partition counts, and their explicit creation.

Faust never creates source topics, and a topic auto-created with one partition crash-loops an agent
whose tables have more (``PartitionsMismatch``), so every topic is created here, up front.
"""

from __future__ import annotations

from typing import Literal

from streams.brokers import TopicSpec
from streams.settings import Settings

#: Topic kinds. ``control`` is compacted: the latest value per key is the live setting.
KINDS = ("pairs", "verdicts", "tiebreak", "review", "labels", "deadletter", "audit", "control")
#: Where a pair's story ends. ``tiebreak`` is a way-station, not an outcome.
FINAL_KINDS = ("verdicts", "review", "deadletter")
#: The stages that record their outcomes in a table of their own (streams.outcomes).
STAGES: tuple[Literal["primary", "tiebreak"], ...] = ("primary", "tiebreak")


def outcome_table_name(stage: str) -> str:
    return f"outcomes-{stage}"


def changelog_topic(app_id: str, stage: str) -> str:
    """The changelog topic of a stage's outcome table, named as Faust names it (``<app id>-<table>-changelog``)."""
    return f"{app_id}-{outcome_table_name(stage)}-changelog"


def topic_specs(settings: Settings) -> dict[str, TopicSpec]:
    partitions = settings.kafka.partitions
    replication = settings.kafka.replication_factor
    specs = {}
    for kind in KINDS:
        specs[settings.topics.name(kind)] = TopicSpec(
            partitions=1 if kind == "control" else partitions,
            compacted=kind == "control",
            replication=replication,
        )
    # Faust declares nothing here (topic_allow_declare=False), so the tables' changelogs are created
    # with the same partition count as their source topics, compacted.
    for stage in STAGES:
        specs[changelog_topic(settings.worker.app_id, stage)] = TopicSpec(
            partitions=partitions, compacted=True, replication=replication
        )
    return specs
