//! §6 Write cost of an attached plane.
//!
//! A 9-column table `w(id, d1 TEXT, d2 TEXT, d3 INTEGER, d4 INTEGER, m1, m2,
//! m3 INTEGER, note TEXT)`, the plane on dims `d1, d2, d3, d4` and measures
//! `m1, m2, m3`. Measured per arm (`sqlite`, `engine`, `plane`):
//!
//! - `insert_single` / `update_single` / `delete_single`: 205 autocommit
//!   single-row statements on a copy of the `--rows` table, the first 5
//!   dropped, median (loop 1 = statements 6–105, loop 2 = 106–205);
//! - `insert_other_table`: the same for an INSERT into a table without a
//!   plane on the same file (`other`), which needs nothing of the plane;
//! - `insert_single_expr`: the same for an INSERT into `wx`, whose plane
//!   (on the plane arm) has an expression dimension,
//!   `date(ts, 'unixepoch') AS day`, evaluated for every row;
//! - `batch_load`: `--rows` rows into an empty table in one transaction with
//!   a prepared INSERT (the plane attached before the load), done twice;
//! - `append_load`: the same rows through `Connection::appender` (one
//!   transaction, flushed once) on the Pleroma arms; on `sqlite`, the same
//!   prepared INSERT in one transaction again, so that the ratio is the
//!   appender's against plain SQLite's load;
//! - `plane_build`: attaching to the loaded table (first call) and
//!   `PRAGMA pleroma_rebuild('w')` (warm, 4 calls), against `scan_columns`: plain SQLite
//!   reading the seven plane columns of every row (the physical limit);
//! - bytes: database file bytes per row, and the plane's cell bytes.
//!
//! The files use WAL with `synchronous = NORMAL` so a commit costs no fsync
//! and the figures show the plane's own cost rather than the disk's. After
//! the writes every arm must give the same per-`d1` totals.
//!
//! Left out: a new process per table size (one run is one size; run the
//! command once per size), heap bytes per row.
//!
//! Run: `cargo run --release --bin pleroma -- bench writes --rows 1000000`

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use rusqlite::types::Value;

use crate::check;
use crate::gen::{self, Rng};
use crate::harness::{self, fmt_ms, median, millis, table_row, Arm, Cell, Options, Report};
use crate::Outcome;

pub const PLANE_PRAGMA: &str = "PRAGMA pleroma_attach('w', 'd1, d2, d3, d4', 'm1, m2, m3')";
const CREATE: &str =
    "CREATE TABLE w(id INTEGER PRIMARY KEY, d1 TEXT, d2 TEXT, d3 INTEGER, d4 INTEGER, \
                      m1 INTEGER, m2 INTEGER, m3 INTEGER, note TEXT)";
pub const INSERT: &str = "INSERT INTO w VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
const UPDATE: &str = "UPDATE w SET m1 = m1 + ?1, d3 = ?2 WHERE id = ?3";
const DELETE: &str = "DELETE FROM w WHERE id = ?1";
const CREATE_OTHER: &str = "CREATE TABLE other(id INTEGER PRIMARY KEY, a INTEGER, b TEXT)";
const INSERT_OTHER: &str = "INSERT INTO other(a, b) VALUES (?1, ?2)";
const CHECK: &str = "SELECT d1, COUNT(*), SUM(m1), SUM(m2), SUM(m3) FROM w GROUP BY d1 ORDER BY d1";
/// A table whose plane has an expression dimension, a day bucket of a raw
/// timestamp (issue 22, item 1): the write cost of evaluating it per row.
const CREATE_EXPR: &str =
    "CREATE TABLE wx(id INTEGER PRIMARY KEY, d1 TEXT, ts INTEGER, m1 INTEGER, note TEXT)";
const EXPR_PRAGMA: &str = "PRAGMA pleroma_attach('wx', 'd1, date(ts, ''unixepoch'') AS day', 'm1')";
const INSERT_EXPR: &str = "INSERT INTO wx(d1, ts, m1, note) VALUES (?1, ?2, ?3, ?4)";
const CHECK_EXPR: &str =
    "SELECT date(ts, 'unixepoch'), COUNT(*), SUM(m1) FROM wx GROUP BY 1 ORDER BY 1";
