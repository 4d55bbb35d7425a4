//! `VACUUM` of the main file on a connection with planes: the same rows,
//! rowids and `last_insert_rowid()` as plain SQLite.
//!
//! Two things Pleroma adds to the schema change what SQLite's VACUUM does
//! (`sqlite3RunVacuum` in `vacuum.c`, `xferOptimization` in `insert.c`):
//!
//! - **Rowids.** VACUUM copies each table with the transfer optimization.
//!   A rowid table without an INTEGER PRIMARY KEY gets *new* rowids
//!   (`OP_NewRowid`: 1, 2, … in rowid order) only when it has no index
//!   (`pDest->pIndex == 0`); with any index, the rowids are kept, since the
//!   indexes refer to them. A guard index (`pleroma_guard_<table>`) is such
//!   an index. So before VACUUM the guards of tables whose only index is the
//!   guard are dropped (in a transaction of their own), and the state row
//!   written right after VACUUM puts them back (`persist::persist` re-creates
//!   every guard after a schema change). This does not depend on the
//!   guard's text, only on its being an index. In between, the file has no
//!   guard on those tables: a crash there leaves a state whose schema
//!   fingerprint no longer matches (rebuilt on open), and another
//!   connection's commit there moves `data_version`, so the state row is not
//!   written and the next write rebuilds (a missing guard also rebuilds).
//! - **`last_insert_rowid()`.** VACUUM's last step inserts the views,
//!   triggers and virtual tables into the new `sqlite_schema` (a plain
//!   INSERT, which sets the last rowid), after every table and index: so
//!   when there is such a row, `last_insert_rowid()` is the number of rows
//!   in the new `sqlite_schema`. Pleroma's tables and guards add rows there;
//!   the rowid plain SQLite reports is that count without them.

use crate::mutation::Mutation;

/// Pleroma's own tables: their rows in `sqlite_schema` (and their
/// automatic indexes) are not the user's.
const OWN_TABLES: &str =
    "('pleroma_catalog', 'pleroma_catalog_named', 'pleroma_limbs', 'pleroma_settings', 'pleroma_state')";

/// Drop the guards of `schema` whose table VACUUM would renumber without
/// them: rowid tables whose only index is their guard. Returns whether any
/// was dropped. For main, the state row after VACUUM puts them back; for
/// another attached file with persisted planes of its own, its next open
/// finds them missing, rebuilds its planes and puts them back.
pub(crate) fn drop_renumbering_guards(
    db: &rusqlite::Connection,
    schema: &str,
) -> rusqlite::Result<bool> {
    if crate::mutation::active(Mutation::VacuumKeepsGuards) {
        // The mutation: the guards stay, and VACUUM keeps the rowids.
        return Ok(false);
    }
    let s = crate::catalog::quote(schema);
    let guards: Vec<String> = db
        .prepare(&format!(
            "SELECT g.name FROM {s}.sqlite_schema g \
             WHERE g.type = 'index' AND g.name LIKE 'pleroma\\_guard\\_%' ESCAPE '\\' \
             AND g.tbl_name <> 'pleroma_state' \
             AND NOT EXISTS (SELECT 1 FROM {s}.sqlite_schema i WHERE i.type = 'index' \
                             AND i.tbl_name = g.tbl_name AND i.name <> g.name)"
        ))?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if guards.is_empty() {
        return Ok(false);
    }
    db.execute_batch("BEGIN IMMEDIATE")?;
    let r = guards.iter().try_for_each(|g| {
        crate::user_counters::schema_statement(
            db,
            &format!("DROP INDEX {s}.{}", crate::catalog::quote(g)),
        )
    });
    match r {
        Ok(()) => db.execute_batch("COMMIT")?,
        Err(e) => {
            let _ = db.execute_batch("ROLLBACK");
            return Err(e);
        }
    }
    Ok(true)
}

/// After a VACUUM of `schema`: the `last_insert_rowid()` plain SQLite would
/// report, when VACUUM set it (a view, trigger or virtual table exists);
/// `None` when VACUUM left it as it was.
pub(crate) fn plain_last_insert_rowid(
    db: &rusqlite::Connection,
    schema: &str,
) -> rusqlite::Result<Option<i64>> {
    let own = format!(
        "(tbl_name IN {OWN_TABLES} OR (type = 'index' AND name LIKE 'pleroma\\_guard\\_%' ESCAPE '\\'))"
    );
    let (copied, user_rows): (i64, i64) = db.query_row(
        &format!(
            "SELECT count(*) FILTER (WHERE type IN ('view', 'trigger') \
                                     OR (type = 'table' AND rootpage = 0)), \
                    count(*) FILTER (WHERE NOT {own}) \
             FROM {}.sqlite_schema",
            crate::catalog::quote(schema)
        ),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok((copied > 0).then_some(user_rows))
}
