//! `pleroma bench shards`: two shards under a PostgreSQL coordinator
//! (docs/scale-out.md, "Sharded files").
//!
//! `--rows` events `ev(id, country, device, cents)` (6 countries x 3
//! devices, seeded) split by country over two SQLite files, three countries
//! each, each with a plane on `country, device` measuring `cents`; each file
//! served by its own `pleroma serve` process (this program, started as a
//! child on a loopback port). A private PostgreSQL (`postgres.rs`: Debian's
//! `postgresql`, installed when missing, stopped at the end) is the
//! coordinator: `postgres_fdw`, a foreign server and user mapping per
//! shard, a foreign table per shard as a LIST partition of `ev`,
//! `enable_partitionwise_aggregate = on`, and the foreign tables' row
//! counts in `pg_class.reltuples`, the shards' own counts (what ANALYZE of
//! a foreign table would store; it works through `pleroma serve`, but reads
//! every row of the shard to get there). The same
//! rows are also loaded with COPY into one plain PostgreSQL table
//! `ev_local` of the same server and ANALYZEd.
//!
//! For the grouped query `SELECT country, SUM(cents), COUNT(*) FROM ev GROUP
//! BY country ORDER BY country` and its slice `WHERE device = 'ios'`, the
//! run first requires that `EXPLAIN VERBOSE` on the coordinator shows the
//! aggregate pushed down to both shards (a remote `GROUP BY` each) and that
//! each shard's plane serves the remote statement (`PRAGMA pleroma_explain`
//! through the shard's server), then times (median of `RUNS` after `WARM`
//! warm-up runs, one client, the simple protocol):
//!
//! - the coordinator, aggregates pushed down;
//! - the same with `async_capable 'true'` on both foreign servers (the
//!   shards queried at once: `Async Foreign Scan` in the plan, required);
//! - the coordinator with `enable_partitionwise_aggregate = off` (every row
//!   fetched through the cursors; 3 runs);
//! - `ev_local`, the one PostgreSQL table holding all the rows;
//! - each shard's remote statement sent straight to its `pleroma serve`;
//! - each shard's remote statement on an embedded `pleroma::Connection`
//!   (its route must be the plane or its memo): its first answer on a new
//!   connection (the plane), then the median of repeats (the memo's hits).
//!
//! Every answer of every arm is checked against plain SQLite (rusqlite)
//! over the union of the shard files (each shard's against its own file);
//! a difference fails the run.
//!
//! Run: `cargo run --release --bin pleroma -- bench shards --rows 1000000`

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use pleroma::rusqlite;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

use crate::harness::{fmt_ms, median, Cell, Options, Report};
use crate::postgres::Postgres;
use crate::Outcome;

const SHARDS: [(&str, [&str; 3]); 2] = [
    ("shard_a", ["de", "fr", "it"]),
    ("shard_b", ["us", "jp", "br"]),
];
const DEVICES: [&str; 3] = ["ios", "android", "web"];
const QUERIES: [(&str, &str); 2] = [
    (
        "by_country",
        "SELECT country, SUM(cents), COUNT(*) FROM ev GROUP BY country ORDER BY country",
    ),
    (
        "ios_by_country",
        "SELECT country, SUM(cents), COUNT(*) FROM ev WHERE device = 'ios' \
         GROUP BY country ORDER BY country",
    ),
];
const RUNS: usize = 11;
const WARM: usize = 2;
/// Runs of the coordinator without pushdown (it fetches every row).
const RUNS_UNPUSHED: usize = 3;
/// The ports tried first for the servers (then any free one).
const PORTS: std::ops::RangeInclusive<u16> = 5470..=5479;

type Answer = Vec<(String, i64, i64)>;

