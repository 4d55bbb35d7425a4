//! COPY against `pleroma serve`, through psql's `\copy` and tokio-postgres'
//! `copy_out`/`copy_in`: what goes out is what plain SQLite holds (each
//! value as a SELECT sends it), what comes in is stored as plain SQLite
//! stores the same text, the planes stay exact (plane-served answers after a
//! COPY FROM equal SQLite's), and a bad row leaves nothing of its COPY.

mod common;

use common::{connect, simple_rows as rows};

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;

use bytes::{Bytes, BytesMut};
use common::{require, sqlite, Cell};
use futures::{SinkExt, StreamExt};
use pgwire::messages::copy::CopyData;
use pgwire::messages::simplequery::Query;
use pgwire::messages::startup::Startup;
use pgwire::messages::Message;
use tokio_postgres::error::SqlState;

/// psql with the server's address; its status, standard output and error.
fn psql(port: u16, args: &[&str]) -> (bool, String, String) {
    let psql = require("psql", "apt-get install postgresql-client");
    let out = Command::new(psql)
        .args(["-X", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1"])
        .args(["-U", "tester", "-d", "ledger", "-p", &port.to_string()])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn psql_ok(port: u16, args: &[&str]) -> String {
    let (ok, stdout, stderr) = psql(port, args);
    assert!(ok && stderr.is_empty(), "psql failed: {stderr}\n{stdout}");
    stdout
}

/// COPY's CSV read back (this test's own reader): `None` for an unquoted
/// empty field.
fn parse_csv(s: &str) -> Vec<Vec<Option<String>>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let (mut quoted, mut in_quotes, mut chars) = (false, false, s.chars().peekable());
    while let Some(c) = chars.next() {
        match c {
            '"' if in_quotes && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => {
                in_quotes = !in_quotes;
                quoted = true;
            }
            ',' | '\n' if !in_quotes => {
                let f = std::mem::take(&mut field);
                row.push(if f.is_empty() && !quoted {
                    None
                } else {
                    Some(f)
                });
                quoted = false;
                if c == '\n' {
                    rows.push(std::mem::take(&mut row));
                }
            }
            c => field.push(c),
        }
    }
    rows
}

/// COPY's text format read back: `\N` is NULL, escapes undone.
fn parse_text(s: &str) -> Vec<Vec<Option<String>>> {
    s.lines()
        .map(|line| {
            line.split('\t')
                .map(|f| {
                    if f == "\\N" {
                        return None;
                    }
                    let mut out = String::new();
                    let mut chars = f.chars();
                    while let Some(c) = chars.next() {
                        if c != '\\' {
                            out.push(c);
                            continue;
                        }
                        out.push(match chars.next() {
                            Some('t') => '\t',
                            Some('n') => '\n',
                            Some('r') => '\r',
                            Some(other) => other,
                            None => break,
                        });
                    }
                    Some(out)
                })
                .collect()
        })
        .collect()
}

fn cells(rows: &[Vec<Option<String>>]) -> Vec<Vec<Cell>> {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|v| v.as_deref().map_or(Cell::Null, Cell::parse))
                .collect()
        })
        .collect()
}

