"""The `duckdb` arm of the Pleroma benchmarks (run by the harness, not by hand).

Reads a JSON spec (path in argv[1]): CSV files the harness wrote from the
same SQLite database, their column types, the queries and the time budget.
Loads the tables into an in-memory DuckDB, then times each query in-process
with time.perf_counter() around execute + fetchall: the first call, one
untimed warm-up, then two loops of N calls. Writes a JSON answer to stdout.

Install: pip install duckdb
"""

import json
import sys
import time

import duckdb


def value(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    # DECIMAL and anything else numeric-like
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def timed(con, sql):
    t = time.perf_counter()
    rows = con.execute(sql).fetchall()
    return (time.perf_counter() - t) * 1e3, rows


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    con = duckdb.connect()
    t0 = time.perf_counter()
    for t in spec["tables"]:
        cols = ", ".join(f"'{n}': '{ty}'" for n, ty in t["columns"])
        con.execute(
            f"CREATE TABLE {t['name']} AS SELECT * FROM read_csv('{t['csv']}', header = true, "
            f"allow_quoted_nulls = false, columns = {{{cols}}})"
        )
    load_ms = (time.perf_counter() - t0) * 1e3
    budget, min_calls, max_calls = spec["budget_ms"], spec["min_calls"], spec["max_calls"]
    out = []
    for q in spec["queries"]:
        try:
            first, rows = timed(con, q["sql"])
            est, _ = timed(con, q["sql"])
            n = max(min(min_calls, max_calls), min(max_calls, int(budget / max(est, 1e-4))))
            loops = [[timed(con, q["sql"])[0] for _ in range(n)] for _ in range(2)]
            out.append({
                "name": q["name"], "first_ms": first, "loop1_ms": loops[0], "loop2_ms": loops[1],
                "rows": [[value(v) for v in r] for r in rows], "error": None,
            })
        except Exception as e:  # reported per query, the run goes on
            out.append({"name": q["name"], "first_ms": 0.0, "loop1_ms": [], "loop2_ms": [], "rows": [],
                        "error": str(e)})
    json.dump({"version": "DuckDB " + duckdb.__version__, "load_ms": load_ms, "queries": out}, sys.stdout)


if __name__ == "__main__":
    main()
