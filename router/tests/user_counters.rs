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
        // Found from outside: an autocommit DELETE whose foreign-key
        // action (SET DEFAULT) writes into the planed table and whose
        // deferred key then fails at the commit. SQLite takes only the
        // DELETE's own rows out of `total_changes()`; the action's rows,
        // added when its trigger program ended, stay counted.
        "PRAGMA foreign_keys = ON;
         CREATE TABLE p(id INTEGER PRIMARY KEY);
         CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, m INT,
                        pid INT DEFAULT 99 REFERENCES p(id) ON DELETE SET DEFAULT
                        DEFERRABLE INITIALLY DEFERRED);
         INSERT INTO p VALUES (1), (2);
         INSERT INTO t(g, m, pid) VALUES (1, 10, 1), (2, 20, 1), (1, 30, 2);
         PRAGMA pleroma_attach('t', 'g', 'm');
         SELECT changes(), total_changes(), last_insert_rowid();
         DELETE FROM p;
         SELECT changes(), total_changes(), last_insert_rowid();
         SELECT rowid, * FROM t;
         SELECT g, COUNT(*), SUM(m) FROM t GROUP BY g;",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d TEXT, m INTEGER);
         INSERT INTO t(d, m) VALUES ('a', 1);
         PRAGMA pleroma_attach('t', 'd', 'm');
         CREATE VIRTUAL TABLE f USING fts5(body);
         INSERT INTO f VALUES ('hello'), ('world');
         SELECT changes(), total_changes(), last_insert_rowid();
         INSERT INTO f VALUES ('x'), ('y'), ('z');
         SELECT changes(), total_changes(), last_insert_rowid();",
        // Found from outside: an autocommit write whose trigger writes
        // FTS5, which writes out at the wrap's COMMIT with a statement that
        // changes one row, as Pleroma's state row did.
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d1 TEXT, d2 INT, m REAL);
         PRAGMA pleroma_attach('t', 'd1, d2', 'm');
         CREATE VIRTUAL TABLE f USING fts5(x);
         CREATE TRIGGER tri AFTER INSERT ON t BEGIN INSERT INTO f VALUES (new.d1); END;
         INSERT INTO t(d1, d2, m) VALUES ('a', 1, 1), ('b', 2, 2), ('c', 3, 3);
         SELECT changes(), total_changes(), last_insert_rowid();
         DELETE FROM t WHERE d2 < 3;
         SELECT changes(), total_changes(), last_insert_rowid();",
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d1 TEXT, c TEXT CHECK (length(c) < 10));
         PRAGMA pleroma_attach('t', 'd1', 'id');
         CREATE VIRTUAL TABLE f USING fts4(x);
         INSERT INTO t(d1, c) VALUES ('a', 'ok');
         INSERT INTO t(d1, c) VALUES ('a', 'ok'), ('b', 'toolongvalue');
         INSERT INTO f(x) VALUES ('a'), ('b'), ('c');
         SELECT changes(), total_changes(), last_insert_rowid();",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut pl = pleroma::Connection::open(dir.path().join("p.db")).unwrap();
        let sq = rusqlite::Connection::open(dir.path().join("s.db")).unwrap();
        twin_script(&mut pl, &sq, script);
    }
}

/// FTS3/4/5 hold a transaction's rows in memory and write them out at a
/// savepoint or at the commit. In a file with persisted planes, Pleroma's
/// schema statements (guards leaving and coming back) open savepoints of
/// their own: the guards leave before the transaction's first write, a
/// RELEASE that leaves the transaction open writes no state row, and the
/// write-out at the COMMIT counts as the user's. Found from outside:
/// `total_changes()` and the shadow tables' segments differed. Random
/// scripts of FTS and planed writes, transactions and savepoints, against
/// plain SQLite: every counter read, the segments and the blocks the same.
#[test]
fn fts_writes_out_its_rows_where_plain_sqlite_does() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    let words = ["alpha", "beta", "gamma", "delta", "eps"];
    for _case in 0..40 {
        let mut s = String::from(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, m INT);
             INSERT INTO t(g, m) VALUES (1, 10), (2, 20), (1, 30);
             CREATE VIRTUAL TABLE f USING fts4(body);
             CREATE VIRTUAL TABLE f3 USING fts3(body);
             CREATE VIRTUAL TABLE f5 USING fts5(body);
             PRAGMA pleroma_attach('t', 'g', 'm');\n",
        );
        let (mut depth, mut in_txn) = (0, false);
        for _ in 0..40 {
            let fts = ["f", "f3", "f5"][next(3) as usize];
            let line = match next(100) {
                0..20 => format!(
                    "INSERT INTO {fts}(body) VALUES ('{} {}')",
                    words[next(5) as usize],
                    words[next(5) as usize]
                ),
                20..30 => format!("DELETE FROM {fts} WHERE rowid = {}", 1 + next(5)),
                30..45 => format!("UPDATE t SET m = m + 1 WHERE g = {}", 1 + next(3)),
                45..55 => format!("INSERT INTO t(g, m) VALUES ({}, 5), (1, 6)", 1 + next(3)),
                55..62 if !in_txn => {
                    in_txn = true;
                    "BEGIN".into()
                }
                62..70 if in_txn => {
                    in_txn = false;
                    depth = 0;
                    ["COMMIT", "ROLLBACK"][next(2) as usize].into()
                }
                70..77 => {
                    depth += 1;
                    format!("SAVEPOINT s{}", depth - 1)
                }
                77..83 if depth > 0 => {
                    depth -= 1;
                    let verb = ["RELEASE", "ROLLBACK TO"][next(2) as usize];
                    format!("{verb} s{depth}")
                }
                _ => COUNTERS.into(),
            };
            s.push_str(&line);
            s.push_str(";\n");
        }
        s.push_str(
            "COMMIT; RELEASE s0;
             SELECT changes(), total_changes();
             SELECT level, idx, start_block, leaves_end_block, end_block, hex(root) FROM f_segdir ORDER BY 1, 2;
             SELECT level, idx, hex(root) FROM f3_segdir ORDER BY 1, 2;
             SELECT id, hex(block) FROM f5_data ORDER BY id;
             SELECT count(*) FROM f WHERE f MATCH 'alpha';",
        );
        let dir = tempfile::tempdir().unwrap();
        let mut pl = pleroma::Connection::open(dir.path().join("p.db")).unwrap();
        let sq = rusqlite::Connection::open(dir.path().join("s.db")).unwrap();
        twin_script(&mut pl, &sq, &s);
    }
}
