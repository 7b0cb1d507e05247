"""``pairjudge gateway``: an OpenAI-compatible reverse proxy in front of the champion that captures a share of its
exchanges onto ``pairjudge.captures`` (docs/guides/gateway.md), with no change to the app but its base URL.

Modules:

- ``proxy``: ``Proxy``, the handler: every request to the champion and its response back unchanged (streams
  chunk by chunk), then the capture handed to the sink (``streams.capture``) off the request's path.
- ``sampling``: ``Sampler``, which exchanges are captured (the shadow stage's own draw, per experiment).
- ``server``: the aiohttp application with ``/healthz``, ``/readyz`` and ``/metrics``; ``serve`` for the CLI.
"""

from pairjudge.streams.gateway.proxy import Proxy, captured_api
from pairjudge.streams.gateway.sampling import Sampler
from pairjudge.streams.gateway.server import GatewaySettingsError, build_app, running, serve

__all__ = ["GatewaySettingsError", "Proxy", "Sampler", "build_app", "captured_api", "running", "serve"]
