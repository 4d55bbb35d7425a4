#!/usr/bin/env bash
# The measured runs behind docs/benchmarks.md ("## Workloads"): every workload
# at the sizes quoted there, with DuckDB (`pip install duckdb`). About 20
# minutes on 2 cores once the data is cached (the first run generates it).
# Results go to bench-results/ (gitignored), charts to docs/charts/.
# PLEROMA_BIN runs a prebuilt binary instead of building this tree.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PLEROMA_BIN:-}" ]; then
    cargo build --release --bin pleroma
    PLEROMA_BIN=target/release/pleroma
fi
out=bench-results
mkdir -p "$out" docs/charts
all=sqlite,engine,plane,duckdb
run() { # name, then the bench arguments
    local name=$1
    shift
    echo "== $name: pleroma bench $*" >&2
    "$PLEROMA_BIN" bench "$@" --json "$out/$name.json" --svg "docs/charts/$name.svg" | tee "$out/$name.md"
}
run ledger-1m ledger --rows 1000000 --arms "$all" --load
# At 10,000,000 rows: the queries the plane serves, and one it declines; the
# joins would take minutes per call on SQLite.
run ledger-10m ledger --rows 10000000 --arms "$all" --min-calls 1 \
    --only total_invoiced,invoice_count,revenue_by_region,count_by_status,revenue_by_month,paid_h1_by_region_month,overdue_exposure,big_ticket_count
run dashboard-1m dashboard --rows 1000000 --arms "$all"
for n in 100000 300000 1000000; do
    run "classes-$n" classes --rows "$n" --arms "$all"
done
run writes-100k writes --rows 100000
run writes-1m writes --rows 1000000
run speedtest speedtest
