//! Expression dimensions: `EXPR AS name` in `pleroma_attach`'s dimension
//! list (`date(ts, 'unixepoch') AS day`).
//!
//! Exact because SQLite computes every value. A scan selects the expression
//! from the table itself. A row the change hook reports is evaluated by the
//! same SQLite on a private in-memory connection, over a one-row virtual
//! table whose columns are declared with the table's names, affinities and
//! collations, so a column reference in the expression has the same value,
//! affinity and collation there as in the table (`docs/design.md`,
//! "Expression dimensions").
//!
//! At attach SQLite itself judges the expression: it must be accepted as an
//! index expression on a copy of the table's columns (deterministic
//! functions, no subquery, no parameter, only the row's own columns). On
//! top of that Pleroma refuses what an index would accept but a plane
//! cannot follow: a `COLLATE`, a string that asks the date functions for
//! the clock or the time zone (`'now'`, `'localtime'`, `'utc'`), and a top
//! that carries a column's affinity or collation (a bare column, `CAST`,
//! unary `+`). A row whose TEXT input could name the clock in a date
//! function (`date(ts)` with `ts = 'now'`) takes the plane out of service.

use std::ffi::{c_int, CStr, CString};
use std::sync::{Arc, Mutex};

use rusqlite::types::{Value, ValueRef};
use rusqlite::vtab::{
    sqlite3_vtab, sqlite3_vtab_cursor, Context, Filters, IndexInfo, Module, VTab, VTabConnection,
    VTabCursor,
};

use crate::affinity::Affinity;
use crate::tokenize::{self, quote, Kind};

/// An expression dimension as attached: its SQL (as given) and what a row
/// must supply to evaluate it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DimExpr {
    pub sql: String,
    /// The table's columns the expression names (by the table's spelling).
    pub inputs: Vec<String>,
    /// Whether it calls a date function (whose TEXT inputs are checked for
    /// the clock).
    pub clock: bool,
}

/// SQLite's date and time functions: given `'now'`, `'localtime'` or
/// `'utc'` they read the clock or the time zone.
const DATE_FUNCTIONS: &[&str] = &[
    "date",
    "time",
    "datetime",
    "julianday",
    "unixepoch",
    "strftime",
    "timediff",
];

impl DimExpr {
    /// `sql` over a table with `columns`.
    pub fn new(sql: &str, columns: &[String]) -> DimExpr {
        let code: Vec<_> = tokenize::code(sql).collect();
        let mut inputs: Vec<String> = Vec::new();
        let mut clock = false;
        for (i, t) in code.iter().enumerate() {
            let call = code.get(i + 1).is_some_and(|n| n.text == "(");
            if t.kind == Kind::Word && call {
                clock |= DATE_FUNCTIONS.iter().any(|f| t.is(f));
                continue;
            }
            if matches!(t.kind, Kind::Word | Kind::Quoted) {
                let v = t.value();
                if let Some(c) = columns.iter().find(|c| c.eq_ignore_ascii_case(&v)) {
                    if !inputs.contains(c) {
                        inputs.push(c.clone());
                    }
                }
            }
        }
        DimExpr {
            sql: sql.trim().to_owned(),
            inputs,
            clock,
        }
    }
}

/// Whether a TEXT (or BLOB) value given to a date function could make it read the
/// clock or the time zone: it holds `now`, `local`, `utc` or `subsec` (as
/// a time value, `'subsec'` is the clock too) in any case.
pub(crate) fn reads_the_clock(v: ValueRef<'_>) -> bool {
    // A BLOB is read as text by the date functions.
    let (ValueRef::Text(t) | ValueRef::Blob(t)) = v else {
        return false;
    };
    let lower = t.to_ascii_lowercase();
    [b"now".as_slice(), b"local", b"utc", b"subsec"]
        .iter()
        .any(|w| lower.windows(w.len()).any(|x| x == *w))
}

