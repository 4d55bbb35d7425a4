//! The catalog queries of PostgreSQL drivers and toolkits (SQLAlchemy's
//! reflection, pandas' `has_table`), run by SQLite itself over a
//! `pg_catalog` built from the served file's schema.
//!
//! Each session thread keeps a private in-memory SQLite connection with an
//! attached in-memory database named `pg_catalog`, so `pg_catalog.pg_class`
//! and `pg_catalog.pg_class.relname` mean there what they mean to
//! PostgreSQL. Before each query its tables are filled again from the
//! file's `sqlite_schema` and `pragma_table_xinfo`, then the query runs,
//! rewritten by `translate::to_sqlite_catalog` (`::regclass`, `= ANY
//! (ARRAY[…])`, `pg_catalog.f(…)`), with the functions PostgreSQL's
//! catalog queries call.
//!
//! Only catalogs whose rows are all known are made: `pg_namespace`,
//! `pg_class`, `pg_attribute`, `pg_attrdef`, `pg_type` (the types the
//! server sends), `pg_collation`, `pg_am`, and `pg_description` and
//! `pg_sequence`, which are empty because SQLite has no comments and no
//! sequences. A query of any other catalog fails with SQLite's "no such
//! table", named in the error: never an answer of made-up rows.
//!
//! The catalog never touches the served file: it is another connection,
//! and Pleroma's planes do not see it.

use std::cell::RefCell;

use pgwire::error::ErrorInfo;
use pleroma::rusqlite::functions::FunctionFlags;
use pleroma::rusqlite::types::{Value as SqlValue, ValueRef};
use pleroma::rusqlite::{self, params_from_iter};
use pleroma::{Rows, Value};

use crate::sqlstate::error;
use crate::wire::ColType;

/// OIDs of the relations, as `pg_catalog.rs` gives them.
const OID_BASE: i64 = 16384;
const PUBLIC: i64 = 2200;
const PG_CATALOG: i64 = 11;

const SCHEMA: &str = "
CREATE TABLE pg_catalog.pg_namespace(oid INTEGER PRIMARY KEY, nspname TEXT, nspowner INTEGER);
CREATE TABLE pg_catalog.pg_class(
    oid INTEGER PRIMARY KEY, relname TEXT, relnamespace INTEGER, relkind TEXT,
    relpersistence TEXT, relowner INTEGER, relam INTEGER, relhasindex BOOLEAN, relchecks INTEGER,
    relnatts INTEGER, relispartition BOOLEAN, reloftype INTEGER, reltablespace INTEGER,
    reltoastrelid INTEGER, relhasrules BOOLEAN, relhastriggers BOOLEAN, relrowsecurity BOOLEAN,
    relforcerowsecurity BOOLEAN, relreplident TEXT, reltuples REAL);
CREATE TABLE pg_catalog.pg_attribute(
    attrelid INTEGER, attname TEXT, atttypid INTEGER, atttypmod INTEGER, attnum INTEGER,
    attnotnull BOOLEAN, atthasdef BOOLEAN, attisdropped BOOLEAN, attidentity TEXT,
    attgenerated TEXT, attcollation INTEGER, attndims INTEGER, attlen INTEGER,
    PRIMARY KEY (attrelid, attnum));
CREATE TABLE pg_catalog.pg_attrdef(oid INTEGER PRIMARY KEY, adrelid INTEGER, adnum INTEGER, adbin TEXT);
CREATE TABLE pg_catalog.pg_type(
    oid INTEGER PRIMARY KEY, typname TEXT, typnamespace INTEGER, typtype TEXT, typarray INTEGER,
    typdelim TEXT, typbasetype INTEGER, typtypmod INTEGER, typnotnull BOOLEAN, typdefault TEXT,
    typcollation INTEGER, typlen INTEGER, typelem INTEGER, typrelid INTEGER);
CREATE TABLE pg_catalog.pg_collation(oid INTEGER PRIMARY KEY, collname TEXT, collnamespace INTEGER);
CREATE TABLE pg_catalog.pg_am(oid INTEGER PRIMARY KEY, amname TEXT, amtype TEXT);
CREATE TABLE pg_catalog.pg_description(objoid INTEGER, classoid INTEGER, objsubid INTEGER, description TEXT);
CREATE TABLE information_schema.tables(
    table_catalog TEXT, table_schema TEXT, table_name TEXT, table_type TEXT,
    self_referencing_column_name TEXT, reference_generation TEXT, user_defined_type_catalog TEXT,
    user_defined_type_schema TEXT, user_defined_type_name TEXT, is_insertable_into TEXT,
    is_typed TEXT, commit_action TEXT);
