//! `pleroma bench serve`: the server under load, on loopback, side by side
//! with PostgreSQL.
//!
//! A ledger of `--rows` invoices (4 regions x 3 statuses x 12 months, a
//! plane on region, status, month with measure amount_cents) in a WAL file
//! in a temporary directory, served by `pleroma serve` in this process; the
//! same rows loaded with `COPY` into a PostgreSQL server of the benchmark's
//! own (`postgres.rs`: Debian's `postgresql`, installed when missing, a
//! private cluster on a free loopback port, stopped at the end), with the
//! index a PostgreSQL user would give the slice (`(status, region) INCLUDE
//! (amount_cents)`: an index-only scan of one status) and `VACUUM
//! ANALYZE`. Durability is the same on both sides: SQLite's `PRAGMA
//! synchronous` on the served file is read through the server, and
//! PostgreSQL gets `synchronous_commit = on` when SQLite syncs the WAL at
//! each commit (FULL, SQLite's default), `off` when it does not (NORMAL);
//! `fsync` stays on; every other setting is PostgreSQL's default.
//!
//! Both servers run at once (idle when not measured); the phases alternate
//! between the arms so that a shared machine's load falls on both alike.
//! Each arm is driven by the same client code (tokio-postgres, no TLS,
//! prepared statements over the extended protocol, one connection per
//! client), with the same SQL text:
//!
//! 1. Round trip, one client: the plane-served slice
//!    `SELECT region, COUNT(*), SUM(amount_cents) FROM invoices WHERE status
//!    = $1 GROUP BY region ORDER BY region`, `--calls` calls after 20
//!    warm-up calls (at most `--seconds` of them); beside it the same slice
//!    on an embedded `pleroma::Connection`; then `SELECT 1`, the protocol's
//!    floor, the same way.
//! 2. Load, `--clients` concurrent clients for `--seconds` each: slices only,
//!    `SELECT 1` only, engine queries only, write transactions only, then a
//!    mix: 6 in 10 the slice, 2 in 10 the engine query (a filter on the
//!    measure, which SQLite answers by a scan; no index on it on either
//!    side), 2 in 10 the write transaction (begin; INSERT a row; read the
//!    slice and check the row is in it; DELETE it; COMMIT); last, the
//!    issue's mix with kept writes: 6 in 10 the slice, 2 in 10 the engine
//!    query, 1 in 10 a kept write (begin; INSERT a row of amount `KEPT` in
//!    the client's own (region, status, month) cell; read the slice; COMMIT)
//!    and 1 in 10 a rolled-back one (the same with amount `ROLLED_BACK`,
//!    then ROLLBACK). The begin is each server's own: `BEGIN IMMEDIATE`
//!    (SQLite takes the writer lock up front) and `BEGIN` (PostgreSQL locks
//!    rows). `--clients 64 --seconds 60` runs the 64 clients for
//!    60 s (every phase at that size).
//!
//! Every committed sum is checked exactly. The oracle is plain SQLite's
//! answers on the file before the run, plus the kept rows: each server's
//! `Tally` counts, per cell, the kept COMMITs sent and those returned. Every
//! kept row has the same amount, so a read's group is right only if its
//! count is the starting count plus a number of kept rows between the
//! COMMITs returned before the read was sent and those sent by the time it
//! answered (plus the reader's own uncommitted row), and its sum is exactly
//! the starting sum plus that many `KEPT`s: a rolled-back row seen by
//! anyone else breaks the sum, a kept row lost or counted twice the count's
//! window or, at the latest, the check after the phase. After every
//! load phase, with no write in flight, each server's groups at the
//! plane's grain (`GROUPS`), and plain SQLite's on the served file, must
//! equal the starting groups plus exactly the rows kept on that server;
//! the file is checked so once more at the end. Any error or mismatch fails
//! the run, but for one: a write transaction refused with 55P03 (`pleroma
//! serve` queues writers and refuses one after 5 s of waiting for the write
//! lock) is counted, reported and tried again, its time counting the wait.
//! Reported: calls, calls per second, p50 and p99 per kind, the refusals,
//! the rows kept, and the goals.
//!
//! `--json FILE` writes the harness's report shape (`cells` with `query`,
//! `arm`, `warm_ms` = the p50; `figures` with calls per second and p99s).
//!
//! Left out: TLS and passwords (loopback, trusted), the dashboard workload.
//!
//! Run: `cargo run --release --bin pleroma -- bench serve --rows 1000000 --clients 16 --seconds 10`
//! (and `--clients 64 --seconds 60` for the mix)

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pleroma::rusqlite;
use tokio_postgres::types::{FromSql, Type};
use tokio_postgres::{Client, NoTls, Statement};

use crate::harness::{fmt_ms, is_noisy, median, Cell, Report};
use crate::postgres::Postgres;

const SLICE: &str = "SELECT region, COUNT(*), SUM(amount_cents) FROM invoices WHERE status = $1 GROUP BY region ORDER BY region";
const ENGINE: &str = "SELECT COUNT(*) FROM invoices WHERE amount_cents > $1";
const ONE: &str = "SELECT 1";
/// Every group of the plane's grain: the committed state, checked after
/// each load phase.
const GROUPS: &str = "SELECT region, status, month, COUNT(*), SUM(amount_cents) FROM invoices GROUP BY region, status, month ORDER BY region, status, month";
const REGIONS: [&str; 4] = ["north", "south", "east", "west"];
const STATUSES: [&str; 3] = ["paid", "open", "void"];
const MONTHS: usize = 12;
const FIRST_MONTH: i64 = 202401;
/// The (region, status, month) cells the kept rows go to.
const CELLS: usize = REGIONS.len() * STATUSES.len() * MONTHS;
/// The amount of every kept row (above every engine query's threshold): a
/// group's sum is its starting sum plus `KEPT` for each kept row in it.
const KEPT: i64 = 1_000_000;
/// The amount of a rolled-back row, not `KEPT`: a rolled-back row seen in
/// a committed state breaks the sum its count predicts.
const ROLLED_BACK: i64 = 3_000_000;
/// Kept rows' ids start this far above `Oracle::write_id`, clear of the
/// per-client ids of the transactions that do not commit their row.
const KEPT_IDS: i64 = 1_000_000;
const WARM: usize = 20;