/// `EXPR AS name` split into the expression and the name; `None` for a
/// plain column name.
pub(crate) fn split_alias(item: &str) -> Option<(String, String)> {
    let code: Vec<_> = tokenize::code(item).collect();
    let n = code.len();
    if n < 3 || !code[n - 2].is("as") || !matches!(code[n - 1].kind, Kind::Word | Kind::Quoted) {
        return None;
    }
    Some((
        item[..code[n - 2].start].trim().to_owned(),
        code[n - 1].value().into_owned(),
    ))
}

/// Split a list at its top-level commas (not inside parentheses, strings
/// or quoted names), each item trimmed, empty items dropped.
pub(crate) fn split_list(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    if tokenize::tokens(list).any(|t| t.kind == Kind::Illegal) {
        // Not SQL (a column name with a lone quote): plain commas, as
        // before expression dimensions.
        out.extend(list.split(',').map(|s| s.trim().to_owned()));
        out.retain(|s| !s.is_empty());
        return out;
    }
    let (mut depth, mut from) = (0usize, 0usize);
    for t in tokenize::tokens(list) {
        if t.kind != Kind::Punct {
            continue;
        }
        match t.text {
            "(" => depth += 1,
            ")" => depth = depth.saturating_sub(1),
            "," if depth == 0 => {
                out.push(list[from..t.start].trim().to_owned());
                from = t.start + 1;
            }
            _ => {}
        }
    }
    out.push(list[from..].trim().to_owned());
    out.retain(|s| !s.is_empty());
    out
}

/// The words of an expression as SQLite compares them for sameness here:
/// names and keywords without case and without quotes, a qualifier that
/// names the table (`e.ts`, `main.ev.ts`) dropped, every other token by
/// its text. Two expressions with the same key read the same columns
/// through the same operators and functions with the same literals.
pub(crate) fn token_key(sql: &str, qualifiers: &[&str]) -> Vec<(Kind, String)> {
    let code: Vec<_> = tokenize::code(sql).collect();
    let mut out = Vec::with_capacity(code.len());
    let mut i = 0;
    while i < code.len() {
        let t = code[i];
        let name = matches!(t.kind, Kind::Word | Kind::Quoted);
        if name
            && code.get(i + 1).is_some_and(|d| d.text == ".")
            && code
                .get(i + 2)
                .is_some_and(|c| matches!(c.kind, Kind::Word | Kind::Quoted))
            && out.last().is_none_or(|(_, t): &(Kind, String)| t != ".")
            && qualifiers
                .iter()
                .any(|q| q.eq_ignore_ascii_case(&t.value()))
        {
            i += 2;
            continue;
        }
        // A name or keyword: a quoted one is the same name as a bare one.
        let kind = if name { Kind::Word } else { t.kind };
        let text = if name {
            t.value().to_ascii_lowercase()
        } else {
            t.text.to_owned()
        };
        out.push((kind, text));
        i += 1;
    }
    out
}

/// A table column as the evaluator declares it.
#[derive(Clone, Debug)]
pub(crate) struct EvalColumn {
    pub name: String,
    pub aff: Affinity,
    pub coll: String,
}

fn type_of(aff: Affinity) -> &'static str {
    match aff {
        Affinity::Integer => "INTEGER",
        Affinity::Text => "TEXT",
        Affinity::Blob => "BLOB",
        Affinity::Real => "REAL",
        Affinity::Numeric => "NUMERIC",
    }
}

/// The collations SQLite has built in: the only ones the private
/// connection knows.
fn builtin_collation(c: &str) -> bool {
    ["BINARY", "NOCASE", "RTRIM"]
        .iter()
        .any(|b| b.eq_ignore_ascii_case(c))
}

