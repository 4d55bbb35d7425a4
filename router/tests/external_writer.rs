//! A write by another connection or another process shows on ours only as a
//! new `data_version`; the plane resyncs before its next answer.
//!
//! These writers are plain SQLite (no Pleroma), which a persisted plane's
//! guard refuses (`persisted_planes.rs`): here the database has
//! `PRAGMA pleroma_persist = off`, and the plane rebuilds instead.

mod common;
use common::*;
use pleroma::{Connection, RouteKind};

#[test]
fn another_connections_commit_is_seen_at_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let mut c = Connection::open(&path).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL; CREATE TABLE t(g TEXT, m INTEGER); INSERT INTO t VALUES ('a', 1), ('b', 2);
         PRAGMA pleroma_persist = off; PRAGMA pleroma_attach('t', 'g', 'm');",
    )
    .unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other
        .execute_batch("BEGIN; INSERT INTO t VALUES ('a', 10);")
        .unwrap();
    let q = "SELECT g, SUM(m) FROM t GROUP BY g ORDER BY g";
    let before = c.query(q, &[]).unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Plane);
    assert_eq!(
        before.rows,
        sqlite_rows(&other_reader(&path), q, &[]).unwrap(),
        "uncommitted write must not show"
    );
    other.execute_batch("COMMIT").unwrap();
    let after = c.query(q, &[]).unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Plane);
    assert_eq!(after.rows, sqlite_rows(&other, q, &[]).unwrap());
    assert_eq!(after.rows[0][1], int(11));
    // The catch-up was a full rebuild, and pleroma_planes says so.
    let planes = c.query("PRAGMA pleroma_planes", &[]).unwrap();
    let col = |name: &str| planes.columns.iter().position(|c| c == name).unwrap();
    assert_eq!(planes.rows[0][col("rebuilds")], int(1));
    assert!(matches!(planes.rows[0][col("rebuild_ms")], pleroma::Value::Real(ms) if ms >= 0.0));
    assert_eq!(
        planes.rows[0][col("last_rebuild")],
        text("another connection or process committed")
    );
}

#[test]
fn another_process_write_is_seen() {
    assert!(
        std::process::Command::new("sqlite3")
            .arg("-version")
            .output()
            .is_ok(),
        "the sqlite3 program is not on PATH: install it (Debian/Ubuntu: apt-get install sqlite3) \
         or run the README's test command, bash scripts/test.sh, which does"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let mut c = Connection::open(&path).unwrap();
    c.execute_batch("CREATE TABLE t(g TEXT, m INTEGER); INSERT INTO t VALUES ('a', 1); PRAGMA pleroma_persist = off; PRAGMA pleroma_attach('t', 'g', 'm');")
        .unwrap();
    c.query("SELECT SUM(m) FROM t", &[]).unwrap();
    let st = std::process::Command::new("sqlite3")
        .arg(&path)
        .arg("INSERT INTO t VALUES ('z', 41);")
        .status()
        .unwrap();
    assert!(st.success());
    let r = c
        .query("SELECT SUM(m), COUNT(DISTINCT g) FROM t", &[])
        .unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Plane);
    assert_eq!(r.rows, vec![vec![int(42), int(2)]]);
}

fn other_reader(path: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

#[test]
fn a_local_write_right_after_an_external_one_stays_exact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let mut c = Connection::open(&path).unwrap();
    c.execute_batch("CREATE TABLE t(g TEXT, m INTEGER); INSERT INTO t VALUES ('a', 1); PRAGMA pleroma_persist = off; PRAGMA pleroma_attach('t', 'g', 'm');")
        .unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other
        .execute_batch("INSERT INTO t VALUES ('b', 2), ('b', 3)")
        .unwrap();
    // Row images of rows the plane has not seen yet.
    c.execute("UPDATE t SET m = m * 10 WHERE g = 'b'", &[])
        .unwrap();
    c.execute("DELETE FROM t WHERE g = 'a'", &[]).unwrap();
    let q = "SELECT g, COUNT(*), SUM(m) FROM t GROUP BY g";
    let r = c.query(q, &[]).unwrap();
    assert_eq!(
        c.last_route().kind,
        RouteKind::Plane,
        "{:?}",
        c.last_route()
    );
    assert_eq!(r.rows, sqlite_rows(&other, q, &[]).unwrap());
}
