//! The dot-commands that read the schema: `.dump`, `.schema`, `.indexes`
//! and `.databases`, worded as the `sqlite3` shell (3.40) words them. They
//! query `sqlite_schema` on the plain SQLite connection, as `sqlite3` does,
//! so Pleroma's own catalog tables (`pleroma_catalog`, `pleroma_catalog_named`, `pleroma_limbs`) are
//! dumped like any other table and a copy rebuilt from the dump brings the
//! planes back when Pleroma opens it. The persisted state and its guards
//! are left out (see `NOT_PERSISTED`).

use std::ffi::CString;
use std::io::{self, Write};

use pleroma::rusqlite::{self, types::ValueRef};

type Result<T> = std::result::Result<T, String>;

/// `.dump` leaves out the persisted planes' state and guards (the only
/// difference from `sqlite3`'s dump of the same file): the script then loads
/// into plain SQLite, and Pleroma, opening the copy, rebuilds the planes from
/// the catalog and persists them again.
const NOT_PERSISTED: &str =
    "name <> 'pleroma_state' AND name NOT LIKE 'pleroma\\_guard\\_%' ESCAPE '\\'";

fn sql_err(e: rusqlite::Error) -> String {
    e.to_string()
}

/// How `.dump` writes its script.
#[derive(Default)]
pub(crate) struct DumpOptions {
    /// LIKE patterns: only tables whose name matches one.
    pub(crate) patterns: Vec<String>,
    /// `--newlines`: text with newlines is written as is, not via replace().
    pub(crate) newlines: bool,
    /// `--data-only`: only the INSERTs.
    pub(crate) data_only: bool,
    /// `--nosys`: leave out sqlite_sequence and sqlite_stat tables.
    pub(crate) no_sys: bool,
}

/// `.dump`: a script that rebuilds the tables (and their rows), then the
/// indexes, triggers and views, inside one transaction.
pub(crate) fn dump(
    db: &rusqlite::Connection,
    opts: &DumpOptions,
    out: &mut dyn Write,
) -> io::Result<Result<()>> {
    let like = if opts.patterns.is_empty() {
        "true".to_owned()
    } else {
        opts.patterns
            .iter()
            .map(|p| format!("name LIKE {} ESCAPE '\\'", quote_text(p)))
            .collect::<Vec<_>>()
            .join(" OR ")
    };
    // `--data-only` writes the INSERTs alone, without the framing.
    if !opts.data_only {
        out.write_all(b"PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n")?;
    }
    let mut errors = Vec::new();
    let tables = format!(
        "SELECT name, type, sql FROM sqlite_schema AS o WHERE ({like}) AND type=='table' \
         AND sql NOT NULL AND {NOT_PERSISTED} ORDER BY tbl_name='sqlite_sequence', rowid"
    );
    let mut writable_schema = false;
    match rows3(db, &tables) {
        Ok(list) => {
            for (name, kind, sql) in list {
                if let Err(e) = dump_table(db, opts, &name, &kind, &sql, &mut writable_schema, out)?
                {
                    errors.push(e);
                }
            }
        }
        Err(e) => errors.push(e),
    }
    if !opts.data_only {
        let rest = format!(
            "SELECT sql FROM sqlite_schema AS o WHERE ({like}) AND sql NOT NULL \
             AND type IN ('index','trigger','view') AND {NOT_PERSISTED}"
        );
        match column0(db, &rest) {
            Ok(list) => {
                for sql in list {
                    out.write_all(&sql)?;
                    // A statement ending in a `--` comment needs the `;` on a
                    // line of its own.
                    let comment = sql.windows(2).any(|w| w == b"--");
                    out.write_all(if comment { b"\n;\n" } else { b";\n" })?;
                }
            }
            Err(e) => errors.push(e),
        }
    }
    if writable_schema {
        out.write_all(b"PRAGMA writable_schema=OFF;\n")?;
    }
    if !opts.data_only {
        out.write_all(if errors.is_empty() {
            b"COMMIT;\n"
        } else {
            b"ROLLBACK; -- due to errors\n"
        })?;
    }
    Ok(match errors.first() {
        None => Ok(()),
        Some(e) => Err(e.clone()),
    })
}

