//! Clients that misbehave: malformed and oversized messages, a client that
//! vanishes mid-transaction or mid-query, a burst of connections. Each time
//! the server drops only that client, keeps
//! serving the others, and the database loses nothing (plain SQLite checks).

mod common;

use common::connect;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{sqlite, Cell};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

async fn count(client: &Client) -> Vec<Vec<Cell>> {
    client
        .simple_query("SELECT COUNT(*), SUM(amount_cents) FROM invoices")
        .await
        .unwrap()
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(vec![
                Cell::parse(r.get(0).unwrap()),
                Cell::parse(r.get(1).unwrap()),
            ]),
            _ => None,
        })
        .collect()
}

const COUNT: &str = "SELECT COUNT(*), SUM(amount_cents) FROM invoices";

fn startup(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut body = Vec::new();
    body.extend_from_slice(&196608i32.to_be_bytes());
    for kv in ["user", "t", "database", "ledger"] {
        body.extend_from_slice(kv.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut msg = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    msg.extend(body);
    s.write_all(&msg).unwrap();
    let got = read_until(&mut s, b'Z');
    assert!(got.contains(&b'R'), "authentication ok");
    s
}

/// The message types the server sends until `want` (or the end).
fn read_until(s: &mut TcpStream, want: u8) -> Vec<u8> {
    let mut types = Vec::new();
    loop {
        let mut head = [0u8; 5];
        if s.read_exact(&mut head).is_err() {
            return types;
        }
        let len = i32::from_be_bytes(head[1..5].try_into().unwrap()) as usize;
        let mut body = vec![0u8; len.saturating_sub(4)];
        if s.read_exact(&mut body).is_err() {
            return types;
        }
        types.push(head[0]);
        if head[0] == b'E' {
            eprintln!("error from the server: {}", String::from_utf8_lossy(&body));
        }
        if head[0] == want {
            return types;
        }
    }
}

/// The server closed this connection promptly, without answering.
fn dropped(s: &mut TcpStream, what: &str) {
    let start = Instant::now();
    let got = read_until(s, b'Z');
    assert!(!got.contains(&b'Z'), "{what}: answered {got:?}");
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{what}: left waiting"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_messages_drop_that_client_and_the_server_serves_on() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let before = sqlite(&f.db, COUNT);

    tokio::task::spawn_blocking(move || {
        // A query message claiming 2 GB.
        let mut s = startup(port);
        let mut msg = vec![b'Q'];
        msg.extend_from_slice(&0x7fff_fff0i32.to_be_bytes());
        msg.extend_from_slice(b"SELECT 1");
        s.write_all(&msg).unwrap();
        // pgwire's codec refuses a length past PostgreSQL's 1 GB limit by
        // closing the connection at once: nothing buffered.
        dropped(&mut s, "an oversized message");

        // A message type that does not exist.
        let mut s = startup(port);
        s.write_all(&[b'y', 0, 0, 0, 8, 1, 2, 3, 4]).unwrap();
        dropped(&mut s, "an unknown message type");

        // A query that is not a C string (no terminating zero).
        let mut s = startup(port);
        s.write_all(&[b'Q', 0, 0, 0, 7, b'a', b'b', b'c']).unwrap();
        // pgwire reads it as an empty query: nothing runs.
        let got = read_until(&mut s, b'Z');
        assert!(!got.contains(&b'D') && !got.contains(&b'T'), "{got:?}");

        // A startup packet with a made-up protocol version, and one of 1 GB.
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(&[0, 0, 0, 8, 0, 9, 0, 9]).unwrap();
        let _ = read_until(&mut s, b'Z');
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(&[0x40, 0, 0, 0, 0, 3, 0, 0]).unwrap();
        let _ = read_until(&mut s, b'Z');
    })
    .await
    .unwrap();

    let client = connect(port).await;
    assert_eq!(count(&client).await, before);
    assert_eq!(sqlite(&f.db, COUNT), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_vanishes_mid_transaction_is_rolled_back() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let before = sqlite(&f.db, COUNT);

    let (client, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=t dbname=ledger"),
        NoTls,
    )
    .await
    .unwrap();
    let task = tokio::spawn(conn);
    client
        .batch_execute(
            "BEGIN; INSERT INTO invoices(region, status, month, amount_cents) VALUES ('north', 'paid', 202401, 77); \
             UPDATE invoices SET amount_cents = 0 WHERE region = 'south'",
        )
        .await
        .unwrap();
    // The client goes away without COMMIT or Terminate.
    task.abort();
    drop(client);

    // Another client writes (the vanished session's lock is released) and
    // sees none of the vanished writes.
    let other = connect(port).await;
    let start = Instant::now();
    other
        .batch_execute("INSERT INTO invoices(region, status, month, amount_cents) VALUES ('west', 'open', 202402, 5)")
        .await
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    let mut want = before[0].clone();
    if let (Cell::Num(n), Cell::Num(s)) = (&want[0], &want[1]) {
        want = vec![Cell::Num(n + 1.0), Cell::Num(s + 5.0)];
    }
    assert_eq!(count(&other).await, vec![want.clone()]);
    assert_eq!(sqlite(&f.db, COUNT), vec![want]);

    // A client that vanishes mid-query: the server finishes it and serves on.
    tokio::task::spawn_blocking(move || {
        let mut s = startup(port);
        let q = b"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) SELECT COUNT(*) FROM c\0";
        let mut msg = vec![b'Q'];
        msg.extend_from_slice(&((q.len() + 4) as i32).to_be_bytes());
        msg.extend_from_slice(q);
        s.write_all(&msg).unwrap();
    })
    .await
    .unwrap();
    assert_eq!(count(&other).await, sqlite(&f.db, COUNT));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_connections_is_served() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let want = sqlite(&f.db, COUNT);
    let n = 200;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let want = want.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..n / 8 {
                let c = connect(port).await;
                assert_eq!(count(&c).await, want);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{n} connections, each with one query, in {secs:.2} s ({:.0}/s)",
        n as f64 / secs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_take_turns_and_all_commit() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let before = sqlite(&f.db, "SELECT COUNT(*) FROM invoices");
    let (clients, txns) = (8, 15);
    let mut tasks = Vec::new();
    for c in 0..clients {
        tasks.push(tokio::spawn(async move {
            let client = connect(port).await;
            for t in 0..txns {
                // The turn is taken at the first write and kept to COMMIT.
                client
                    .batch_execute(&format!(
                        "BEGIN; INSERT INTO invoices(region, status, month, amount_cents) VALUES ('w{c}', 'paid', 202401, {t}); \
                         SELECT COUNT(*) FROM invoices WHERE region = 'north'; COMMIT"
                    ))
                    .await
                    .unwrap_or_else(|e| panic!("client {c} txn {t}: {e:?}"));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let Cell::Num(n) = before[0][0] else { panic!() };
    assert_eq!(
        sqlite(&f.db, "SELECT COUNT(*) FROM invoices"),
        vec![vec![Cell::Num(n + (clients * txns) as f64)]]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_then_write_after_anothers_commit_is_a_serialization_failure() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let (a, b) = (connect(port).await, connect(port).await);
    a.batch_execute("BEGIN; SELECT COUNT(*) FROM invoices")
        .await
        .unwrap();
    b.batch_execute("UPDATE invoices SET amount_cents = 1 WHERE id = 1")
        .await
        .unwrap();
    // a's snapshot is older than b's commit: SQLite refuses the write
    // (SQLITE_BUSY_SNAPSHOT), which PostgreSQL calls a serialization failure.
    let e = a
        .batch_execute("UPDATE invoices SET amount_cents = 2 WHERE id = 1")
        .await
        .expect_err("a stale snapshot cannot write");
    assert_eq!(e.code().map(|c| c.code()), Some("40001"), "{e:?}");
    a.batch_execute("ROLLBACK").await.unwrap();
    // Retried, it commits.
    a.batch_execute("BEGIN; UPDATE invoices SET amount_cents = 2 WHERE id = 1; COMMIT")
        .await
        .unwrap();
    assert_eq!(
        sqlite(&f.db, "SELECT amount_cents FROM invoices WHERE id = 1"),
        vec![vec![Cell::Num(2.0)]]
    );
}
