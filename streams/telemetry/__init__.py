"""Telemetry at the edge: OpenTelemetry tracing and metrics, quiet logs, alert webhooks.

- ``tracing``: providers, ``traceparent`` in Kafka headers, spans for judge calls.
- ``logs``: rate-limited, de-duplicated logging for the worker process.
- ``alerts``: alerts to a webhook (generic JSON or Slack), rate-limited, retried in the background.
- ``alert_views``: what an alert says in chat: its plain title, series, value against its bound, links (Block Kit).
"""
