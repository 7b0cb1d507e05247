"""Telemetry at the edge: OpenTelemetry tracing and metrics, quiet logs, alert webhooks.

- ``tracing``: providers, ``traceparent`` in Kafka headers, spans for judge calls.
- ``logs``: rate-limited, de-duplicated logging for the worker process.
- ``alerts``: alerts to a webhook, retried in the background.
"""