CREATE TABLE information_schema.columns(
    table_catalog TEXT, table_schema TEXT, table_name TEXT, column_name TEXT,
    ordinal_position INTEGER, column_default TEXT, is_nullable TEXT, data_type TEXT,
    character_maximum_length INTEGER, character_octet_length INTEGER, numeric_precision INTEGER,
    numeric_precision_radix INTEGER, numeric_scale INTEGER, datetime_precision INTEGER,
    udt_catalog TEXT, udt_schema TEXT, udt_name TEXT, is_generated TEXT, generation_expression TEXT,
    is_identity TEXT, is_updatable TEXT);
CREATE TABLE pg_catalog.pg_sequence(
    seqrelid INTEGER, seqtypid INTEGER, seqstart INTEGER, seqincrement INTEGER, seqmax INTEGER,
    seqmin INTEGER, seqcache INTEGER, seqcycle INTEGER);
";

/// The types of `pg_type`: what the server sends and binds (`wire.rs`),
/// with PostgreSQL's OIDs, array OIDs, `format_type` names and lengths.
const TYPES: [(i64, &str, i64, &str, i64); 12] = [
    (16, "bool", 1000, "boolean", 1),
    (17, "bytea", 1001, "bytea", -1),
    (20, "int8", 1016, "bigint", 8),
    (21, "int2", 1005, "smallint", 2),
    (23, "int4", 1007, "integer", 4),
    (25, "text", 1009, "text", -1),
    (700, "float4", 1021, "real", 4),
    (701, "float8", 1022, "double precision", 8),
    (1043, "varchar", 1015, "character varying", -1),
    (1082, "date", 1182, "date", 4),
    (1114, "timestamp", 1115, "timestamp without time zone", 8),
    (1700, "numeric", 1231, "numeric", -1),
];

thread_local! {
    /// The session thread's catalog connection, made at its first query.
    static CATALOG: RefCell<Option<rusqlite::Connection>> = const { RefCell::new(None) };
    /// The relations of the last fill, by lower-cased name: their OIDs
    /// (`'t'::regclass`).
    static OIDS: RefCell<std::collections::HashMap<String, i64>> = RefCell::new(Default::default());
    /// Each table's bytes (its B-tree's pages), by OID, read when a query
    /// calls `pg_relation_size`.
    static SIZES: RefCell<std::collections::HashMap<i64, i64>> = RefCell::new(Default::default());
}

fn sqlite_error(e: rusqlite::Error) -> ErrorInfo {
    error(
        "0A000",
        format!("pleroma serve does not emulate this catalog query ({e})"),
    )
}

/// Runs a catalog query `sql` (PostgreSQL's text) over a `pg_catalog`
/// made from `main`'s schema; with which of its columns are PostgreSQL
/// booleans (a catalog column declared `BOOLEAN`, named as it is).
pub(crate) fn answer(
    main: &rusqlite::Connection,
    sql: &str,
    params: &[Value],
) -> Result<(Rows, Vec<bool>), ErrorInfo> {
    let translated = crate::translate::to_sqlite_catalog(sql)?;
    let translated = crate::wire::numbered_placeholders(&translated);
    CATALOG.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(open().map_err(sqlite_error)?);
        }
        let db = slot.as_ref().expect("made above");
        fill(db, main).map_err(sqlite_error)?;
        if sql.to_ascii_lowercase().contains("pg_relation_size") {
            sizes(main).map_err(sqlite_error)?;
        }
        let decline = |e: rusqlite::Error| {
            error(
                "0A000",
                format!(
                    "pleroma serve does not emulate this catalog query ({e}): {}",
                    sql.trim()
                ),
            )
        };
        let mut stmt = db.prepare(&translated).map_err(decline)?;
        let columns: Vec<String> = stmt.column_names().into_iter().map(String::from).collect();
        let bools: Vec<bool> = stmt
            .columns()
            .map(|c| c.decl_type() == Some("BOOLEAN"))
            .collect();
        let n = columns.len();
        let binds = params.iter().map(|v| match v {
            Value::Null => SqlValue::Null,
            Value::Integer(i) => SqlValue::Integer(*i),
            Value::Real(f) => SqlValue::Real(*f),
            Value::Text(t) => SqlValue::Text(t.clone()),
            Value::Blob(b) => SqlValue::Blob(b.clone()),
        });
        let mut rows = stmt.query(params_from_iter(binds)).map_err(decline)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(decline)? {
            let mut row = Vec::with_capacity(n);
            for i in 0..n {
                row.push(match r.get_ref(i).map_err(decline)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(v) => Value::Integer(v),
                    ValueRef::Real(v) => Value::Real(v),
                    ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                });
            }
            out.push(row);
        }
        Ok((
            Rows {
                columns: columns.into(),
                rows: out.into(),
            },
            bools,
        ))
    })
}

