//! Cancel requests against `pleroma serve`: tokio-postgres' `cancel_query`,
//! psql's Ctrl-C (SIGINT), a cancel with a wrong key, and one for an idle
//! session. A cancelled statement ends with `57014` "canceling statement due
//! to user request" and the session answers on, as plain SQLite answers the
//! same file; inside a transaction the error aborts it (`25P02`).
//!
//! No sleeping on luck: the statement cancelled counts to 1e9 (minutes of
//! work), and the cancel is sent again until it returns; where the test must
//! know the statement started, the same query message first inserts a
//! marker row, which the test waits for through plain SQLite.

mod common;

use common::{connect, simple_rows as rows};

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use common::{require, sqlite, Cell};
use pgwire::messages::cancel::CancelRequest;
use pgwire::messages::simplequery::Query;
use pgwire::messages::startup::{SecretKey, Startup};
use pgwire::messages::Message;
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

/// Minutes of work for SQLite: ended only by a cancel.
const ENDLESS: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
                       WHERE x < 1000000000) SELECT count(*) FROM c";

const MESSAGE: &str = "canceling statement due to user request";

/// Waits (through plain SQLite) until the marker row `id` is committed.
fn wait_for_marker(db: &Path, id: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let q = format!("SELECT COUNT(*) FROM marker WHERE id = {id}");
    while sqlite(db, &q) != [[Cell::Num(1.0)]] {
        assert!(Instant::now() < deadline, "marker {id} never committed");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn with_marker(db: &Path) {
    let c = pleroma::rusqlite::Connection::open(db).unwrap();
    c.execute_batch("CREATE TABLE marker(id INTEGER)").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_cancel_ends_the_running_statement_and_the_session_goes_on() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let client = connect(server.addr().port()).await;
    let token = client.cancel_token();
    let running = client.simple_query(ENDLESS);
    tokio::pin!(running);
    let err = loop {
        tokio::select! {
            r = &mut running => break r.unwrap_err(),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {
                token.cancel_query(NoTls).await.unwrap();
            }
        }
    };
    let db = err.as_db_error().expect("a server error");
    assert_eq!(db.code(), &SqlState::QUERY_CANCELED, "{db:?}");
    assert_eq!(db.message(), MESSAGE);

    // The session answers on, as SQLite answers.
    let q = "SELECT COUNT(*), SUM(amount_cents) FROM invoices";
    assert_eq!(rows(&client, q).await, sqlite(&f.db, q));
    // The extended protocol is cancelled the same way.
    let prepared = client.prepare(ENDLESS).await.unwrap();
    let running = client.query(&prepared, &[]);
    tokio::pin!(running);
    let err = loop {
        tokio::select! {
            r = &mut running => break r.unwrap_err(),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {
                token.cancel_query(NoTls).await.unwrap();
            }
        }
    };
    assert_eq!(err.code(), Some(&SqlState::QUERY_CANCELED), "{err:?}");
    assert_eq!(rows(&client, q).await, sqlite(&f.db, q));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_ends_a_copy_out_of_a_running_query() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let client = connect(server.addr().port()).await;
    let token = client.cancel_token();
    let copy = format!("COPY ({ENDLESS}) TO STDOUT");
    let running = client.copy_out(&copy);
    tokio::pin!(running);
    let err = loop {
        tokio::select! {
            r = &mut running => break r.err().expect("the copy was cancelled"),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {
                token.cancel_query(NoTls).await.unwrap();
            }
        }
    };
    assert_eq!(err.code(), Some(&SqlState::QUERY_CANCELED), "{err:?}");
    let q = "SELECT COUNT(*) FROM invoices";
    assert_eq!(rows(&client, q).await, sqlite(&f.db, q));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_inside_a_transaction_aborts_it_like_any_error() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let client = connect(server.addr().port()).await;
    let token = client.cancel_token();
    let before = sqlite(&f.db, "SELECT COUNT(*) FROM invoices");
    client
        .batch_execute(
            "BEGIN; INSERT INTO invoices(region, status, month, amount_cents) \
             VALUES ('north', 'paid', 202401, 5)",
        )
        .await
        .unwrap();
    let running = client.simple_query(ENDLESS);
    tokio::pin!(running);
    let err = loop {
        tokio::select! {
            r = &mut running => break r.unwrap_err(),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {
                token.cancel_query(NoTls).await.unwrap();
            }
        }
    };
    assert_eq!(err.code(), Some(&SqlState::QUERY_CANCELED), "{err:?}");
    let err = client.simple_query("SELECT 1").await.unwrap_err();
    assert_eq!(err.code(), Some(&SqlState::IN_FAILED_SQL_TRANSACTION));
    client.batch_execute("COMMIT").await.unwrap();
    // COMMIT of an aborted transaction rolled it back: the insert is gone.
    assert_eq!(sqlite(&f.db, "SELECT COUNT(*) FROM invoices"), before);
    let q = "SELECT COUNT(*) FROM invoices";
    assert_eq!(rows(&client, q).await, before);
}

/// A session spoken to byte by byte (pgwire's message types), to know its
/// process id and secret key.
struct Raw {
    s: TcpStream,
    pid: i32,
    key: i32,
}

/// The messages of the backend until ReadyForQuery, as (type, body).
fn read_until_ready(s: &mut TcpStream) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        let mut head = [0u8; 5];
        s.read_exact(&mut head).unwrap();
        let len = i32::from_be_bytes(head[1..5].try_into().unwrap()) as usize;
        let mut body = vec![0u8; len - 4];
        s.read_exact(&mut body).unwrap();
        let ready = head[0] == b'Z';
        out.push((head[0], body));
        if ready {
            return out;
        }
    }
}

