"""Kafka at the edge: the broker admin, the topics, the codecs, dead letters, producing and reading back.

- ``admin``: readiness, explicit topic creation, partition lists.
- ``topics``: the topic names and their partition counts.
- ``codecs``: bytes to and from the pydantic contracts.
- ``dead_letters``: dead letters that always fit.
- ``producer``: putting pairs on the pairs topic, each starting its own trace.
- ``collector``: reading outcomes back, de-duplicated by pair id.
- ``embedded``: the embedded broker behind ``pairjudge demo``.
"""