/// Options of `pleroma bench serve`.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub rows: i64,
    pub clients: usize,
    pub seconds: f64,
    pub calls: usize,
    /// Where to write the report as JSON.
    pub json: Option<std::path::PathBuf>,
}

type Slice = Vec<(String, i64, i64)>;
/// A group of `GROUPS`: (region, status, month) and (COUNT, SUM).
type Groups = BTreeMap<(String, String, i64), (i64, i64)>;

/// The cell of `client`'s kept and rolled-back rows: (region, status,
/// month) indices, a different cell for each of the first `CELLS` clients;
/// some are groups of the starting ledger, some new ones.
fn cell_of(client: usize) -> (usize, usize, usize) {
    (
        client % REGIONS.len(),
        client / REGIONS.len() % STATUSES.len(),
        client / (REGIONS.len() * STATUSES.len()) % MONTHS,
    )
}

fn cell_index(r: usize, s: usize, m: usize) -> usize {
    (r * STATUSES.len() + s) * MONTHS + m
}

/// One server's kept rows per cell. `sent` counts the COMMITs sent, `done`
/// those that returned: a read that began after `done` was read and ended
/// before `sent` was read sees in each cell a number of kept rows between
/// the two; once no write is in flight the two are equal and the committed
/// state is known exactly.
struct Tally {
    sent: [AtomicI64; CELLS],
    done: [AtomicI64; CELLS],
    /// The next kept row's id, above `Oracle::write_id + KEPT_IDS`.
    next_id: AtomicI64,
}

type Counts = [i64; CELLS];

impl Tally {
    fn new() -> Tally {
        Tally {
            sent: std::array::from_fn(|_| AtomicI64::new(0)),
            done: std::array::from_fn(|_| AtomicI64::new(0)),
            next_id: AtomicI64::new(0),
        }
    }

    fn done(&self) -> Counts {
        std::array::from_fn(|k| self.done[k].load(Ordering::SeqCst))
    }

    fn sent(&self) -> Counts {
        std::array::from_fn(|k| self.sent[k].load(Ordering::SeqCst))
    }

    /// The starting groups plus exactly the committed kept rows (with no
    /// write in flight).
    fn expected(&self, start: &Groups) -> Groups {
        let done = self.done();
        let mut g = start.clone();
        for (r, region) in REGIONS.iter().enumerate() {
            for (s, status) in STATUSES.iter().enumerate() {
                for m in 0..MONTHS {
                    let n = done[cell_index(r, s, m)];
                    if n > 0 {
                        let e = g
                            .entry((
                                region.to_string(),
                                status.to_string(),
                                FIRST_MONTH + m as i64,
                            ))
                            .or_default();
                        e.0 += n;
                        e.1 += n * KEPT;
                    }
                }
            }
        }
        g
    }
}

/// Checks a slice of `STATUSES[s]` read while kept rows may commit: in
/// each region the count is the starting count, plus the reader's own
/// uncommitted row (`own`: its region and amount), plus a number of kept
/// rows between `lo` and `hi` (summed over the region's cells); the sum is
/// exactly the starting sum plus what those rows add.
fn check_slice(
    got: &Slice,
    start: &Slice,
    s: usize,
    lo: &Counts,
    hi: &Counts,
    own: Option<(usize, i64)>,
) -> Result<(), String> {
    let mut seen = 0;
    for (r, region) in REGIONS.iter().enumerate() {
        let (c0, s0) = start
            .iter()
            .find(|g| g.0 == *region)
            .map_or((0, 0), |g| (g.1, g.2));
        let (c, sum) = got
            .iter()
            .find(|g| g.0 == *region)
            .map_or((0, 0), |g| (g.1, g.2));
        seen += usize::from(got.iter().any(|g| g.0 == *region));
        let (own_n, own_amount) = match own {
            Some((or, a)) if or == r => (1, a),
            _ => (0, 0),
        };
        let cells = (0..MONTHS).map(|m| cell_index(r, s, m));
        let (l, h): (i64, i64) = (
            cells.clone().map(|k| lo[k]).sum(),
            cells.map(|k| hi[k]).sum(),
        );
        let kept = c - c0 - own_n;
        if kept < l || kept > h || sum != s0 + kept * KEPT + own_n * own_amount {
            return Err(format!(
                "the slice of {} gave {region} = ({c}, {sum}): from ({c0}, {s0}) with {own_n} own \
                 row(s) of {own_amount}, between {l} and {h} kept rows of {KEPT} were committed",
                STATUSES[s]
            ));
        }
    }
    if seen != got.len() {
        return Err(format!(
            "the slice of {} has groups of no region: {got:?}",
            STATUSES[s]
        ));
    }
    Ok(())
}

fn build(path: &std::path::Path, rows: i64) -> Result<(), String> {
    let e = |e: pleroma::Error| e.to_string();
    let mut c = pleroma::Connection::open(path).map_err(e)?;
    c.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE invoices(id INTEGER PRIMARY KEY, region TEXT, status TEXT, month INTEGER, amount_cents INTEGER);",
    )
    .map_err(e)?;
    c.execute(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
         INSERT INTO invoices(region, status, month, amount_cents)
         SELECT CASE i % 4 WHEN 0 THEN 'north' WHEN 1 THEN 'south' WHEN 2 THEN 'east' ELSE 'west' END,
                CASE i * 7 % 3 WHEN 0 THEN 'paid' WHEN 1 THEN 'open' ELSE 'void' END,
                202401 + i % 12, (i * 7919) % 100000 FROM n",
        &[pleroma::Value::Integer(rows)],
    )
    .map_err(e)?;
    c.execute(
        "PRAGMA pleroma_attach('invoices', 'region, status, month', 'amount_cents')",
        &[],
    )
    .map_err(e)?;
    Ok(())
}

/// Plain SQLite's answers on the starting file: with the kept rows, the
/// oracle of every read.
struct Oracle {
    slices: Vec<Slice>,
    engine: Vec<(i64, i64)>,
    groups: Groups,
    /// The id a client's uncommitted row has is this plus the client.
    write_id: i64,
}

