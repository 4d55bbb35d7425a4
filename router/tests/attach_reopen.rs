//! Attach, detach, rebuild and reopen: the catalog brings planes back.

mod common;
use common::*;
use pleroma::{Connection, RouteKind, Value};

fn setup(path: &std::path::Path) -> Connection {
    let mut c = Connection::open(path).unwrap();
    c.execute_batch(
        "CREATE TABLE t(region TEXT, month INTEGER, amount INTEGER);
         INSERT INTO t VALUES ('eu', 1, 5), ('us', 1, 7), ('eu', 2, 9), (NULL, 3, NULL);",
    )
    .unwrap();
    c
}

#[test]
fn reopening_the_file_reattaches_and_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    {
        let mut c = setup(&path);
        c.execute_batch("PRAGMA pleroma_attach('T', 'Region, month', 'amount')")
            .unwrap();
        c.execute("INSERT INTO t VALUES ('ap', 4, 1)", &[]).unwrap();
    }
    let mut c = Connection::open(&path).unwrap();
    let rows = c
        .query("SELECT region, SUM(amount) FROM t GROUP BY region", &[])
        .unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Plane);
    let plain = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(
        rows.rows,
        sqlite_rows(
            &plain,
            "SELECT region, SUM(amount) FROM t GROUP BY region",
            &[]
        )
        .unwrap()
    );
    let planes = c.query("PRAGMA pleroma_planes", &[]).unwrap();
    assert_eq!(planes.rows.len(), 1);
    assert_eq!(planes.rows[0][0], text("t"));
    assert_eq!(planes.rows[0][6], int(5), "rows column: {planes:?}");
    assert_eq!(planes.rows[0][7], text("in service"));
}

#[test]
fn detach_forgets_the_plane_and_rebuild_restores_service() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let mut c = setup(&path);
    c.execute_batch("PRAGMA pleroma_attach('t', 'region', 'amount')")
        .unwrap();
    c.execute_batch("PRAGMA pleroma_rebuild('t')").unwrap();
    c.query("SELECT COUNT(*) FROM t", &[]).unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Plane);
    c.execute_batch("PRAGMA pleroma_detach('t')").unwrap();
    c.query("SELECT COUNT(*) FROM t", &[]).unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Engine);
    drop(c);
    let c = Connection::open(&path).unwrap();
    let mut c = c;
    assert!(c
        .query("PRAGMA pleroma_planes", &[])
        .unwrap()
        .rows
        .is_empty());
}

#[test]
fn a_zero_dimension_plane_is_a_maintained_total() {
    let mut p = Pair::new(
        "CREATE TABLE t1(a INTEGER, b INTEGER, c TEXT); INSERT INTO t1 VALUES (1, 2, 'x'), (3, NULL, 'y');",
        "PRAGMA pleroma_attach('t1', '', 'a, b')",
    );
    p.served("SELECT COUNT(*), SUM(a), SUM(b), MAX(a) FROM t1", &[]);
    p.exec("INSERT INTO t1 VALUES (10, 20, 'z'); DELETE FROM t1 WHERE a = 1");
    p.served("SELECT COUNT(*), SUM(a), SUM(b), AVG(b) FROM t1", &[]);
}

#[test]
fn schema_changes_put_the_plane_out_of_service_until_rebuild() {
    let mut p = Pair::new(
        "CREATE TABLE t(g TEXT, m INTEGER, x INTEGER); INSERT INTO t VALUES ('a', 1, 0), ('b', 2, 0);",
        "PRAGMA pleroma_attach('t', 'g', 'm')",
    );
    // Dropping a column before the plane's shifts their positions: still exact.
    p.exec("ALTER TABLE t ADD COLUMN y INTEGER DEFAULT 7");
    p.served("SELECT g, SUM(m) FROM t GROUP BY g", &[]);
    p.exec("ALTER TABLE t RENAME COLUMN m TO mm");
    assert_eq!(
        p.check("SELECT g, SUM(mm) FROM t GROUP BY g", &[]),
        RouteKind::Engine
    );
    p.exec("ALTER TABLE t RENAME COLUMN mm TO m");
    p.exec("INSERT INTO t VALUES ('c', 3, 0, 0)");
    p.pl.execute_batch("PRAGMA pleroma_rebuild('t')").unwrap();
    p.served("SELECT g, SUM(m) FROM t GROUP BY g", &[]);
    // A temp table of the same name shadows main.t: the plane must not answer.
    p.exec("CREATE TEMP TABLE t(g TEXT, m INTEGER); INSERT INTO temp.t VALUES ('temp', 100)");
    assert_eq!(
        p.check("SELECT g, SUM(m) FROM t GROUP BY g", &[]),
        RouteKind::Engine
    );
    let _ = Value::Null;
}

#[test]
fn writes_through_an_attached_alias_of_the_same_file_reach_the_plane() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let mut c = setup(&path);
    c.execute_batch("PRAGMA pleroma_attach('t', 'region', 'amount')")
        .unwrap();
    c.execute(
        &format!("ATTACH DATABASE '{}' AS again", path.display()),
        &[],
    )
    .unwrap();
    // A persisted plane's state row cannot go into the same transaction as
    // a write through a second handle of the file: refused by the guard.
    let e = c
        .execute("INSERT INTO again.t VALUES ('zz', 9, 100)", &[])
        .unwrap_err();
    assert!(e.to_string().contains("pleroma_guard"), "{e}");
    c.execute_batch("PRAGMA pleroma_persist = off").unwrap();
    c.execute("INSERT INTO again.t VALUES ('zz', 9, 100)", &[])
        .unwrap();
    let r = c.query("SELECT COUNT(*), SUM(amount) FROM t", &[]).unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Plane);
    let plain = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(
        r.rows,
        sqlite_rows(&plain, "SELECT COUNT(*), SUM(amount) FROM t", &[]).unwrap()
    );
}

#[test]
fn a_big_file_table_builds_in_parallel_and_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let mut c = Connection::open(&path).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE t(id INTEGER PRIMARY KEY, g INTEGER, h TEXT, m INTEGER);
         WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 250000)
         INSERT INTO t SELECT i * 3, i % 7, CASE WHEN i % 11 = 0 THEN NULL ELSE 'h' || (i % 5) END, i - 100000 FROM s;
         PRAGMA pleroma_attach('t', 'g, h', 'm');",
    )
    .unwrap();
    let q = "SELECT g, h, COUNT(*), SUM(m), MIN(m), MAX(m) FROM t GROUP BY g, h";
    let r = c.query(q, &[]).unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Plane);
    let plain = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(r.rows, sqlite_rows(&plain, q, &[]).unwrap());
}

#[test]
fn without_rowid_tables_and_vacuum_stay_exact() {
    let mut p = Pair::new(
        "CREATE TABLE w(k TEXT PRIMARY KEY, g INTEGER, m INTEGER) WITHOUT ROWID;
         INSERT INTO w VALUES ('a', 1, 10), ('b', 2, 20), ('c', 1, 30);",
        "PRAGMA pleroma_attach('w', 'g', 'm')",
    );
    p.served("SELECT g, SUM(m) FROM w GROUP BY g", &[]);
    p.exec("UPDATE w SET g = 2 WHERE k = 'a'; DELETE FROM w WHERE k = 'c'; INSERT INTO w VALUES ('d', 3, 5)");
    p.served("SELECT g, COUNT(*), SUM(m) FROM w GROUP BY g", &[]);
    p.exec("VACUUM");
    p.served("SELECT g, COUNT(*), SUM(m) FROM w GROUP BY g", &[]);
}
