"""Production exchanges to captures: pure normalisers from each provider API to one shape, OpenAI chat's.

    capture = make_capture("anthropic_messages", request_body, response_body, capture_id="c-1")

- ``chat``: OpenAI chat completions (and a streamed reply's chunks joined: ``assemble_chat_chunks``).
- ``anthropic``: Anthropic Messages (``assemble_anthropic_events`` for a streamed reply).
- ``responses``: the OpenAI Responses API (``final_response`` for a streamed reply).
- ``build``: ``make_capture`` (one exchange, with its source, hints and trace) and ``map_texts`` (the redaction
  hook over every text of a capture).

Bodies are decoded JSON (``dict``), as the provider's wire carries them: no HTTP client, no SDK type, no Kafka
here. Used by the producer SDK (``pairjudge.streams.capture``); the gateway and the LiteLLM callback read the
same bodies.
"""

from pairjudge.agents.capture._read import CaptureUnreadable
from pairjudge.agents.capture.anthropic import anthropic_request, anthropic_response, assemble_anthropic_events
from pairjudge.agents.capture.build import NORMALISERS, make_capture, map_texts
from pairjudge.agents.capture.chat import assemble_chat_chunks, chat_request, chat_response
from pairjudge.agents.capture.responses import final_response, responses_request, responses_response

__all__ = [
    "NORMALISERS",
    "CaptureUnreadable",
    "anthropic_request",
    "anthropic_response",
    "assemble_anthropic_events",
    "assemble_chat_chunks",
    "chat_request",
    "chat_response",
    "final_response",
    "make_capture",
    "map_texts",
    "responses_request",
    "responses_response",
]
