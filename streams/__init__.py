"""pairjudge's edges: Kafka, HTTP, OpenTelemetry, the web and the command line around the pure core.

Where a change belongs, by package (each package's own docstring lists its modules):

- ``services``: ``build_services(settings, mode)``: what a worker, the Python API or the review service judges
  with, built one way for all three.
- ``app``: the worker's composition root. ``create_app(settings)`` wires its services and the parts below into a
  Faust app.
- ``worker/``: the worker's runtime: the stage handlers, delivery (at least once), outcome tables,
  probes and the graceful shutdown.
- ``kafka/``: the broker admin, topics, codecs, dead letters, producing and reading back, the
  embedded broker.
- ``faust_compat/``: every replacement of, or read into, Faust's internals, with an index checked
  against the installed Faust.
- ``control/``: live settings on the compacted control topic, and their signatures.
- ``audit/``: the drift audit's stream side, the label budget, label files, canaries, the report.
- ``scores/``: the scoreboard's stream side, what it shows, its charts, the gate reader.
- ``judges/``: the HTTP judges, the cache, the circuit breaker, cost, the judge factory.
- ``review/``: the human-review service (queue, web UI, labels back to Kafka).
- ``capture/``: the producer SDK: production exchanges captured in an app, onto ``pairjudge.captures``.
- ``security/``: Kafka client security, the clear-text rule, private files, outgoing redaction.
- ``telemetry/``: tracing and metrics, quiet logs, alert webhooks.
- ``config/``: settings from the environment, secret files and a TOML file.
- ``cli/``: the ``pairjudge`` command, one module per command group.

Nothing is imported here: ``pairjudge review`` or ``pairjudge gate`` must not pay for Faust.
"""
