//! Python's psycopg (3, from PyPI) against `pleroma serve`: autocommit and
//! transactions (psycopg's implicit BEGIN), parameters of several types,
//! prepared statements, and a server-side error, each answer compared with
//! plain SQLite on the same file.

mod common;

use std::process::Command;

use common::{require, sqlite, Cell, QUERIES};

/// Runs a Python program that prints one JSON document; returns it.
fn python(program: &str, port: u16) -> serde_json::Value {
    let py = require("python3", "apt-get install python3");
    let out = Command::new(py)
        .arg("-c")
        .arg(program)
        .arg(port.to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("No module named 'psycopg'") {
        panic!("psycopg is not installed: pip install \"psycopg[binary]\" (or run bash scripts/test.sh)");
    }
    assert!(out.status.success(), "python failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn cell(v: &serde_json::Value) -> Cell {
    match v {
        serde_json::Value::Null => Cell::Null,
        serde_json::Value::Number(n) => Cell::Num(n.as_f64().unwrap()),
        serde_json::Value::String(s) => Cell::parse(s),
        other => panic!("unexpected {other}"),
    }
}

fn rows(v: &serde_json::Value) -> Vec<Vec<Cell>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(cell).collect())
        .collect()
}

const PRELUDE: &str = r#"
import sys, json, decimal
import psycopg
port = int(sys.argv[1])
def conv(v):
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (bytes, memoryview)):
        return "\\x" + bytes(v).hex()
    return v
def rows(cur):
    return [[conv(v) for v in r] for r in cur.fetchall()]
"#;

#[test]
fn psycopg_answers_what_sqlite_answers() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let program = format!(
        "{PRELUDE}
out = {{}}
with psycopg.connect(host='127.0.0.1', port=port, user='py', dbname='ledger', autocommit=True) as c:
    out['version'] = c.info.server_version
    cur = c.cursor()
    out['queries'] = []
    for q in {queries}:
        cur.execute(q)
        out['queries'].append(rows(cur))
    out['types'] = []
    cur.execute('SELECT COUNT(*), 1.5, PleromaSumExact(amount_cents), region FROM invoices GROUP BY region ORDER BY region')
    out['types'] = [d.type_code for d in cur.description]
    out['exact'] = rows(cur)
    # Parameters: a text, an int, a float, a None; and prepared statements.
    q = 'SELECT region, COUNT(*), SUM(amount_cents) FROM invoices WHERE status = %s AND month >= %s GROUP BY region ORDER BY region'
    out['param'] = []
    for i in range(6):
        cur.execute(q, ('paid', 202406), prepare=(i >= 3))
        out['param'].append(rows(cur))
    cur.execute('SELECT %s + 1, %s * 2, %s IS NULL, %s', (41, 1.25, None, 'x'))
    out['scalars'] = rows(cur)
    cur.execute('SELECT COUNT(*) FROM invoices WHERE month = %s', ('202405',))
    out['affinity'] = rows(cur)
print(json.dumps(out))
",
        queries = serde_json::to_string(QUERIES).unwrap()
    );
    let out = python(&program, server.addr().port());
    assert_eq!(out["version"], 160000);
    for (q, got) in QUERIES.iter().zip(out["queries"].as_array().unwrap()) {
        assert_eq!(rows(got), sqlite(&f.db, q), "{q}");
    }
    // int8, float8, numeric, text
    assert_eq!(out["types"], serde_json::json!([20, 701, 1700, 25]));
    assert_eq!(
        rows(&out["exact"]),
        sqlite(
            &f.db,
            "SELECT COUNT(*), 1.5, SUM(amount_cents), region FROM invoices GROUP BY region ORDER BY region"
        )
    );
    let want = sqlite(
        &f.db,
        "SELECT region, COUNT(*), SUM(amount_cents) FROM invoices WHERE status = 'paid' AND month >= 202406 GROUP BY region ORDER BY region",
    );
    assert!(!want.is_empty());
    for got in out["param"].as_array().unwrap() {
        assert_eq!(rows(got), want);
    }
    assert_eq!(
        rows(&out["scalars"]),
        sqlite(&f.db, "SELECT 41 + 1, 1.25 * 2, NULL IS NULL, 'x'")
    );
    // An untyped text parameter meets the INTEGER column's affinity, as a
    // quoted literal would.
    assert_eq!(
        rows(&out["affinity"]),
        sqlite(
            &f.db,
            "SELECT COUNT(*) FROM invoices WHERE month = '202405'"
        )
    );
}

