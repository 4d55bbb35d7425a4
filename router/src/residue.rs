//! The residue: a SELECT split into the aggregate core the cells answer and
//! the rest, which SQLite evaluates over the core's rows.
//!
//! The core is the plane grouped by every dimension the statement names,
//! with the mergeable partials of each group: its row count and, per
//! measure, the non-NULL count, the sum, MIN and MAX. It is bound into the
//! statement as a CTE, `"pleroma$core"`, and the statement is rewritten in
//! its own text: each reference to the planed table becomes the CTE (under
//! the same name), and each aggregate over the table's rows becomes the merge
//! of the partials (`COUNT(*)` → `COALESCE(SUM("pleroma$n"), 0)`). Every
//! other byte of the statement is the user's, so SQLite evaluates WHERE,
//! GROUP BY, HAVING, expressions, windows, ORDER BY, LIMIT, wrappers and
//! subqueries itself. Why this is exact: `docs/design.md`, "The residue".
//!
//! All-or-nothing, like the classifier: anything not provably exact (a
//! function outside the deterministic list, a bare column, an order SQLite
//! chooses under LIMIT or for a scalar subquery's first row, an aggregate
//! that does not merge) declines with a reason that names the piece.

use std::collections::BTreeSet;
use std::ops::Range;

use sqlparser::ast::{
    CaseWhen, CastKind, DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    GroupByExpr, InTarget, LimitClause, ObjectNamePart, OrderByKind, Query, Select, SelectItem,
    SetExpr, SetOperator, Spanned, Statement, TableFactor, Value as SqlValue, WindowType,
};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Location;

use crate::affinity::Affinity;
use crate::planes::Planes;

type R<T> = Result<T, String>;

/// The name of the bound core; a statement that spells it is declined.
pub(crate) const CORE: &str = "pleroma$core";

/// The reason when no block of the statement reads the planed table alone.
pub(crate) const NO_CORE: &str = "no block reads the planed table alone";

/// What a statement needs from the cells, and its text around them.
#[derive(Debug)]
pub(crate) struct ResiduePlan {
    pub table: String,
    /// Dimensions the core groups by (plane indexes, ascending).
    pub dims: Vec<usize>,
    /// Affinity of each of `dims`.
    pub dim_aff: Vec<Affinity>,
    /// Measures whose partials the core carries.
    pub measures: Vec<usize>,
    /// The accumulators of the sums (SUM, TOTAL, AVG, PleromaSumExact):
    /// each adds, per row, one of its measures (or the constant 1), so its
    /// partial sums must provably stay in i64 over all of them together.
    pub sums: Vec<SumTerm>,
    /// Measures whose MIN or MAX is read.
    pub extrema: Vec<usize>,
    /// Dimensions that `abs()` is applied to per row: served only while no
    /// row holds -2^63 there (where `abs` raises "integer overflow").
    pub abs_dims: Vec<usize>,
    /// The statement up to the core's JSON, and after it.
    pub head: String,
    pub tail: String,
    pub columns: Vec<String>,
    pub param_count: usize,
    pub cut: Option<Cut>,
    /// For `pleroma_explain`: what the cells answer, what SQLite evaluates.
    pub split: String,
}

/// One sum's accumulator: the measures it may add per row, and whether it
/// may add the constant 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SumTerm {
    pub measures: Vec<usize>,
    pub ones: bool,
}

/// The residue plan of `sql`, or why it has none.
pub(crate) fn plan(
    shared: &Planes,
    sql: &str,
    columns: Vec<String>,
    param_count: usize,
) -> R<ResiduePlan> {
    let stmts =
        Parser::parse_sql(&SQLiteDialect {}, sql).map_err(|e| format!("not understood ({e})"))?;
    let [Statement::Query(q)] = stmts.as_slice() else {
        return Err(NO_CORE.into());
    };
    let lower = sql.to_ascii_lowercase();
    if lower.contains("pleroma$") || lower.contains("collate") || !quoted_names_are_words(sql) {
        // A quoted name that is not a plain word may spell the name SQLite
        // gives an aggregate column, which the rewrite changes.
        return Err(NO_CORE.into());
    }
    let mut w = Walker {
        shared,
        sql,
        lines: line_starts(sql),
        edits: Vec::new(),
        table: None,
        dims: BTreeSet::new(),
        measures: BTreeSet::new(),
        sums: Vec::new(),
        extrema: BTreeSet::new(),
        abs_dims: BTreeSet::new(),
        raises: false,
        limited: false,
        ctes: Vec::new(),
        cores: 0,
        depth: 0,
        cut_keys: None,
        cut: None,
        aggs: Vec::new(),
        rest: Vec::new(),
    };
    if let Err(r) = w.query(q, false) {
        // Without a block over the planed table, the classifier's own
        // reason is the one to give.
        return Err(if w.table.is_some() { r } else { NO_CORE.into() });
    }
    let Some(t) = w.table else {
        return Err(NO_CORE.into());
    };
    if w.raises && w.limited && !crate::mutation::active("residue_raising_where") {
        // Under LIMIT SQLite may stop before it evaluates some group (an
        // index gives the order), where the core's sort evaluates them all.
        return Err("a function that can raise an error, under LIMIT".into());
    }
    let entry = shared.entry(t);
    let dims: Vec<usize> = w.dims.iter().copied().collect();
    let dim_aff: Vec<Affinity> = dims.iter().map(|&d| entry.cols.dim_aff[d]).collect();
    for (&d, a) in dims.iter().zip(&dim_aff) {
        if *a == Affinity::Real {
            return Err(format!("REAL dimension {}", entry.def.dims[d]));
        }
    }
    let measures: Vec<usize> = w.measures.iter().copied().collect();
    // The core: CTE columns, then the select over the JSON rows.
    let mut names = Vec::new();
    let mut sel = Vec::new();
    let mut k = 0;
    let mut col = |names: &mut Vec<String>, name: String, cast: Option<&str>| {
        let v = format!("value->>{k}");
        sel.push(match cast {
            Some(c) => format!("CAST({v} AS {c})"),
            None => v,
        });
        names.push(quote(&name));
        k += 1;
    };
    for (&d, a) in dims.iter().zip(&dim_aff) {
        let cast = match a {
            Affinity::Integer => Some("INTEGER"),
            Affinity::Text => Some("TEXT"),
            Affinity::Numeric => Some("NUMERIC"),
            _ => None,
        };
        col(&mut names, entry.def.dims[d].clone(), cast);
    }
    col(&mut names, "pleroma$n".into(), None);
    for &m in &measures {
        for p in ["c", "s", "lo", "hi"] {
            col(&mut names, format!("pleroma${p}{m}"), None);
        }
    }
    let cte_head = format!(
        "{}({}) AS (SELECT {} FROM json_each('",
        quote(CORE),
        names.join(", "),
        sel.join(", ")
    );
    // Insert the CTE: first in the user's WITH, or a WITH of its own.
    let (at, joiner) = match &q.with {
        Some(with) => {
            let first = with.cte_tables.first().ok_or("an empty WITH")?;
            (w.offset(first.alias.name.span.start)?, "')), ")
        }
        None => (0, "')) "),
    };
    w.edits.sort_by_key(|(r, _)| (r.start, r.end));
    for pair in w.edits.windows(2) {
        if pair[0].0.end > pair[1].0.start {
            return Err("overlapping rewrites".into());
        }
    }
    let mut rewritten = String::with_capacity(sql.len() + 64);
    let mut pos = 0;
    for (r, text) in &w.edits {
        rewritten.push_str(&sql[pos..r.start]);
        rewritten.push_str(text);
        pos = r.end;
    }
    rewritten.push_str(&sql[pos..]);
    // `at` is before every edit (the first CTE's name or the start).
    let head = format!(
        "{}{}{}",
        &rewritten[..at],
        if q.with.is_some() { "" } else { "WITH " },
        cte_head
    );
    let tail = format!("{joiner}{}", &rewritten[at..]);
    let dim_names: Vec<&str> = dims.iter().map(|&d| entry.def.dims[d].as_str()).collect();
    let split = format!(
        "cells: GROUP BY ({}) with {}; SQLite: {}",
        dim_names.join(", "),
        if w.aggs.is_empty() {
            "no aggregate".to_owned()
        } else {
            w.aggs.join(", ")
        },
        if w.rest.is_empty() {
            "the statement over the grouped rows".to_owned()
        } else {
            w.rest.join(", ")
        }
    );
    Ok(ResiduePlan {
        table: entry.def.table.clone(),
        dims,
        dim_aff,
        measures,
        sums: w.sums,
        extrema: w.extrema.into_iter().collect(),
        abs_dims: w.abs_dims.into_iter().collect(),
        head,
        tail,
        columns,
        param_count,
        cut: w.cut,
        split,
    })
}

