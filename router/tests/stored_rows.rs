//! Pleroma must never change what SQLite stores. Guards against three bugs:
//! a failed autocommit statement, run inside Pleroma's persisting wrap
//! (`BEGIN IMMEDIATE` … `COMMIT`), committed rows that plain SQLite rolls
//! back (a STRICT type error under `OR REPLACE` or `OR FAIL` is `OE_Abort`,
//! whatever the words say) or, read from words, lost rows that it keeps;
//! and a VACUUM with a persisted plane kept the rowids that plain SQLite
//! renumbers (the guard index made VACUUM copy them), with a
//! `last_insert_rowid()` that counted Pleroma's schema rows; and inside a
//! transaction, the guard gave a statement a statement journal
//! that plain SQLite does not, so a part-way failure that is no halt lost
//! rows plain SQLite keeps.
//!
//! Each script runs on a persisted Pleroma file and on a plain SQLite file;
//! after it, every table is compared row for row with its rowids, and the
//! plane's answers with SQLite's.

mod common;
use common::*;
use pleroma::{Connection, RouteKind};

/// Every user table, `rowid, *` in rowid order.
fn tables(db: &rusqlite::Connection) -> Vec<(String, Vec<Vec<pleroma::Value>>)> {
    let names: Vec<String> = db
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%' \
             AND name NOT LIKE 'pleroma%' ORDER BY name",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    names
        .into_iter()
        .map(|n| {
            // A WITHOUT ROWID table has no rowid: its rows in key order.
            let rows = sqlite_rows(db, &format!("SELECT rowid, * FROM {n} ORDER BY rowid"), &[])
                .or_else(|_| sqlite_rows(db, &format!("SELECT * FROM {n} ORDER BY 1"), &[]))
                .unwrap();
            (n, rows)
        })
        .collect()
}

/// Run `script` on both sides; then the tables, the counters and the
/// plane's answer to `probe` must be SQLite's.
fn same_store(script: &str, probe: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut pl = Connection::open(dir.path().join("p.db")).unwrap();
    let sq = rusqlite::Connection::open(dir.path().join("s.db")).unwrap();
    twin_script(&mut pl, &sq, script);
    assert_eq!(tables(pl.sqlite()), tables(&sq), "{script}");
    let counters = "SELECT last_insert_rowid(), changes(), total_changes()";
    assert_eq!(
        pl.query(counters, &[]).unwrap().rows,
        sqlite_rows(&sq, counters, &[]).unwrap(),
        "{script}"
    );
    pl.execute_batch("PRAGMA pleroma_route = plane").unwrap();
    let a = pl.query(probe, &[]).unwrap().rows;
    assert_eq!(pl.last_route().kind, RouteKind::Plane, "{probe}");
    assert_eq!(a, sqlite_rows(&sq, probe, &[]).unwrap(), "{script}");
}

const STRICT_T: &str = "CREATE TABLE t(id INTEGER PRIMARY KEY, m0 INTEGER, g INT, chan INT) STRICT;
    PRAGMA pleroma_attach('t', 'chan, g', 'm0');";
const PROBE_T: &str = "SELECT chan, g, SUM(m0), COUNT(*) FROM t GROUP BY chan, g ORDER BY chan, g";

#[test]
fn a_type_error_under_or_replace_in_autocommit_keeps_nothing() {
    for mode in ["OR REPLACE", "OR FAIL", "OR IGNORE", "OR ABORT", ""] {
        same_store(
            &format!(
                "{STRICT_T}
                 INSERT INTO t(m0, g, chan) VALUES (5, 1, 1);
                 INSERT {mode} INTO t(m0, g, chan) VALUES (-7, -2, 202401), (-9, 'x', 202401);
                 UPDATE {mode} t SET g = CASE WHEN id = 1 THEN 'y' ELSE g END;"
            ),
            PROBE_T,
        );
    }
}

#[test]
fn a_fail_conflict_in_autocommit_keeps_its_earlier_rows() {
    same_store(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d INT, m INT, u INT UNIQUE);
         PRAGMA pleroma_attach('t', 'd', 'm');
         INSERT INTO t(d, m, u) VALUES (1, 1, 1);
         INSERT OR FAIL INTO t(d, m, u) VALUES (2, 2, 2), (3, 3, 3), (4, 4, 1), (5, 5, 5);
         UPDATE OR FAIL t SET u = u + 1;",
        "SELECT d, SUM(m), COUNT(*) FROM t GROUP BY d ORDER BY d",
    );
}