/// Check an expression dimension against its table, as SQLite judges an
/// index expression plus Pleroma's own refusals (see the module's notes).
pub(crate) fn check(
    db: &rusqlite::Connection,
    table: &str,
    name: &str,
    sql: &str,
    columns: &[EvalColumn],
) -> Result<(), String> {
    let bad = |why: String| Err(format!("pleroma_attach: dimension {name} ({sql}): {why}"));
    for t in tokenize::code(sql) {
        if t.is("collate") {
            return bad("COLLATE is not supported in an expression dimension".into());
        }
        if t.kind == Kind::Variable {
            return bad("a parameter is not a value of the row".into());
        }
        if t.kind == Kind::String && reads_the_clock(ValueRef::Text(t.value().as_bytes())) {
            return bad(
                "a date function given 'now', 'localtime' or 'utc' reads the clock or the time zone, \
                 not the row"
                    .into(),
            );
        }
        if t.kind == Kind::Illegal {
            return bad("not understood".into());
        }
        if t.is("like") {
            // LIKE follows the connection's `case_sensitive_like`, which the
            // private connection does not share.
            return bad("LIKE depends on the connection's case_sensitive_like".into());
        }
        if t.kind == Kind::Word
            && ["current_date", "current_time", "current_timestamp"]
                .iter()
                .any(|w| t.is(w))
        {
            return bad(format!("{} reads the clock", t.text));
        }
    }
    let parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::SQLiteDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| {
            let e = p.parse_expr()?;
            p.expect_token(&sqlparser::tokenizer::Token::EOF)?;
            Ok(e)
        })
        .map_err(|e| format!("pleroma_attach: dimension {name} ({sql}): not understood ({e})"))?;
    if let Err(why) = clock_free(&parsed) {
        return bad(why);
    }
    let mut top = &parsed;
    while let sqlparser::ast::Expr::Nested(inner) = top {
        top = inner;
    }
    use sqlparser::ast::{Expr, UnaryOperator};
    match top {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
            return bad(format!(
                "a bare column; give it as a column dimension, without AS {name}"
            ))
        }
        Expr::Cast { .. }
        | Expr::UnaryOp {
            op: UnaryOperator::Plus,
            ..
        } => {
            return bad(
                "CAST or unary + at the top keeps a column's affinity or collation; \
                 write the expression without it"
                    .into(),
            )
        }
        _ => {}
    }
    let expr = DimExpr::new(
        sql,
        &columns.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
    );
    for c in columns.iter().filter(|c| expr.inputs.contains(&c.name)) {
        if !builtin_collation(&c.coll) {
            return bad(format!(
                "column {} has collation {}, which only the user's connection knows",
                c.name, c.coll
            ));
        }
    }
    // SQLite's own verdict: an index on the expression over a copy of the
    // table's columns.
    let private = rusqlite::Connection::open_in_memory().map_err(|e| e.to_string())?;
    let _ = private.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DQS_DDL, false);
    let _ = private.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DQS_DML, false);
    private
        .execute_batch(&format!("CREATE TABLE t({})", declarations(columns)))
        .map_err(|e| format!("pleroma_attach: {e}"))?;
    if let Err(e) = private.execute_batch(&format!("CREATE INDEX i ON t({sql})")) {
        return bad(format!(
            "not an expression of the row's own columns with deterministic functions ({e})"
        ));
    }
    // A function the user's connection defines over a built-in one would
    // give its queries other values than the private connection's.
    let code: Vec<_> = tokenize::code(sql).collect();
    for w in code
        .windows(2)
        .filter(|w| w[1].text == "(" && w[0].kind == Kind::Word)
    {
        let defined: i64 = db
            .query_row(
                "SELECT count(*) FROM pragma_function_list WHERE name = lower(?1) AND builtin = 0",
                [w[0].text],
                |r| r.get(0),
            )
            .unwrap_or(0);
        if defined > 0 {
            return bad(format!(
                "function {}() is defined by this connection, not SQLite's own",
                w[0].text
            ));
        }
    }
    // And on the table itself, as the user's connection reads it.
    if let Err(e) = db.prepare(&format!("SELECT {sql} FROM main.{} LIMIT 0", quote(table))) {
        return bad(e.to_string());
    }
    Ok(())
}