/// Scalar functions that are deterministic and have no side effects: the
/// same arguments give the same value however often they are called. A
/// residue evaluates them once per group instead of once per row.
const FUNCTIONS: &[&str] = &[
    "abs",
    "coalesce",
    "ifnull",
    "iif",
    "if",
    "nullif",
    "round",
    "printf",
    "format",
    "lower",
    "upper",
    "length",
    "octet_length",
    "substr",
    "substring",
    "trim",
    "ltrim",
    "rtrim",
    "replace",
    "instr",
    "hex",
    "quote",
    "typeof",
    "min",
    "max",
    "like",
    "glob",
    "char",
    "unicode",
    "sign",
    "date",
    "time",
    "datetime",
    "julianday",
    "strftime",
    "unixepoch",
    "timediff",
    "concat",
    "concat_ws",
    "ceil",
    "ceiling",
    "floor",
    "trunc",
    "mod",
    "power",
    "pow",
    "sqrt",
    "exp",
    "ln",
    "log",
    "log10",
    "log2",
];

/// Aggregates the cells merge.
const AGGREGATES: &[&str] = &[
    "count",
    "sum",
    "total",
    "avg",
    "min",
    "max",
    "pleromasumexact",
];

/// Aggregates the cells do not merge (their value depends on the rows or
/// their order, not on mergeable partials).
const OTHER_AGGREGATES: &[&str] = &[
    "group_concat",
    "string_agg",
    "json_group_array",
    "json_group_object",
    "jsonb_group_array",
    "jsonb_group_object",
    "median",
    "percentile",
    "percentile_cont",
    "percentile_disc",
];

/// Aggregates whose result depends on the order they add rows in.
const ORDERED_SUMS: &[&str] = &["sum", "total", "avg", "pleromasumexact"];

/// Window functions whose value does not depend on the order of peers.
const PEER_FREE_WINDOWS: &[&str] = &[
    "rank",
    "dense_rank",
    "percent_rank",
    "cume_dist",
    "sum",
    "total",
    "count",
    "min",
    "max",
    "avg",
];

/// Functions that can raise an error on some values: `abs(-2^63)`
/// ("integer overflow"), and those whose result can outgrow their
/// arguments past SQLite's length limit ("string or blob too big"), or
/// whose pattern can be too long ("LIKE or GLOB pattern too complex").
/// SQLite evaluates a per-row term on the rows its plan reaches, in the
/// order it chooses, so such a term is served per row only when it is
/// proved unable to raise on any row (`abs` of a dimension, checked against
/// the core's values), and per group only without a LIMIT.
const RAISING: &[&str] = &[
    "abs",
    "printf",
    "format",
    "replace",
    "concat",
    "concat_ws",
    "quote",
    "hex",
    "char",
    "like",
    "glob",
    "strftime",
];

/// Other window functions: exact when the window's ORDER BY is total.
const ORDERED_WINDOWS: &[&str] = &[
    "row_number",
    "ntile",
    "lag",
    "lead",
    "first_value",
    "last_value",
    "nth_value",
];

struct Walker<'a> {
    shared: &'a Planes,
    sql: &'a str,
    lines: Vec<usize>,
    edits: Vec<(Range<usize>, String)>,
    table: Option<usize>,
    dims: BTreeSet<usize>,
    measures: BTreeSet<usize>,
    sums: Vec<SumTerm>,
    extrema: BTreeSet<usize>,
    abs_dims: BTreeSet<usize>,
    /// A function that can raise an error sits in a per-group position.
    raises: bool,
    /// Some query of the statement has a LIMIT.
    limited: bool,
    /// Names of the user's CTEs in scope, and whether each reads the core.
    ctes: Vec<(String, bool)>,
    /// Reads of the core so far: blocks over the planed table, and FROM
    /// references to CTEs that read it (so a query that reads the core at
    /// any depth is seen as one).
    cores: usize,
    /// The aggregates the cells answer (for explain).
    aggs: Vec<String>,
    /// What SQLite evaluates (for explain).
    rest: Vec<String>,
    /// Nesting of queries (1: the statement itself).
    depth: usize,
    /// The statement's ORDER BY as output columns, when its LIMIT cut is
    /// checked at run time instead of proven by the ORDER BY.
    cut_keys: Option<Vec<usize>>,
    cut: Option<Cut>,
}

/// `ORDER BY <outputs> LIMIT n [OFFSET o]` whose order is not total over the
/// groups: the rewritten statement runs without its LIMIT, and the answer is
/// served only when no two rows on either side of a cut tie on the keys
/// (then which rows the cut keeps does not depend on SQLite's order of
/// ties).
#[derive(Debug, Clone)]
pub(crate) struct Cut {
    /// Output columns of the ORDER BY terms.
    pub keys: Vec<usize>,
    pub limit: i64,
    pub offset: i64,
}

/// Where an expression sits in a block that reads the core.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// Per row of the table (WHERE, GROUP BY terms, aggregate arguments):
    /// dimension columns only.
    Row,
    /// Per group (select list, HAVING, ORDER BY of an aggregate block).
    Group,
}

/// A block that reads the planed table alone.
struct Core<'b> {
    alias: String,
    entry: usize,
    /// Group terms in Display form.
    groups: Vec<String>,
    /// Output aliases of the block.
    aliases: Vec<String>,
    items: Vec<&'b Expr>,
}

impl<'a> Walker<'a> {
    fn offset(&self, l: Location) -> R<usize> {
        if l.line == 0 || l.column == 0 {
            return Err("an expression without a source position".into());
        }
        let start = *self
            .lines
            .get(l.line as usize - 1)
            .ok_or("a source position past the text")?;
        let line = &self.sql[start..];
        let mut chars = line.char_indices();
        let mut at = line.len();
        for _ in 1..l.column {
            chars.next();
        }
        if let Some((i, _)) = chars.next() {
            at = i;
        }
        Ok(start + at)
    }

    /// The source text of `e`. sqlparser's spans stop short of a call's
    /// closing parenthesis (and of `(*)`, FILTER and OVER): the range is
    /// extended to the parentheses it opens, then over what follows a call.
    fn range(&self, e: &impl Spanned) -> R<Range<usize>> {
        let s = e.span();
        let (a, b) = (self.offset(s.start)?, self.offset(s.end)?);
        if a >= b {
            return Err("an expression without a source position".into());
        }
        self.extend(a, b)
    }

    fn extend(&self, a: usize, mut b: usize) -> R<Range<usize>> {
        let bytes = self.sql.as_bytes();
        let mut open = 0usize;
        let mut i = a;
        while i < b {
            i = match bytes[i] {
                b'(' => {
                    open += 1;
                    i + 1
                }
                b')' => {
                    open = open.checked_sub(1).ok_or("unbalanced parentheses")?;
                    i + 1
                }
                q @ (b'\'' | b'"' | b'`') => skip_quoted(bytes, i, q)?,
                b'[' => skip_quoted(bytes, i, b']')?,
                _ => i + 1,
            };
        }
        b = i;
        while open > 0 {
            let c = *bytes.get(b).ok_or("unbalanced parentheses")?;
            b = match c {
                b'(' => {
                    open += 1;
                    b + 1
                }
                b')' => {
                    open -= 1;
                    b + 1
                }
                q @ (b'\'' | b'"' | b'`') => skip_quoted(bytes, b, q)?,
                b'[' => skip_quoted(bytes, b, b']')?,
                _ => b + 1,
            };
        }
        // A call: `(*)` or `()` after the name, then FILTER (...), OVER (...).
        loop {
            let rest = &self.sql[b..];
            let ws = rest.len() - rest.trim_start().len();
            let after = &rest[ws..];
            let word = |w: &str| {
                after.len() > w.len()
                    && after[..w.len()].eq_ignore_ascii_case(w)
                    && after[w.len()..].trim_start().starts_with('(')
            };
            let skip = if after.starts_with('(') && self.is_call_name(&self.sql[a..b]) {
                ws
            } else if word("filter") {
                ws + 6
            } else if word("over") {
                ws + 4
            } else {
                break;
            };
            let from = b + skip;
            let from = from + (self.sql[from..].len() - self.sql[from..].trim_start().len());
            b = balanced(bytes, from)?;
        }
        Ok(a..b)
    }

    /// Whether `text` ends in a bare word (so `(` after it is a call).
    fn is_call_name(&self, text: &str) -> bool {
        text.bytes()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
    }

    /// The source range of an expression, checked: its text parses back to
    /// the same expression (sqlparser's spans are not always whole).
    /// A span may also start late (after a NOT, a minus or `CAST(`): up to
    /// four tokens before it are tried, nearest first.
    fn expr_range(&self, e: &Expr) -> R<Range<usize>> {
        let s = e.span();
        let (mut a, b) = (self.offset(s.start)?, self.offset(s.end)?);
        if a >= b {
            return Err("an expression without a source position".into());
        }
        let want = e.to_string();
        let bytes = self.sql.as_bytes();
        let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        // Ends: the span's, then up to three words after it (`IS NOT NULL`).
        let mut ends = vec![b];
        let mut j = b;
        for _ in 0..3 {
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            if j >= bytes.len() || !word(bytes[j]) {
                break;
            }
            while j < bytes.len() && word(bytes[j]) {
                j += 1;
            }
            ends.push(j);
        }
        for _ in 0..5 {
            for &b in &ends {
                if let Ok(r) = self.extend(a, b) {
                    let back = Parser::new(&SQLiteDialect {})
                        .try_with_sql(&self.sql[r.clone()])
                        .and_then(|mut p| p.parse_expr());
                    if back.is_ok_and(|x| x.to_string() == want) {
                        return Ok(r);
                    }
                }
            }
            // One token back.
            let mut i = a;
            while i > 0 && bytes[i - 1].is_ascii_whitespace() {
                i -= 1;
            }
            if i == 0 {
                break;
            }
            if word(bytes[i - 1]) {
                while i > 0 && word(bytes[i - 1]) {
                    i -= 1;
                }
            } else {
                i -= 1;
            }
            a = i;
        }
        Err("an expression whose source text is not whole".into())
    }

