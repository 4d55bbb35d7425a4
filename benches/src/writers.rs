//! Concurrent write transactions (issue 21, item 6).
//!
//! The §6 table `w(id, d1, d2, d3, d4, m1, m2, m3, note)` at `--rows` rows
//! (default 300,000; a copy of the cached `writes` base file per run, made
//! WAL with `synchronous = NORMAL`), on the plane arm with the §6 plane
//! `PRAGMA pleroma_attach('w', 'd1, d2, d3, d4', 'm1, m2, m3')` (persisted,
//! the default), attached once on a setup connection before the sessions
//! open. Per arm (`sqlite`: plain rusqlite connections; `engine`:
//! `pleroma::Connection` with `PRAGMA pleroma_route = engine` and no plane;
//! `plane`: every connection a `pleroma::Connection`) and for N = 1 and
//! N = 8 sessions: N threads, each with its own connection on the file
//! (`busy_timeout` 5 s), loop for `--seconds` (default 3) over
//!
//! ```sql
//! BEGIN; INSERT INTO w VALUES (...); INSERT INTO w VALUES (...); COMMIT
//! ```
//!
//! with ids from the thread's own range (no conflicts). A statement that
//! fails with SQLITE_BUSY or SQLITE_LOCKED rolls the transaction back and
//! the transaction is tried again (a retry). Measured per arm and N:
//!
//! - cells `txn_1`, `txn_8`: the latency of each committed transaction, from
//!   its first BEGIN to its COMMIT (retries included), median (loops 1 and 2
//!   are the transactions started in the first and the second half);
//! - transactions per second over all sessions, p50 and p99 latency,
//!   retries, and `8 sessions tx/s / 1 session tx/s` per arm;
//! - the plane arm: rebuilds summed over every connection (`PRAGMA
//!   pleroma_planes`, `rebuilds`), and in the notes per `last_rebuild` reason
//!   how many connections ended with it and their rebuilds (the pragma keeps
//!   only each connection's last reason).
//!
//! Checked after every run: the arm's own connection (through
//! `pleroma::Connection::query` on the Pleroma arms) must give the same
//! `SELECT COUNT(*), SUM(m1), SUM(m2), SUM(m3) FROM w` as plain SQLite on the
//! same file, and the count must be the base rows + 2 x the committed
//! transactions. A mismatch fails the workload.
//!
//! Left out: conflicting writes (the id ranges never overlap), UPDATE and
//! DELETE, readers during the writes (`bench readers`), writers in other
//! processes, `BEGIN IMMEDIATE`.
//!
//! Run: `cargo run --release --bin pleroma -- bench writers --rows 300000`

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::types::Value;
use rusqlite::ErrorCode;

use crate::check;
use crate::gen::Rng;
use crate::harness::{self, fmt_ms, table_row, Answer, Arm, Options, Report};
use crate::readers::{cell, quantile, remove_db, scratch};
use crate::writes::{self, ArmConn, INSERT, PLANE_PRAGMA};
use crate::Outcome;

/// The session counts, in run order.
pub const SESSIONS: [usize; 2] = [1, 8];
const CHECK: &str = "SELECT COUNT(*), SUM(m1), SUM(m2), SUM(m3) FROM w";
/// Pragmas of every connection (synchronous is per connection).
const CONN_SETTINGS: &str = "PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL;";
/// Ids of session `t` start at base rows + 1 + t x this.
const ID_STRIDE: i64 = 1 << 40;
/// A transaction busy this many times in a row fails the run.
const MAX_RETRIES: u64 = 1_000;

/// SQLite said busy or locked (anywhere in the error's chain).
fn is_busy(e: &anyhow::Error) -> bool {
    let busy = |r: &rusqlite::Error| {
        matches!(
            r.sqlite_error_code(),
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        )
    };
    e.chain().any(|c| {
        c.downcast_ref::<rusqlite::Error>().is_some_and(busy)
            || matches!(c.downcast_ref::<pleroma::Error>(), Some(pleroma::Error::Sqlite(r)) if busy(r))
    })
}

fn in_transaction(c: &ArmConn) -> bool {
    match c {
        ArmConn::Sqlite(s) => !s.is_autocommit(),
        ArmConn::Pleroma(p) => !p.sqlite().is_autocommit(),
    }
}

