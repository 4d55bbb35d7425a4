//! §7 Concurrent readers: ingest while four reader threads query.
//!
//! `events(id INTEGER PRIMARY KEY, country TEXT, device TEXT, m INTEGER)` on
//! a WAL file (`synchronous = NORMAL`), the plane on dims `country, device`
//! and measure `m`. One writer inserts `--rows` events (default 2,000,000)
//! in 1,000-row batches, one transaction each, with a prepared INSERT. Four
//! reader threads, each on its own connection, run `COUNT(*)`, `SUM(m)` and
//! a `GROUP BY country` in turn, paced at 1,000 queries per second each (a
//! schedule of one query per millisecond, sleeping in between; a reader that
//! falls behind starts its schedule again rather than bursting). Measured per
//! arm (`sqlite`, `engine`, `plane`):
//!
//! - ingest rows/s with the readers, and in a separate run on a new file
//!   without them (same arm, same rows);
//! - per query kind, the median, p99 and worst read latency (one call's
//!   execute + fetch of every row), and how many reads ran;
//! - the plane arm: how each read was answered (plane, memo, engine: a read
//!   that finds another connection's commit not yet published runs on
//!   SQLite), the p99 and worst of the reads the plane or its memo answered
//!   alone, and the readers' rebuilds from `PRAGMA pleroma_planes`.
//!
//! Every read is checked exact: the rows are generated before the run, so
//! the answer of every committed state (k batches) is known; each answer must
//! be that of some k, and k never goes back on one reader. After the ingest
//! each reader reads once more and must see the last state.
//!
//! Left out: readers in other processes, read transactions held open across
//! commits (`router/tests/shared_planes.rs` covers them), queries with a
//! filter.
//!
//! Run: `cargo run --release --bin pleroma -- bench readers --rows 2000000`

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use rusqlite::types::Value;

use crate::gen::{self, Rng};
use crate::harness::{self, fmt_ms, median, millis, table_row, Arm, Cell, Options, Report};
use crate::writes::ArmConn;
use crate::Outcome;

const CREATE: &str =
    "CREATE TABLE events(id INTEGER PRIMARY KEY, country TEXT, device TEXT, m INTEGER)";
const PLANE_PRAGMA: &str = "PRAGMA pleroma_attach('events', 'country, device', 'm')";
const INSERT: &str = "INSERT INTO events VALUES (?1, ?2, ?3, ?4)";
/// In ORDER BY order, so that index order is the GROUP BY's row order.
const COUNTRIES: [&str; 8] = ["BR", "DE", "ES", "FR", "GB", "IN", "JP", "US"];
const DEVICES: [&str; 3] = ["desktop", "mobile", "tablet"];
const BATCH: usize = 1_000;
const READERS: usize = 4;
/// One query per reader per this many microseconds: 1,000 queries/s.
const PACE_US: u64 = 1_000;

/// The three reads, in the order each reader runs them.
pub const KINDS: [(&str, &str); 3] = [
    ("count", "SELECT COUNT(*) FROM events"),
    ("sum", "SELECT SUM(m) FROM events"),
    (
        "group_by",
        "SELECT country, COUNT(*), SUM(m) FROM events GROUP BY country ORDER BY country",
    ),
];

pub const FILE_SETTINGS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;";

/// A fresh scratch database path under the data directory.
pub fn scratch(name: &str) -> Result<PathBuf> {
    let dir = gen::data_dir().join("scratch");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(name);
    remove_db(&path);
    Ok(path)
}

/// Remove a database and its WAL, shared-memory and journal files.
pub fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

/// Total rebuilds of every plane on a Pleroma connection (`PRAGMA
/// pleroma_planes`, column `rebuilds`); 0 on plain SQLite.
pub fn rebuilds(c: &mut ArmConn) -> Result<i64> {
    let ArmConn::Pleroma(p) = c else {
        return Ok(0);
    };
    let rows = p.query("PRAGMA pleroma_planes", &[])?;
    let i = rows
        .columns
        .iter()
        .position(|c| c == "rebuilds")
        .ok_or_else(|| anyhow!("PRAGMA pleroma_planes has no column rebuilds"))?;
    Ok(rows
        .rows
        .iter()
        .map(|r| match r[i] {
            Value::Integer(n) => n,
            _ => 0,
        })
        .sum())
}

