"""The worker's runtime: the stage handlers, what each stage published, table sweeps, probes, shutdown.

- ``pipeline``: the stage handlers, free of Faust (bytes and headers in, messages out).
- ``published``: one outcome per pair and stage, kept where a redelivery finds it.
- ``tables``: walking a large Faust table without stalling the agents.
- ``health_server``: ``/livez``, ``/readyz`` and ``/metrics``.
- ``shutdown``: graceful SIGTERM within a grace period.
"""
