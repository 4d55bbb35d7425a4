//! §9 The classic speed suite (`seeds/sqlite-speed-comparison.txt`).
//!
//! The eleven tests, in order, on a fresh file per arm: 1 CREATE TABLE + bulk
//! load (one transaction of prepared INSERTs, for the seed's COPY); 2 SELECT
//! without an index; 3 CREATE INDEX (two); 4 the SELECT again, with indexes;
//! 5 1,000 single-row SELECTs; 6 UPDATE of a range; 7 INSERT from SELECT;
//! 8 1,000 autocommit INSERTs; 9 1,000 INSERTs in a transaction; 10 DELETE;
//! 11 DROP TABLE (four, in one transaction). The `plane` arm attaches
//! `PRAGMA pleroma_attach('t1', '', 'f2, f3')` (no dimensions, a maintained
//! total) right after CREATE TABLE, so every write to t1 feeds it.
//!
//! Reports real, user and sys time per test (getrusage of this process), the
//! suite run twice per arm (loop 1: every arm in turn, then loop 2). Default journal mode and
//! synchronous = FULL, as the seed ran it: tests 8 and 11 pay fsyncs.
//! The answers of tests 2, 4 and 5 and the table contents before DROP are
//! checked across arms. At `--rows` other than 30,000 the statement counts
//! of tests 5, 8 and 9 scale with the rows (at least 10).
//!
//! Left out: PostgreSQL and SQLite 1.0 of the seed.
//!
//! Run: `cargo run --release --bin pleroma -- bench speedtest`

use std::time::Instant;

use anyhow::Result;
use rusqlite::types::Value;

use crate::check;
use crate::gen::{self, Rng};
use crate::harness::{fmt_ms, median, millis, table_row, Answer, Arm, Cell, Options, Report};
use crate::writes::ArmConn;
use crate::Outcome;

pub const PLANE_PRAGMA: &str = "PRAGMA pleroma_attach('t1', '', 'f2, f3')";
const SELECT: &str = "SELECT max(f2), min(f3), count(*) FROM t1 WHERE f3<10000 OR f1>=20000";
pub const TESTS: [&str; 11] = [
    "1 create + load",
    "2 select, no index",
    "3 create index",
    "4 select, index",
    "5 single selects",
    "6 update",
    "7 insert from select",
    "8 autocommit inserts",
    "9 inserts in a txn",
    "10 delete",
    "11 drop table",
];

/// Real, user and sys milliseconds.
#[derive(Clone, Copy, Debug, Default)]
struct Times {
    real: f64,
    user: f64,
    sys: f64,
}

fn rusage() -> (f64, f64) {
    // SAFETY: getrusage only writes the struct we pass, which is zeroed and
    // owned by this frame.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always a valid `who`.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    (ms(ru.ru_utime), ms(ru.ru_stime))
}

fn timed(f: impl FnOnce() -> Result<()>) -> Result<Times> {
    let (u0, s0) = rusage();
    let t = Instant::now();
    f()?;
    let real = millis(t);
    let (u1, s1) = rusage();
    Ok(Times {
        real,
        user: u1 - u0,
        sys: s1 - s0,
    })
}

/// An answer: rows of values.
type Rows = Vec<Vec<Value>>;

/// One run of the suite on `arm`: the times of each test, and the answers.
fn suite(arm: Arm, rows: u64, seed: u64, pass: usize) -> Result<(Vec<Times>, Vec<Rows>)> {
    let dir = gen::data_dir().join("scratch");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("speedtest-{}-{pass}.db", arm.name()));
    for s in ["", "-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{s}", path.display()));
    }
    let mut c = ArmConn::open(arm, &path)?;
    let n = ((rows * 1000 / 30_000).max(10)) as i64;
    let mut rng = Rng::new(seed);
    let mut times = Vec::new();
    let mut answers = Vec::new();
    times.push(timed(|| {
        c.batch("CREATE TABLE t1(f1 int, f2 int, f3 int)")?;
        if arm == Arm::Plane {
            c.batch(PLANE_PRAGMA)?;
        }
        c.exec("BEGIN", &[])?;
        for i in 1..=rows as i64 {
            let p = [
                Value::Integer(i),
                Value::Integer(rng.below(30_000) as i64),
                Value::Integer(rng.below(30_000) as i64),
            ];
            c.exec("INSERT INTO t1 VALUES (?1, ?2, ?3)", &p)?;
        }
        c.exec("COMMIT", &[])
    })?);
    let mut a = Vec::new();
    times.push(timed(|| {
        a = c.query(SELECT)?.into_inner();
        Ok(())
    })?);
    answers.push(a);
    times.push(timed(|| {
        c.batch("CREATE INDEX idx1 ON t1(f1); CREATE INDEX idx2 ON t1(f2,f3);")
    })?);
    let mut a = Vec::new();
    times.push(timed(|| {
        a = c.query(SELECT)?.into_inner();
        Ok(())
    })?);
    answers.push(a);
    let mut singles = Vec::new();
    times.push(timed(|| {
        for i in 1..=n {
            singles.extend(c.query(&format!("SELECT f2, f3 FROM t1 WHERE f1=={i}"))?);
        }
        Ok(())
    })?);
    answers.push(singles);
    times.push(timed(|| {
        c.batch("UPDATE t1 SET f2=f3, f3=f2 WHERE f1 BETWEEN 15000 AND 20000")
    })?);
    times.push(timed(|| {
        c.batch(
            "CREATE TABLE t2(f1 int, f2 int); INSERT INTO t2 SELECT f1, f2 FROM t1 WHERE f3<10000;",
        )
    })?);
    let mut rng = Rng::new(seed ^ 8);
    times.push(timed(|| {
        c.batch("CREATE TABLE t3(f1 int, f2 int, f3 int)")?;
        for i in 1..=n {
            c.batch(&format!(
                "INSERT INTO t3 VALUES({i},{},{})",
                rng.below(2000),
                rng.below(2000)
            ))?;
        }
        Ok(())
    })?);
    times.push(timed(|| {
        c.batch("CREATE TABLE t4(f1 int, f2 int, f3 int)")?;
        c.exec("BEGIN", &[])?;
        for i in 1..=n {
            c.batch(&format!(
                "INSERT INTO t4 VALUES({i},{},{})",
                rng.below(2000),
                rng.below(2000)
            ))?;
        }
        c.exec("COMMIT", &[])
    })?);
    times.push(timed(|| {
        c.batch("DELETE FROM t1 WHERE f2 NOT BETWEEN 10000 AND 20000")
    })?);
    // What every arm must agree on before the tables go (the plane serves
    // the t1 total on its arm).
    answers.push(
        c.query("SELECT COUNT(*), SUM(f2), SUM(f3) FROM t1")?
            .into_inner(),
    );
    answers.push(
        c.query("SELECT COUNT(*), SUM(f1), SUM(f2) FROM t2")?
            .into_inner(),
    );
    answers.push(
        c.query("SELECT COUNT(*), SUM(f2), SUM(f3) FROM t3")?
            .into_inner(),
    );
    answers.push(
        c.query("SELECT COUNT(*), SUM(f2), SUM(f3) FROM t4")?
            .into_inner(),
    );
    times.push(timed(|| {
        c.exec("BEGIN", &[])?;
        c.batch("DROP TABLE t1; DROP TABLE t2; DROP TABLE t3; DROP TABLE t4;")?;
        c.exec("COMMIT", &[])
    })?);
    drop(c);
    for s in ["", "-journal", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{s}", path.display()));
    }
    Ok((times, answers))
}

