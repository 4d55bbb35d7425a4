//! §5 Query classes: 17 classes on one table, run at 100,000 / 300,000 /
//! 1,000,000 rows (one size per run).
//!
//! `facts(id, g INTEGER (10 values), tag TEXT (4), k1 INTEGER (40), m INTEGER,
//! n INTEGER, note TEXT)` with the plane on dims `g, tag, k1` (a 12-bit
//! joint) and measures `m, n`; join tables `dim1(id, name)` and
//! `dim2(id, name)` (40 INTEGER keys each) and `tags(tag, label)` (4 TEXT keys).
//!
//! Classes: whole-table COUNT(*), SUM, MIN, MAX, COUNT DISTINCT, one-column
//! GROUP BY, two-column GROUP BY, GROUP BY with WHERE, COUNT DISTINCT with
//! WHERE, equality, IN and range filters, HAVING, two INT joins (40 keys),
//! one TEXT join (4 keys), and a control query the plane declines (a LIKE on
//! `note`), which must read 0.8–1.25x of the engine.
//!
//! Outcome counts of `plane` against `engine` (warm): at least 2x, 1.25–2x,
//! tie (within 1.25x either way, the seed's band for this workload), slower
//! (under 0.8x), noisy (the ratio falls in different outcomes at the two
//! ends of the two cells' loop spreads).
//!
//! Joins: limbs on `facts.k1 → dim1.id` and `facts.tag → tags.tag` serve
//! `join_int` and `join_text_sum` (COUNT and SUMs of `facts`); the two joins
//! that group on the dimension table's `name`/`label` are declined by rule
//! and run on SQLite (the table reports that route).
//!
//! Run: `cargo run --release --bin pleroma -- bench classes --rows 100000`
//! (then `--rows 300000` and `--rows 1000000`).

use anyhow::Result;

use crate::gen::{self, Rng};
use crate::harness::{self, table_row, Arm, Options, Query, Report, Workload};
use crate::Outcome;

pub const PLANE_PRAGMA: &str = "PRAGMA pleroma_attach('facts', 'g, tag, k1', 'm, n')";
const TAGS: [&str; 4] = ["a", "b", "c", "d"];