fn send(s: &mut TcpStream, m: &impl Message) {
    let mut buf = BytesMut::new();
    m.encode(&mut buf).unwrap();
    s.write_all(&buf).unwrap();
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut startup = Startup::new();
        startup.parameters.insert("user".into(), "t".into());
        startup
            .parameters
            .insert("database".into(), "ledger".into());
        send(&mut s, &startup);
        let (mut pid, mut key) = (None, None);
        for (t, body) in read_until_ready(&mut s) {
            if t == b'K' {
                let mut b = &body[..];
                pid = Some(b.get_i32());
                key = Some(b.get_i32());
            }
        }
        Raw {
            s,
            pid: pid.expect("BackendKeyData"),
            key: key.expect("BackendKeyData"),
        }
    }

    fn query(&mut self, sql: &str) {
        send(&mut self.s, &Query::new(sql.to_owned()));
    }
}

/// Sends a CancelRequest and waits until the server has handled it (it
/// closes the connection then).
fn cancel(port: u16, pid: i32, key: i32) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    send(&mut s, &CancelRequest::new(pid, SecretKey::I32(key)));
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "a cancel request gets no answer");
}

/// The SQLSTATE of an ErrorResponse body.
fn code_of(body: &[u8]) -> String {
    let mut fields = body.split(|&b| b == 0);
    fields
        .find_map(|f| f.strip_prefix(b"C"))
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .unwrap_or_default()
}

#[test]
fn a_cancel_with_a_wrong_key_or_for_an_idle_session_does_nothing() {
    let f = common::fixture();
    with_marker(&f.db);
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let mut raw = Raw::connect(port);

    // A cancel for the idle session goes nowhere: the next statement runs
    // to its end.
    cancel(port, raw.pid, raw.key);
    let count = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
                 WHERE x < 300000) SELECT count(*) FROM c";
    raw.query(count);
    let msgs = read_until_ready(&mut raw.s);
    assert!(msgs.iter().all(|m| m.0 != b'E'), "{msgs:?}");
    let row = msgs.iter().find(|m| m.0 == b'D').expect("a row");
    assert!(row.1.ends_with(b"300000"), "{row:?}");
    assert_eq!(sqlite(&f.db, count), [[Cell::Num(300000.0)]]);

    // While a statement runs, a wrong key (or another pid) ends nothing.
    raw.query(&format!("INSERT INTO marker VALUES (1); {ENDLESS}"));
    wait_for_marker(&f.db, 1);
    cancel(port, raw.pid, raw.key.wrapping_add(1));
    cancel(port, raw.pid + 1, raw.key);
    raw.s
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut byte = [0u8; 1];
    match raw.s.read(&mut byte) {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        other => panic!("the statement answered after wrong cancels: {other:?}"),
    }
    raw.s.set_read_timeout(None).unwrap();
    // The right key ends it.
    cancel(port, raw.pid, raw.key);
    let msgs = read_until_ready(&mut raw.s);
    let err = msgs.iter().find(|m| m.0 == b'E').expect("an error");
    assert_eq!(code_of(&err.1), "57014", "{msgs:?}");
    // The insert before it in the same message committed (no implicit
    // transaction), as documented.
    assert_eq!(
        sqlite(&f.db, "SELECT COUNT(*) FROM marker"),
        [[Cell::Num(1.0)]]
    );
}

/// Waits until a read transaction older than the file's last commit is
/// open: the statement of `READING` is running. (A FULL checkpoint cannot
/// finish while a reader holds an older snapshot; nothing else reads.)
fn wait_for_a_reader(db: &Path) {
    let c = pleroma::rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(Duration::ZERO).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        c.execute("INSERT INTO marker VALUES (0)", []).unwrap();
        let busy: i64 = c
            .query_row("PRAGMA wal_checkpoint(FULL)", [], |r| r.get(0))
            .unwrap();
        if busy == 1 {
            return;
        }
        assert!(Instant::now() < deadline, "the statement never started");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `ENDLESS`, reading a table, so that it holds a read transaction.
const READING: &str = "WITH RECURSIVE c(x) AS (SELECT count(*) FROM marker UNION ALL \
                       SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) FROM c";

#[test]
fn psql_ctrl_c_cancels_the_running_statement() {
    let psql = require("psql", "apt-get install postgresql-client");
    let kill = require("kill", "apt-get install procps");
    let f = common::fixture();
    with_marker(&f.db);
    let server = common::serve(&f.db);
    let port = server.addr().port().to_string();
    let args = |sql: &str| {
        let mut c = Command::new(&psql);
        c.args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-h",
            "127.0.0.1",
            "-U",
            "t",
            "-d",
            "ledger",
        ])
        .args(["-p", &port, "-c", sql])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        c
    };
    // One statement: psql prints the error of a cancelled one (of several,
    // it drops the results after a Ctrl-C).
    let child = args(READING).spawn().unwrap();
    wait_for_a_reader(&f.db);
    // Ctrl-C: psql sends the cancel request itself.
    let sent = Command::new(kill)
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("ERROR:  {MESSAGE}")),
        "psql said: {stderr}"
    );
    // A new psql session on the same server answers as SQLite does.
    let q = "SELECT COUNT(*) FROM invoices WHERE status = 'paid'";
    let out = args(q).output().unwrap();
    assert!(out.status.success());
    let got = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        vec![vec![Cell::parse(got.trim())]],
        sqlite(&f.db, q),
        "{got}"
    );
}