/// The route kind of the last statement: `sqlite`, `plane`, `memo`, `engine`.
pub fn route_kind(c: &ArmConn) -> &'static str {
    match c {
        ArmConn::Sqlite(_) => "sqlite",
        ArmConn::Pleroma(p) => p.last_route().kind.as_str(),
    }
}

/// A cell of timings: `warm_ms` the median of all samples; the two loops
/// are the first and second half of the samples.
pub fn cell(query: &str, arm: Arm, samples: &[f64], route: &str) -> Cell {
    let half = samples.len() / 2;
    let (l1, l2) = samples.split_at(half);
    let (m1, m2) = (median(l1), median(l2));
    Cell {
        query: query.into(),
        class: String::new(),
        arm: arm.name().into(),
        first_ms: samples.first().copied().unwrap_or(f64::NAN),
        warm_ms: median(samples),
        loop1_ms: m1,
        loop2_ms: m2,
        calls: l1.len(),
        noisy: harness::is_noisy(m1, m2),
        route: route.into(),
        reason: String::new(),
        matched: true,
    }
}

/// The `q` quantile (0..=1) of `xs` by nearest rank.
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// The rows to ingest and the answer of every committed state.
struct Data {
    /// (country index, device index, m) of row id `i + 1`.
    rows: Vec<(u8, u8, i64)>,
    /// Rows after k batches, k = 0..=batches.
    ends: Vec<i64>,
    /// Per k: per country (count, sum).
    groups: Vec<[(i64, i64); 8]>,
    /// Per k: SUM(m) (strictly increasing: every m is at least 1).
    sums: Vec<i64>,
}

impl Data {
    fn new(n: u64, seed: u64) -> Data {
        let mut rng = Rng::new(seed ^ 0x7ead);
        let rows: Vec<(u8, u8, i64)> = (0..n)
            .map(|_| {
                (
                    rng.below(8) as u8,
                    rng.below(3) as u8,
                    1 + rng.below(1_000) as i64,
                )
            })
            .collect();
        let mut ends = vec![0];
        let mut groups = vec![[(0, 0); 8]];
        let mut sums = vec![0];
        for chunk in rows.chunks(BATCH) {
            let mut g = *groups.last().expect("state 0");
            let mut s = *sums.last().expect("state 0");
            for &(c, _, m) in chunk {
                g[c as usize].0 += 1;
                g[c as usize].1 += m;
                s += m;
            }
            ends.push(ends.last().expect("state 0") + chunk.len() as i64);
            groups.push(g);
            sums.push(s);
        }
        Data {
            rows,
            ends,
            groups,
            sums,
        }
    }

    fn batches(&self) -> usize {
        self.ends.len() - 1
    }

    /// The state `k` an answer of query kind `kind` is, or why it is none.
    fn state_of(&self, kind: usize, rows: &[Vec<Value>]) -> Result<usize, String> {
        let one = |rows: &[Vec<Value>]| -> Result<Value, String> {
            match rows {
                [r] if r.len() == 1 => Ok(r[0].clone()),
                _ => Err(format!("expected one value, got {rows:?}")),
            }
        };
        match kind {
            0 => match one(rows)? {
                Value::Integer(n) => self
                    .ends
                    .binary_search(&n)
                    .map_err(|_| format!("COUNT(*) = {n} is no committed state (a torn batch?)")),
                v => Err(format!("COUNT(*) = {v:?}")),
            },
            1 => match one(rows)? {
                Value::Null => Ok(0),
                Value::Integer(s) if s > 0 => self
                    .sums
                    .binary_search(&s)
                    .map_err(|_| format!("SUM(m) = {s} is no committed state")),
                v => Err(format!("SUM(m) = {v:?}")),
            },
            _ => {
                let n: i64 = rows
                    .iter()
                    .map(|r| match r.get(1) {
                        Some(Value::Integer(c)) => *c,
                        _ => 0,
                    })
                    .sum();
                let k = self
                    .ends
                    .binary_search(&n)
                    .map_err(|_| format!("GROUP BY counts sum to {n}: no committed state"))?;
                let want = self.group_rows(k);
                if want != rows {
                    return Err(format!(
                        "GROUP BY at state {k}: got {rows:?}, want {want:?}"
                    ));
                }
                Ok(k)
            }
        }
    }