pub fn create_and_load(
    conn: &rusqlite::Connection,
    rows: u64,
    seed: u64,
    progress: bool,
) -> Result<()> {
    conn.execute_batch(
        "CREATE TABLE facts(id INTEGER PRIMARY KEY, g INTEGER, tag TEXT, k1 INTEGER, m INTEGER, n INTEGER, note TEXT);
         CREATE TABLE dim1(id INTEGER PRIMARY KEY, name TEXT);
         CREATE TABLE dim2(id INTEGER PRIMARY KEY, name TEXT);
         CREATE TABLE tags(tag TEXT PRIMARY KEY, label TEXT);",
    )?;
    let mut rng = Rng::new(seed);
    conn.execute_batch("BEGIN")?;
    for k in 0..40i64 {
        conn.execute(
            "INSERT INTO dim1 VALUES (?1, ?2)",
            rusqlite::params![k, format!("d1-{:02}", k % 7)],
        )?;
        conn.execute(
            "INSERT INTO dim2 VALUES (?1, ?2)",
            rusqlite::params![k, format!("d2-{:02}", k % 5)],
        )?;
    }
    for (i, t) in TAGS.iter().enumerate() {
        conn.execute(
            "INSERT INTO tags VALUES (?1, ?2)",
            rusqlite::params![t, format!("label {}", i % 2)],
        )?;
    }
    let pb = gen::progress(progress, rows, "facts");
    {
        let mut ins = conn.prepare("INSERT INTO facts VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?;
        for id in 1..=rows {
            let g = rng.below(10) as i64;
            ins.execute(rusqlite::params![
                id as i64,
                g,
                TAGS[rng.weighted(&[40, 30, 20, 10])],
                rng.below(40) as i64,
                rng.below(100_000) as i64 - 10_000,
                rng.below(1000) as i64,
                format!("note {}", rng.below(1_000_000)),
            ])?;
            if id % 65536 == 0 {
                pb.inc(65536);
            }
        }
    }
    conn.execute_batch("COMMIT")?;
    pb.finish_and_clear();
    Ok(())
}

pub fn queries(rows: u64) -> Vec<Query> {
    let q = |n: &str, s: String| Query::new(n, &s, "");
    vec![
        q("count_star", "SELECT COUNT(*) FROM facts".into()),
        q("sum", "SELECT SUM(m) FROM facts".into()),
        q("min", "SELECT MIN(m) FROM facts".into()),
        q("max", "SELECT MAX(n) FROM facts".into()),
        q("count_distinct", "SELECT COUNT(DISTINCT k1) FROM facts".into()),
        q("group_by", "SELECT g, SUM(m) FROM facts GROUP BY g ORDER BY g".into()),
        q("group_by_2", "SELECT g, tag, COUNT(*), SUM(n) FROM facts GROUP BY g, tag ORDER BY g, tag".into()),
        q("group_by_where", "SELECT k1, SUM(m) FROM facts WHERE tag = 'b' GROUP BY k1 ORDER BY k1".into()),
        q("count_distinct_where", "SELECT COUNT(DISTINCT k1) FROM facts WHERE g < 5 AND tag <> 'd'".into()),
        q("eq_filter", "SELECT COUNT(*), SUM(m) FROM facts WHERE g = 3".into()),
        q("in_filter", "SELECT SUM(m) FROM facts WHERE k1 IN (1, 5, 9, 13)".into()),
        q("range_filter", "SELECT COUNT(*), AVG(n) FROM facts WHERE g BETWEEN 2 AND 5".into()),
        q(
            "having",
            format!("SELECT k1, SUM(m) FROM facts GROUP BY k1 HAVING COUNT(*) > {} ORDER BY k1", rows / 40),
        ),
        q("join_int", "SELECT COUNT(*), SUM(f.m) FROM facts f JOIN dim1 d ON d.id = f.k1".into()),
        q(
            "join_int_group",
            "SELECT d.name, SUM(f.m) FROM facts f JOIN dim2 d ON d.id = f.k1 GROUP BY d.name ORDER BY d.name".into(),
        ),
        q(
            "join_text",
            "SELECT t.label, COUNT(*) FROM facts f JOIN tags t ON t.tag = f.tag GROUP BY t.label ORDER BY t.label"
                .into(),
        ),
        q(
            "join_text_sum",
            "SELECT COUNT(*), SUM(f.n) FROM facts f JOIN tags t ON t.tag = f.tag WHERE f.g < 5".into(),
        ),
        q("control_declined", "SELECT COUNT(*) FROM facts WHERE note LIKE '%77%'".into()),
    ]
}

pub fn workload(rows: u64, seed: u64) -> Result<Workload> {
    let path = gen::cached_db("classes", rows, seed, |conn| {
        conn.execute_batch(gen::FAST_LOAD)?;
        create_and_load(conn, rows, seed, true)
    })?;
    Ok(Workload {
        name: "classes".into(),
        rows,
        path,
        plane_pragmas: vec![
            PLANE_PRAGMA.into(),
            "PRAGMA pleroma_limb('facts', 'k1', 'dim1', 'id')".into(),
            "PRAGMA pleroma_limb('facts', 'tag', 'tags', 'tag')".into(),
        ],
        tables: vec!["facts".into(), "dim1".into(), "dim2".into(), "tags".into()],
        queries: queries(rows),
    })
}

/// 0: at least 2x, 1: 1.25–2x, 2: tie, 3: slower.
fn bucket(r: f64) -> usize {
    if r >= 2.0 {
        0
    } else if r >= 1.25 {
        1
    } else if r > 0.8 {
        2
    } else {
        3
    }
}

/// The outcome counts of the plane against the engine, warm.
pub fn outcome_counts(report: &Report, queries: &[Query]) -> String {
    let (mut big, mut mid, mut tie, mut slower, mut noisy) =
        (vec![], vec![], vec![], vec![], vec![]);
    for q in queries {
        let (Some(p), Some(e)) = (
            report.cell(&q.name, Arm::Plane),
            report.cell(&q.name, Arm::Engine),
        ) else {
            continue;
        };
        // The bucket of the ratio at both ends of the loops' spread: a
        // noisy cell still counts where both ends agree.
        let lo = e.loop1_ms.min(e.loop2_ms) / p.loop1_ms.max(p.loop2_ms);
        let hi = e.loop1_ms.max(e.loop2_ms) / p.loop1_ms.min(p.loop2_ms);
        let name = q.name.clone();
        match (bucket(lo), bucket(hi)) {
            (a, b) if a == b => [&mut big, &mut mid, &mut tie, &mut slower][a].push(name),
            _ => noisy.push(name),
        }
    }
    let head = ["outcome (plane vs engine, warm)", "count", "queries"].map(String::from);
    let mut out = table_row(&head);
    out.push_str(&table_row(&head.clone().map(|_| "---".to_owned())));
    for (label, v) in [
        (">= 2x", big),
        ("1.25-2x", mid),
        ("tie (0.8-1.25x)", tie),
        ("slower (< 0.8x)", slower),
        ("noisy", noisy),
    ] {
        out.push_str(&table_row(&[
            label.to_owned(),
            v.len().to_string(),
            v.join(", "),
        ]));
    }
    out
}

pub fn run(rows: u64, opts: &Options) -> Result<Outcome> {
    let w = workload(rows, opts.seed)?;
    let mut report = harness::run_reads(&w, opts)?;
    let markdown = harness::markdown(&report, &w.queries);
    if opts.has(Arm::Plane) && opts.has(Arm::Engine) {
        report.summaries.push(outcome_counts(&report, &w.queries));
    }
    Ok(Outcome {
        report,
        markdown,
        chart: w.queries.iter().map(|q| q.name.clone()).collect(),
    })
}
