"""Pleroma from Python, side by side with the Rust API, the sqlite3 module
and DuckDB, on the demo's ledger.

    python -m pleroma.bench [--rows 1000000] [--db PATH] [--runs K]
                            [--pleroma BIN] [--json] [--profile]

The ledger (``invoices``, ``customers``; seed 42) is built by ``pleroma
demo --rows N --db PATH``, which also attaches the plane on ``invoices``
(persisted in the file), or reused when PATH already holds it. Then, per
query of the demo's 16:

- ``pleroma``: ``con.execute(sql).fetchall()`` on ``pleroma.connect(PATH)``,
  warm and repeated as a dashboard refresh runs it (a served query's
  repeats are memo hits; ``route`` says ``first→warm``);
- ``rust``: the plane arm's warm time of ``pleroma bench ledger`` (the Rust
  API, ``Connection::query``, repeated: the same memo route), run in the
  same process on a copy of the file;
- ``sqlite3``: the standard module on the same file;
- ``duckdb``: DuckDB's Python package on the same rows (loaded through
  pyarrow), when both are importable;
- ``rule``: for served queries, Pleroma from Python with the memo defeated
  (each call a text the memo does not hold: the plane's own rule).

Timing: per arm, after a warm-up call, ``--runs`` batches of calls timed
with ``time.perf_counter_ns`` (a batch lasts about ``--batch-ms``; the
garbage collector off within it, as ``timeit`` does); the figure is the
median of the batches' per-call means. Arms are interleaved batch by batch
so that drift on a shared machine hits them alike. Every arm's rows are
checked against the sqlite3 module's.
"""

import argparse
import gc
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import pleroma

SEED = 42

PLANE_PRAGMA = "PRAGMA pleroma_attach('invoices', 'region, status, month', 'amount_cents')"

# The ledger's 16 queries, as `QUERIES` in benches/src/ledger.rs.
QUERIES = [
    ("total_invoiced", "SELECT SUM(amount_cents) FROM invoices"),
    ("invoice_count", "SELECT COUNT(*) FROM invoices"),
    ("revenue_by_region",
     "SELECT region, SUM(amount_cents) FROM invoices GROUP BY region ORDER BY region"),
    ("count_by_status",
     "SELECT status, COUNT(*) FROM invoices GROUP BY status ORDER BY status"),
    ("revenue_by_month",
     "SELECT month, SUM(amount_cents) FROM invoices GROUP BY month ORDER BY month"),
    ("paid_h1_by_region_month",
     "SELECT region, month, SUM(amount_cents) AS revenue FROM invoices "
     "WHERE status = 'paid' AND month BETWEEN 202401 AND 202406 "
     "GROUP BY region, month ORDER BY region, month"),
    ("overdue_exposure",
     "SELECT region, SUM(amount_cents) AS exposure, COUNT(*) AS n FROM invoices "
     "WHERE status = 'overdue' GROUP BY region HAVING SUM(amount_cents) > 100000 "
     "ORDER BY exposure DESC"),
    ("pk_lookup",
     "SELECT id, customer_id, region, status, month, amount_cents FROM invoices WHERE id = 1000"),
    ("top_customers",
     "SELECT customer_id, SUM(amount_cents) AS revenue FROM invoices "
     "GROUP BY customer_id ORDER BY revenue DESC, customer_id LIMIT 10"),
    ("big_ticket_count", "SELECT COUNT(*) FROM invoices WHERE amount_cents >= 500000"),
    ("largest_invoices",
     "SELECT id, customer_id, amount_cents FROM invoices ORDER BY amount_cents DESC, id LIMIT 10"),
    ("join_revenue_by_segment",
     "SELECT c.segment, SUM(i.amount_cents) FROM invoices i JOIN customers c ON c.id = i.customer_id "
     "GROUP BY c.segment ORDER BY c.segment"),
    ("join_count_by_customer_region",
     "SELECT c.region, COUNT(*) FROM invoices i JOIN customers c ON c.id = i.customer_id "
     "GROUP BY c.region ORDER BY c.region"),
    ("join_enterprise_paid",
     "SELECT SUM(i.amount_cents) FROM invoices i JOIN customers c ON c.id = i.customer_id "
     "WHERE c.segment = 'enterprise' AND i.status = 'paid'"),
    ("join_top_customer_names",
     "SELECT c.name, SUM(i.amount_cents) AS revenue FROM invoices i JOIN customers c ON c.id = i.customer_id "
     "GROUP BY c.id, c.name ORDER BY revenue DESC, c.id LIMIT 10"),
    ("join_overdue_by_segment",
     "SELECT c.segment, i.region, COUNT(*), SUM(i.amount_cents) FROM invoices i "
     "JOIN customers c ON c.id = i.customer_id WHERE i.status = 'overdue' "
     "GROUP BY c.segment, i.region ORDER BY c.segment, i.region"),
]

