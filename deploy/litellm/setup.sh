#!/usr/bin/env bash
# Install a LiteLLM proxy (litellm 1.110.2) in an environment of its own, for the tests and the bench that run
# pairjudge's LiteLLM callback (streams/capture/litellm_callback.py) in a real proxy process. Idempotent: an
# environment that already has the pinned version is left as it is.
#
#   deploy/litellm/setup.sh
#
# Environment:
#   PAIRJUDGE_CACHE   where the environment lives (default: ~/.cache/pairjudge); it is
#                     $PAIRJUDGE_CACHE/litellm-venv, about 700 MB.
# Its own environment because LiteLLM's proxy pins older versions of libraries pairjudge's environment has newer
# (cryptography, rich, python-dateutil, importlib-metadata): installed together, pip would downgrade them.
# pairjudge itself is not installed there: the proxy imports the callback from the checkout (PYTHONPATH), with
# the few libraries the callback needs (requirements.txt's last lines). Prints the Python path last.
set -euo pipefail

CACHE="${PAIRJUDGE_CACHE:-$HOME/.cache/pairjudge}"
LITELLM_VERSION="1.110.2"
VENV="$CACHE/litellm-venv"
PY="$VENV/bin/python"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

log() { printf 'setup-litellm: %s\n' "$*" >&2; }

installed=""
if [[ -x "$PY" ]]; then
    # Read whole, then matched: grep -q on a pipe would end pip early and pipefail would call it a failure.
    installed="$("$PY" -m pip show litellm aiokafka 2>/dev/null || true)"
fi
if grep -qx "Version: $LITELLM_VERSION" <<<"$installed" && grep -qx "Name: aiokafka" <<<"$installed"; then
    log "litellm $LITELLM_VERSION already in $VENV"
else
    log "installing litellm==$LITELLM_VERSION and its proxy into $VENV (about a minute)"
    python3 -m venv --clear "$VENV"
    "$PY" -m pip install -q --disable-pip-version-check -r "$HERE/requirements.txt"
fi
printf '%s\n' "$PY"