fn open() -> rusqlite::Result<rusqlite::Connection> {
    let db = rusqlite::Connection::open_in_memory()?;
    db.execute_batch("ATTACH ':memory:' AS pg_catalog; ATTACH ':memory:' AS information_schema;")?;
    db.execute_batch(SCHEMA)?;
    let mut stmt = db.prepare(
        "INSERT INTO pg_catalog.pg_type VALUES (?1, ?2, ?3, 'b', ?4, ',', 0, -1, 0, NULL, ?5, ?6, 0, 0)",
    )?;
    for (oid, name, array, _, len) in TYPES {
        let collation = if matches!(name, "text" | "varchar") {
            100
        } else {
            0
        };
        stmt.execute(rusqlite::params![
            oid, name, PG_CATALOG, array, collation, len
        ])?;
    }
    drop(stmt);
    db.execute_batch(&format!(
        "INSERT INTO pg_catalog.pg_namespace VALUES ({PG_CATALOG}, 'pg_catalog', 10), ({PUBLIC}, 'public', 10);
         INSERT INTO pg_catalog.pg_collation VALUES (100, 'default', {PG_CATALOG}), (950, 'C', {PG_CATALOG});
         INSERT INTO pg_catalog.pg_am VALUES (2, 'heap', 't'), (403, 'btree', 'i');"
    ))?;
    functions(&db)?;
    Ok(db)
}

/// The functions PostgreSQL's catalog queries call.
fn functions(db: &rusqlite::Connection) -> rusqlite::Result<()> {
    let det = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    // Everything is in `public`, on the search path.
    for f in [
        "pg_table_is_visible",
        "pg_type_is_visible",
        "pg_collation_is_visible",
    ] {
        db.create_scalar_function(f, 1, det, |_| Ok(1))?;
    }
    db.create_scalar_function("format_type", 2, det, |ctx| {
        let oid: Option<i64> = ctx.get(0)?;
        Ok(oid
            .and_then(|o| TYPES.iter().find(|t| t.0 == o))
            .map(|t| t.3))
    })?;
    // `pg_get_expr(adbin, relid [, pretty])`: `adbin` holds the text.
    for n in [2, 3] {
        db.create_scalar_function("pg_get_expr", n, det, |ctx| ctx.get::<Option<String>>(0))?;
    }
    // SQLite has no sequences (an INTEGER PRIMARY KEY is the rowid).
    db.create_scalar_function("pg_get_serial_sequence", 2, det, |_| Ok(None::<String>))?;
    db.create_scalar_function("json_build_object", -1, det, |ctx| {
        let mut m = serde_json::Map::new();
        for i in (0..ctx.len()).step_by(2) {
            let k: String = ctx.get(i)?;
            let v = if i + 1 < ctx.len() {
                match ctx.get_raw(i + 1) {
                    ValueRef::Null => serde_json::Value::Null,
                    ValueRef::Integer(n) => n.into(),
                    ValueRef::Real(f) => f.into(),
                    ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned().into(),
                    ValueRef::Blob(_) => serde_json::Value::Null,
                }
            } else {
                serde_json::Value::Null
            };
            m.insert(k, v);
        }
        Ok(serde_json::Value::Object(m).to_string())
    })?;
    // `::regclass`, `::oid`, `::regtype` and the rest of the casts.
    db.create_scalar_function("pleroma_pg_cast", 2, det, move |ctx| {
        let ty: String = ctx.get(1)?;
        let v = ctx.get_raw(0);
        match (ty.as_str(), v) {
            // An OID is its own regclass, regtype and oid.
            ("oid" | "regclass" | "regtype", ValueRef::Integer(n)) => Ok(SqlValue::Integer(n)),
            ("regclass", ValueRef::Text(t)) => {
                let name = relation_name(&String::from_utf8_lossy(t));
                OIDS.with(|o| o.borrow().get(&name.to_lowercase()).copied())
                    .map(SqlValue::Integer)
                    .ok_or_else(|| {
                        rusqlite::Error::UserFunctionError(
                            format!("relation \"{name}\" does not exist").into(),
                        )
                    })
            }
            _ => crate::translate::pg_cast(v, &ty)
                .map_err(|m| rusqlite::Error::UserFunctionError(m.into())),
        }
    })?;
    // A table's size in bytes: its B-tree's pages (PostgreSQL's main fork;
    // the fork argument is accepted, every fork is the table's).
    for n in [1, 2] {
        db.create_scalar_function("pg_relation_size", n, det, |ctx| {
            let oid: Option<i64> = ctx.get(0)?;
            Ok(oid.map(|o| SIZES.with(|s| s.borrow().get(&o).copied().unwrap_or(0))))
        })?;
    }
    Ok(())
}