/// Open one connection of `arm` on `path` with the per-connection settings.
fn open(arm: Arm, path: &Path) -> Result<ArmConn> {
    let mut c = ArmConn::open(arm, path)?;
    c.batch(CONN_SETTINGS)?;
    if arm == Arm::Engine {
        c.batch("PRAGMA pleroma_route = engine")?;
    }
    Ok(c)
}

/// `(rebuilds, last_rebuild)` of every plane on a connection; none on
/// plain SQLite.
fn rebuilds(c: &mut ArmConn) -> Result<Vec<(i64, Option<String>)>> {
    let ArmConn::Pleroma(p) = c else {
        return Ok(Vec::new());
    };
    let rows = p.query("PRAGMA pleroma_planes", &[])?;
    let col = |name: &str| {
        rows.columns
            .iter()
            .position(|c| c == name)
            .ok_or_else(|| anyhow!("PRAGMA pleroma_planes has no column {name}"))
    };
    let (n, why) = (col("rebuilds")?, col("last_rebuild")?);
    Ok(rows
        .rows
        .iter()
        .map(|r| {
            let count = match r[n] {
                Value::Integer(k) => k,
                _ => 0,
            };
            let reason = match &r[why] {
                Value::Text(t) => Some(t.clone()),
                _ => None,
            };
            (count, reason)
        })
        .collect())
}

/// What one session did.
#[derive(Default)]
struct SessionLog {
    /// (start offset from the common start, latency), ms, per committed
    /// transaction.
    txns: Vec<(f64, f64)>,
    retries: u64,
    rebuilds: Vec<(i64, Option<String>)>,
}

/// One transaction: BEGIN, two INSERTs, COMMIT.
fn transaction(c: &mut ArmConn, rows: &[Vec<Value>; 2]) -> Result<()> {
    c.exec("BEGIN", &[])?;
    c.exec(INSERT, &rows[0])?;
    c.exec(INSERT, &rows[1])?;
    c.exec("COMMIT", &[])
}

fn session(
    arm: Arm,
    path: &Path,
    first_id: i64,
    seed: u64,
    seconds: f64,
    start: &Barrier,
) -> Result<SessionLog> {
    let opened = open(arm, path);
    // Always meet the others at the start, even after a failed open.
    start.wait();
    let mut c = opened?;
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(seconds);
    let mut rng = Rng::new(seed);
    let mut log = SessionLog::default();
    let mut id = first_id;
    while Instant::now() < deadline {
        let rows = [writes::row(&mut rng, id), writes::row(&mut rng, id + 1)];
        let t = Instant::now();
        let mut busy = 0;
        loop {
            match transaction(&mut c, &rows) {
                Ok(()) => break,
                Err(e) if is_busy(&e) => {
                    if in_transaction(&c) {
                        c.exec("ROLLBACK", &[])
                            .context("rolling back after SQLITE_BUSY")?;
                    }
                    busy += 1;
                    if busy >= MAX_RETRIES {
                        bail!("transaction at id {id}: busy {busy} times in a row: {e:#}");
                    }
                }
                Err(e) => return Err(e.context(format!("transaction at id {id}"))),
            }
        }
        log.retries += busy;
        log.txns
            .push((t.duration_since(t0).as_secs_f64() * 1e3, harness::millis(t)));
        id += 2;
    }
    log.rebuilds = rebuilds(&mut c)?;
    Ok(log)
}

/// What one (arm, N) run gives for the report.
struct Run {
    logs: Vec<SessionLog>,
    wall_ms: f64,
    /// The setup connection's rebuilds, after the check.
    setup_rebuilds: Vec<(i64, Option<String>)>,
    /// The arm's answer to CHECK, plain SQLite's, and the check's route.
    answer: Vec<Vec<Value>>,
    truth: Vec<Vec<Value>>,
    route: String,
}