#[test]
fn psycopg_transactions_commit_roll_back_and_fail_like_postgres() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let program = format!(
        "{PRELUDE}
from psycopg import pq
out = {{}}
c = psycopg.connect(host='127.0.0.1', port=port, user='py', dbname='ledger')
cur = c.cursor()
out['idle'] = int(c.info.transaction_status)
ins = 'INSERT INTO invoices(region, status, month, amount_cents) VALUES (%s, %s, %s, %s)'
cur.execute(ins, ('north', 'paid', 202401, 111))
out['in_txn'] = int(c.info.transaction_status)
cur.execute(\"SELECT SUM(amount_cents) FROM invoices WHERE region = 'north'\")
out['own_write'] = rows(cur)
c.rollback()
cur.execute(ins, ('south', 'paid', 202402, 222))
cur.execute(ins, ('south', 'paid', 202402, 333))
c.commit()
# A server-side error aborts the transaction, as in PostgreSQL.
cur.execute(ins, ('east', 'paid', 202403, 444))
try:
    cur.execute('SELECT * FROM no_such_table')
except psycopg.Error as e:
    out['error'] = [e.sqlstate, str(e).strip()]
out['failed'] = int(c.info.transaction_status)
try:
    cur.execute('SELECT 1')
except psycopg.Error as e:
    out['ignored'] = e.sqlstate
c.rollback()
try:
    cur.execute('INSERT INTO invoices(id, region) VALUES (1, %s)', ('dup',))
except psycopg.Error as e:
    out['unique'] = e.sqlstate
c.rollback()
with c.transaction():
    cur.execute(ins, ('west', 'open', 202404, 555))
out['after'] = int(c.info.transaction_status)
c.close()
print(json.dumps(out))
"
    );
    let out = python(&program, server.addr().port());
    assert_eq!(out["idle"], 0, "IDLE");
    assert_eq!(out["in_txn"], 2, "INTRANS after psycopg's implicit BEGIN");
    assert_eq!(out["failed"], 3, "INERROR after an error");
    assert_eq!(out["error"][0], "42P01");
    assert_eq!(out["error"][1], "no such table: no_such_table");
    assert_eq!(out["ignored"], "25P02");
    assert_eq!(out["unique"], "23505");
    assert_eq!(out["after"], 0);
    // The oracle: what committed, and only that.
    let amounts = sqlite(
        &f.db,
        "SELECT amount_cents FROM invoices WHERE amount_cents IN (111, 222, 333, 444, 555) ORDER BY 1",
    );
    let base = sqlite(
        &f.db,
        "SELECT amount_cents FROM invoices WHERE id <= 2000 AND amount_cents IN (111, 222, 333, 444, 555) ORDER BY 1",
    );
    let mut want = base.clone();
    want.extend([222.0, 333.0, 555.0].map(|v| vec![Cell::Num(v)]));
    want.sort_by(|a, b| match (&a[0], &b[0]) {
        (Cell::Num(x), Cell::Num(y)) => x.partial_cmp(y).unwrap(),
        _ => unreachable!(),
    });
    assert_eq!(amounts, want);
    // psycopg saw its own uncommitted write through the plane.
    let north = sqlite(
        &f.db,
        "SELECT SUM(amount_cents) + 111 FROM invoices WHERE region = 'north'",
    );
    assert_eq!(rows(&out["own_write"]), north);
}
