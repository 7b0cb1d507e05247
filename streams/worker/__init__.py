"""The worker's runtime: the Faust app, delivery, the stage handlers, recorded outcomes, tables, probes, shutdown.

- ``faust_app``: the ``faust.App`` and its topics, with every Faust setting pairjudge chooses.
- ``delivery``: at-least-once delivery (publish, record, ack) and the stages' agents.
- ``pipeline``: the stage handlers, free of Faust (bytes and headers in, messages out).
- ``published``: one outcome per pair and stage, kept where a redelivery finds it.
- ``tables``: which partitions this worker owns, writing a table entry and its changelog record, walking
  a large Faust table without stalling the agents.
- ``health_server``: ``/livez``, ``/readyz`` and ``/metrics``.
- ``shutdown``: graceful SIGTERM within a grace period.
- ``spend``: the spending caps' ledger and gate, shared across workers on the spend topic.
- ``tasks``: a long-running task whose failure stops the worker (the control and spend followers).
"""