    fn text(&self, e: &Expr) -> R<&'a str> {
        let r = self.expr_range(e)?;
        Ok(&self.sql[r])
    }

    fn query(&mut self, q: &Query, inside_core: bool) -> R<()> {
        self.depth += 1;
        let r = self.query_at(q, inside_core);
        self.depth -= 1;
        r
    }

    fn query_at(&mut self, q: &Query, inside_core: bool) -> R<()> {
        if q.fetch.is_some() || !q.locks.is_empty() || q.for_clause.is_some() {
            return Err("FETCH or locking clauses".into());
        }
        if q.settings.is_some() || q.format_clause.is_some() || !q.pipe_operators.is_empty() {
            return Err("clauses outside SQLite".into());
        }
        let depth = self.ctes.len();
        if let Some(with) = &q.with {
            if with.recursive {
                return Err("WITH RECURSIVE".into());
            }
            for cte in &with.cte_tables {
                let name = cte.alias.name.value.clone();
                if self.shared.find(&name).is_some() {
                    return Err(format!("a CTE named like the planed table {name}"));
                }
                if cte.from.is_some() {
                    return Err("a CTE with FROM".into());
                }
                let before = self.cores;
                self.query(&cte.query, inside_core)?;
                self.ctes.push((name, self.cores > before));
            }
        }
        let limited = q.limit_clause.is_some();
        let order: Vec<&sqlparser::ast::OrderByExpr> = match &q.order_by {
            None => Vec::new(),
            Some(ob) => match &ob.kind {
                OrderByKind::Expressions(v) => v.iter().collect(),
                OrderByKind::All(_) => return Err("ORDER BY ALL".into()),
            },
        };
        if order.iter().any(|o| o.with_fill.is_some()) {
            return Err("ORDER BY WITH FILL".into());
        }
        let order_exprs: Vec<&Expr> = order.iter().map(|o| &o.expr).collect();
        match q.body.as_ref() {
            SetExpr::Select(sel) => self.select(sel, &order_exprs, limited, inside_core)?,
            other => {
                if limited {
                    return Err("LIMIT over a compound or nested SELECT".into());
                }
                self.set_expr(other, inside_core)?;
                for e in order_exprs {
                    self.wrapper_expr(e, inside_core)?;
                }
            }
        }
        if let Some(l) = &q.limit_clause {
            self.limited = true;
            let exprs: Vec<&Expr> = match l {
                LimitClause::LimitOffset {
                    limit,
                    offset,
                    limit_by,
                } => {
                    if !limit_by.is_empty() {
                        return Err("LIMIT BY".into());
                    }
                    limit
                        .iter()
                        .chain(offset.iter().map(|o| &o.value))
                        .collect()
                }
                LimitClause::OffsetCommaLimit { offset, limit } => vec![offset, limit],
            };
            for e in &exprs {
                if !is_constant(e) {
                    return Err("LIMIT/OFFSET that is not a literal or parameter".into());
                }
            }
            if let Some(keys) = self.cut_keys.take() {
                self.cut = Some(self.limit_cut(q, l, keys)?);
            }
        }
        self.ctes.truncate(depth);
        Ok(())
    }

    fn set_expr(&mut self, s: &SetExpr, inside_core: bool) -> R<()> {
        match s {
            SetExpr::Select(sel) => self.select(sel, &[], false, inside_core),
            SetExpr::Query(q) => self.query(q, inside_core),
            SetExpr::SetOperation {
                op, left, right, ..
            } => {
                if !matches!(
                    op,
                    SetOperator::Union | SetOperator::Except | SetOperator::Intersect
                ) {
                    return Err(format!("set operation {op}"));
                }
                self.set_expr(left, inside_core)?;
                self.set_expr(right, inside_core)
            }
            SetExpr::Values(v) => {
                for row in &v.rows {
                    for e in &row.content {
                        self.wrapper_expr(e, inside_core)?;
                    }
                }
                Ok(())
            }
            _ => Err("a statement form outside SELECT".into()),
        }
    }

    /// The planed table a FROM item names, if it is one (not a CTE).
    fn planed(&self, f: &TableFactor) -> R<Option<(usize, String)>> {
        let TableFactor::Table { name, alias, .. } = f else {
            return Ok(None);
        };
        let parts: Vec<&str> = name
            .0
            .iter()
            .filter_map(|p| match p {
                ObjectNamePart::Identifier(i) => Some(i.value.as_str()),
                _ => None,
            })
            .collect();
        let (schema, table) = match parts.as_slice() {
            [t] => (None, *t),
            [s, t] => (Some(*s), *t),
            _ => return Err("a computed or three-part table name".into()),
        };
        if schema.is_none() && self.ctes.iter().any(|(c, _)| c.eq_ignore_ascii_case(table)) {
            return Ok(None);
        }
        let Some(i) = self.shared.find(table) else {
            return Ok(None);
        };
        if schema.is_some_and(|s| !s.eq_ignore_ascii_case("main")) {
            return Err("a planed table outside the main schema".into());
        }
        let alias = match alias {
            Some(a) if !a.columns.is_empty() => {
                return Err("a table alias with column names".into())
            }
            Some(a) => a.name.value.clone(),
            None => table.to_owned(),
        };
        Ok(Some((i, alias)))
    }

    fn select(&mut self, sel: &Select, order: &[&Expr], limited: bool, inside_core: bool) -> R<()> {
        if sel.top.is_some() || sel.into.is_some() || sel.exclude.is_some() {
            return Err("TOP or INTO".into());
        }
        if !sel.lateral_views.is_empty() || sel.prewhere.is_some() || !sel.connect_by.is_empty() {
            return Err("clauses outside SQLite".into());
        }
        if !sel.cluster_by.is_empty() || !sel.distribute_by.is_empty() || !sel.sort_by.is_empty() {
            return Err("clauses outside SQLite".into());
        }
        if !sel.named_window.is_empty() || sel.qualify.is_some() {
            return Err("named windows".into());
        }
        let core = match sel.from.as_slice() {
            [twj] if twj.joins.is_empty() => self.planed(&twj.relation)?,
            _ => None,
        };
        match core {
            Some((entry, alias)) => {
                if inside_core && self.table.is_some_and(|t| t != entry) {
                    return Err("two planed tables".into());
                }
                self.core_select(sel, order, limited, entry, alias)
            }
            None => {
                if inside_core {
                    return Err("a subquery over other tables inside a served block".into());
                }
                if limited {
                    return Err("LIMIT outside a block over the planed table".into());
                }
                for twj in &sel.from {
                    for f in
                        std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation))
                    {
                        if self.planed(f)?.is_some() {
                            return Err("the planed table in a join".into());
                        }
                        if self.names_core_cte(f) {
                            self.cores += 1;
                        }
                        self.table_factor(f)?;
                    }
                    for j in &twj.joins {
                        use sqlparser::ast::{JoinConstraint, JoinOperator as J};
                        let c = match &j.join_operator {
                            J::Join(c) | J::Inner(c) | J::Left(c) | J::LeftOuter(c) => c,
                            J::CrossJoin(c) => c,
                            _ => return Err("a join form outside SQLite".into()),
                        };
                        match c {
                            JoinConstraint::On(e) => self.wrapper_expr(e, false)?,
                            // Matched by names, which the rewrite changes
                            // (an aggregate column is named by its text).
                            JoinConstraint::Natural | JoinConstraint::Using(_)
                                if !crate::mutation::active("residue_natural_join") =>
                            {
                                return Err("NATURAL JOIN or USING in an outer query".into())
                            }
                            _ => {}
                        }
                    }
                }
                for item in &sel.projection {
                    match item {
                        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                            self.wrapper_expr(e, false)?
                        }
                        _ => {}
                    }
                }
                let rest = [&sel.selection, &sel.having];
                for e in rest.into_iter().flatten() {
                    self.wrapper_expr(e, false)?;
                }
                if let GroupByExpr::Expressions(g, m) = &sel.group_by {
                    if !m.is_empty() {
                        return Err("GROUP BY modifiers".into());
                    }
                    for e in g {
                        self.wrapper_expr(e, false)?;
                    }
                } else {
                    return Err("GROUP BY ALL".into());
                }
                for e in order {
                    self.wrapper_expr(e, false)?;
                }
                outer_order_free(sel, order)?;
                self.rest.push("an outer query".into());
                Ok(())
            }
        }
    }

    /// Whether a FROM item names a CTE in scope (the innermost of that
    /// name) that reads the core.
    fn names_core_cte(&self, f: &TableFactor) -> bool {
        let TableFactor::Table { name, .. } = f else {
            return false;
        };
        let [ObjectNamePart::Identifier(i)] = name.0.as_slice() else {
            return false;
        };
        self.ctes
            .iter()
            .rev()
            .find(|(c, _)| c.eq_ignore_ascii_case(&i.value))
            .is_some_and(|(_, core)| *core)
    }

    /// A scalar subquery (`(SELECT …)` as a value): walked like any query,
    /// then, if it reads the core, its first row must not depend on the
    /// order rows come in (`first_row_fixed`).
    fn scalar_subquery(&mut self, q: &Query, inside_core: bool) -> R<()> {
        let before = self.cores;
        self.query(q, inside_core)?;
        if self.cores > before {
            first_row_fixed(q)?;
        }
        Ok(())
    }

    fn table_factor(&mut self, f: &TableFactor) -> R<()> {
        match f {
            TableFactor::Table { args: None, .. } => Ok(()),
            TableFactor::Derived {
                lateral: false,
                subquery,
                ..
            } => self.query(subquery, false),
            _ => Err("a FROM item other than a table or a subquery".into()),
        }
    }

    /// An expression outside the blocks that read the core: SQLite
    /// evaluates it over rows that are the same as without the plane.
    fn wrapper_expr(&mut self, e: &Expr, inside_core: bool) -> R<()> {
        let mut err = None;
        visit(e, &mut |x| {
            if err.is_some() {
                return false;
            }
            match x {
                Expr::Function(f) => {
                    if let Err(r) = function_allowed(f) {
                        err = Some(r);
                    }
                    // An outer WHERE may be pushed down into a block over
                    // the core, and evaluated there per row.
                    let name = fn_name(f).unwrap_or_default();
                    if RAISING.contains(&name.as_str())
                        && !crate::mutation::active("residue_raising_where")
                    {
                        err = Some(format!(
                            "{name}() in an outer query (it can raise an error)"
                        ));
                    }
                    true
                }
                Expr::Subquery(q) => {
                    if let Err(r) = self.scalar_subquery(q, inside_core) {
                        err = Some(r);
                    }
                    false
                }
                // EXISTS (and IN, below) ask whether a row is there, not
                // which one comes first.
                Expr::Exists { subquery: q, .. } => {
                    if let Err(r) = self.query(q, inside_core) {
                        err = Some(r);
                    }
                    false
                }
                Expr::In {
                    expr,
                    target: InTarget::Subquery(subquery),
                    ..
                } => {
                    if let Err(r) = self
                        .wrapper_expr(expr, inside_core)
                        .and_then(|_| self.query(subquery, inside_core))
                    {
                        err = Some(r);
                    }
                    false
                }
                other => {
                    if let Err(r) = expr_form_allowed(other) {
                        err = Some(r);
                    }
                    if let Some(what) = raising_form(other) {
                        if !crate::mutation::active("residue_raising_where") {
                            err = Some(format!("{what} in an outer query (it can raise an error)"));
                        }
                    }
                    true
                }
            }
        });
        err.map_or(Ok(()), Err)
    }

    fn core_select(
        &mut self,
        sel: &Select,
        order: &[&Expr],
        limited: bool,
        entry: usize,
        alias: String,
    ) -> R<()> {
        if self.table.is_some_and(|t| t != entry) {
            return Err("two planed tables".into());
        }
        self.table = Some(entry);
        self.cores += 1;
        // The table reference becomes the core, under the same name.
        let TableFactor::Table { name, alias: a, .. } = &sel.from[0].relation else {
            unreachable!("checked by planed()");
        };
        let r = self.range(name)?;
        if self.sql[r.clone()] != name.to_string() {
            return Err("a table name whose source text is not whole".into());
        }
        let text = match a {
            Some(_) => quote(CORE),
            None => format!("{} AS {}", quote(CORE), quote(&alias)),
        };
        self.edits.push((r, text));
        let distinct = match &sel.distinct {
            None => false,
            Some(sqlparser::ast::Distinct::Distinct) => true,
            Some(_) => return Err("DISTINCT ON".into()),
        };
        let (items, aliases) = projection(&sel.projection, "a wildcard over the planed table")?;
        let mut c = Core {
            alias,
            entry,
            groups: Vec::new(),
            aliases,
            items,
        };
        let GroupByExpr::Expressions(gexprs, mods) = &sel.group_by else {
            return Err("GROUP BY ALL".into());
        };
        if !mods.is_empty() {
            return Err("GROUP BY modifiers".into());
        }
        for g in gexprs {
            let term = self.resolve_term(&c, g, false)?;
            self.row_expr(&c, term)?;
            c.groups.push(term.to_string());
        }
        if let Some(w) = &sel.selection {
            self.row_expr(&c, w)?;
        }
        let has_agg = c.items.iter().any(|e| has_aggregate(e))
            || sel.having.as_ref().is_some_and(has_aggregate)
            || order.iter().any(|e| has_aggregate(e));
        let grouped = has_agg || !gexprs.is_empty() || sel.having.is_some();
        if grouped {
            if distinct && !order.is_empty() {
                // Which group's key orders a merged DISTINCT row is SQLite's
                // choice.
                return Err("DISTINCT with ORDER BY over aggregated rows".into());
            }
            for e in c.items.clone() {
                self.group_expr(&c, e)?;
            }
            if let Some(h) = &sel.having {
                self.group_expr(&c, h)?;
            }
            for e in order {
                let t = self.resolve_term(&c, e, true)?;
                if !std::ptr::eq(t, *e) {
                    continue;
                }
                self.group_expr(&c, e)?;
            }
            if limited && !c.groups.is_empty() {
                let keys: Vec<String> = order
                    .iter()
                    .map(|e| self.resolve_term(&c, e, true).map(|t| t.to_string()))
                    .collect::<R<_>>()?;
                if let Some(g) = c.groups.iter().find(|g| !keys.contains(g)) {
                    let why =
                        format!("LIMIT without an ORDER BY over every group term ({g} is not)");
                    // The statement's own ORDER BY over output columns: the
                    // cut is checked for ties when it runs.
                    if self.depth != 1 || distinct {
                        return Err(why);
                    }
                    let mut idx = Vec::new();
                    for e in order {
                        let t = self.resolve_term(&c, e, true)?.to_string();
                        match c.items.iter().position(|i| i.to_string() == t) {
                            Some(k) => idx.push(k),
                            None => return Err(why),
                        }
                    }
                    self.cut_keys = Some(idx);
                }
            }
        } else {
            if !distinct {
                return Err("a row list (no aggregate, no GROUP BY, no DISTINCT)".into());
            }
            for e in c.items.clone() {
                if has_window(e) {
                    return Err("a window function over the rows of the table".into());
                }
                self.row_expr(&c, e)?;
            }
            for e in order {
                let t = self.resolve_term(&c, e, true)?;
                if std::ptr::eq(t, *e) {
                    self.row_expr(&c, e)?;
                }
                // Which row's value orders a merged DISTINCT row is the
                // first SQLite meets in its scan: over the core, another.
                let output = c.items.iter().any(|i| i.to_string() == t.to_string());
                if !output && !crate::mutation::active("residue_distinct_order") {
                    return Err("DISTINCT with an ORDER BY term that is not an output".into());
                }
            }
            if limited {
                let keys: Vec<String> = order
                    .iter()
                    .map(|e| self.resolve_term(&c, e, true).map(|t| t.to_string()))
                    .collect::<R<_>>()?;
                if c.items.iter().any(|i| !keys.contains(&i.to_string())) {
                    return Err("LIMIT without an ORDER BY over every DISTINCT output".into());
                }
            }
            self.rest.push("DISTINCT".into());
        }
        Ok(())
    }

    /// A GROUP BY or ORDER BY term: a position or an output alias stands for
    /// the output expression (for ORDER BY the alias wins, for GROUP BY the
    /// column: SQLite's order).
    fn resolve_term<'b>(&self, c: &Core<'b>, e: &'b Expr, order: bool) -> R<&'b Expr> {
        if let Expr::Value(v) = e {
            if let SqlValue::Number(n, _) = &v.value {
                let p: usize = n.parse().map_err(|_| "a non-integer position")?;
                return c
                    .items
                    .get(p.wrapping_sub(1))
                    .copied()
                    .ok_or_else(|| "a position out of range".to_owned());
            }
        }
        if let Expr::Identifier(i) = e {
            let name = i.value.to_ascii_lowercase();
            if let Some(k) = c.aliases.iter().position(|a| *a == name) {
                if order || !self.column_first(c, e, &i.value) {
                    return Ok(c.items[k]);
                }
            }
        }
        Ok(e)
    }

    /// Whether a bare name in GROUP BY, HAVING or an ORDER BY expression
    /// names a column of the table before an output alias: SQLite's
    /// resolve.c looks a name up in the FROM tables first (every column,
    /// and rowid/oid/_rowid_), and in the result set's aliases only when no
    /// column matches. The core carries dimensions only, so over it the
    /// rewritten text would find the alias instead.
    fn column_first(&self, c: &Core, e: &Expr, name: &str) -> bool {
        if crate::mutation::active("residue_alias_before_column") {
            return self.dim(c, e).is_some();
        }
        crate::classify::names_a_column(&self.shared.entry(c.entry).cols.columns, name)
    }

    /// The dimension a column reference names, if it names one.
    fn dim(&self, c: &Core, e: &Expr) -> Option<usize> {
        let name = match e {
            Expr::Identifier(i) => &i.value,
            Expr::CompoundIdentifier(p) => match p.as_slice() {
                [q, col] if q.value.eq_ignore_ascii_case(&c.alias) => &col.value,
                _ => return None,
            },
            _ => return None,
        };
        let def = &self.shared.entry(c.entry).def;
        def.dims.iter().position(|d| d.eq_ignore_ascii_case(name))
    }

    fn measure(&self, c: &Core, e: &Expr) -> Option<usize> {
        let name = match e {
            Expr::Identifier(i) => &i.value,
            Expr::CompoundIdentifier(p) => match p.as_slice() {
                [q, col] if q.value.eq_ignore_ascii_case(&c.alias) => &col.value,
                _ => return None,
            },
            Expr::Nested(x) => return self.measure(c, x),
            _ => return None,
        };
        let def = &self.shared.entry(c.entry).def;
        def.measures
            .iter()
            .position(|m| m.eq_ignore_ascii_case(name))
    }

    /// A column reference that is not a dimension: the reason it blocks.
    fn not_a_dim(&self, c: &Core, e: &Expr) -> String {
        let def = &self.shared.entry(c.entry).def;
        if let Some(m) = self.measure(c, e) {
            return format!("measure {} outside an aggregate", def.measures[m]);
        }
        format!(
            "column {e} is not a dimension of the plane on {}",
            def.table
        )
    }

    /// A per-row expression of a block over the core: dimension columns,
    /// literals, parameters, deterministic functions; subqueries that are
    /// blocks over the core themselves.
    fn row_expr(&mut self, c: &Core, e: &Expr) -> R<()> {
        self.level_expr(c, e, Level::Row)
    }

    fn group_expr(&mut self, c: &Core, e: &Expr) -> R<()> {
        self.level_expr(c, e, Level::Group)
    }

    fn level_expr(&mut self, c: &Core, e: &Expr, level: Level) -> R<()> {
        if level == Level::Group && c.groups.contains(&e.to_string()) {
            // A group term's value: checked as a row expression already.
            return Ok(());
        }
        match e {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                if let Some(d) = self.dim(c, e) {
                    if level == Level::Group {
                        return Err(format!(
                            "bare column {} outside GROUP BY",
                            self.shared.entry(c.entry).def.dims[d]
                        ));
                    }
                    self.dims.insert(d);
                    return Ok(());
                }
                if let Expr::Identifier(i) = e {
                    let name = i.value.to_ascii_lowercase();
                    if level == Level::Group
                        && c.aliases.contains(&name)
                        && !self.column_first(c, e, &i.value)
                    {
                        return Ok(());
                    }
                }
                Err(self.not_a_dim(c, e))
            }
            Expr::Function(f) => {
                let name = fn_name(f)?;
                if let Some(w) = &f.over {
                    if level == Level::Row {
                        return Err(format!("window function {name}() over the table's rows"));
                    }
                    let WindowType::WindowSpec(spec) = w else {
                        return Err("a named window".into());
                    };
                    if !PEER_FREE_WINDOWS.contains(&name.as_str())
                        && !ORDERED_WINDOWS.contains(&name.as_str())
                    {
                        return Err(format!("window function {name}()"));
                    }
                    if spec.window_frame.is_some() && !ORDERED_WINDOWS.contains(&name.as_str()) {
                        return Err(format!("{name}() OVER with a frame"));
                    }
                    if ORDERED_WINDOWS.contains(&name.as_str()) || spec.window_frame.is_some() {
                        let keys: Vec<String> =
                            spec.order_by.iter().map(|o| o.expr.to_string()).collect();
                        let parts: Vec<String> =
                            spec.partition_by.iter().map(|p| p.to_string()).collect();
                        if c.groups.is_empty()
                            || c.groups
                                .iter()
                                .any(|g| !keys.contains(g) && !parts.contains(g))
                        {
                            return Err(format!(
                                "{name}() OVER an order that is not total over the groups"
                            ));
                        }
                    }
                    for p in &spec.partition_by {
                        self.group_expr(c, p)?;
                    }
                    for o in &spec.order_by {
                        self.group_expr(c, &o.expr)?;
                    }
                    // A window's FILTER is evaluated per group, like its
                    // arguments (and its aggregates are the core's merges).
                    if let Some(p) = &f.filter {
                        if !crate::mutation::active("residue_window_filter") {
                            self.group_expr(c, p)?;
                        }
                    }
                    self.args_at(c, f, Level::Group)?;
                    self.rest.push(format!("{name}() OVER"));
                    return Ok(());
                }
                if OTHER_AGGREGATES.contains(&name.as_str()) {
                    return Err(format!("aggregate {name}() does not merge from the cells"));
                }
                if AGGREGATES.contains(&name.as_str()) && !is_scalar_minmax(f) {
                    if level == Level::Row {
                        return Err(format!("aggregate {name}() in a per-row position"));
                    }
                    return self.aggregate(c, e, f, &name);
                }
                if !FUNCTIONS.contains(&name.as_str()) {
                    return Err(format!(
                        "function {name}() is not on the deterministic list"
                    ));
                }
                if f.filter.is_some() || !f.within_group.is_empty() {
                    return Err(format!("{name}() with FILTER or WITHIN GROUP"));
                }
                if RAISING.contains(&name.as_str()) {
                    self.may_raise(c, f, &name, level)?;
                }
                self.args_at(c, f, level)
            }
            Expr::Subquery(q) => {
                self.scalar_subquery(q, true)?;
                self.rest.push("a subquery".into());
                Ok(())
            }
            Expr::Exists { subquery: q, .. } => {
                self.query(q, true)?;
                self.rest.push("a subquery".into());
                Ok(())
            }
            Expr::In {
                expr,
                target: InTarget::Subquery(subquery),
                ..
            } => {
                self.level_expr(c, expr, level)?;
                self.query(subquery, true)
            }
            other => {
                expr_form_allowed(other)?;
                if let Some(what) = raising_form(other) {
                    if level == Level::Row && !crate::mutation::active("residue_raising_where") {
                        return Err(format!("{what} per row (it can raise an error)"));
                    }
                    self.raises = true;
                }
                let mut kids = Vec::new();
                children(other, &mut kids);
                for k in kids {
                    self.level_expr(c, k, level)?;
                }
                Ok(())
            }
        }
    }

    /// A function that can raise an error: per row, only `abs` of a
    /// dimension, whose values the core shows (checked when it is built).
    fn may_raise(
        &mut self,
        c: &Core,
        f: &sqlparser::ast::Function,
        name: &str,
        level: Level,
    ) -> R<()> {
        if level == Level::Group {
            self.raises = true;
            return Ok(());
        }
        if crate::mutation::active("residue_raising_where") {
            return Ok(());
        }
        let first = match &f.args {
            FunctionArguments::List(l) => match l.args.first() {
                Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) => {
                    match &v.value {
                        SqlValue::SingleQuotedString(p) => Some(p.len()),
                        _ => None,
                    }
                }
                _ => None,
            },
            _ => None,
        };
        // A literal pattern of LIKE/GLOB, or a literal strftime format,
        // bounds what the call can do.
        match (name, first) {
            ("like" | "glob", Some(n)) if n <= 50_000 => return Ok(()),
            ("strftime", Some(_)) => return Ok(()),
            _ => {}
        }
        if name == "abs" {
            if let FunctionArguments::List(l) = &f.args {
                if let [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] = l.args.as_slice() {
                    if let Some(d) = self.dim(c, x) {
                        self.abs_dims.insert(d);
                        return Ok(());
                    }
                }
            }
        }
        Err(format!("{name}() per row (it can raise an error)"))
    }

    fn args_at(&mut self, c: &Core, f: &sqlparser::ast::Function, level: Level) -> R<()> {
        match &f.args {
            FunctionArguments::None => Ok(()),
            FunctionArguments::List(l) => {
                if !l.clauses.is_empty() {
                    return Err("function argument clauses".into());
                }
                for a in &l.args {
                    match a {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => {
                            self.level_expr(c, x, level)?
                        }
                        _ => return Err("a function argument form".into()),
                    }
                }
                Ok(())
            }
            FunctionArguments::Subquery(_) => Err("a subquery as function arguments".into()),
        }
    }

    /// An aggregate over the table's rows: the merge of the core's partials.
    fn aggregate(
        &mut self,
        c: &Core,
        whole: &Expr,
        f: &sqlparser::ast::Function,
        name: &str,
    ) -> R<()> {
        if !f.within_group.is_empty()
            || f.null_treatment.is_some()
            || !matches!(f.parameters, FunctionArguments::None)
        {
            return Err(format!("{name}() with WITHIN GROUP or parameters"));
        }
        let FunctionArguments::List(list) = &f.args else {
            return Err(format!("{name}() without an argument list"));
        };
        if !list.clauses.is_empty() {
            return Err(format!("{name}() with clauses"));
        }
        let distinct = matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct));
        let filter = match &f.filter {
            Some(p) => {
                self.row_expr(c, p)?;
                format!(" FILTER (WHERE {})", self.text(p)?)
            }
            None => String::new(),
        };
        let r = self.expr_range(whole)?;
        let n = quote("pleroma$n");
        let arg = match list.args.as_slice() {
            [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] if name == "count" && !distinct => {
                self.edits
                    .push((r, format!("COALESCE(SUM({n}){filter}, 0)")));
                self.aggs.push("COUNT(*)".into());
                return Ok(());
            }
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] => x,
            _ => return Err(format!("{name}() with other than one argument")),
        };
        let v = match self.vform(c, arg) {
            Ok(v) => v,
            Err(e) if mentions_measure(self, c, arg) => return Err(e),
            Err(_) => {
                // Over dimensions only: the same set of values over the
                // core's rows as over the table's.
                self.row_expr(c, arg)?;
                if distinct || matches!(name, "min" | "max") {
                    self.aggs.push(format!("{name}() of dimensions"));
                    return Ok(());
                }
                if name == "count" {
                    let x = self.text(arg)?;
                    self.edits.push((
                        r,
                        format!(
                            "COALESCE(SUM(CASE WHEN ({x}) IS NULL THEN 0 ELSE {n} END){filter}, 0)"
                        ),
                    ));
                    self.aggs.push("COUNT() of dimensions".into());
                    return Ok(());
                }
                return Err(format!("{name}() of a dimension expression"));
            }
        };
        if distinct {
            return Err(format!("{name}(DISTINCT) over a measure"));
        }
        let sum = render(&v, &|m| quote(&format!("pleroma$s{m}")), "0", &n, "NULL");
        let cnt = render(&v, &|m| quote(&format!("pleroma$c{m}")), &n, &n, "0");
        let lo = render(&v, &|m| quote(&format!("pleroma$lo{m}")), "0", "1", "NULL");
        let hi = render(&v, &|m| quote(&format!("pleroma$hi{m}")), "0", "1", "NULL");
        let mut ms = Vec::new();
        v.measures(&mut ms);
        let summed = matches!(name, "sum" | "total" | "avg" | "pleromasumexact");
        if summed {
            // One accumulator adds whichever measure each row's CASE
            // picks: its bound is over all of them together.
            let mut measures = ms.clone();
            measures.sort_unstable();
            measures.dedup();
            self.sums.push(SumTerm {
                measures,
                ones: v.has_one(),
            });
        }
        if matches!(name, "min" | "max") {
            self.extrema.extend(ms.iter().copied());
        }
        self.measures.extend(ms.iter().copied());
        if name == "avg" && self.text(whole)?.contains(['?', ':', '@', '$']) {
            return Err("AVG over a parameter".into());
        }
        let text = match name {
            "count" => format!("COALESCE(SUM({cnt}){filter}, 0)"),
            "sum" => format!("SUM({sum}){filter}"),
            "total" => format!("TOTAL({sum}){filter}"),
            "avg" => format!("(CAST(SUM({sum}){filter} AS REAL) / SUM({cnt}){filter})"),
            "min" => format!("MIN({lo}){filter}"),
            "max" => format!("MAX({hi}){filter}"),
            "pleromasumexact" => format!("PleromaSumExact({sum}){filter}"),
            _ => return Err(format!("aggregate {name}()")),
        };
        self.aggs.push(format!("{}()", name.to_ascii_uppercase()));
        self.edits.push((r, text));
        Ok(())
    }

    /// An aggregate argument whose per-row value is a measure or a constant
    /// chosen by dimensions alone.
    fn vform(&mut self, c: &Core, e: &Expr) -> R<V> {
        match e {
            Expr::Nested(x) => self.vform(c, x),
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => self
                .measure(c, e)
                .map(V::M)
                .ok_or_else(|| "an aggregate of a column that is not a measure".to_owned()),
            Expr::Value(v) => match &v.value {
                SqlValue::Number(n, false) if n == "0" => Ok(V::Zero),
                SqlValue::Number(n, false) if n == "1" => Ok(V::One),
                SqlValue::Null => Ok(V::Null),
                _ => Err("an aggregate of a literal other than 0, 1 or NULL".into()),
            },
            Expr::Case {
                operand: None,
                conditions,
                else_result,
                ..
            } => {
                let mut arms = Vec::new();
                for CaseWhen { condition, result } in conditions {
                    self.row_expr(c, condition)?;
                    let t = self.text(condition)?.to_owned();
                    arms.push((t, self.vform(c, result)?));
                }
                let other = match else_result {
                    Some(x) => Some(Box::new(self.vform(c, x)?)),
                    None => None,
                };
                Ok(V::Case(arms, other))
            }
            _ => Err("an aggregate over an expression of a measure".into()),
        }
    }
}

