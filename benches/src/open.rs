//! §8 Open: the time a new process takes to its first plane-served answer,
//! from the persisted state and by a rebuild, and the cost of following
//! another process's one-row commit.
//!
//! The table `ev(id, device, country, plan, cents)` with `--rows` rows
//! (default 1,000,000; 3, 40 and 4 distinct values), WAL, and a 3-dimension
//! plane (`device, country, plan`; `cents`). Three files of the same rows:
//! `persisted` (the default), `rebuild` (`PRAGMA pleroma_persist = off`, so
//! every open builds the plane from the table) and `sqlite` (no plane).
//!
//! - `open`: a new process (this program again, in a probe mode) opens the
//!   file and runs `SELECT SUM(cents) FROM ev WHERE device = 'web'`; it
//!   reports the time from before `open` to the answer, and the parent
//!   times the whole process too. Medians of 5. The answer of every arm is
//!   compared with plain SQLite's.
//! - `follow`: this process holds a Pleroma connection on the `persisted`
//!   file; another process commits one row through Pleroma; the next answer
//!   here applies that commit's delta. Medians of 5, with the rebuild
//!   counter (must stay 0).
//!
//! Run: `cargo run --release --bin pleroma -- bench open --rows 1000000`

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rusqlite::types::Value;

use crate::harness::{millis, Options, Report};
use crate::readers::remove_db;
use crate::Outcome;

const QUERY: &str = "SELECT SUM(cents) FROM ev WHERE device = 'web'";
const RUNS: usize = 5;
/// Set in the probe process: `ARM FILE`.
const PROBE: &str = "PLEROMA_OPEN_PROBE";

fn build(path: &Path, rows: u64) -> Result<()> {
    remove_db(path);
    let c = rusqlite::Connection::open(path)?;
    c.execute_batch(&format!(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE ev(id INTEGER PRIMARY KEY, device TEXT, country TEXT, plan TEXT, cents INTEGER);
         WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {rows})
         INSERT INTO ev(device, country, plan, cents)
         SELECT CASE i % 3 WHEN 0 THEN 'web' WHEN 1 THEN 'ios' ELSE 'android' END,
                'c' || (i * 7 % 40), 'p' || (i % 4), (i * 37) % 10000 - 1000 FROM s;"
    ))?;
    Ok(())
}

fn answer_plain(path: &Path) -> Result<Value> {
    let c = rusqlite::Connection::open(path)?;
    Ok(c.query_row(QUERY, [], |r| r.get(0))?)
}

/// The probe process: open, answer, print `elapsed_ms route answer`.
fn probe(spec: &str) -> Result<()> {
    let (arm, file) = spec.split_once(' ').context("probe spec")?;
    let start = Instant::now();
    let (answer, route) = if arm == "sqlite" {
        let c = rusqlite::Connection::open(file)?;
        let v: Value = c.query_row(QUERY, [], |r| r.get(0))?;
        (v, "sqlite".to_owned())
    } else {
        let mut c = pleroma::Connection::open(file)?;
        let rows = c.query(QUERY, &[])?;
        (
            rows.rows[0][0].clone(),
            format!("{:?}", c.last_route().kind),
        )
    };
    let ms = millis(start);
    println!("{ms} {route} {answer:?}");
    Ok(())
}