fn sqlite_answers(path: &std::path::Path) -> Result<Oracle, String> {
    let e = |e: rusqlite::Error| e.to_string();
    let c = rusqlite::Connection::open(path).map_err(e)?;
    let sql = SLICE.replace("$1", "?1");
    let mut slices = Vec::new();
    for s in STATUSES {
        let mut st = c.prepare(&sql).map_err(e)?;
        let rows = st
            .query_map([s], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(e)?
            .collect::<Result<Slice, _>>()
            .map_err(e)?;
        slices.push(rows);
    }
    let mut engine = Vec::new();
    for t in [10_000i64, 50_000, 90_000] {
        let n: i64 = c
            .query_row(&ENGINE.replace("$1", "?1"), [t], |r| r.get(0))
            .map_err(e)?;
        engine.push((t, n));
    }
    let max: i64 = c
        .query_row("SELECT COALESCE(MAX(id), 0) FROM invoices", [], |r| {
            r.get(0)
        })
        .map_err(e)?;
    Ok(Oracle {
        slices,
        engine,
        groups: sqlite_groups(&c)?,
        write_id: max + 1_000_000,
    })
}

/// `GROUPS` through plain SQLite.
fn sqlite_groups(c: &rusqlite::Connection) -> Result<Groups, String> {
    let e = |e: rusqlite::Error| e.to_string();
    let mut st = c.prepare(GROUPS).map_err(e)?;
    let rows = st
        .query_map([], |r| {
            Ok(((r.get(0)?, r.get(1)?, r.get(2)?), (r.get(3)?, r.get(4)?)))
        })
        .map_err(e)?
        .collect::<Result<Groups, _>>()
        .map_err(e)?;
    Ok(rows)
}

/// An integer column whatever type a server gives it: `pleroma serve`
/// sends COUNT and SUM as text, PostgreSQL as int8 and numeric (the SUM of
/// a bigint), `SELECT 1` as int4.
struct Int(i64);

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl<'a> FromSql<'a> for Int {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Int, BoxError> {
        Ok(Int(match *ty {
            Type::INT2 => i16::from_sql(ty, raw)?.into(),
            Type::INT4 => i32::from_sql(ty, raw)?.into(),
            Type::INT8 => i64::from_sql(ty, raw)?,
            Type::NUMERIC => numeric(raw)?,
            _ => <&str>::from_sql(ty, raw)?.parse()?,
        }))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::INT2 | Type::INT4 | Type::INT8 | Type::NUMERIC) || <&str>::accepts(ty)
    }
}

/// An integral numeric in PostgreSQL's binary format: ndigits, weight,
/// sign, dscale (i16 each), then base-10000 digits, the first of weight
/// `weight`.
fn numeric(raw: &[u8]) -> Result<i64, BoxError> {
    let word = |k: usize| -> Result<i16, BoxError> {
        raw.get(2 * k..2 * k + 2)
            .map(|b| i16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "short numeric".into())
    };
    let (n, weight, sign) = (word(0)? as usize, word(1)? as i32, word(2)? as u16);
    let mut v: i128 = 0;
    for k in 0..n {
        let pos = weight - k as i32;
        let d = word(4 + k)? as i128;
        if pos < 0 {
            if d != 0 {
                return Err("a numeric with a fraction".into());
            }
            continue;
        }
        v += d * 10_000i128.pow(pos as u32);
    }
    v = match sign {
        0x0000 => v,
        0x4000 => -v,
        _ => return Err("a NaN or infinite numeric".into()),
    };
    Ok(i64::try_from(v)?)
}

fn slice_of(rows: &[tokio_postgres::Row]) -> Result<Slice, String> {
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get::<_, String>(0).map_err(|e| pg_error(&e))?,
                r.try_get::<_, Int>(1).map_err(|e| pg_error(&e))?.0,
                r.try_get::<_, Int>(2).map_err(|e| pg_error(&e))?.0,
            ))
        })
        .collect()
}

/// A driver error with the server's own message (its Display says only
/// "db error").
fn pg_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{} {}: {}", d.severity(), d.code().code(), d.message()),
        None => match std::error::Error::source(e) {
            Some(s) => format!("{e}: {s}"),
            None => e.to_string(),
        },
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// A server under test.
struct Arm {
    name: &'static str,
    url: String,
    /// How a write transaction begins on this server.
    begin: &'static str,
    /// The rows kept on this server.
    tally: Arc<Tally>,
    /// The file it serves, read by plain SQLite after each phase.
    file: Option<std::path::PathBuf>,
}

/// The prepared statements of one connection.
struct Stmts {
    slice: Statement,
    engine: Statement,
    one: Statement,
}

async fn open(url: &str) -> Result<(Client, Stmts), String> {
    let e = |e: tokio_postgres::Error| format!("{url}: {}", pg_error(&e));
    let (c, conn) = tokio_postgres::connect(url, NoTls).await.map_err(e)?;
    tokio::spawn(conn);
    let slice = c.prepare_typed(SLICE, &[Type::TEXT]).await.map_err(e)?;
    let engine = c.prepare_typed(ENGINE, &[Type::INT8]).await.map_err(e)?;
    let one = c.prepare(ONE).await.map_err(e)?;
    Ok((c, Stmts { slice, engine, one }))
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Slice,
    Engine,
    Write,
    One,
    Kept,
    RolledBack,
}

const KINDS: [Kind; 6] = [
    Kind::Slice,
    Kind::Engine,
    Kind::Write,
    Kind::One,
    Kind::Kept,
    Kind::RolledBack,
];

impl Kind {
    fn index(self) -> usize {
        self as usize
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Slice => "plane-served slice",
            Kind::Engine => "engine query",
            Kind::Write => "write transaction",
            Kind::One => "SELECT 1",
            Kind::Kept => "kept write",
            Kind::RolledBack => "rolled-back write",
        }
    }
}

/// What the clients of a load phase run.
#[derive(Clone, Copy)]
enum Phase {
    Only(Kind),
    Mix,
    /// The mix with writes that change the committed state.
    MixKept,
}

impl Phase {
    fn kind(self, i: usize) -> Kind {
        match self {
            Phase::Only(k) => k,
            Phase::Mix => match i % 10 {
                0..=5 => Kind::Slice,
                6 | 7 => Kind::Engine,
                _ => Kind::Write,
            },
            Phase::MixKept => match i % 10 {
                0..=5 => Kind::Slice,
                6 | 7 => Kind::Engine,
                8 => Kind::Kept,
                _ => Kind::RolledBack,
            },
        }
    }
}

