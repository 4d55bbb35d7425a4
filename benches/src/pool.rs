//! §10 Many readers on one file: a pool of 8 connections, one of them writing.
//!
//! The §2 `events` table (`--rows` rows, default 1,000,000; a WAL copy of
//! the cached dashboard file, `synchronous = NORMAL`) and the §2 plane. Eight
//! connections of one arm on the file, held in a `Vec` (the pool): on the
//! plane arm the plane is attached on connection 0 after all eight are open,
//! so the other seven take it over. One warm-up round of reads, then 20
//! rounds, alternating: connection 0 writes one row (autocommit) or a
//! 1,000-row batch (one transaction); then each of the seven others runs four
//! plane-served queries (a filter with `COUNT`/`SUM`, and a filtered
//! `GROUP BY`, each with a `country = ?1` parameter that differs on every call
//! of a round, so no call is a memo hit of an earlier one). Measured per arm
//! (`sqlite`: 8 plain rusqlite connections; `engine`; `plane`), medians over
//! the seven connections and the 20 rounds:
//!
//! - `after_single`, `after_batch`: a connection's first query after the
//!   write (it takes the writer's published planes over, or rebuilds);
//! - `no_write`: its other three queries (no write since its last one);
//! - `write_single`, `write_batch`: the writer's statements;
//! - rebuilds over all eight connections (`PRAGMA pleroma_planes`), and how
//!   the reads were answered.
//!
//! Every answer is compared with the `sqlite` arm's answer to the same call.
//!
//! Left out: threads (the pool is used from one thread, so "right after a
//! write" is exact; `bench readers` runs readers on threads), the second
//! process and the new process of §10 (cross-process commits show as an
//! outside writer and rebuild; persisted state does not exist yet).
//!
//! Run: `cargo run --release --bin pleroma -- bench pool --rows 1000000`

use std::time::Instant;

use anyhow::{Context, Result};
use rusqlite::types::Value;

use crate::check;
use crate::dashboard;
use crate::gen::Rng;
use crate::harness::{fmt_ms, millis, Answer, Arm, Options, Report};
use crate::ingest::{self, event_row, INSERT};
use crate::readers::{cell, rebuilds, remove_db, route_kind};
use crate::writes::ArmConn;
use crate::Outcome;

const CONNECTIONS: usize = 8;
const ROUNDS: usize = 20;
const CALLS: usize = 4;
const BATCH: usize = 1_000;
const COUNTRIES: [&str; 8] = ["US", "GB", "DE", "FR", "ES", "JP", "BR", "IN"];

/// The served queries, each with one parameter (a country).
pub const QUERIES: [(&str, &str); 2] = [
    (
        "country_totals",
        "SELECT COUNT(*), SUM(revenue_cents) FROM events WHERE country = ?1",
    ),
    (
        "country_by_device",
        "SELECT device, COUNT(*), SUM(duration_ms) FROM events WHERE country = ?1 \
         GROUP BY device ORDER BY device",
    ),
];

fn query(c: &mut ArmConn, sql: &str, params: &[Value]) -> Result<pleroma::Shared<Vec<Vec<Value>>>> {
    match c {
        ArmConn::Sqlite(s) => {
            let mut stmt = s.prepare_cached(sql)?;
            let n = stmt.column_count();
            let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                out.push(
                    (0..n)
                        .map(|i| row.get(i))
                        .collect::<rusqlite::Result<Vec<Value>>>()?,
                );
            }
            Ok(out.into())
        }
        ArmConn::Pleroma(p) => Ok(p
            .query(sql, params)
            .with_context(|| format!("pleroma: {sql}"))?
            .rows),
    }
}

