//! Shards under a PostgreSQL coordinator (docs/scale-out.md, "Sharded
//! files"): two `pleroma serve` servers, each over its own shard file with
//! the same planed table, and a private PostgreSQL (Debian's, see
//! `pg_server`) whose `postgres_fdw` reads them.
//!
//! The split is by country (a LIST partition per shard), the key the
//! dashboards group by: PostgreSQL then aggregates each partition apart
//! (`enable_partitionwise_aggregate`) and `postgres_fdw` pushes each
//! partition's whole `GROUP BY` to its shard, where the plane answers it;
//! the coordinator only appends the groups. A grouping by another column
//! (device) spans the shards: PostgreSQL 15 does not push partial
//! aggregates down, so the coordinator's query merges the shards' partials
//! itself (SUM of the SUMs, SUM of the COUNTs), each shard's aggregate
//! pushed down.
//!
//! Checked: every answer of the coordinator against plain SQLite (rusqlite)
//! over the union of the shard files' rows; `EXPLAIN VERBOSE` shows the
//! remote `GROUP BY` per shard; each remote statement, as the shard's server
//! receives it (`public.ev` is SQLite's `main.ev`), is one the plane serves
//! (`PRAGMA pleroma_explain` through the shard's server) and the shard's
//! server answers it as SQLite does on that shard; writes on a shard
//! through its own server and through the coordinator show in the next
//! answer. PostgreSQL is stopped at the end, also when a check fails.

mod common;
mod pg_server;

use std::path::Path;

use common::Cell;
use pleroma::rusqlite;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

const SHARD_A: [&str; 3] = ["de", "fr", "it"];
const SHARD_B: [&str; 3] = ["us", "jp", "br"];
const DEVICES: [&str; 3] = ["ios", "android", "web"];
const ROWS: i64 = 200_000;

/// The seeded rows: (id, country, device, cents).
fn rows() -> Vec<(i64, &'static str, &'static str, i64)> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let countries: Vec<&str> = SHARD_A.iter().chain(SHARD_B.iter()).copied().collect();
    (1..=ROWS)
        .map(|id| {
            let c = countries[(next() % 6) as usize];
            let d = DEVICES[(next() % 3) as usize];
            (id, c, d, (next() % 100_000) as i64)
        })
        .collect()
}

/// A shard file: `ev` with the rows of `countries`, a plane on it.
fn shard(path: &Path, countries: &[&str]) {
    let mut conn = pleroma::Connection::open(path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE ev(id INTEGER PRIMARY KEY, country TEXT, device TEXT, cents INTEGER);",
    )
    .unwrap();
    conn.begin().unwrap();
    for (id, c, d, cents) in rows().into_iter().filter(|r| countries.contains(&r.1)) {
        conn.execute(
            "INSERT INTO ev VALUES (?, ?, ?, ?)",
            &[
                pleroma::Value::Integer(id),
                pleroma::Value::Text(c.into()),
                pleroma::Value::Text(d.into()),
                pleroma::Value::Integer(cents),
            ],
        )
        .unwrap();
    }
    conn.commit().unwrap();
    conn.execute(
        "PRAGMA pleroma_attach('ev', 'country, device', 'cents')",
        &[],
    )
    .unwrap();
}

/// The oracle: `sql` by plain SQLite over both shard files, `ev` their
/// union and `ev_a`, `ev_b` each shard's table, as on the coordinator.
fn oracle(a: &Path, b: &Path, sql: &str) -> Vec<Vec<Cell>> {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    conn.execute_batch(&format!(
        "ATTACH '{}' AS a; ATTACH '{}' AS b;
         CREATE TEMP VIEW ev_a AS SELECT * FROM a.ev;
         CREATE TEMP VIEW ev_b AS SELECT * FROM b.ev;
         CREATE TEMP VIEW ev AS SELECT * FROM a.ev UNION ALL SELECT * FROM b.ev;",
        a.display(),
        b.display()
    ))
    .unwrap();
    common::cells_of(&conn, sql)
}