/// Where a call runs: its client, the oracle, and the server's begin and
/// kept rows.
struct Ctx<'a> {
    client: usize,
    oracle: &'a Oracle,
    tally: &'a Tally,
    begin: &'a str,
}

/// The `i`-th call of a client, its answer checked against the oracle and
/// the kept rows. `Ok(false)`: a write transaction the server refused
/// because another session held the write lock too long (SQLSTATE 55P03);
/// nothing was written and the caller tries again.
async fn call(c: &Client, s: &Stmts, kind: Kind, i: usize, x: &Ctx<'_>) -> Result<bool, String> {
    let client = x.client;
    let e =
        |e: tokio_postgres::Error| format!("client {client}: {}: {}", kind.label(), pg_error(&e));
    let mine = |m: String| format!("client {client}: {}: {m}", kind.label());
    match kind {
        Kind::Slice => {
            let k = i % 3;
            let lo = x.tally.done();
            let rows = c.query(&s.slice, &[&STATUSES[k]]).await.map_err(e)?;
            let hi = x.tally.sent();
            check_slice(&slice_of(&rows)?, &x.oracle.slices[k], k, &lo, &hi, None).map_err(mine)?;
        }
        Kind::Engine => {
            let (th, want) = x.oracle.engine[i % 3];
            let lo: i64 = x.tally.done().iter().sum();
            let rows = c.query(&s.engine, &[&th]).await.map_err(e)?;
            let hi: i64 = x.tally.sent().iter().sum();
            let got = rows[0].try_get::<_, Int>(0).map_err(e)?.0;
            // Every kept row's amount is above the threshold.
            if got - want < lo || got - want > hi {
                return Err(mine(format!(
                    "count {got}: {want} at the start, and between {lo} and {hi} kept rows"
                )));
            }
        }
        Kind::One => {
            let rows = c.query(&s.one, &[]).await.map_err(e)?;
            let got = rows[0].try_get::<_, Int>(0).map_err(e)?.0;
            if rows.len() != 1 || got != 1 {
                return Err(mine(format!("SELECT 1 gave {got}")));
            }
        }
        Kind::Write | Kind::Kept | Kind::RolledBack => {
            // Write: north, paid, deleted before COMMIT; the others in the
            // client's own cell.
            let (r, st, m) = match kind {
                Kind::Write => (0, 0, 0),
                _ => cell_of(client),
            };
            let (id, amount) = match kind {
                Kind::Kept => (
                    x.oracle.write_id + KEPT_IDS + x.tally.next_id.fetch_add(1, Ordering::SeqCst),
                    KEPT,
                ),
                Kind::RolledBack => (x.oracle.write_id + client as i64, ROLLED_BACK),
                _ => (x.oracle.write_id + client as i64, 1_000_000),
            };
            let begun = c
                .batch_execute(&format!(
                    "{}; INSERT INTO invoices(id, region, status, month, amount_cents) \
                     VALUES ({id}, '{}', '{}', {}, {amount})",
                    x.begin,
                    REGIONS[r],
                    STATUSES[st],
                    FIRST_MONTH + m as i64
                ))
                .await;
            if let Err(err) = begun {
                if err.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) {
                    // Whichever statement was refused, no transaction stays
                    // open (a ROLLBACK without one is only a warning).
                    c.batch_execute("ROLLBACK").await.map_err(e)?;
                    return Ok(false);
                }
                return Err(e(err));
            }
            // The transaction's own row is in its slice.
            let lo = x.tally.done();
            let rows = c.query(&s.slice, &[&STATUSES[st]]).await.map_err(e)?;
            let hi = x.tally.sent();
            check_slice(
                &slice_of(&rows)?,
                &x.oracle.slices[st],
                st,
                &lo,
                &hi,
                Some((r, amount)),
            )
            .map_err(mine)?;
            match kind {
                Kind::Kept => {
                    let k = cell_index(r, st, m);
                    x.tally.sent[k].fetch_add(1, Ordering::SeqCst);
                    c.batch_execute("COMMIT").await.map_err(e)?;
                    x.tally.done[k].fetch_add(1, Ordering::SeqCst);
                }
                Kind::RolledBack => c.batch_execute("ROLLBACK").await.map_err(e)?,
                _ => c
                    .batch_execute(&format!("DELETE FROM invoices WHERE id = {id}; COMMIT"))
                    .await
                    .map_err(e)?,
            }
        }
    }
    Ok(true)
}

/// After a load phase, with no write in flight: the committed groups
/// through the server, and through plain SQLite on the file it serves,
/// equal the starting groups plus exactly the rows kept on it.
async fn check_committed(arm: &Arm, oracle: &Oracle, phase: &str) -> Result<(), String> {
    let want = arm.tally.expected(&oracle.groups);
    let fail = |how: &str, got: &Groups| {
        let diff: Vec<String> = want
            .iter()
            .filter(|(k, v)| got.get(*k) != Some(*v))
            .map(|(k, v)| format!("{k:?}: {:?}, not {v:?}", got.get(k)))
            .chain(
                got.iter()
                    .filter(|(k, _)| !want.contains_key(*k))
                    .map(|(k, v)| format!("{k:?}: {v:?}, not there")),
            )
            .collect();
        format!(
            "{}, after {phase}: {how} differs from the starting groups plus the kept rows: {}",
            arm.name,
            diff.join("; ")
        )
    };
    let e = |e: tokio_postgres::Error| format!("{}: {GROUPS}: {}", arm.name, pg_error(&e));
    let (c, conn) = tokio_postgres::connect(&arm.url, NoTls).await.map_err(e)?;
    tokio::spawn(conn);
    let mut got = Groups::new();
    for r in c.query(GROUPS, &[]).await.map_err(e)? {
        let int = |k| r.try_get::<_, Int>(k).map(|v| v.0).map_err(e);
        let key = (
            r.try_get::<_, String>(0).map_err(e)?,
            r.try_get::<_, String>(1).map_err(e)?,
            int(2)?,
        );
        got.insert(key, (int(3)?, int(4)?));
    }
    if got != want {
        return Err(fail("the server's answer", &got));
    }
    if let Some(file) = &arm.file {
        let lite = rusqlite::Connection::open(file).map_err(|e| e.to_string())?;
        let got = sqlite_groups(&lite)?;
        if got != want {
            return Err(fail("plain SQLite's answer on the file", &got));
        }
    }
    Ok(())
}