impl Walker<'_> {
    /// The LIMIT clause of the statement, removed from its text, with its
    /// literal bounds.
    fn limit_cut(&mut self, q: &Query, l: &LimitClause, keys: Vec<usize>) -> R<Cut> {
        let lit = |e: &Expr| -> R<i64> {
            match e {
                Expr::Value(v) => match &v.value {
                    SqlValue::Number(n, false) => n
                        .parse()
                        .map_err(|_| "a LIMIT that is not an integer".to_owned()),
                    _ => Err("a LIMIT cut with a parameter".into()),
                },
                Expr::UnaryOp {
                    op: sqlparser::ast::UnaryOperator::Minus,
                    expr,
                } => match expr.as_ref() {
                    Expr::Value(v) => match &v.value {
                        SqlValue::Number(n, false) => n
                            .parse::<i64>()
                            .map(|x| -x)
                            .map_err(|_| "a LIMIT that is not an integer".to_owned()),
                        _ => Err("a LIMIT cut with a parameter".into()),
                    },
                    _ => Err("a LIMIT expression".into()),
                },
                _ => Err("a LIMIT expression".into()),
            }
        };
        let (limit, offset, exprs): (&Expr, Option<&Expr>, Vec<&Expr>) = match l {
            LimitClause::LimitOffset {
                limit: Some(x),
                offset,
                ..
            } => (
                x,
                offset.as_ref().map(|o| &o.value),
                std::iter::once(x)
                    .chain(offset.iter().map(|o| &o.value))
                    .collect(),
            ),
            LimitClause::OffsetCommaLimit { offset, limit } => {
                (limit, Some(offset), vec![offset, limit])
            }
            _ => return Err("OFFSET without LIMIT".into()),
        };
        let (limit, offset) = (lit(limit)?, offset.map(lit).transpose()?.unwrap_or(0));
        // From the LIMIT keyword to the end of the last bound.
        let mut start = usize::MAX;
        let mut end = 0;
        for e in exprs {
            let r = self.expr_range(e)?;
            start = start.min(r.start);
            end = end.max(r.end);
        }
        let before = self.sql[..start].to_ascii_lowercase();
        let kw = before.rfind("limit").ok_or("a LIMIT without its keyword")?;
        if !self.sql[kw + 5..start].trim().is_empty() {
            return Err("a LIMIT clause of another form".into());
        }
        if !self.sql[end..]
            .trim_matches(|c: char| c.is_whitespace() || c == ';')
            .is_empty()
            || q.order_by.is_none()
        {
            return Err("a LIMIT that does not end the statement".into());
        }
        self.edits.push((kw..end, String::new()));
        self.rest
            .push("LIMIT (checked for a tie at the cut)".into());
        Ok(Cut {
            keys,
            limit,
            offset,
        })
    }
}