async fn connect(conninfo: &str) -> Client {
    let (client, conn) = tokio_postgres::connect(conninfo, NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

async fn shard_client(port: u16, name: &str) -> Client {
    connect(&format!(
        "host=127.0.0.1 port={port} user=coord dbname={name}"
    ))
    .await
}

/// The rows of a simple query, as text.
async fn text_rows(
    c: &Client,
    sql: &str,
) -> Result<Vec<Vec<Option<String>>>, tokio_postgres::Error> {
    Ok(c.simple_query(sql)
        .await?
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect())
}

async fn cells(c: &Client, sql: &str) -> Result<Vec<Vec<Cell>>, tokio_postgres::Error> {
    Ok(text_rows(c, sql)
        .await?
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|v| v.map_or(Cell::Null, |s| Cell::parse(&s)))
                .collect()
        })
        .collect())
}

/// The `Remote SQL:` lines of the coordinator's plan, in order.
async fn remote_sql(coord: &Client, sql: &str) -> Vec<String> {
    let plan = text_rows(coord, &format!("EXPLAIN VERBOSE {sql}"))
        .await
        .unwrap();
    plan.iter()
        .filter_map(|r| r[0].as_deref())
        .filter_map(|l| l.trim().strip_prefix("Remote SQL: "))
        .map(str::to_owned)
        .collect()
}

struct Shard {
    port: u16,
    client: Client,
}

/// A remote statement as `postgres_fdw` sent it, checked on its shard: the
/// plane serves it (`pleroma_explain` of the statement as the server hands
/// it to the router: PostgreSQL's `public` schema is SQLite's `main`), and
/// the server's answer to it is SQLite's on the shard's file.
async fn served_on(shard: &Shard, file: &Path, remote: &str) {
    let routed = remote.replace("public.ev", "main.ev");
    let explain = text_rows(
        &shard.client,
        &format!("PRAGMA pleroma_explain('{}')", routed.replace('\'', "''")),
    )
    .await
    .unwrap();
    let route = explain[0][0].as_deref().unwrap_or("");
    let reason = explain[0][1].as_deref().unwrap_or("");
    assert_eq!(
        route, "plane",
        "shard {} does not serve `{routed}` from its plane: {reason}",
        shard.port
    );
    eprintln!("shard {}: {route} ({reason}): {remote}", shard.port);
    let got = cells(&shard.client, remote).await.unwrap();
    let want = common::sqlite(file, &sqlite_form(&routed.replace("main.ev", "ev")));
    assert_eq!(got, want, "shard {}: {remote}", shard.port);
}

/// postgres_fdw's `= ANY ('{a,b}'::text[])` written as SQLite's `IN ('a',
/// 'b')`, for the oracle (the shards' values have no quotes or commas).
fn sqlite_form(remote: &str) -> String {
    let Some(start) = remote.find("= ANY ('{") else {
        return remote.to_owned();
    };
    let end = remote[start..].find("}'::text[])").expect("a text array") + start;
    let list: Vec<String> = remote[start + "= ANY ('{".len()..end]
        .split(',')
        .map(|v| format!("'{v}'"))
        .collect();
    format!(
        "{}IN ({}){}",
        &remote[..start],
        list.join(", "),
        &remote[end + "}'::text[])".len()..]
    )
}

/// A coordinator query whose aggregate is pushed down to every shard it
/// reads: its plan has one remote `GROUP BY` per shard (`shards` of them),
/// each served by that shard's plane, and its answer is SQLite's.
async fn pushed_down(
    coord: &Client,
    shards: &[(&Shard, &Path)],
    files: (&Path, &Path),
    sql: &str,
) -> Vec<String> {
    let remote = remote_sql(coord, sql).await;
    assert_eq!(remote.len(), shards.len(), "{sql}: {remote:?}");
    for (r, (shard, file)) in remote.iter().zip(shards) {
        assert!(
            r.contains(" GROUP BY "),
            "{sql}: the aggregate is not pushed down: {r}"
        );
        served_on(shard, file, r).await;
    }
    let got = cells(coord, sql).await.unwrap();
    assert_eq!(got, oracle(files.0, files.1, sql), "{sql}");
    assert!(!got.is_empty(), "{sql}: no rows");
    remote
}