/// Latencies in ms per kind, and the wall time they took.
#[derive(Default)]
struct Samples {
    ms: [Vec<f64>; KINDS.len()],
    /// The first call after the warm-up (round trips only).
    first: f64,
    /// Write transactions refused for the write lock (55P03), then retried.
    refused: usize,
    seconds: f64,
}

impl Samples {
    fn of(&self, k: Kind) -> &[f64] {
        &self.ms[k.index()]
    }

    fn total(&self) -> usize {
        self.ms.iter().map(Vec::len).sum()
    }

    fn rate(&self, k: Option<Kind>) -> f64 {
        k.map_or(self.total(), |k| self.of(k).len()) as f64 / self.seconds
    }
}

/// One client: `WARM` calls, then up to `calls` calls or `seconds`.
async fn round_trip(
    arm: &Arm,
    kind: Kind,
    calls: usize,
    seconds: f64,
    oracle: &Oracle,
) -> Result<Samples, String> {
    let (c, s) = open(&arm.url).await?;
    let x = Ctx {
        client: 0,
        oracle,
        tally: &arm.tally,
        begin: arm.begin,
    };
    // Round trips are reads (Slice, One): never refused.
    for i in 0..WARM {
        call(&c, &s, kind, i, &x).await?;
    }
    let mut out = Samples::default();
    let start = Instant::now();
    let budget = Duration::from_secs_f64(seconds);
    let mut v = Vec::with_capacity(calls);
    for i in 0..calls {
        let t = Instant::now();
        call(&c, &s, kind, WARM + i, &x).await?;
        v.push(t.elapsed().as_secs_f64() * 1e3);
        if start.elapsed() > budget {
            break;
        }
    }
    out.seconds = start.elapsed().as_secs_f64();
    out.first = v.first().copied().unwrap_or(f64::NAN);
    out.ms[kind.index()] = v;
    Ok(out)
}

/// `clients` clients, each on its own connection, for `seconds`.
async fn load(
    arm: &Arm,
    phase: Phase,
    clients: usize,
    seconds: f64,
    oracle: &Arc<Oracle>,
) -> Result<Samples, String> {
    let mut conns = Vec::new();
    for _ in 0..clients {
        conns.push(open(&arm.url).await?);
    }
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::new();
    for (client, (c, s)) in conns.into_iter().enumerate() {
        let oracle = oracle.clone();
        let tally = arm.tally.clone();
        let begin = arm.begin;
        tasks.push(tokio::spawn(async move {
            let x = Ctx {
                client,
                oracle: &oracle,
                tally: &tally,
                begin,
            };
            let mut out: [Vec<f64>; KINDS.len()] = Default::default();
            let mut refused = 0;
            let mut i = client;
            while Instant::now() < deadline {
                let kind = phase.kind(i);
                let t = Instant::now();
                // A refused write is tried again; its time counts the wait.
                while !call(&c, &s, kind, i, &x).await? {
                    refused += 1;
                }
                out[kind.index()].push(t.elapsed().as_secs_f64() * 1e3);
                i += 1;
            }
            Ok::<_, String>((out, refused))
        }));
    }
    let mut all = Samples::default();
    for t in tasks {
        let (ms, refused) = t.await.map_err(|e| e.to_string())??;
        for (a, m) in all.ms.iter_mut().zip(ms) {
            a.extend(m);
        }
        all.refused += refused;
    }
    all.seconds = start.elapsed().as_secs_f64();
    Ok(all)
}

/// Starts `pleroma serve` on a file, on a free loopback port; returns the
/// port and what keeps the server running until it is dropped. (The
/// program passes it: this crate does not depend on the server.)
pub type StartServer<'a> =
    &'a dyn Fn(&std::path::Path) -> Result<(u16, Box<dyn std::any::Any>), String>;

/// Runs the benchmark and prints its tables; an error or a wrong answer
/// is an `Err`.
pub fn run(o: &BenchOptions, start: StartServer) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("pleroma-bench-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let result = run_in(o, &dir, start);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Loads the SQLite file's rows into PostgreSQL's `ledger` database.
async fn load_postgres(port: u16, path: &std::path::Path) -> Result<String, String> {
    let e = |e: tokio_postgres::Error| format!("postgres: {}", pg_error(&e));
    let admin = format!("host=127.0.0.1 port={port} user=bench dbname=postgres");
    let (c, conn) = tokio_postgres::connect(&admin, NoTls).await.map_err(e)?;
    let bg = tokio::spawn(conn);
    c.batch_execute("CREATE DATABASE ledger").await.map_err(e)?;
    drop(c);
    let _ = bg.await;
    let url = format!("host=127.0.0.1 port={port} user=bench dbname=ledger");
    let (c, conn) = tokio_postgres::connect(&url, NoTls).await.map_err(e)?;
    tokio::spawn(conn);
    c.batch_execute(
        "CREATE TABLE invoices(id bigint PRIMARY KEY, region text, status text, month integer, amount_cents bigint)",
    )
    .await
    .map_err(e)?;
    let types = [Type::INT8, Type::TEXT, Type::TEXT, Type::INT4, Type::INT8];
    let sink = c
        .copy_in(
            "COPY invoices(id, region, status, month, amount_cents) FROM STDIN (FORMAT binary)",
        )
        .await
        .map_err(e)?;
    let writer = tokio_postgres::binary_copy::BinaryCopyInWriter::new(sink, &types);
    let mut writer = std::pin::pin!(writer);
    let lite = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
    let mut st = lite
        .prepare("SELECT id, region, status, month, amount_cents FROM invoices ORDER BY id")
        .map_err(|e| e.to_string())?;
    let mut rows = st.query([]).map_err(|e| e.to_string())?;
    while let Some(r) = rows.next().map_err(|e| e.to_string())? {
        let get = |e: rusqlite::Error| e.to_string();
        let (id, region, status, month, amount): (i64, String, String, i32, i64) = (
            r.get(0).map_err(get)?,
            r.get(1).map_err(get)?,
            r.get(2).map_err(get)?,
            r.get(3).map_err(get)?,
            r.get(4).map_err(get)?,
        );
        writer
            .as_mut()
            .write(&[&id, &region, &status, &month, &amount])
            .await
            .map_err(e)?;
    }
    writer.as_mut().finish().await.map_err(e)?;
    // Separate statements: VACUUM refuses a multi-statement string's
    // implicit transaction.
    for sql in [
        "CREATE INDEX invoices_status_region ON invoices (status, region) INCLUDE (amount_cents)",
        "VACUUM ANALYZE invoices",
    ] {
        c.batch_execute(sql).await.map_err(e)?;
    }
    // The plan PostgreSQL picks for the prepared slice.
    c.batch_execute(&format!("PREPARE s(text) AS {SLICE}"))
        .await
        .map_err(e)?;
    let plan: Vec<String> = c
        .simple_query("EXPLAIN (COSTS OFF) EXECUTE s('paid')")
        .await
        .map_err(e)?
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(|s| s.trim().to_owned()),
            _ => None,
        })
        .collect();
    Ok(plan.join(" / "))
}