/// The per-row value of an aggregate argument (see `Walker::vform`).
#[derive(Debug)]
enum V {
    M(usize),
    Zero,
    One,
    Null,
    Case(Vec<(String, V)>, Option<Box<V>>),
}

impl V {
    fn measures(&self, out: &mut Vec<usize>) {
        match self {
            V::M(m) => out.push(*m),
            V::Case(arms, other) => {
                arms.iter().for_each(|(_, v)| v.measures(out));
                if let Some(o) = other {
                    o.measures(out);
                }
            }
            _ => {}
        }
    }

    fn has_one(&self) -> bool {
        match self {
            V::One => true,
            V::Case(arms, other) => {
                arms.iter().any(|(_, v)| v.has_one()) || other.as_ref().is_some_and(|o| o.has_one())
            }
            _ => false,
        }
    }
}

/// A per-core-row value: a measure's partial, or what 0, 1 and NULL
/// contribute for the row's whole group of table rows.
fn render(v: &V, m: &dyn Fn(usize) -> String, zero: &str, one: &str, null: &str) -> String {
    match v {
        V::M(i) => m(*i),
        V::Zero => zero.to_owned(),
        V::One => one.to_owned(),
        V::Null => null.to_owned(),
        V::Case(arms, other) => {
            let mut s = "CASE".to_owned();
            for (cond, r) in arms {
                s.push_str(&format!(
                    " WHEN ({cond}) THEN {}",
                    render(r, m, zero, one, null)
                ));
            }
            match other {
                Some(o) => s.push_str(&format!(" ELSE {}", render(o, m, zero, one, null))),
                None => s.push_str(&format!(" ELSE {null}")),
            }
            s.push_str(" END");
            s
        }
    }
}

