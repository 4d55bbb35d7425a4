//! Inside an explicit transaction, the guards leave the schema before a
//! statement that may write and could fail part-way with an error that is
//! no halt: then SQLite gives the statement exactly the statement journal
//! it gives it without Pleroma.
//!
//! SQLite decides at compile time whether a statement gets a statement
//! journal: `usesStmtJournal = isMultiWrite && mayAbort`
//! (`sqlite3VdbeMakeReady` in `vdbeaux.c`). A guard (`persist/guard.rs`) changes
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
//! rows with an error that is no halt, inside a transaction: with
//! `OE_Abort` (the default error action) SQLite rolls the statement's rows
//! back with the journal and keeps them without one; with `SQLITE_FULL` (or
//! out of memory) it rolls back the statement with the journal and the whole
//! transaction without one. (A halt with `OE_Abort` sets `mayAbort` in plain
//! SQLite too; in autocommit the whole transaction rolls back either way,
//! and `failed.rs` gives the wrap the same outcome.) Such errors that SQL
//! can cause, and when:
//!
//! - a STRICT type error (`OP_TypeCheck`), whatever the statement's `OR`
//!   clause: when the statement writes a STRICT table;
//! - "too many levels of trigger recursion" (`OP_Program`): with
//!   `recursive_triggers` on and a trigger that the statement fires
//!   (without it a trigger never fires itself, so the depth is at most the
//!   number of triggers);
//! - "database or disk is full" from an AUTOINCREMENT table whose rowids
//!   reached the largest integer: when the statement writes such a table;
//! - the same from `PRAGMA max_page_count` set below its default, and out of
//!   memory under `PRAGMA hard_heap_limit`: then any write can fail so.
//!
//! A statement journal also opens a statement savepoint, at which FTS3/4/5
//! tables write out the rows they hold in memory until the commit in plain
//! SQLite: their shadow tables then store other segments. So does every
//! schema statement, Pleroma's `DROP INDEX` of a guard included. So where a
//! virtual table exists, the guards leave before the transaction's first
//! write of any table, while FTS holds nothing; the `CREATE INDEX` that
//! puts them back at the COMMIT writes out what plain SQLite's commit
//! would, and those rows count as the user's in `total_changes()`
//! (`user_counters::schema_statement`).
//!
//! So before a statement inside the transaction, when the connection has one
//! of those (a STRICT or AUTOINCREMENT table, a virtual table, recursive
//! triggers, a lowered page limit: asked once per transaction, again after a schema statement,
//! a PRAGMA or a `ROLLBACK TO`), Pleroma compiles the statement once with
//! an authorizer, which SQLite calls for every table the statement writes,
//! its triggers' writes included (`AuthContext::accessor` names the
//! trigger). When it writes a guarded table and one of the cases above
//! applies, the guards of main are dropped before it runs, and the
//! transaction's state row at its COMMIT or RELEASE puts them back
//! (`persist::persist` re-creates every guard after a schema change), at one
//! scan of each planed table. Nobody else writes main in between: the drop
//! took the write lock. A `ROLLBACK` brings the guards back with everything
//! else; a `ROLLBACK TO` may, so the next write looks again. The verdict is
//! kept per statement text for the transaction.
//!
//! Not covered: "string or blob too big" (a value near SQLite's 1 GB
//! length limit, `||` of two 500 MB blobs), a disk that is really full, and
//! out of memory without a heap limit.

use std::sync::{Arc, Mutex};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::OptionalExtension;

/// What on this connection can make a write fail part-way without a halt
/// (see the module), read from the schemas and settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Unhalted {
    /// A STRICT or AUTOINCREMENT table exists in some schema.
    tables: bool,
    /// A virtual table exists in some schema: FTS3/4/5 (and others) write
    /// their pending rows at every statement savepoint, so a statement
    /// journal the guard gives a statement changes what they store.
    vtabs: bool,
    /// `recursive_triggers` is on.
    recursion: bool,
    /// Some schema's `max_page_count` is below its default, or a hard heap
    /// limit is set: any write can fail with "full" or out of memory.
    limits: bool,
}

