"""The producer SDK: captures of an app's own provider calls, off its request path, onto ``pairjudge.captures``.

    from openai import AsyncOpenAI
    from pairjudge.streams.capture import CaptureSink, wrap_openai

    sink = CaptureSink("kafka:9092")                 # or CaptureSink.from_settings(settings)
    client = wrap_openai(AsyncOpenAI(), sink, route="/support/chat", prompt_version="v7")

Modules:

- ``sink``: ``CaptureSink``: the bounded buffer, the background sender, the drop counts.
- ``wrap``: ``wrap_openai``, ``wrap_anthropic``, ``capture_meta``: transparent capture around the official
  async clients, streamed replies included.
- ``bodies``: the SDKs' objects as JSON bodies, streamed pieces assembled (on the sender's thread).

Guide: docs/guides/capture-sdk.md.
"""

from pairjudge.streams.capture.sink import DROP_REASONS, CaptureMeta, CaptureSink, CaptureStats, DropReason
from pairjudge.streams.capture.wrap import CapturedStream, capture_meta, wrap_anthropic, wrap_openai

__all__ = [
    "DROP_REASONS",
    "CaptureMeta",
    "CaptureSink",
    "CaptureStats",
    "CapturedStream",
    "DropReason",
    "capture_meta",
    "wrap_anthropic",
    "wrap_openai",
]
