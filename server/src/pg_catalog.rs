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

/// Whether a statement reads PostgreSQL's catalog (which SQLite lacks): a
/// SELECT (or WITH) whose code, outside its strings, quoted names and
/// comments, names `pg_catalog.x` (other than a call of one of
/// [`FUNCTIONS`](crate::translate::FUNCTIONS), and a cast's type,
/// `::pg_catalog.text`), `information_schema.x`, or one of the catalog's
/// tables without a schema after FROM or JOIN.
pub(crate) fn is_catalog_query(sql: &str) -> bool {
    use pleroma::tokenize::Kind;
    let l = sql.to_ascii_lowercase();
    if !l.contains("pg_") && !l.contains("information_schema") {
        return false;
    }
    if is_type_info(&l) {
        return true;
    }
    let code: Vec<_> = pleroma::tokenize::code(sql).collect();
    if !code.first().is_some_and(|t| t.is("select") || t.is("with")) {
        return false;
    }
    let schema_use = code.windows(3).enumerate().any(|(i, w)| {
        let named = w[1].text == "."
            && w[2].kind == Kind::Word
            && (w[0].kind == Kind::Word || w[0].kind == Kind::Quoted)
            && ["pg_catalog", "information_schema"]
                .iter()
                .any(|s| w[0].value().eq_ignore_ascii_case(s));
        let function = w[0].value().eq_ignore_ascii_case("pg_catalog")
            && crate::translate::FUNCTIONS
                .iter()
                .any(|f| w[2].text.eq_ignore_ascii_case(f))
            && code.get(i + 3).is_some_and(|t| t.text == "(");
        named && !function
    });
    schema_use || names_a_catalog_table(&code)
}

/// The relations of the emulated catalog (`catalog_db.rs`).
const CATALOG_TABLES: [&str; 9] = [
    "pg_namespace",
    "pg_class",
    "pg_attribute",
    "pg_attrdef",
    "pg_type",
    "pg_collation",
    "pg_am",
    "pg_description",
    "pg_sequence",
];