fn mentions_measure(w: &Walker, c: &Core, e: &Expr) -> bool {
    let mut found = false;
    visit(e, &mut |x| {
        if w.measure(c, x).is_some() {
            found = true;
        }
        !found
    });
    found
}

/// A function call in an outer query: its rows are the same multiset as
/// without the plane, so aggregates and window functions are SQLite's as
/// they stand; scalar functions must be deterministic.
fn function_allowed(f: &sqlparser::ast::Function) -> R<()> {
    let name = fn_name(f)?;
    if let Some(w) = &f.over {
        // The order of an outer query's rows is not fixed by anything the
        // residue proves: only windows blind to the order of peers.
        return match w {
            WindowType::WindowSpec(s)
                if s.window_frame.is_none()
                    && PEER_FREE_WINDOWS.contains(&name.as_str())
                    && !ORDERED_SUMS.contains(&name.as_str()) =>
            {
                Ok(())
            }
            _ => Err(format!("window function {name}() in an outer query")),
        };
    }
    if OTHER_AGGREGATES.contains(&name.as_str()) || ORDERED_SUMS.contains(&name.as_str()) {
        // A sum's overflow (integers) and rounding (reals) depend on the
        // order of the rows it adds, which nothing fixes in an outer query.
        return Err(format!("aggregate {name}() in an outer query"));
    }
    if AGGREGATES.contains(&name.as_str()) {
        return Ok(());
    }
    if FUNCTIONS.contains(&name.as_str()) {
        return Ok(());
    }
    Err(format!(
        "function {name}() is not on the deterministic list"
    ))
}

