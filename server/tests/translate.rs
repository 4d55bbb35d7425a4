//! The PostgreSQL forms `pleroma serve` rewrites into SQLite's
//! (`docs/server.md`, "PostgreSQL forms"), through a real client
//! (tokio-postgres): each form's value, its errors with PostgreSQL's
//! SQLSTATE, and a `date_trunc` grouping served by a plane with the same
//! expression dimension, equal to plain SQLite's answer to the SQLite form.

mod common;

use common::{sqlite, Cell};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

async fn connect(port: u16) -> Client {
    let (client, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=me dbname=ledger"),
        NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    client
}

/// The rows of a simple query, as text (NULL as `None`).
async fn rows(client: &Client, sql: &str) -> Vec<Vec<Option<String>>> {
    client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect()
}

async fn one(client: &Client, sql: &str) -> Option<String> {
    rows(client, sql).await[0][0].clone()
}

async fn sqlstate(client: &Client, sql: &str) -> (String, String) {
    let e = client
        .simple_query(sql)
        .await
        .err()
        .unwrap_or_else(|| panic!("{sql}: no error"));
    let db = e.as_db_error().unwrap_or_else(|| panic!("{sql}: {e}"));
    (db.code().code().to_owned(), db.message().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_form_gives_postgresqls_value() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let c = connect(server.addr().port()).await;
    let ts = "'2024-05-17 13:45:10'";
    let cases: Vec<(String, Option<&str>)> = vec![
        // Casts, as PostgreSQL converts.
        ("SELECT '42'::int + 1".into(), Some("43")),
        ("SELECT 2.5::int, 3.5::integer".into(), Some("3")),
        ("SELECT CAST(2.5 AS REAL)::float8::int".into(), Some("2")),
        ("SELECT '2.5'::numeric::int, 2".into(), Some("3")),
        ("SELECT 10::numeric / 4".into(), Some("2.5")),
        (
            "SELECT 9223372036854775808::text".into(),
            Some("9223372036854775808"),
        ),
        ("SELECT ' 7 '::bigint".into(), Some("7")),
        ("SELECT 1.0::text".into(), Some("1.0")),
        ("SELECT CAST(1 AS REAL)::text".into(), Some("1")),
        ("SELECT 7::float8 / 2".into(), Some("3.5")),
        ("SELECT '12'::numeric".into(), Some("12")),
        ("SELECT 'yes'::bool".into(), Some("1")),
        ("SELECT NULL::int".into(), None),
        (
            "SELECT '2024-02-29T10:00:01.50Z'::timestamp".into(),
            Some("2024-02-29 10:00:01.500"),
        ),
        ("SELECT '2024-02-29 23:59'::date".into(), Some("2024-02-29")),
        (
            "SELECT SUM(amount_cents)::bigint FROM invoices WHERE month = 202401".into(),
            None,
        ),
        // Dates over ISO-8601 text.
        (
            format!("SELECT date_trunc('year', {ts})"),
            Some("2024-01-01 00:00:00"),
        ),
        (
            format!("SELECT date_trunc('quarter', {ts})"),
            Some("2024-04-01 00:00:00"),
        ),
        (
            format!("SELECT date_trunc('month', {ts})"),
            Some("2024-05-01 00:00:00"),
        ),
        (
            format!("SELECT date_trunc('week', {ts})"),
            Some("2024-05-13 00:00:00"),
        ),
        (
            format!("SELECT DATE_TRUNC('day', {ts})"),
            Some("2024-05-17 00:00:00"),
        ),
        (
            format!("SELECT date_trunc('hour', {ts})"),
            Some("2024-05-17 13:00:00"),
        ),
        (
            format!("SELECT date_trunc('minute', {ts})"),
            Some("2024-05-17 13:45:00"),
        ),
        ("SELECT date_trunc('quarter', NULL)".into(), None),
        (format!("SELECT EXTRACT(year FROM {ts})"), Some("2024")),
        (format!("SELECT EXTRACT(QUARTER FROM {ts})"), Some("2")),
        (format!("SELECT extract(dow from {ts})"), Some("5")),
        (format!("SELECT extract(doy from {ts})"), Some("138")),
        (format!("SELECT extract(week from {ts})"), Some("20")),
        (
            format!("SELECT extract(epoch from {ts})"),
            Some("1715953510"),
        ),
        (
            format!("SELECT {ts} + INTERVAL '1 month 2 days'"),
            Some("2024-06-19 13:45:10"),
        ),
        (
            format!("SELECT {ts} - interval '2 weeks'"),
            Some("2024-05-03 13:45:10"),
        ),
        // PostgreSQL's month arithmetic: to the end of a shorter month.
        (
            "SELECT '2024-01-31 08:00:00' + INTERVAL '1 month'".into(),
            Some("2024-02-29 08:00:00"),
        ),
        (
            "SELECT '2024-12-31 23:59:59.999'::timestamp + INTERVAL '1 second'".into(),
            Some("2025-01-01 00:00:00.999"),
        ),
        (
            "SELECT CURRENT_DATE - 7 = date('now', '-7 days')".into(),
            Some("1"),
        ),
        (
            "SELECT now() - INTERVAL '1 day' = datetime('now', '-1 day')".into(),
            Some("1"),
        ),
        ("SELECT CURRENT_DATE = date('now')".into(), Some("1")),
        // ILIKE, with PostgreSQL's backslash escape.
        (
            "SELECT COUNT(*) FROM invoices WHERE region ILIKE 'NO%'".into(),
            Some("500"),
        ),
        (
            "SELECT COUNT(*) FROM invoices WHERE region NOT ILIKE '%' || 'TH'".into(),
            Some("1000"),
        ),
        (
            "SELECT 'a_b' ILIKE 'A\\_B', 'axb' ILIKE 'a\\_b'".into(),
            Some("1"),
        ),
        ("SELECT 'axb' ILIKE 'a\\_b'".into(), Some("0")),
        // SQLite's own already.
        (
            "SELECT COUNT(*) FROM invoices WHERE (status = 'paid') IS TRUE".into(),
            None,
        ),
        (
            "SELECT COUNT(*) FILTER (WHERE region = 'north') FROM invoices WHERE TRUE".into(),
            Some("500"),
        ),
        (
            "SELECT COUNT(*) FROM (SELECT id FROM invoices LIMIT ALL OFFSET 1990)".into(),
            Some("10"),
        ),
    ];
    for (sql, want) in cases {
        let got = one(&c, &sql).await;
        match want {
            Some(w) => assert_eq!(got.as_deref(), Some(w), "{sql}"),
            // No literal answer: SQLite's own answer to the SQLite form.
            None if got.is_none() => {}
            None => {
                let oracle = sql.replace("::bigint", "").replace(" IS TRUE", " IS 1");
                assert_eq!(
                    Cell::parse(got.as_deref().unwrap()),
                    sqlite(&f.db, &oracle)[0][0],
                    "{sql}"
                );
            }
        }
    }
    // The untranslated statement text is untouched inside literals.
    assert_eq!(
        one(&c, "SELECT 'a::int ILIKE now()'").await.as_deref(),
        Some("a::int ILIKE now()")
    );
    // A rewritten form alone in the select list has PostgreSQL's name.
    let st = c
        .prepare("SELECT n::int, date_trunc('day', ts), extract(year FROM ts) AS y FROM (SELECT 1 AS n, '2024-01-01' AS ts)")
        .await
        .unwrap();
    let names: Vec<&str> = st.columns().iter().map(|c| c.name()).collect();
    assert_eq!(names, ["n", "date_trunc", "y"]);
    // A parameter cast, over the extended protocol.
    let r = c.query("SELECT $1::int8 * 2", &[&"21"]).await.unwrap();
    assert_eq!(r[0].get::<_, String>(0), "42");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_translated_or_not_convertible_is_postgresqls_error() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let c = connect(server.addr().port()).await;
    for (sql, code, says) in [
        (
            "SELECT '3.7'::int",
            "22P02",
            "invalid input syntax for type integer: \"3.7\"",
        ),
        ("SELECT 40000::smallint", "22003", "smallint out of range"),
        (
            "SELECT 'maybe'::boolean",
            "22P02",
            "invalid input syntax for type boolean",
        ),
        ("SELECT '2023-02-29'::date", "22008", "out of range"),
        // A decimal literal is numeric to PostgreSQL; a REAL is float8.
        (
            "SELECT 1.5::bool",
            "42846",
            "cannot cast type numeric to boolean",
        ),
        (
            "SELECT CAST(1.5 AS REAL)::bool",
            "42846",
            "cannot cast type double precision to boolean",
        ),
        ("SELECT 'x'::regclass", "0A000", "::regclass"),
        ("SELECT 'abc'::varchar(2)", "0A000", "type modifier"),
        (
            "SELECT date_trunc('decade', '2024-01-01')",
            "0A000",
            "date_trunc('decade'",
        ),
        (
            "SELECT EXTRACT(second FROM '2024-01-01')",
            "0A000",
            "EXTRACT(second",
        ),
        ("SELECT 1 - 2 + INTERVAL '1 day'", "0A000", "INTERVAL"),
        ("SELECT CAST(2.5 AS REAL)::int", "0A000", "cannot tell"),
        ("SELECT 'NaN'::float8", "0A000", "NaN"),
        ("SELECT '1e400'::float8", "22003", "out of range"),
        (
            "SELECT '9999-12-31'::timestamp + INTERVAL '1 day'",
            "22008",
            "out of range",
        ),
        (
            "SELECT 'abc'::date",
            "22P02",
            "invalid input syntax for type date",
        ),
    ] {
        let (got, message) = sqlstate(&c, sql).await;
        assert_eq!(got, code, "{sql}: {message}");
        assert!(message.contains(says), "{sql}: {message}");
    }
    // The session goes on.
    assert_eq!(one(&c, "SELECT 1::int").await.as_deref(), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_date_trunc_grouping_is_served_by_a_plane_of_the_same_expression() {
    let f = common::fixture();
    {
        let mut conn = pleroma::Connection::open(&f.db).unwrap();
        conn.execute_batch(
            "CREATE TABLE ev(id INTEGER PRIMARY KEY, ts TEXT, cents INTEGER);
             WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999)
             INSERT INTO ev(ts, cents)
             SELECT datetime(1700000000 + i * 86400 * 3 + i * 3607, 'unixepoch'), i * 37 % 1000 FROM n;
             INSERT INTO ev(ts, cents) VALUES (NULL, 5), ('not a date', 7);",
        )
        .unwrap();
        conn.execute(
            "PRAGMA pleroma_attach('ev', 'strftime(''%Y-%m-01 00:00:00'', ts) AS month', 'cents')",
            &[],
        )
        .unwrap();
    }
    let server = common::serve(&f.db);
    let c = connect(server.addr().port()).await;
    let pg = "SELECT date_trunc('month', ts) AS m, COUNT(*), SUM(cents) FROM ev \
              GROUP BY date_trunc('month', ts) ORDER BY m";
    let lite = "SELECT strftime('%Y-%m-01 00:00:00', ts) AS m, COUNT(*), SUM(cents) FROM ev \
                GROUP BY strftime('%Y-%m-01 00:00:00', ts) ORDER BY m";
    let explain = rows(
        &c,
        &format!("PRAGMA pleroma_explain('{}')", lite.replace('\'', "''")),
    )
    .await;
    assert_eq!(explain[0][0].as_deref(), Some("plane"), "{explain:?}");
    let got: Vec<Vec<Cell>> = rows(&c, pg)
        .await
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|v| v.map_or(Cell::Null, |s| Cell::parse(&s)))
                .collect()
        })
        .collect();
    assert!(got.len() > 30, "{got:?}");
    assert_eq!(got, sqlite(&f.db, lite));
}