#[derive(Default)]
struct ArmRun {
    after_single: Vec<f64>,
    after_batch: Vec<f64>,
    no_write: Vec<f64>,
    write_single: Vec<f64>,
    write_batch: Vec<f64>,
    /// (label, sql, rows) of every call, in order.
    answers: Vec<(String, &'static str, Vec<Vec<Value>>)>,
    /// Route kinds: (after a write?, kind, count).
    routes: Vec<(bool, &'static str, u64)>,
    rebuilds: i64,
}

fn run_arm(arm: Arm, rows: u64, seed: u64, report: &mut Report) -> Result<ArmRun> {
    let base = ingest::base(rows, seed)?;
    let (path, first, _) =
        ingest::copy_of_base(&base, &format!("pool-{}.db", arm.name()), Arm::Sqlite)?;
    drop(first);
    let mut pool: Vec<ArmConn> = (0..CONNECTIONS)
        .map(|_| {
            let mut c = ArmConn::open(arm, &path)?;
            // Per connection: a commit costs no fsync on any of them.
            c.batch("PRAGMA synchronous = NORMAL")?;
            Ok(c)
        })
        .collect::<Result<_>>()?;
    if arm == Arm::Plane {
        let t = Instant::now();
        pool[0].batch(dashboard::PLANE_PRAGMA)?;
        report.figures.insert("plane_build_ms".into(), millis(t));
    }
    let mut rng = Rng::new(seed ^ 0x9001);
    let mut id = rows as i64;
    let mut out = ArmRun::default();
    for round in 0..=ROUNDS {
        // Round 0 only reads (the warm-up: untimed, still checked).
        let single = round % 2 == 1;
        if round > 0 {
            let w = &mut pool[0];
            let t = Instant::now();
            if single {
                id += 1;
                w.exec(INSERT, &event_row(&mut rng, id))?;
                out.write_single.push(millis(t));
            } else {
                w.exec("BEGIN", &[])?;
                for _ in 0..BATCH {
                    id += 1;
                    w.exec(INSERT, &event_row(&mut rng, id))?;
                }
                w.exec("COMMIT", &[])?;
                out.write_batch.push(millis(t));
            }
        }
        for (i, c) in pool.iter_mut().enumerate().skip(1) {
            for j in 0..CALLS {
                let (name, sql) = QUERIES[j % QUERIES.len()];
                let country = COUNTRIES[(round + i + j) % COUNTRIES.len()];
                let t = Instant::now();
                let rows = query(c, sql, &[Value::Text(country.into())])?;
                let ms = millis(t);
                let after = j == 0;
                if round > 0 {
                    match (after, single) {
                        (true, true) => out.after_single.push(ms),
                        (true, false) => out.after_batch.push(ms),
                        (false, _) => out.no_write.push(ms),
                    }
                    let kind = route_kind(c);
                    match out
                        .routes
                        .iter_mut()
                        .find(|(a, k, _)| *a == after && *k == kind)
                    {
                        Some((_, _, n)) => *n += 1,
                        None => out.routes.push((after, kind, 1)),
                    }
                }
                out.answers.push((
                    format!("{name}('{country}') round {round} connection {i}"),
                    sql,
                    rows.into_inner(),
                ));
            }
        }
    }
    for c in pool.iter_mut() {
        out.rebuilds += rebuilds(c)?;
    }
    drop(pool);
    remove_db(&path);
    Ok(out)
}

const MEASURES: [&str; 5] = [
    "no_write",
    "after_single",
    "after_batch",
    "write_single",
    "write_batch",
];

pub fn run(rows: u64, opts: &Options) -> Result<Outcome> {
    let mut report = Report::new("pool", rows, opts);
    let arms = opts.sqlite_arms();
    let mut runs = Vec::new();
    for &arm in &arms {
        let r = run_arm(arm, rows, opts.seed, &mut report)?;
        let mut routes = r.routes.clone();
        routes.sort();
        let fmt = |after: bool| {
            routes
                .iter()
                .filter(|(a, _, _)| *a == after)
                .map(|(_, k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (r_after, r_steady) = (fmt(true), fmt(false));
        report.notes.insert(
            format!("{} reads answered by", arm.name()),
            format!("after a write: {r_after}; no write in between: {r_steady}"),
        );
        report
            .figures
            .insert(format!("{} rebuilds", arm.name()), r.rebuilds as f64);
        for (m, samples) in MEASURES.iter().zip([
            &r.no_write,
            &r.after_single,
            &r.after_batch,
            &r.write_single,
            &r.write_batch,
        ]) {
            let route = match *m {
                "no_write" => r_steady.clone(),
                "after_single" | "after_batch" => r_after.clone(),
                _ => String::new(),
            };
            report.cells.push(cell(m, arm, samples, &route));
        }
        runs.push((arm, r));
    }
    let mut bad_arms: Vec<Arm> = Vec::new();
    if let Some((_, first)) = runs.first() {
        for (k, (label, sql, _)) in first.answers.iter().enumerate() {
            let answers: Vec<Answer> = runs
                .iter()
                .map(|(arm, r)| Answer {
                    arm: *arm,
                    rows: r.answers[k].2.clone(),
                })
                .collect();
            for (arm, verdict) in check::compare_all(label, sql, &answers) {
                if let Err(msg) = verdict {
                    if report.mismatches.len() < 20 {
                        report.mismatches.push(msg);
                    }
                    if !bad_arms.contains(&arm) {
                        bad_arms.push(arm);
                    }
                }
            }
        }
        report
            .figures
            .insert("answers checked per arm".into(), first.answers.len() as f64);
    }
    for c in report.cells.iter_mut() {
        c.matched = !bad_arms.iter().any(|a| a.name() == c.arm);
    }
    let markdown = table(&report, &arms);
    Ok(Outcome {
        report,
        markdown,
        chart: MEASURES.iter().map(|s| s.to_string()).collect(),
    })
}

fn table(report: &Report, arms: &[Arm]) -> String {
    let mut out = ingest::measure_table(report, arms, &MEASURES);
    if let Some(p) = report.cell("no_write", Arm::Plane) {
        let after = |m: &str| report.cell(m, Arm::Plane).map_or(f64::NAN, |c| c.warm_ms);
        out.push_str(&format!(
            "\nPlane arm: served query {} ms with no write in between, {} ms right after a single-row write \
             ({:.2}x), {} ms after a 1,000-row batch ({:.2}x); rebuilds over the 8 connections: {} (goal 0).\n",
            fmt_ms(p.warm_ms),
            fmt_ms(after("after_single")),
            after("after_single") / p.warm_ms,
            fmt_ms(after("after_batch")),
            after("after_batch") / p.warm_ms,
            report.figures.get("plane rebuilds").copied().unwrap_or(f64::NAN),
        ));
    }
    out
}
