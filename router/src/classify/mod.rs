//! The classifier: a SELECT's text → a plan the cells can answer, or the
//! reason it goes to SQLite. Run once per SQL text; the connection caches it.
//!
//! All-or-nothing, as DataFusion's statistics rule: a plan is made only when
//! every part of the statement is understood exactly; anything else is
//! declined with a reason and SQLite runs the statement untouched.
//!
//! The rooms: `plans` (what a classification hands the rules), `slice` (a
//! SELECT over one planed table), `builder` (its expressions as predicates,
//! aggregates and outputs), `join` (a SELECT over a fact table and one
//! dimension table); this file holds `classify`, which tries them in turn
//! and then the residue.

mod builder;
mod join;
mod plans;
mod slice;

use sqlparser::ast::Statement;
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

use crate::decline::Decline;
use crate::planes::Planes;

use join::join_plan;
pub(crate) use plans::{
    AggFn, Class, CmpOp, HExpr, HOperand, JOut, JoinPlan, Operand, OrderTerm, OutExpr, PExpr, Plan,
};
use slice::plan;

/// The aggregates a plane's cells merge (lower case, as the parser's
/// function names are compared): the ones the classifier serves and the
/// ones the residue lets an outer query use.
pub(crate) const AGGREGATES: &[&str] = &[
    "count",
    "sum",
    "total",
    "avg",
    "min",
    "max",
    "pleromasumexact",
];

/// What the classifier made of a statement.
#[derive(Debug)]
pub(crate) enum Classified {
    /// Not a read-only SELECT: SQLite runs it (with the write bookkeeping).
    NotSelect,
    Declined(Decline),
    Plan(Box<Plan>),
    Join(Box<JoinPlan>),
    /// The cells answer the aggregate core, SQLite the rest.
    Residue(Box<crate::residue::ResiduePlan>),
}

/// `quick`: decline row lists from their text alone (the query path); off
/// for `pleroma_explain`, which names the precise reason.
pub(crate) fn classify(
    db: &rusqlite::Connection,
    shared: &Planes,
    sql: &str,
    quick: bool,
) -> Classified {
    // The cheap gate first: a statement that names no planed table (or is not
    // a read-only statement) never pays for a parse.
    let lower = sql.to_ascii_lowercase();
    let names_a_plane = shared
        .tables()
        .any(|t| lower.contains(&t.to_ascii_lowercase()));
    // Cached: the engine path then finds the statement prepared.
    let stmt = match db.prepare_cached(sql) {
        Ok(s) => s,
        // SQLite reports its own error when it runs the statement.
        Err(_) => return Classified::NotSelect,
    };
    if !stmt.readonly() || stmt.column_count() == 0 {
        return Classified::NotSelect;
    }
    if !names_a_plane {
        return Classified::Declined("no planed table in the statement".into());
    }
    // A plane whose table lost a column has no column map to classify by
    // (it is out of service); the answer is SQLite's, and not cached, so the
    // statement is classified again once the plane is back.
    if shared
        .entries
        .iter()
        .any(|e| e.cols.dim_aff.len() != e.def.dims.len())
    {
        return Classified::Declined(Decline::NoColumnMap);
    }
    // Every served statement has an aggregate or a GROUP BY: a text without
    // any of their names is a row list or lookup, declined without a parse.
    // A substring test on purpose, not the tokenizer: it may only say "no"
    // too rarely (a name inside a comment or a string costs a parse), never
    // wrongly, and it runs before any parse on every statement.
    if quick
        && !AGGREGATES
            .iter()
            .chain(&["distinct", "group"])
            .any(|w| lower.contains(w))
    {
        return Classified::Declined("a row list (no aggregate, no GROUP BY)".into());
    }
    let columns: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let param_count = stmt.parameter_count();
    drop(stmt);
    // One parse, which every planner reads.
    let stmts = match Parser::parse_sql(&SQLiteDialect {}, sql) {
        Ok(s) => s,
        Err(e) => return Classified::Declined(format!("not understood ({e})").into()),
    };
    let [Statement::Query(q)] = stmts.as_slice() else {
        return Classified::Declined("not a single SELECT".into());
    };
    // A table with several planes: each is tried, smallest first, and the
    // first that serves the statement answers it; declined by all, the
    // smallest one's reason is given.
    let mut first = None;
    for rank in 0..shared.most_per_table() {
        shared.rank.set(rank);
        let c = classify_query(db, shared, sql, q, &columns, param_count);
        if !matches!(c, Classified::Declined(_)) {
            shared.rank.set(0);
            return c;
        }
        first.get_or_insert(c);
    }
    shared.rank.set(0);
    first.expect("one rank at least")
}