/// Every date function call of `e` reads a time value that cannot be the
/// clock: at least one argument (none is `'now'`), a time value that is a
/// column (whose TEXT values the hook and the scan check), a literal or a
/// number made by arithmetic, and modifiers (and a `strftime` format) that
/// are string literals. A time value computed as text (`char(110, 111,
/// 119)`, `a || b`) could spell `'now'` where no input holds it.
fn clock_free(e: &sqlparser::ast::Expr) -> Result<(), String> {
    use sqlparser::ast::{BinaryOperator as B, Expr, UnaryOperator as U, Value as V};
    let mut err = None;
    let mut calls = 0usize;
    crate::residue::visit_expr(e, &mut |x: &Expr| {
        if err.is_some() {
            return false;
        }
        let Expr::Function(f) = x else {
            return true;
        };
        let name = f.name.to_string().to_ascii_lowercase();
        if !DATE_FUNCTIONS.contains(&name.as_str()) {
            return true;
        }
        calls += 1;
        let args = unnamed_args(f);
        let (values, modifiers): (&[&Expr], &[&Expr]) = match name.as_str() {
            "strftime" if args.len() >= 2 => (&args[1..2], {
                if !is_string(args[0]) {
                    err = Some("a strftime() format that is not a string literal".to_owned());
                }
                &args[2..]
            }),
            "timediff" if args.len() == 2 => (&args[..], &[]),
            "strftime" | "timediff" => {
                err = Some(format!("{name}() without a time value reads the clock"));
                return false;
            }
            _ if args.is_empty() => {
                err = Some(format!("{name}() without a time value reads the clock"));
                return false;
            }
            _ => (&args[..1], &args[1..]),
        };
        fn numeric_or_column(x: &Expr) -> bool {
            match x {
                Expr::Nested(i) => numeric_or_column(i),
                Expr::Identifier(_) | Expr::CompoundIdentifier(_) => true,
                Expr::Value(v) => match &v.value {
                    V::Number(..) | V::Null => true,
                    V::SingleQuotedString(s) => !reads_the_clock(ValueRef::Text(s.as_bytes())),
                    _ => false,
                },
                Expr::UnaryOp {
                    op: U::Minus | U::Plus,
                    expr,
                } => {
                    numeric_or_column(expr)
                        && !matches!(expr.as_ref(), Expr::Value(v) if matches!(v.value, V::SingleQuotedString(_)))
                }
                // Arithmetic gives a number or NULL, never text.
                Expr::BinaryOp {
                    op: B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo,
                    ..
                } => true,
                _ => false,
            }
        }
        if let Some(v) = values.iter().find(|v| !numeric_or_column(v)) {
            err = Some(format!(
                "{name}() of a computed time value ({v}), which could spell 'now'"
            ));
            return false;
        }
        if modifiers.iter().any(|m| !is_string(m)) {
            err = Some(format!(
                "{name}() with a modifier that is not a string literal"
            ));
            return false;
        }
        true
    });
    if err.is_none() {
        // Every call the text holds must have been seen by the walk (a
        // form it does not descend into hides none).
        let text = e.to_string();
        let code: Vec<_> = tokenize::code(&text).collect();
        let written = code
            .windows(2)
            .filter(|w| w[1].text == "(" && DATE_FUNCTIONS.iter().any(|f| w[0].is(f)))
            .count();
        if written != calls {
            err = Some("a date function inside a form Pleroma does not read".to_owned());
        }
    }
    err.map_or(Ok(()), Err)
}

fn is_string(e: &sqlparser::ast::Expr) -> bool {
    matches!(e, sqlparser::ast::Expr::Value(v) if matches!(v.value, sqlparser::ast::Value::SingleQuotedString(_)))
}

