#!/usr/bin/env bash
# Install Arize Phoenix (an OTLP trace backend with an HTTP API) in an environment of its own, for the
# test that exports the demo's traces to a real observability backend. Idempotent: an environment
# that already has the pinned version is left as it is.
#
#   deploy/phoenix/setup.sh
#
# Environment:
#   PAIRJUDGE_CACHE   where the environment lives (default: ~/.cache/pairjudge); it is
#                     $PAIRJUDGE_CACHE/phoenix-venv, about 850 MB.
# Its own environment because Phoenix pins its own versions of libraries pairjudge uses too
# (OpenTelemetry, pydantic, grpc): the two never share a site-packages. Prints the Python path last.
set -euo pipefail

CACHE="${PAIRJUDGE_CACHE:-$HOME/.cache/pairjudge}"
PHOENIX_VERSION="20.26.1"
VENV="$CACHE/phoenix-venv"
PY="$VENV/bin/python"

log() { printf 'setup-phoenix: %s\n' "$*" >&2; }

installed=""
if [[ -x "$PY" ]]; then
    # Read whole, then matched: grep -q on a pipe would end pip early and pipefail would call it a failure.
    installed="$("$PY" -m pip show arize-phoenix 2>/dev/null || true)"
fi
if grep -qx "Version: $PHOENIX_VERSION" <<<"$installed"; then
    log "arize-phoenix $PHOENIX_VERSION already in $VENV"
else
    log "installing arize-phoenix==$PHOENIX_VERSION into $VENV (about a minute)"
    python3 -m venv --clear "$VENV"
    "$PY" -m pip install -q --disable-pip-version-check "arize-phoenix==$PHOENIX_VERSION"
fi
printf '%s\n' "$PY"
