#!/usr/bin/env bash
# The README's test command: install what the tests compare against when a
# fresh machine lacks it, then run every test of the workspace.
#
# The shell tests diff `pleroma shell` against the sqlite3 program; the
# server tests (server/tests) run psql (Debian's postgresql-client) and
# Python's psycopg against `pleroma serve`. Without them they fail (they
# never skip). Building needs only the Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
command -v psql >/dev/null 2>&1 || need+=(postgresql-client)
command -v python3 >/dev/null 2>&1 || need+=(python3 python3-pip)
if [ ${#need[@]} -gt 0 ]; then
  echo "scripts/test.sh: installing ${need[*]} for the tests" >&2
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq "${need[@]}"
  elif command -v dnf >/dev/null 2>&1; then
    "${sudo[@]}" dnf install -y "${need[@]}"
  elif command -v brew >/dev/null 2>&1; then
    brew install "${need[@]}"
  else
    echo "scripts/test.sh: install ${need[*]} with your package manager, then run this again" >&2
    exit 1
  fi
fi

# psycopg 3 from PyPI, for the server tests; binary wheels need no libpq.
if ! python3 -c "import psycopg" >/dev/null 2>&1; then
  echo "scripts/test.sh: installing psycopg for the server tests" >&2
  python3 -m pip install --quiet "psycopg[binary]" ||
    python3 -m pip install --quiet --break-system-packages "psycopg[binary]"
fi

cargo test --workspace "$@"
