//! §3 Ingest while querying: writes and a dashboard panel, interleaved.
//!
//! The §2 `events` table (`--rows` base rows, default 2,000,000; the cached
//! dashboard file, copied per arm to a WAL scratch file with `synchronous =
//! NORMAL`), the §2 plane (dims `country, device, os, plan, channel,
//! daypart`, measures `duration_ms, revenue_cents, items`). Then 20 rounds
//! of: a 10,000-row bulk load (one transaction, prepared INSERT; a tenth of
//! the base below 100,000 base rows, so that a tiny run stays tiny), 200
//! single-row autocommit INSERTs, and an eight-query dashboard panel (COUNT,
//! SUM, AVG, group-bys with and without filters, all served by the plane);
//! then 300 trickle pairs (one autocommit INSERT, then one GROUP BY). One
//! connection per arm (`sqlite`, `engine`, `plane`), every arm the same rows
//! in the same order. Measured per arm (medians; the `~` mark compares the
//! first and second half of the rounds):
//!
//! - `bulk_10k`, `singles_200`, `panel` (the eight queries), `round_total`
//!   (all three), per round;
//! - `first_after_ingest`: the panel's first query, the first read after
//!   the round's writes;
//! - `trickle_pair`: one INSERT and one GROUP BY.
//!
//! Every panel answer of every round, and every trickle GROUP BY, must equal
//! the `sqlite` arm's.
//!
//! Left out: DuckDB (the seed's comparison is with the plane off), writers
//! on other connections (`bench readers`, `bench pool`), UPDATE and DELETE.
//!
//! Run: `cargo run --release --bin pleroma -- bench ingest --rows 2000000`

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use rusqlite::types::Value;

use crate::check;
use crate::dashboard;
use crate::gen::{self, Rng};
use crate::harness::{fmt_ms, fmt_ratio, millis, speedup, table_row, Answer, Arm, Options, Report};
use crate::readers::{cell, remove_db, route_kind, scratch, FILE_SETTINGS};
use crate::writes::ArmConn;
use crate::Outcome;

const ROUNDS: usize = 20;
const SINGLES: usize = 200;
const TRICKLE: usize = 300;

pub const INSERT: &str =
    "INSERT INTO events VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";

/// Rows of one bulk load: 10,000, fewer below a 100,000-row base (a tenth
/// of it, at least 100) so that a tiny run stays tiny.
pub fn bulk_rows(rows: u64) -> usize {
    (rows / 10).clamp(100, 10_000) as usize
}

/// The eight panel queries (name, SQL).
pub const PANEL: [(&str, &str); 8] = [
    ("total_count", "SELECT COUNT(*) FROM events"),
    ("total_revenue", "SELECT SUM(revenue_cents) FROM events"),
    (
        "revenue_by_country",
        "SELECT country, COUNT(*), SUM(revenue_cents) FROM events GROUP BY country ORDER BY country",
    ),
    (
        "duration_by_device",
        "SELECT device, SUM(duration_ms), AVG(duration_ms) FROM events GROUP BY device ORDER BY device",
    ),
    ("de_count", "SELECT COUNT(*) FROM events WHERE country = 'DE'"),
    (
        "mobile_pro_revenue",
        "SELECT SUM(revenue_cents) FROM events WHERE device = 'mobile' AND plan = 'pro'",
    ),
    (
        "evening_plan_channel",
        "SELECT plan, channel, COUNT(*), SUM(items) FROM events WHERE daypart = 'evening' \
         GROUP BY plan, channel ORDER BY plan, channel",
    ),
    (
        "ios_paid_channels",
        "SELECT COUNT(*), SUM(items) FROM events WHERE os = 'ios' AND channel IN ('ads', 'social')",
    ),
];

pub const TRICKLE_QUERY: &str =
    "SELECT channel, COUNT(*), SUM(items) FROM events GROUP BY channel ORDER BY channel";

const COUNTRIES: [&str; 8] = ["US", "GB", "DE", "FR", "ES", "JP", "BR", "IN"];
const DEVICES: [&str; 3] = ["mobile", "desktop", "tablet"];
const OSES: [&str; 4] = ["ios", "android", "windows", "macos"];
const PLANS: [&str; 3] = ["free", "pro", "team"];
const CHANNELS: [&str; 6] = ["search", "ads", "social", "email", "direct", "referral"];
const DAYPARTS: [&str; 4] = ["morning", "afternoon", "evening", "night"];
const TS0: i64 = 1_735_689_600;

