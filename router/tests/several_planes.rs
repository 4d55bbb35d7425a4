//! Several planes on one table (`pleroma_attach`'s fourth argument): the
//! smallest that serves a statement answers it, each is fed, persisted,
//! followed and detached on its own.

mod common;
use common::*;
use pleroma::{Connection, RouteKind, Value};

const SETUP: &str = "PRAGMA journal_mode = WAL;
     CREATE TABLE t(a TEXT, b INTEGER, c TEXT, m INTEGER, n INTEGER);
     WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 999)
     INSERT INTO t SELECT char(97 + i % 7), i % 13, char(65 + i % 5), i - 300, i % 17 FROM s;";

/// `PRAGMA pleroma_planes`' rows as (table, plane, cells, served, declined,
/// rebuilds).
fn planes(c: &mut Connection) -> Vec<(String, String, i64, i64, i64, i64)> {
    let rows = c.query("PRAGMA pleroma_planes", &[]).unwrap();
    let col = |name: &str| rows.columns.iter().position(|c| c == name).unwrap();
    let (t, p, cells, sv, d, r) = (
        col("table"),
        col("plane"),
        col("cells"),
        col("served"),
        col("declined"),
        col("rebuilds"),
    );
    rows.rows
        .iter()
        .map(|row| {
            let s = |i: usize| match &row[i] {
                Value::Text(x) => x.clone(),
                v => panic!("{v:?}"),
            };
            let n = |i: usize| match row[i] {
                Value::Integer(x) => x,
                ref v => panic!("{v:?}"),
            };
            (s(t), s(p), n(cells), n(sv), n(d), n(r))
        })
        .collect()
}

/// The plane `pleroma_explain` names for `sql`.
fn explained(c: &mut Connection, sql: &str) -> Value {
    let rows = c
        .query(
            &format!("PRAGMA pleroma_explain('{}')", sql.replace('\'', "''")),
            &[],
        )
        .unwrap();
    let i = rows.columns.iter().position(|c| c == "plane").unwrap();
    rows.rows[0][i].clone()
}

#[test]
fn the_smallest_plane_that_serves_answers() {
    let mut p = Pair::new(SETUP, "PRAGMA pleroma_attach('t', 'a, b, c', 'm, n')");
    p.pl.execute_batch("PRAGMA pleroma_attach('t', 'c, a', 'm', 'by_ca')")
        .unwrap();
    // Both serve it: the smaller one answers (its dimensions in another
    // order than the big one's, so the wrong plane gives wrong groups).
    let q = "SELECT a, c, SUM(m), COUNT(*) FROM t GROUP BY a, c ORDER BY a, c";
    p.served(q, &[]);
    assert_eq!(explained(&mut p.pl, q), text("by_ca"));
    // Only the big one has `b` and `n`.
    let q2 = "SELECT b, SUM(n) FROM t WHERE a = 'c' GROUP BY b";
    p.served(q2, &[]);
    assert_eq!(explained(&mut p.pl, q2), text("t"));
    // A residue on the small one.
    let q3 = "SELECT c, s FROM (SELECT c, SUM(m) AS s FROM t GROUP BY c) WHERE s > 0 ORDER BY c";
    p.served(q3, &[]);
    assert_eq!(explained(&mut p.pl, q3), text("by_ca"));
    // Writes feed both, in transactions and savepoints, failed or undone.
    p.exec("INSERT INTO t VALUES ('z', 99, 'Q', 5, 6), ('a', 1, NULL, NULL, 2)");
    p.exec("UPDATE t SET c = 'R', m = m + 1 WHERE b = 3");
    p.exec("DELETE FROM t WHERE a = 'b'");
    p.exec("BEGIN; INSERT INTO t VALUES ('y', 1, 'S', 1, 1); SAVEPOINT s; DELETE FROM t WHERE c = 'A'; ROLLBACK TO s; COMMIT");
    p.exec("BEGIN; UPDATE t SET a = 'w' WHERE m > 100; ROLLBACK");
    for q in [q, q2, q3] {
        p.served(q, &[]);
    }
    let counts = planes(&mut p.pl);
    assert_eq!(counts.len(), 2, "{counts:?}");
    let small = counts.iter().find(|r| r.1 == "by_ca").unwrap();
    let big = counts.iter().find(|r| r.1 == "t").unwrap();
    assert!(small.2 < big.2, "{counts:?}");
    assert!(
        small.3 >= 4 && big.3 >= 2,
        "served counted per plane: {counts:?}"
    );
}

