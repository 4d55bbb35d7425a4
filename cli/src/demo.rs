//! `pleroma demo`: the ledger of the benchmarks, its 16 queries on plain
//! SQLite and through Pleroma side by side, and a check that every answer
//! is the same.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use pleroma::{rusqlite, Connection, RouteKind, Value};
use pleroma_benches::{gen, ledger};

/// Each query runs this many times on each side; the median is shown.
const RUNS: usize = 3;
const SEED: u64 = 42;

pub(crate) fn run(rows: u64, db: Option<PathBuf>) -> Result<ExitCode> {
    match db {
        Some(path) => race(rows, &path),
        None => {
            let temp = TempDb(
                std::env::temp_dir().join(format!("pleroma-demo-{}.db", std::process::id())),
            );
            // Ctrl-C skips destructors: remove the scratch file there too.
            let path = temp.0.clone();
            ctrlc::set_handler(move || {
                remove_db(&path);
                std::process::exit(130);
            })?;
            race(rows, &temp.0)
        }
    }
}

/// A scratch database file, removed (with its journals) however the demo ends.
struct TempDb(PathBuf);

impl Drop for TempDb {
    fn drop(&mut self) {
        remove_db(&self.0);
    }
}

fn remove_db(path: &Path) {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let mut p = path.to_path_buf().into_os_string();
        p.push(suffix);
        // Missing journals are the normal case.
        let _ = std::fs::remove_file(p);
    }
}

fn race(rows: u64, path: &Path) -> Result<ExitCode> {
    let mut out = io::stdout().lock();
    let plain = rusqlite::Connection::open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let has_ledger: bool = plain.query_row(
        "SELECT count(*) = 2 FROM sqlite_schema WHERE type = 'table' AND name IN ('invoices', 'customers')",
        [],
        |r| r.get(0),
    )?;
    let count = |table: &str| -> Result<i64> {
        Ok(plain.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?)
    };
    if has_ledger {
        let n = count("invoices")?;
        if n == 0 {
            bail!(
                "{} holds an empty ledger (an interrupted run?): remove it and run again",
                path.display()
            );
        }
        writeln!(
            out,
            "Using the ledger already in {} ({n} invoices).",
            path.display()
        )?;
    } else {
        writeln!(
            out,
            "Building the ledger ({rows} invoices) in {}",
            path.display()
        )?;
        let t = Instant::now();
        // Load on a connection of its own: the fast-load settings must not
        // linger on the one the race runs on.
        let loader = rusqlite::Connection::open(path)?;
        loader.execute_batch(gen::FAST_LOAD)?;
        ledger::create_and_load(&loader, rows, SEED, true)?;
        drop(loader);
        writeln!(
            out,
            "  {} invoices and {} customers loaded in {:.1} s",
            count("invoices")?,
            count("customers")?,
            t.elapsed().as_secs_f64()
        )?;
    }

    let mut conn = Connection::open(path)?;
    let attached = conn
        .query("PRAGMA pleroma_planes", &[])?
        .rows
        .iter()
        .any(|r| r.first() == Some(&text("invoices")));
    if attached {
        writeln!(
            out,
            "The plane on invoices is already attached (rebuilt on open)."
        )?;
    } else {
        let t = Instant::now();
        conn.execute(ledger::PLANE_PRAGMA, &[])?;
        writeln!(
            out,
            "{};  -- {:.1} ms",
            ledger::PLANE_PRAGMA,
            ms(t.elapsed())
        )?;
    }

    writeln!(
        out,
        "\nEach query {RUNS} times on each side; median times.\n"
    )?;
    writeln!(
        out,
        "{:<30} {:<11} {:>10} {:>11} {:>9}  answers",
        "query", "route", "SQLite ms", "Pleroma ms", "speed-up"
    )?;
    let mut mismatches = 0;
    let mut served = 0;
    let mut memo_seen = false;
    for (name, sql) in ledger::QUERIES {
        let (want, sqlite_t) = timed(|| sqlite_rows(&plain, sql))?;
        // Every run's answer is checked: the first may come from the plane
        // and the repeats from its memo.
        let mut routes: Vec<RouteKind> = Vec::new();
        let mut wrong = None;
        let pleroma_t = timed(|| {
            let rows = conn.query(sql, &[])?.rows;
            let kind = conn.last_route().kind;
            if !routes.contains(&kind) {
                routes.push(kind);
            }
            if wrong.is_none() && !same_answer(&want, &rows, sql) {
                wrong = Some(rows.clone());
            }
            Ok(rows.into_inner())
        })?
        .1;
        if let Some(got) = &wrong {
            mismatches += 1;
            let head = |r: &[Vec<Value>]| format!("{:?}", &r[..r.len().min(5)]);
            eprintln!(
                "{name}: SQLite answered {} but Pleroma {}",
                head(&want),
                head(got)
            );
        }
        if !routes.contains(&RouteKind::Engine) {
            served += 1;
        }
        memo_seen |= routes.contains(&RouteKind::Memo);
        let route: Vec<&str> = routes.iter().map(|k| k.as_str()).collect();
        let speedup = ms(sqlite_t) / ms(pleroma_t).max(1e-6);
        writeln!(
            out,
            "{name:<30} {:<11} {:>10.3} {:>11.3} {:>8}  {}",
            route.join("+"),
            ms(sqlite_t),
            ms(pleroma_t),
            if speedup < 10.0 {
                format!("{speedup:.1}x")
            } else {
                format!("{speedup:.0}x")
            },
            if wrong.is_none() { "same" } else { "DIFFERENT" }
        )?;
    }
    if memo_seen {
        writeln!(
            out,
            "\nmemo: the exact answer of an earlier identical statement, kept until the table is written."
        )?;
    }
    writeln!(
        out,
        "\n{} queries: {served} answered by Pleroma, {} declined to SQLite; {}",
        ledger::QUERIES.len(),
        ledger::QUERIES.len() - served,
        if mismatches == 0 {
            "every answer identical.".to_owned()
        } else {
            format!("{mismatches} DIFFERENT answers.")
        }
    )?;
    Ok(if mismatches == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Run `f` [`RUNS`] times; its last answer and the median time.
fn timed(mut f: impl FnMut() -> Result<Vec<Vec<Value>>>) -> Result<(Vec<Vec<Value>>, Duration)> {
    let mut times = Vec::with_capacity(RUNS);
    let mut rows = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        rows = f()?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok((rows, times[RUNS / 2]))
}

fn sqlite_rows(db: &rusqlite::Connection, sql: &str) -> Result<Vec<Vec<Value>>> {
    let mut stmt = db.prepare_cached(sql)?;
    let n = stmt.column_count();
    let rows = stmt.query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The same rows, values and storage classes; in the same order where the
/// query has an ORDER BY.
fn same_answer(a: &[Vec<Value>], b: &[Vec<Value>], sql: &str) -> bool {
    if pleroma::tokenize::orders_rows(sql) {
        return a == b;
    }
    let key = |rows: &[Vec<Value>]| {
        let mut k: Vec<String> = rows.iter().map(|r| format!("{r:?}")).collect();
        k.sort();
        k
    };
    key(a) == key(b)
}