const BY_COUNTRY: &str =
    "SELECT country, SUM(cents), COUNT(*) FROM ev GROUP BY country ORDER BY country";
const IOS_BY_COUNTRY: &str = "SELECT country, SUM(cents), COUNT(*) FROM ev WHERE device = 'ios' \
                              GROUP BY country ORDER BY country";
const OR_BY_COUNTRY: &str = "SELECT country, SUM(cents), COUNT(*) FROM ev \
                             WHERE country = 'de' OR country = 'us' OR country = 'jp' \
                             GROUP BY country ORDER BY country";
/// Grouped by a column that is not the partition key: each shard's partial
/// aggregate pushed down, merged by the coordinator's query.
const BY_DEVICE_MERGED: &str = "SELECT device, SUM(s), SUM(n) FROM (\
                                SELECT device, SUM(cents) AS s, COUNT(*) AS n FROM ev_a GROUP BY device \
                                UNION ALL \
                                SELECT device, SUM(cents), COUNT(*) FROM ev_b GROUP BY device) AS p \
                                GROUP BY device ORDER BY device";
/// Answered exactly, but not pushed down as aggregates (see the module doc).
const UNPUSHED: &[&str] = &[
    "SELECT device, SUM(cents), COUNT(*) FROM ev GROUP BY device ORDER BY device",
    "SELECT country, SUM(cents), COUNT(*) FROM ev WHERE country = 'fr' GROUP BY country",
    "SELECT SUM(cents), COUNT(*), MIN(cents), MAX(cents) FROM ev",
];
const IN_BY_COUNTRY: &str = "SELECT country, SUM(cents), COUNT(*) FROM ev \
                             WHERE country IN ('de', 'us', 'jp') GROUP BY country ORDER BY country";

