"""The topics of DESIGN §1, their partition counts, and their explicit creation.

Faust never creates source topics, and a topic auto-created with one partition crash-loops an agent
whose tables have more (``PartitionsMismatch``), so every topic is created here, up front.
"""

from __future__ import annotations

from streams.brokers import TopicSpec
from streams.settings import Settings

#: Topic kinds. ``control`` is compacted: the latest value per key is the live setting.
KINDS = ("pairs", "verdicts", "tiebreak", "review", "labels", "deadletter", "audit", "control")
#: Where a pair's story ends. ``tiebreak`` is a way-station, not an outcome.
FINAL_KINDS = ("verdicts", "review", "deadletter")


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
    return specs