fn dump_table(
    db: &rusqlite::Connection,
    opts: &DumpOptions,
    name: &str,
    kind: &str,
    sql: &[u8],
    writable_schema: &mut bool,
    out: &mut dyn Write,
) -> io::Result<Result<()>> {
    if name == "sqlite_sequence" && !opts.no_sys {
        if !opts.data_only {
            out.write_all(b"DELETE FROM sqlite_sequence;\n")?;
        }
    } else if is_stat_table(name) && !opts.no_sys {
        if !opts.data_only {
            out.write_all(b"ANALYZE sqlite_schema;\n")?;
        }
    } else if name.starts_with("sqlite_") {
        return Ok(Ok(()));
    } else if opts.data_only {
    } else if sql.starts_with(b"CREATE VIRTUAL TABLE") {
        if !*writable_schema {
            out.write_all(b"PRAGMA writable_schema=ON;\n")?;
            *writable_schema = true;
        }
        let q = |s: &[u8]| String::from_utf8_lossy(s).replace('\'', "''");
        writeln!(
            out,
            "INSERT INTO sqlite_schema(type,name,tbl_name,rootpage,sql)\
             VALUES('table','{}','{}',0,'{}');",
            q(name.as_bytes()),
            q(name.as_bytes()),
            q(sql)
        )?;
        return Ok(Ok(()));
    } else {
        schema_line(out, sql)?;
    }
    if kind != "table" {
        return Ok(Ok(()));
    }
    let columns = match column_names(db, "main", name) {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    let select = format!(
        "SELECT {} FROM {}",
        columns
            .iter()
            .map(|c| quote_ident(db, c))
            .collect::<Vec<_>>()
            .join(","),
        quote_ident(db, name)
    );
    let prefix = format!("INSERT INTO {} VALUES(", quote_ident(db, name));
    let mut stmt = match db.prepare(&select) {
        Ok(s) => s,
        Err(e) => return Ok(Err(sql_err(e))),
    };
    let n = stmt.column_count();
    let mut rows = stmt.raw_query();
    loop {
        let row = match rows.next() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Ok(Err(sql_err(e))),
        };
        out.write_all(prefix.as_bytes())?;
        for i in 0..n {
            if i > 0 {
                out.write_all(b",")?;
            }
            match row.get_ref(i) {
                Ok(v) => write_literal(db, out, v, opts.newlines)?,
                Err(e) => return Ok(Err(sql_err(e))),
            }
        }
        out.write_all(b");\n")?;
    }
    Ok(Ok(()))
}

fn is_stat_table(name: &str) -> bool {
    name.len() == 12 && name.starts_with("sqlite_stat")
}

/// 2^63: a REAL in [-2^63, 2^63) converts to an i64 without saturating.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// A value as an SQL literal, written as `sqlite3`'s insert mode writes it.
fn write_literal(
    db: &rusqlite::Connection,
    out: &mut dyn Write,
    v: ValueRef<'_>,
    newlines: bool,
) -> io::Result<()> {
    match v {
        ValueRef::Null => out.write_all(b"NULL"),
        ValueRef::Integer(i) => write!(out, "{i}"),
        ValueRef::Real(r) if r == f64::INFINITY => out.write_all(b"1e999"),
        ValueRef::Real(r) if r == f64::NEG_INFINITY => out.write_all(b"-1e999"),
        // A whole number that fits in an i64 is written as such, with `.0`.
        ValueRef::Real(r) if (-TWO_63..TWO_63).contains(&r) && r == (r as i64) as f64 => {
            write!(out, "{}.0", r as i64)
        }
        // Otherwise with 20 significant digits, by SQLite's own printf.
        ValueRef::Real(r) => {
            let text: String = db
                .prepare_cached("SELECT printf('%!.20g', ?1)")
                .and_then(|mut s| s.query_row([r], |row| row.get(0)))
                .unwrap_or_else(|_| format!("{r:e}"));
            out.write_all(text.as_bytes())
        }
        ValueRef::Text(t) => {
            // `sqlite3` reads text as a C string: it ends at the first NUL.
            let t = &t[..t.iter().position(|&b| b == 0).unwrap_or(t.len())];
            if newlines {
                write_quoted(out, t)
            } else {
                write_quoted_escaped(out, t)
            }
        }
        ValueRef::Blob(b) => {
            out.write_all(b"X'")?;
            for byte in b {
                write!(out, "{byte:02x}")?;
            }
            out.write_all(b"'")
        }
    }
}