/// A one-row, one-column answer of a simple query.
async fn scalar(url: &str, sql: &str) -> Result<String, String> {
    let (c, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| format!("{url}: {}", pg_error(&e)))?;
    tokio::spawn(conn);
    c.simple_query(sql)
        .await
        .map_err(|e| format!("{sql}: {}", pg_error(&e)))?
        .into_iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        })
        .ok_or_else(|| format!("{sql}: no row"))
}

fn embedded(path: &std::path::Path, calls: usize, oracle: &Oracle) -> Result<Vec<f64>, String> {
    let mut embedded = pleroma::Connection::open(path).map_err(|e| e.to_string())?;
    let esql = SLICE.replace("$1", "?1");
    let mut emb = Vec::new();
    for i in 0..calls + WARM {
        let s = STATUSES[i % 3];
        let t = Instant::now();
        let rows = embedded
            .query(&esql, &[pleroma::Value::Text(s.into())])
            .map_err(|e| e.to_string())?;
        let dt = t.elapsed().as_secs_f64() * 1e3;
        if embedded.last_route().kind != pleroma::RouteKind::Plane
            && embedded.last_route().kind != pleroma::RouteKind::Memo
        {
            return Err(format!(
                "the slice was not served by the plane: {:?}",
                embedded.last_route()
            ));
        }
        if rows.rows.len() != oracle.slices[i % 3].len() {
            return Err("the embedded slice differs from SQLite".into());
        }
        if i >= WARM {
            emb.push(dt);
        }
    }
    emb.sort_by(f64::total_cmp);
    Ok(emb)
}

/// Round trips and load phases of every arm, alternating arms.
struct Results {
    rt: Vec<[Samples; 2]>,
    load: Vec<[Samples; 2]>,
}

const RT_KINDS: [Kind; 2] = [Kind::Slice, Kind::One];
/// The phases in the order they run; the last changes the committed state.
const PHASES: [(Phase, &str); 6] = [
    (Phase::Only(Kind::Slice), "slices only"),
    (Phase::Only(Kind::One), "SELECT 1 only"),
    (Phase::Only(Kind::Engine), "engine queries only"),
    (Phase::Only(Kind::Write), "write transactions only"),
    (Phase::Mix, "mix"),
    (Phase::MixKept, "mix with kept writes"),
];

fn run_in(o: &BenchOptions, dir: &std::path::Path, start: StartServer) -> Result<(), String> {
    let path = dir.join("ledger.db");
    build(&path, o.rows)?;
    let oracle = Arc::new(sqlite_answers(&path)?);
    let (port, _server) = start(&path)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;

    let emb = embedded(&path, o.calls, &oracle)?;

    let pleroma_url = format!("host=127.0.0.1 port={port} user=bench dbname=ledger");
    let route = rt.block_on(scalar(
        &pleroma_url,
        &format!(
            "PRAGMA pleroma_explain('{}')",
            SLICE.replace("$1", "?1").replace('\'', "''")
        ),
    ))?;
    if route != "plane" {
        return Err(format!(
            "pleroma_explain routes the slice to {route:?}, not the plane"
        ));
    }
    let sync = rt.block_on(scalar(&pleroma_url, "PRAGMA synchronous"))?;
    // SQLite's synchronous against PostgreSQL's commit durability: FULL
    // (2) and EXTRA (3) sync the WAL at each commit, NORMAL (1) only at
    // checkpoints, OFF (0) never.
    let (sync_name, pg_settings): (&str, &[(&str, &str)]) = match sync.as_str() {
        "0" => ("OFF", &[("synchronous_commit", "off"), ("fsync", "off")]),
        "1" => ("NORMAL", &[("synchronous_commit", "off")]),
        "2" => ("FULL", &[("synchronous_commit", "on")]),
        "3" => ("EXTRA", &[("synchronous_commit", "on")]),
        s => return Err(format!("PRAGMA synchronous gave {s:?}")),
    };

    let t = Instant::now();
    let pg = Postgres::start(dir, pg_settings)?;
    let plan = rt.block_on(load_postgres(pg.port, &path))?;
    let pg_load = t.elapsed().as_secs_f64();
    let pg_version = rt.block_on(scalar(
        &format!("host=127.0.0.1 port={} user=bench dbname=ledger", pg.port),
        "SHOW server_version",
    ))?;

    let arms = [
        Arm {
            name: "pleroma serve",
            url: pleroma_url,
            begin: "BEGIN IMMEDIATE",
            tally: Arc::new(Tally::new()),
            file: Some(path.clone()),
        },
        Arm {
            name: "postgres",
            url: format!("host=127.0.0.1 port={} user=bench dbname=ledger", pg.port),
            begin: "BEGIN",
            tally: Arc::new(Tally::new()),
            file: None,
        },
    ];
    let res = rt.block_on(async {
        let mut res = Results {
            rt: Vec::new(),
            load: Vec::new(),
        };
        for kind in RT_KINDS {
            let a = round_trip(&arms[0], kind, o.calls, o.seconds, &oracle).await?;
            let b = round_trip(&arms[1], kind, o.calls, o.seconds, &oracle).await?;
            res.rt.push([a, b]);
        }
        for (phase, name) in PHASES {
            let a = load(&arms[0], phase, o.clients, o.seconds, &oracle).await?;
            check_committed(&arms[0], &oracle, name).await?;
            let b = load(&arms[1], phase, o.clients, o.seconds, &oracle).await?;
            check_committed(&arms[1], &oracle, name).await?;
            res.load.push([a, b]);
        }
        Ok::<_, String>(res)
    })?;
    drop(pg);
    // The file holds the kept rows and no other.
    let after = sqlite_answers(&path)?;
    let kept: i64 = arms[0].tally.done().iter().sum();
    let engine: Vec<(i64, i64)> = oracle.engine.iter().map(|&(t, n)| (t, n + kept)).collect();
    if after.groups != arms[0].tally.expected(&oracle.groups) || after.engine != engine {
        return Err("the file's answers are not the starting ones plus the kept rows".into());
    }

    let report = report(o, &emb, &res, &arms);
    print_markdown(
        o,
        &emb,
        &res,
        &route,
        sync_name,
        pg_settings,
        &pg_version,
        &plan,
        pg_load,
    );
    if let Some(p) = &o.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// p50 and p99 of unsorted samples.
fn stats(v: &[f64]) -> (f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    (quantile(&s, 0.5), quantile(&s, 0.99))
}

fn ratio(a: f64, b: f64) -> String {
    if a.is_finite() && b.is_finite() && b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".into()
    }
}