fn fn_name(f: &sqlparser::ast::Function) -> R<String> {
    match f.name.0.as_slice() {
        [ObjectNamePart::Identifier(i)] => Ok(i.value.to_ascii_lowercase()),
        _ => Err("a qualified function name".into()),
    }
}

/// `min(a, b)` and `max(a, b)` are scalar functions.
fn is_scalar_minmax(f: &sqlparser::ast::Function) -> bool {
    let n = fn_name(f).unwrap_or_default();
    matches!(n.as_str(), "min" | "max")
        && matches!(&f.args, FunctionArguments::List(l) if l.args.len() > 1)
}

fn has_aggregate(e: &Expr) -> bool {
    let mut found = false;
    visit(e, &mut |x| {
        if let Expr::Function(f) = x {
            if let Ok(n) = fn_name(f) {
                let agg = AGGREGATES.contains(&n.as_str()) && !is_scalar_minmax(f);
                if f.over.is_none() && (agg || OTHER_AGGREGATES.contains(&n.as_str())) {
                    found = true;
                }
            }
        }
        !matches!(
            x,
            Expr::Subquery(_)
                | Expr::Exists { .. }
                | Expr::In {
                    target: InTarget::Subquery(_),
                    ..
                }
        )
    });
    found
}

fn has_window(e: &Expr) -> bool {
    let mut found = false;
    visit(e, &mut |x| {
        if let Expr::Function(f) = x {
            found |= f.over.is_some();
        }
        true
    });
    found
}

fn is_constant(e: &Expr) -> bool {
    match e {
        Expr::Value(v) => matches!(
            v.value,
            SqlValue::Number(..) | SqlValue::Placeholder(_) | SqlValue::Null
        ),
        Expr::UnaryOp { expr, .. } => is_constant(expr),
        Expr::Nested(x) => is_constant(x),
        _ => false,
    }
}

/// An operator form that can raise an error on some values: `||` (a
/// result past SQLite's length limit), LIKE with a pattern that is not a
/// short literal ("LIKE or GLOB pattern too complex").
fn raising_form(e: &Expr) -> Option<&'static str> {
    match e {
        Expr::BinaryOp {
            op: sqlparser::ast::BinaryOperator::StringConcat,
            ..
        } => Some("||"),
        Expr::Like { pattern, .. } => match pattern.as_ref() {
            Expr::Value(v) => match &v.value {
                SqlValue::SingleQuotedString(p) if p.len() <= 50_000 => None,
                _ => Some("LIKE"),
            },
            _ => Some("LIKE with a pattern that is not a literal"),
        },
        _ => None,
    }
}

/// An outer query's rows come in the order of the blocks it reads, which
/// over the core is not the table's: nothing it answers may depend on
/// which row SQLite meets first. So in an outer aggregate query every
/// column outside an aggregate must be a GROUP BY term (a bare column takes
/// the value of some row of its group: the first, or the one with the
/// MIN/MAX, of ties the first met), and a DISTINCT query may ORDER BY its
/// outputs only.
fn outer_order_free(sel: &Select, order: &[&Expr]) -> R<()> {
    if crate::mutation::active("residue_outer_bare_column") {
        return Ok(());
    }
    let items: Vec<&Expr> = sel
        .projection
        .iter()
        .filter_map(|i| match i {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
            _ => None,
        })
        .collect();
    let aliases: Vec<String> = sel
        .projection
        .iter()
        .filter_map(|i| match i {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_ascii_lowercase()),
            _ => None,
        })
        .collect();
    // A position or (ORDER BY only) an output alias stands for an output.
    let is_output = |e: &Expr| {
        let named = match e {
            Expr::Value(v) => matches!(&v.value, SqlValue::Number(..)),
            Expr::Identifier(i) => aliases.contains(&i.value.to_ascii_lowercase()),
            _ => false,
        };
        named || items.iter().any(|x| x.to_string() == e.to_string())
    };
    if sel.distinct.is_some() {
        if let Some(e) = order.iter().find(|e| !is_output(e)) {
            return Err(format!(
                "DISTINCT with ORDER BY {e}, not an output, in an outer query"
            ));
        }
    }
    let groups: Vec<String> = match &sel.group_by {
        // A position stands for its output.
        GroupByExpr::Expressions(g, _) => g
            .iter()
            .map(|e| match e {
                Expr::Value(v) => match &v.value {
                    SqlValue::Number(n, _) => n
                        .parse::<usize>()
                        .ok()
                        .and_then(|p| items.get(p.wrapping_sub(1)))
                        .map_or_else(|| e.to_string(), |x| x.to_string()),
                    _ => e.to_string(),
                },
                _ => e.to_string(),
            })
            .collect(),
        GroupByExpr::All(_) => return Err("GROUP BY ALL".into()),
    };
    let grouped = !groups.is_empty()
        || sel.having.is_some()
        || items.iter().any(|e| has_aggregate(e))
        || order.iter().any(|e| has_aggregate(e));
    if !grouped {
        return Ok(());
    }
    let mut terms: Vec<&Expr> = items.clone();
    terms.extend(sel.having.iter());
    terms.extend(order.iter().copied().filter(|e| !is_output(e)));
    for e in terms {
        bare_free(e, &groups)?;
    }
    Ok(())
}

/// A scalar subquery's value is the first row its query yields (SQLite
/// stops after one). Over the core the rows come in the core's order, not
/// in the order of SQLite's scan of the table (an index on other columns,
/// rowids after a delete), so which row is first must not depend on it: at
/// most one row can come out (an aggregate without GROUP BY), or the ORDER
/// BY is total over the rows (every GROUP BY term, or every DISTINCT
/// output, among its keys; a LIMIT/OFFSET then cuts a fixed sequence).
/// Anything else that reads the core (a row list, a compound SELECT)
/// declines: the order of its rows is nothing the residue proves.
fn first_row_fixed(q: &Query) -> R<()> {
    if crate::mutation::active("residue_scalar_first_row") {
        return Ok(());
    }
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return Err("a scalar subquery over a compound or nested SELECT".into());
    };
    let (items, aliases) = projection(&sel.projection, "a scalar subquery with a wildcard")?;
    let order: Vec<&Expr> = match &q.order_by {
        None => Vec::new(),
        Some(ob) => match &ob.kind {
            OrderByKind::Expressions(v) => v.iter().map(|o| &o.expr).collect(),
            OrderByKind::All(_) => return Err("ORDER BY ALL".into()),
        },
    };
    // A position stands for its output; in ORDER BY a bare name is an
    // output alias first (as SQLite resolves it). Compared as text.
    let position = |e: &Expr| -> Option<String> {
        match e {
            Expr::Value(v) => match &v.value {
                SqlValue::Number(n, _) => n
                    .parse::<usize>()
                    .ok()
                    .and_then(|p| items.get(p.wrapping_sub(1)))
                    .map(|x| x.to_string()),
                _ => None,
            },
            _ => None,
        }
    };
    let keys: Vec<String> = order
        .iter()
        .map(|e| {
            if let Expr::Identifier(i) = e {
                let name = i.value.to_ascii_lowercase();
                if let Some(k) = aliases.iter().position(|a| *a == name) {
                    return items[k].to_string();
                }
            }
            position(e).unwrap_or_else(|| e.to_string())
        })
        .collect();
    let GroupByExpr::Expressions(g, _) = &sel.group_by else {
        return Err("GROUP BY ALL".into());
    };
    if !g.is_empty() {
        for e in g {
            let term = position(e).unwrap_or_else(|| e.to_string());
            if !keys.contains(&term) {
                return Err(format!(
                    "a scalar subquery over grouped rows without an ORDER BY over every group term ({e} is not)"
                ));
            }
        }
        return Ok(());
    }
    let aggregate = items.iter().any(|e| has_aggregate(e))
        || sel.having.is_some()
        || order.iter().any(|e| has_aggregate(e));
    if aggregate {
        // One row (none under LIMIT 0 or an OFFSET).
        return Ok(());
    }
    if sel.distinct.is_none() {
        return Err("a scalar subquery over the rows of a query that reads the core".into());
    }
    if let Some(e) = items.iter().find(|e| !keys.contains(&e.to_string())) {
        return Err(format!(
            "a scalar subquery over DISTINCT rows without an ORDER BY over every output ({e} is not)"
        ));
    }
    Ok(())
}