#: Served routes: answered by Pleroma, not by SQLite.
SERVED = ("plane", "memo", "limb", "residue")

#: The goals of the issue.
GOAL_OVERHEAD_US = 5.0
GOAL_RATIO = 1000.0

#: Texts per query for the `rule` arm: more than the memo keeps (256), so
#: that cycling through them always misses it.
RULE_VARIANTS = 300


# -- the ledger ---------------------------------------------------------


def find_pleroma(given):
    """The `pleroma` CLI: --pleroma, else on PATH, else the workspace's
    target/release/pleroma."""
    if given:
        # Absolute: the Rust arm runs in a directory of its own.
        return str(Path(given).resolve()) if os.sep in given else (shutil.which(given) or given)
    on_path = shutil.which("pleroma")
    if on_path:
        return on_path
    here = Path(__file__).resolve()
    for root in (here.parents[2], Path.cwd()):
        cand = root / "target" / "release" / "pleroma"
        if cand.is_file():
            return str(cand)
    raise SystemExit(
        "pleroma bench: no `pleroma` binary (give --pleroma BIN, or build it with "
        "`cargo build --release --bin pleroma`)")


def invoice_count(db):
    """Invoices in the ledger at `db`, or None where it holds none."""
    if not os.path.exists(db):
        return None
    c = sqlite3.connect(db)
    try:
        n = c.execute(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' "
            "AND name IN ('invoices', 'customers')").fetchone()[0]
        if n != 2:
            return None
        return c.execute("SELECT count(*) FROM invoices").fetchone()[0] or None
    finally:
        c.close()


