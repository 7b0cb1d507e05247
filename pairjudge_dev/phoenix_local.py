"""Start Arize Phoenix with every listening port on 127.0.0.1 (tests and local use, not shipped).

Phoenix binds its HTTP server to ``PHOENIX_HOST``, but its OTLP/gRPC receiver always to ``[::]``
(every interface), with no setting to change that. This launcher runs Phoenix's own entry point with
gRPC's ``add_insecure_port`` rewriting ``[::]`` to ``127.0.0.1``. Run it with the Python of the
environment Phoenix is installed in (``deploy/phoenix/setup.sh``), never with pairjudge's:

    ~/.cache/pairjudge/phoenix-venv/bin/python pairjudge_dev/phoenix_local.py serve

It imports nothing of pairjudge, so it runs there unchanged.
"""

from __future__ import annotations

import sys
from typing import Any

from grpc.aio import _server  # type: ignore[import-not-found,import-untyped,unused-ignore]

_add_insecure_port = _server.Server.add_insecure_port


def _loopback_only(self: Any, address: str) -> int:
    port: int = _add_insecure_port(self, address.replace("[::]", "127.0.0.1").replace("0.0.0.0", "127.0.0.1"))
    return port


_server.Server.add_insecure_port = _loopback_only

if __name__ == "__main__":
    from phoenix.server.main import main  # type: ignore[import-not-found,unused-ignore]

    sys.exit(main())
