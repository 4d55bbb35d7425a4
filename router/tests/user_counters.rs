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