/// One new `events` row with id `id`, in the §2 table's domains.
pub fn event_row(rng: &mut Rng, id: i64) -> Vec<Value> {
    let ts = TS0 + id * 7 + rng.below(7) as i64;
    let device = rng.below(3) as usize;
    let os = if device == 1 {
        2 + rng.below(2)
    } else {
        rng.below(2)
    } as usize;
    let plan = rng.below(3) as usize;
    let t = |s: &str| Value::Text(s.into());
    vec![
        Value::Integer(id),
        Value::Integer(ts),
        Value::Integer(rng.below(100_000) as i64 + 1),
        t(COUNTRIES[rng.below(8) as usize]),
        t(DEVICES[device]),
        t(OSES[os]),
        t(PLANS[plan]),
        t(CHANNELS[rng.below(6) as usize]),
        t(DAYPARTS[((ts / 3600) % 24 / 6) as usize]),
        Value::Integer(100 + rng.below(600_000) as i64),
        Value::Integer(if plan == 0 { 0 } else { rng.below(5000) as i64 }),
        Value::Integer(rng.below(6) as i64),
    ]
}

/// The cached §2 `events` file of `rows` rows (shared with `bench dashboard`).
pub fn base(rows: u64, seed: u64) -> Result<PathBuf> {
    gen::cached_db("dashboard", rows, seed, |conn| {
        conn.execute_batch(gen::FAST_LOAD)?;
        dashboard::create_and_load(conn, rows, seed, true)
    })
}

/// A scratch copy of the base in WAL mode, opened as `arm` (with the plane
/// attached on the plane arm); returns the attach's ms too.
pub fn copy_of_base(base: &Path, name: &str, arm: Arm) -> Result<(PathBuf, ArmConn, f64)> {
    let path = scratch(name)?;
    std::fs::copy(base, &path).context("copying the base table")?;
    let mut c = ArmConn::open(arm, &path)?;
    c.batch(FILE_SETTINGS)?;
    let mut build = 0.0;
    if arm == Arm::Plane {
        let t = Instant::now();
        c.batch(dashboard::PLANE_PRAGMA)?;
        build = millis(t);
    }
    Ok((path, c, build))
}

