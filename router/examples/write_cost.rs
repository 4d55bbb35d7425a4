//! The write path's cost, for an instruction profiler (issue 21): on a WAL
//! file (`synchronous = NORMAL`) of the `writes` workload's table `w`
//! (`rows` rows, plus an empty table `u` without a plane), N autocommit
//! single-row statements, or one transaction of N INSERTs (`batch`), in one
//! of four arms:
//!
//! - `sqlite`: plain rusqlite, a cached prepared statement;
//! - `engine`: through `Connection::execute`, no plane;
//! - `plane`: a plane on `w(d1, d2, d3, d4; m1, m2, m3)`, not persisted;
//! - `persisted`: the same plane persisted (the default);
//! - `expr`: the `plane` arm with `d4` as an expression dimension,
//!   `date(d4, 'unixepoch') AS day` (the evaluator's cost per row);
//! - `sparse`: a persisted plane on `w(d1, d2, d3, m1, m2; m3)`, whose 30
//!   joint bits make it sparse, with a cell for nearly every row (what a
//!   commit's copy and delta cost against the plane's size).
//!
//! Operations: `insert`, `update`, `delete` (of `w`), `other` (an INSERT
//! into `u`, a table without a plane), `txn` (`BEGIN`, two INSERTs,
//! `COMMIT`: a "statement" is the transaction), `alt` (`txn` on two
//! connections in turn, so each follows the other's commit), `batch` and
//! `append` (the
//! same rows as `batch` through `Connection::appender`, flushed once; on
//! the `sqlite` arm the same as `batch`).
//!
//! ```sh
//! cargo build --release -p pleroma --example write_cost
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='write_cost::measured' \
//!     target/release/examples/write_cost persisted insert 100000 200
//! ```
//!
//! Without valgrind it prints the median µs per statement of 7 rounds (wall
//! time: noisy on a shared machine; the instructions are not).

use std::time::Instant;

use pleroma::rusqlite::types::Value;
use pleroma::Connection;

const CREATE: &str = "CREATE TABLE w(id INTEGER PRIMARY KEY, d1 TEXT, d2 TEXT, d3 INTEGER, \
     d4 INTEGER, m1 INTEGER, m2 INTEGER, m3 INTEGER, note TEXT); \
     CREATE TABLE u(id INTEGER PRIMARY KEY, a INTEGER, b TEXT)";
const INSERT: &str = "INSERT INTO w VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
const UPDATE: &str = "UPDATE w SET m1 = m1 + ?1, d3 = ?2 WHERE id = ?3";
const DELETE: &str = "DELETE FROM w WHERE id = ?1";
const OTHER: &str = "INSERT INTO u(a, b) VALUES (?1, ?2)";
const PLANE: &str = "PRAGMA pleroma_attach('w', 'd1, d2, d3, d4', 'm1, m2, m3')";
const EXPR_PLANE: &str =
    "PRAGMA pleroma_attach('w', 'd1, d2, d3, date(d4, ''unixepoch'') AS day', 'm1, m2, m3')";
/// `two`: the persisted plane and a second, named one over some of its
/// columns (every write feeds both).
const SECOND_PLANE: &str = "PRAGMA pleroma_attach('w', 'd3, d1', 'm1', 'by_d3')";
const SPARSE_PLANE: &str = "PRAGMA pleroma_attach('w', 'd1, d2, d3, m1, m2', 'm3')";
const D1: [&str; 6] = ["red", "green", "blue", "cyan", "magenta", "yellow"];
const D2: [&str; 4] = ["north", "south", "east", "west"];

#[derive(Clone, Copy, PartialEq)]
enum Arm {
    Sqlite,
    Engine,
    Plane,
    Persisted,
    Expr,
    Sparse,
    /// `persisted` with a second plane on the table.
    Two,
}

enum Conn {
    Sqlite(pleroma::rusqlite::Connection),
    Pleroma(Box<Connection>),
}