#[test]
fn attach_detach_and_rebuild_by_name() {
    let mut c = Connection::open_in_memory().unwrap();
    c.execute_batch(SETUP).unwrap();
    c.execute_batch("PRAGMA pleroma_attach('t', 'a, b', 'm')")
        .unwrap();
    let e = c
        .execute_batch("PRAGMA pleroma_attach('t', 'a', 'm')")
        .unwrap_err()
        .to_string();
    assert!(e.contains("already has a plane"), "{e}");
    c.execute_batch("PRAGMA pleroma_attach('t', 'c', 'n', 'By_C')")
        .unwrap();
    let e = c
        .execute_batch("PRAGMA pleroma_attach('t', 'a', 'n', 'by_c')")
        .unwrap_err()
        .to_string();
    assert!(e.contains("already has a plane named by_c"), "{e}");
    // The two-argument form: COUNT(*) only.
    c.execute_batch(
        "PRAGMA pleroma_attach('t', 'b', 'm', 'by_b'); PRAGMA pleroma_detach('t', 'by_b')",
    )
    .unwrap();
    c.execute_batch("PRAGMA pleroma_attach('t', 'a, c', '', 'counts')")
        .unwrap();
    c.query("SELECT c, COUNT(*) FROM t GROUP BY c", &[])
        .unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Plane);
    let e = c
        .execute_batch("PRAGMA pleroma_detach('t', 'nope')")
        .unwrap_err()
        .to_string();
    assert!(e.contains("table t has no plane named nope"), "{e}");
    c.execute_batch("PRAGMA pleroma_rebuild('t', 'by_c')")
        .unwrap();
    let rebuilt: Vec<_> = planes(&mut c).into_iter().map(|r| (r.1, r.5)).collect();
    assert_eq!(
        rebuilt,
        vec![("t".into(), 0), ("By_C".into(), 1), ("counts".into(), 0)]
    );
    // The table's own plane by its table's name: the named ones stay.
    c.execute_batch("PRAGMA pleroma_detach('t', 'T')").unwrap();
    let left: Vec<_> = planes(&mut c).into_iter().map(|r| r.1).collect();
    assert_eq!(left, vec!["By_C", "counts"]);
    c.query("SELECT c, SUM(n) FROM t GROUP BY c", &[]).unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Plane);
    let e = c
        .execute_batch("PRAGMA pleroma_limb('t', 'a', 't', 'a')")
        .unwrap_err()
        .to_string();
    assert!(e.contains("has no plane of its own"), "{e}");
    // Every plane of the table.
    c.execute_batch("PRAGMA pleroma_detach('t')").unwrap();
    assert!(planes(&mut c).is_empty());
    c.query("SELECT c, SUM(n) FROM t GROUP BY c", &[]).unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Engine);
}