/// The name a `'…'::regclass` text gives: without `public.` (or `main.`),
/// a double-quoted name unquoted.
fn relation_name(text: &str) -> String {
    let unquote = |s: &str| -> String {
        let s = s.trim();
        match s.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
            Some(q) => q.replace("\"\"", "\""),
            None => s.to_owned(),
        }
    };
    let t = text.trim();
    for schema in ["public.", "\"public\".", "main."] {
        if t.len() > schema.len() && t[..schema.len()].eq_ignore_ascii_case(schema) {
            return unquote(&t[schema.len()..]);
        }
    }
    unquote(t)
}

/// Reads each table's size from SQLite's `dbstat`, by OID.
fn sizes(main: &rusqlite::Connection) -> rusqlite::Result<()> {
    let mut stmt = main.prepare(
        "SELECT s.rowid, d.pgsize FROM dbstat('main', 1) AS d \
         JOIN sqlite_schema AS s ON s.name = d.name",
    )?;
    let sizes = stmt
        .query_map([], |r| {
            Ok((OID_BASE + r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
        })?
        .collect::<rusqlite::Result<std::collections::HashMap<_, _>>>()?;
    SIZES.with(|s| *s.borrow_mut() = sizes);
    Ok(())
}

/// Fills the catalog's tables again from `main`'s schema.
fn fill(db: &rusqlite::Connection, main: &rusqlite::Connection) -> rusqlite::Result<()> {
    db.execute_batch(
        "DELETE FROM pg_catalog.pg_class; DELETE FROM pg_catalog.pg_attribute;
         DELETE FROM pg_catalog.pg_attrdef; DELETE FROM information_schema.tables;
         DELETE FROM information_schema.columns;",
    )?;
    let database = crate::translate::database_name(main);
    let mut objects = main.prepare(
        "SELECT rowid, name, type, tbl_name FROM sqlite_schema \
         WHERE type IN ('table', 'view', 'index') \
         AND NOT (name LIKE 'sqlite\\_%' ESCAPE '\\' AND type <> 'index') ORDER BY rowid",
    )?;
    let objects: Vec<(i64, String, String, String)> = objects
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_, _>>()?;
    let indexed: std::collections::HashSet<&str> = objects
        .iter()
        .filter(|o| o.2 == "index")
        .map(|o| o.3.as_str())
        .collect();
    let mut class = db.prepare(
        "INSERT INTO pg_catalog.pg_class VALUES \
         (?1, ?2, ?3, ?4, 'p', 10, ?5, ?6, 0, ?7, 0, 0, 0, 0, 0, 0, 0, 0, 'd', -1)",
    )?;
    let mut attr = db.prepare(
        "INSERT INTO pg_catalog.pg_attribute VALUES (?1, ?2, ?3, -1, ?4, ?5, ?6, 0, '', ?7, ?8, 0, ?9)",
    )?;
    let mut table = db.prepare(
        "INSERT INTO information_schema.tables VALUES \
         (?1, 'public', ?2, ?3, NULL, NULL, NULL, NULL, NULL, ?4, 'NO', NULL)",
    )?;
    let mut column = db.prepare(
        "INSERT INTO information_schema.columns VALUES (?1, 'public', ?2, ?3, ?4, ?5, ?6, ?7, \
         NULL, NULL, NULL, NULL, NULL, NULL, ?1, 'pg_catalog', ?8, ?9, NULL, 'NO', ?10)",
    )?;
    let mut def =
        db.prepare("INSERT INTO pg_catalog.pg_attrdef(adrelid, adnum, adbin) VALUES (?1, ?2, ?3)")?;
    let mut cols = main.prepare(
        // NOT NULL as SQLite enforces it: declared, or a primary key
        // of a WITHOUT ROWID table, or the rowid's INTEGER PRIMARY KEY.
        "SELECT x.name, x.type, \
                x.\"notnull\" OR (x.pk > 0 AND l.wr) \
                  OR (x.pk = 1 AND upper(x.type) = 'INTEGER' AND NOT l.wr \
                      AND (SELECT COUNT(*) FROM pragma_table_xinfo(?1) WHERE pk > 0) = 1), \
                x.dflt_value, x.hidden \
         FROM pragma_table_xinfo(?1) AS x, pragma_table_list(?1) AS l \
         WHERE l.schema = 'main' ORDER BY x.cid",
    )?;
    OIDS.with(|o| {
        let mut o = o.borrow_mut();
        o.clear();
        for (rowid, name, _, _) in &objects {
            o.insert(name.to_lowercase(), OID_BASE + rowid);
        }
    });
    for (rowid, name, kind, _) in &objects {
        let oid = OID_BASE + rowid;
        let (relkind, am) = match kind.as_str() {
            "view" => ("v", 0),
            "index" => ("i", 403),
            _ => ("r", 2),
        };
        let columns: Vec<(String, String, bool, Option<String>, i64)> = if relkind == "i" {
            Vec::new()
        } else {
            cols.query_map([name], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get::<_, i64>(2)? != 0,
                    r.get(3)?,
                    r.get(4)?,
                ))
            })?
            .collect::<Result<_, _>>()?
        };
        let visible: Vec<_> = columns.iter().filter(|c| c.4 != 1).collect();
        class.execute(rusqlite::params![
            oid,
            name,
            PUBLIC,
            relkind,
            am,
            indexed.contains(name.as_str()) as i64,
            visible.len() as i64
        ])?;
        if relkind != "i" {
            let view = relkind == "v";
            table.execute(rusqlite::params![
                database,
                name,
                if view { "VIEW" } else { "BASE TABLE" },
                if view { "NO" } else { "YES" }
            ])?;
        }
        for (num, (col, decl, notnull, dflt, hidden)) in visible.into_iter().enumerate() {
            let num = num as i64 + 1;
            let ty = ColType::of_decl(
                Some(decl).filter(|d| !d.is_empty()).map(String::as_str),
                false,
            )
            .pg_type()
            .oid() as i64;
            let len = TYPES.iter().find(|t| t.0 == ty).map_or(-1, |t| t.4);
            let generated = if *hidden >= 2 { "s" } else { "" };
            let collation = if ty == 25 { 100 } else { 0 };
            attr.execute(rusqlite::params![
                oid,
                col,
                ty,
                num,
                *notnull as i64,
                dflt.is_some() as i64,
                generated,
                collation,
                len
            ])?;
            if let Some(d) = dflt {
                def.execute(rusqlite::params![oid, num, d])?;
            }
            let (udt, data_type) = TYPES
                .iter()
                .find(|t| t.0 == ty)
                .map_or(("text", "text"), |t| (t.1, t.3));
            column.execute(rusqlite::params![
                database,
                name,
                col,
                num,
                dflt,
                if *notnull { "NO" } else { "YES" },
                data_type,
                udt,
                if generated.is_empty() {
                    "NEVER"
                } else {
                    "ALWAYS"
                },
                if relkind == "v" || !generated.is_empty() {
                    "NO"
                } else {
                    "YES"
                }
            ])?;
        }
    }
    Ok(())
}
