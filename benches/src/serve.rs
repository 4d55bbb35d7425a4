//! `pleroma bench serve`: the server under load, on loopback.
//!
//! A ledger of `--rows` invoices (4 regions x 3 statuses x 12 months, a
//! plane on region, status, month with measure amount_cents) in a WAL file
//! in a temporary directory, served by `pleroma serve` in this process.
//!
//! 1. Round trip: one client (tokio-postgres, no TLS), a prepared statement
//!    over the extended protocol, the plane-served slice
//!    `SELECT region, COUNT(*), SUM(amount_cents) FROM invoices WHERE status
//!    = $1 GROUP BY region ORDER BY region`, `--calls` calls after a warm-up;
//!    beside it the same slice on an embedded `pleroma::Connection`.
//! 2. Load: `--clients` concurrent clients for `--seconds`, each looping
//!    over a mix: 6 in 10 the slice above (prepared), 2 in 10 an engine
//!    query (a filter on the measure, which SQLite answers), 2 in 10 a small
//!    write transaction (BEGIN IMMEDIATE; INSERT a row; read the slice and
//!    check the row is in it; DELETE it; COMMIT). Writes leave every
//!    committed state equal to the first, so every read is checked against
//!    plain SQLite's answer on the file before the run; any error or
//!    mismatch fails the run. Reported: calls, p50 and p99 per kind.
//!
//! Left out: TLS and passwords (loopback, trusted), PostgreSQL itself as an
//! arm, the dashboard workload.
//!
//! Run: `cargo run --release --bin pleroma -- bench serve --rows 100000 --clients 16 --seconds 10`

use std::sync::Arc;
use std::time::{Duration, Instant};

use pleroma::rusqlite;
use tokio_postgres::types::Type;
use tokio_postgres::NoTls;

const SLICE: &str = "SELECT region, COUNT(*), SUM(amount_cents) FROM invoices WHERE status = $1 GROUP BY region ORDER BY region";
const ENGINE: &str = "SELECT COUNT(*) FROM invoices WHERE amount_cents > $1";
const STATUSES: [&str; 3] = ["paid", "open", "void"];

/// Options of `pleroma bench serve`.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub rows: i64,
    pub clients: usize,
    pub seconds: f64,
    pub calls: usize,
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
    Ok(Oracle { slices, engine })
}

fn slice_of(rows: &[tokio_postgres::Row]) -> Slice {
    // COUNT and SUM are expressions: a prepared statement sends them as text.
    rows.iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                r.get::<_, &str>(1).parse().unwrap_or(-1),
                r.get::<_, &str>(2).parse().unwrap_or(-1),
            )
        })
        .collect()
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