const D1: [&str; 6] = ["red", "green", "blue", "cyan", "magenta", "yellow"];
const D2: [&str; 4] = ["north", "south", "east", "west"];

/// Row `id` of `w`, its other columns drawn from `rng`.
pub fn row(rng: &mut Rng, id: i64) -> Vec<Value> {
    vec![
        Value::Integer(id),
        Value::Text(D1[rng.below(6) as usize].into()),
        Value::Text(D2[rng.below(4) as usize].into()),
        Value::Integer(rng.below(12) as i64),
        Value::Integer(2000 + rng.below(20) as i64),
        Value::Integer(rng.below(100_000) as i64),
        Value::Integer(rng.below(1_000) as i64),
        Value::Integer(rng.below(50) as i64 - 25),
        Value::Text(format!("row {id} {}", rng.below(1 << 20))),
    ]
}

/// A connection of one arm, for writes.
pub enum ArmConn {
    Sqlite(rusqlite::Connection),
    Pleroma(Box<pleroma::Connection>),
}

impl ArmConn {
    /// Open `path` as `arm` (the plane arm is opened without attaching).
    pub fn open(arm: Arm, path: &Path) -> Result<ArmConn> {
        Ok(match arm {
            Arm::Sqlite => ArmConn::Sqlite(rusqlite::Connection::open(path)?),
            _ => ArmConn::Pleroma(Box::new(pleroma::Connection::open(path)?)),
        })
    }

    pub fn exec(&mut self, sql: &str, params: &[Value]) -> Result<()> {
        match self {
            ArmConn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                if stmt.column_count() == 0 {
                    stmt.execute(rusqlite::params_from_iter(params))?;
                } else {
                    let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
                    while rows.next()?.is_some() {}
                }
            }
            ArmConn::Pleroma(c) => {
                c.execute(sql, params)
                    .with_context(|| format!("pleroma: {sql}"))?;
            }
        }
        Ok(())
    }

    pub fn batch(&mut self, sql: &str) -> Result<()> {
        match self {
            ArmConn::Sqlite(c) => c.execute_batch(sql)?,
            ArmConn::Pleroma(c) => c
                .execute_batch(sql)
                .with_context(|| format!("pleroma: {sql}"))?,
        }
        Ok(())
    }

    pub fn query(&mut self, sql: &str) -> Result<pleroma::Shared<Vec<Vec<Value>>>> {
        match self {
            ArmConn::Sqlite(c) => Ok(harness::sqlite_rows(c, sql)?.into()),
            ArmConn::Pleroma(c) => Ok(c
                .query(sql, &[])
                .with_context(|| format!("pleroma: {sql}"))?
                .rows),
        }
    }

    pub fn route(&self) -> String {
        match self {
            ArmConn::Sqlite(_) => "sqlite".into(),
            ArmConn::Pleroma(c) => c.last_route().kind.as_str().into(),
        }
    }

    /// The plane's cell bytes (`PRAGMA pleroma_planes`), 0 without one.
    pub fn plane_bytes(&mut self) -> Result<i64> {
        let ArmConn::Pleroma(c) = self else {
            return Ok(0);
        };
        let rows = c.query("PRAGMA pleroma_planes", &[])?;
        Ok(rows
            .rows
            .iter()
            .filter_map(|r| {
                if let Value::Integer(b) = r[5] {
                    Some(b)
                } else {
                    None
                }
            })
            .sum())
    }
}

fn scratch(name: &str) -> Result<PathBuf> {
    let dir = gen::data_dir().join("scratch");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(name);
    remove_db(&path);
    Ok(path)
}

fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

const FILE_SETTINGS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;";