/// One probe run: (ms inside the process, ms of the whole process, route,
/// answer).
fn run_probe(arm: &str, file: &Path) -> Result<(f64, f64, String, String)> {
    let exe = std::env::current_exe()?;
    let start = Instant::now();
    let out = Command::new(exe)
        .args(["bench", "open"])
        .env(PROBE, format!("{arm} {}", file.display()))
        .output()?;
    let whole = millis(start);
    if !out.status.success() {
        bail!("probe {arm}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let mut w = line.split_whitespace();
    let ms: f64 = w.next().context("probe output")?.parse()?;
    let route = w.next().unwrap_or("").to_owned();
    let answer = w.collect::<Vec<_>>().join(" ");
    Ok((ms, whole, route, answer))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(rows: u64, opts: &Options) -> Result<Outcome> {
    if let Ok(spec) = std::env::var(PROBE) {
        probe(&spec)?;
        std::process::exit(0);
    }
    let dir: PathBuf = std::env::var_os("PLEROMA_BENCH_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("open-{rows}"));
    std::fs::create_dir_all(&dir)?;
    let mut report = Report::new("open", rows, opts);
    let base = dir.join("sqlite.db");
    let t = Instant::now();
    build(&base, rows)?;
    report
        .figures
        .insert("load_s".into(), t.elapsed().as_secs_f64());
    let want = format!("{:?}", answer_plain(&base)?);
    let persisted = dir.join("persisted.db");
    let rebuild = dir.join("rebuild.db");
    for (p, setting) in [(&persisted, "on"), (&rebuild, "off")] {
        remove_db(p);
        std::fs::copy(&base, p)?;
        let mut c = pleroma::Connection::open(p)?;
        c.execute_batch(&format!(
            "PRAGMA pleroma_persist = {setting}; PRAGMA pleroma_attach('ev', 'device, country, plan', 'cents')"
        ))?;
    }
    let mut md = format!(
        "## §8 open: first plane answer in a new process, {rows} rows\n\n\
         | arm | open → answer (ms, median of {RUNS}) | whole process (ms) | route |\n|---|---:|---:|---|\n"
    );
    for (arm, file) in [
        ("persisted", &persisted),
        ("rebuild", &rebuild),
        ("sqlite", &base),
    ] {
        let mut inside = Vec::new();
        let mut whole = Vec::new();
        let mut route = String::new();
        for _ in 0..RUNS {
            let (ms, w, r, a) =
                run_probe(if arm == "sqlite" { "sqlite" } else { "pleroma" }, file)?;
            if a != want {
                report
                    .mismatches
                    .push(format!("open {arm}: {a}, SQLite says {want}"));
            }
            inside.push(ms);
            whole.push(w);
            route = r;
        }
        let (i, w) = (median(inside), median(whole));
        report.figures.insert(format!("open_ms_{arm}"), i);
        report.figures.insert(format!("process_ms_{arm}"), w);
        md += &format!("| {arm} | {i:.3} | {w:.1} | {route} |\n");
    }
    // Following another process's one-row commit.
    let mut c = pleroma::Connection::open(&persisted)?;
    c.query(QUERY, &[])?;
    let exe = std::env::current_exe()?;
    let mut follow = Vec::new();
    for i in 0..RUNS {
        let st = Command::new(&exe)
            .arg("sql")
            .arg(&persisted)
            .arg(format!(
                "INSERT INTO ev(device, country, plan, cents) VALUES ('web', 'c1', 'p1', {i})"
            ))
            .output()?;
        if !st.status.success() {
            bail!(
                "the writer process: {}",
                String::from_utf8_lossy(&st.stderr)
            );
        }
        let start = Instant::now();
        let got = c.query(QUERY, &[])?;
        follow.push(millis(start));
        let got = format!("{:?}", got.rows[0][0]);
        let plain = format!("{:?}", answer_plain(&persisted)?);
        if got != plain {
            report
                .mismatches
                .push(format!("follow: {got}, SQLite says {plain}"));
        }
        if c.last_route().kind != pleroma::RouteKind::Plane {
            report
                .mismatches
                .push(format!("follow: not served ({:?})", c.last_route()));
        }
    }
    let planes = c.query("PRAGMA pleroma_planes", &[])?;
    let col = planes
        .columns
        .iter()
        .position(|n| n == "rebuilds")
        .context("rebuilds column")?;
    let rebuilds = match planes.rows[0][col] {
        Value::Integer(n) => n,
        _ => -1,
    };
    let f = median(follow);
    report.figures.insert("follow_ms".into(), f);
    report
        .figures
        .insert("follow_rebuilds".into(), rebuilds as f64);
    md += &format!(
        "\nAfter a one-row commit by another Pleroma process: next plane answer here {f:.3} ms \
         (median of {RUNS}), rebuilds {rebuilds}.\n"
    );
    for p in [&persisted, &rebuild, &base] {
        remove_db(p);
    }
    Ok(Outcome {
        report,
        markdown: md,
        chart: Vec::new(),
    })
}