fn write_quoted(out: &mut dyn Write, t: &[u8]) -> io::Result<()> {
    out.write_all(b"'")?;
    for &b in t {
        if b == b'\'' {
            out.write_all(b"'")?;
        }
        out.write_all(&[b])?;
    }
    out.write_all(b"'")
}

/// Text quoted, with newlines and carriage returns written as a stand-in
/// that `replace(..., char(10))` turns back, as `sqlite3` writes them.
fn write_quoted_escaped(out: &mut dyn Write, t: &[u8]) -> io::Result<()> {
    let has = |c: u8| t.contains(&c);
    if !has(b'\n') && !has(b'\r') {
        return write_quoted(out, t);
    }
    let nl = has(b'\n').then(|| unused_string(t, "\\n", "\\012"));
    let cr = has(b'\r').then(|| unused_string(t, "\\r", "\\015"));
    if nl.is_some() {
        out.write_all(b"replace(")?;
    }
    if cr.is_some() {
        out.write_all(b"replace(")?;
    }
    out.write_all(b"'")?;
    for &b in t {
        match b {
            b'\'' => out.write_all(b"''")?,
            b'\n' => out.write_all(nl.as_deref().unwrap_or_default().as_bytes())?,
            b'\r' => out.write_all(cr.as_deref().unwrap_or_default().as_bytes())?,
            _ => out.write_all(&[b])?,
        }
    }
    out.write_all(b"'")?;
    if let Some(cr) = &cr {
        write!(out, ",'{cr}',char(13))")?;
    }
    if let Some(nl) = &nl {
        write!(out, ",'{nl}',char(10))")?;
    }
    Ok(())
}

/// A stand-in that does not occur in `t`.
fn unused_string(t: &[u8], a: &str, b: &str) -> String {
    let occurs = |s: &str| t.windows(s.len()).any(|w| w == s.as_bytes());
    if !occurs(a) {
        return a.to_owned();
    }
    if !occurs(b) {
        return b.to_owned();
    }
    (0u32..)
        .map(|i| format!("({a}{i})"))
        .find(|s| !occurs(s))
        .expect("some number is unused")
}

/// A schema statement and its `;`, as `sqlite3` prints one: closing a
/// trailing comment first, and adding IF NOT EXISTS to a CREATE TABLE whose
/// name is quoted.
fn schema_line(out: &mut dyn Write, sql: &[u8]) -> io::Result<()> {
    let mut sql = sql.to_vec();
    let contains = |s: &[u8], w: &[u8]| s.windows(w.len()).any(|x| x == w);
    if contains(&sql, b"/*") || contains(&sql, b"--") {
        for term in [&b""[..], b"*/", b"\n"] {
            let mut candidate = sql.clone();
            candidate.extend_from_slice(term);
            candidate.push(b';');
            if pleroma::split::is_complete(&candidate) {
                candidate.pop();
                sql = candidate;
                break;
            }
        }
    }
    if sql.starts_with(b"CREATE TABLE ") && matches!(sql.get(13), Some(b'\'' | b'"')) {
        out.write_all(b"CREATE TABLE IF NOT EXISTS ")?;
        out.write_all(&sql[13..])?;
    } else {
        out.write_all(&sql)?;
    }
    out.write_all(b";\n")
}