#[test]
fn named_planes_are_persisted_and_followed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let q = "SELECT c, a, SUM(m) FROM t GROUP BY c, a ORDER BY 1, 2";
    let q_big = "SELECT b, COUNT(*) FROM t GROUP BY b ORDER BY b";
    let plain = || rusqlite::Connection::open(&path).unwrap();
    {
        let mut c = Connection::open(&path).unwrap();
        c.execute_batch(SETUP).unwrap();
        c.execute_batch("PRAGMA pleroma_attach('t', 'a, b, c', 'm')")
            .unwrap();
        c.execute_batch("PRAGMA pleroma_attach('t', 'c, a', 'm', 'by_ca')")
            .unwrap();
        // Another connection of this process, and another "process" (a
        // connection that opened before the writes) follow the commits.
        let mut other = Connection::open(&path).unwrap();
        assert_eq!(
            other.query(q, &[]).unwrap().rows,
            sqlite_rows(&plain(), q, &[]).unwrap()
        );
        c.execute("INSERT INTO t VALUES ('q', 1, 'Z', 7, 1)", &[])
            .unwrap();
        c.execute("DELETE FROM t WHERE b = 2", &[]).unwrap();
        for sql in [q, q_big] {
            let rows = other.query(sql, &[]).unwrap();
            assert_eq!(other.last_route().kind, RouteKind::Plane, "{sql}");
            assert_eq!(rows.rows, sqlite_rows(&plain(), sql, &[]).unwrap(), "{sql}");
        }
    }
    // Reopened from the persisted state: no rebuild, both planes.
    let mut c = Connection::open(&path).unwrap();
    for sql in [q, q_big] {
        let rows = c.query(sql, &[]).unwrap();
        assert_eq!(c.last_route().kind, RouteKind::Plane, "{sql}");
        assert_eq!(rows.rows, sqlite_rows(&plain(), sql, &[]).unwrap(), "{sql}");
    }
    assert_eq!(explained(&mut c, q), text("by_ca"));
    let p = planes(&mut c);
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p.iter().all(|r| r.5 == 0), "no rebuild on open: {p:?}");
    // Detaching the named one keeps the table's own, and the guard still
    // refuses a plain writer.
    c.execute_batch("PRAGMA pleroma_detach('t', 'by_ca')")
        .unwrap();
    drop(c);
    let e = plain()
        .execute("INSERT INTO t VALUES ('x', 1, 'X', 1, 1)", [])
        .unwrap_err()
        .to_string();
    assert!(e.contains("pleroma_guard"), "{e}");
    let mut c = Connection::open(&path).unwrap();
    let p = planes(&mut c);
    assert_eq!(
        p.iter().map(|r| (r.1.as_str(), r.5)).collect::<Vec<_>>(),
        vec![("t", 0)]
    );
    let rows = c.query(q, &[]).unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Plane);
    assert_eq!(rows.rows, sqlite_rows(&plain(), q, &[]).unwrap());
}