fn cell(query: String, arm: &str, v: &[f64], first: f64, route: &str) -> Cell {
    let (l1, l2) = v.split_at(v.len() / 2);
    let (m1, m2) = (median(l1), median(l2));
    Cell {
        query,
        class: String::new(),
        arm: arm.into(),
        first_ms: first,
        warm_ms: stats(v).0,
        loop1_ms: m1,
        loop2_ms: m2,
        calls: v.len(),
        noisy: is_noisy(m1, m2),
        route: route.into(),
        reason: String::new(),
        matched: true,
    }
}

fn report(o: &BenchOptions, emb: &[f64], res: &Results, arms: &[Arm; 2]) -> Report {
    let mut r = Report {
        workload: "serve".into(),
        rows: o.rows as u64,
        date: crate::env::today(),
        commit: crate::env::commit(),
        machine: crate::env::machine(),
        arms: std::iter::once("embedded")
            .chain(arms.iter().map(|a| a.name))
            .map(Into::into)
            .collect(),
        ..Report::default()
    };
    r.cells.push(cell(
        "slice, 1 client".into(),
        "embedded",
        emb,
        f64::NAN,
        "plane",
    ));
    for (kind, pair) in RT_KINDS.iter().zip(&res.rt) {
        for (arm, s) in arms.iter().zip(pair) {
            let q = format!("{}, 1 client", kind.label());
            let route = if *kind == Kind::Slice && arm.name == "pleroma serve" {
                "plane"
            } else {
                ""
            };
            r.cells
                .push(cell(q.clone(), arm.name, s.of(*kind), s.first, route));
            r.figures
                .insert(format!("{}: {q}: p99 ms", arm.name), stats(s.of(*kind)).1);
        }
    }
    for ((_, name), pair) in PHASES.iter().zip(&res.load) {
        for (arm, s) in arms.iter().zip(pair) {
            r.figures.insert(
                format!("{}: {name}, {} clients: calls/s", arm.name, o.clients),
                s.rate(None),
            );
            r.figures.insert(
                format!(
                    "{}: {name}, {} clients: refused writes",
                    arm.name, o.clients
                ),
                s.refused as f64,
            );
            for k in KINDS.into_iter().filter(|k| !s.of(*k).is_empty()) {
                let q = format!("{name}, {} clients: {}", o.clients, k.label());
                r.cells
                    .push(cell(q.clone(), arm.name, s.of(k), f64::NAN, ""));
                r.figures
                    .insert(format!("{}: {q}: calls/s", arm.name), s.rate(Some(k)));
                r.figures
                    .insert(format!("{}: {q}: p99 ms", arm.name), stats(s.of(k)).1);
            }
        }
    }
    for arm in arms {
        r.figures.insert(
            format!("{}: rows kept", arm.name),
            arm.tally.done().iter().sum::<i64>() as f64,
        );
    }
    r.notes.insert(
        "committed state".into(),
        "after every load phase, on each server, every group's COUNT and SUM (and plain SQLite's on \
         the served file) equal the starting ones plus exactly the rows kept on it"
            .into(),
    );
    r
}