fn declarations(columns: &[EvalColumn]) -> String {
    columns
        .iter()
        .map(|c| {
            format!(
                "{} {} COLLATE {}",
                quote(&c.name),
                type_of(c.aff),
                if builtin_collation(&c.coll) {
                    c.coll.as_str()
                } else {
                    "BINARY"
                }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The row the evaluator's virtual table shows.
struct RowCell {
    decl: CString,
    row: Mutex<Vec<Value>>,
}

/// Evaluates a plane's expression dimensions over one row image at a time,
/// on a private in-memory connection.
pub(crate) struct Evaluator {
    /// Dropped before `db`, whose statement it is.
    stmt: crate::ffi::OneRow,
    /// The statement's connection, held (not read) for as long as it is.
    _db: rusqlite::Connection,
    cell: Arc<RowCell>,
    sql: String,
    /// The table's column index of each column an expression reads.
    inputs: Vec<i32>,
    /// Whether a TEXT input must be checked for the clock.
    clock: bool,
    width: usize,
}

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evaluator").field("sql", &self.sql).finish()
    }
}

impl Evaluator {
    /// An evaluator of `exprs` over rows of a table with `columns`.
    pub fn new(columns: &[EvalColumn], exprs: &[&DimExpr]) -> rusqlite::Result<Evaluator> {
        let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
        let mut inputs = Vec::new();
        for e in exprs {
            for i in &e.inputs {
                if let Some(k) = names.iter().position(|n| n == i) {
                    if !inputs.contains(&(k as i32)) {
                        inputs.push(k as i32);
                    }
                }
            }
        }
        let decl_columns: Vec<EvalColumn> =
            if crate::mutation::active(crate::mutation::Mutation::ExprAffinityLost) {
                columns
                    .iter()
                    .map(|c| EvalColumn {
                        aff: Affinity::Blob,
                        ..c.clone()
                    })
                    .collect()
            } else {
                columns.to_vec()
            };
        let cell = Arc::new(RowCell {
            decl: CString::new(format!("CREATE TABLE x({})", declarations(&decl_columns)))
                .map_err(|_| rusqlite::Error::InvalidQuery)?,
            row: Mutex::new(vec![Value::Null; columns.len()]),
        });
        let db = rusqlite::Connection::open_in_memory()?;
        const MODULE: Module<'static, RowTab> = Module::eponymous_only_module();
        db.create_module(c"pleroma_row", &MODULE, Some(cell.clone()))?;
        let list: Vec<&str> = exprs.iter().map(|e| e.sql.as_str()).collect();
        let sql = format!("SELECT {} FROM pleroma_row", list.join(", "));
        // SAFETY: `db` is owned by the evaluator next to the statement,
        // which is dropped first (field order).
        let stmt = unsafe { crate::ffi::OneRow::prepare(db.handle(), &sql) }
            .map_err(|e| rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(1), Some(e)))?;
        Ok(Evaluator {
            stmt,
            _db: db,
            cell,
            sql,
            inputs,
            clock: exprs.iter().any(|e| e.clock),
            width: exprs.len(),
        })
    }

    /// The table's columns (by index) the expressions read.
    pub fn inputs(&self) -> &[i32] {
        &self.inputs
    }

    /// The expressions' values over the row whose column `c` is `get(c)`.
    /// `Err` says what the plane cannot follow.
    pub fn eval<'a>(
        &mut self,
        get: impl Fn(i32) -> rusqlite::Result<ValueRef<'a>>,
    ) -> Result<Vec<Value>, String> {
        {
            let mut row = self.cell.row.lock().unwrap_or_else(|e| e.into_inner());
            for &c in &self.inputs {
                let v = get(c).map_err(|e| format!("an unreadable value ({e})"))?;
                if self.clock && reads_the_clock(v) {
                    return Err(
                        "a TEXT value that a date function may read as the clock or the time zone"
                            .into(),
                    );
                }
                row[c as usize] =
                    Value::try_from(v).map_err(|_| "text that is not UTF-8".to_owned())?;
            }
        }
        self.stmt.first_row(self.width)
    }
}

#[repr(C)]
struct RowTab {
    base: sqlite3_vtab,
    cell: Arc<RowCell>,
}

#[repr(C)]
struct RowCursor {
    base: sqlite3_vtab_cursor,
    cell: Arc<RowCell>,
    done: bool,
}

// SAFETY: `RowTab` is `repr(C)` with `sqlite3_vtab` first, as the trait
// requires; its cursor likewise.
unsafe impl<'vtab> VTab<'vtab> for RowTab {
    type Aux = Arc<RowCell>;
    type Cursor = RowCursor;