/// The coordinator's objects, as docs/scale-out.md shows them.
fn coordinator_sql(port_a: u16, port_b: u16) -> String {
    let list = |c: &[&str]| {
        c.iter()
            .map(|c| format!("'{c}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "CREATE EXTENSION postgres_fdw;
         CREATE SERVER shard_a FOREIGN DATA WRAPPER postgres_fdw
             OPTIONS (host '127.0.0.1', port '{port_a}', dbname 'shard_a');
         CREATE SERVER shard_b FOREIGN DATA WRAPPER postgres_fdw
             OPTIONS (host '127.0.0.1', port '{port_b}', dbname 'shard_b');
         CREATE USER MAPPING FOR CURRENT_USER SERVER shard_a OPTIONS (user 'coord');
         CREATE USER MAPPING FOR CURRENT_USER SERVER shard_b OPTIONS (user 'coord');
         CREATE TABLE ev (id bigint, country text, device text, cents bigint)
             PARTITION BY LIST (country);
         CREATE FOREIGN TABLE ev_a PARTITION OF ev FOR VALUES IN ({})
             SERVER shard_a OPTIONS (table_name 'ev');
         CREATE FOREIGN TABLE ev_b PARTITION OF ev FOR VALUES IN ({})
             SERVER shard_b OPTIONS (table_name 'ev');",
        list(&SHARD_A),
        list(&SHARD_B)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgresql_coordinator_pushes_the_grouped_query_down_to_each_shards_plane() {
    let dir = tempfile::tempdir().unwrap();
    let (fa, fb) = (dir.path().join("shard_a.db"), dir.path().join("shard_b.db"));
    shard(&fa, &SHARD_A);
    shard(&fb, &SHARD_B);
    let (fa, fb) = (fa.as_path(), fb.as_path());
    let server_a = common::serve(fa);
    let server_b = common::serve(fb);
    let a = Shard {
        port: server_a.addr().port(),
        client: shard_client(server_a.addr().port(), "shard_a").await,
    };
    let b = Shard {
        port: server_b.addr().port(),
        client: shard_client(server_b.addr().port(), "shard_b").await,
    };
    // Declared after the servers: dropped (stopped) first, also on a panic.
    let pg = pg_server::Postgres::start(pg_server::free_port(5470..=5479), &[]);
    let coord = connect(&pg.conninfo()).await;
    coord
        .batch_execute(&coordinator_sql(a.port, b.port))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the coordinator's objects ({}; postgres_fdw is in Debian's `postgresql` \
                 package): {e:?}\n{}",
                pg.version,
                pg.log_tail(20)
            )
        });
    coord
        .batch_execute("SET enable_partitionwise_aggregate = on")
        .await
        .unwrap();
    // The planner pushes an aggregate down when it expects the groups to be
    // fewer than the rows, which needs the foreign tables' sizes: ANALYZE
    // asks each shard for `pg_catalog.pg_relation_size('public.ev'::
    // pg_catalog.regclass)`, then reads its rows through a cursor.
    coord
        .batch_execute("ANALYZE ev_a; ANALYZE ev_b")
        .await
        .unwrap();
    for (shard, table) in [(&a, "ev_a"), (&b, "ev_b")] {
        let n = text_rows(&shard.client, "SELECT COUNT(*) FROM ev")
            .await
            .unwrap()[0][0]
            .clone()
            .unwrap();
        let analyzed = text_rows(
            &coord,
            &format!("SELECT reltuples::bigint FROM pg_class WHERE oid = '{table}'::regclass"),
        )
        .await
        .unwrap()[0][0]
            .clone();
        assert_eq!(analyzed, Some(n), "{table}: ANALYZE's row count");
    }
    let both = [(&a, fa), (&b, fb)];

    let check_reads = || async {
        // Grouped by the partition key: whole groups pushed down to each
        // shard, exactly postgres_fdw's text.
        let remote = pushed_down(&coord, &both, (fa, fb), BY_COUNTRY).await;
        assert_eq!(
            remote,
            vec!["SELECT country, sum(cents), count(*) FROM public.ev GROUP BY 1"; 2]
        );
        let remote = pushed_down(&coord, &both, (fa, fb), IOS_BY_COUNTRY).await;
        assert_eq!(
            remote[0],
            "SELECT country, sum(cents), count(*) FROM public.ev WHERE ((device = 'ios')) GROUP BY 1"
        );
        pushed_down(&coord, &both, (fa, fb), OR_BY_COUNTRY).await;
        pushed_down(&coord, &both, (fa, fb), BY_DEVICE_MERGED).await;
        for sql in UNPUSHED {
            eprintln!(
                "not pushed down: {sql}: {:?}",
                remote_sql(&coord, sql).await
            );
            let got = cells(&coord, sql).await.unwrap();
            assert_eq!(got, oracle(fa, fb, sql), "{sql}");
        }
    };
    check_reads().await;

    // `IN (…)` reaches the shards as `country = ANY ('{de,us,jp}'::text[])`,
    // which the server reads as SQLite's `IN`.
    let remote = pushed_down(&coord, &both, (fa, fb), IN_BY_COUNTRY).await;
    assert!(remote[0].contains("= ANY ('{"), "{remote:?}");

    // A generic plan sends its parameters as `$1::text`: the server casts
    // the bound value and the plane serves `device = ?1`.
    coord
        .batch_execute(
            "SET plan_cache_mode = force_generic_plan;
             PREPARE by_device(text) AS SELECT country, SUM(cents), COUNT(*) FROM ev \
             WHERE device = $1 GROUP BY country ORDER BY country",
        )
        .await
        .unwrap();
    let remote = remote_sql(&coord, "EXECUTE by_device('ios')").await;
    assert_eq!(remote.len(), 2, "{remote:?}");
    for (r, shard) in remote.iter().zip([&a, &b]) {
        assert!(r.contains("$1::text"), "{r}");
        let explain = text_rows(
            &shard.client,
            &format!("PRAGMA pleroma_explain('{}')", r.replace('\'', "''")),
        )
        .await
        .unwrap();
        assert_eq!(explain[0][0].as_deref(), Some("plane"), "{r}: {explain:?}");
    }
    for device in DEVICES {
        let sql = format!("EXECUTE by_device('{device}')");
        let want = IOS_BY_COUNTRY.replace("'ios'", &format!("'{device}'"));
        assert_eq!(
            cells(&coord, &sql).await.unwrap(),
            oracle(fa, fb, &want),
            "{sql}"
        );
    }
    coord
        .batch_execute("DEALLOCATE by_device; RESET plan_cache_mode")
        .await
        .unwrap();

    // The tables of a shard, imported: postgres_fdw's IMPORT FOREIGN SCHEMA
    // reads the shard's pg_class and pg_attribute without a schema.
    coord
        .batch_execute(
            "CREATE SCHEMA imported;
             IMPORT FOREIGN SCHEMA public LIMIT TO (ev) FROM SERVER shard_b INTO imported",
        )
        .await
        .unwrap();
    let types = text_rows(
        &coord,
        "SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute \
         WHERE attrelid = 'imported.ev'::regclass AND attnum > 0 ORDER BY attnum",
    )
    .await
    .unwrap();
    let types: Vec<Vec<&str>> = types
        .iter()
        .map(|r| r.iter().map(|c| c.as_deref().unwrap_or("")).collect())
        .collect();
    assert_eq!(
        types,
        [
            ["id", "bigint", "t"],
            ["country", "text", "f"],
            ["device", "text", "f"],
            ["cents", "bigint", "f"]
        ]
    );
    let sql =
        "SELECT country, SUM(cents), COUNT(*) FROM imported.ev GROUP BY country ORDER BY country";
    assert_eq!(
        cells(&coord, sql).await.unwrap(),
        oracle(fa, fb, &sql.replace("imported.ev", "ev_b")),
        "{sql}"
    );

    // Writes on each shard through its own server, then through the
    // coordinator (postgres_fdw's INSERT, and an UPDATE it sends whole).
    a.client
        .batch_execute(
            "INSERT INTO ev VALUES (1000001, 'de', 'ios', 5), (1000002, 'it', 'web', 77);
             UPDATE ev SET cents = cents + 1 WHERE device = 'android' AND id % 7 = 0;
             DELETE FROM ev WHERE id % 11 = 0;",
        )
        .await
        .unwrap();
    b.client
        .batch_execute(
            "BEGIN; INSERT INTO ev VALUES (1000003, 'br', 'ios', 999999);
             DELETE FROM ev WHERE country = 'jp' AND device = 'web'; COMMIT;",
        )
        .await
        .unwrap();
    check_reads().await;
    coord
        .batch_execute(
            "INSERT INTO ev VALUES (1000004, 'fr', 'android', 42), (1000005, 'us', 'ios', 43);
             UPDATE ev SET cents = cents * 2 WHERE device = 'web' AND country = 'us';",
        )
        .await
        .unwrap();
    check_reads().await;
    for sql in [
        "SELECT COUNT(*) FROM ev",
        "SELECT id, cents FROM ev WHERE id > 1000000 ORDER BY id",
    ] {
        assert_eq!(
            cells(&coord, sql).await.unwrap(),
            oracle(fa, fb, sql),
            "{sql}"
        );
    }

    // A remote error inside the coordinator's transaction: postgres_fdw
    // ends the shard's transaction with `ABORT TRANSACTION`, which the
    // server takes as ROLLBACK, so the coordinator keeps its connection.
    let taken = text_rows(&coord, "SELECT id FROM ev_a ORDER BY id LIMIT 1")
        .await
        .unwrap()[0][0]
        .clone()
        .unwrap();
    coord.batch_execute("BEGIN").await.unwrap();
    let e = coord
        .batch_execute(&format!("INSERT INTO ev VALUES ({taken}, 'de', 'ios', 1)"))
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("UNIQUE"), "{e:?}");
    coord.batch_execute("ROLLBACK").await.unwrap();
    let open = text_rows(
        &coord,
        "SELECT server_name FROM postgres_fdw_get_connections() ORDER BY 1",
    )
    .await
    .unwrap();
    assert!(
        open.iter().any(|r| r[0].as_deref() == Some("shard_a")),
        "the connection to shard_a was dropped after ABORT TRANSACTION: {open:?}"
    );
    check_reads().await;
    drop(coord);
    drop(pg);
}