/// A `pleroma serve` child process; killed when dropped.
struct Served {
    child: Child,
    port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port(taken: &[u16]) -> Result<u16> {
    if let Some(p) = PORTS
        .clone()
        .find(|p| !taken.contains(p) && std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
    {
        return Ok(p);
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// `pleroma serve FILE --listen 127.0.0.1:PORT`, this program; returns once
/// it accepts connections.
fn serve(file: &Path, port: u16, log: &Path) -> Result<Served> {
    let exe = std::env::current_exe().context("the pleroma program's path")?;
    let log_file = std::fs::File::create(log)?;
    let child = Command::new(&exe)
        .arg("serve")
        .arg(file)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .with_context(|| format!("starting {} serve", exe.display()))?;
    let mut s = Served { child, port };
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(st) = s.child.try_wait()? {
            bail!(
                "pleroma serve {} exited ({st}): {}",
                file.display(),
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        if t.elapsed() > Duration::from_secs(60) {
            bail!(
                "pleroma serve {} did not listen within 60 s",
                file.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(s)
}

/// The seeded rows, each with its shard (0 or 1), written into the two
/// files; then each gets its plane. Returns the planes' build time (ms).
fn build(files: &[PathBuf; 2], rows: u64, seed: u64) -> Result<f64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let conns = files
        .iter()
        .map(|f| {
            let _ = std::fs::remove_file(f);
            let c = rusqlite::Connection::open(f)?;
            c.execute_batch(
                "PRAGMA journal_mode = WAL;
                 CREATE TABLE ev(id INTEGER PRIMARY KEY, country TEXT, device TEXT, cents INTEGER);
                 BEGIN;",
            )?;
            Ok(c)
        })
        .collect::<Result<Vec<_>>>()?;
    {
        let mut stmts = conns
            .iter()
            .map(|c| c.prepare("INSERT INTO ev VALUES (?1, ?2, ?3, ?4)"))
            .collect::<Result<Vec<_>, _>>()?;
        for id in 1..=rows as i64 {
            let c = (next() % 6) as usize;
            let d = DEVICES[(next() % 3) as usize];
            let cents = (next() % 100_000) as i64;
            let (shard, country) = (c / 3, SHARDS[c / 3].1[c % 3]);
            stmts[shard].execute(rusqlite::params![id, country, d, cents])?;
        }
    }
    for c in &conns {
        c.execute_batch("COMMIT")?;
    }
    drop(conns);
    let t = Instant::now();
    for f in files {
        let mut c = pleroma::Connection::open(f)?;
        c.execute(
            "PRAGMA pleroma_attach('ev', 'country, device', 'cents')",
            &[],
        )?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// Plain SQLite's answer to `sql` over the union of both files (`ev`), or
/// over one file.
fn oracle(files: &[&Path], sql: &str) -> Result<Answer> {
    let c = rusqlite::Connection::open_in_memory()?;
    let mut union = Vec::new();
    for (i, f) in files.iter().enumerate() {
        c.execute_batch(&format!(
            "ATTACH '{}' AS s{i}",
            f.display().to_string().replace('\'', "''")
        ))?;
        union.push(format!("SELECT * FROM s{i}.ev"));
    }
    c.execute_batch(&format!(
        "CREATE TEMP VIEW ev AS {}",
        union.join(" UNION ALL ")
    ))?;
    let mut st = c.prepare(sql)?;
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

fn pg_err(e: tokio_postgres::Error) -> anyhow::Error {
    match e.as_db_error() {
        Some(d) => anyhow!("{}: {}", d.code().code(), d.message()),
        None => anyhow!("{e}"),
    }
}

async fn connect(port: u16, user: &str, db: &str) -> Result<Client> {
    let (c, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user={user} dbname={db}"),
        NoTls,
    )
    .await
    .map_err(pg_err)?;
    tokio::spawn(conn);
    Ok(c)
}

async fn text_rows(c: &Client, sql: &str) -> Result<Vec<Vec<Option<String>>>> {
    Ok(c.simple_query(sql)
        .await
        .map_err(pg_err)
        .with_context(|| sql.to_owned())?
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect())
}

async fn answer(c: &Client, sql: &str) -> Result<Answer> {
    text_rows(c, sql)
        .await?
        .into_iter()
        .map(|r| {
            let int = |v: &Option<String>| -> Result<i64> {
                Ok(v.as_deref().ok_or_else(|| anyhow!("NULL"))?.parse()?)
            };
            Ok((r[0].clone().unwrap_or_default(), int(&r[1])?, int(&r[2])?))
        })
        .collect()
}

/// Times `runs` runs of `sql` after `WARM`, each answer checked.
async fn timed(c: &Client, sql: &str, runs: usize, want: &Answer, what: &str) -> Result<f64> {
    let mut ms = Vec::new();
    for i in 0..WARM + runs {
        let t = Instant::now();
        let got = answer(c, sql).await?;
        let dt = t.elapsed().as_secs_f64() * 1e3;
        if &got != want {
            bail!("{what}: `{sql}` gave {got:?}, SQLite {want:?}");
        }
        if i >= WARM {
            ms.push(dt);
        }
    }
    Ok(median(&ms))
}

/// Loads both files' rows into `ev_local` with COPY, then ANALYZE.
async fn load_local(c: &Client, files: &[PathBuf; 2]) -> Result<()> {
    c.batch_execute("CREATE TABLE ev_local(id bigint, country text, device text, cents bigint)")
        .await
        .map_err(pg_err)?;
    let sink = c
        .copy_in("COPY ev_local FROM STDIN (FORMAT binary)")
        .await
        .map_err(pg_err)?;
    let types = [Type::INT8, Type::TEXT, Type::TEXT, Type::INT8];
    let writer = tokio_postgres::binary_copy::BinaryCopyInWriter::new(sink, &types);
    let mut writer = std::pin::pin!(writer);
    for f in files {
        let lite = rusqlite::Connection::open(f)?;
        let mut st = lite.prepare("SELECT id, country, device, cents FROM ev")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let (id, country, device, cents): (i64, String, String, i64) =
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
            writer
                .as_mut()
                .write(&[&id, &country, &device, &cents])
                .await
                .map_err(pg_err)?;
        }
    }
    writer.as_mut().finish().await.map_err(pg_err)?;
    c.batch_execute("VACUUM ANALYZE ev_local")
        .await
        .map_err(pg_err)?;
    Ok(())
}

/// The coordinator's objects (docs/scale-out.md shows the same SQL).
fn coordinator_sql(ports: [u16; 2]) -> String {
    let mut sql = String::from("CREATE EXTENSION postgres_fdw;\n");
    for (name, port) in SHARDS.iter().map(|s| s.0).zip(ports) {
        sql.push_str(&format!(
            "CREATE SERVER {name} FOREIGN DATA WRAPPER postgres_fdw \
                 OPTIONS (host '127.0.0.1', port '{port}', dbname '{name}');\n\
             CREATE USER MAPPING FOR CURRENT_USER SERVER {name} OPTIONS (user 'bench');\n"
        ));
    }
    sql.push_str(
        "CREATE TABLE ev (id bigint, country text, device text, cents bigint) \
         PARTITION BY LIST (country);\n",
    );
    for (name, countries) in SHARDS {
        let list: Vec<String> = countries.iter().map(|c| format!("'{c}'")).collect();
        sql.push_str(&format!(
            "CREATE FOREIGN TABLE ev_{} PARTITION OF ev FOR VALUES IN ({}) \
             SERVER {name} OPTIONS (table_name 'ev');\n",
            &name[6..],
            list.join(", ")
        ));
    }
    sql
}

struct Figures {
    coordinator: f64,
    /// The same with `async_capable` on both foreign servers.
    coordinator_async: f64,
    unpushed: f64,
    local: f64,
    served: [f64; 2],
    embedded: [f64; 2],
    embedded_first: [f64; 2],
    remote: Vec<String>,
    reasons: Vec<String>,
    embedded_routes: Vec<String>,
}

pub fn run(rows: u64, opts: &Options) -> Result<Outcome> {
    let dir = std::env::temp_dir().join(format!("pleroma-bench-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let result = run_in(rows, opts, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run_in(rows: u64, opts: &Options, dir: &Path) -> Result<Outcome> {
    let files = [dir.join("shard_a.db"), dir.join("shard_b.db")];
    let build_ms = build(&files, rows, opts.seed)?;
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();

    let pa = free_port(&[])?;
    let a = serve(&files[0], pa, &dir.join("shard_a.log"))?;
    let pb = free_port(&[pa])?;
    let b = serve(&files[1], pb, &dir.join("shard_b.log"))?;
    let served = [&a, &b];
    let pp = free_port(&[pa, pb])?;
    let pp_text = pp.to_string();
    // postgres.rs writes its own free port first; this later line wins.
    let mut pg = Postgres::start(dir, &[("port", &pp_text)]).map_err(anyhow::Error::msg)?;
    pg.port = pp;
    let version = pg.version();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let out = rt.block_on(async {
        let coord = connect(pg.port, "bench", "postgres").await?;
        coord
            .batch_execute(&coordinator_sql([a.port, b.port]))
            .await
            .map_err(pg_err)
            .context("the coordinator's objects (postgres_fdw)")?;
        let mut shard_clients = Vec::new();
        for (s, (name, _)) in served.iter().zip(SHARDS) {
            let c = connect(s.port, "bench", name).await?;
            let n = text_rows(&c, "SELECT COUNT(*) FROM ev").await?[0][0]
                .clone()
                .unwrap_or_default();
            coord
                .batch_execute(&format!(
                    "UPDATE pg_class SET reltuples = {n} WHERE oid = 'ev_{}'::regclass",
                    &name[6..]
                ))
                .await
                .map_err(pg_err)?;
            shard_clients.push(c);
        }
        let t = Instant::now();
        load_local(&coord, &files).await?;
        let load_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut figures = Vec::new();
        for (_, sql) in QUERIES {
            let want = oracle(&paths, sql)?;
            coord
                .batch_execute("SET enable_partitionwise_aggregate = on")
                .await
                .map_err(pg_err)?;
            let plan = text_rows(&coord, &format!("EXPLAIN VERBOSE {sql}")).await?;
            let remote: Vec<String> = plan
                .iter()
                .filter_map(|r| r[0].as_deref())
                .filter_map(|l| l.trim().strip_prefix("Remote SQL: "))
                .map(str::to_owned)
                .collect();
            if remote.len() != 2 || remote.iter().any(|r| !r.contains(" GROUP BY ")) {
                bail!(
                    "`{sql}`: the aggregate is not pushed down to both shards: {remote:?} \
                     (without column statistics PostgreSQL expects as many groups as rows \
                     under a filter, so it keeps small shards' aggregates local: \
                     use --rows 200000 or more)"
                );
            }
            let mut reasons = Vec::new();
            let mut served_ms = [0.0; 2];
            let mut embedded_ms = [0.0; 2];
            let mut embedded_first = [0.0; 2];
            let mut embedded_routes = Vec::new();
            for i in 0..2 {
                let routed = remote[i].replace("public.ev", "main.ev");
                let e = text_rows(
                    &shard_clients[i],
                    &format!("PRAGMA pleroma_explain('{}')", routed.replace('\'', "''")),
                )
                .await?;
                let (route, reason) = (
                    e[0][0].clone().unwrap_or_default(),
                    e[0][1].clone().unwrap_or_default(),
                );
                if route != "plane" {
                    bail!("shard {i} does not serve `{routed}` from its plane: {reason}");
                }
                reasons.push(format!("{route} ({reason})"));
                let own = oracle(&paths[i..=i], &routed.replace("main.ev", "ev"))?;
                served_ms[i] = timed(&shard_clients[i], &remote[i], RUNS, &own, "shard").await?;
                let mut conn = pleroma::Connection::open(&files[i])?;
                let mut ms = Vec::new();
                for k in 0..WARM + RUNS {
                    let t = Instant::now();
                    let got = conn.query(&routed, &[])?;
                    let dt = t.elapsed().as_secs_f64() * 1e3;
                    let kind = conn.last_route().kind;
                    if !matches!(kind, pleroma::RouteKind::Plane | pleroma::RouteKind::Memo) {
                        bail!(
                            "embedded shard {i}: `{routed}` routed {:?}",
                            conn.last_route()
                        );
                    }
                    let got: Answer = got
                        .rows
                        .iter()
                        .map(|r| match (&r[0], &r[1], &r[2]) {
                            (
                                pleroma::Value::Text(c),
                                pleroma::Value::Integer(s),
                                pleroma::Value::Integer(n),
                            ) => Ok((c.clone(), *s, *n)),
                            other => Err(anyhow!("embedded shard {i}: row {other:?}")),
                        })
                        .collect::<Result<_>>()?;
                    let mut sorted = got;
                    sorted.sort();
                    let mut own_sorted = own.clone();
                    own_sorted.sort();
                    if sorted != own_sorted {
                        bail!("embedded shard {i}: `{routed}` differs from SQLite");
                    }
                    if k == 0 {
                        if kind != pleroma::RouteKind::Plane {
                            bail!("embedded shard {i}: the first `{routed}` routed {kind:?}");
                        }
                        embedded_first[i] = dt;
                    }
                    if k == 0 || k == WARM {
                        embedded_routes.push(format!("{kind:?}"));
                    }
                    if k >= WARM {
                        ms.push(dt);
                    }
                }
                embedded_ms[i] = median(&ms);
            }
            let coordinator = timed(&coord, sql, RUNS, &want, "coordinator").await?;
            let set_async = |op: &str| {
                SHARDS
                    .iter()
                    .map(|(name, _)| {
                        format!(
                            "ALTER SERVER {name} OPTIONS ({op} async_capable{});",
                            if op == "ADD" { " 'true'" } else { "" }
                        )
                    })
                    .collect::<String>()
            };
            coord
                .batch_execute(&set_async("ADD"))
                .await
                .map_err(pg_err)?;
            let plan = text_rows(&coord, &format!("EXPLAIN VERBOSE {sql}")).await?;
            if !plan.iter().any(|r| {
                r[0].as_deref()
                    .is_some_and(|l| l.contains("Async Foreign Scan"))
            }) {
                bail!("`{sql}`: async_capable gave no Async Foreign Scan: {plan:?}");
            }
            let coordinator_async = timed(&coord, sql, RUNS, &want, "coordinator (async)").await?;
            coord
                .batch_execute(&set_async("DROP"))
                .await
                .map_err(pg_err)?;
            let local_sql = sql.replace("FROM ev", "FROM ev_local");
            let local = timed(&coord, &local_sql, RUNS, &want, "ev_local").await?;
            coord
                .batch_execute("SET enable_partitionwise_aggregate = off")
                .await
                .map_err(pg_err)?;
            let unpushed = timed(&coord, sql, RUNS_UNPUSHED, &want, "coordinator").await?;
            figures.push(Figures {
                coordinator,
                coordinator_async,
                unpushed,
                local,
                served: served_ms,
                embedded: embedded_ms,
                embedded_first,
                remote,
                reasons,
                embedded_routes,
            });
        }
        anyhow::Ok((figures, load_ms))
    })?;
    let (figures, load_ms) = out;
    drop(pg);
    drop(a);
    drop(b);
    report(rows, opts, &figures, build_ms, load_ms, &version)
}

fn report(
    rows: u64,
    opts: &Options,
    figures: &[Figures],
    build_ms: f64,
    load_ms: f64,
    version: &str,
) -> Result<Outcome> {
    let mut r = Report::new("shards", rows, opts);
    type Arm = (&'static str, &'static str, fn(&Figures) -> f64);
    let arms: [Arm; 10] = [
        (
            "coordinator",
            "PostgreSQL coordinator over 2 shards, aggregates pushed down",
            |f| f.coordinator,
        ),
        (
            "coordinator_async",
            "the same, the foreign servers `async_capable` (both shards at once)",
            |f| f.coordinator_async,
        ),
        (
            "coordinator_unpushed",
            "the coordinator without pushdown (partitionwise aggregate off: every row fetched)",
            |f| f.unpushed,
        ),
        (
            "postgres_local",
            "one PostgreSQL table holding all the rows (COPY, ANALYZE)",
            |f| f.local,
        ),
        (
            "shard_a_served",
            "shard A's remote statement, straight to its pleroma serve",
            |f| f.served[0],
        ),
        (
            "shard_b_served",
            "shard B's remote statement, straight to its pleroma serve",
            |f| f.served[1],
        ),
        (
            "shard_a_embedded_first",
            "shard A's remote statement, embedded pleroma::Connection: first answer (the plane)",
            |f| f.embedded_first[0],
        ),
        (
            "shard_b_embedded_first",
            "shard B's remote statement, embedded pleroma::Connection: first answer (the plane)",
            |f| f.embedded_first[1],
        ),
        (
            "shard_a_embedded",
            "shard A's remote statement, embedded pleroma::Connection: repeated (memo hits)",
            |f| f.embedded[0],
        ),
        (
            "shard_b_embedded",
            "shard B's remote statement, embedded pleroma::Connection: repeated (memo hits)",
            |f| f.embedded[1],
        ),
    ];
    r.arms = arms.iter().map(|a| a.0.to_owned()).collect();
    let mut md = String::from("| median ms |");
    for (q, _) in QUERIES {
        md.push_str(&format!(" `{q}` |"));
    }
    md.push_str("\n|---|");
    md.push_str(&"---:|".repeat(QUERIES.len()));
    md.push('\n');
    for (arm, label, get) in arms {
        md.push_str(&format!("| {label} |"));
        for (f, (q, _)) in figures.iter().zip(QUERIES) {
            let ms = get(f);
            md.push_str(&format!(" {} |", fmt_ms(ms)));
            r.cells.push(Cell {
                query: q.into(),
                arm: arm.into(),
                warm_ms: ms,
                calls: match arm {
                    "coordinator_unpushed" => RUNS_UNPUSHED,
                    "shard_a_embedded_first" | "shard_b_embedded_first" => 1,
                    _ => RUNS,
                },
                matched: true,
                ..Cell::default()
            });
            r.figures.insert(format!("{q}.{arm}_ms"), ms);
        }
        md.push('\n');
    }
    for (f, (q, sql)) in figures.iter().zip(QUERIES) {
        r.notes.insert(format!("{q}.sql"), sql.into());
        for (i, (remote, reason)) in f.remote.iter().zip(&f.reasons).enumerate() {
            r.notes.insert(
                format!("{q}.remote_sql_{}", ["a", "b"][i]),
                format!("{remote} → pleroma_explain: {reason}"),
            );
        }
        r.notes
            .insert(format!("{q}.embedded_routes"), f.embedded_routes.join(", "));
    }
    r.figures.insert("plane_build_ms".into(), build_ms);
    r.figures.insert("postgres_copy_analyze_ms".into(), load_ms);
    r.notes.insert("postgres".into(), version.into());
    r.notes.insert(
        "runs".into(),
        format!(
            "median of {RUNS} after {WARM} warm-up ({RUNS_UNPUSHED} without pushdown); \
             every answer checked against SQLite"
        ),
    );
    Ok(Outcome {
        report: r,
        markdown: md,
        chart: QUERIES.iter().map(|q| q.0.to_owned()).collect(),
    })
}