#[derive(Default)]
struct Samples {
    slice: Vec<f64>,
    engine: Vec<f64>,
    write: Vec<f64>,
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
    let path = dir.join("ledger.db");
    let result = run_in(o, &path, start);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run_in(o: &BenchOptions, path: &std::path::Path, start: StartServer) -> Result<(), String> {
    build(path, o.rows)?;
    let oracle = Arc::new(sqlite_answers(path)?);
    let (port, _server) = start(path)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;

    // The embedded arm: the same slice on a pleroma::Connection.
    let mut embedded = pleroma::Connection::open(path).map_err(|e| e.to_string())?;
    let esql = SLICE.replace("$1", "?1");
    let mut emb = Vec::new();
    for i in 0..o.calls + 20 {
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
        if i >= 20 {
            emb.push(dt);
        }
    }
    emb.sort_by(f64::total_cmp);

    let url = format!("host=127.0.0.1 port={port} user=bench dbname=ledger");
    let calls = o.calls;
    let o2 = oracle.clone();
    let url2 = url.clone();
    let (route, mut rt_samples) = rt.block_on(async move {
        let (c, conn) = tokio_postgres::connect(&url2, NoTls)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let route = c
            .simple_query(&format!(
                "PRAGMA pleroma_explain('{}')",
                SLICE.replace("$1", "?1").replace('\'', "''")
            ))
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
                _ => None,
            })
            .unwrap_or_default();
        let stmt = c
            .prepare_typed(SLICE, &[Type::TEXT])
            .await
            .map_err(|e| e.to_string())?;
        let mut v = Vec::new();
        for i in 0..calls + 20 {
            let t = Instant::now();
            let rows = c
                .query(&stmt, &[&STATUSES[i % 3]])
                .await
                .map_err(|e| e.to_string())?;
            let dt = t.elapsed().as_secs_f64() * 1e3;
            if slice_of(&rows) != o2.slices[i % 3] {
                return Err(format!("round trip {i}: the slice differs from SQLite's"));
            }
            if i >= 20 {
                v.push(dt);
            }
        }
        Ok::<_, String>((route, v))
    })?;
    rt_samples.sort_by(f64::total_cmp);
    if route != "plane" {
        return Err(format!(
            "pleroma_explain routes the slice to {route:?}, not the plane"
        ));
    }

    println!(
        "## pleroma bench serve: {} invoices, loopback, no TLS\n",
        o.rows
    );
    println!("Round trip of the plane-served slice (route: {route}), {calls} calls:\n");
    println!("| arm | p50 ms | p99 ms |");
    println!("|---|---:|---:|");
    println!(
        "| embedded pleroma::Connection | {:.4} | {:.4} |",
        quantile(&emb, 0.5),
        quantile(&emb, 0.99)
    );
    println!(
        "| pleroma serve, extended protocol, prepared | {:.4} | {:.4} |",
        quantile(&rt_samples, 0.5),
        quantile(&rt_samples, 0.99)
    );

    let deadline = Instant::now() + Duration::from_secs_f64(o.seconds);
    let samples = rt.block_on(async {
        let mut tasks = Vec::new();
        for client in 0..o.clients {
            let url = url.clone();
            let oracle = oracle.clone();
            tasks.push(tokio::spawn(async move {
                let (c, conn) = tokio_postgres::connect(&url, NoTls).await.map_err(|e| e.to_string())?;
                tokio::spawn(conn);
                let slice = c.prepare_typed(SLICE, &[Type::TEXT]).await.map_err(|e| e.to_string())?;
                let engine = c.prepare_typed(ENGINE, &[Type::INT8]).await.map_err(|e| e.to_string())?;
                let mut s = Samples::default();
                let mut i = client;
                while Instant::now() < deadline {
                    let t = Instant::now();
                    match i % 10 {
                        0..=5 => {
                            let k = i % 3;
                            let rows = c.query(&slice, &[&STATUSES[k]]).await.map_err(|e| e.to_string())?;
                            if slice_of(&rows) != oracle.slices[k] {
                                return Err(format!("client {client}: a slice differs from SQLite's"));
                            }
                            s.slice.push(t.elapsed().as_secs_f64() * 1e3);
                        }
                        6 | 7 => {
                            let (th, want) = oracle.engine[i % 3];
                            let rows = c.query(&engine, &[&th]).await.map_err(|e| e.to_string())?;
                            let got: i64 = rows[0].get::<_, &str>(0).parse().unwrap_or(-1);
                            if got != want {
                                return Err(format!("client {client}: engine count {got} != {want}"));
                            }
                            s.engine.push(t.elapsed().as_secs_f64() * 1e3);
                        }
                        _ => {
                            c.batch_execute(&format!(
                                "BEGIN IMMEDIATE; INSERT INTO invoices(id, region, status, month, amount_cents) \
                                 VALUES ({id}, 'north', 'paid', 202401, 1000000)",
                                id = 10_000_000 + client
                            ))
                            .await
                            .map_err(|e| format!("client {client}: write: {e:?}"))?;
                            let rows = c.query(&slice, &[&"paid"]).await.map_err(|e| e.to_string())?;
                            let mut want = oracle.slices[0].clone();
                            for r in want.iter_mut().filter(|r| r.0 == "north") {
                                r.1 += 1;
                                r.2 += 1_000_000;
                            }
                            if slice_of(&rows) != want {
                                return Err(format!("client {client}: its own write is not in the slice"));
                            }
                            c.batch_execute(&format!(
                                "DELETE FROM invoices WHERE id = {}; COMMIT",
                                10_000_000 + client
                            ))
                            .await
                            .map_err(|e| format!("client {client}: commit: {e:?}"))?;
                            s.write.push(t.elapsed().as_secs_f64() * 1e3);
                        }
                    }
                    i += 1;
                }
                Ok::<_, String>(s)
            }));
        }
        let mut all = Samples::default();
        for t in tasks {
            let s = t.await.map_err(|e| e.to_string())??;
            all.slice.extend(s.slice);
            all.engine.extend(s.engine);
            all.write.extend(s.write);
        }
        Ok::<_, String>(all)
    })?;
    println!(
        "\nLoad: {} clients for {:.1} s, every answer checked against SQLite, 0 errors:\n",
        o.clients, o.seconds
    );
    println!("| kind | calls | p50 ms | p99 ms |");
    println!("|---|---:|---:|---:|");
    for (name, mut v) in [
        ("plane-served slice (prepared)", samples.slice),
        ("engine query (prepared)", samples.engine),
        ("write transaction (5 statements)", samples.write),
    ] {
        v.sort_by(f64::total_cmp);
        println!(
            "| {name} | {} | {:.3} | {:.3} |",
            v.len(),
            quantile(&v, 0.5),
            quantile(&v, 0.99)
        );
    }
    let total = sqlite_answers(path)?;
    if total.slices != oracle.slices {
        return Err("the file's answers changed: a write was not undone".into());
    }
    Ok(())
}
