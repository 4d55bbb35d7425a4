//! Shared planes under seeded interleavings of several connections on one
//! file (issue #12).
//!
//! Each step, drawn from one seed, picks a Pleroma connection and does one
//! thing on it: an autocommit write, a failing statement, `BEGIN` with its
//! first write, `BEGIN` with a query (a read transaction), a `BEGIN` alone
//! (whose first write may come after others' commits), a write, a
//! SAVEPOINT, ROLLBACK TO, RELEASE, COMMIT or ROLLBACK inside its
//! transaction, a query the plane serves, or one SQLite answers (which pins
//! a read transaction's snapshot without the plane looking). Optionally a
//! plain rusqlite connection writes too (an outside writer).
//!
//! The oracle is SQLite itself on the same connection at the same moment
//! (`Connection::sqlite()`): it sees exactly what that connection must see —
//! its own uncommitted writes, its read transaction's snapshot, everyone
//! else's commits. Every plane answer must equal it. Without an outside
//! writer no connection may rebuild because of another's commit. A write
//! that fails with `database is locked` from a connection that held no
//! snapshot of the file must have called its busy handler first, as
//! SQLite does for such a connection.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use pleroma::{Connection, RouteKind, Value};

use crate::rng::Rng;

const GROUPS: [&str; 4] = ["a", "b", "c", "d"];

/// The queries the plane serves (compared with SQLite on the same
/// connection), and one that SQLite answers.
const SERVED: [&str; 4] = [
    "SELECT COUNT(*), SUM(m), MIN(m), MAX(m) FROM t",
    "SELECT g, COUNT(*), SUM(m) FROM t GROUP BY g ORDER BY g",
    "SELECT COUNT(*), SUM(m) FROM t WHERE g IN ('a', 'c')",
    "SELECT COUNT(DISTINCT g) FROM t WHERE g <> 'b'",
];
const DECLINED: &str = "SELECT COUNT(*), SUM(m) FROM t WHERE m > 3";

/// What one interleaving did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub steps: usize,
    pub checked: usize,
    pub served: usize,
    /// Rebuilds after another connection's or process's commit (before a
    /// read, or before a transaction's first write), summed over the
    /// connections.
    pub external_rebuilds: i64,
}

/// Run `steps` seeded steps on `conns` Pleroma connections sharing one file
/// (and an outside writer when `outside`). `Err` names the first answer
/// that differs from SQLite.
pub fn run(seed: u64, conns: usize, steps: usize, outside: bool) -> Result<Stats> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("shared.db");
    let mut rng = Rng::new(seed);
    let mut cs: Vec<Connection> = Vec::new();
    let mut busy = Vec::new();
    {
        let (mut c, calls) = counted(&path)?;
        busy.push(calls);
        c.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT, m INTEGER, u INTEGER UNIQUE);",
        )?;
        for i in 0..40 {
            c.execute(
                "INSERT INTO t(g, m, u) VALUES (?1, ?2, ?3)",
                &[
                    text(rng.pick::<&str>(&GROUPS)),
                    Value::Integer(rng.range(-5, 9)),
                    Value::Integer(i),
                ],
            )?;
        }
        if outside {
            // A plain SQLite writer is refused by a persisted plane's
            // guard: with one, the file keeps no persisted state, and the
            // planes rebuild after its commits.
            c.execute_batch("PRAGMA pleroma_persist = off")?;
        }
        // And a second plane on the table, fed, published, persisted and
        // followed with the first (its cells are more: the queries go to
        // the first).
        c.execute_batch(
            "PRAGMA pleroma_attach('t', 'g', 'm'); PRAGMA pleroma_attach('t', 'g, u', 'm', 'by_gu')",
        )?;
        cs.push(c);
    }
    for _ in 1..conns {
        let (c, calls) = counted(&path)?;
        cs.push(c);
        busy.push(calls);
    }
    let plain = rusqlite::Connection::open(&path)?;
    plain.busy_timeout(std::time::Duration::ZERO)?;
    let mut st = Stats::default();
    let mut next_u = 1000;
    for step in 0..steps {
        st.steps += 1;
        if outside && rng.chance(0.03) {
            let _ = plain.execute(
                "INSERT INTO t(g, m) VALUES (?1, ?2)",
                rusqlite::params![*rng.pick::<&str>(&GROUPS), rng.range(0, 9)],
            );
            continue;
        }
        let i = rng.below(cs.len());
        let c = &mut cs[i];
        let in_txn = !c.sqlite().is_autocommit();
        let ctx = || format!("seed {seed}, step {step}, connection {i}");
        // SQLite calls the busy handler of a connection that holds no
        // snapshot of the file when its write meets another's lock.
        let untouched = c.sqlite().transaction_state(Some(rusqlite::MAIN_DB))?
            == rusqlite::TransactionState::None;
        let calls = busy[i].load(Ordering::Relaxed);
        let waited = |c: &Connection, r: pleroma::Result<()>| -> Result<()> {
            if let Err(e) = &r {
                let locked = e.to_string().contains("database is locked");
                if untouched && locked && busy[i].load(Ordering::Relaxed) == calls {
                    bail!(
                        "{}: SQLITE_BUSY without a call of the busy handler, with no snapshot held before (in a transaction: {})",
                        ctx(),
                        !c.sqlite().is_autocommit()
                    );
                }
            }
            Ok(())
        };
        let action = if in_txn {
            rng.weighted(&[4, 2, 1, 1, 1, 4, 2, 2, 2])
        } else {
            rng.weighted(&[4, 1, 2, 2, 4, 1, 2])
        };
        match (in_txn, action) {
            // Autocommit: a write, a failing write, BEGIN + write, a read
            // transaction, a served query, a declined one.
            (false, 0) => {
                let r = c.execute_batch(&write(&mut rng, &mut next_u));
                waited(c, r)?;
            }
            (false, 1) => drop(c.execute_batch(&failing(&mut rng))),
            // As applications do, a transaction whose first write fails
            // (another connection holds the write lock) is rolled back.
            (false, 2) => {
                let r = c.execute_batch(&format!("BEGIN; {}", write(&mut rng, &mut next_u)));
                let failed = r.is_err();
                waited(c, r)?;
                if failed && !c.sqlite().is_autocommit() {
                    c.execute_batch("ROLLBACK")?;
                }
            }
            (false, 3) => {
                c.execute_batch("BEGIN")?;
                check(c, rng.pick::<&str>(&SERVED), &mut st).with_context(ctx)?;
            }
            (false, 4) => check(c, rng.pick::<&str>(&SERVED), &mut st).with_context(ctx)?,
            (false, 5) => check(c, DECLINED, &mut st).with_context(ctx)?,
            // A deferred `BEGIN` alone: its first write may come after
            // other connections' commits, and must start from them.
            (false, _) => c.execute_batch("BEGIN")?,
            // In a transaction.
            (true, 0) => {
                let r = c.execute_batch(&write(&mut rng, &mut next_u));
                waited(c, r)?;
            }
            (true, 1) => drop(c.execute_batch(&failing(&mut rng))),
            (true, 2) => drop(c.execute_batch(&format!("SAVEPOINT s{}", rng.below(2)))),
            (true, 3) => drop(c.execute_batch(&format!("ROLLBACK TO s{}", rng.below(2)))),
            (true, 4) => drop(c.execute_batch(&format!("RELEASE s{}", rng.below(2)))),
            (true, 5) => check(c, rng.pick::<&str>(&SERVED), &mut st).with_context(ctx)?,
            (true, 6) => check(c, DECLINED, &mut st).with_context(ctx)?,
            (true, 7) => drop(c.execute_batch("COMMIT")),
            (true, _) => c.execute_batch("ROLLBACK")?,
        }
    }
    for (i, c) in cs.iter_mut().enumerate() {
        if !c.sqlite().is_autocommit() {
            c.execute_batch("ROLLBACK")?;
        }
        for q in SERVED {
            check(c, q, &mut st)
                .with_context(|| format!("seed {seed}, at the end, connection {i}"))?;
        }
        st.external_rebuilds += external_rebuilds(c)?;
    }
    Ok(st)
}

