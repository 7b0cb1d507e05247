"""``pairjudge review``: the human-review service (queue, web UI, labels back to Kafka)."""
