//! Pleroma's own catalog writes are invisible to the connection's counters:
//! `last_insert_rowid()`, `changes()` and `total_changes()` read as in plain
//! SQLite (issue #10, item 5).

mod common;
use common::*;

const COUNTERS: &str = "SELECT last_insert_rowid(), changes(), total_changes()";

#[test]
fn attach_limb_and_detach_leave_the_counters_alone() {
    twin(&format!(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d INTEGER, m INTEGER);
         CREATE TABLE parent(pk INTEGER PRIMARY KEY, w INTEGER);
         INSERT INTO parent VALUES (1, 1);
         INSERT INTO t(d, m) VALUES (1, 10), (2, 20);
         {COUNTERS};
         PRAGMA pleroma_attach('t', 'd', 'm');
         {COUNTERS};
         PRAGMA pleroma_limb('t', 'd', 'parent', 'pk');
         {COUNTERS};
         UPDATE t SET m = m + 1 WHERE id = 99;
         {COUNTERS};
         PRAGMA pleroma_detach('t');
         {COUNTERS};
         INSERT INTO t(d, m) VALUES (3, 30);
         {COUNTERS};
         PRAGMA pleroma_attach('t', 'd', 'm');
         DELETE FROM t WHERE id = 1;
         {COUNTERS};"
    ));
}

/// Found from outside: `changes()` inside a trigger after its own insert,
/// stored by it; a write refused under `query_only`; writes under
/// `count_changes`; an autocommit statement whose deferred foreign key
/// fails at its commit; an FTS5 table, which writes its shadow tables at
/// the commit. Each leaves the counters (and rows) plain SQLite leaves.
#[test]
fn counters_through_triggers_deferred_keys_and_fts5_are_sqlites() {
    for script in [
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d TEXT, m INTEGER);
         CREATE TABLE s(x INTEGER);
         CREATE TABLE lg(w, c);
         INSERT INTO t(d, m) VALUES ('a', 1), ('b', 2);
         PRAGMA pleroma_attach('t', 'd', 'm');
         CREATE TRIGGER tr AFTER DELETE ON t BEGIN INSERT INTO s VALUES (1); INSERT INTO lg VALUES ('tr', changes()); END;
         UPDATE t SET m = m + 1;
         CREATE TABLE zz(x);
         DELETE FROM t WHERE d = 'a';
         SELECT rowid, * FROM lg;",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d TEXT, m INTEGER);
         INSERT INTO t(d, m) VALUES ('a', 1), ('b', 2), ('a', 3);
         PRAGMA pleroma_attach('t', 'd', 'm');
         PRAGMA query_only = ON;
         INSERT INTO t(d, m) VALUES ('c', 4);
         SELECT changes(), total_changes(), last_insert_rowid();
         PRAGMA query_only = OFF;",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d TEXT, m INTEGER);
         CREATE TABLE u(x);
         INSERT INTO t(d, m) VALUES ('a', 1);
         PRAGMA pleroma_attach('t', 'd', 'm');
         PRAGMA count_changes = ON;
         INSERT INTO t(d, m) VALUES ('b', 2), ('c', 3);
         UPDATE t SET m = m + 10 WHERE d = 'a';
         INSERT INTO u VALUES (1), (2);
         PRAGMA count_changes = OFF;
         SELECT rowid, * FROM t;",
        "PRAGMA foreign_keys = ON;
         CREATE TABLE t(id INTEGER PRIMARY KEY, d TEXT, m INTEGER);
         CREATE TABLE c(p INT REFERENCES t(id) DEFERRABLE INITIALLY DEFERRED);
         INSERT INTO t(d, m) VALUES ('1', 1);
         PRAGMA pleroma_attach('t', 'd', 'm');
         INSERT INTO c VALUES (99), (1);
         SELECT changes(), total_changes(), last_insert_rowid();
         SELECT rowid, * FROM c;",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d TEXT, m INTEGER);
         INSERT INTO t(d, m) VALUES ('a', 1);
         PRAGMA pleroma_attach('t', 'd', 'm');
         CREATE VIRTUAL TABLE f USING fts5(body);
         INSERT INTO f VALUES ('hello'), ('world');
         SELECT changes(), total_changes(), last_insert_rowid();
         INSERT INTO f VALUES ('x'), ('y'), ('z');
         SELECT changes(), total_changes(), last_insert_rowid();",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut pl = pleroma::Connection::open(dir.path().join("p.db")).unwrap();
        let sq = rusqlite::Connection::open(dir.path().join("s.db")).unwrap();
        twin_script(&mut pl, &sq, script);
    }
}
