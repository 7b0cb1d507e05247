#!/usr/bin/env bash
# Create the secret files deploy/compose.yaml reads (compose `secrets:`, mounted at /run/secrets/<name>
# and read through pairjudge's *_FILE settings). Idempotent: an existing file is never overwritten.
#
#   deploy/compose/make-secrets.sh [DIR]          # DIR defaults to deploy/compose/secrets
#
# Random values come from Python's `secrets` module. The review users file starts empty (nobody can sign
# in): add people with `pairjudge review hash-password` (see deploy/README.md); the read API's tokens file
# starts with no token (docs/guides/read-api.md). The judge key is a random
# placeholder, used by the optional `judge` profile's llama.cpp server; put a real provider's key there to
# use a hosted judge instead.
#
# Permissions: DIR is 0700, so other users on the host cannot read the secrets; the files are 0644 because
# Compose bind-mounts each one into containers that run as other UIDs (pairjudge 10001, postgres 999),
# which must be able to read it. Keep DIR out of version control (.gitignore has it).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${1:-$here/secrets}"
umask 077
mkdir -p "$dir"
chmod 0700 "$dir"

random() { python3 -c 'import secrets; print(secrets.token_urlsafe(32))'; }

put() { # put NAME VALUE: write NAME once, readable by the containers' users
    local path="$dir/$1"
    if [[ -e "$path" ]]; then
        printf 'make-secrets: %s exists, kept\n' "$path" >&2
        return
    fi
    printf '%s\n' "$2" >"$path"
    chmod 0644 "$path"
    printf 'make-secrets: wrote %s\n' "$path" >&2
}

password="$(random)"
if [[ -e "$dir/postgres_password" ]]; then
    password="$(<"$dir/postgres_password")"
fi
put postgres_password "$password"
# The review service's SQLAlchemy URL: the same password, for the compose network's `postgres` host.
put review_database_url "postgresql+psycopg://pairjudge:${password}@postgres:5432/pairjudge"
put review_session_secret "$(random)"
put review_users '[]'
# The read API's tokens (hashes only): none at first, so every /api/v1/ path answers 401. Add a line per caller
# with `pairjudge review token new --name argo-rollouts`; delete a line to revoke (read again on change).
put review_api_tokens '# pairjudge read API tokens: one line per token, from `pairjudge review token new`'
put control_signing_key "$(random)"
put judge_api_key "$(random)"