impl Conn {
    fn exec(&mut self, sql: &str, params: &[Value]) {
        match self {
            Conn::Sqlite(c) => {
                let mut st = c.prepare_cached(sql).expect("prepare");
                st.execute(pleroma::rusqlite::params_from_iter(params))
                    .expect("execute");
            }
            Conn::Pleroma(c) => {
                c.execute(sql, params).expect("execute");
            }
        }
    }
}

fn row(id: i64) -> Vec<Value> {
    vec![
        Value::Integer(id),
        Value::Text(D1[(id % 6) as usize].into()),
        Value::Text(D2[(id % 4) as usize].into()),
        Value::Integer(id % 24),
        Value::Integer(id % 7),
        Value::Integer(id % 1000),
        Value::Integer(id * 3 % 977),
        Value::Integer(-(id % 13)),
        Value::Text("note".into()),
    ]
}

/// The statements of one round, from `next` on; returns the next free id.
#[inline(never)]
fn measured(c: &mut Conn, c2: Option<&mut Conn>, op: &str, n: i64, next: i64, rows: i64) -> i64 {
    match op {
        "alt" => {
            // `txn` on two connections in turn: each transaction's first
            // write follows the other connection's commit.
            let c2 = c2.expect("a second connection");
            for k in 0..n {
                let c = if k % 2 == 0 { &mut *c } else { &mut *c2 };
                c.exec("BEGIN", &[]);
                c.exec(INSERT, &row(next + 2 * k));
                c.exec(INSERT, &row(next + 2 * k + 1));
                c.exec("COMMIT", &[]);
            }
            return next + 2 * n;
        }
        "insert" => {
            for id in next..next + n {
                c.exec(INSERT, &row(id));
            }
        }
        "update" => {
            for k in 0..n {
                let id = (next + k) * 7919 % rows + 1;
                c.exec(
                    UPDATE,
                    &[
                        Value::Integer(k % 100),
                        Value::Integer(k % 12),
                        Value::Integer(id),
                    ],
                );
            }
        }
        "delete" => {
            // Rows of the original table, each once (`next` moves on).
            for id in next..next + n {
                c.exec(DELETE, &[Value::Integer(id)]);
            }
        }
        "other" => {
            for k in 0..n {
                c.exec(OTHER, &[Value::Integer(next + k), Value::Text("x".into())]);
            }
        }
        "txn" => {
            // Two INSERTs in one transaction, N times (`bench writers`).
            for k in 0..n {
                c.exec("BEGIN", &[]);
                c.exec(INSERT, &row(next + 2 * k));
                c.exec(INSERT, &row(next + 2 * k + 1));
                c.exec("COMMIT", &[]);
            }
            return next + 2 * n;
        }
        "append" if matches!(c, Conn::Pleroma(_)) => {
            let Conn::Pleroma(p) = c else { unreachable!() };
            let mut a = p.appender("w").expect("appender");
            for id in next..next + n {
                a.append_row(&row(id)).expect("append");
            }
            a.flush().expect("flush");
        }
        "batch" | "append" => {
            c.exec("BEGIN", &[]);
            for id in next..next + n {
                c.exec(INSERT, &row(id));
            }
            c.exec("COMMIT", &[]);
        }
        _ => panic!("operation: insert, update, delete, other, txn, batch or append"),
    }
    next + n
}

