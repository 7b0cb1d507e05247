"""Live settings on the compacted ``pairjudge.control`` topic, and their signatures.

- ``live``: reading and applying control records without a redeploy.
- ``signing``: HMAC-SHA256 over each control record, carried in its Kafka headers.
"""