impl Unhalted {
    pub(crate) fn read(db: &rusqlite::Connection) -> rusqlite::Result<Unhalted> {
        let mut tables = db
            .prepare_cached("SELECT 1 FROM pragma_table_list WHERE strict LIMIT 1")?
            .exists([])?;
        let recursion: bool = db
            .prepare_cached("PRAGMA recursive_triggers")?
            .query_row([], |r| r.get(0))?;
        // A hard heap limit makes any statement fail with out of memory.
        let mut limits = crate::ffi::hard_heap_limit() > 0;
        let mut vtabs = false;
        let schemas: Vec<String> = db
            .prepare_cached("SELECT name FROM pragma_database_list")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for s in &schemas {
            let q = crate::catalog::quote(s);
            let (autoinc, virt): (bool, bool) = db.query_row(
                &format!(
                    "SELECT coalesce(max(sql LIKE '%autoincrement%'), 0), \
                            coalesce(max(sql LIKE 'create virtual table%'), 0) \
                     FROM {q}.sqlite_schema WHERE type = 'table'"
                ),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            tables |= autoinc;
            vtabs |= virt;
            let pages: i64 =
                db.query_row(&format!("PRAGMA {q}.max_page_count"), [], |r| r.get(0))?;
            limits |= pages < DEFAULT_MAX_PAGE_COUNT;
        }
        Ok(Unhalted {
            tables,
            vtabs,
            recursion,
            limits,
        })
    }

    /// With the process's hard heap limit as it is now (`limited`).
    pub(crate) fn with_heap_limit(mut self, limited: bool) -> Unhalted {
        self.limits |= limited;
        self
    }

    /// Whether a virtual table exists: then the guards leave before the
    /// transaction's first write, while FTS holds no pending rows, so that
    /// the schema statement that drops them writes none out (see the
    /// module).
    pub(crate) fn vtabs(&self) -> bool {
        self.vtabs
    }

    /// Whether any statement can fail that way here.
    pub(crate) fn possible(&self) -> bool {
        self.tables || self.vtabs || self.recursion || self.limits
    }
}

/// Every schema's `schema_version` but temp's, in the connection's order:
/// what a cached [`Unhalted`] and write sets were read under.
pub(crate) fn schema_versions(db: &rusqlite::Connection) -> rusqlite::Result<Vec<i64>> {
    let mut out = Vec::new();
    for s in crate::ffi::schema_names(db) {
        if s.eq_ignore_ascii_case("temp") {
            continue;
        }
        let sql = format!("PRAGMA {}.schema_version", crate::catalog::quote(&s));
        out.push(db.prepare_cached(&sql)?.query_row([], |r| r.get(0))?);
    }
    Ok(out)
}

/// SQLite's default `max_page_count` (`SQLITE_MAX_PAGE_COUNT`).
const DEFAULT_MAX_PAGE_COUNT: i64 = 0xfffffffe;

/// One table a statement writes: its schema, its name, and whether a
/// trigger writes it.
pub(crate) struct Write {
    schema: String,
    table: String,
    by_trigger: bool,
}

impl Write {
    pub(crate) fn of_main(&self) -> bool {
        self.schema == "main"
    }

