"""A bare Faust pass-through agent: row 6's yardstick in ``bench.speed``.

Run by path (``python bench/_passthrough.py --bootstrap ... --in-topic ... --out-topic ...``). One
faust-streaming app, configured as ``streams/worker/faust_app.py`` configures pairjudge's (commit every 50 or 1 s,
``acks=all``, bounded stream buffers of ``max(64, 4 × concurrency)``, earliest offsets, no declared
topics, the same session and heartbeat times), with ONE agent of the same concurrency on a raw-bytes
topic. For every input it sends one output of the measured size of pairjudge's final outcome (value
and headers) to the output topic and awaits the broker's acknowledgement before taking the next, as
pairjudge must before its input counts as done. The value starts ``<key>|<input timestamp ms>|``, then
padding. No JSON, no judging: what is left is Faust and Kafka.

With ``--writes`` it also makes the broker writes pairjudge's delivery makes for a decided pair, on the same
table store (RocksDB), with nothing else: the outcome recorded in a changelog-backed table and its
acknowledgement awaited *before* the output is sent; after the output's acknowledgement the entry replaced by
its published mark (not awaited); and the pair's entry in a second, co-partitioned table (the audit join's,
not awaited). That is the floor under pairjudge's instant-judge row while it keeps one recorded outcome per
pair (docs/design.md §2.12): what the judging, decoding and events add comes on top of it.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import AsyncIterator
from typing import Any

import faust
from faust import Worker


def build(args: argparse.Namespace) -> faust.App:
    app = faust.App(
        args.app_id,
        broker=f"kafka://{args.bootstrap}",
        datadir=args.data_dir,
        topic_allow_declare=False,
        topic_disable_leader=True,
        topic_partitions=args.partitions,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=args.session_timeout,
        broker_heartbeat_interval=args.heartbeat_interval,
        broker_commit_every=50,
        broker_commit_interval=1.0,
        web_enabled=False,
        stream_buffer_maxsize=max(64, args.concurrency * 4),
        producer_acks=-1,
        store="rocksdb://" if args.writes else "memory://",
    )

    def raw(name: str) -> Any:
        return app.topic(
            name,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=args.partitions,
        )

    source, sink = raw(args.in_topic), raw(args.out_topic)
    header_value = b"0" * max(0, args.header_bytes - len("traceparent"))
    headers = [("traceparent", header_value)] if args.header_bytes else []

    def table(name: str) -> Any:
        return app.Table(name, default=None, key_type=bytes, value_type=bytes, partitions=args.partitions)

    outcomes, joined = (table("bench-outcomes"), table("bench-join")) if args.writes else (None, None)

    @app.agent(source, name="bench.passthrough", concurrency=args.concurrency)
    async def passthrough(stream: Any) -> AsyncIterator[None]:
        async for event in stream.events():
            message = event.message
            key: bytes = message.key or b""
            head = key + b"|" + str(int(message.timestamp * 1000)).encode() + b"|"
            value = head + b"x" * max(0, args.value_bytes - len(head))
            if outcomes is not None:
                # Written here, then on the changelog, acknowledged before the output leaves (as `record`).
                outcomes.data[key] = value
                await outcomes.send_changelog(message.partition, key, value)
            fut = await sink.send(key=key, value=value, headers=headers)
            await fut
            if outcomes is not None and joined is not None:
                mark = b"1:0:!published"
                outcomes.data[key] = mark
                outcomes.send_changelog(message.partition, key, mark)
                joined.data[key] = value
                joined.send_changelog(message.partition, key, value)
            yield None

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--in-topic", required=True)
    parser.add_argument("--out-topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--value-bytes", type=int, required=True)
    parser.add_argument("--header-bytes", type=int, required=True)
    parser.add_argument("--writes", action="store_true", help="also make pairjudge's broker writes per pair")
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("--heartbeat-interval", type=float, default=1.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    app = build(args)
    Worker(app, loglevel="warning", quiet=True).execute_from_commandline()


if __name__ == "__main__":
    main()