/// A name as `sqlite3` writes it in SQL: bare if it is a plain identifier
/// and no keyword, else in double quotes.
fn quote_ident(_db: &rusqlite::Connection, name: &str) -> String {
    if needs_quotes(name) {
        format!("\"{}\"", name.replace('"', "\"\""))
    } else {
        name.to_owned()
    }
}

fn needs_quotes(name: &str) -> bool {
    let b = name.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {}
        _ => return true,
    }
    if !b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_') {
        return true;
    }
    let Ok(len) = i32::try_from(b.len()) else {
        return true;
    };
    // SAFETY: the pointer and length describe `name`'s bytes.
    unsafe { rusqlite::ffi::sqlite3_keyword_check(b.as_ptr().cast(), len) != 0 }
}

fn quote_text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn rows3(db: &rusqlite::Connection, sql: &str) -> Result<Vec<(String, String, Vec<u8>)>> {
    let mut stmt = db.prepare(sql).map_err(sql_err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                text(r.get_ref(2)?),
            ))
        })
        .map_err(sql_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
}

fn column0(db: &rusqlite::Connection, sql: &str) -> Result<Vec<Vec<u8>>> {
    let mut stmt = db.prepare(sql).map_err(sql_err)?;
    let rows = stmt
        .query_map([], |r| Ok(text(r.get_ref(0)?)))
        .map_err(sql_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
}

fn text(v: ValueRef<'_>) -> Vec<u8> {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => t.to_vec(),
        ValueRef::Null => Vec::new(),
        ValueRef::Integer(i) => i.to_string().into_bytes(),
        ValueRef::Real(r) => crate::format::format_real(r).into_bytes(),
    }
}

/// The columns of a table or view (hidden and generated ones left out, as
/// `PRAGMA table_info` leaves them).
fn column_names(db: &rusqlite::Connection, schema: &str, table: &str) -> Result<Vec<String>> {
    let sql = format!(
        "PRAGMA \"{}\".table_info({})",
        schema.replace('"', "\"\""),
        quote_text(table)
    );
    let mut stmt = db.prepare(&sql).map_err(sql_err)?;
    let rows = stmt
        .query_map([], |r| r.get::<_, String>(1))
        .map_err(sql_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(sql_err)
}

/// The attached databases, `main` first: (name, file).
fn databases(db: &rusqlite::Connection) -> Result<Vec<(String, String)>> {
    let mut stmt = db.prepare("PRAGMA database_list").map_err(sql_err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, Option<String>>(1)?,
                r.get::<_, Option<String>>(2)?,
            ))
        })
        .map_err(sql_err)?;
    let all: Vec<(Option<String>, Option<String>)> =
        rows.collect::<rusqlite::Result<_>>().map_err(sql_err)?;
    Ok(all
        .into_iter()
        .filter_map(|(n, f)| Some((n?, f?)))
        .collect())
}