fn main() {
    let mut args = std::env::args().skip(1);
    let arm = match args.next().as_deref() {
        Some("sqlite") => Arm::Sqlite,
        Some("engine") => Arm::Engine,
        Some("plane") => Arm::Plane,
        Some("persisted") | None => Arm::Persisted,
        Some("expr") => Arm::Expr,
        Some("sparse") => Arm::Sparse,
        Some("two") => Arm::Two,
        Some(a) => panic!("arm {a}: sqlite, engine, plane, persisted, expr, sparse or two"),
    };
    let op = args.next().unwrap_or_else(|| "insert".into());
    let rows: i64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let n: i64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("w.db");
    {
        let c = pleroma::rusqlite::Connection::open(&path).expect("open");
        c.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;")
            .expect("settings");
        c.execute_batch(CREATE).expect("create");
        c.execute_batch("BEGIN").expect("begin");
        let mut st = c.prepare(INSERT).expect("prepare");
        for id in 1..=rows {
            st.execute(pleroma::rusqlite::params_from_iter(row(id)))
                .expect("load");
        }
        drop(st);
        c.execute_batch("COMMIT").expect("commit");
    }
    let mut c = match arm {
        Arm::Sqlite => Conn::Sqlite(pleroma::rusqlite::Connection::open(&path).expect("open")),
        _ => {
            let mut p = Connection::open(&path).expect("open");
            if matches!(arm, Arm::Plane | Arm::Expr) {
                p.execute_batch("PRAGMA pleroma_persist = off")
                    .expect("persist off");
            }
            match arm {
                Arm::Engine => {}
                Arm::Expr => p.execute_batch(EXPR_PLANE).expect("attach"),
                Arm::Sparse => p.execute_batch(SPARSE_PLANE).expect("attach"),
                Arm::Two => {
                    p.execute_batch(PLANE).expect("attach");
                    p.execute_batch(SECOND_PLANE).expect("attach the second");
                }
                _ => p.execute_batch(PLANE).expect("attach"),
            }
            Conn::Pleroma(Box::new(p))
        }
    };
    match &mut c {
        Conn::Sqlite(s) => s
            .execute_batch("PRAGMA synchronous = NORMAL")
            .expect("sync"),
        Conn::Pleroma(p) => p
            .execute_batch("PRAGMA synchronous = NORMAL")
            .expect("sync"),
    }
    // `alt`: a second connection on the file (the planes already attached).
    let mut c2 = (op == "alt").then(|| {
        let mut c2 = match arm {
            Arm::Sqlite => Conn::Sqlite(pleroma::rusqlite::Connection::open(&path).expect("open")),
            _ => Conn::Pleroma(Box::new(Connection::open(&path).expect("open"))),
        };
        c2.exec("PRAGMA synchronous = NORMAL", &[]);
        c2
    });
    // The first round warms the caches; the others are timed.
    let mut next = if op == "delete" { 1 } else { rows + 1 };
    let mut times = Vec::new();
    for round in 0..8 {
        let t = Instant::now();
        next = measured(&mut c, c2.as_mut(), op.as_str(), n, next, rows);
        if round > 0 {
            times.push(t.elapsed().as_secs_f64() * 1e6 / n as f64);
        }
    }
    times.sort_by(f64::total_cmp);
    let check = match &mut c {
        Conn::Sqlite(s) => s
            .query_row("SELECT COUNT(*) FROM w", [], |r| r.get::<_, i64>(0))
            .expect("check"),
        Conn::Pleroma(p) => match p.query("SELECT COUNT(*) FROM w", &[]).expect("check").rows[0][0]
        {
            Value::Integer(k) => k,
            ref v => panic!("COUNT(*) gave {v:?}"),
        },
    };
    // A new connection's open: the newest checkpoint and the deltas after
    // it (persisted arms), or a rebuild.
    let t = Instant::now();
    let mut fresh = Connection::open(&path).expect("open again");
    let again = fresh
        .query("SELECT COUNT(*) FROM w", &[])
        .expect("count")
        .rows[0][0]
        .clone();
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(again, Value::Integer(check), "a new connection's count");
    let deltas = fresh
        .query("SELECT sum(kind = 'delta') FROM pleroma_state", &[])
        .map_or_else(|_| "no state".into(), |r| format!("{:?}", r.rows[0][0]));
    println!(
        "{op} x{n} per round, {rows} rows: median {:.2} µs a statement; COUNT(*) {check}; \
         a new connection answers in {open_ms:.2} ms (state rows after the checkpoint: {deltas})",
        times[times.len() / 2]
    );
}
