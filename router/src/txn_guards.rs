//! Inside an explicit transaction, the guards leave the schema before a
//! statement that may write and could fail part-way with an error that is
//! no halt: then SQLite gives the statement exactly the statement journal
//! it gives it without Pleroma.
//!
//! SQLite decides at compile time whether a statement gets a statement
//! journal: `usesStmtJournal = isMultiWrite && mayAbort`
//! (`sqlite3VdbeMakeReady` in `vdbeaux.c`). A guard (`persist.rs`) changes
//! both inputs of a statement that writes its table, directly or through a
//! trigger:
//!
//! - its WHERE calls a function, and every coded function call sets
//!   `mayAbort` (`sqlite3VdbeAddFunctionCall`), on the top-level statement
//!   even from a trigger's program;
//! - it is an index, and an `OR REPLACE` by rowid on a table with an index
//!   is a multi-write (`sqlite3GenerateConstraintChecks`).
//!
//! A journal changes what stays only when the statement fails after it wrote
//! rows, with `OE_Abort` (the default error action) and an error that is no
//! halt, inside a transaction: with the journal SQLite rolls the statement's
//! rows back, without one it keeps them. (A halt with `OE_Abort` sets
//! `mayAbort` in plain SQLite too; in autocommit the whole transaction rolls
//! back either way, and `failed.rs` gives the wrap the same outcome.) Such
//! errors that SQL can cause:
//!
//! - a STRICT type error (`OP_TypeCheck`), whatever the statement's `OR`
//!   clause: only when some schema of the connection has a STRICT table;
//! - "too many levels of trigger recursion" (`OP_Program`): only with
//!   `recursive_triggers` on and a trigger in main or temp (without it a
//!   trigger never fires itself, so the depth is at most the number of
//!   triggers).
//!
//! So when either can happen, the first statement of the transaction that
//! may write (`sqlite3_stmt_readonly` is false) first drops the guards of
//! main, and the transaction's state row at its COMMIT or RELEASE puts them
//! back (`persist::persist` re-creates every guard after a schema change),
//! at one scan of each planed table. Nobody else writes main in between:
//! the drop took the write lock. A `ROLLBACK` brings the guards back with
//! everything else; a `ROLLBACK TO` may, so the next write looks again.
//!
//! Not covered (no SQL makes them on a default build): "string or blob too
//! big" under a lowered `SQLITE_LIMIT_LENGTH`, and out of memory or a full
//! disk (SQLite rolls back the statement with a journal and the whole
//! transaction without one).

use rusqlite::OptionalExtension;

/// Whether a statement on this connection can fail part-way with an error
/// that is no halt (see the module): a STRICT table in any schema, or
/// recursive triggers on with a trigger in main or temp.
pub(crate) fn unhalted_failure_possible(db: &rusqlite::Connection) -> rusqlite::Result<bool> {
    let strict: Option<i64> = db
        .prepare_cached("SELECT 1 FROM pragma_table_list WHERE strict LIMIT 1")?
        .query_row([], |r| r.get(0))
        .optional()?;
    if strict.is_some() {
        return Ok(true);
    }
    let recursive: bool = db
        .prepare_cached("PRAGMA recursive_triggers")?
        .query_row([], |r| r.get(0))?;
    if !recursive {
        return Ok(false);
    }
    db.prepare_cached(
        "SELECT 1 FROM main.sqlite_schema WHERE type = 'trigger' \
         UNION ALL SELECT 1 FROM temp.sqlite_schema WHERE type = 'trigger' LIMIT 1",
    )?
    .exists([])
}

/// Whether the statement may write (it prepares; a statement that does not
/// prepare writes nothing, and its error comes from running it).
pub(crate) fn may_write(db: &rusqlite::Connection, sql: &str) -> bool {
    db.prepare_cached(sql).is_ok_and(|s| !s.readonly())
}