fn names(row: &[Option<String>]) -> Vec<&str> {
    row.iter().map(|v| v.as_deref().unwrap()).collect()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn psql_copies_queries_and_tables_out_as_sqlite_holds_them() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let dir = f.dir.path();
    let q =
        "SELECT id, region, status, month, amount_cents FROM invoices WHERE id % 7 = 0 ORDER BY id";
    let slice = "SELECT region, SUM(amount_cents) FROM invoices WHERE status = 'paid' GROUP BY region ORDER BY region";
    let (a, b, c, d) = (
        dir.join("a.csv"),
        dir.join("kinds.txt"),
        dir.join("mixed.csv"),
        dir.join("slice.txt"),
    );
    let script = dir.join("out.sql");
    std::fs::write(
        &script,
        format!(
            "\\copy ({q}) TO '{}' WITH (FORMAT csv, HEADER)\n\
             \\copy kinds TO '{}'\n\
             \\copy mixed TO '{}' CSV HEADER\n\
             \\copy ({slice}) TO '{}'\n",
            path(&a),
            path(&b),
            path(&c),
            path(&d)
        ),
    )
    .unwrap();
    let out = psql_ok(port, &["-f", path(&script)]);
    // psql prints each COPY's tag: the number of rows, the header not counted.
    let n = |sql: &str| match &sqlite(&f.db, sql)[0][0] {
        Cell::Num(x) => *x as usize,
        c => panic!("{c:?}"),
    };
    let tags: Vec<&str> = out.lines().collect();
    assert_eq!(
        tags,
        [
            format!(
                "COPY {}",
                n("SELECT COUNT(*) FROM invoices WHERE id % 7 = 0")
            ),
            "COPY 2".to_owned(),
            "COPY 4".to_owned(),
            "COPY 4".to_owned()
        ],
        "{out}"
    );

    let got = parse_csv(&std::fs::read_to_string(&a).unwrap());
    assert_eq!(
        names(&got[0]),
        ["id", "region", "status", "month", "amount_cents"]
    );
    assert_eq!(cells(&got[1..]), sqlite(&f.db, q));
    let got = parse_text(&std::fs::read_to_string(&b).unwrap());
    assert_eq!(cells(&got), sqlite(&f.db, "SELECT i, r, t, b FROM kinds"));
    let got = parse_csv(&std::fs::read_to_string(&c).unwrap());
    assert_eq!(names(&got[0]), ["k", "v"]);
    assert_eq!(cells(&got[1..]), sqlite(&f.db, "SELECT k, v FROM mixed"));
    let got = parse_text(&std::fs::read_to_string(&d).unwrap());
    assert_eq!(cells(&got), sqlite(&f.db, slice));

    // No rows: the header alone, and the tag says 0.
    let e = dir.join("empty.csv");
    let out = psql_ok(
        port,
        &[
            "-c",
            &format!(
                "\\copy (SELECT id FROM invoices WHERE id < 0) TO '{}' CSV HEADER",
                path(&e)
            ),
        ],
    );
    assert_eq!(out, "COPY 0\n");
    assert_eq!(std::fs::read_to_string(&e).unwrap(), "id\n");
}

#[test]
fn values_go_out_escaped_exactly_as_postgresql_escapes_them() {
    let f = common::fixture();
    let conn = pleroma::rusqlite::Connection::open(&f.db).unwrap();
    conn.execute_batch(
        "CREATE TABLE odd(id INTEGER, t TEXT, r REAL, b BLOB);
         INSERT INTO odd VALUES
           (1, 'tab' || char(9) || 'here', 0.1, x'00ff'),
           (2, 'new' || char(10) || 'line' || char(13), 100.0, NULL),
           (3, 'back\\slash,comma\"quote', NULL, x''),
           (4, '', -2.5, NULL),
           (5, NULL, NULL, NULL),
           (6, '\\.', 3.0, NULL),
           (7, 'ünï|code', 1.5, x'41');",
    )
    .unwrap();
    drop(conn);
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let text = psql_ok(port, &["-q", "-c", "COPY odd TO STDOUT"]);
    assert_eq!(
        text,
        "1\ttab\\there\t0.1\t\\\\x00ff\n\
         2\tnew\\nline\\r\t100\t\\N\n\
         3\tback\\\\slash,comma\"quote\t\\N\t\\\\x\n\
         4\t\t-2.5\t\\N\n\
         5\t\\N\t\\N\t\\N\n\
         6\t\\\\.\t3\t\\N\n\
         7\tünï|code\t1.5\t\\\\x41\n"
    );
    let csv = psql_ok(port, &["-q", "-c", "COPY odd TO STDOUT (FORMAT csv)"]);
    assert_eq!(
        csv,
        "1,tab\there,0.1,\\x00ff\n\
         2,\"new\nline\r\",100,\n\
         3,\"back\\slash,comma\"\"quote\",,\\x\n\
         4,\"\",-2.5,\n\
         5,,,\n\
         6,\\.,3,\n\
         7,ünï|code,1.5,\\x41\n"
    );
    // Another delimiter and NULL string, FORCE_QUOTE; `\.` alone on a line
    // is quoted in CSV.
    let other = psql_ok(
        port,
        &[
            "-q",
            "-c",
            "COPY (SELECT t FROM odd WHERE id IN (5, 6, 7) ORDER BY id) TO STDOUT \
             (FORMAT csv, NULL 'nil', FORCE_QUOTE *)",
        ],
    );
    assert_eq!(other, "nil\n\"\\.\"\n\"ünï|code\"\n");
    let piped = psql_ok(
        port,
        &[
            "-q",
            "-c",
            "COPY (SELECT id, t FROM odd WHERE id IN (3, 7) ORDER BY id) TO STDOUT \
             WITH DELIMITER '|'",
        ],
    );
    assert_eq!(piped, "3|back\\\\slash,comma\"quote\n7|ünï\\|code\n");
    // The values read back are SQLite's.
    assert_eq!(
        cells(&parse_text(&text)),
        sqlite(&f.db, "SELECT id, t, r, b FROM odd")
    );
    assert_eq!(
        cells(&parse_csv(&csv)),
        sqlite(&f.db, "SELECT id, t, r, b FROM odd")
    );
}