/// Whether `sql` reads one of the catalog's relations named without a
/// schema (`FROM pg_class`, `JOIN pg_namespace`), as PostgreSQL resolves
/// such a name: `pg_catalog` comes first on every search path
/// (postgres_fdw's IMPORT FOREIGN SCHEMA writes its query so).
fn names_a_catalog_table(code: &[pleroma::tokenize::Token<'_>]) -> bool {
    code.windows(2).any(|w| {
        (w[0].is("from") || w[0].is("join"))
            && w[1].kind == pleroma::tokenize::Kind::Word
            && CATALOG_TABLES
                .iter()
                .any(|c| w[1].text.eq_ignore_ascii_case(c))
    })
}

/// The answer to a catalog query, with which of its columns are
/// PostgreSQL booleans; `None` when `sql` is not one.
pub(crate) fn answer(
    db: &rusqlite::Connection,
    sql: &str,
    params: &[Value],
) -> Option<Result<(Rows, Vec<bool>), ErrorInfo>> {
    if !is_catalog_query(sql) {
        return None;
    }
    let l = collapse(&sql.to_ascii_lowercase());
    // The same text in its own case (byte for byte where `l` is): psql's
    // name patterns and column names keep their case.
    let orig = collapse(sql);
    let r = if is_type_info(&l) {
        type_info(params)
    } else if l.contains("from pg_catalog.pg_class c") && l.contains("c.relkind in (") {
        list_relations(db, &l, &orig)
    } else if l.contains("from pg_catalog.pg_database d") {
        by_alias(&orig, |a| database_column(db, a))
    } else if l.contains("from pg_catalog.pg_namespace n") && !l.contains("pg_class") {
        by_alias(&orig, namespace_column)
    } else if l
        .contains("from pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i")
    {
        table_indexes(db, &l)
    } else if l.starts_with("select c.oid, n.nspname, c.relname from pg_catalog.pg_class c") {
        find_relation(db, &l, &orig)
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
        return Some(crate::catalog_db::answer(db, sql, params));
    };
    Some(r.map(|rows| {
        let n = rows.columns.len();
        (rows, vec![false; n])
    }))
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
    /// `r`, `v` or `i`, as `pg_class.relkind`.
    kind: &'static str,
    /// An index's table.
    table: Option<String>,
}

fn relations(db: &rusqlite::Connection) -> Result<Vec<Relation>, ErrorInfo> {
    let sqlite = |e: rusqlite::Error| from_router(&pleroma::Error::Sqlite(e));
    let mut stmt = db
        .prepare(
            "SELECT rowid, name, type, tbl_name FROM sqlite_schema \
             WHERE type IN ('table', 'view', 'index') \
             AND NOT (name LIKE 'sqlite\\_%' ESCAPE '\\' AND type <> 'index') \
             ORDER BY name",
        )
        .map_err(sqlite)?;
    let rows = stmt
        .query_map([], |r| {
            let kind: String = r.get(2)?;
            let index = kind == "index";
            Ok(Relation {
                oid: OID_BASE + r.get::<_, i64>(0)?,
                name: r.get(1)?,
                kind: match kind.as_str() {
                    "view" => "v",
                    "index" => "i",
                    _ => "r",
                },
                table: if index { Some(r.get(3)?) } else { None },
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

/// psql's relation-name pattern in `orig` (its own case), found where
/// `l` (the same text in lower case) has `c.relname operator(pg_catalog.~)
/// `; an `E'…'` string has its backslash escapes read.
fn name_pattern(l: &str, orig: &str) -> Option<String> {
    let marker = "c.relname operator(pg_catalog.~) ";
    let i = l.find(marker)? + marker.len();
    let mut toks = pleroma::tokenize::tokens(orig.get(i..)?);
    let t = toks.next()?;
    if t.kind == pleroma::tokenize::Kind::String {
        return Some(t.value().into_owned());
    }
    if t.kind == pleroma::tokenize::Kind::Word && t.text.eq_ignore_ascii_case("e") {
        let s = toks
            .next()
            .filter(|s| s.kind == pleroma::tokenize::Kind::String)?;
        let raw = &s.text[1..s.text.len() - 1];
        let mut out = String::new();
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.extend(chars.next()),
                '\'' => {
                    // A doubled quote.
                    chars.next();
                    out.push('\'');
                }
                c => out.push(c),
            }
        }
        return Some(out);
    }
    None
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
    // Case-sensitive, as PostgreSQL's `~` (psql folds an unquoted pattern
    // to lower case itself).
    go(p.as_bytes(), name.as_bytes())
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn list_relations(db: &rusqlite::Connection, l: &str, orig: &str) -> Result<Rows, ErrorInfo> {
    let kinds = {
        let i = l.find("c.relkind in (").unwrap() + "c.relkind in (".len();
        let end = l[i..].find(')').map_or(l.len(), |e| i + e);
        l[i..end].to_owned()
    };
    // SQLite has tables, views and indexes (\di lists indexes with the
    // table each is on); materialized views, sequences and foreign tables
    // it has not.
    let indexes = kinds.contains("'i'");
    let pattern = name_pattern(l, orig);
    let user = "pleroma";
    let mut rows = Vec::new();
    for r in relations(db)? {
        let wanted = kinds.contains(&format!("'{}'", r.kind));
        if wanted && pattern.as_deref().is_none_or(|p| matches(p, &r.name)) {
            let kind = match r.kind {
                "v" => "view",
                "i" => "index",
                _ => "table",
            };
            let mut row = vec![text("public"), text(&r.name), text(kind), text(user)];
            if indexes {
                row.push(r.table.as_deref().map_or(Value::Null, text));
            }
            rows.push(row);
        }
    }
    let mut columns = vec!["Schema", "Name", "Type", "Owner"];
    if indexes {
        columns.push("Table");
    }
    Ok(Rows {
        columns: columns
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>()
            .into(),
        rows: rows.into(),
    })
}

fn find_relation(db: &rusqlite::Connection, l: &str, orig: &str) -> Result<Rows, ErrorInfo> {
    let pattern = name_pattern(l, orig).unwrap_or_default();
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
        // CHECK constraints, rules and triggers are not listed yet: the
        // flags that would make psql ask for them are off.
        Some(r) => vec![[
            "0",
            r.kind,
            if has_index(db, &r.name)? { "t" } else { "f" },
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
            match r.kind {
                "r" => "heap",
                "i" => "btree",
                _ => "",
            },
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
            // NOT NULL as SQLite enforces it (as the emulated catalog has it,
            // `catalog_db.rs`): declared, a primary key of a WITHOUT ROWID
            // table, or the rowid's INTEGER PRIMARY KEY.
            "SELECT x.name, x.type, \
                    x.\"notnull\" OR (x.pk > 0 AND l.wr) \
                      OR (x.pk = 1 AND upper(x.type) = 'INTEGER' AND NOT l.wr \
                          AND (SELECT COUNT(*) FROM pragma_table_xinfo(?1) WHERE pk > 0) = 1), \
                    x.dflt_value, x.pk, x.hidden \
             FROM pragma_table_xinfo(?1) AS x, pragma_table_list(?1) AS l \
             WHERE l.schema = 'main' ORDER BY x.cid",
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

/// psycopg's `TypeInfo.fetch` (SQLAlchemy's psycopg dialect asks it for
/// `hstore` when it connects), which names `pg_type` without its schema.
fn is_type_info(l: &str) -> bool {
    collapse(l).starts_with(
        "select typname as name, oid, typarray as array_oid, oid::regtype::text as regtype, typdelim as delimiter from pg_type t where t.oid = ",
    )
}

/// The types the server sends and binds (`wire.rs`): name, OID and the
/// OID of its array type, as in PostgreSQL's `pg_type`.
const TYPES: [(&str, i64, i64); 12] = [
    ("bool", 16, 1000),
    ("bytea", 17, 1001),
    ("int8", 20, 1016),
    ("int2", 21, 1005),
    ("int4", 23, 1007),
    ("text", 25, 1009),
    ("float4", 700, 1021),
    ("float8", 701, 1022),
    ("varchar", 1043, 1015),
    ("date", 1082, 1182),
    ("timestamp", 1114, 1115),
    ("numeric", 1700, 1231),
];

/// The row of `TypeInfo.fetch(name)`: one of [`TYPES`], or none (no
/// `hstore`, no other extension type: SQLite has none).
fn type_info(params: &[Value]) -> Result<Rows, ErrorInfo> {
    let name = match params.first() {
        Some(Value::Text(n)) => n.trim_matches('"').to_ascii_lowercase(),
        _ => String::new(),
    };
    let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
    let rows = TYPES
        .iter()
        .filter(|(n, ..)| *n == name)
        .map(|&(n, oid, array)| {
            vec![
                text(n),
                Value::Integer(oid),
                Value::Integer(array),
                text(n),
                text(","),
            ]
        })
        .collect::<Vec<_>>();
    Ok(Rows {
        columns: ["name", "oid", "array_oid", "regtype", "delimiter"]
            .map(String::from)
            .to_vec()
            .into(),
        rows: rows.into(),
    })
}

/// The columns a catalog query names with `AS "Alias"`, in order.
fn aliases(l: &str) -> Vec<String> {
    let toks: Vec<_> = pleroma::tokenize::code(l).collect();
    toks.windows(2)
        .filter(|w| w[0].is("as") && w[1].kind == pleroma::tokenize::Kind::Quoted)
        .map(|w| w[1].value().into_owned())
        .collect()
}

/// A one-row answer to a query of a catalog with one row (the database,
/// the schema): each column by its alias, or the query is declined when
/// one is not known.
fn by_alias(l: &str, value: impl Fn(&str) -> Option<Value>) -> Result<Rows, ErrorInfo> {
    let names = aliases(l);
    let mut row = Vec::with_capacity(names.len());
    for n in &names {
        row.push(value(n).ok_or_else(|| {
            error(
                "0A000",
                format!("pleroma serve does not emulate the catalog column \"{n}\" of: {l}"),
            )
        })?);
    }
    if names.is_empty() {
        return Err(error(
            "0A000",
            format!("pleroma serve does not emulate this catalog query: {l}"),
        ));
    }
    Ok(Rows {
        columns: names.into(),
        rows: vec![row].into(),
    })
}

/// The one database a server serves: its file, named by the file's stem
/// (what `current_database()` gives), in UTF-8 with SQLite's binary
/// collation (PostgreSQL's `C`).
fn database_column(db: &rusqlite::Connection, alias: &str) -> Option<Value> {
    Some(match alias.to_ascii_lowercase().as_str() {
        "name" => text(&crate::translate::database_name(db)),
        "owner" => text("pleroma"),
        "encoding" => text("UTF8"),
        "collate" | "ctype" => text("C"),
        "locale provider" => text("libc"),
        "icu locale" | "icu rules" | "access privileges" | "description" => Value::Null,
        _ => return None,
    })
}

/// SQLite's one schema of a file, shown as `public`.
fn namespace_column(alias: &str) -> Option<Value> {
    Some(match alias.to_ascii_lowercase().as_str() {
        "name" => text("public"),
        "owner" => text("pleroma"),
        "access privileges" | "description" => Value::Null,
        _ => return None,
    })
}

fn has_index(db: &rusqlite::Connection, table: &str) -> Result<bool, ErrorInfo> {
    let sqlite = |e: rusqlite::Error| from_router(&pleroma::Error::Sqlite(e));
    db.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?1)",
        [table],
        |r| r.get(0),
    )
    .map_err(sqlite)
}

/// `\d TABLE`'s index list: each of the table's indexes as psql reads it
/// (`pg_get_indexdef` is `CREATE [UNIQUE] INDEX name ON public.table USING
/// btree (…)`, the part in parentheses and any `WHERE` as SQLite's own
/// `CREATE INDEX` gives them; SQLite's indexes are B-trees), primary keys
/// and UNIQUE constraints as constraints.
fn table_indexes(db: &rusqlite::Connection, l: &str) -> Result<Rows, ErrorInfo> {
    let columns = [
        "relname",
        "indisprimary",
        "indisunique",
        "indisclustered",
        "indisvalid",
        "pg_get_indexdef",
        "pg_get_constraintdef",
        "contype",
        "condeferrable",
        "condeferred",
        "indisreplident",
        "reltablespace",
    ]
    .map(String::from)
    .to_vec();
    let Some(rel) = relation_by_oid(db, l, "where c.oid = ")? else {
        return Ok(Rows {
            columns: columns.into(),
            rows: vec![].into(),
        });
    };
    let sqlite = |e: rusqlite::Error| from_router(&pleroma::Error::Sqlite(e));
    let mut stmt = db
        .prepare(
            "SELECT l.name, l.\"unique\", l.origin, s.sql, \
                    (SELECT group_concat(coalesce(name, '?'), ', ') FROM pragma_index_info(l.name)) \
             FROM pragma_index_list(?1) AS l \
             LEFT JOIN sqlite_schema AS s ON s.type = 'index' AND s.name = l.name",
        )
        .map_err(sqlite)?;
    let mut rows: Vec<Vec<Value>> = stmt
        .query_map([&rel.name], |r| {
            let name: String = r.get(0)?;
            let unique = r.get::<_, i64>(1)? != 0;
            let origin: String = r.get(2)?;
            let sql: Option<String> = r.get(3)?;
            let cols: Option<String> = r.get(4)?;
            // What follows the table's name in SQLite's CREATE INDEX:
            // `(a, b DESC) WHERE …`; for a constraint's index, its columns.
            let body = sql
                .as_deref()
                .and_then(index_body)
                .unwrap_or_else(|| format!("({})", cols.unwrap_or_default()));
            let def = format!(
                "CREATE {}INDEX {name} ON public.{} USING btree {body}",
                if unique { "UNIQUE " } else { "" },
                rel.name
            );
            let (primary, contype) = match origin.as_str() {
                "pk" => (true, Some("p")),
                "u" => (false, Some("u")),
                _ => (false, None),
            };
            let constraint = contype
                .map(|c| format!("{} {body}", if c == "p" { "PRIMARY KEY" } else { "UNIQUE" }));
            let flag = |b: bool| text(if b { "t" } else { "f" });
            Ok(vec![
                Value::Text(name),
                flag(primary),
                flag(unique),
                flag(false),
                flag(true),
                Value::Text(def),
                constraint.map_or(Value::Null, Value::Text),
                contype.map_or(Value::Null, text),
                contype.map_or(Value::Null, |_| text("f")),
                contype.map_or(Value::Null, |_| text("f")),
                flag(false),
                text("0"),
            ])
        })
        .map_err(sqlite)?
        .collect::<Result<_, _>>()
        .map_err(sqlite)?;
    // psql's order: the primary key first, then by name.
    rows.sort_by_key(|r| {
        let name = match &r[0] {
            Value::Text(n) => n.clone(),
            _ => String::new(),
        };
        (r[1] != text("t"), name)
    });
    Ok(Rows {
        columns: columns.into(),
        rows: rows.into(),
    })
}

/// The text after `ON table` in SQLite's `CREATE INDEX` statement: from
/// its first `(` outside a quote to the end.
fn index_body(sql: &str) -> Option<String> {
    let toks: Vec<_> = pleroma::tokenize::tokens(sql).collect();
    let on = toks.iter().position(|t| t.is("on"))?;
    let open = toks[on..]
        .iter()
        .position(|t| t.kind == pleroma::tokenize::Kind::Punct && t.text == "(")?;
    Some(sql[toks[on + open].start..].trim().to_owned())
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