#[test]
fn a_raise_after_trigger_writes_keeps_what_sqlite_keeps() {
    for raise in ["FAIL", "ABORT", "ROLLBACK", "IGNORE"] {
        for begin in ["", "BEGIN;"] {
            same_store(
                &format!(
                    "CREATE TABLE t(d TEXT, m INT NOT NULL ON CONFLICT FAIL);
                     CREATE TABLE log(x);
                     CREATE TRIGGER boom BEFORE INSERT ON t WHEN NEW.d = 'boom'
                       BEGIN INSERT INTO log VALUES (NEW.m); INSERT INTO t VALUES ('side', 1);
                       SELECT RAISE({raise}, 'boom'); END;
                     PRAGMA pleroma_attach('t', 'd', 'm');
                     {begin}
                     INSERT INTO t VALUES ('a', 1), ('b', 2);
                     INSERT INTO t VALUES ('c', 3), ('boom', 4), ('e', 5);
                     INSERT INTO t VALUES ('boom', 6);
                     INSERT INTO t VALUES ('f', NULL);
                     COMMIT;"
                ),
                "SELECT d, SUM(m), COUNT(*) FROM t GROUP BY d ORDER BY d",
            );
        }
    }
}

#[test]
fn vacuum_renumbers_rowids_as_plain_sqlite_does() {
    same_store(
        "CREATE TABLE t(a TEXT, m INT);
         INSERT INTO t VALUES ('x', 1), ('y', 2), ('z', 3), ('w', 4);
         UPDATE t SET rowid = -rowid WHERE a = 'y';
         DELETE FROM t WHERE a = 'w';
         PRAGMA pleroma_attach('t', 'a', 'm');
         VACUUM;
         INSERT INTO t VALUES ('v', 5);",
        "SELECT a, SUM(m), COUNT(*) FROM t GROUP BY a ORDER BY a",
    );
}

#[test]
fn vacuum_leaves_last_insert_rowid_as_plain_sqlite_does() {
    // A trigger (and a view) in the schema: VACUUM's last insert is theirs
    // into the new sqlite_schema.
    same_store(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, m INT);
         CREATE TABLE other(x);
         INSERT INTO t(a, m) VALUES ('x', 1), ('y', 2);
         PRAGMA pleroma_attach('t', 'a', 'm');
         CREATE TRIGGER tr AFTER DELETE ON other BEGIN SELECT 1; END;
         CREATE VIEW vw AS SELECT a FROM t;
         INSERT INTO other VALUES (7);
         VACUUM;
         SELECT last_insert_rowid();
         UPDATE OR REPLACE t SET id = 1 WHERE id = 2;",
        "SELECT a, SUM(m), COUNT(*) FROM t GROUP BY a ORDER BY a",
    );
}

#[test]
fn vacuum_keeps_rowids_where_plain_sqlite_keeps_them_and_puts_guards_back() {
    let script = "CREATE TABLE t(a TEXT, m INT);
         CREATE INDEX t_m ON t(m);
         CREATE TABLE u(a TEXT, m INT);
         INSERT INTO t VALUES ('x', 1), ('y', 2), ('z', 3);
         INSERT INTO u VALUES ('x', 1), ('y', 2), ('z', 3);
         UPDATE t SET rowid = -rowid WHERE a = 'y';
         UPDATE u SET rowid = -rowid WHERE a = 'y';
         PRAGMA pleroma_attach('t', 'a', 'm');
         PRAGMA pleroma_attach('u', 'a', 'm');
         VACUUM;";
    same_store(
        script,
        "SELECT a, SUM(m), COUNT(*) FROM u GROUP BY a ORDER BY a",
    );
    // The guards are back, and a plain connection still cannot write.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let mut pl = Connection::open(&path).unwrap();
    pl.execute_batch(script).unwrap();
    let guards: i64 = pl
        .sqlite()
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name IN ('pleroma_guard_t', 'pleroma_guard_u')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(guards, 2);
    drop(pl);
    let plain = rusqlite::Connection::open(&path).unwrap();
    assert!(plain
        .execute_batch("INSERT INTO u VALUES ('q', 9)")
        .is_err());
    // A fresh process trusts the persisted state: no rebuild.
    let mut again = Connection::open(&path).unwrap();
    let p = again.query("PRAGMA pleroma_planes", &[]).unwrap();
    let i = p.columns.iter().position(|c| c == "rebuilds").unwrap();
    assert!(p.rows.iter().all(|r| r[i] == pleroma::Value::Integer(0)));
}

