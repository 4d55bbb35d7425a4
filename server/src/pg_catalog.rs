//! A small `pg_catalog`, emulated from SQLite's schema: the queries `psql`
//! sends for `\dt` (`\d`, `\dv`) and `\d TABLE`. Each known query is
//! recognised by its shape and answered from `sqlite_schema` and
//! `PRAGMA table_xinfo`; any other catalog query is declined with an error,
//! never answered with made-up rows.
//!
//! Relations get the OID 16384 + their `sqlite_schema` rowid, in schema
//! `public`.

use pgwire::error::ErrorInfo;
use pleroma::rusqlite;
use pleroma::{Rows, Value};

use crate::sqlstate::{error, from_router};

const OID_BASE: i64 = 16384;

/// Whether a statement reads PostgreSQL's catalog (which SQLite lacks).
pub(crate) fn is_catalog_query(sql: &str) -> bool {
    let l = sql.to_ascii_lowercase();
    l.contains("pg_catalog.") || l.contains("information_schema.")
}

/// The answer to a catalog query, or `None` when `sql` is not one.
pub(crate) fn answer(
    db: &rusqlite::Connection,
    sql: &str,
    _params: &[Value],
) -> Option<Result<Rows, ErrorInfo>> {
    if !is_catalog_query(sql) {
        return None;
    }
    let l = collapse(&sql.to_ascii_lowercase());
    let r = if l.contains("from pg_catalog.pg_class c") && l.contains("c.relkind in (") {
        list_relations(db, &l)
    } else if l.starts_with("select c.oid, n.nspname, c.relname from pg_catalog.pg_class c") {
        find_relation(db, &l)
    } else if l.starts_with("select c.relchecks, c.relkind") {
        relation_info(db, &l)
    } else if l.contains("from pg_catalog.pg_attribute a") && l.contains("a.attrelid = '") {
        columns(db, &l)
    } else if [
        "pg_catalog.pg_policy",
        "pg_catalog.pg_statistic_ext",
        "pg_catalog.pg_publication",
        "pg_catalog.pg_inherits",
    ]
    .iter()
    .any(|t| l.contains(t))
    {
        // SQLite has no row policies, extended statistics, publications or
        // inheritance: the true answer is no rows.
        Ok(Rows::default())
    } else {
        Err(error(
            "0A000",
            format!(
                "pleroma serve does not emulate this catalog query (its pg_catalog covers psql's \
                 \\dt and \\d TABLE; the SQL dialect is SQLite's, see sqlite_schema): {}",
                sql.trim()
            ),
        ))
    };
    Some(r)
}

/// The statement with each run of whitespace and comments outside its
/// strings and quoted names as one space (none at either end), as SQLite's
/// tokenizer reads them: a string's own spaces are kept.
fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut gap = false;
    for t in pleroma::tokenize::tokens(s) {
        if t.is_blank() {
            gap = true;
            continue;
        }
        if gap && !out.is_empty() {
            out.push(' ');
        }
        gap = false;
        out.push_str(t.text);
    }
    out
}

struct Relation {
    oid: i64,
    name: String,
    kind: &'static str,
}

fn relations(db: &rusqlite::Connection) -> Result<Vec<Relation>, ErrorInfo> {
    let sqlite = |e: rusqlite::Error| from_router(&pleroma::Error::Sqlite(e));
    let mut stmt = db
        .prepare(
            "SELECT rowid, name, type FROM sqlite_schema \
             WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
             ORDER BY name",
        )
        .map_err(sqlite)?;
    let rows = stmt
        .query_map([], |r| {
            let kind: String = r.get(2)?;
            Ok(Relation {
                oid: OID_BASE + r.get::<_, i64>(0)?,
                name: r.get(1)?,
                kind: if kind == "view" { "v" } else { "r" },
            })
        })
        .map_err(sqlite)?;
    rows.collect::<Result<_, _>>().map_err(sqlite)
}