/// Load `rows` rows into an empty table on `arm`; returns ms of the load.
fn batch_load(arm: Arm, rows: u64, seed: u64) -> Result<f64> {
    let path = scratch(&format!("writes-batch-{}.db", arm.name()))?;
    let mut c = ArmConn::open(arm, &path)?;
    c.batch(FILE_SETTINGS)?;
    c.batch(CREATE)?;
    if arm == Arm::Plane {
        c.batch(PLANE_PRAGMA)?;
    }
    let mut rng = Rng::new(seed);
    let t = Instant::now();
    c.exec("BEGIN", &[])?;
    for id in 1..=rows as i64 {
        c.exec(INSERT, &row(&mut rng, id))?;
    }
    c.exec("COMMIT", &[])?;
    let ms = millis(t);
    drop(c);
    remove_db(&path);
    Ok(ms)
}

/// Load `rows` rows into an empty table through the appender (plain
/// SQLite: its prepared INSERT in one transaction); returns ms of the load.
fn append_load(arm: Arm, rows: u64, seed: u64) -> Result<f64> {
    if arm == Arm::Sqlite {
        return batch_load(arm, rows, seed);
    }
    let path = scratch(&format!("writes-append-{}.db", arm.name()))?;
    let mut c = pleroma::Connection::open(&path)?;
    c.execute_batch(FILE_SETTINGS)?;
    c.execute_batch(CREATE)?;
    if arm == Arm::Plane {
        c.execute_batch(PLANE_PRAGMA)?;
    }
    let mut rng = Rng::new(seed);
    let t = Instant::now();
    {
        let mut a = c.appender("w")?;
        for id in 1..=rows as i64 {
            a.append_row(&row(&mut rng, id))?;
        }
        a.flush()?;
    }
    let ms = millis(t);
    // The rows the plane holds are the table's.
    let served = c.query(CHECK, &[])?;
    let plain = rusqlite::Connection::open(&path)?;
    let want = harness::sqlite_rows(&plain, CHECK)?;
    anyhow::ensure!(
        served.rows.into_inner() == want,
        "append_load: the {} arm's answer differs from the table's",
        arm.name()
    );
    drop(plain);
    drop(c);
    remove_db(&path);
    Ok(ms)
}

/// The base table of `rows` rows (cached), loaded by plain SQLite.
pub fn base(rows: u64, seed: u64) -> Result<PathBuf> {
    gen::cached_db("writes", rows, seed, |conn| {
        conn.execute_batch(gen::FAST_LOAD)?;
        conn.execute_batch(CREATE)?;
        let mut rng = Rng::new(seed);
        let pb = gen::progress(true, rows, "w");
        conn.execute_batch("BEGIN")?;
        {
            let mut ins = conn.prepare(INSERT)?;
            for id in 1..=rows as i64 {
                ins.execute(rusqlite::params_from_iter(row(&mut rng, id)))?;
                if id % 65536 == 0 {
                    pb.inc(65536);
                }
            }
        }
        conn.execute_batch("COMMIT")?;
        pb.finish_and_clear();
        Ok(())
    })
}

/// 205 autocommit runs of `sql`, the k-th with `params(k)`, each timed: the
/// cell of the first, and of runs 6-105 and 106-205 as its two loops.
fn statements(
    c: &mut ArmConn,
    arm: Arm,
    query: &str,
    sql: &str,
    mut params: impl FnMut(i64) -> Vec<Value>,
) -> Result<Cell> {
    let mut ms = Vec::with_capacity(205);
    for k in 0..205 {
        let p = params(k);
        let t = Instant::now();
        c.exec(sql, &p)?;
        ms.push(millis(t));
    }
    Ok(cell(query, arm, ms[0], &ms[5..105], &ms[105..], c.route()))
}

fn cell(query: &str, arm: Arm, first: f64, l1: &[f64], l2: &[f64], route: String) -> Cell {
    let all: Vec<f64> = l1.iter().chain(l2).copied().collect();
    let (m1, m2) = (median(l1), median(l2));
    Cell {
        query: query.into(),
        class: String::new(),
        arm: arm.name().into(),
        first_ms: first,
        warm_ms: median(&all),
        loop1_ms: m1,
        loop2_ms: m2,
        calls: l1.len(),
        noisy: harness::is_noisy(m1, m2),
        route,
        reason: String::new(),
        matched: true,
    }
}