def ensure_ledger(bin_, rows, db, log):
    """Build the ledger with `pleroma demo` unless `db` holds one; make
    sure its plane is attached (persisted in the file). Returns the
    number of invoices and the demo's output (None when reused)."""
    n = invoice_count(db)
    demo = None
    if n is None:
        if os.path.exists(db):
            raise SystemExit(f"pleroma bench: {db} exists but holds no ledger")
        Path(db).parent.mkdir(parents=True, exist_ok=True)
        log(f"building the ledger: {bin_} demo --rows {rows} --db {db}")
        p = subprocess.run([bin_, "demo", "--rows", str(rows), "--db", db],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"pleroma demo failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        demo = p.stdout
        n = invoice_count(db)
    elif n != rows:
        log(f"note: {db} holds {n} invoices (not --rows {rows}); using it as is")
    con = pleroma.connect(db)
    try:
        planes = con.execute("PRAGMA pleroma_planes").fetchall()
        if not any(r[0] == "invoices" for r in planes):
            log("attaching the plane on invoices")
            con.execute(PLANE_PRAGMA)
    finally:
        con.close()
    return n, demo


def rust_times(bin_, db, n, workdir, log, only=None):
    """Per query, the Rust API's warm times: `pleroma bench ledger` (arms
    plane and sqlite) on a copy of `db` in its own data directory (the
    harness finds its cached ledger there by name, seed 42). Returns
    ({query: cell of the plane arm}, {query: cell of the sqlite arm}, report)."""
    data = Path(workdir) / "bench-data"
    data.mkdir(parents=True, exist_ok=True)
    copy = data / f"ledger-r{n}-s{SEED}.db"
    if not copy.exists():
        src = sqlite3.connect(db)
        dst = sqlite3.connect(str(copy))
        try:
            src.backup(dst)
            # The same journal mode as the file the Python arms read (a read
            # costs SQLite's locking and change-counter checks either way).
            mode = src.execute("PRAGMA journal_mode").fetchone()[0]
            dst.execute(f"PRAGMA journal_mode = {mode}").fetchone()
        finally:
            dst.close()
            src.close()
    out = Path(workdir) / "rust.json"
    cmd = [bin_, "bench", "ledger", "--rows", str(n), "--seed", str(SEED),
           "--arms", "sqlite,plane", "--json", str(out),
           "--max-calls", "20000", "--budget-ms", "200"]
    if only:
        cmd += ["--only", only]
    log("rust: PLEROMA_BENCH_DATA=" + str(data) + " " + " ".join(cmd))
    env = dict(os.environ, PLEROMA_BENCH_DATA=str(data))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir)
    if p.returncode != 0:
        raise SystemExit(f"pleroma bench ledger failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    report = json.loads(out.read_text())
    plane = {c["query"]: c for c in report["cells"] if c["arm"] == "plane"}
    sqlite = {c["query"]: c for c in report["cells"] if c["arm"] == "sqlite"}
    return plane, sqlite, report


def read_cost(bin_, n, name, log):
    """The Rust API's cost of one answer from the cells, the memo cleared
    before each call (`benches/examples/read_cost`, mode `slice`: its own
    ledger of `n` rows, seed 42, in WAL mode), in µs."""
    cmd = [bin_, str(n), "slice", "2000", name]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        log(f"read_cost failed: {' '.join(cmd)}\n{p.stderr}")
        return None
    # "<name> slice: 8.417 us per call (median of 15 rounds of 2000)"
    return float(p.stdout.split(":", 1)[1].split()[0])


# -- the arms -----------------------------------------------------------


def load_duckdb(db, log):
    """An in-memory DuckDB with `invoices` and `customers` copied from
    `db` (read through sqlite3, handed over as Arrow tables); None when
    duckdb or pyarrow is not importable."""
    try:
        import duckdb
        import pyarrow as pa
    except ImportError as e:
        log(f"duckdb arm skipped: {e}")
        return None, None
    t = time.perf_counter()
    src = sqlite3.connect(db)
    d = duckdb.connect()
    schemas = {
        "customers": [("id", pa.int64()), ("name", pa.string()),
                      ("region", pa.string()), ("segment", pa.string())],
        "invoices": [("id", pa.int64()), ("customer_id", pa.int64()),
                     ("region", pa.string()), ("status", pa.string()),
                     ("month", pa.int64()), ("amount_cents", pa.int64())],
    }
    for table, cols in schemas.items():
        names = ", ".join(c for c, _ in cols)
        rows = src.execute(f"SELECT {names} FROM {table}").fetchall()
        columns = list(zip(*rows)) if rows else [() for _ in cols]
        arrow = pa.table({c: pa.array(v, type=ty) for (c, ty), v in zip(cols, columns)})
        del rows, columns
        d.register("arrow_src", arrow)
        d.execute(f"CREATE TABLE {table} AS SELECT * FROM arrow_src")
        d.unregister("arrow_src")
    src.close()
    load_ms = (time.perf_counter() - t) * 1e3
    return d, {"version": duckdb.__version__, "load_ms": load_ms}


def _norm_value(v):
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def normalize(rows, sql):
    """Rows as comparable lists of tuples: numeric types folded (DuckDB's
    HUGEINT and DECIMAL sums), sorted unless the query orders them."""
    out = [tuple(_norm_value(v) for v in r) for r in rows]
    if "ORDER BY" not in sql.upper():
        out.sort(key=repr)
    return out


def time_batches(arms, runs, batch_ms):
    """`arms`: [(name, call)]. Each call is warmed, a batch size found that
    lasts about `batch_ms`, then `runs` batches per arm, interleaved.
    Returns {name: (median µs per call, [µs per call of each batch], calls per batch)}."""
    sizes = {}
    for name, call in arms:
        call()
        t = time.perf_counter_ns()
        call()
        one = max(time.perf_counter_ns() - t, 1)
        n = max(1, int(batch_ms * 1e6 / one))
        if n > 1:
            # A better estimate on a batch of a tenth.
            k = max(1, n // 10)
            t = time.perf_counter_ns()
            for _ in range(k):
                call()
            one = max((time.perf_counter_ns() - t) / k, 1)
            n = max(1, int(batch_ms * 1e6 / one))
        sizes[name] = n
    samples = {name: [] for name, _ in arms}
    gc_was = gc.isenabled()
    for _ in range(runs):
        for name, call in arms:
            n = sizes[name]
            gc.disable()
            try:
                t = time.perf_counter_ns()
                for _ in range(n):
                    call()
                dt = time.perf_counter_ns() - t
            finally:
                if gc_was:
                    gc.enable()
            samples[name].append(dt / n / 1e3)
    return {name: (statistics.median(s), s, sizes[name]) for name, s in samples.items()}


def rule_call(con, sql):
    """A call that the memo cannot answer: cycles through RULE_VARIANTS
    texts of `sql` (a trailing comment numbering it: the package runs a
    statement without the blanks after it, so blanks alone would not
    differ), each classified once and then cached, each evicted from the
    memo before it comes round again."""
    texts = [f"{sql} /* {k} */" for k in range(RULE_VARIANTS)]
    state = [0]

    def call():
        i = state[0]
        state[0] = i + 1 if i + 1 < RULE_VARIANTS else 0
        return con.execute(texts[i]).fetchall()

    for _ in range(2):  # classify every text; fill the memo past capacity
        for _ in range(RULE_VARIANTS):
            call()
    return call


# -- the run ------------------------------------------------------------


def run(args, log):
    bin_ = find_pleroma(args.pleroma)
    workdir = tempfile.mkdtemp(prefix="pleroma-bench-")
    db = args.db or os.path.join(tempfile.gettempdir(), "pleroma-bench",
                                 f"ledger-r{args.rows}-s{SEED}.db")
    try:
        n, demo = ensure_ledger(bin_, args.rows, db, log)
        rust_plane, rust_sqlite, rust_report = ({}, {}, None)
        if not args.no_rust:
            rust_plane, rust_sqlite, rust_report = rust_times(bin_, db, n, workdir, log,
                                                              args.only)
        duck, duck_info = (None, None) if args.no_duckdb else load_duckdb(db, log)

        pcon = pleroma.connect(db)
        scon = sqlite3.connect(db)
        journal = scon.execute("PRAGMA journal_mode").fetchone()[0]
        results = []
        names = set(args.only.split(",")) if args.only else None
        for name, sql in QUERIES:
            if names is not None and name not in names:
                continue
            log(f"  {name}")
            t = time.perf_counter_ns()
            first_rows = pcon.execute(sql).fetchall()
            first_us = (time.perf_counter_ns() - t) / 1e3
            first_route = pcon.last_route
            want = normalize(scon.execute(sql).fetchall(), sql)
            answers = {"pleroma first": first_rows}

            def pl(sql=sql):
                return pcon.execute(sql).fetchall()

            def sq(sql=sql):
                return scon.execute(sql).fetchall()

            arms = [("pleroma", pl), ("sqlite3", sq)]
            if duck is not None:
                def dk(sql=sql):
                    return duck.execute(sql).fetchall()
                arms.append(("duckdb", dk))
            served = first_route in SERVED
            times = time_batches(arms, args.runs, args.batch_ms)
            warm_route = None
            for arm, call in arms:
                answers[arm] = call()
                if arm == "pleroma":
                    warm_route = pcon.last_route
            if served and not args.no_rule:
                # On its own: its texts push the query's own out of the memo.
                call = rule_call(pcon, sql)
                times.update(time_batches([("rule", call)], args.runs, args.batch_ms))
                answers["rule"] = call()
                answers["rule route"] = pcon.last_route
            mismatches = []
            for arm, rows in answers.items():
                if arm == "rule route":
                    continue
                if normalize(rows, sql) != want:
                    mismatches.append(arm)
            rule_route = answers.get("rule route")
            if rule_route is not None and rule_route != first_route:
                mismatches.append(f"rule route {rule_route}")
            r = {
                "query": name,
                "route": first_route if warm_route == first_route
                else f"{first_route}→{warm_route}",
                "first_route": first_route,
                "warm_route": warm_route,
                "served": served,
                "pleroma_first_us": first_us,
                "pleroma_us": times["pleroma"][0],
                "sqlite3_us": times["sqlite3"][0],
                "duckdb_us": times["duckdb"][0] if "duckdb" in times else None,
                "rule_us": times["rule"][0] if "rule" in times else None,
                "batches": {a: {"us": s, "calls": c} for a, (_, s, c) in times.items()},
                "rows": len(want),
                "same_rows": not mismatches,
                "mismatches": mismatches,
            }
            rc = rust_plane.get(name)
            if rc is not None:
                r["rust_us"] = rc["warm_ms"] * 1e3
                r["rust_route"] = rc["route"]
                r["rust_first_us"] = rc["first_ms"] * 1e3
                r["rust_noisy"] = rc["noisy"]
                r["overhead_us"] = r["pleroma_us"] - r["rust_us"]
            else:
                r["rust_us"] = r["overhead_us"] = None
            r["rust_rule_us"] = None
            if args.read_cost and served:
                r["rust_rule_us"] = read_cost(args.read_cost, n, name, log)
                if r["rule_us"] is not None:
                    r["rule_overhead_us"] = r["rule_us"] - r["rust_rule_us"]
            rs = rust_sqlite.get(name)
            r["rust_sqlite_us"] = rs["warm_ms"] * 1e3 if rs else None
            r["ratio_sqlite3"] = r["sqlite3_us"] / r["pleroma_us"]
            results.append(r)
        pcon.close()
        scon.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    served = [r for r in results if r["served"]]
    summary = {
        "served": len(served),
        "queries": len(results),
        "mismatches": sum(1 for r in results if not r["same_rows"]),
    }
    over = [r["overhead_us"] for r in served if r["overhead_us"] is not None]
    if over:
        summary["median_overhead_us"] = statistics.median(over)
        summary["overhead_goal_met"] = sum(1 for o in over if o <= GOAL_OVERHEAD_US)
    ratios = [r["ratio_sqlite3"] for r in served]
    if ratios:
        summary["median_ratio_sqlite3"] = statistics.median(ratios)
        summary["ratio_goal_met"] = sum(1 for x in ratios if x >= GOAL_RATIO)
    return {
        "rows": n,
        "db": db,
        "seed": SEED,
        "journal_mode": journal,
        "runs": args.runs,
        "batch_ms": args.batch_ms,
        "python": sys.version.split()[0],
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "pleroma_bin": bin_,
        "duckdb": duck_info,
        "rust": None if rust_report is None else {
            k: rust_report.get(k) for k in ("commit", "date", "machine", "figures")},
        "demo_output": demo,
        "queries": results,
        "summary": summary,
    }


# -- where the overhead goes --------------------------------------------


def profile(db, runs, batch_ms, log):
    """Per-call costs of the layers of one served call, and of SELECT 1,
    from Python (µs, median of batches)."""
    con = pleroma.connect(db)
    scon = sqlite3.connect(db)
    sql = dict(QUERIES)["total_invoiced"]
    con.execute(sql).fetchall()
    native = con._native
    adapt = pleroma._adapt
    cur = con.cursor()
    arms = [
        ("pleroma execute+fetchall (memo)", lambda: con.execute(sql).fetchall()),
        ("pleroma cursor reused", lambda: cur.execute(sql).fetchall()),
        ("pleroma _native.run only", lambda: native.run(sql, (), None, adapt)),
        ("pleroma _native.run + fetch", lambda: native.run(sql, (), None, adapt)[1].fetch(None, False)),
        ("pleroma _statement+_bind only",
         lambda: pleroma._bind(con._statement(sql), ())),
        ("pleroma cursor() only", lambda: con.cursor()),
        ("pleroma last_route", lambda: con.last_route),
        ("pleroma SELECT 1 (engine)", lambda: con.execute("SELECT 1").fetchall()),
        ("sqlite3 SELECT 1", lambda: scon.execute("SELECT 1").fetchall()),
        ("sqlite3 cursor reused SELECT 1", (lambda c: lambda: c.execute("SELECT 1").fetchall())(scon.cursor())),
        ("python no-op call", lambda: None),
    ]
    times = time_batches(arms, runs, batch_ms)
    con.close()
    scon.close()
    return [{"call": a, "us": times[a][0]} for a, _ in arms]


# -- output -------------------------------------------------------------


def _us(v):
    if v is None:
        return "-"
    if v >= 10000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}"


def _signed(v):
    if v is None:
        return "-"
    return f"{v:+,.0f}" if abs(v) >= 100 else f"{v:+.2f}"


def _ratio(v):
    if v is None:
        return "-"
    return f"{v:,.0f}x" if v >= 10 else f"{v:.2f}x"


def markdown(out):
    head = ["query", "route (py)", "pleroma py µs", "rust µs", "overhead µs",
            "sqlite3 µs", "sqlite3/pleroma", "duckdb µs", "rule py µs"]
    rule_rust = any(r.get("rust_rule_us") is not None for r in out["queries"])
    if rule_rust:
        head.append("rule rust µs")
    head.append("same rows")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in out["queries"]:
        cells = [
            r["query"], r["route"], _us(r["pleroma_us"]), _us(r["rust_us"]),
            _signed(r["overhead_us"]),
            _us(r["sqlite3_us"]), _ratio(r["ratio_sqlite3"]), _us(r["duckdb_us"]),
            _us(r["rule_us"]),
        ]
        if rule_rust:
            cells.append(_us(r.get("rust_rule_us")))
        cells.append("yes" if r["same_rows"] else "**NO** " + ",".join(r["mismatches"]))
        lines.append("| " + " | ".join(cells) + " |")
    s = out["summary"]
    lines.append("")
    lines.append(f"{s['queries']} queries, {s['served']} served by Pleroma; "
                 f"{s['mismatches']} with different rows.")
    if "median_overhead_us" in s:
        lines.append(
            f"Served queries: median overhead of Python over the Rust API "
            f"{s['median_overhead_us']:+.2f} µs (goal ≤ {GOAL_OVERHEAD_US:g} µs: "
            f"{s['overhead_goal_met']} of {s['served']} queries within).")
    if "median_ratio_sqlite3" in s:
        lines.append(
            f"Served queries: median sqlite3-module / pleroma {s['median_ratio_sqlite3']:,.0f}x "
            f"(goal ≥ {GOAL_RATIO:,.0f}x: {s['ratio_goal_met']} of {s['served']} queries).")
    if out.get("duckdb"):
        d = out["duckdb"]
        lines.append(f"DuckDB {d['version']}, tables loaded through pyarrow in {d['load_ms']:.0f} ms.")
    if out.get("profile"):
        lines.append("")
        lines.append("| call (Python) | µs |")
        lines.append("|---|---|")
        for p in out["profile"]:
            lines.append(f"| {p['call']} | {p['us']:.2f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m pleroma.bench",
        description="The demo's ledger queries through pleroma from Python, the Rust API, "
                    "the sqlite3 module and DuckDB, side by side.")
    ap.add_argument("--rows", type=int, default=1_000_000, help="invoices (default 1,000,000)")
    ap.add_argument("--db", help="the ledger file (built there unless it holds one; "
                                 "default: a cached file in the temp directory)")
    ap.add_argument("--runs", type=int, default=7, help="timed batches per arm and query (default 7)")
    ap.add_argument("--batch-ms", type=float, default=20.0,
                    help="about how long one batch lasts (default 20 ms; a slow query runs once)")
    ap.add_argument("--pleroma", help="the pleroma CLI (default: on PATH, else target/release/pleroma)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--only", help="comma-separated query names")
    ap.add_argument("--profile", action="store_true",
                    help="also time the layers of one served call and SELECT 1")
    ap.add_argument("--read-cost", metavar="BIN",
                    help="also time the plane's rule without the memo in Rust with this "
                         "build of benches/examples/read_cost (mode slice)")
    ap.add_argument("--no-rust", action="store_true", help="skip the Rust arm")
    ap.add_argument("--no-duckdb", action="store_true", help="skip the DuckDB arm")
    ap.add_argument("--no-rule", action="store_true", help="skip the memo-less (rule) arm")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    out = run(args, log)
    if args.profile:
        out["profile"] = profile(out["db"], args.runs, args.batch_ms, log)
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        print(f"## Pleroma from Python — ledger, {out['rows']:,} invoices "
              f"(journal_mode {out['journal_mode']}; median of {args.runs} batches; "
              f"Python {out['python']}, {out['machine']})\n")
        print(markdown(out))
    return 1 if out["summary"]["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