/// `classify` of the parsed SELECT `q`, with the planes [`Planes::find`]
/// gives now.
fn classify_query(
    db: &rusqlite::Connection,
    shared: &Planes,
    sql: &str,
    q: &sqlparser::ast::Query,
    columns: &[String],
    param_count: usize,
) -> Classified {
    let reason = match plan(shared, q, columns.to_vec(), param_count) {
        Ok(Some(p)) => return Classified::Plan(Box::new(p)),
        Ok(None) => match join_plan(shared, q, columns.to_vec(), param_count) {
            Ok(j) => return Classified::Join(Box::new(j)),
            Err(reason) => reason,
        },
        Err(reason) => reason,
    };
    // What the cells answer directly they answer; the rest may still have an
    // aggregate core, with SQLite evaluating around it.
    let lookup = |schema: Option<&str>, table: &str| lookup_table(db, schema, table);
    match crate::residue::plan(shared, sql, q, columns.to_vec(), param_count, &lookup) {
        Ok(r) => Classified::Residue(Box::new(r)),
        Err(Decline::NoCore) => Classified::Declined(reason.into()),
        Err(r) => Classified::Declined(r),
    }
}

type R<T> = Result<T, String>;

/// An ordinary table (no view, no virtual table) that a lookup join may
/// join to the core, as SQLite resolves its name (`schema` given, or temp
/// before main): its columns with their affinity and collation. `None` for
/// anything else.
fn lookup_table(
    db: &rusqlite::Connection,
    schema: Option<&str>,
    table: &str,
) -> Option<Vec<crate::residue::OtherColumn>> {
    let kind = |s: &str| -> Option<(String, bool)> {
        db.query_row(
            &format!(
                "SELECT type, coalesce(sql, '') LIKE 'CREATE VIRTUAL%' FROM {s}.sqlite_schema \
                 WHERE name = ?1 COLLATE NOCASE AND type IN ('table', 'view')"
            ),
            [table],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?)),
        )
        .ok()
    };
    let schema = match schema {
        Some(s) if s.eq_ignore_ascii_case("main") => "main",
        Some(s) if s.eq_ignore_ascii_case("temp") => "temp",
        Some(_) => return None,
        None if kind("temp").is_some() => "temp",
        None => "main",
    };
    match kind(schema)? {
        (t, false) if t == "table" => {}
        _ => return None,
    }
    let strict: bool = db
        .query_row(
            "SELECT strict FROM pragma_table_list WHERE schema = ?1 AND name = ?2 COLLATE NOCASE",
            [schema, table],
            |r| r.get::<_, i64>(0),
        )
        .map(|s| s != 0)
        .unwrap_or(false);
    let mut stmt = db
        .prepare("SELECT name, type FROM pragma_table_xinfo(?1, ?2) WHERE hidden = 0")
        .ok()?;
    let cols: Vec<(String, String)> = stmt
        .query_map([table, schema], |r| Ok((r.get(0)?, r.get(1)?)))
        .ok()?
        .collect::<Result<_, _>>()
        .ok()?;
    cols.into_iter()
        .map(|(name, decl)| {
            let (_, coll, ..) = db
                .column_metadata(Some(schema), table, name.as_str())
                .ok()?;
            Some(crate::residue::OtherColumn {
                aff: crate::affinity::Affinity::of_column(&decl, strict),
                coll: coll
                    .map(|c| c.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "BINARY".into()),
                name,
            })
        })
        .collect()
}

pub(crate) use crate::catalog::names_a_column;