/// A connection whose busy handler counts its calls and gives up at once:
/// a second writer must fail at once, as the schedule is one thread.
fn counted(path: &std::path::Path) -> Result<(Connection, Arc<AtomicUsize>)> {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut db = rusqlite::Connection::open(path)?;
    let count = calls.clone();
    db.busy_handler(Some(move |_: i32| {
        count.fetch_add(1, Ordering::Relaxed);
        false
    }))?;
    Ok((Connection::wrap(db)?, calls))
}

/// The plane's answer against SQLite's on the same connection.
fn check(c: &mut Connection, q: &str, st: &mut Stats) -> Result<()> {
    let got = c
        .query(q, &[])
        .map(|r| r.rows.into_inner())
        .map_err(|e| e.to_string());
    let route = c.last_route().kind;
    let want = sqlite_rows(c.sqlite(), q).map_err(|e| e.to_string());
    st.checked += 1;
    st.served += (route != RouteKind::Engine) as usize;
    if got != want {
        bail!("{q}: Pleroma ({route:?}) {got:?}, SQLite {want:?}");
    }
    Ok(())
}

fn sqlite_rows(db: &rusqlite::Connection, q: &str) -> rusqlite::Result<Vec<Vec<Value>>> {
    let mut stmt = db.prepare(q)?;
    let n = stmt.column_count();
    let rows = stmt.query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())?;
    rows.collect()
}

fn external_rebuilds(c: &mut Connection) -> Result<i64> {
    let p = c.query("PRAGMA pleroma_planes", &[])?;
    let col = |name: &str| {
        p.columns
            .iter()
            .position(|c| c == name)
            .context("pleroma_planes column")
    };
    let (n, why) = (col("rebuilds")?, col("last_rebuild")?);
    Ok(p.rows
        .iter()
        .filter(|r| {
            r[why] == text("another connection or process committed")
                || r[why] == text("a commit landed before this transaction's first write")
        })
        .map(|r| match r[n] {
            Value::Integer(k) => k,
            _ => 0,
        })
        .sum())
}

fn write(rng: &mut Rng, next_u: &mut i64) -> String {
    match rng.below(4) {
        0 => {
            *next_u += 1;
            format!(
                "INSERT INTO t(g, m, u) VALUES ('{}', {}, {})",
                *rng.pick::<&str>(&GROUPS),
                rng.range(-5, 9),
                next_u
            )
        }
        1 => format!(
            "UPDATE t SET m = m + {} WHERE id % 7 = {}",
            rng.range(-2, 3),
            rng.below(7)
        ),
        2 => format!(
            "UPDATE t SET g = '{}' WHERE id % 9 = {}",
            *rng.pick::<&str>(&GROUPS),
            rng.below(9)
        ),
        _ => format!("DELETE FROM t WHERE id % 13 = {}", rng.below(13)),
    }
}

/// A statement that fails part-way, after changing some rows.
fn failing(rng: &mut Rng) -> String {
    match rng.below(2) {
        0 => format!(
            "INSERT INTO t(g, m) VALUES ('{}', 1), ('a', abs(-9223372036854775808))",
            *rng.pick::<&str>(&GROUPS)
        ),
        _ => "UPDATE t SET u = 7 WHERE u IS NOT NULL".into(),
    }
}

fn text(s: &str) -> Value {
    Value::Text(s.into())
}