    fn connect(
        _: &mut VTabConnection,
        aux: Option<&Arc<RowCell>>,
        _: &[u8],
        _: &[u8],
        _: &[u8],
        _: &[&[u8]],
    ) -> rusqlite::Result<(std::borrow::Cow<'static, CStr>, RowTab)> {
        let cell = aux.cloned().ok_or(rusqlite::Error::InvalidQuery)?;
        Ok((
            std::borrow::Cow::Owned(cell.decl.clone()),
            RowTab {
                base: sqlite3_vtab::default(),
                cell,
            },
        ))
    }

    fn best_index(&self, info: &mut IndexInfo) -> rusqlite::Result<bool> {
        info.set_estimated_cost(1.0);
        info.set_estimated_rows(1);
        Ok(true)
    }

    fn open(&'vtab mut self) -> rusqlite::Result<RowCursor> {
        Ok(RowCursor {
            base: sqlite3_vtab_cursor::default(),
            cell: self.cell.clone(),
            done: true,
        })
    }
}

// SAFETY: `repr(C)` with `sqlite3_vtab_cursor` first.
unsafe impl VTabCursor for RowCursor {
    fn filter(&mut self, _: c_int, _: Option<&str>, _: &Filters<'_>) -> rusqlite::Result<()> {
        self.done = false;
        Ok(())
    }
    fn next(&mut self) -> rusqlite::Result<()> {
        self.done = true;
        Ok(())
    }
    fn eof(&self) -> bool {
        self.done
    }
    fn column(&self, ctx: &mut Context, i: c_int) -> rusqlite::Result<()> {
        let row = self.cell.row.lock().unwrap_or_else(|e| e.into_inner());
        ctx.set_result(&row[i as usize])
    }
    fn rowid(&self) -> rusqlite::Result<i64> {
        Ok(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_items_and_aliases() {
        assert_eq!(
            split_list("country, date(ts, 'unixepoch') AS day , substr(a, 1, 2) as \"p,q\""),
            vec![
                "country",
                "date(ts, 'unixepoch') AS day",
                "substr(a, 1, 2) as \"p,q\""
            ]
        );
        assert_eq!(
            split_alias("date(ts, 'unixepoch') AS day"),
            Some(("date(ts, 'unixepoch')".into(), "day".into()))
        );
        assert_eq!(split_alias("country"), None);
        assert_eq!(split_alias("\"a b\""), None);
    }

    #[test]
    fn token_keys_ignore_case_quotes_and_the_tables_qualifier() {
        let k = |s: &str| token_key(s, &["e", "ev", "main"]);
        assert_eq!(k("date(ts, 'unixepoch')"), k("DATE( \"TS\" ,'unixepoch' )"));
        assert_eq!(k("date(ts, 'unixepoch')"), k("date(e.ts, 'unixepoch')"));
        assert_eq!(
            k("date(ts, 'unixepoch')"),
            k("date(main.ev.ts, 'unixepoch')")
        );
        assert_ne!(k("date(ts, 'unixepoch')"), k("date(ts, 'UNIXEPOCH')"));
        assert_ne!(k("ts / 86400"), k("ts / 86400.0"));
        assert_ne!(k("date(ts, 'unixepoch')"), k("date(x.ts, 'unixepoch')"));
    }

    #[test]
    fn the_clock_is_seen_in_any_case() {
        assert!(reads_the_clock(ValueRef::Text(b"NoW")));
        assert!(reads_the_clock(ValueRef::Text(b"1970-01-01 LocalTime")));
        assert!(!reads_the_clock(ValueRef::Text(b"2026-02-01")));
        assert!(!reads_the_clock(ValueRef::Integer(5)));
    }
}

/// A function call's plain arguments (no named, wildcard or qualified-star
/// ones), in order.
pub(crate) fn unnamed_args(f: &sqlparser::ast::Function) -> Vec<&sqlparser::ast::Expr> {
    use sqlparser::ast::{FunctionArg, FunctionArgExpr, FunctionArguments};
    match &f.args {
        FunctionArguments::List(l) => l
            .args
            .iter()
            .filter_map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => Some(x),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}