    fn group_rows(&self, k: usize) -> Vec<Vec<Value>> {
        self.groups[k]
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| *n > 0)
            .map(|(i, (n, s))| {
                vec![
                    Value::Text(COUNTRIES[i].into()),
                    Value::Integer(*n),
                    Value::Integer(*s),
                ]
            })
            .collect()
    }
}

/// What one reader saw.
#[derive(Default)]
struct ReaderLog {
    /// Per kind: latency of every read, ms.
    latency: [Vec<f64>; 3],
    /// Per kind: latency of the reads the plane or its memo answered.
    served: [Vec<f64>; 3],
    /// Per kind: reads by route kind.
    routes: [Vec<(&'static str, u64)>; 3],
    /// Why reads on a Pleroma arm went to SQLite (the router's words).
    reasons: Vec<(String, u64)>,
    /// Reads started later than their slot by more than one slot.
    late: u64,
    rebuilds: i64,
    errors: Vec<String>,
}

fn bump(v: &mut Vec<(&'static str, u64)>, k: &'static str) {
    match v.iter_mut().find(|(n, _)| *n == k) {
        Some((_, c)) => *c += 1,
        None => v.push((k, 1)),
    }
}

fn reader(
    arm: Arm,
    path: &Path,
    data: &Data,
    start: &Barrier,
    done: &AtomicBool,
) -> Result<ReaderLog> {
    let opened = (|| -> Result<(ArmConn, i64)> {
        let mut c = ArmConn::open(arm, path)?;
        let before = rebuilds(&mut c)?;
        Ok((c, before))
    })();
    // Always meet the writer at the start, even after a failed open.
    start.wait();
    let (mut c, before) = opened?;
    let mut log = ReaderLog::default();
    let pace = Duration::from_micros(PACE_US);
    let mut t0 = Instant::now();
    let mut slot = 0u32;
    let mut last_k = 0;
    let mut i = 0usize;
    let mut check = |c: &mut ArmConn, kind: usize, log: &mut ReaderLog| -> Result<usize> {
        let t = Instant::now();
        let rows = c.query(KINDS[kind].1)?;
        let ms = millis(t);
        log.latency[kind].push(ms);
        bump(&mut log.routes[kind], route_kind(c));
        if matches!(route_kind(c), "plane" | "memo") {
            log.served[kind].push(ms);
        }
        if let ArmConn::Pleroma(p) = c {
            let r = p.last_route();
            if r.kind == pleroma::RouteKind::Engine && arm == Arm::Plane {
                match log.reasons.iter_mut().find(|(w, _)| *w == r.reason) {
                    Some((_, n)) => *n += 1,
                    None => log.reasons.push((r.reason.clone(), 1)),
                }
            }
        }
        match data.state_of(kind, &rows) {
            Ok(k) if k < last_k => log.errors.push(format!(
                "{}: went back from state {last_k} to {k}",
                KINDS[kind].0
            )),
            Ok(k) => last_k = k,
            Err(e) => log
                .errors
                .push(format!("{} ({}): {e}", KINDS[kind].0, arm.name())),
        }
        Ok(last_k)
    };
    while !done.load(Ordering::Acquire) {
        let due = t0 + pace * slot;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        } else if now - due > pace {
            log.late += 1;
            t0 = now;
            slot = 0;
        }
        slot += 1;
        check(&mut c, i % 3, &mut log)?;
        i += 1;
        if log.errors.len() > 10 {
            break;
        }
    }
    // The ingest is over: every kind must now show the last state.
    for (kind, (name, _)) in KINDS.iter().enumerate() {
        let k = check(&mut c, kind, &mut log)?;
        if k != data.batches() {
            log.errors.push(format!(
                "{name} after the ingest: state {k}, want {}",
                data.batches()
            ));
        }
    }
    log.rebuilds = rebuilds(&mut c)? - before;
    Ok(log)
}

/// Ingest every row in batches on `arm`, with `readers` reader threads.
/// Returns the ingest's ms and the readers' logs.
fn ingest(arm: Arm, data: &Arc<Data>, readers: usize) -> Result<(f64, Vec<ReaderLog>)> {
    let path = scratch(&format!("readers-{}-{readers}.db", arm.name()))?;
    let mut w = ArmConn::open(arm, &path)?;
    w.batch(FILE_SETTINGS)?;
    w.batch(CREATE)?;
    if arm == Arm::Plane {
        w.batch(PLANE_PRAGMA)?;
    }
    let start = Arc::new(Barrier::new(readers + 1));
    let done = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..readers)
        .map(|_| {
            let (path, data, start, done) =
                (path.clone(), data.clone(), start.clone(), done.clone());
            std::thread::spawn(move || reader(arm, &path, &data, &start, &done))
        })
        .collect();
    start.wait();
    let t = Instant::now();
    let result = (|| -> Result<()> {
        let mut id = 0i64;
        for chunk in data.rows.chunks(BATCH) {
            w.exec("BEGIN", &[])?;
            for &(c, d, m) in chunk {
                id += 1;
                w.exec(
                    INSERT,
                    &[
                        Value::Integer(id),
                        Value::Text(COUNTRIES[c as usize].into()),
                        Value::Text(DEVICES[d as usize].into()),
                        Value::Integer(m),
                    ],
                )?;
            }
            w.exec("COMMIT", &[])?;
        }
        Ok(())
    })();
    let ms = millis(t);
    done.store(true, Ordering::Release);
    let mut logs = Vec::new();
    for h in handles {
        logs.push(
            h.join()
                .map_err(|_| anyhow!("a reader thread panicked"))?
                .with_context(|| format!("a reader on {}", arm.name()))?,
        );
    }
    result?;
    // The writer's own view of the last state.
    let mut errors = Vec::new();
    for (kind, (name, sql)) in KINDS.iter().enumerate() {
        match data.state_of(kind, &w.query(sql)?) {
            Ok(k) if k == data.batches() => {}
            Ok(k) => errors.push(format!("{name} on the writer: state {k}")),
            Err(e) => errors.push(format!("{name} on the writer: {e}")),
        }
    }
    if !errors.is_empty() {
        logs.push(ReaderLog {
            errors,
            ..ReaderLog::default()
        });
    }
    drop(w);
    remove_db(&path);
    Ok((ms, logs))
}

pub fn run(rows: u64, opts: &Options) -> Result<Outcome> {
    let mut report = Report::new("readers", rows, opts);
    let data = Arc::new(Data::new(rows, opts.seed));
    let arms = opts.sqlite_arms();
    for &arm in &arms {
        let (alone_ms, _) = ingest(arm, &data, 0)?;
        let (with_ms, logs) = ingest(arm, &data, READERS)?;
        let a = arm.name();
        let rate = |ms: f64| rows as f64 / (ms / 1e3);
        report
            .figures
            .insert(format!("{a} ingest rows/s alone"), rate(alone_ms).round());
        report.figures.insert(
            format!("{a} ingest rows/s with readers"),
            rate(with_ms).round(),
        );
        report.figures.insert(
            format!("{a} ingest with / without readers"),
            alone_ms / with_ms,
        );
        let rebuilt: i64 = logs.iter().map(|l| l.rebuilds).sum();
        let late: u64 = logs.iter().map(|l| l.late).sum();
        report
            .figures
            .insert(format!("{a} reader rebuilds"), rebuilt as f64);
        report
            .figures
            .insert(format!("{a} reads behind schedule"), late as f64);
        for (kind, (name, _)) in KINDS.iter().enumerate() {
            let all: Vec<f64> = logs
                .iter()
                .flat_map(|l| l.latency[kind].iter().copied())
                .collect();
            let mut routes: Vec<(&'static str, u64)> = Vec::new();
            for l in &logs {
                for &(r, n) in &l.routes[kind] {
                    match routes.iter_mut().find(|(x, _)| *x == r) {
                        Some((_, c)) => *c += n,
                        None => routes.push((r, n)),
                    }
                }
            }
            routes.sort();
            let route = routes
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut c = cell(name, arm, &all, &route);
            c.matched = logs.iter().all(|l| l.errors.is_empty());
            report.cells.push(c);
            report
                .figures
                .insert(format!("{a} {name} p99 ms"), quantile(&all, 0.99));
            report.figures.insert(
                format!("{a} {name} worst ms"),
                all.iter().copied().fold(0.0, f64::max),
            );
            report
                .figures
                .insert(format!("{a} {name} reads"), all.len() as f64);
            if arm == Arm::Plane {
                let served: Vec<f64> = logs
                    .iter()
                    .flat_map(|l| l.served[kind].iter().copied())
                    .collect();
                report.figures.insert(
                    format!("{a} {name} served-only p99 ms"),
                    quantile(&served, 0.99),
                );
                report.figures.insert(
                    format!("{a} {name} served-only worst ms"),
                    served.iter().copied().fold(0.0, f64::max),
                );
            }
        }
        let mut reasons: Vec<(String, u64)> = Vec::new();
        for l in &logs {
            report.mismatches.extend(l.errors.iter().cloned());
            for (w, n) in &l.reasons {
                match reasons.iter_mut().find(|(x, _)| x == w) {
                    Some((_, c)) => *c += n,
                    None => reasons.push((w.clone(), *n)),
                }
            }
        }
        if !reasons.is_empty() {
            report.notes.insert(
                format!("{a} reads on SQLite, why"),
                reasons
                    .iter()
                    .map(|(w, n)| format!("{n} x {w:?}"))
                    .collect::<Vec<_>>()
                    .join("; "),
            );
        }
    }
    let markdown = table(&report, &arms, rows);
    let chart = KINDS.iter().map(|(n, _)| n.to_string()).collect();
    Ok(Outcome {
        report,
        markdown,
        chart,
    })
}

fn table(report: &Report, arms: &[Arm], rows: u64) -> String {
    let f = |k: String| report.figures.get(&k).copied().unwrap_or(f64::NAN);
    let mut out = table_row(&[
        "arm".into(),
        "ingest rows/s alone".into(),
        "with 4 readers".into(),
        "with / alone".into(),
        "reader rebuilds".into(),
        "reads behind schedule".into(),
    ]);
    out.push_str(&table_row(&vec!["---".to_owned(); 6]));
    for a in arms {
        let n = a.name();
        out.push_str(&table_row(&[
            n.into(),
            format!("{:.0}", f(format!("{n} ingest rows/s alone"))),
            format!("{:.0}", f(format!("{n} ingest rows/s with readers"))),
            format!("{:.2}x", f(format!("{n} ingest with / without readers"))),
            format!("{}", f(format!("{n} reader rebuilds"))),
            format!("{}", f(format!("{n} reads behind schedule"))),
        ]));
    }
    out.push('\n');
    let mut head = vec!["read".to_owned(), "arm".into()];
    head.extend(
        [
            "reads",
            "median ms",
            "p99 ms",
            "worst ms",
            "answered by",
            "exact",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    out.push_str(&table_row(&head));
    out.push_str(&table_row(&vec!["---".to_owned(); head.len()]));
    for (name, _) in KINDS {
        for a in arms {
            let Some(c) = report.cell(name, *a) else {
                continue;
            };
            let n = a.name();
            out.push_str(&table_row(&[
                name.into(),
                n.into(),
                format!("{}", f(format!("{n} {name} reads"))),
                format!("{}{}", fmt_ms(c.warm_ms), if c.noisy { " ~" } else { "" }),
                fmt_ms(f(format!("{n} {name} p99 ms"))),
                fmt_ms(f(format!("{n} {name} worst ms"))),
                c.route.clone(),
                if c.matched {
                    "yes".into()
                } else {
                    "**NO**".into()
                },
            ]));
        }
    }
    if arms.contains(&Arm::Plane) {
        let worst_med = KINDS
            .iter()
            .filter_map(|(n, _)| report.cell(n, Arm::Plane))
            .map(|c| c.warm_ms)
            .fold(0.0, f64::max);
        let p99 = KINDS
            .iter()
            .map(|(n, _)| f(format!("plane {n} p99 ms")))
            .fold(0.0, f64::max);
        let worst = KINDS
            .iter()
            .map(|(n, _)| f(format!("plane {n} worst ms")))
            .fold(0.0, f64::max);
        out.push_str(&format!(
            "\n{rows} rows. Plane arm against the goals: ingest with readers {:.0} rows/s (goal >= 1,000,000), \
             {:.2}x the ingest alone (goal >= 0.9x); reads: largest median {} ms (goal <= 0.02), \
             largest p99 {} ms (goal <= 0.5), worst {} ms (goal <= 5); reader rebuilds {} (goal 0).\n",
            f("plane ingest rows/s with readers".into()),
            f("plane ingest with / without readers".into()),
            fmt_ms(worst_med),
            fmt_ms(p99),
            fmt_ms(worst),
            f("plane reader rebuilds".into()),
        ));
    }
    out
}