/// `.schema [PATTERN]`: the CREATE statements, of the tables matching the
/// pattern (LIKE, or GLOB if it has `*`, `?` or `[`) and what is on them.
pub(crate) fn schema(
    db: &rusqlite::Connection,
    pattern: Option<&str>,
    out: &mut dyn Write,
) -> io::Result<Result<()>> {
    if let Some(p) = pattern {
        let is_schema_table = [
            "sqlite_master",
            "sqlite_schema",
            "sqlite_temp_master",
            "sqlite_temp_schema",
        ]
        .iter()
        .any(|t| like(db, p, t));
        if is_schema_table {
            let text = format!(
                "CREATE TABLE {p} (\n  type text,\n  name text,\n  tbl_name text,\n  rootpage integer,\n  sql text\n)"
            );
            schema_line(out, text.as_bytes())?;
        }
    }
    let dbs = match databases(db) {
        Ok(d) => d,
        Err(e) => return Ok(Err(e)),
    };
    for (name, _) in &dbs {
        let table = if name == "temp" {
            "sqlite_temp_schema".to_owned()
        } else {
            format!("\"{}\".sqlite_schema", name.replace('"', "\"\""))
        };
        let filter = match pattern {
            None => String::new(),
            Some(p) => {
                let glob = p.contains(['*', '?', '[']);
                let subject = if p.contains('.') {
                    format!("lower({}||'.'||tbl_name)", quote_text(name))
                } else {
                    "lower(tbl_name)".to_owned()
                };
                if glob {
                    format!("{subject} GLOB {} AND ", quote_text(p))
                } else {
                    format!("{subject} LIKE {} ESCAPE '\\' AND ", quote_text(p))
                }
            }
        };
        let sql = format!(
            "SELECT name, type, sql FROM {table} WHERE {filter}sql IS NOT NULL ORDER BY rowid"
        );
        let rows = match rows3(db, &sql) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        for (object, kind, sql) in rows {
            let mut text = with_schema(&sql, (name != "main").then_some(name.as_str()));
            if kind == "view" {
                if let Some(fake) = fake_schema(db, name, &object) {
                    text.extend_from_slice(format!("\n/* {fake} */").as_bytes());
                }
            }
            schema_line(out, &text)?;
        }
    }
    Ok(Ok(()))
}

fn like(db: &rusqlite::Connection, pattern: &str, s: &str) -> bool {
    db.query_row("SELECT ?2 LIKE ?1 ESCAPE '\\'", [pattern, s], |r| {
        r.get::<_, bool>(0)
    })
    .unwrap_or(false)
}

/// `CREATE TABLE t...` of database `aux` as `CREATE TABLE aux.t...`.
fn with_schema(sql: &[u8], schema: Option<&str>) -> Vec<u8> {
    let Some(schema) = schema else {
        return sql.to_vec();
    };
    for prefix in [
        "TABLE",
        "INDEX",
        "UNIQUE INDEX",
        "VIEW",
        "TRIGGER",
        "VIRTUAL TABLE",
    ] {
        let head = format!("CREATE {prefix} ");
        if sql.starts_with(head.as_bytes()) {
            let name = if needs_quotes(schema) && !schema.eq_ignore_ascii_case("temp") {
                format!("\"{}\"", schema.replace('"', "\"\""))
            } else {
                schema.to_owned()
            };
            let mut v = head.into_bytes();
            v.extend_from_slice(name.as_bytes());
            v.push(b'.');
            v.extend_from_slice(&sql[7 + prefix.len() + 1..]);
            return v;
        }
    }
    sql.to_vec()
}

/// `view(col1,col2)`, the comment `sqlite3` adds under a view's CREATE.
fn fake_schema(db: &rusqlite::Connection, schema: &str, view: &str) -> Option<String> {
    let cols = column_names(db, schema, view).ok()?;
    if cols.is_empty() {
        return None;
    }
    let q = |s: &str| {
        if needs_quotes(s) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_owned()
        }
    };
    let mut s = String::new();
    if schema != "main" {
        s.push_str(&if schema.eq_ignore_ascii_case("temp") {
            schema.to_owned()
        } else {
            q(schema)
        });
        s.push('.');
    }
    s.push_str(&q(view));
    s.push('(');
    s.push_str(&cols.iter().map(|c| q(c)).collect::<Vec<_>>().join(","));
    s.push(')');
    Some(s)
}

