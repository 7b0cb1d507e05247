"""A bare Faust pass-through agent: row 6's yardstick in ``bench.speed``.

Run by path (``python bench/_passthrough.py --bootstrap ... --in-topic ... --out-topic ...``). One
faust-streaming app, configured as ``streams/worker/faust_app.py`` configures pairjudge's (commit every 50 or 1 s,
``acks=all``, bounded stream buffers of ``max(64, 4 × concurrency)``, earliest offsets, no declared
topics, the same session and heartbeat times), with ONE agent of the same concurrency on a raw-bytes
topic. For every input it sends one output of the measured size of pairjudge's final outcome (value
and headers) to the output topic and awaits the broker's acknowledgement before taking the next, as
pairjudge must before its input counts as done. The value starts ``<key>|<input timestamp ms>|``, then
padding. No JSON, no judging: what is left is Faust and Kafka.
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

    @app.agent(source, name="bench.passthrough", concurrency=args.concurrency)
    async def passthrough(stream: Any) -> AsyncIterator[None]:
        async for event in stream.events():
            message = event.message
            head = (message.key or b"") + b"|" + str(int(message.timestamp * 1000)).encode() + b"|"
            value = head + b"x" * max(0, args.value_bytes - len(head))
            fut = await sink.send(key=message.key, value=value, headers=headers)
            await fut
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
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("--heartbeat-interval", type=float, default=1.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    app = build(args)
    Worker(app, loglevel="warning", quiet=True).execute_from_commandline()


if __name__ == "__main__":
    main()