/// What an outside attack found (2026-12-04), each against PostgreSQL's
/// answer: text naming the catalog inside a string or a comment is no
/// catalog query; LIKE is case-sensitive and escapes with a backslash;
/// an array literal's escapes; the ends of a transaction PostgreSQL does
/// not take are refused, a second BEGIN keeps the transaction, and READ
/// ONLY however spelled is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_semantics_found_from_outside() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let c = connect(server.addr().port()).await;
    c.batch_execute(
        "CREATE TABLE tables(a TEXT);
         INSERT INTO tables VALUES ('Abc'), ('abc'), ('a_c'), ('NULL'), ('a ');",
    )
    .await
    .unwrap();
    let count = |sql: &'static str| {
        let c = &c;
        async move { one(c, sql).await }
    };
    // The catalog's names inside strings and comments change nothing.
    assert_eq!(
        count("SELECT count(*) FROM tables /* pg_catalog. */ WHERE 'information_schema.x' <> ''")
            .await
            .as_deref(),
        Some("5")
    );
    assert_eq!(
        count("SELECT count(*) FROM tables WHERE a = 'x'::pg_catalog.text")
            .await
            .as_deref(),
        Some("0")
    );
    // LIKE: case-sensitive, `\` escapes, `_` one character.
    for (sql, want) in [
        ("SELECT count(*) FROM tables WHERE a LIKE 'a%'", "3"),
        ("SELECT count(*) FROM tables WHERE a LIKE 'A%'", "1"),
        (r"SELECT count(*) FROM tables WHERE a LIKE 'a\_c'", "1"),
        ("SELECT count(*) FROM tables WHERE a NOT LIKE '_bc'", "3"),
        ("SELECT count(*) FROM tables WHERE a ILIKE 'A%'", "4"),
    ] {
        assert_eq!(one(&c, sql).await.as_deref(), Some(want), "{sql}");
    }
    let r = c
        .query(
            "SELECT count(*)::text FROM tables WHERE a LIKE $1",
            &[&"a%"],
        )
        .await
        .unwrap();
    assert_eq!(r[0].get::<_, String>(0), "3");
    // An array literal's escapes: `\NULL` is the text NULL, `a\ ` keeps its blank.
    assert_eq!(
        count(r"SELECT count(*) FROM tables WHERE a = ANY ('{\NULL,a\ }'::text[])")
            .await
            .as_deref(),
        Some("2")
    );
    // The ends of a transaction.
    for (sql, code) in [
        ("COMMIT AND CHAIN", "0A000"),
        ("ROLLBACK PREPARED 'x'", "0A000"),
        ("COMMIT TRANSACTION WORK", "42601"),
        ("ABORT x", "42601"),
        ("BEGIN ISOLATION LEVEL SERIALIZABLE, READ ONLY", "0A000"),
        ("SET TRANSACTION READ ONLY", "0A000"),
        ("SET default_transaction_read_only = on", "0A000"),
    ] {
        assert_eq!(sqlstate(&c, sql).await.0, code, "{sql}");
    }
    c.batch_execute("BEGIN; INSERT INTO tables VALUES ('kept'); BEGIN; COMMIT")
        .await
        .unwrap();
    assert_eq!(
        count("SELECT count(*) FROM tables").await.as_deref(),
        Some("6")
    );
}