fn run_sessions(
    arm: Arm,
    base: &Path,
    rows: u64,
    sessions: usize,
    seconds: f64,
    seed: u64,
) -> Result<Run> {
    let path = scratch(&format!("writers-{}-{sessions}.db", arm.name()))?;
    std::fs::copy(base, &path).context("copying the base table")?;
    rusqlite::Connection::open(&path)?.execute_batch("PRAGMA journal_mode = WAL")?;
    let mut setup = open(arm, &path)?;
    if arm == Arm::Plane {
        setup.batch(PLANE_PRAGMA)?;
    }
    let start = Arc::new(Barrier::new(sessions + 1));
    let handles: Vec<_> = (0..sessions)
        .map(|t| {
            let (path, start) = (path.clone(), start.clone());
            let first_id = rows as i64 + 1 + t as i64 * ID_STRIDE;
            let seed = seed ^ 0x3717e55 ^ ((t as u64) << 32);
            std::thread::spawn(move || session(arm, &path, first_id, seed, seconds, &start))
        })
        .collect();
    start.wait();
    let t = Instant::now();
    let mut logs = Vec::new();
    let mut failed = None;
    for h in handles {
        match h.join().map_err(|_| anyhow!("a session thread panicked"))? {
            Ok(log) => logs.push(log),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    let wall_ms = harness::millis(t);
    if let Some(e) = failed {
        return Err(e.context(format!("a session on {} with N = {sessions}", arm.name())));
    }
    let answer = setup.query(CHECK)?.into_inner();
    let route = setup.route();
    let truth = harness::sqlite_rows(&rusqlite::Connection::open(&path)?, CHECK)?;
    let setup_rebuilds = rebuilds(&mut setup)?;
    drop(setup);
    remove_db(&path);
    Ok(Run {
        logs,
        wall_ms,
        setup_rebuilds,
        answer,
        truth,
        route,
    })
}

pub fn run(rows: u64, seconds: f64, opts: &Options) -> Result<Outcome> {
    if !(seconds.is_finite() && seconds > 0.0) {
        bail!("--seconds: want a positive number of seconds, got {seconds}");
    }
    let mut report = Report::new("writers", rows, opts);
    let base = writes::base(rows, opts.seed)?;
    let arms = opts.sqlite_arms();
    report.figures.insert("seconds".into(), seconds);
    for &arm in &arms {
        let a = arm.name();
        for n in SESSIONS {
            let r = run_sessions(arm, &base, rows, n, seconds, opts.seed)?;
            let mut txns: Vec<(f64, f64)> = r.logs.iter().flat_map(|l| l.txns.clone()).collect();
            txns.sort_by(|x, y| x.0.total_cmp(&y.0));
            let latency: Vec<f64> = txns.iter().map(|t| t.1).collect();
            let committed = latency.len() as i64;
            let retries: u64 = r.logs.iter().map(|l| l.retries).sum();
            let q = format!("txn_{n}");
            let mut c = cell(&q, arm, &latency, a);
            let key = |what: &str| format!("{a} {q} {what}");
            report.figures.insert(key("transactions"), committed as f64);
            report
                .figures
                .insert(key("tx/s"), (committed as f64 / (r.wall_ms / 1e3)).round());
            report
                .figures
                .insert(key("p50 ms"), quantile(&latency, 0.5));
            report
                .figures
                .insert(key("p99 ms"), quantile(&latency, 0.99));
            report.figures.insert(key("retries"), retries as f64);
            if arm == Arm::Plane {
                let all: Vec<&(i64, Option<String>)> = r
                    .logs
                    .iter()
                    .flat_map(|l| &l.rebuilds)
                    .chain(&r.setup_rebuilds)
                    .collect();
                report.figures.insert(
                    key("rebuilds"),
                    all.iter().map(|(k, _)| *k).sum::<i64>() as f64,
                );
                let mut reasons: Vec<(String, u64, i64)> = Vec::new();
                for (k, why) in all.iter().filter(|(k, _)| *k > 0) {
                    let why = why.clone().unwrap_or_else(|| "(none given)".into());
                    match reasons.iter_mut().find(|(w, _, _)| *w == why) {
                        Some((_, conns, sum)) => {
                            *conns += 1;
                            *sum += k;
                        }
                        None => reasons.push((why, 1, *k)),
                    }
                }
                if !reasons.is_empty() {
                    report.notes.insert(
                        key("rebuilds by last reason"),
                        reasons
                            .iter()
                            .map(|(w, conns, k)| format!("{k} on {conns} connections, last {w:?}"))
                            .collect::<Vec<_>>()
                            .join("; "),
                    );
                }
            }
            report.notes.insert(key("check route"), r.route.clone());
            let answers = [
                Answer {
                    arm: Arm::Sqlite,
                    rows: r.truth.clone(),
                },
                Answer {
                    arm,
                    rows: r.answer.clone(),
                },
            ];
            for (_, verdict) in check::compare_all(&q, CHECK, &answers) {
                if let Err(msg) = verdict {
                    report
                        .mismatches
                        .push(format!("{a} (against plain SQLite on its file): {msg}"));
                    c.matched = false;
                }
            }
            let want = rows as i64 + 2 * committed;
            match r.truth.first().and_then(|row| row.first()) {
                Some(Value::Integer(got)) if *got == want => {}
                got => {
                    report.mismatches.push(format!(
                        "{a} {q}: COUNT(*) = {got:?}, want {rows} base rows + 2 x {committed} committed = {want}"
                    ));
                    c.matched = false;
                }
            }
            report.cells.push(c);
        }
        let f = |n: usize| report.figures[&format!("{a} txn_{n} tx/s")];
        let ratio = f(8) / f(1);
        report
            .figures
            .insert(format!("{a} tx/s 8 sessions / 1 session"), ratio);
    }
    let markdown = table(&report, &arms);
    let chart = SESSIONS.iter().map(|n| format!("txn_{n}")).collect();
    Ok(Outcome {
        report,
        markdown,
        chart,
    })
}

fn table(report: &Report, arms: &[Arm]) -> String {
    let f = |k: String| report.figures.get(&k).copied().unwrap_or(f64::NAN);
    let mut head: Vec<String> = [
        "arm",
        "sessions",
        "transactions",
        "tx/s",
        "median ms",
        "p50 ms",
        "p99 ms",
        "retries",
        "rebuilds",
        "exact",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !arms.contains(&Arm::Plane) {
        head.retain(|h| h != "rebuilds");
    }
    let mut out = table_row(&head);
    out.push_str(&table_row(&vec!["---".to_owned(); head.len()]));
    for a in arms {
        for n in SESSIONS {
            let q = format!("txn_{n}");
            let Some(c) = report.cell(&q, *a) else {
                continue;
            };
            let key = |what: &str| format!("{} {q} {what}", a.name());
            let mut row = vec![
                a.name().to_owned(),
                n.to_string(),
                format!("{}", f(key("transactions"))),
                format!("{:.0}", f(key("tx/s"))),
                format!("{}{}", fmt_ms(c.warm_ms), if c.noisy { " ~" } else { "" }),
                fmt_ms(f(key("p50 ms"))),
                fmt_ms(f(key("p99 ms"))),
                format!("{}", f(key("retries"))),
            ];
            if arms.contains(&Arm::Plane) {
                row.push(if *a == Arm::Plane {
                    format!("{}", f(key("rebuilds")))
                } else {
                    "-".into()
                });
            }
            row.push(if c.matched { "yes" } else { "**NO**" }.into());
            out.push_str(&table_row(&row));
        }
    }
    out.push('\n');
    let ratios: Vec<String> = arms
        .iter()
        .map(|a| {
            format!(
                "{} {:.2}x",
                a.name(),
                f(format!("{} tx/s 8 sessions / 1 session", a.name()))
            )
        })
        .collect();
    out.push_str(&format!(
        "8 sessions tx/s / 1 session tx/s: {}.\n",
        ratios.join(", ")
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write on `path` while another connection holds the write lock,
    /// without waiting.
    fn blocked_write(c: &mut ArmConn) -> anyhow::Error {
        c.batch("PRAGMA busy_timeout = 0").unwrap();
        c.exec("INSERT INTO t VALUES (1)", &[]).unwrap_err()
    }

    #[test]
    fn busy_is_recognised_on_every_arm_and_nothing_else_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("busy.db");
        let holder = rusqlite::Connection::open(&path).unwrap();
        holder
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t(x); BEGIN IMMEDIATE;")
            .unwrap();
        for arm in [Arm::Sqlite, Arm::Plane] {
            let mut c = ArmConn::open(arm, &path).unwrap();
            let e = blocked_write(&mut c);
            assert!(is_busy(&e), "{}: {e:#}", arm.name());
            assert!(is_busy(&e.context("with context")), "{}", arm.name());
            let other = c.exec("INSERT INTO missing VALUES (1)", &[]).unwrap_err();
            assert!(!is_busy(&other), "{}: {other:#}", arm.name());
        }
    }
}