/// No column outside an aggregate in `e` except GROUP BY terms, and no
/// subquery (which could read one).
fn bare_free(e: &Expr, groups: &[String]) -> R<()> {
    if groups.contains(&e.to_string()) {
        return Ok(());
    }
    match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => Err(format!(
            "bare column {e} in an outer query over grouped rows"
        )),
        Expr::Subquery(_)
        | Expr::Exists { .. }
        | Expr::In {
            target: InTarget::Subquery(_),
            ..
        } => Err("a subquery in an outer query over grouped rows".into()),
        Expr::Function(f) => {
            let name = fn_name(f).unwrap_or_default();
            let agg = (AGGREGATES.contains(&name.as_str()) && !is_scalar_minmax(f))
                || OTHER_AGGREGATES.contains(&name.as_str());
            if agg && f.over.is_none() {
                return Ok(());
            }
            if let FunctionArguments::List(l) = &f.args {
                for a in &l.args {
                    if let FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) = a {
                        bare_free(x, groups)?;
                    }
                }
            }
            if let Some(p) = &f.filter {
                bare_free(p, groups)?;
            }
            if let Some(WindowType::WindowSpec(s)) = &f.over {
                for p in &s.partition_by {
                    bare_free(p, groups)?;
                }
                for o in &s.order_by {
                    bare_free(&o.expr, groups)?;
                }
            }
            Ok(())
        }
        other => {
            let mut kids = Vec::new();
            children(other, &mut kids);
            for k in kids {
                bare_free(k, groups)?;
            }
            Ok(())
        }
    }
}

/// Expression forms a residue may contain (their children are checked
/// separately). Anything else declines.
fn expr_form_allowed(e: &Expr) -> R<()> {
    match e {
        Expr::Identifier(_)
        | Expr::CompoundIdentifier(_)
        | Expr::Value(_)
        | Expr::Nested(_)
        | Expr::IsNull(_)
        | Expr::IsNotNull(_)
        | Expr::IsDistinctFrom(..)
        | Expr::IsNotDistinctFrom(..)
        | Expr::In {
            target: InTarget::List(_) | InTarget::Subquery(_),
            global: false,
            ..
        }
        | Expr::Between { .. }
        | Expr::Function(_)
        | Expr::Subquery(_)
        | Expr::Exists { .. }
        | Expr::Case { .. } => Ok(()),
        Expr::Substring { .. } => Ok(()),
        Expr::Trim {
            trim_where: None,
            trim_what: None,
            ..
        } => Ok(()),
        Expr::Like {
            any: false,
            escape_char: None,
            ..
        } => Ok(()),
        Expr::BinaryOp { op, .. } => {
            use sqlparser::ast::BinaryOperator as B;
            match op {
                B::Plus
                | B::Minus
                | B::Multiply
                | B::Divide
                | B::Modulo
                | B::StringConcat
                | B::Gt
                | B::Lt
                | B::GtEq
                | B::LtEq
                | B::Eq
                | B::NotEq
                | B::And
                | B::Or
                | B::BitwiseOr
                | B::BitwiseAnd
                | B::Is
                | B::IsNot => Ok(()),
                other => Err(format!("operator {other}")),
            }
        }
        Expr::UnaryOp { op, .. } => {
            use sqlparser::ast::UnaryOperator as U;
            match op {
                U::Plus | U::Minus | U::Not => Ok(()),
                other => Err(format!("operator {other}")),
            }
        }
        Expr::Cast {
            kind: CastKind::Cast,
            format: None,
            ..
        } => Ok(()),
        other => Err(format!("the expression form of {other}")),
    }
}

/// The direct sub-expressions of `e` (for the forms `expr_form_allowed`
/// admits; functions and subqueries are walked by their callers).
fn children<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::BinaryOp { left, right, .. } => {
            out.push(left);
            out.push(right);
        }
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr)
        | Expr::Cast { expr, .. } => out.push(expr),
        Expr::IsDistinctFrom(a, b) | Expr::IsNotDistinctFrom(a, b) => {
            out.push(a);
            out.push(b);
        }
        Expr::In {
            expr,
            target: InTarget::List(list),
            ..
        } => {
            out.push(expr);
            out.extend(list.iter());
        }
        Expr::Between {
            expr, low, high, ..
        } => {
            out.push(expr);
            out.push(low);
            out.push(high);
        }
        Expr::Like { expr, pattern, .. } => {
            out.push(expr);
            out.push(pattern);
        }
        Expr::Substring {
            expr,
            substring_from,
            substring_for,
            ..
        } => {
            out.push(expr);
            out.extend(substring_from.as_deref());
            out.extend(substring_for.as_deref());
        }
        Expr::Trim {
            expr,
            trim_characters,
            ..
        } => {
            out.push(expr);
            if let Some(v) = trim_characters {
                out.extend(v.iter());
            }
        }
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            out.extend(operand.as_deref());
            for w in conditions {
                out.push(&w.condition);
                out.push(&w.result);
            }
            out.extend(else_result.as_deref());
        }
        _ => {}
    }
}

/// Pre-order walk; `f` returns whether to descend. Function arguments,
/// FILTER and window specs are descended into; subqueries are not (`f`
/// sees them).
fn visit(e: &Expr, f: &mut dyn FnMut(&Expr) -> bool) {
    if !f(e) {
        return;
    }
    if let Expr::Function(func) = e {
        if let FunctionArguments::List(l) = &func.args {
            for a in &l.args {
                if let FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) = a {
                    visit(x, f);
                }
            }
        }
        if let Some(p) = &func.filter {
            visit(p, f);
        }
        if let Some(WindowType::WindowSpec(s)) = &func.over {
            for p in &s.partition_by {
                visit(p, f);
            }
            for o in &s.order_by {
                visit(&o.expr, f);
            }
        }
        return;
    }
    let mut kids = Vec::new();
    children(e, &mut kids);
    for k in kids {
        visit(k, f);
    }
}

/// Whether every quoted identifier (`"…"`, `[…]`, `` `…` ``) of `sql` is a
/// plain word.
fn quoted_names_are_words(sql: &str) -> bool {
    let b = sql.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\'' => match skip_quoted(b, i, b'\'') {
                Ok(j) => i = j,
                Err(_) => return false,
            },
            q @ (b'"' | b'`' | b'[') => {
                let close = if q == b'[' { b']' } else { q };
                let Ok(j) = skip_quoted(b, i, close) else {
                    return false;
                };
                let inner = &b[i + 1..j - 1];
                if inner.is_empty()
                    || !inner
                        .iter()
                        .all(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    return false;
                }
                i = j;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            _ => i += 1,
        }
    }
    true
}

/// The byte after the quoted text that starts at `i` (quote `q`; `[` ends at
/// `]`); a doubled quote stays inside.
fn skip_quoted(b: &[u8], i: usize, q: u8) -> R<usize> {
    let mut j = i + 1;
    while j < b.len() {
        if b[j] == q {
            if q != b']' && b.get(j + 1) == Some(&q) {
                j += 2;
                continue;
            }
            return Ok(j + 1);
        }
        j += 1;
    }
    Err("an unterminated quote".into())
}

/// The byte after the parenthesised group that starts at `i`.
fn balanced(b: &[u8], i: usize) -> R<usize> {
    let mut open = 0usize;
    let mut j = i;
    while j < b.len() {
        j = match b[j] {
            b'(' => {
                open += 1;
                j + 1
            }
            b')' => {
                open -= 1;
                if open == 0 {
                    return Ok(j + 1);
                }
                j + 1
            }
            q @ (b'\'' | b'"' | b'`') => skip_quoted(b, j, q)?,
            b'[' => skip_quoted(b, j, b']')?,
            _ => j + 1,
        };
    }
    Err("unbalanced parentheses".into())
}

fn line_starts(sql: &str) -> Vec<usize> {
    let mut v = vec![0];
    for (i, b) in sql.bytes().enumerate() {
        if b == b'\n' {
            v.push(i + 1);
        }
    }
    v
}

pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A SELECT's output expressions and their aliases (lower case, empty when
/// none); a wildcard declines with `wildcard`.
fn projection<'a>(
    list: &'a [SelectItem],
    wildcard: &str,
) -> Result<(Vec<&'a Expr>, Vec<String>), String> {
    let mut items = Vec::new();
    let mut aliases = Vec::new();
    for item in list {
        match item {
            SelectItem::UnnamedExpr(e) => {
                items.push(e);
                aliases.push(String::new());
            }
            SelectItem::ExprWithAlias { expr, alias } => {
                items.push(expr);
                aliases.push(alias.value.to_ascii_lowercase());
            }
            _ => return Err(wildcard.into()),
        }
    }
    Ok((items, aliases))
}