/// Found from outside: a connection opened before any plane existed, after
/// another connection attached one, had every write of its transactions to
/// that table refused by the guard. It opens the planes where it stands.
#[test]
fn a_transaction_of_a_connection_without_planes_writes_after_an_attach_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let plain = || rusqlite::Connection::open(&path).unwrap();
    let mut a = Connection::open(&path).unwrap();
    a.execute_batch(SETUP).unwrap();
    {
        let mut b = Connection::open(&path).unwrap();
        b.execute_batch(
            "PRAGMA pleroma_attach('t', 'a, c', 'm'); PRAGMA pleroma_attach('t', 'c', 'n', 'by_c')",
        )
        .unwrap();
    }
    a.execute_batch(
        "BEGIN; INSERT INTO t VALUES ('q', 1, 'Z', 7, 1); SAVEPOINT s; \
         INSERT INTO t VALUES ('q', 2, 'Z', 9, 2); DELETE FROM t WHERE b = 4; ROLLBACK TO s; \
         INSERT INTO t VALUES ('r', 3, 'Y', 1, 1); COMMIT",
    )
    .unwrap();
    a.execute_batch("SAVEPOINT x; UPDATE t SET m = m + 1 WHERE a = 'q'; RELEASE x")
        .unwrap();
    // After a schema change earlier in the transaction (the persisted state
    // is then of another schema version: rebuilt, with the file's keys).
    let mut a2 = Connection::open(&path).unwrap();
    a2.execute_batch("PRAGMA pleroma_detach('t')").unwrap();
    let mut a3 = Connection::open(&path).unwrap();
    {
        let mut b = Connection::open(&path).unwrap();
        b.execute_batch(
            "PRAGMA pleroma_attach('t', 'a, c', 'm'); PRAGMA pleroma_attach('t', 'c', 'n', 'by_c')",
        )
        .unwrap();
    }
    a3.execute_batch("BEGIN; CREATE TABLE zz(x); INSERT INTO t VALUES ('s', 5, 'W', 2, 2); COMMIT")
        .unwrap();
    drop((a2, a3));
    a.execute_batch("BEGIN; DELETE FROM t WHERE c = 'Z'; ROLLBACK")
        .unwrap();
    for sql in [
        "SELECT a, c, SUM(m), COUNT(*) FROM t GROUP BY a, c ORDER BY 1, 2",
        "SELECT c, SUM(n) FROM t GROUP BY c ORDER BY c",
    ] {
        let rows = a.query(sql, &[]).unwrap();
        assert_ne!(
            a.last_route().kind,
            RouteKind::Engine,
            "{sql}: {:?}",
            a.last_route()
        );
        assert_eq!(rows.rows, sqlite_rows(&plain(), sql, &[]).unwrap(), "{sql}");
        // And a new connection, from the persisted state.
        let mut fresh = Connection::open(&path).unwrap();
        assert_eq!(fresh.query(sql, &[]).unwrap().rows, rows.rows, "{sql}");
    }
}

/// Found from outside (second round): persistence turned on or off by
/// another connection, then a write inside a transaction here. On: the
/// write was refused. Off: this transaction's COMMIT made the state table
/// and the guards again, and plain programs were refused from then on.
#[test]
fn persistence_turned_on_or_off_elsewhere_then_a_transaction_here() {
    for turn_on in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let plain = || rusqlite::Connection::open(&path).unwrap();
        let mut setup = Connection::open(&path).unwrap();
        setup.execute_batch(SETUP).unwrap();
        if turn_on {
            setup.execute_batch("PRAGMA pleroma_persist = off").unwrap();
        }
        setup
            .execute_batch("PRAGMA pleroma_attach('t', 'a, c', 'm')")
            .unwrap();
        drop(setup);
        let mut a = Connection::open(&path).unwrap();
        let mut b = Connection::open(&path).unwrap();
        b.execute_batch(if turn_on {
            "PRAGMA pleroma_persist = on"
        } else {
            "PRAGMA pleroma_persist = off"
        })
        .unwrap();
        a.execute_batch("BEGIN; INSERT INTO t VALUES ('q', 1, 'Z', 7, 1); COMMIT")
            .unwrap();
        let sql = "SELECT a, c, SUM(m) FROM t GROUP BY a, c ORDER BY 1, 2";
        let rows = a.query(sql, &[]).unwrap();
        assert_eq!(rows.rows, sqlite_rows(&plain(), sql, &[]).unwrap());
        let state: i64 = plain()
            .query_row("SELECT count(*) FROM sqlite_schema WHERE name LIKE 'pleroma\\_state' ESCAPE '\\' OR name LIKE 'pleroma\\_guard\\_%' ESCAPE '\\'", [], |r| r.get(0))
            .unwrap();
        if turn_on {
            assert_eq!(state, 3, "the state table and its two guards");
        } else {
            assert_eq!(state, 0, "persistence stays off");
            plain()
                .execute("INSERT INTO t VALUES ('p', 1, 'Y', 1, 1)", [])
                .unwrap();
        }
        let mut fresh = Connection::open(&path).unwrap();
        assert_eq!(
            fresh.query(sql, &[]).unwrap().rows,
            sqlite_rows(&plain(), sql, &[]).unwrap()
        );
    }
}
