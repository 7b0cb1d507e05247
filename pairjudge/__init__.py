"""pairjudge: streaming pairwise judging of AI outputs on Kafka.

One import namespace over the three layers (docs/design.md §6): ``pairjudge.schemas`` (contracts),
``pairjudge.agents`` (the pure judging core) and ``pairjudge.streams`` (Kafka, HTTP, OTel, the web, the CLI).
"""
