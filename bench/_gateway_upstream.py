"""The bench's champion: an OpenAI-compatible chat completions server with a fixed latency and streamed tokens.

    python -m bench._gateway_upstream PORT LATENCY_MS CHUNKS CHUNK_MS

Unstreamed: the whole completion after ``LATENCY_MS``. Streamed: the first chunk after ``LATENCY_MS``, then
``CHUNKS`` more ``CHUNK_MS`` apart, then ``[DONE]``. A request for a model whose name ends in ``-fast`` is answered
at once, with no latency and no pause between chunks (the bench's closed loop, through the same proxies). Run in a
process of its own, so it does not share the gateway's or the load generator's event loop.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Final

from aiohttp import web

#: The suffix of a model name answered without latency.
FAST: Final = "-fast"


def _chunk(text: str) -> bytes:
    body = {
        "id": "chatcmpl-b",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "bench",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


def main() -> None:
    port, latency_ms, chunks, chunk_ms = (int(a) for a in sys.argv[1:5])
    whole = json.dumps(
        {
            "id": "chatcmpl-b",
            "object": "chat.completion",
            "created": 1,
            "model": "bench",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "tok " * chunks}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": chunks, "total_tokens": 20 + chunks},
        }
    ).encode()
    piece = _chunk("tok ")

    async def answer(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        fast = str(body.get("model", "")).endswith(FAST)
        if latency_ms and not fast:
            await asyncio.sleep(latency_ms / 1000)
        if not body.get("stream"):
            return web.Response(body=whole, content_type="application/json")
        out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await out.prepare(request)
        await out.write(piece)
        for _ in range(chunks):
            if chunk_ms and not fast:
                await asyncio.sleep(chunk_ms / 1000)
            await out.write(piece)
        await out.write(b"data: [DONE]\n\n")
        await out.write_eof()
        return out

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


if __name__ == "__main__":
    main()
