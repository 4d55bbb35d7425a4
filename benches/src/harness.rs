//! The arms, the timing method, the answer check and the reports.
//!
//! Method (BENCHMARKS.md): per query and arm, the first call is timed on its
//! own; after one untimed warm-up call, two separate loops of N calls each
//! give two medians. The warm figure is the median of both loops' calls; the
//! cell is *noisy* when the two loop medians disagree by more than 25 %.
//! Arms are interleaved per query (first calls of every arm, then loop 1 of
//! every arm, then loop 2) so that drift on a shared machine hits them alike.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context, Result};
use rusqlite::types::Value;
use serde::{Deserialize, Serialize};

use crate::check;
use crate::duckdb;
pub use crate::workload::{Answer, Arm, Options, Query, Workload};

/// Every figure of one (query, arm).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Cell {
    pub query: String,
    pub class: String,
    pub arm: String,
    pub first_ms: f64,
    /// Median of both loops' calls.
    pub warm_ms: f64,
    pub loop1_ms: f64,
    pub loop2_ms: f64,
    /// Calls per loop.
    pub calls: usize,
    pub noisy: bool,
    /// `plane`, `memo` or `engine`, and why (the router's own words).
    pub route: String,
    pub reason: String,
    /// Same rows as the reference arm (`sqlite`, else the first arm run).
    pub matched: bool,
}

/// A whole run: every cell plus workload-specific figures and summaries.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub workload: String,
    pub rows: u64,
    pub seed: u64,
    pub date: String,
    pub commit: String,
    pub machine: String,
    pub arms: Vec<String>,
    pub cells: Vec<Cell>,
    /// Figures that are not per-query cells: load rates, plane build, bytes.
    pub figures: BTreeMap<String, f64>,
    /// Free-form facts (DuckDB version, plane description, counters).
    pub notes: BTreeMap<String, String>,
    /// Pre-rendered Markdown summary tables (per class, outcome counts).
    pub summaries: Vec<String>,
    pub mismatches: Vec<String>,
}

impl Report {
    pub fn new(workload: &str, rows: u64, opts: &Options) -> Report {
        Report {
            workload: workload.into(),
            rows,
            seed: opts.seed,
            date: crate::env::today(),
            commit: crate::env::commit(),
            machine: crate::env::machine(),
            arms: opts.arms.iter().map(|a| a.name().to_owned()).collect(),
            ..Report::default()
        }
    }

    pub fn cell(&self, query: &str, arm: Arm) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.query == query && c.arm == arm.name())
    }
}

/// A local connection of one arm.
enum Conn {
    Sqlite(rusqlite::Connection),
    Pleroma(Box<pleroma::Connection>),
}

impl Conn {
    fn query(&mut self, sql: &str) -> Result<pleroma::Shared<Vec<Vec<Value>>>> {
        match self {
            Conn::Sqlite(c) => sqlite_rows(c, sql)
                .map(Into::into)
                .with_context(|| format!("sqlite: {sql}")),
            Conn::Pleroma(c) => Ok(c
                .query(sql, &[])
                .with_context(|| format!("pleroma: {sql}"))?
                .rows),
        }
    }

    fn route(&self) -> (String, String) {
        match self {
            Conn::Sqlite(_) => ("sqlite".into(), String::new()),
            Conn::Pleroma(c) => {
                let r = c.last_route();
                (r.kind.as_str().into(), r.reason.clone())
            }
        }
    }
}

/// Run `sql` on plain rusqlite (prepared once, cached) and collect every row.
pub fn sqlite_rows(conn: &rusqlite::Connection, sql: &str) -> rusqlite::Result<Vec<Vec<Value>>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let n = stmt.column_count();
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let mut r = Vec::with_capacity(n);
        for i in 0..n {
            r.push(row.get::<_, Value>(i)?);
        }
        out.push(r);
    }
    Ok(out)
}

/// The table and columns of `PRAGMA pleroma_attach('t', 'd1, d2', 'm1')`.
fn attach_columns(pragma: &str) -> Option<(String, Vec<String>)> {
    let args: Vec<&str> = pragma.split('\'').skip(1).step_by(2).collect();
    let (table, rest) = args.split_first()?;
    let cols = rest
        .iter()
        .flat_map(|a| a.split(','))
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(String::from)
        .collect();
    Some((table.to_string(), cols))
}