/// Single-row INSERTs and UPDATEs on a copy of the base table.
fn single_rows(
    arm: Arm,
    base: &Path,
    rows: u64,
    seed: u64,
    report: &mut Report,
) -> Result<Vec<Vec<Value>>> {
    let path = scratch(&format!("writes-single-{}.db", arm.name()))?;
    std::fs::copy(base, &path).context("copying the base table")?;
    let mut c = ArmConn::open(arm, &path)?;
    c.batch(FILE_SETTINGS)?;
    // A table without a plane, on the same file as the planed one, and one
    // whose plane has an expression dimension.
    c.batch(CREATE_OTHER)?;
    c.batch(CREATE_EXPR)?;
    if arm == Arm::Plane {
        c.batch(EXPR_PRAGMA)?;
        let t = Instant::now();
        c.batch(PLANE_PRAGMA)?;
        let build = millis(t);
        let mut rebuilds = Vec::new();
        for _ in 0..4 {
            let t = Instant::now();
            c.batch("PRAGMA pleroma_rebuild('w')")?;
            rebuilds.push(millis(t));
        }
        report.cells.push(cell(
            "plane_build",
            arm,
            build,
            &rebuilds[..2],
            &rebuilds[2..],
            "plane".into(),
        ));
        report
            .figures
            .insert("plane_bytes".into(), c.plane_bytes()? as f64);
    }
    let mut rng = Rng::new(seed ^ 0xabcdef);
    let first_new = rows as i64 + 1;
    report
        .cells
        .push(statements(&mut c, arm, "insert_single", INSERT, |k| {
            row(&mut rng, first_new + k)
        })?);
    report
        .cells
        .push(statements(&mut c, arm, "update_single", UPDATE, |_| {
            vec![
                Value::Integer(rng.below(100) as i64),
                Value::Integer(rng.below(12) as i64),
                Value::Integer(rng.below(rows.max(1)) as i64 + 1),
            ]
        })?);
    // Deletes of rows that exist, each once (ids spread over the table).
    let n = rows.max(1) as i64;
    report
        .cells
        .push(statements(&mut c, arm, "delete_single", DELETE, |k| {
            vec![Value::Integer((k * 7919) % n + 1)]
        })?);
    report.cells.push(statements(
        &mut c,
        arm,
        "insert_other_table",
        INSERT_OTHER,
        |k| vec![Value::Integer(k), Value::Text("x".into())],
    )?);
    report.cells.push(statements(
        &mut c,
        arm,
        "insert_single_expr",
        INSERT_EXPR,
        |k| {
            vec![
                Value::Text(D1[rng.below(6) as usize].into()),
                // Two years of seconds from 2025-01-01.
                Value::Integer(1_735_689_600 + rng.below(63_072_000) as i64),
                Value::Integer(k),
                Value::Text(format!("row {k}")),
            ]
        },
    )?);
    let mut answer = c.query(CHECK)?.into_inner();
    answer.extend(c.query(CHECK_EXPR)?.into_inner());
    report
        .notes
        .insert(format!("check route {}", arm.name()), c.route());
    if arm == Arm::Sqlite {
        if let ArmConn::Sqlite(s) = &c {
            let pages: i64 = s.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            let size: i64 = s.query_row("PRAGMA page_size", [], |r| r.get(0))?;
            report.figures.insert(
                "file_bytes_per_row".into(),
                (pages * size) as f64 / rows.max(1) as f64,
            );
        }
    }
    drop(c);
    remove_db(&path);
    Ok(answer)
}

/// Plain SQLite reading the plane's seven columns of every row: the floor
/// for building the plane.
fn scan_columns(base: &Path) -> Result<f64> {
    let c = rusqlite::Connection::open(base)?;
    let t = Instant::now();
    let mut stmt = c.prepare("SELECT d1, d2, d3, d4, m1, m2, m3 FROM w")?;
    let mut rows = stmt.query([])?;
    let mut n = 0u64;
    while let Some(r) = rows.next()? {
        for i in 0..7 {
            if !matches!(r.get_ref(i)?, rusqlite::types::ValueRef::Null) {
                n += 1;
            }
        }
    }
    std::hint::black_box(n);
    Ok(millis(t))
}