#[test]
fn psql_copies_csv_and_text_in_and_the_planes_stay_exact() {
    let f = common::fixture();
    let conn = pleroma::rusqlite::Connection::open(&f.db).unwrap();
    conn.execute_batch("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT, n INTEGER);")
        .unwrap();
    drop(conn);
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let dir = f.dir.path();

    // 600 invoices in CSV (CRLF, quoted fields, a new region), into the
    // planed table.
    let mut csv = String::from("region,status,month,amount_cents\r\n");
    let regions = ["north", "\"south\"", "east", "\"we\"\"st\"", "central"];
    for i in 0..600 {
        csv.push_str(&format!(
            "{},{},{},{}\r\n",
            regions[i % 5],
            ["paid", "open", "void"][i % 3],
            202401 + i % 12,
            (i * 7907) % 90_000
        ));
    }
    let a = dir.join("in.csv");
    std::fs::write(&a, csv).unwrap();
    let before = sqlite(&f.db, "SELECT COUNT(*) FROM invoices");
    let out = psql_ok(
        port,
        &[
            "-c",
            &format!(
                "\\copy invoices(region, status, month, amount_cents) FROM '{}' WITH (FORMAT csv, HEADER)",
                path(&a)
            ),
        ],
    );
    assert_eq!(out, "COPY 600\n");
    let after = sqlite(&f.db, "SELECT COUNT(*) FROM invoices");
    assert_eq!(after, [[Cell::Num(2600.0)]], "{before:?}");
    // Stored as plain SQLite stores the text: month and amount are INTEGER.
    assert_eq!(
        sqlite(
            &f.db,
            "SELECT typeof(month), typeof(amount_cents), COUNT(*) FROM invoices WHERE id > 2000 GROUP BY 1, 2"
        ),
        [[
            Cell::Text("integer".into()),
            Cell::Text("integer".into()),
            Cell::Num(600.0)
        ]]
    );
    assert_eq!(
        sqlite(
            &f.db,
            "SELECT COUNT(*) FROM invoices WHERE region = 'we\"st'"
        ),
        [[Cell::Num(120.0)]]
    );

    // The plane answers (forced: an error if it cannot) what SQLite answers.
    let plane = [
        "SELECT COUNT(*) FROM invoices",
        "SELECT region, SUM(amount_cents) FROM invoices WHERE status = 'paid' GROUP BY region ORDER BY region",
        "SELECT month, COUNT(*), SUM(amount_cents) FROM invoices WHERE region IN ('central', 'north') GROUP BY month ORDER BY month",
    ];
    let mut script = String::from("PRAGMA pleroma_route = plane;\n\\echo ---\n");
    for q in plane {
        script.push_str(q);
        script.push_str(";\n\\echo ---\n");
    }
    let s = dir.join("plane.sql");
    std::fs::write(&s, script).unwrap();
    let out = psql_ok(port, &["-q", "-A", "-t", "-F", "|", "-f", path(&s)]);
    let blocks: Vec<&str> = out.split("---\n").skip(1).collect();
    assert_eq!(blocks.len(), plane.len() + 1, "{out}");
    for (q, block) in plane.iter().zip(&blocks) {
        let got: Vec<Vec<Cell>> = block
            .lines()
            .map(|l| l.split('|').map(Cell::parse).collect())
            .collect();
        assert_eq!(got, sqlite(&f.db, q), "{q}");
    }

    // Text format: escapes, \N, a column list, '007' into INTEGER.
    let b = dir.join("notes.txt");
    std::fs::write(
        &b,
        "1\tone\\ttab\t007\n2\t\\N\t\\N\n3\tback\\\\slash \\x41\\102\tx7\n4\tmulti\\nline\t-1\n",
    )
    .unwrap();
    let out = psql_ok(port, &["-c", &format!("\\copy notes FROM '{}'", path(&b))]);
    assert_eq!(out, "COPY 4\n");
    let c = pleroma::rusqlite::Connection::open(&f.db).unwrap();
    let got: Vec<(i64, Option<String>, Option<String>)> = c
        .prepare("SELECT id, body, typeof(n) || ':' || n FROM notes ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        got,
        [
            (1, Some("one\ttab".into()), Some("integer:7".into())),
            (2, None, None),
            (3, Some("back\\slash AB".into()), Some("text:x7".into())),
            (4, Some("multi\nline".into()), Some("integer:-1".into())),
        ]
    );
}