pub fn run(rows: u64, opts: &Options) -> Result<Outcome> {
    let mut report = Report::new("speedtest", rows, opts);
    let arms = opts.sqlite_arms();
    let mut all: Vec<(Arm, Vec<Times>, Vec<Times>)> = Vec::new();
    let mut answers: Vec<Vec<Answer>> = Vec::new();
    // Pass 1 of every arm, then pass 2: drift on a shared disk hits all arms.
    let mut first = Vec::new();
    for &arm in &arms {
        first.push(suite(arm, rows, opts.seed, 1)?);
    }
    for (&arm, (t1, a1)) in arms.iter().zip(first) {
        let (t2, _) = suite(arm, rows, opts.seed, 2)?;
        for (k, a) in a1.into_iter().enumerate() {
            if answers.len() <= k {
                answers.push(Vec::new());
            }
            answers[k].push(Answer { arm, rows: a });
        }
        for (k, name) in TESTS.iter().enumerate() {
            let (a, b) = (t1[k].real, t2[k].real);
            report.cells.push(Cell {
                query: name.to_string(),
                class: String::new(),
                arm: arm.name().into(),
                first_ms: a,
                warm_ms: median(&[a, b]),
                loop1_ms: a,
                loop2_ms: b,
                calls: 1,
                noisy: crate::harness::is_noisy(a, b),
                route: String::new(),
                reason: String::new(),
                matched: true,
            });
        }
        all.push((arm, t1, t2));
    }
    for (k, a) in answers.iter().enumerate() {
        for (arm, verdict) in check::compare_all(&format!("speedtest answer {k}"), "", a) {
            if let Err(msg) = verdict {
                report.mismatches.push(msg);
                for c in report.cells.iter_mut().filter(|c| c.arm == arm.name()) {
                    c.matched = false;
                }
            }
        }
    }
    let mut head = vec!["test".to_owned()];
    for (arm, _, _) in &all {
        head.push(format!("{} real (user / sys) ms", arm.name()));
    }
    for (arm, _, _) in all.iter().filter(|(a, _, _)| *a != Arm::Sqlite) {
        head.push(format!("{} / sqlite", arm.name()));
    }
    let mut md = table_row(&head);
    md.push_str(&table_row(
        &head.iter().map(|_| "---".to_owned()).collect::<Vec<_>>(),
    ));
    for (k, name) in TESTS.iter().enumerate() {
        let mut row = vec![name.to_string()];
        for (_, t1, t2) in &all {
            let real = median(&[t1[k].real, t2[k].real]);
            let (u, s) = (
                (t1[k].user + t2[k].user) / 2.0,
                (t1[k].sys + t2[k].sys) / 2.0,
            );
            let noisy = if crate::harness::is_noisy(t1[k].real, t2[k].real) {
                " ~"
            } else {
                ""
            };
            row.push(format!(
                "{}{noisy} ({} / {})",
                fmt_ms(real),
                fmt_ms(u),
                fmt_ms(s)
            ));
        }
        if let Some((_, s1, s2)) = all.iter().find(|(a, _, _)| *a == Arm::Sqlite) {
            let base = median(&[s1[k].real, s2[k].real]);
            for (_, t1, t2) in all.iter().filter(|(a, _, _)| *a != Arm::Sqlite) {
                row.push(format!("{:.2}x", median(&[t1[k].real, t2[k].real]) / base));
            }
        }
        md.push_str(&table_row(&row));
    }
    for (arm, t1, t2) in &all {
        let total = |t: &[Times]| t.iter().map(|x| x.real).sum::<f64>();
        report.figures.insert(
            format!("total real ms {}", arm.name()),
            median(&[total(t1), total(t2)]),
        );
    }
    let chart = TESTS.iter().map(|s| s.to_string()).collect();
    Ok(Outcome {
        report,
        markdown: md,
        chart,
    })
}