/// `psql`'s name pattern, which it sends as `~ '^(name)$'`: `.*` for `*`,
/// `.` for `?`, a backslash before other special characters.
/// The string literal right after `marker` in `l`, its value as SQLite
/// reads it (a doubled quote as one).
fn pattern_after(l: &str, marker: &str) -> Option<String> {
    let i = l.find(marker)? + marker.len();
    let t = pleroma::tokenize::tokens(&l[i..]).next()?;
    (t.kind == pleroma::tokenize::Kind::String).then(|| t.value().into_owned())
}

fn matches(pattern: &str, name: &str) -> bool {
    let p = pattern
        .strip_prefix("^(")
        .and_then(|p| p.strip_suffix(")$"))
        .unwrap_or(pattern);
    fn go(p: &[u8], s: &[u8]) -> bool {
        match p {
            [] => s.is_empty(),
            [b'.', b'*', rest @ ..] => (0..=s.len()).any(|k| go(rest, &s[k..])),
            [b'.', rest @ ..] => !s.is_empty() && go(rest, &s[1..]),
            [b'\\', c, rest @ ..] => s.first() == Some(c) && go(rest, &s[1..]),
            [c, rest @ ..] => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    go(p.as_bytes(), name.to_ascii_lowercase().as_bytes())
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn list_relations(db: &rusqlite::Connection, l: &str) -> Result<Rows, ErrorInfo> {
    let kinds = {
        let i = l.find("c.relkind in (").unwrap() + "c.relkind in (".len();
        let end = l[i..].find(')').map_or(l.len(), |e| i + e);
        l[i..end].to_owned()
    };
    // SQLite has tables and views, and indexes, which psql lists with an
    // extra column (\di): not emulated, so declined rather than answered
    // as none. Materialized views, sequences and foreign tables it has not.
    if kinds.contains("'i'") || kinds.contains("'I'") {
        return Err(error(
            "0A000",
            "pleroma serve does not list indexes through pg_catalog (\\di); \
             ask SQLite: SELECT name, tbl_name FROM sqlite_schema WHERE type = 'index'",
        ));
    }
    let pattern = pattern_after(l, "c.relname operator(pg_catalog.~) ");
    let user = "pleroma";
    let mut rows = Vec::new();
    for r in relations(db)? {
        let wanted = kinds.contains(&format!("'{}'", r.kind));
        if wanted && pattern.as_deref().is_none_or(|p| matches(p, &r.name)) {
            let kind = if r.kind == "v" { "view" } else { "table" };
            rows.push(vec![text("public"), text(&r.name), text(kind), text(user)]);
        }
    }
    Ok(Rows {
        columns: ["Schema", "Name", "Type", "Owner"]
            .map(String::from)
            .to_vec()
            .into(),
        rows: rows.into(),
    })
}

fn find_relation(db: &rusqlite::Connection, l: &str) -> Result<Rows, ErrorInfo> {
    let pattern = pattern_after(l, "c.relname operator(pg_catalog.~) ").unwrap_or_default();
    let rows = relations(db)?
        .into_iter()
        .filter(|r| matches(&pattern, &r.name))
        .map(|r| vec![text(&r.oid.to_string()), text("public"), text(&r.name)])
        .collect();
    Ok(Rows {
        columns: ["oid", "nspname", "relname"]
            .map(String::from)
            .to_vec()
            .into(),
        rows,
    })
}

fn relation_by_oid(
    db: &rusqlite::Connection,
    l: &str,
    marker: &str,
) -> Result<Option<Relation>, ErrorInfo> {
    let oid: i64 = pattern_after(l, marker)
        .and_then(|o| o.parse().ok())
        .unwrap_or(-1);
    Ok(relations(db)?.into_iter().find(|r| r.oid == oid))
}

fn relation_info(db: &rusqlite::Connection, l: &str) -> Result<Rows, ErrorInfo> {
    let columns = [
        "relchecks",
        "relkind",
        "relhasindex",
        "relhasrules",
        "relhastriggers",
        "relrowsecurity",
        "relforcerowsecurity",
        "relhasoids",
        "relispartition",
        "reloptions",
        "reltablespace",
        "reloftype",
        "relpersistence",
        "relreplident",
        "amname",
    ]
    .map(String::from)
    .to_vec();
    let rows = match relation_by_oid(db, l, "where c.oid = ")? {
        // Indexes and CHECK constraints are not listed yet: the flags that
        // would make psql ask for them are off.
        Some(r) => vec![[
            "0",
            r.kind,
            "f",
            "f",
            "f",
            "f",
            "f",
            "f",
            "f",
            "",
            "0",
            "",
            "p",
            "d",
            if r.kind == "r" { "heap" } else { "" },
        ]
        .map(text)
        .to_vec()],
        None => vec![],
    };
    Ok(Rows {
        columns: columns.into(),
        rows: rows.into(),
    })
}

fn columns(db: &rusqlite::Connection, l: &str) -> Result<Rows, ErrorInfo> {
    let names = [
        "attname",
        "format_type",
        "pg_get_expr",
        "attnotnull",
        "attcollation",
        "attidentity",
        "attgenerated",
    ]
    .map(String::from)
    .to_vec();
    let Some(rel) = relation_by_oid(db, l, "a.attrelid = ")? else {
        return Ok(Rows {
            columns: names.into(),
            rows: vec![].into(),
        });
    };
    let sqlite = |e: rusqlite::Error| from_router(&pleroma::Error::Sqlite(e));
    let mut stmt = db
        .prepare(
            "SELECT name, type, \"notnull\", dflt_value, pk, hidden FROM pragma_table_xinfo(?1)",
        )
        .map_err(sqlite)?;
    let rows = stmt
        .query_map([&rel.name], |r| {
            let decl: String = r.get(1)?;
            let notnull: i64 = r.get(2)?;
            let dflt: Option<String> = r.get(3)?;
            let hidden: i64 = r.get(5)?;
            Ok(vec![
                Value::Text(r.get(0)?),
                // SQLite's declared type, as written (it has no other).
                Value::Text(decl),
                dflt.map_or(Value::Null, Value::Text),
                text(if notnull != 0 { "t" } else { "f" }),
                Value::Null,
                text(""),
                text(match hidden {
                    2 => "v",
                    3 => "s",
                    _ => "",
                }),
            ])
        })
        .map_err(sqlite)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sqlite)?;
    Ok(Rows {
        columns: names.into(),
        rows: rows.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psql_patterns_match_like_psql_means_them() {
        assert!(matches("^(invoices)$", "invoices"));
        assert!(matches("^(inv.*)$", "invoices"));
        assert!(!matches("^(inv)$", "invoices"));
        assert!(matches("^(a\\_b)$", "a_b"));
    }

    #[test]
    fn collapse_and_pattern_read_the_tokens() {
        let l = collapse(
            "select  c.oid\n  from t -- note\nwhere c.relname operator(pg_catalog.~) '^(a  b)$'",
        );
        assert_eq!(
            l,
            "select c.oid from t where c.relname operator(pg_catalog.~) '^(a  b)$'"
        );
        let m = "c.relname operator(pg_catalog.~) ";
        // A string's own spaces and a doubled quote are the name's (the old
        // scanner collapsed the spaces and stopped at the first quote).
        assert_eq!(pattern_after(&l, m).as_deref(), Some("^(a  b)$"));
        assert_eq!(
            pattern_after("x ~ '^(it''s)$'", "~ ").as_deref(),
            Some("^(it's)$")
        );
        assert_eq!(
            pattern_after("where c.oid = '16385'", "c.oid = ").as_deref(),
            Some("16385")
        );
        assert_eq!(pattern_after("x ~ 'open", "~ "), None);
        assert_eq!(pattern_after("x ~ y", "~ "), None);
    }
}