/// `.indexes [TABLE]`: the names of the indexes (on tables matching the
/// LIKE pattern), in columns across an 80-character line.
pub(crate) fn indexes(
    db: &rusqlite::Connection,
    pattern: Option<&str>,
    out: &mut dyn Write,
) -> io::Result<Result<()>> {
    let dbs = match databases(db) {
        Ok(d) => d,
        Err(e) => return Ok(Err(e)),
    };
    let parts: Vec<String> = dbs
        .iter()
        .map(|(name, _)| {
            let quoted = format!("\"{}\"", name.replace('"', "\"\""));
            if name == "main" {
                format!("SELECT name FROM {quoted}.sqlite_schema  WHERE type='index'   AND tbl_name LIKE ?1")
            } else {
                format!(
                    "SELECT {}||'.'||name FROM {quoted}.sqlite_schema  WHERE type='index'   AND tbl_name LIKE ?1",
                    quote_text(name)
                )
            }
        })
        .collect();
    let sql = format!("{} ORDER BY 1", parts.join(" UNION ALL "));
    let names: Vec<String> = match db.prepare(&sql).and_then(|mut s| {
        s.query_map([pattern.unwrap_or("%")], |r| {
            Ok(r.get::<_, Option<String>>(0)?.unwrap_or_default())
        })?
        .collect()
    }) {
        Ok(n) => n,
        Err(e) => return Ok(Err(sql_err(e))),
    };
    columns(out, &names)?;
    Ok(Ok(()))
}

/// Names in columns, down then across, as `sqlite3` lists tables.
fn columns(out: &mut dyn Write, names: &[String]) -> io::Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    let width = names.iter().map(String::len).max().unwrap_or(0);
    let per_line = (80 / (width + 2)).max(1);
    let lines = names.len().div_ceil(per_line);
    for i in 0..lines {
        for (k, name) in names.iter().enumerate().skip(i).step_by(lines) {
            let sep = if k < lines { "" } else { "  " };
            write!(out, "{sep}{name:<width$}")?;
        }
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// `.databases`: each attached database, its file and whether it is
/// writable (and in a transaction).
pub(crate) fn list_databases(
    db: &rusqlite::Connection,
    out: &mut dyn Write,
) -> io::Result<Result<()>> {
    let dbs = match databases(db) {
        Ok(d) => d,
        Err(e) => return Ok(Err(e)),
    };
    for (name, file) in dbs {
        let Ok(cname) = CString::new(name.as_str()) else {
            continue;
        };
        // SAFETY: the handle is open for the connection's lifetime and the
        // name is a NUL-terminated string that outlives the calls.
        let (readonly, txn) = unsafe {
            let h = db.handle();
            (
                rusqlite::ffi::sqlite3_db_readonly(h, cname.as_ptr()) == 1,
                rusqlite::ffi::sqlite3_txn_state(h, cname.as_ptr()),
            )
        };
        let file = if file.is_empty() {
            "\"\"".to_owned()
        } else {
            file
        };
        let txn = match txn {
            rusqlite::ffi::SQLITE_TXN_READ => " read-txn",
            rusqlite::ffi::SQLITE_TXN_WRITE => " write-txn",
            _ => "",
        };
        writeln!(
            out,
            "{name}: {file} {}{txn}",
            if readonly { "r/o" } else { "r/w" }
        )?;
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(sql: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        schema_line(&mut out, sql).unwrap();
        out
    }

    #[test]
    fn a_schema_line_closes_a_trailing_comment_but_not_a_quoted_one() {
        assert_eq!(
            line(b"CREATE TABLE t(a) -- note"),
            b"CREATE TABLE t(a) -- note\n;\n"
        );
        assert_eq!(
            line(b"CREATE TABLE t(a) /* open"),
            b"CREATE TABLE t(a) /* open*/;\n"
        );
        assert_eq!(
            line(b"CREATE TABLE t(a DEFAULT '-- /*')"),
            b"CREATE TABLE t(a DEFAULT '-- /*');\n"
        );
        // Not UTF-8: still read by sqlite3_complete.
        assert_eq!(
            line(b"CREATE TABLE \xff(a) --"),
            b"CREATE TABLE \xff(a) --\n;\n"
        );
    }
}