/// Inside a transaction, a statement that fails part-way with an error that
/// is no halt keeps its earlier rows on plain SQLite when it has no
/// statement journal; the guard (a function call and an index) must not
/// give it one (`router/src/txn_guards.rs`). Found from outside: a
/// multi-row UPDATE overflowing into a REAL, `UPDATE OR FAIL` with a CASE
/// giving text, `INSERT … SELECT`, `INSERT OR REPLACE`, and AFTER triggers
/// writing another STRICT table, on tables whose only index is the guard,
/// with a UNIQUE column, or WITHOUT ROWID.
#[test]
fn a_type_error_inside_a_transaction_keeps_what_sqlite_keeps() {
    let tables = [
        "CREATE TABLE t(id INTEGER PRIMARY KEY, m0 INTEGER, g INT, chan INT) STRICT;",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, m0 INTEGER, g INT, chan INT UNIQUE) STRICT;",
        "CREATE TABLE t(id INT PRIMARY KEY, m0 INTEGER, g INT, chan INT) STRICT, WITHOUT ROWID;",
    ];
    let failing = [
        "INSERT OR REPLACE INTO t(id, m0, g, chan) VALUES (10, -7, -2, 202401), (11, -9, 'x', 202402)",
        "UPDATE t SET m0 = m0 + 9223372036854775806",
        "UPDATE OR FAIL t SET g = CASE id WHEN 3 THEN 'x' ELSE g + 1 END",
        "INSERT INTO t(id, m0, g, chan) SELECT id + 100, m0, CASE WHEN id = 3 THEN 'x' ELSE g END, chan + 100 FROM t ORDER BY id",
    ];
    for table in tables {
        for f in failing {
            for (begin, end) in [("BEGIN", "COMMIT"), ("SAVEPOINT s", "RELEASE s")] {
                same_store(
                    &format!(
                        "{table}
                         PRAGMA pleroma_attach('t', 'chan, g', 'm0');
                         INSERT INTO t(id, m0, g, chan) VALUES (1, 0, 1, 1), (2, 1, 2, 2), (3, 5, 3, 3);
                         {begin};
                         INSERT INTO t(id, m0, g, chan) VALUES (4, -1, 4, 4);
                         {f};
                         SELECT COUNT(*), SUM(g) FROM t;
                         {end};"
                    ),
                    PROBE_T,
                );
            }
        }
    }
}

#[test]
fn a_trigger_failing_on_another_strict_table_inside_a_transaction_keeps_what_sqlite_keeps() {
    for (event, value, stmt) in [
        (
            "UPDATE",
            "CASE WHEN NEW.m0 > 2 THEN 'bad' ELSE NEW.m0 END",
            "UPDATE t SET m0 = m0 + 1",
        ),
        (
            "DELETE",
            "CASE WHEN OLD.m0 > 1 THEN 'bad' ELSE OLD.m0 END",
            "DELETE FROM t WHERE m0 >= 0",
        ),
    ] {
        same_store(
            &format!(
                "{STRICT_T}
                 CREATE TABLE s(x INT) STRICT;
                 CREATE TRIGGER tr AFTER {event} ON t BEGIN INSERT INTO s VALUES ({value}); END;
                 INSERT INTO t(m0, g, chan) VALUES (0, 1, 1), (1, 2, 2), (2, 3, 3);
                 BEGIN;
                 {stmt};
                 COMMIT;"
            ),
            PROBE_T,
        );
    }
}

/// With `recursive_triggers` on, a trigger that inserts into its own table
/// stops at SQLite's depth limit, an error that is no halt: plain SQLite
/// keeps every row before it inside a transaction.
#[test]
fn too_deep_a_trigger_recursion_inside_a_transaction_keeps_what_sqlite_keeps() {
    same_store(
        &format!(
            "{STRICT_T}
             INSERT INTO t(m0, g, chan) VALUES (1, 1, 1);
             PRAGMA recursive_triggers = ON;
             CREATE TRIGGER tr AFTER INSERT ON t WHEN NEW.chan = 7
             BEGIN INSERT INTO t(m0, g, chan) VALUES (NEW.m0 + 1, NEW.g, 7); END;
             BEGIN;
             INSERT INTO t(m0, g, chan) VALUES (1, 2, 7);
             SELECT COUNT(*) FROM t;
             COMMIT;"
        ),
        PROBE_T,
    );
}