#[allow(clippy::too_many_arguments)]
fn print_markdown(
    o: &BenchOptions,
    emb: &[f64],
    res: &Results,
    route: &str,
    sync: &str,
    pg_settings: &[(&str, &str)],
    pg_version: &str,
    plan: &str,
    pg_load: f64,
) {
    let settings: Vec<String> = pg_settings
        .iter()
        .map(|(k, v)| format!("`{k} = {v}`"))
        .collect();
    println!(
        "## pleroma bench serve: {} invoices, loopback, no TLS, side by side with PostgreSQL\n",
        o.rows
    );
    println!(
        "- pleroma serve: SQLite in WAL mode, `PRAGMA synchronous` = {sync}; the slice's route: {route}."
    );
    println!(
        "- postgres: PostgreSQL {pg_version}, a private cluster, {} (fsync on unless said), every other \
         setting the default; loaded with COPY, index `(status, region) INCLUDE (amount_cents)`, \
         VACUUM ANALYZE ({pg_load:.1} s from initdb); the prepared slice's plan: {plan}.",
        settings.join(", ")
    );
    println!(
        "- The same SQL and client code (tokio-postgres, prepared, extended protocol) on both; a write \
         transaction begins with `BEGIN IMMEDIATE` on pleroma serve, `BEGIN` on postgres."
    );
    println!(
        "- Every answer of both servers checked against plain SQLite's on the starting file and \
         the rows kept since (each group's count between the kept rows committed and those sent, \
         its sum exact for that count); after every phase each server's groups, and plain SQLite's \
         on the served file, equal the starting ones plus exactly the rows kept; 0 errors.\n"
    );
    println!(
        "One client, {} calls at most (and at most {:.1} s) after {WARM} warm-up calls:\n",
        o.calls, o.seconds
    );
    println!("| query | pleroma serve calls | p50 ms | p99 ms | postgres calls | p50 ms | p99 ms | postgres / pleroma p50 |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (kind, [a, b]) in RT_KINDS.iter().zip(&res.rt) {
        let ((a50, a99), (b50, b99)) = (stats(a.of(*kind)), stats(b.of(*kind)));
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            kind.label(),
            a.of(*kind).len(),
            fmt_ms(a50),
            fmt_ms(a99),
            b.of(*kind).len(),
            fmt_ms(b50),
            fmt_ms(b99),
            ratio(b50, a50)
        );
    }
    let (e50, e99) = stats(emb);
    println!(
        "\nThe same slice on an embedded `pleroma::Connection`, {} calls: p50 {} ms, p99 {} ms.\n",
        emb.len(),
        fmt_ms(e50),
        fmt_ms(e99)
    );
    println!(
        "{} clients, each on its own connection, {:.1} s per phase:\n",
        o.clients, o.seconds
    );
    println!("| phase: kind | pleroma serve calls/s | p50 ms | p99 ms | postgres calls/s | p50 ms | p99 ms | pleroma / postgres calls/s |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for ((phase, name), [a, b]) in PHASES.iter().zip(&res.load) {
        let mut rows: Vec<(String, Option<Kind>)> = Vec::new();
        match phase {
            Phase::Only(k) => rows.push((format!("{name}: {}", k.label()), Some(*k))),
            Phase::Mix => {
                rows.push((
                    format!("{name} (6 slices : 2 engine : 2 writes): all calls"),
                    None,
                ));
                for k in [Kind::Slice, Kind::Engine, Kind::Write] {
                    rows.push((format!("{name}: {}", k.label()), Some(k)));
                }
            }
            Phase::MixKept => {
                rows.push((
                    format!("{name} (6 slices : 2 engine : 1 kept : 1 rolled back): all calls"),
                    None,
                ));
                for k in [Kind::Slice, Kind::Engine, Kind::Kept, Kind::RolledBack] {
                    rows.push((format!("{name}: {}", k.label()), Some(k)));
                }
            }
        }
        for (label, k) in rows {
            let (ra, rb) = (a.rate(k), b.rate(k));
            let q = |s: &Samples| match k {
                Some(k) => {
                    let (p50, p99) = stats(s.of(k));
                    (fmt_ms(p50), fmt_ms(p99))
                }
                None => ("-".into(), "-".into()),
            };
            let ((a50, a99), (b50, b99)) = (q(a), q(b));
            println!(
                "| {label} | {ra:.0} | {a50} | {a99} | {rb:.0} | {b50} | {b99} | {} |",
                ratio(ra, rb)
            );
        }
    }
    let mut refusals = Vec::new();
    for ((_, name), pair) in PHASES.iter().zip(&res.load) {
        for (arm, s) in ["pleroma serve", "postgres"].iter().zip(pair) {
            if s.refused > 0 {
                refusals.push(format!("{arm} {} in {name}", s.refused));
            }
        }
    }
    if refusals.is_empty() {
        println!("\nNo write transaction was refused.");
    } else {
        println!(
            "\nWrite transactions refused with 55P03 (another session held the write lock for 5 s), \
             each tried again until it committed, its time counting every wait: {}.",
            refusals.join("; ")
        );
    }
    let mixed = &res.load[PHASES.len() - 1];
    let tallies: Vec<String> = ["pleroma serve", "postgres"]
        .iter()
        .zip(mixed)
        .map(|(arm, s)| {
            format!(
                "{arm} {} rows kept, {} rolled back",
                s.of(Kind::Kept).len(),
                s.of(Kind::RolledBack).len()
            )
        })
        .collect();
    println!(
        "\nCommitted state after the mix with kept writes, exact on both servers: {}.",
        tallies.join("; ")
    );
    let slice_rt = stats(res.rt[0][0].of(Kind::Slice)).0;
    let slices = res.load[0][0].rate(Some(Kind::Slice));
    let pg_ones = res.load[1][1].rate(Some(Kind::One));
    let verdict = |ok: bool| if ok { "met" } else { "missed" };
    println!("\nAgainst the goals (issue 24):\n");
    println!("| goal | measured | |");
    println!("|---|---|---|");
    println!(
        "| pleroma serve's slice round trip ≤ 0.05 ms p50, one client | {} ms | {} |",
        fmt_ms(slice_rt),
        verdict(slice_rt <= 0.05)
    );
    println!(
        "| pleroma serve's slices at {} clients ≥ 1.0x PostgreSQL's `SELECT 1` rate{} | {slices:.0}/s against {pg_ones:.0}/s: {} | {} |",
        o.clients,
        if o.clients == 16 { "" } else { " (the goal says 16 clients)" },
        ratio(slices, pg_ones),
        verdict(slices >= pg_ones)
    );
    // Reaching here means no error and no wrong answer.
    let m = &mixed[0];
    println!(
        "| pleroma serve: 64 clients for 60 s of mixed work (slices, engine queries, writes kept and \
         rolled back), 0 errors, every committed sum exact | {} clients for {:.0} s: {} calls, {} kept, \
         {} rolled back, {} refused with 55P03 and retried, 0 errors, every sum exact | {} |",
        o.clients,
        o.seconds,
        m.total(),
        m.of(Kind::Kept).len(),
        m.of(Kind::RolledBack).len(),
        m.refused,
        if o.clients >= 64 && o.seconds >= 60.0 {
            "met"
        } else {
            "not measured at that size"
        }
    );
}

#[cfg(test)]
mod tests {
    use super::numeric;

    fn raw(ndigits: i16, weight: i16, sign: u16, digits: &[i16]) -> Vec<u8> {
        let mut v = Vec::new();
        for w in [ndigits, weight, sign as i16, 0] {
            v.extend_from_slice(&w.to_be_bytes());
        }
        for d in digits {
            v.extend_from_slice(&d.to_be_bytes());
        }
        v
    }

    #[test]
    fn integral_numerics() {
        // 4,166,471,946 = 41 6647 1946 in base 10000.
        assert_eq!(
            numeric(&raw(3, 2, 0, &[41, 6647, 1946])).unwrap(),
            4_166_471_946
        );
        assert_eq!(numeric(&raw(1, 1, 0x4000, &[12])).unwrap(), -120_000);
        assert_eq!(numeric(&raw(0, 0, 0, &[])).unwrap(), 0);
        // 1.5: a fraction is not an integer.
        assert!(numeric(&raw(2, 0, 0, &[1, 5000])).is_err());
        assert!(numeric(&raw(0, 0, 0xC000, &[])).is_err());
        assert!(numeric(&[0, 1]).is_err());
    }
}
