//! The plane stays exactly where SQLite leaves the table through every
//! transaction case, including those SQLite undoes without a hook event:
//! ROLLBACK, ROLLBACK TO, and statements that fail halfway under each
//! conflict mode.

mod common;
use common::*;

const SETUP: &str = "
CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER UNIQUE, g TEXT, m INTEGER);
INSERT INTO t(k, g, m) VALUES (1, 'a', 10), (2, 'b', 20), (3, 'a', 30);
";
const ATTACH: &str = "PRAGMA pleroma_attach('t', 'g', 'm')";

/// Every check query, served by the plane, equal to SQLite.
fn verify(p: &mut Pair) {
    for sql in [
        "SELECT COUNT(*), SUM(m), MIN(m), MAX(m) FROM t",
        "SELECT g, COUNT(*), SUM(m) FROM t GROUP BY g ORDER BY g",
        "SELECT COUNT(*) FROM t WHERE g = 'a'",
    ] {
        p.served(sql, &[]);
    }
}

fn pair() -> Pair {
    let mut p = Pair::new(SETUP, ATTACH);
    verify(&mut p);
    p
}

#[test]
fn own_uncommitted_writes_are_visible_and_rollback_leaves_no_trace() {
    let mut p = pair();
    p.exec("BEGIN");
    p.exec("INSERT INTO t(k, g, m) VALUES (10, 'z', 5)");
    p.exec("UPDATE t SET g = 'b' WHERE k = 1");
    verify(&mut p);
    p.exec("ROLLBACK");
    verify(&mut p);
    p.exec("BEGIN; DELETE FROM t; COMMIT");
    verify(&mut p);
}

#[test]
fn nested_savepoints_rewind_exactly() {
    let mut p = pair();
    p.exec("SAVEPOINT a");
    p.exec("INSERT INTO t(k, g, m) VALUES (10, 'x', 1)");
    p.exec("SAVEPOINT b");
    p.exec("DELETE FROM t WHERE g = 'a'");
    verify(&mut p);
    p.exec("ROLLBACK TO b");
    verify(&mut p);
    p.exec("INSERT INTO t(k, g, m) VALUES (11, 'y', 2)");
    p.exec("ROLLBACK TO a");
    verify(&mut p);
    p.exec("INSERT INTO t(k, g, m) VALUES (12, 'w', 3)");
    p.exec("RELEASE a");
    verify(&mut p);
}

#[test]
fn savepoint_methods_match_sql_text() {
    let mut p = pair();
    p.pl.begin().unwrap();
    p.sq.execute_batch("BEGIN").unwrap();
    p.pl.savepoint("s").unwrap();
    p.sq.execute_batch("SAVEPOINT s").unwrap();
    p.exec("INSERT INTO t(k, g, m) VALUES (20, 'q', 7)");
    p.pl.rollback_to("s").unwrap();
    p.sq.execute_batch("ROLLBACK TO s").unwrap();
    verify(&mut p);
    p.pl.release("s").unwrap();
    p.sq.execute_batch("RELEASE s").unwrap();
    p.pl.commit().unwrap();
    p.sq.execute_batch("COMMIT").unwrap();
    verify(&mut p);
}

#[test]
fn failed_statements_under_each_conflict_mode() {
    // Row 2 of each multi-row INSERT collides with k = 2.
    for mode in [
        "",
        "OR ABORT",
        "OR FAIL",
        "OR ROLLBACK",
        "OR IGNORE",
        "OR REPLACE",
    ] {
        for in_txn in [false, true] {
            let mut p = pair();
            if in_txn {
                p.exec("BEGIN");
                p.exec("INSERT INTO t(k, g, m) VALUES (50, 'pre', 1)");
            }
            p.exec(&format!(
                "INSERT {mode} INTO t(k, g, m) VALUES (40, 'n', 4), (2, 'dup', 5), (41, 'n', 6)"
            ));
            verify(&mut p);
            if in_txn && !p.pl.sqlite().is_autocommit() {
                p.exec("COMMIT");
            }
            verify(&mut p);
        }
    }
}

#[test]
fn update_failing_halfway_in_a_transaction() {
    let mut p = pair();
    p.exec("BEGIN");
    p.exec("UPDATE t SET k = 3, g = 'moved' WHERE k IN (1, 2)");
    verify(&mut p);
    p.exec("UPDATE OR FAIL t SET k = k + 1, m = m + 1");
    verify(&mut p);
    p.exec("COMMIT");
    verify(&mut p);
}

