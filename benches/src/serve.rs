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
//!    slice and check the row is in it; DELETE it; COMMIT). The begin is
//!    each server's own: `BEGIN IMMEDIATE` (SQLite takes the writer lock up
//!    front) and `BEGIN` (PostgreSQL locks rows). Writes leave every
//!    committed state equal to the first, so every read of both servers is
//!    checked against plain SQLite's answer on the file before the run; any
//!    error or mismatch fails the run, but for one: a write transaction
//!    refused with 55P03 (`pleroma serve` queues writers and refuses one
//!    after 5 s of waiting for the write lock) is counted, reported and tried
//!    again, its time counting the wait. Reported: calls, calls per second,
//!    p50 and p99 per kind, the refusals, and the two goals.
//!
//! `--json FILE` writes the harness's report shape (`cells` with `query`,
//! `arm`, `warm_ms` = the p50; `figures` with calls per second and p99s).
//!
//! Left out: TLS and passwords (loopback, trusted), the dashboard workload.
//!
//! Run: `cargo run --release --bin pleroma -- bench serve --rows 1000000 --clients 16 --seconds 10`

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
const STATUSES: [&str; 3] = ["paid", "open", "void"];
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

/// Plain SQLite's answers, the oracle of every read.
struct Oracle {
    slices: Vec<Slice>,
    engine: Vec<(i64, i64)>,
    /// The id a client's write transaction inserts is this plus the client.
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
        write_id: max + 1_000_000,
    })
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
}

const KINDS: [Kind; 4] = [Kind::Slice, Kind::Engine, Kind::Write, Kind::One];

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
        }
    }
}

/// What the clients of a load phase run.
#[derive(Clone, Copy)]
enum Phase {
    Only(Kind),
    Mix,
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
        }
    }
}

/// The `i`-th call of `client`, its answer checked against the oracle.
/// `Ok(false)`: a write transaction the server refused because another
/// session held the write lock too long (SQLSTATE 55P03); nothing was
/// written and the caller tries again.
async fn call(
    c: &Client,
    s: &Stmts,
    kind: Kind,
    i: usize,
    client: usize,
    oracle: &Oracle,
    begin: &str,
) -> Result<bool, String> {
    let e =
        |e: tokio_postgres::Error| format!("client {client}: {}: {}", kind.label(), pg_error(&e));
    match kind {
        Kind::Slice => {
            let k = i % 3;
            let rows = c.query(&s.slice, &[&STATUSES[k]]).await.map_err(e)?;
            if slice_of(&rows)? != oracle.slices[k] {
                return Err(format!("client {client}: a slice differs from SQLite's"));
            }
        }
        Kind::Engine => {
            let (th, want) = oracle.engine[i % 3];
            let rows = c.query(&s.engine, &[&th]).await.map_err(e)?;
            let got = rows[0].try_get::<_, Int>(0).map_err(e)?.0;
            if got != want {
                return Err(format!("client {client}: engine count {got} != {want}"));
            }
        }
        Kind::One => {
            let rows = c.query(&s.one, &[]).await.map_err(e)?;
            let got = rows[0].try_get::<_, Int>(0).map_err(e)?.0;
            if rows.len() != 1 || got != 1 {
                return Err(format!("client {client}: SELECT 1 gave {got}"));
            }
        }
        Kind::Write => {
            let id = oracle.write_id + client as i64;
            let begun = c
                .batch_execute(&format!(
                    "{begin}; INSERT INTO invoices(id, region, status, month, amount_cents) \
                     VALUES ({id}, 'north', 'paid', 202401, 1000000)"
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
            let rows = c.query(&s.slice, &[&"paid"]).await.map_err(e)?;
            let mut want = oracle.slices[0].clone();
            for r in want.iter_mut().filter(|r| r.0 == "north") {
                r.1 += 1;
                r.2 += 1_000_000;
            }
            if slice_of(&rows)? != want {
                return Err(format!(
                    "client {client}: its own write is not in the slice"
                ));
            }
            c.batch_execute(&format!("DELETE FROM invoices WHERE id = {id}; COMMIT"))
                .await
                .map_err(e)?;
        }
    }
    Ok(true)
}

/// Latencies in ms per kind, and the wall time they took.
#[derive(Default)]
struct Samples {
    ms: [Vec<f64>; 4],
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
    // Round trips are reads (Slice, One): never refused.
    for i in 0..WARM {
        call(&c, &s, kind, i, 0, oracle, arm.begin).await?;
    }
    let mut out = Samples::default();
    let start = Instant::now();
    let budget = Duration::from_secs_f64(seconds);
    let mut v = Vec::with_capacity(calls);
    for i in 0..calls {
        let t = Instant::now();
        call(&c, &s, kind, WARM + i, 0, oracle, arm.begin).await?;
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
        let begin = arm.begin;
        tasks.push(tokio::spawn(async move {
            let mut out: [Vec<f64>; 4] = Default::default();
            let mut refused = 0;
            let mut i = client;
            while Instant::now() < deadline {
                let kind = phase.kind(i);
                let t = Instant::now();
                // A refused write is tried again; its time counts the wait.
                while !call(&c, &s, kind, i, client, &oracle, begin).await? {
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
const PHASES: [(Phase, &str); 5] = [
    (Phase::Only(Kind::Slice), "slices only"),
    (Phase::Only(Kind::One), "SELECT 1 only"),
    (Phase::Only(Kind::Engine), "engine queries only"),
    (Phase::Only(Kind::Write), "write transactions only"),
    (Phase::Mix, "mix"),
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
        },
        Arm {
            name: "postgres",
            url: format!("host=127.0.0.1 port={} user=bench dbname=ledger", pg.port),
            begin: "BEGIN",
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
        for (phase, _) in PHASES {
            let a = load(&arms[0], phase, o.clients, o.seconds, &oracle).await?;
            let b = load(&arms[1], phase, o.clients, o.seconds, &oracle).await?;
            res.load.push([a, b]);
        }
        Ok::<_, String>(res)
    })?;
    drop(pg);
    let after = sqlite_answers(&path)?;
    if after.slices != oracle.slices || after.engine != oracle.engine {
        return Err("the file's answers changed: a write was not undone".into());
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
        "- Every answer of both servers checked against plain SQLite's on the file, 0 errors.\n"
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