/// Everything one arm measured and answered.
#[derive(Default)]
struct ArmRun {
    bulk: Vec<f64>,
    singles: Vec<f64>,
    panel: Vec<f64>,
    round: Vec<f64>,
    first: Vec<f64>,
    trickle: Vec<f64>,
    /// Per round, per panel query; then the trickle answers.
    panel_answers: Vec<Vec<pleroma::Shared<Vec<Vec<Value>>>>>,
    trickle_answers: Vec<pleroma::Shared<Vec<Vec<Value>>>>,
    /// Route kinds of the panel's and the trickle's reads.
    routes: Vec<(&'static str, u64)>,
}

fn bump(v: &mut Vec<(&'static str, u64)>, k: &'static str) {
    match v.iter_mut().find(|(n, _)| *n == k) {
        Some((_, c)) => *c += 1,
        None => v.push((k, 1)),
    }
}

fn run_arm(arm: Arm, base: &Path, rows: u64, seed: u64, report: &mut Report) -> Result<ArmRun> {
    let (path, mut c, build) = copy_of_base(base, &format!("ingest-{}.db", arm.name()), arm)?;
    if arm == Arm::Plane {
        report.figures.insert("plane_build_ms".into(), build);
    }
    let mut rng = Rng::new(seed ^ 0x1a9e57);
    let mut id = rows as i64;
    let mut out = ArmRun::default();
    let bulk = bulk_rows(rows);
    for _ in 0..ROUNDS {
        let t_round = Instant::now();
        let t = Instant::now();
        c.exec("BEGIN", &[])?;
        for _ in 0..bulk {
            id += 1;
            c.exec(INSERT, &event_row(&mut rng, id))?;
        }
        c.exec("COMMIT", &[])?;
        out.bulk.push(millis(t));
        let t = Instant::now();
        for _ in 0..SINGLES {
            id += 1;
            c.exec(INSERT, &event_row(&mut rng, id))?;
        }
        out.singles.push(millis(t));
        let t = Instant::now();
        let mut answers = Vec::with_capacity(PANEL.len());
        for (i, (_, sql)) in PANEL.iter().enumerate() {
            let tq = Instant::now();
            answers.push(c.query(sql)?);
            if i == 0 {
                out.first.push(millis(tq));
            }
            bump(&mut out.routes, route_kind(&c));
        }
        out.panel.push(millis(t));
        out.round.push(millis(t_round));
        out.panel_answers.push(answers);
    }
    for _ in 0..TRICKLE {
        let t = Instant::now();
        id += 1;
        c.exec(INSERT, &event_row(&mut rng, id))?;
        let rows = c.query(TRICKLE_QUERY)?;
        out.trickle.push(millis(t));
        bump(&mut out.routes, route_kind(&c));
        out.trickle_answers.push(rows);
    }
    drop(c);
    remove_db(&path);
    Ok(out)
}

const MEASURES: [&str; 6] = [
    "bulk_10k",
    "singles_200",
    "panel",
    "round_total",
    "first_after_ingest",
    "trickle_pair",
];

pub fn run(rows: u64, opts: &Options) -> Result<Outcome> {
    let mut report = Report::new("ingest", rows, opts);
    let base = base(rows, opts.seed)?;
    let arms = opts.sqlite_arms();
    let mut runs = Vec::new();
    for &arm in &arms {
        let r = run_arm(arm, &base, rows, opts.seed, &mut report)?;
        let mut routes = r.routes.clone();
        routes.sort();
        let route = routes
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        report
            .notes
            .insert(format!("{} reads answered by", arm.name()), route.clone());
        for (m, samples) in MEASURES.iter().zip([
            &r.bulk, &r.singles, &r.panel, &r.round, &r.first, &r.trickle,
        ]) {
            report.cells.push(cell(m, arm, samples, &route));
        }
        runs.push((arm, r));
    }
    // Every panel answer of every round, and every trickle answer.
    let mut bad_arms: Vec<Arm> = Vec::new();
    let mut verify = |name: String, sql: &str, answers: Vec<Answer>, report: &mut Report| {
        for (arm, verdict) in check::compare_all(&name, sql, &answers) {
            if let Err(msg) = verdict {
                if report.mismatches.len() < 20 {
                    report.mismatches.push(msg);
                }
                if !bad_arms.contains(&arm) {
                    bad_arms.push(arm);
                }
            }
        }
    };
    for round in 0..ROUNDS {
        for (q, (name, sql)) in PANEL.iter().enumerate() {
            let answers = runs
                .iter()
                .map(|(arm, r)| Answer {
                    arm: *arm,
                    rows: r.panel_answers[round][q].to_vec(),
                })
                .collect();
            verify(
                format!("{name} (round {})", round + 1),
                sql,
                answers,
                &mut report,
            );
        }
    }
    for i in 0..TRICKLE {
        let answers = runs
            .iter()
            .map(|(arm, r)| Answer {
                arm: *arm,
                rows: r.trickle_answers[i].to_vec(),
            })
            .collect();
        verify(
            format!("trickle {}", i + 1),
            TRICKLE_QUERY,
            answers,
            &mut report,
        );
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

/// One row per measure: each arm's median, the plane's speed-up over each
/// other arm, and whether every arm's answers matched (shared with `pool`).
pub(crate) fn measure_table(report: &Report, arms: &[Arm], measures: &[&str]) -> String {
    let mut head = vec!["measure (median)".to_owned()];
    head.extend(arms.iter().map(|a| format!("{} ms", a.name())));
    let others: Vec<Arm> = arms.iter().copied().filter(|a| *a != Arm::Plane).collect();
    if arms.contains(&Arm::Plane) {
        head.extend(others.iter().map(|o| format!("plane vs {}", o.name())));
    }
    head.push("same answers".into());
    let mut out = table_row(&head);
    out.push_str(&table_row(&vec!["---".to_owned(); head.len()]));
    for &m in measures {
        let mut row = vec![m.to_owned()];
        for a in arms {
            row.push(
                report
                    .cell(m, *a)
                    .map(|c| format!("{}{}", fmt_ms(c.warm_ms), if c.noisy { " ~" } else { "" }))
                    .unwrap_or_default(),
            );
        }
        if let Some(p) = report.cell(m, Arm::Plane) {
            for o in &others {
                row.push(
                    report
                        .cell(m, *o)
                        .map(|c| fmt_ratio(speedup(p.warm_ms, c.warm_ms)))
                        .unwrap_or_default(),
                );
            }
        }
        let ok = arms
            .iter()
            .all(|a| report.cell(m, *a).is_none_or(|c| c.matched));
        row.push(if ok { "yes".into() } else { "**NO**".into() });
        out.push_str(&table_row(&row));
    }
    out
}

fn table(report: &Report, arms: &[Arm]) -> String {
    let mut out = measure_table(report, arms, &MEASURES);
    if let (Some(_), Some(_)) = (
        report.cell("panel", Arm::Plane),
        report.cell("panel", Arm::Engine),
    ) {
        let r = |m: &str| {
            speedup(
                report.cell(m, Arm::Plane).map_or(f64::NAN, |c| c.warm_ms),
                report.cell(m, Arm::Engine).map_or(f64::NAN, |c| c.warm_ms),
            )
        };
        out.push_str(&format!(
            "\n{} rounds of {} + {} rows, {} trickle pairs. Plane vs engine against the goals: first query after an ingest {} \
             (goal >= 100x), panel {} (goal >= 100x), round total {} (goal >= 5.78x), trickle pair {} \
             (seed 7.00x).\n",
            ROUNDS,
            bulk_rows(report.rows),
            SINGLES,
            TRICKLE,
            fmt_ratio(r("first_after_ingest")),
            fmt_ratio(r("panel")),
            fmt_ratio(r("round_total")),
            fmt_ratio(r("trickle_pair")),
        ));
    }
    out
}