#[test]
fn trigger_raise_abort_and_rollback() {
    let mut p = pair();
    p.exec(
        "CREATE TABLE log(x); CREATE TRIGGER tr AFTER INSERT ON t WHEN new.m < 0 BEGIN SELECT RAISE(ABORT, 'neg'); END;
         CREATE TRIGGER tr2 AFTER INSERT ON t WHEN new.m = 999 BEGIN SELECT RAISE(ROLLBACK, 'boom'); END;",
    );
    p.exec("BEGIN");
    p.exec("INSERT INTO t(k, g, m) VALUES (60, 'ok', 1), (61, 'bad', -1)");
    verify(&mut p);
    p.exec("INSERT INTO t(k, g, m) VALUES (62, 'ok', 2), (63, 'boom', 999)");
    verify(&mut p);
    assert!(p.pl.sqlite().is_autocommit());
}

#[test]
fn triggers_cascades_upsert_and_replace_reach_the_plane() {
    let mut p = pair();
    p.exec(
        "PRAGMA foreign_keys = ON;
         CREATE TABLE parent(id INTEGER PRIMARY KEY);
         CREATE TABLE child(id INTEGER PRIMARY KEY, pid REFERENCES parent(id) ON DELETE CASCADE, g TEXT, m INTEGER);
         CREATE TRIGGER copy AFTER INSERT ON child BEGIN INSERT INTO t(k, g, m) VALUES (new.id + 1000, new.g, new.m); END;
         INSERT INTO parent VALUES (1), (2);
         INSERT INTO child VALUES (1, 1, 'c', 5), (2, 2, 'c', 6);",
    );
    p.pl.execute_batch("PRAGMA pleroma_attach('child', 'g', 'm')")
        .unwrap();
    verify(&mut p);
    p.exec("DELETE FROM parent WHERE id = 1");
    p.served("SELECT COUNT(*), SUM(m) FROM child", &[]);
    p.exec("INSERT INTO t(k, g, m) VALUES (1, 'up', 100) ON CONFLICT(k) DO UPDATE SET m = m + excluded.m");
    verify(&mut p);
    p.exec("REPLACE INTO t(k, g, m) VALUES (2, 'rep', 7)");
    verify(&mut p);
    p.exec("UPDATE t SET id = id + 100 WHERE k = 3");
    verify(&mut p);
}

#[test]
fn dropping_a_connection_inside_a_transaction_is_safe() {
    let mut p = pair();
    p.exec("BEGIN; INSERT INTO t(k, g, m) VALUES (70, 'z', 1)");
    drop(p);
}

#[test]
fn a_failing_autocommit_statement_longer_than_the_undo_log_is_undone_by_a_rebuild() {
    let mut p = pair();
    p.exec(
        "CREATE TABLE src(k INTEGER, g TEXT, m INTEGER);
         WITH RECURSIVE s(i) AS (SELECT 100 UNION ALL SELECT i + 1 FROM s WHERE i < 70100)
         INSERT INTO src SELECT i, 'x', i FROM s;
         INSERT INTO src VALUES (1, 'dup', 0);",
    );
    // The last row collides with k = 1 after 70,001 rows went in.
    assert!(!p.exec("INSERT INTO t(k, g, m) SELECT k, g, m FROM src"));
    verify(&mut p);
    assert!(!p.exec("INSERT INTO t(k, g, m) SELECT k, g, m FROM src WHERE k < 200 OR k = 1"));
    verify(&mut p);
}

/// Found from outside: a Pleroma PRAGMA that writes the catalog, refused
/// inside a transaction, reads nothing first, so the transaction's
/// snapshot still starts at its first read (WAL).
#[test]
fn a_refused_attach_in_a_transaction_starts_no_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let mut a = pleroma::Connection::open(&path).unwrap();
    a.execute_batch("PRAGMA journal_mode = wal; CREATE TABLE t(g TEXT, m INTEGER)")
        .unwrap();
    let mut b = pleroma::Connection::open(&path).unwrap();
    b.execute_batch("PRAGMA pleroma_attach('t', 'g', 'm')")
        .unwrap();
    a.execute_batch("BEGIN").unwrap();
    let err = a
        .execute_batch("PRAGMA pleroma_attach('t', 'g', 'm', 'second')")
        .unwrap_err();
    assert!(
        err.to_string().contains("cannot run inside a transaction"),
        "{err}"
    );
    b.execute_batch("INSERT INTO t VALUES ('x', 5)").unwrap();
    let rows = a.query("SELECT count(*), SUM(m) FROM t", &[]).unwrap();
    assert_eq!(
        rows.rows,
        vec![vec![pleroma::Value::Integer(1), pleroma::Value::Integer(5)]]
    );
    a.execute_batch("COMMIT").unwrap();
}