#[test]
fn a_script_in_pg_dumps_form_copies_its_inline_data() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let port = server.addr().port();
    // What pg_dump writes for a table's rows: COPY … FROM stdin, the rows
    // in the text format, `\.`, and the script goes on.
    let script = f.dir.path().join("dump.sql");
    std::fs::write(
        &script,
        "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT);\n\
         COPY public.notes (id, body) FROM stdin;\n\
         1\tfirst\\nline\n\
         2\t\\N\n\
         3\ttab\\there\n\
         \\.\n\
         SELECT COUNT(*) FROM notes;\n",
    )
    .unwrap();
    let out = psql_ok(port, &["-q", "-A", "-t", "-f", path(&script)]);
    assert_eq!(out, "3\n");
    assert_eq!(
        sqlite(&f.db, "SELECT id, body FROM notes ORDER BY id"),
        [
            vec![Cell::Num(1.0), Cell::Text("first\nline".into())],
            vec![Cell::Num(2.0), Cell::Null],
            vec![Cell::Num(3.0), Cell::Text("tab\there".into())],
        ]
    );
}

#[test]
fn a_bad_row_rolls_the_whole_copy_back_and_names_its_line() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let dir = f.dir.path();
    let count = "SELECT COUNT(*), SUM(amount_cents) FROM invoices";
    let before = sqlite(&f.db, count);
    let cases: &[(&str, &str, &str)] = &[
        (
            "north,paid,202401,1\nsouth,open,202402,2\neast,void,202403,3,4\n",
            "extra data after last expected column",
            "line 3",
        ),
        (
            "north,paid,202401,1\nsouth,open,202402\n",
            "missing data for column \"amount_cents\"",
            "line 2",
        ),
        (
            "north,paid,202401,1\nsouth,open,202402,2\nwest,paid,202403,3\n,open,202404,4\n",
            "NOT NULL constraint failed: invoices.region",
            "line 4",
        ),
        (
            "north,paid,202401,1\n\"unterminated,open,202402,2\n",
            "unterminated CSV quoted field",
            "line 2",
        ),
    ];
    for (i, (data, says, line)) in cases.iter().enumerate() {
        let file = dir.join(format!("bad{i}.csv"));
        std::fs::write(&file, data).unwrap();
        let (ok, _, stderr) = psql(
            port,
            &[
                "-c",
                &format!(
                    "\\copy invoices(region, status, month, amount_cents) FROM '{}' CSV",
                    path(&file)
                ),
            ],
        );
        assert!(!ok, "{data}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(
            stderr.contains(&format!("CONTEXT:  COPY invoices, {line}")),
            "{stderr}"
        );
        assert_eq!(sqlite(&f.db, count), before, "nothing of {data:?} stayed");
    }
    // Text: invalid UTF-8 from an escape.
    let file = dir.join("bad.txt");
    std::fs::write(&file, "north\tpaid\t202401\t1\nsouth\t\\377\t202401\t1\n").unwrap();
    let (ok, _, stderr) = psql(
        port,
        &[
            "-c",
            &format!(
                "\\copy invoices(region, status, month, amount_cents) FROM '{}'",
                path(&file)
            ),
        ],
    );
    assert!(!ok);
    assert!(
        stderr.contains("invalid byte sequence for encoding \"UTF8\": 0xff"),
        "{stderr}"
    );
    assert_eq!(sqlite(&f.db, count), before);
    // The session that saw the errors still copies.
    let good = dir.join("good.csv");
    std::fs::write(&good, "north,paid,202401,11\n").unwrap();
    let out = psql_ok(
        port,
        &[
            "-c",
            &format!(
                "\\copy invoices(region, status, month, amount_cents) FROM '{}' CSV",
                path(&good)
            ),
        ],
    );
    assert_eq!(out, "COPY 1\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_copies_out_and_in_across_split_messages() {
    let f = common::fixture();
    let conn = pleroma::rusqlite::Connection::open(&f.db).unwrap();
    conn.execute_batch("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT, r REAL);")
        .unwrap();
    drop(conn);
    let server = common::serve(&f.db);
    let client = connect(server.addr().port()).await;

    let q = "SELECT id, region, amount_cents FROM invoices WHERE id % 11 = 0 ORDER BY id";
    let stream = client
        .copy_out(&format!("COPY ({q}) TO STDOUT (FORMAT csv)"))
        .await
        .unwrap();
    let chunks: Vec<Bytes> = stream.map(Result::unwrap).collect().await;
    let text = String::from_utf8(chunks.concat()).unwrap();
    assert_eq!(cells(&parse_csv(&text)), sqlite(&f.db, q));

    // Text rows with CRLF line ends, sent one byte per CopyData message: a
    // message boundary may fall inside an escape or a line end.
    let data: &[u8] = b"1\ta\\tb\t1.5\r\n2\t\\N\t\\N\r\n3\t\\\\\\x41\t-0.25\r\n\\.\r\n";
    let sink = client
        .copy_in("COPY notes (id, body, r) FROM STDIN")
        .await
        .unwrap();
    tokio::pin!(sink);
    for b in data {
        sink.send(Bytes::copy_from_slice(&[*b])).await.unwrap();
    }
    assert_eq!(sink.finish().await.unwrap(), 3);
    let q = "SELECT id, body, r FROM notes ORDER BY id";
    assert_eq!(
        sqlite(&f.db, q),
        [
            vec![Cell::Num(1.0), Cell::Text("a\tb".into()), Cell::Num(1.5)],
            vec![Cell::Num(2.0), Cell::Null, Cell::Null],
            vec![Cell::Num(3.0), Cell::Text("\\A".into()), Cell::Num(-0.25)],
        ]
    );
    assert_eq!(rows(&client, q).await, sqlite(&f.db, q));

    // What goes out comes back in: a round trip through COPY leaves the
    // same rows (CSV, with a header).
    let stream = client
        .copy_out("COPY notes TO STDOUT (FORMAT csv, HEADER)")
        .await
        .unwrap();
    let out: Vec<Bytes> = stream.map(Result::unwrap).collect().await;
    client
        .batch_execute("CREATE TABLE notes2(id INTEGER PRIMARY KEY, body TEXT, r REAL)")
        .await
        .unwrap();
    let sink = client
        .copy_in("COPY notes2 FROM STDIN (FORMAT csv, HEADER match)")
        .await
        .unwrap();
    tokio::pin!(sink);
    for chunk in out {
        sink.send(chunk).await.unwrap();
    }
    assert_eq!(sink.finish().await.unwrap(), 3);
    assert_eq!(
        sqlite(&f.db, "SELECT id, body, r FROM notes2 ORDER BY id"),
        sqlite(&f.db, q)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_in_a_transaction_is_all_or_nothing_and_an_error_aborts_it() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let client = connect(server.addr().port()).await;
    let count = "SELECT COUNT(*), SUM(amount_cents) FROM invoices";
    let before = sqlite(&f.db, count);
    let copy = "COPY invoices(region, status, month, amount_cents) FROM STDIN (FORMAT csv)";

    // Rolled back with its transaction.
    client.batch_execute("BEGIN").await.unwrap();
    let sink = client.copy_in(copy).await.unwrap();
    tokio::pin!(sink);
    sink.send(Bytes::from_static(b"north,paid,202401,7\n"))
        .await
        .unwrap();
    assert_eq!(sink.finish().await.unwrap(), 1);
    let inside = rows(&client, count).await;
    assert_ne!(inside, before);
    client.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(sqlite(&f.db, count), before);

    // A bad row inside a transaction: the COPY's rows are gone, the
    // transaction is aborted (25P02) and COMMIT rolls back the insert before.
    client
        .batch_execute(
            "BEGIN; INSERT INTO invoices(region, status, month, amount_cents) \
             VALUES ('east', 'paid', 202405, 3)",
        )
        .await
        .unwrap();
    let sink = client.copy_in(copy).await.unwrap();
    tokio::pin!(sink);
    sink.send(Bytes::from_static(b"north,paid,202401,7\nsouth,paid\n"))
        .await
        .unwrap();
    let err = sink.finish().await.unwrap_err();
    let db = err.as_db_error().expect("a server error");
    assert_eq!(db.code(), &SqlState::BAD_COPY_FILE_FORMAT, "{db:?}");
    assert_eq!(db.message(), "missing data for column \"month\"");
    assert_eq!(db.where_(), Some("COPY invoices, line 2"));
    let err = client.simple_query("SELECT 1").await.unwrap_err();
    assert_eq!(err.code(), Some(&SqlState::IN_FAILED_SQL_TRANSACTION));
    client.batch_execute("COMMIT").await.unwrap();
    assert_eq!(sqlite(&f.db, count), before);

    // Committed with its transaction.
    client.batch_execute("BEGIN").await.unwrap();
    let sink = client.copy_in(copy).await.unwrap();
    tokio::pin!(sink);
    sink.send(Bytes::from_static(
        b"north,paid,202401,7\nwest,open,202402,8\n",
    ))
    .await
    .unwrap();
    assert_eq!(sink.finish().await.unwrap(), 2);
    client.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        sqlite(&f.db, count),
        [[Cell::Num(2002.0), {
            let Cell::Num(s) = before[0][1] else { panic!() };
            Cell::Num(s + 15.0)
        }]]
    );
    assert_eq!(rows(&client, count).await, sqlite(&f.db, count));

    // A client that gives up (CopyFail, tokio-postgres' dropped sink)
    // leaves nothing, and the session goes on.
    let after = sqlite(&f.db, count);
    {
        let sink = client.copy_in(copy).await.unwrap();
        tokio::pin!(sink);
        sink.send(Bytes::from_static(b"north,paid,202401,9\n"))
            .await
            .unwrap();
    }
    assert_eq!(rows(&client, count).await, after);
    assert_eq!(sqlite(&f.db, count), after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_forms_that_are_not_supported_are_declined_by_name() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let client = connect(server.addr().port()).await;
    let mixed = sqlite(&f.db, "SELECT k, v FROM mixed ORDER BY k");
    for (sql, code, says) in [
        (
            "COPY invoices TO '/tmp/invoices.csv'",
            "0A000",
            "file or program",
        ),
        (
            "COPY invoices FROM PROGRAM 'cat'",
            "0A000",
            "file or program",
        ),
        ("COPY invoices TO STDOUT (FORMAT binary)", "0A000", "binary"),
        ("COPY invoices FROM STDIN BINARY", "0A000", "binary"),
        ("COPY invoices FROM STDIN (FREEZE)", "0A000", "FREEZE"),
        (
            "COPY invoices TO STDOUT; SELECT 1",
            "0A000",
            "other statements",
        ),
        ("COPY nope FROM STDIN", "42P01", "no such table: nope"),
        ("COPY invoices(nope) TO STDOUT", "42703", "nope"),
        ("COPY invoices TO STDOUT (FORMAT xml)", "22023", "xml"),
        (
            "COPY (INSERT INTO mixed VALUES (9, 9)) TO STDOUT",
            "0A000",
            "returns rows",
        ),
    ] {
        let err = client.simple_query(sql).await.unwrap_err();
        let db = err.as_db_error().unwrap_or_else(|| panic!("{sql}: {err}"));
        assert_eq!(db.code().code(), code, "{sql}: {}", db.message());
        assert!(db.message().contains(says), "{sql}: {}", db.message());
    }
    // The extended protocol (tokio-postgres' copy_out and copy_in) gets
    // the same errors, and the session goes on.
    let err = client
        .copy_out("COPY invoices TO STDOUT (FORMAT binary)")
        .await
        .err()
        .expect("binary is declined");
    assert_eq!(
        err.code(),
        Some(&SqlState::FEATURE_NOT_SUPPORTED),
        "{err:?}"
    );
    // On a connection of its own: a copy_in refused before copy mode makes
    // tokio-postgres send a second Sync, whose ReadyForQuery (PostgreSQL
    // sends one too) it then takes for the next request's
    // (rust-postgres/rust-postgres#1337).
    let other = connect(server.addr().port()).await;
    let err = other
        .copy_in::<_, Bytes>("COPY nope FROM STDIN")
        .await
        .err()
        .expect("no such table");
    assert_eq!(err.code(), Some(&SqlState::UNDEFINED_TABLE), "{err:?}");
    // Nothing ran: the INSERT inside the declined COPY did not.
    assert_eq!(sqlite(&f.db, "SELECT k, v FROM mixed ORDER BY k"), mixed);
    assert_eq!(
        rows(&client, "SELECT k, v FROM mixed ORDER BY k").await,
        mixed
    );
    // A value a SELECT declines (a BLOB among other classes) is declined
    // by COPY too, with the same code.
    let q = "SELECT b FROM kinds UNION ALL SELECT 'text'";
    let select = client.simple_query(q).await.unwrap_err();
    let copy = client
        .simple_query(&format!("COPY ({q}) TO STDOUT"))
        .await
        .unwrap_err();
    assert_eq!(copy.code(), select.code());
    assert_eq!(copy.code(), Some(&SqlState::DATATYPE_MISMATCH));
}

fn send(s: &mut TcpStream, m: &impl Message) {
    let mut buf = BytesMut::new();
    m.encode(&mut buf).unwrap();
    s.write_all(&buf).unwrap();
}

/// The backend's messages up to and with the first of type `until`.
fn read_until(s: &mut TcpStream, until: u8) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        let mut head = [0u8; 5];
        s.read_exact(&mut head).unwrap();
        let len = i32::from_be_bytes(head[1..5].try_into().unwrap()) as usize;
        let mut body = vec![0u8; len - 4];
        s.read_exact(&mut body).unwrap();
        out.push((head[0], body));
        if head[0] == until {
            return out;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_the_client_leaves_unfinished_is_rolled_back() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let count = "SELECT COUNT(*), SUM(amount_cents) FROM invoices";
    let before = sqlite(&f.db, count);
    // Byte by byte (pgwire's messages): a Query in the middle of COPY FROM.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut startup = Startup::new();
    startup.parameters.insert("user".into(), "t".into());
    startup
        .parameters
        .insert("database".into(), "ledger".into());
    send(&mut s, &startup);
    read_until(&mut s, b'Z');
    send(
        &mut s,
        &Query::new("COPY invoices(region, status, month, amount_cents) FROM STDIN".into()),
    );
    read_until(&mut s, b'G');
    send(
        &mut s,
        &CopyData::new(Bytes::from_static(b"north\tpaid\t202401\t1\n")),
    );
    send(&mut s, &Query::new("SELECT 1".into()));
    let msgs = read_until(&mut s, b'Z');
    assert!(msgs.iter().any(|m| m.0 == b'E'), "{msgs:?}");
    // The next statement finds the COPY rolled back, and other sessions
    // can write (the turn to write was given back).
    send(&mut s, &Query::new(count.into()));
    let msgs = read_until(&mut s, b'Z');
    assert!(msgs.iter().all(|m| m.0 != b'E'), "{msgs:?}");
    assert_eq!(sqlite(&f.db, count), before);
    let other = connect(port).await;
    other
        .batch_execute(
            "INSERT INTO invoices(region, status, month, amount_cents) VALUES ('east', 'paid', 202401, 2)",
        )
        .await
        .unwrap();
    assert_eq!(rows(&other, count).await, sqlite(&f.db, count));
}
