//! What SQLite keeps after a statement that fails, read from SQLite itself,
//! never from the words of the statement or the schema.
//!
//! A wrapped autocommit statement (`BEGIN IMMEDIATE`, the statement, its
//! state row, `COMMIT`) runs inside a transaction, where SQLite's halt
//! (`sqlite3VdbeHalt`) treats a failure differently than in autocommit:
//!
//! | the VM's `errorAction` | autocommit | inside a transaction |
//! |---|---|---|
//! | `OE_Fail` | commit what the statement did so far | keep it (statement released) |
//! | `OE_Abort` | roll back everything | roll back the statement if it has a statement journal, else *keep* what it did |
//! | `OE_Rollback` | roll back everything | roll back the transaction |
//!
//! So the wrap must commit after a failure exactly when `errorAction` was
//! `OE_Fail`, and roll back otherwise: committing an `OE_Abort` failure
//! would commit rows that plain SQLite rolled back (a STRICT type error
//! under `OR REPLACE` keeps the earlier rows inside a transaction when the
//! statement has no statement journal). SQLite does not report
//! `errorAction`, but two things it does report decide it:
//!
//! - `sqlite3_changes()`: the halt sets it to the statement's count unless
//!   it rolls the statement back (`OE_Abort` sets 0), so a count above 0
//!   after a failure means `OE_Fail`.
//! - The extended error code: `errorAction` starts as `OE_Abort`
//!   (`sqlite3VdbeRewind`) and only an `OP_Halt`/`OP_HaltIfNull` that raises
//!   sets it. Those raise the constraint codes below; every other error
//!   (a STRICT type error `SQLITE_CONSTRAINT_DATATYPE`, a function's error,
//!   `datatype mismatch`, a full disk, …) leaves `OE_Abort`. A halt that
//!   raises with `OE_Abort` sets `mayAbort` at compile time, so a statement
//!   that wrote more than once has a statement journal and SQLite rolled it
//!   back: committing then commits nothing of it, as autocommit would.
//!   This covers `OE_Fail` before the first counted row (a BEFORE trigger's
//!   rows, then `RAISE(FAIL)` or a FAIL constraint on the first row), which
//!   autocommit commits with `changes()` 0.

use crate::mutation::Mutation;

/// Whether plain SQLite, running the failed statement in autocommit, would
/// have committed what it did before failing. `changes` is
/// `sqlite3_changes()` right after the statement; `counted_row`: the hook
/// saw an INSERT or UPDATE of the statement's own (depth 0) on a planed
/// table, a row `OP_Insert` counts: after one, `OE_Fail` would have left
/// `changes()` above 0, so 0 means `OE_Abort` (roll back, and the planes
/// take back their log, instead of a rebuild).
pub(crate) fn autocommit_commits(err: &rusqlite::Error, changes: u64, counted_row: bool) -> bool {
    if crate::mutation::active(Mutation::FailedKeptRolledBack) {
        // The mutation: a failed statement's kept rows are undone.
        return false;
    }
    changes > 0 || (raised_by_halt(err) && !counted_row)
}

/// The error came from an `OP_Halt` (a constraint, `RAISE`), the only place
/// that can set `errorAction` to `OE_Fail`.
fn raised_by_halt(err: &rusqlite::Error) -> bool {
    use rusqlite::ffi;
    let Some(code) = err.sqlite_error().map(|e| e.extended_code) else {
        return false;
    };
    [
        ffi::SQLITE_CONSTRAINT_UNIQUE,
        ffi::SQLITE_CONSTRAINT_PRIMARYKEY,
        ffi::SQLITE_CONSTRAINT_NOTNULL,
        ffi::SQLITE_CONSTRAINT_CHECK,
        ffi::SQLITE_CONSTRAINT_TRIGGER,
        ffi::SQLITE_CONSTRAINT_ROWID,
    ]
    .contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail(db: &rusqlite::Connection, sql: &str) -> (rusqlite::Error, u64) {
        let e = db.execute_batch(sql).unwrap_err();
        (e, db.changes())
    }

    /// Each case against what plain SQLite commits in autocommit.
    #[test]
    fn agrees_with_autocommit_sqlite() {
        let cases: &[(&str, &str, &str)] = &[
            // A STRICT type error under OR REPLACE or OR FAIL is OE_Abort.
            (
                "CREATE TABLE t(id INTEGER PRIMARY KEY, g INT) STRICT",
                "INSERT OR REPLACE INTO t(g) VALUES (1), ('x')",
                "SELECT count(*) FROM t",
            ),
            (
                "CREATE TABLE t(id INTEGER PRIMARY KEY, g INT) STRICT",
                "INSERT OR FAIL INTO t(g) VALUES (1), ('x')",
                "SELECT count(*) FROM t",
            ),
            (
                "CREATE TABLE t(id INTEGER PRIMARY KEY, g INT UNIQUE)",
                "INSERT OR FAIL INTO t(g) VALUES (1), (2), (1)",
                "SELECT count(*) FROM t",
            ),
            (
                "CREATE TABLE t(id INTEGER PRIMARY KEY, g INT UNIQUE)",
                "INSERT INTO t(g) VALUES (1), (2), (1)",
                "SELECT count(*) FROM t",
            ),
            (
                "CREATE TABLE t(g INT NOT NULL ON CONFLICT FAIL); CREATE TABLE log(x); \
                 CREATE TRIGGER tr BEFORE INSERT ON t BEGIN INSERT INTO log VALUES (1); END",
                "INSERT INTO t VALUES (NULL)",
                "SELECT count(*) FROM log",
            ),
            (
                "CREATE TABLE t(g INT); CREATE TABLE log(x); \
                 CREATE TRIGGER tr BEFORE INSERT ON t BEGIN INSERT INTO log VALUES (1); \
                 SELECT RAISE(FAIL, 'no'); END",
                "INSERT INTO t VALUES (1)",
                "SELECT count(*) FROM log",
            ),
            (
                "CREATE TABLE t(g INT); CREATE TABLE log(x); \
                 CREATE TRIGGER tr AFTER INSERT ON t WHEN new.g = 3 BEGIN INSERT INTO log VALUES (1); \
                 SELECT RAISE(ABORT, 'no'); END",
                "INSERT INTO t VALUES (1), (2), (3)",
                "SELECT count(*) FROM t",
            ),
        ];
        for (schema, stmt, probe) in cases {
            let plain = rusqlite::Connection::open_in_memory().unwrap();
            plain.execute_batch(schema).unwrap();
            plain.execute_batch(stmt).unwrap_err();
            assert!(plain.is_autocommit());
            let kept: i64 = plain.query_row(probe, [], |r| r.get(0)).unwrap();

            let wrapped = rusqlite::Connection::open_in_memory().unwrap();
            wrapped.execute_batch(schema).unwrap();
            wrapped.execute_batch("BEGIN").unwrap();
            let (e, changes) = fail(&wrapped, stmt);
            // No hook here: as if no counted row was seen (the slow side).
            let commit = autocommit_commits(&e, changes, false);
            wrapped
                .execute_batch(if commit { "COMMIT" } else { "ROLLBACK" })
                .unwrap();
            let got: i64 = wrapped.query_row(probe, [], |r| r.get(0)).unwrap();
            assert_eq!(got, kept, "{stmt}: plain SQLite keeps {kept}");
        }
    }
}