pub fn run(rows: u64, opts: &Options) -> Result<Outcome> {
    let mut report = Report::new("writes", rows, opts);
    let base = base(rows, opts.seed)?;
    let mut answers = Vec::new();
    for &arm in &opts.arms {
        if arm == Arm::Duckdb {
            continue;
        }
        let (b1, b2) = (
            batch_load(arm, rows, opts.seed)?,
            batch_load(arm, rows, opts.seed)?,
        );
        report
            .cells
            .push(cell("batch_load", arm, b1, &[b1], &[b2], arm.name().into()));
        let (a1, a2) = (
            append_load(arm, rows, opts.seed)?,
            append_load(arm, rows, opts.seed)?,
        );
        report.cells.push(cell(
            "append_load",
            arm,
            a1,
            &[a1],
            &[a2],
            arm.name().into(),
        ));
        answers.push(harness::Answer {
            arm,
            rows: single_rows(arm, &base, rows, opts.seed, &mut report)?,
        });
    }
    scan_columns(&base)?;
    let scans: Vec<f64> = (0..4).map(|_| scan_columns(&base)).collect::<Result<_>>()?;
    report.cells.push(cell(
        "scan_columns",
        Arm::Sqlite,
        scans[0],
        &scans[..2],
        &scans[2..],
        "sqlite".into(),
    ));
    for (arm, verdict) in check::compare_all("writes", CHECK, &answers) {
        if let Err(msg) = verdict {
            report.mismatches.push(msg);
            for c in report.cells.iter_mut().filter(|c| c.arm == arm.name()) {
                c.matched = false;
            }
        }
    }
    let markdown = table(&report, opts);
    let chart = [
        "insert_single",
        "update_single",
        "batch_load",
        "plane_build",
        "scan_columns",
    ]
    .iter()
    .filter(|q| report.cells.iter().any(|c| &c.query == *q))
    .map(|q| q.to_string())
    .collect();
    Ok(Outcome {
        report,
        markdown,
        chart,
    })
}

fn table(report: &Report, opts: &Options) -> String {
    let arms = opts.sqlite_arms();
    let mut head = vec!["measure".to_owned()];
    head.extend(arms.iter().map(|a| format!("{} ms", a.name())));
    if arms.contains(&Arm::Sqlite) {
        head.extend(
            arms.iter()
                .filter(|a| **a != Arm::Sqlite)
                .map(|a| format!("{} / sqlite", a.name())),
        );
    }
    let mut out = table_row(&head);
    out.push_str(&table_row(
        &head.iter().map(|_| "---".to_owned()).collect::<Vec<_>>(),
    ));
    for q in [
        "insert_single",
        "update_single",
        "delete_single",
        "insert_other_table",
        "insert_single_expr",
        "batch_load",
        "append_load",
    ] {
        let mut row = vec![q.to_owned()];
        for a in &arms {
            row.push(
                report
                    .cell(q, *a)
                    .map(|c| format!("{}{}", fmt_ms(c.warm_ms), if c.noisy { " ~" } else { "" }))
                    .unwrap_or_default(),
            );
        }
        if let Some(s) = report.cell(q, Arm::Sqlite) {
            for a in arms.iter().filter(|a| **a != Arm::Sqlite) {
                // Cost ratio: how many times the SQLite time this arm takes.
                row.push(
                    report
                        .cell(q, *a)
                        .map(|c| format!("{:.2}x", c.warm_ms / s.warm_ms))
                        .unwrap_or_default(),
                );
            }
        }
        out.push_str(&table_row(&row));
    }
    out.push('\n');
    if let (Some(b), Some(s)) = (
        report.cell("plane_build", Arm::Plane),
        report.cell("scan_columns", Arm::Sqlite),
    ) {
        out.push_str(&format!(
            "Plane build on attach {} ms, rebuild {} ms (median of 4); SQLite reading the 7 plane columns {} ms: \
             rebuild / read = {:.2}x (goal <= 1.2x).\n",
            fmt_ms(b.first_ms),
            fmt_ms(b.warm_ms),
            fmt_ms(s.warm_ms),
            b.warm_ms / s.warm_ms,
        ));
    }
    out
}