/// Plain SQLite reading a plane's columns of every row (best of 3): the
/// physical floor for building the plane.
fn read_plane_columns(path: &std::path::Path, pragma: &str) -> Result<f64> {
    let Some((table, cols)) = attach_columns(pragma) else {
        return Ok(0.0);
    };
    let c = rusqlite::Connection::open(path)?;
    let list = if cols.is_empty() {
        "rowid".to_owned()
    } else {
        cols.join(", ")
    };
    let sql = format!("SELECT {list} FROM \"{table}\"");
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        let mut stmt = c.prepare_cached(&sql)?;
        let n = stmt.column_count();
        let mut rows = stmt.query([])?;
        let mut seen = 0u64;
        while let Some(r) = rows.next()? {
            for i in 0..n {
                if !matches!(r.get_ref(i)?, rusqlite::types::ValueRef::Null) {
                    seen += 1;
                }
            }
        }
        std::hint::black_box(seen);
        best = best.min(millis(t));
    }
    Ok(best)
}

pub fn millis(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Two loop medians disagree by more than 25 %.
pub fn is_noisy(a: f64, b: f64) -> bool {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    lo > 0.0 && hi / lo > 1.25
}

/// Calls per loop for a query whose warm-up call took `est_ms`.
fn calls_for(est_ms: f64, opts: &Options) -> usize {
    let n = (opts.budget_ms / est_ms.max(1e-4)) as usize;
    n.clamp(opts.min_calls.min(opts.max_calls), opts.max_calls)
}

/// Run a read workload on every requested arm; returns the report (with any
/// mismatches listed, for the caller to fail on).
pub fn run_reads(w: &Workload, opts: &Options) -> Result<Report> {
    let mut w = w.clone();
    if !opts.only.is_empty() {
        w.queries.retain(|q| opts.only.contains(&q.name));
    }
    let w = &w;
    let mut report = Report::new(&w.name, w.rows, opts);
    let mut conns: Vec<(Arm, Conn)> = Vec::new();
    for &arm in &opts.arms {
        match arm {
            Arm::Sqlite => conns.push((arm, Conn::Sqlite(rusqlite::Connection::open(&w.path)?))),
            Arm::Engine => {
                // Pleroma without a plane: this process shares the plane
                // arm's planes for the file, so this connection is told to
                // consult none of them.
                let mut c = pleroma::Connection::open(&w.path)?;
                c.execute_batch("PRAGMA pleroma_route = engine")?;
                conns.push((arm, Conn::Pleroma(Box::new(c))));
            }
            Arm::Plane | Arm::Duckdb => {}
        }
    }
    if opts.has(Arm::Plane) {
        let mut c = pleroma::Connection::open(&w.path)?;
        let t = Instant::now();
        for p in &w.plane_pragmas {
            c.execute_batch(p)
                .with_context(|| format!("attaching the plane: {p}"))?;
        }
        report.figures.insert("plane_build_ms".into(), millis(t));
        let planes = c.query("PRAGMA pleroma_planes", &[])?;
        let mut bytes = 0;
        for r in &planes.rows {
            if let (Value::Text(t), Value::Text(dims), Value::Integer(b), Value::Integer(cells)) =
                (&r[0], &r[1], &r[5], &r[4])
            {
                bytes += b;
                report.notes.insert(
                    format!("plane {t}"),
                    format!("{cells} cells, {b} bytes, dims {dims}"),
                );
            }
        }
        report.figures.insert("plane_bytes".into(), bytes as f64);
        // The plane builds' physical limit; limbs read their tables again.
        let read: f64 = w
            .plane_pragmas
            .iter()
            .filter(|p| p.contains("pleroma_attach"))
            .map(|p| read_plane_columns(&w.path, p))
            .sum::<Result<f64>>()?;
        report
            .figures
            .insert("sqlite_read_plane_columns_ms".into(), read);
        conns.push((Arm::Plane, Conn::Pleroma(Box::new(c))));
    }
    let result = time_queries(w, opts, &mut conns, &mut report);
    for (arm, conn) in conns.iter() {
        if let (Arm::Plane, Conn::Pleroma(c)) = (arm, conn) {
            let counters = c.counters();
            report.notes.insert(
                "plane counters".into(),
                format!(
                    "{} served, {} declined",
                    counters.served,
                    counters.declined_total()
                ),
            );
        }
    }
    drop(conns);
    // Leave the cached file without a plane, whatever happened above (a
    // failed run never reaches a `PRAGMA pleroma_detach`).
    crate::gen::scrub(&w.path)?;
    let mut answers = result?;
    if opts.has(Arm::Duckdb) {
        let duck = duckdb::run(w, opts)?;
        report.figures.insert("duckdb_load_ms".into(), duck.load_ms);
        report.notes.insert("duckdb".into(), duck.version.clone());
        for (i, q) in w.queries.iter().enumerate() {
            let d = &duck.queries[i];
            let mut cell = Cell {
                query: q.name.clone(),
                class: q.class.clone(),
                arm: "duckdb".into(),
                route: "duckdb".into(),
                ..Cell::default()
            };
            match &d.error {
                Some(e) => {
                    cell.reason = e.clone();
                    cell.first_ms = f64::NAN;
                    cell.warm_ms = f64::NAN;
                    report
                        .mismatches
                        .push(format!("{} on duckdb failed: {e}", q.name));
                }
                None => {
                    fill_times(&mut cell, d.first_ms, &d.loop1_ms, &d.loop2_ms);
                    answers[i].push(Answer {
                        arm: Arm::Duckdb,
                        rows: d.rows.clone(),
                    });
                }
            }
            report.cells.push(cell);
        }
    }
    for c in report.cells.iter_mut() {
        c.matched = c.warm_ms.is_finite();
    }
    for (i, q) in w.queries.iter().enumerate() {
        let verdicts = check::compare_all(&q.name, &q.sql, &answers[i]);
        for (arm, outcome) in verdicts {
            if let Some(c) = report
                .cells
                .iter_mut()
                .find(|c| c.query == q.name && c.arm == arm.name())
            {
                c.matched &= outcome.is_ok();
            }
            if let Err(msg) = outcome {
                report.mismatches.push(msg);
            }
        }
    }
    report.cells.sort_by_key(|c| {
        let qi = w
            .queries
            .iter()
            .position(|q| q.name == c.query)
            .unwrap_or(usize::MAX);
        (qi, Arm::parse(&c.arm).ok())
    });
    Ok(report)
}

fn fill_times(cell: &mut Cell, first: f64, l1: &[f64], l2: &[f64]) {
    cell.first_ms = first;
    cell.loop1_ms = median(l1);
    cell.loop2_ms = median(l2);
    let all: Vec<f64> = l1.iter().chain(l2).copied().collect();
    cell.warm_ms = median(&all);
    cell.calls = l1.len();
    cell.noisy = is_noisy(cell.loop1_ms, cell.loop2_ms);
}

/// The local arms, interleaved per query. Returns each query's answers.
fn time_queries(
    w: &Workload,
    opts: &Options,
    conns: &mut [(Arm, Conn)],
    report: &mut Report,
) -> Result<Vec<Vec<Answer>>> {
    let mut all = Vec::new();
    for q in &w.queries {
        let mut firsts = Vec::new();
        let mut answers = Vec::new();
        let mut calls = Vec::new();
        for (arm, conn) in conns.iter_mut() {
            let t = Instant::now();
            let rows = conn.query(&q.sql)?;
            firsts.push(millis(t));
            let t = Instant::now();
            let again = conn.query(&q.sql)?;
            calls.push(calls_for(millis(t), opts));
            if again != rows {
                answers.push(Answer {
                    arm: *arm,
                    rows: again.into_inner(),
                });
            }
            answers.push(Answer {
                arm: *arm,
                rows: rows.into_inner(),
            });
        }
        let mut loops = vec![(Vec::new(), Vec::new()); conns.len()];
        for pass in 0..2 {
            for (k, (_, conn)) in conns.iter_mut().enumerate() {
                let mut samples = Vec::with_capacity(calls[k]);
                for _ in 0..calls[k] {
                    let t = Instant::now();
                    let rows = conn.query(&q.sql)?;
                    samples.push(millis(t));
                    drop(rows);
                }
                if pass == 0 {
                    loops[k].0 = samples;
                } else {
                    loops[k].1 = samples;
                }
            }
        }
        for (k, (arm, conn)) in conns.iter().enumerate() {
            let (route, reason) = conn.route();
            let mut cell = Cell {
                query: q.name.clone(),
                class: q.class.clone(),
                arm: arm.name().into(),
                route,
                reason,
                ..Cell::default()
            };
            fill_times(&mut cell, firsts[k], &loops[k].0, &loops[k].1);
            report.cells.push(cell);
        }
        all.push(answers);
    }
    Ok(all)
}

/// `other / plane`-style speed-up of `a` over `b` (how many times faster `a` is).
pub fn speedup(a_ms: f64, b_ms: f64) -> f64 {
    b_ms / a_ms
}

/// A ratio as the tables print it: under 1.15x either way is a tie.
pub fn fmt_ratio(r: f64) -> String {
    if !r.is_finite() {
        return "-".into();
    }
    if r < 1.15 && r > 1.0 / 1.15 {
        format!("tie ({r:.2}x)")
    } else if r >= 100.0 {
        format!("{r:.0}x")
    } else {
        format!("{r:.2}x")
    }
}

pub fn fmt_ms(ms: f64) -> String {
    if !ms.is_finite() {
        "-".into()
    } else if ms >= 100.0 {
        format!("{ms:.1}")
    } else if ms >= 1.0 {
        format!("{ms:.2}")
    } else if ms >= 0.01 {
        format!("{ms:.3}")
    } else {
        format!("{ms:.4}")
    }
}

/// The main per-query Markdown table: route, per-arm warm and first call,
/// and the plane's speed-ups.
pub fn markdown(report: &Report, queries: &[Query]) -> String {
    let arms: Vec<Arm> = report
        .arms
        .iter()
        .filter_map(|a| Arm::parse(a).ok())
        .collect();
    let has_class = queries.iter().any(|q| !q.class.is_empty());
    let mut head = vec!["query".to_owned()];
    if has_class {
        head.push("class".into());
    }
    if arms.contains(&Arm::Plane) {
        head.push("route".into());
    }
    for a in &arms {
        head.push(format!("{} warm ms", a.name()));
    }
    for a in &arms {
        head.push(format!("{} 1st ms", a.name()));
    }
    let others: Vec<Arm> = arms.iter().copied().filter(|a| *a != Arm::Plane).collect();
    if arms.contains(&Arm::Plane) {
        for o in &others {
            head.push(format!("plane vs {}", o.name()));
        }
        if others.contains(&Arm::Engine) {
            head.push("1st vs engine".into());
        }
    }
    head.push("same rows".into());
    let mut out = table_row(&head);
    out.push_str(&table_row(
        &head.iter().map(|_| "---".to_owned()).collect::<Vec<_>>(),
    ));
    for q in queries
        .iter()
        .filter(|q| report.cells.iter().any(|c| c.query == q.name))
    {
        let mut row = vec![q.name.clone()];
        if has_class {
            row.push(q.class.clone());
        }
        if arms.contains(&Arm::Plane) {
            row.push(
                report
                    .cell(&q.name, Arm::Plane)
                    .map(|c| c.route.clone())
                    .unwrap_or_default(),
            );
        }
        for a in &arms {
            row.push(
                report
                    .cell(&q.name, *a)
                    .map(|c| format!("{}{}", fmt_ms(c.warm_ms), if c.noisy { " ~" } else { "" }))
                    .unwrap_or_default(),
            );
        }
        for a in &arms {
            row.push(
                report
                    .cell(&q.name, *a)
                    .map(|c| fmt_ms(c.first_ms))
                    .unwrap_or_default(),
            );
        }
        if let Some(p) = report.cell(&q.name, Arm::Plane) {
            for o in &others {
                row.push(
                    report
                        .cell(&q.name, *o)
                        .map(|c| fmt_ratio(speedup(p.warm_ms, c.warm_ms)))
                        .unwrap_or_default(),
                );
            }
            if others.contains(&Arm::Engine) {
                row.push(
                    report
                        .cell(&q.name, Arm::Engine)
                        .map(|c| fmt_ratio(speedup(p.first_ms, c.first_ms)))
                        .unwrap_or_default(),
                );
            }
        }
        let ok = arms
            .iter()
            .all(|a| report.cell(&q.name, *a).is_none_or(|c| c.matched));
        row.push(if ok { "yes".into() } else { "**NO**".into() });
        out.push_str(&table_row(&row));
    }
    out
}

pub fn table_row(cells: &[String]) -> String {
    format!("| {} |\n", cells.join(" | "))
}