/// The guards that left the schema for a transaction are back after its
/// COMMIT (a plain connection still cannot write, and a fresh process
/// trusts the state without a rebuild), and after its ROLLBACK.
#[test]
fn the_guards_are_back_after_the_transaction() {
    for end in ["COMMIT", "ROLLBACK", "RELEASE s"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let mut pl = Connection::open(&path).unwrap();
        let begin = if end == "RELEASE s" {
            "SAVEPOINT s"
        } else {
            "BEGIN"
        };
        pl.execute_batch(&format!(
            "{STRICT_T}
             INSERT INTO t(m0, g, chan) VALUES (1, 1, 1), (2, 2, 2);
             {begin};
             UPDATE t SET m0 = m0 + 1;"
        ))
        .unwrap();
        let guards = |db: &rusqlite::Connection| -> i64 {
            db.query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name = 'pleroma_guard_t'",
                [],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(
            guards(pl.sqlite()),
            0,
            "out of the schema inside the transaction"
        );
        pl.execute_batch(end).unwrap();
        assert_eq!(guards(pl.sqlite()), 1, "back after {end}");
        drop(pl);
        let plain = rusqlite::Connection::open(&path).unwrap();
        assert!(plain
            .execute_batch("INSERT INTO t(m0, g, chan) VALUES (9, 9, 9)")
            .is_err());
        drop(plain);
        let mut again = Connection::open(&path).unwrap();
        let p = again.query("PRAGMA pleroma_planes", &[]).unwrap();
        let i = p.columns.iter().position(|c| c == "rebuilds").unwrap();
        assert!(
            p.rows.iter().all(|r| r[i] == pleroma::Value::Integer(0)),
            "{end}: {p:?}"
        );
        again.execute_batch("PRAGMA pleroma_route = plane").unwrap();
        let sum = again.query("SELECT SUM(m0) FROM t", &[]).unwrap().rows;
        let want = if end == "ROLLBACK" { 3 } else { 5 };
        assert_eq!(sum, vec![vec![pleroma::Value::Integer(want)]], "{end}");
    }
}

/// An AUTOINCREMENT key that reaches the largest rowid fails the statement
/// with "database or disk is full": without a statement journal SQLite rolls
/// back the whole transaction, with one only the statement. Found from
/// outside; the guard must not give the statement a journal.
#[test]
fn a_full_autoincrement_inside_a_transaction_ends_it_as_sqlite_does() {
    for (begin, end) in [("BEGIN", "COMMIT"), ("SAVEPOINT s", "RELEASE s")] {
        same_store(
            &format!(
                "CREATE TABLE t(id INTEGER PRIMARY KEY AUTOINCREMENT, chan INT, g INT, m0 INTEGER);
                 CREATE TABLE o(x);
                 INSERT INTO t(id, chan, g, m0) VALUES (9223372036854775805, 1, 1, 1);
                 PRAGMA pleroma_attach('t', 'chan, g', 'm0');
                 {begin};
                 INSERT INTO o VALUES (1);
                 INSERT INTO t(chan, g, m0) VALUES (2, 2, 2), (3, 3, 3), (4, 4, 4);
                 {end};"
            ),
            PROBE_T,
        );
    }
}

/// `INSERT INTO b SELECT * FROM a` is what SQLite's transfer optimization
/// copies, when `b` has no index: plain SQLite takes it, and then skips
/// the CHECK constraints, ignores `INDEXED BY` and
/// `reverse_unordered_selects`, and gives `b` new rowids. Found from
/// outside: the guard on `b` turned it off (or, with a plane on `a` too,
/// two alike guards kept `a`'s rowids). In autocommit and in a transaction.
#[test]
fn a_copy_by_select_star_is_the_copy_plain_sqlite_makes() {
    let probe = "SELECT d, SUM(m), COUNT(*) FROM b GROUP BY d ORDER BY d";
    for (begin, end) in [("", ""), ("BEGIN;", "COMMIT;")] {
        for script in [
            "CREATE TABLE a(d TEXT, m INTEGER); CREATE TABLE b(d TEXT, m INTEGER);
             INSERT INTO a VALUES ('x', 1), ('y', 2), ('z', 3), ('w', 4);
             DELETE FROM a WHERE m IN (1, 3);
             PRAGMA pleroma_attach('a', 'd', 'm'); PRAGMA pleroma_attach('b', 'd', 'm');
             {begin} INSERT INTO b SELECT * FROM a; {end}",
            "CREATE TABLE a(id INTEGER PRIMARY KEY, d TEXT, m INTEGER CHECK (m > 0));
             CREATE TABLE b(id INTEGER PRIMARY KEY, d TEXT, m INTEGER CHECK (m > 0));
             PRAGMA ignore_check_constraints = ON;
             INSERT INTO a VALUES (1, 'x', 1), (2, 'y', -2), (3, 'z', 3);
             PRAGMA ignore_check_constraints = OFF;
             PRAGMA pleroma_attach('b', 'd', 'm');
             {begin} INSERT INTO b SELECT * FROM a; {end}",
            "CREATE TABLE a(d TEXT, m INTEGER); CREATE TABLE b(d TEXT, m INTEGER);
             INSERT INTO a VALUES ('z', 1), ('a', 2), ('m', 3);
             PRAGMA pleroma_attach('b', 'd', 'm');
             PRAGMA reverse_unordered_selects = ON;
             {begin} INSERT INTO b SELECT * FROM a; {end}
             PRAGMA reverse_unordered_selects = OFF;",
            "CREATE TABLE a(d TEXT, m INTEGER); CREATE INDEX a_dm ON a(d, m);
             CREATE TABLE b(d TEXT, m INTEGER);
             INSERT INTO a VALUES ('z', 1), ('a', 2), ('m', 3);
             PRAGMA pleroma_attach('b', 'd', 'm');
             {begin} INSERT INTO b SELECT * FROM a INDEXED BY a_dm; {end}",
        ] {
            let script = script.replace("{begin}", begin).replace("{end}", end);
            same_store(&script, probe);
        }
    }
}

/// `VACUUM aux` of an attached file with persisted planes of its own
/// renumbers its rowids as plain SQLite does (found from outside: its
/// guards kept them), and that file's next open is exact.
#[test]
fn vacuum_of_an_attached_persisted_file_renumbers_as_plain_sqlite_does() {
    let dir = tempfile::tempdir().unwrap();
    let make = "CREATE TABLE t(a TEXT, m INT);
        INSERT INTO t VALUES ('x', 1), ('y', 2), ('z', 3), ('w', 4);
        DELETE FROM t WHERE m IN (1, 3);";
    let planed = dir.path().join("planed.db");
    let plain = dir.path().join("plain.db");
    {
        let mut a = Connection::open(&planed).unwrap();
        a.execute_batch(make).unwrap();
        a.execute_batch("PRAGMA pleroma_attach('t', 'a', 'm')")
            .unwrap();
        rusqlite::Connection::open(&plain)
            .unwrap()
            .execute_batch(make)
            .unwrap();
    }
    let rows = "SELECT rowid, * FROM aux.t ORDER BY rowid";
    let counters = "SELECT last_insert_rowid(), changes(), total_changes()";
    let mut pl = Connection::open(dir.path().join("p.db")).unwrap();
    pl.execute_batch(&format!("ATTACH '{}' AS aux; VACUUM aux", planed.display()))
        .unwrap();
    let sq = rusqlite::Connection::open(dir.path().join("s.db")).unwrap();
    sq.execute_batch(&format!("ATTACH '{}' AS aux; VACUUM aux", plain.display()))
        .unwrap();
    assert_eq!(
        pl.query(rows, &[]).unwrap().rows,
        sqlite_rows(&sq, rows, &[]).unwrap()
    );
    assert_eq!(
        pl.query(counters, &[]).unwrap().rows,
        sqlite_rows(&sq, counters, &[]).unwrap()
    );
    drop(pl);
    let mut again = Connection::open(&planed).unwrap();
    again.execute_batch("PRAGMA pleroma_route = plane").unwrap();
    let probe = "SELECT a, SUM(m), COUNT(*) FROM t GROUP BY a ORDER BY a";
    let plain_db = rusqlite::Connection::open(&plain).unwrap();
    assert_eq!(
        again.query(probe, &[]).unwrap().rows,
        sqlite_rows(&plain_db, probe, &[]).unwrap()
    );
}
