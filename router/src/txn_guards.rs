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
//!   clause: only when the statement writes a STRICT table;
//! - "too many levels of trigger recursion" (`OP_Program`): only with
//!   `recursive_triggers` on and a trigger that the statement fires
//!   (without it a trigger never fires itself, so the depth is at most the
//!   number of triggers).
//!
//! So before a statement inside the transaction, Pleroma compiles it once
//! with an authorizer, which SQLite calls for every table the statement
//! writes, its triggers' writes included (`AuthContext::accessor` names the
//! trigger). When it writes a guarded table, and also a STRICT table or
//! (with `recursive_triggers` on) through a trigger, the guards of main are
//! dropped before it runs, and the transaction's state row at its COMMIT or
//! RELEASE puts them back (`persist::persist` re-creates every guard after
//! a schema change), at one scan of each planed table. Nobody else writes
//! main in between: the drop took the write lock. A `ROLLBACK` brings the
//! guards back with everything else; a `ROLLBACK TO` may, so the next write
//! looks again. The verdict is kept per statement text for the transaction,
//! until a schema statement, a PRAGMA or a `ROLLBACK TO`.
//!
//! Not covered (no SQL makes them on a default build): "string or blob too
//! big" under a lowered `SQLITE_LIMIT_LENGTH`, and out of memory or a full
//! disk (SQLite rolls back the statement with a journal and the whole
//! transaction without one).

use std::sync::{Arc, Mutex};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::OptionalExtension;

/// Whether running `sql` with the guards of main in the schema could keep
/// other rows than plain SQLite (see the module): it writes one of the
/// `guarded` tables of main, and a STRICT table or, with recursive
/// triggers on, anything through a trigger. A statement that does not
/// prepare writes nothing (its error comes from running it).
pub(crate) fn guards_matter(
    db: &mut rusqlite::Connection,
    sql: &str,
    guarded: &[String],
) -> rusqlite::Result<bool> {
    // (schema, table, written by a trigger)
    let writes: Arc<Mutex<Vec<(String, String, bool)>>> = Arc::default();
    let log = writes.clone();
    db.authorizer(Some(move |ctx: AuthContext<'_>| {
        let table = match ctx.action {
            AuthAction::Insert { table_name }
            | AuthAction::Delete { table_name }
            | AuthAction::Update { table_name, .. } => Some(table_name),
            _ => None,
        };
        if let Some(t) = table {
            log.lock().unwrap_or_else(|e| e.into_inner()).push((
                ctx.database_name.unwrap_or("main").to_owned(),
                t.to_owned(),
                ctx.accessor.is_some(),
            ));
        }
        Authorization::Allow
    }))?;
    let prepared = db.prepare(sql).map(drop);
    db.authorizer(None::<fn(AuthContext<'_>) -> Authorization>)?;
    if prepared.is_err() {
        return Ok(false);
    }
    let writes = std::mem::take(&mut *writes.lock().unwrap_or_else(|e| e.into_inner()));
    let writes_guarded = writes
        .iter()
        .any(|(s, t, _)| s == "main" && guarded.iter().any(|g| g.eq_ignore_ascii_case(t)));
    if !writes_guarded {
        return Ok(false);
    }
    if writes.iter().any(|(_, _, by_trigger)| *by_trigger) && recursive_triggers(db)? {
        return Ok(true);
    }
    for (schema, table, _) in &writes {
        let strict: Option<bool> = db
            .prepare_cached("SELECT strict FROM pragma_table_list WHERE schema = ?1 AND name = ?2")?
            .query_row([schema, table], |r| r.get(0))
            .optional()?;
        if strict == Some(true) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn recursive_triggers(db: &rusqlite::Connection) -> rusqlite::Result<bool> {
    db.prepare_cached("PRAGMA recursive_triggers")?
        .query_row([], |r| r.get(0))
}
