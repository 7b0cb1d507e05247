"""Security at the edge: Kafka client security, the clear-text rule, private files, outgoing redaction.

- ``kafka_clients``: settings in, Kafka client configuration (TLS, SASL) out.
- ``cleartext``: secrets never travel in clear text off the host.
- ``files``: files only their owner can read.
- ``redaction_hook``: dead letters and review requests redacted before they are published.
"""
