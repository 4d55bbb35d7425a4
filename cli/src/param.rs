//! `.parameter` (`.param`): SQL parameter bindings kept, as the `sqlite3`
//! shell keeps them, in `temp.sqlite_parameters(key TEXT PRIMARY KEY,
//! value)`, and bound by name to each statement that has parameters.

use std::io::{self, Write};

use pleroma::rusqlite::config::DbConfig;
use pleroma::rusqlite::{self, OptionalExtension};
use pleroma::tokenize::Kind;
use pleroma::{Connection, Value};

/// What `sqlite3` prints (on its output) for a `.parameter` it cannot read.
pub(crate) const USAGE: &str = "\
.parameter CMD ...       Manage SQL parameter bindings
   clear                   Erase all bindings
   init                    Initialize the TEMP table that holds bindings
   list                    List the current parameter bindings
   set PARAMETER VALUE     Given SQL parameter PARAMETER a value of VALUE
                           PARAMETER should start with one of: $ : @ ?
   unset PARAMETER         Remove PARAMETER from the binding table
";

/// Run `.parameter ARGS`. Returns an error line that `sqlite3` prints on
/// its output and counts as an error (a `set` whose row cannot be written).
pub(crate) fn command(
    conn: &mut Connection,
    args: &[&str],
    out: &mut dyn Write,
) -> io::Result<Option<String>> {
    match args {
        ["clear"] => {
            // sqlite3 ignores the outcome of each step of these commands.
            let _ = conn.execute("DROP TABLE IF EXISTS temp.sqlite_parameters;", &[]);
        }
        ["list"] => list(conn, out)?,
        ["init"] => init(conn),
        ["set", key, value] => return Ok(set(conn, key, value)),
        ["unset", key] => {
            let sql = format!(
                "DELETE FROM temp.sqlite_parameters WHERE key={}",
                quote(key)
            );
            let _ = conn.execute(&sql, &[]);
        }
        _ => out.write_all(USAGE.as_bytes())?,
    }
    Ok(None)
}

/// The values to bind to `stmt`'s parameters, in SQLite's numbering: each
/// looked up by its name (`?N` for a nameless `?`), NULL when not set.
/// Empty for a statement without parameters, or one SQLite cannot prepare
/// (its error is then SQLite's own, from running it).
pub(crate) fn bindings(conn: &Connection, stmt: &str) -> Vec<Value> {
    // Most statements have no parameter: told without preparing.
    if !pleroma::tokenize::code(stmt).any(|t| t.kind == Kind::Variable) {
        return Vec::new();
    }
    let db = conn.sqlite();
    let Ok(prepared) = db.prepare(stmt) else {
        return Vec::new();
    };
    let mut lookup = db
        .prepare("SELECT value FROM temp.sqlite_parameters WHERE key=?1")
        .ok();
    (1..=prepared.parameter_count())
        .map(|i| {
            let name = prepared
                .parameter_name(i)
                .map_or_else(|| format!("?{i}"), str::to_owned);
            lookup
                .as_mut()
                .and_then(|q| q.query_row([&name], |r| r.get(0)).optional().ok())
                .flatten()
                .unwrap_or(Value::Null)
        })
        .collect()
}

/// Create the table if missing. A table named `sqlite_...` needs the
/// schema writable (and defensive mode off) while it is created.
fn init(conn: &Connection) {
    let db = conn.sqlite();
    let defensive = db.db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE);
    let writable = db.db_config(DbConfig::SQLITE_DBCONFIG_WRITABLE_SCHEMA);
    let _ = db.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, false);
    let _ = db.set_db_config(DbConfig::SQLITE_DBCONFIG_WRITABLE_SCHEMA, true);
    let _ = db.execute_batch(
        "CREATE TABLE IF NOT EXISTS temp.sqlite_parameters(\n  key TEXT PRIMARY KEY,\n  value\n) WITHOUT ROWID;",
    );
    if let Ok(w) = writable {
        let _ = db.set_db_config(DbConfig::SQLITE_DBCONFIG_WRITABLE_SCHEMA, w);
    }
    if let Ok(d) = defensive {
        let _ = db.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, d);
    }
}

/// `.parameter set KEY VALUE`: VALUE as an SQL expression, or else as text.
/// The row is written through the connection, so that `.changes` counts it
/// as `sqlite3` does.
fn set(conn: &mut Connection, key: &str, value: &str) -> Option<String> {
    init(conn);
    // Only the first statement counts, as in sqlite3: VALUE may end it
    // early (`5); ...`), and what follows is not run.
    let insert = |v: &str| {
        let sql = format!(
            "REPLACE INTO temp.sqlite_parameters(key,value)VALUES({},{v});",
            quote(key)
        );
        match pleroma::split::statements(&sql).into_iter().next() {
            Some(first) => sql[first].to_owned(),
            None => sql,
        }
    };
    let mut sql = insert(value);
    if prepare(conn.sqlite(), &sql).is_err() {
        sql = insert(&quote(value));
        if let Err(e) = prepare(conn.sqlite(), &sql) {
            return Some(format!("Error: {e}"));
        }
    }
    // As in sqlite3, a value that fails while it is computed leaves the
    // binding as it was, without a word.
    let _ = conn.execute(&sql, &[]);
    None
}

/// Whether SQLite can prepare `sql`; the error as `sqlite3_errmsg` words it.
fn prepare(db: &rusqlite::Connection, sql: &str) -> Result<(), String> {
    match db.prepare(sql) {
        Ok(_) => Ok(()),
        Err(rusqlite::Error::SqlInputError { msg, .. }) => Err(msg),
        Err(rusqlite::Error::SqliteFailure(e, msg)) => Err(msg.unwrap_or_else(|| e.to_string())),
        Err(e) => Err(e.to_string()),
    }
}

/// `.parameter list`: each key padded to the longest (at most 40 wide),
/// then its value as an SQL literal.
fn list(conn: &Connection, out: &mut dyn Write) -> io::Result<()> {
    let db = conn.sqlite();
    let width: i64 = db
        .query_row(
            "SELECT max(length(key)) FROM temp.sqlite_parameters;",
            [],
            |r| r.get::<_, Option<i64>>(0),
        )
        .ok()
        .flatten()
        .unwrap_or(0)
        .min(40);
    if width <= 0 {
        return Ok(());
    }
    let Ok(mut stmt) = db.prepare("SELECT key, quote(value) FROM temp.sqlite_parameters;") else {
        return Ok(());
    };
    let Ok(rows) = stmt.query_map([], |r| {
        Ok((
            r.get::<_, Option<String>>(0)?.unwrap_or_default(),
            r.get::<_, Option<String>>(1)?.unwrap_or_default(),
        ))
    }) else {
        return Ok(());
    };
    // printf's `%-*s` pads to a width in bytes.
    let width = usize::try_from(width).unwrap_or(0);
    for (key, value) in rows.flatten() {
        let pad = width.saturating_sub(key.len());
        writeln!(out, "{key}{} {value}", " ".repeat(pad))?;
    }
    Ok(())
}

/// `%Q`: a string as an SQL literal.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}