    /// Whether this write changes one of the `planed` tables or one of
    /// Pleroma's own (`pleroma_…`), by name as SQLite compares names.
    pub(crate) fn reaches(&self, planed: &[String]) -> bool {
        let own = self
            .table
            .get(..8)
            .is_some_and(|p| p.eq_ignore_ascii_case("pleroma_"));
        own || planed.iter().any(|t| t.eq_ignore_ascii_case(&self.table))
    }
}

/// The tables `sql` writes, its triggers' writes included, as SQLite's
/// authorizer names them while it compiles the statement (from the schema
/// this connection holds in memory: compiling opens no transaction).
/// `None`: the statement does not prepare (its error comes from running
/// it).
pub(crate) fn writes(
    db: &mut rusqlite::Connection,
    sql: &str,
) -> rusqlite::Result<Option<Vec<Write>>> {
    let writes: Arc<Mutex<Vec<Write>>> = Arc::default();
    let log = writes.clone();
    db.authorizer(Some(move |ctx: AuthContext<'_>| {
        let table = match ctx.action {
            AuthAction::Insert { table_name }
            | AuthAction::Delete { table_name }
            | AuthAction::Update { table_name, .. } => Some(table_name),
            _ => None,
        };
        if let Some(t) = table {
            log.lock().unwrap_or_else(|e| e.into_inner()).push(Write {
                schema: ctx.database_name.unwrap_or("main").to_owned(),
                table: t.to_owned(),
                by_trigger: ctx.accessor.is_some(),
            });
        }
        Authorization::Allow
    }))?;
    let prepared = db.prepare(sql).map(drop);
    db.authorizer(None::<fn(AuthContext<'_>) -> Authorization>)?;
    if prepared.is_err() {
        return Ok(None);
    }
    let writes = std::mem::take(&mut *writes.lock().unwrap_or_else(|e| e.into_inner()));
    Ok(Some(writes))
}

/// Take the write lock of main the way the statement that follows would:
/// SQLite calls the busy handler only for a connection that holds no
/// snapshot of the file (`sqlite3BtreeBeginTrans` retries only from
/// `TRANS_NONE`), so a read of the schema before a transaction's first
/// write would make that write fail at once with `SQLITE_BUSY` where plain
/// SQLite waits out `busy_timeout`. A `DELETE … WHERE 0` of one of
/// Pleroma's tables (the catalog lists every plane, so exists while one
/// does) begins the write transaction of main alone and changes nothing:
/// no row, no trigger, no statement journal (it is no multi-write), so no
/// FTS savepoint. The caller hides it from the counters. `false`: `table`
/// does not exist (another connection removed it), and nothing was done.
pub(crate) fn lock_main(db: &rusqlite::Connection, table: &str) -> rusqlite::Result<bool> {
    let sql = format!("DELETE FROM main.{} WHERE 0", crate::catalog::quote(table));
    let Ok(mut stmt) = db.prepare_cached(&sql) else {
        return Ok(false);
    };
    match stmt.execute([]) {
        Ok(_) => Ok(true),
        // The table went away since this connection read the schema.
        Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::Unknown) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether running a statement that writes `writes` with the guards of main
/// in the schema could keep other rows than plain SQLite (see the module):
/// it writes one of the `guarded` tables of main, and a STRICT or
/// AUTOINCREMENT table, or anything through a trigger with recursive
/// triggers on, or anything under a lowered page limit.
pub(crate) fn guards_matter(
    db: &rusqlite::Connection,
    writes: &[Write],
    guarded: &[String],
    unhalted: Unhalted,
) -> rusqlite::Result<bool> {
    if !unhalted.possible() {
        return Ok(false);
    }
    let writes_guarded = writes
        .iter()
        .any(|w| w.of_main() && guarded.iter().any(|g| g.eq_ignore_ascii_case(&w.table)));
    if !writes_guarded {
        return Ok(false);
    }
    if unhalted.limits
        || unhalted.vtabs
        || (unhalted.recursion && writes.iter().any(|w| w.by_trigger))
    {
        return Ok(true);
    }
    if !unhalted.tables {
        return Ok(false);
    }
    for Write { schema, table, .. } in writes {
        let strict: Option<bool> = db
            .prepare_cached("SELECT strict FROM pragma_table_list WHERE schema = ?1 AND name = ?2")?
            .query_row([schema, table], |r| r.get(0))
            .optional()?;
        let autoinc = db
            .prepare_cached(&format!(
                "SELECT 1 FROM {}.sqlite_schema WHERE type = 'table' AND name = ?1 \
                 AND sql LIKE '%autoincrement%'",
                crate::catalog::quote(schema)
            ))?
            .exists([table])?;
        if strict == Some(true) || autoinc {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether SQLite could run the statement with its transfer optimization
/// (`xferOptimization` in `insert.c`): `INSERT` or `REPLACE` into a table,
/// with no column list and no WITH, of `SELECT * FROM` one table. That
/// optimization runs only when each index of the destination has a like
/// index on the source, so a guard on the destination turns it off where
/// plain SQLite, with no index there, takes it; and with it SQLite skips
/// the CHECK constraints, ignores `INDEXED BY` and `reverse_unordered_selects`
/// and numbers the rows its own way. So such a statement runs with the
/// guards of main out of the schema. Read from the words, and erring
/// towards yes: whatever follows `SELECT * FROM` is not looked at.
pub(crate) fn may_transfer(sql: &str) -> bool {
    use crate::tokenize::{self, Kind};
    let mut words = tokenize::code(sql).filter(|t| t.kind != Kind::Semi);
    if !words
        .next()
        .is_some_and(|t| t.is("INSERT") || t.is("REPLACE"))
    {
        return false;
    }
    // `OR <conflict>` and then INTO.
    if !words.by_ref().any(|t| t.is("INTO")) {
        return false;
    }
    // The destination, perhaps with its schema.
    if words.next().is_none() {
        return false;
    }
    let mut next = words.next();
    if next.is_some_and(|t| t.text == ".") {
        words.next();
        next = words.next();
    }
    // An alias of the destination (`INSERT INTO t AS x …`, for upserts).
    if next.is_some_and(|t| t.is("AS")) {
        words.next();
        next = words.next();
    }
    if !next.is_some_and(|t| t.is("SELECT")) {
        return false;
    }
    let mut next = words.next();
    if next.is_some_and(|t| t.is("ALL")) {
        next = words.next();
    }
    next.is_some_and(|t| t.text == "*") && words.next().is_some_and(|t| t.is("FROM"))
}

#[cfg(test)]
mod tests {
    use super::may_transfer;

    #[test]
    fn tells_a_transfer_candidate() {
        for yes in [
            "INSERT INTO b SELECT * FROM a",
            "insert or replace into main.b select all * from a indexed by i",
            "REPLACE INTO \"b\" SELECT * FROM aux.a;",
            "/* c */ INSERT INTO b SELECT * FROM a WHERE 0",
        ] {
            assert!(may_transfer(yes), "{yes}");
        }
        for no in [
            "INSERT INTO b(d, m) SELECT * FROM a",
            "INSERT INTO b SELECT d, m FROM a",
            "WITH x AS (SELECT 1) INSERT INTO b SELECT * FROM a",
            "INSERT INTO b VALUES (1, 2)",
            "INSERT INTO b SELECT DISTINCT * FROM a",
            "UPDATE b SET m = 1",
        ] {
            assert!(!may_transfer(no), "{no}");
        }
    }
}
