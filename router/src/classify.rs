//! The classifier: a SELECT's text → a plan the cells can answer, or the
//! reason it goes to SQLite. Run once per SQL text; the connection caches it.
//!
//! All-or-nothing, as DataFusion's statistics rule: a plan is made only when
//! every part of the statement is understood exactly; anything else is
//! declined with a reason and SQLite runs the statement untouched.

use std::fmt;

use pleroma_plane::Agg;
use rusqlite::types::Value;
use sqlparser::ast::{
    BinaryOperator, DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    GroupByExpr, InTarget, LimitClause, ObjectNamePart, OrderByKind, Query, Select, SelectItem,
    SetExpr, Statement, TableFactor, UnaryOperator, Value as SqlValue,
};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;

use crate::affinity::Affinity;
use crate::decline::Decline;
use crate::planes::Planes;

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

/// An output of a served join.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JOut {
    /// The value of `group_by[i]`.
    Group(usize),
    CountStar,
    /// SUM of a fact measure.
    SumFact(usize),
    /// SUM of a dimension-table INTEGER column (index in the limb's
    /// dimension side).
    SumDim(usize),
}

/// `SELECT ... FROM fact JOIN dim ON fact.k = dim.k [WHERE] [GROUP BY]`
/// answered from a limb.
#[derive(Debug)]
pub(crate) struct JoinPlan {
    pub fact: String,
    pub fact_key: String,
    /// Over the limb's fact side (dimension 0 is the key).
    pub filter: Option<PExpr>,
    pub group_by: Vec<usize>,
    pub outputs: Vec<JOut>,
    pub columns: Vec<String>,
    pub param_count: usize,
}

/// The query class, as the benchmarks name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// Whole-table totals.
    T,
    /// Scalar aggregates under a filter.
    W,
    /// GROUP BY.
    G,
    /// HAVING.
    H,
    /// COUNT(DISTINCT dim), MIN/MAX under a filter.
    D,
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// A literal or a bound parameter (0-based index).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Operand {
    Lit(Value),
    Param(usize),
}

/// A one-dimension predicate or a boolean combination of them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PExpr {
    And(Vec<PExpr>),
    Or(Vec<PExpr>),
    Not(Box<PExpr>),
    Cmp {
        dim: usize,
        op: CmpOp,
        rhs: Operand,
    },
    In {
        dim: usize,
        list: Vec<Operand>,
        negated: bool,
    },
    IsNull {
        dim: usize,
        negated: bool,
    },
    /// `IS` / `IS NOT` against a value (NULL-safe equality).
    Is {
        dim: usize,
        rhs: Operand,
        negated: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    fn flip(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            o => o,
        }
    }
}

/// An aggregate as SQL spells it; each maps onto one plane aggregate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AggFn {
    CountStar,
    Count(usize),
    Sum(usize),
    Total(usize),
    Avg(usize),
    Min(usize),
    Max(usize),
    CountDistinct(usize),
    /// `PleromaSumExact(m)`: the exact sum as TEXT.
    SumExact(usize),
}

impl AggFn {
    pub fn plane_agg(self) -> Agg {
        match self {
            AggFn::CountStar => Agg::CountStar,
            AggFn::Count(m) => Agg::Count(m),
            AggFn::Sum(m) | AggFn::Total(m) | AggFn::Avg(m) | AggFn::SumExact(m) => Agg::Sum(m),
            AggFn::Min(m) => Agg::Min(m),
            AggFn::Max(m) => Agg::Max(m),
            AggFn::CountDistinct(d) => Agg::CountDistinct(d),
        }
    }
}

/// A value computed per output group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutExpr {
    /// The value of `group_by[i]`.
    Group(usize),
    /// An aggregate (index into `Plan::aggs`).
    Agg(usize),
}

/// A HAVING predicate over output values.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum HExpr {
    And(Vec<HExpr>),
    Or(Vec<HExpr>),
    Not(Box<HExpr>),
    Cmp {
        lhs: HOperand,
        op: CmpOp,
        rhs: HOperand,
    },
    IsNull {
        e: OutExpr,
        negated: bool,
    },
}

/// A HAVING operand: an output value or a literal. A literal compared with
/// a group column takes the column's affinity (`aff`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum HOperand {
    Out(OutExpr),
    Lit(Operand, Option<Affinity>),
}

#[derive(Clone, Debug)]
pub(crate) struct OrderTerm {
    pub e: OutExpr,
    pub desc: bool,
    pub nulls_first: bool,
}

/// A statement the cells can answer.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The planed table (its own spelling).
    pub table: String,
    pub class: Class,
    pub filter: Option<PExpr>,
    /// Dimension indexes.
    pub group_by: Vec<usize>,
    pub aggs: Vec<AggFn>,
    pub outputs: Vec<OutExpr>,
    pub having: Option<HExpr>,
    pub order_by: Vec<OrderTerm>,
    pub limit: Option<Operand>,
    pub offset: Option<Operand>,
    /// Result column names, as SQLite names them (from its own prepare).
    pub columns: Vec<String>,
    pub param_count: usize,
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
    const SERVED_WORDS: [&str; 9] = [
        "distinct",
        "count",
        "sum",
        "total",
        "avg",
        "min",
        "max",
        "group",
        "pleromasumexact",
    ];
    if quick && !SERVED_WORDS.iter().any(|w| lower.contains(w)) {
        return Classified::Declined("a row list (no aggregate, no GROUP BY)".into());
    }
    let columns: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let param_count = stmt.parameter_count();
    drop(stmt);
    let reason = match plan(shared, sql, columns.clone(), param_count) {
        Ok(Some(p)) => return Classified::Plan(Box::new(p)),
        Ok(None) => match join_plan(shared, sql, columns.clone(), param_count) {
            Ok(j) => return Classified::Join(Box::new(j)),
            Err(reason) => reason,
        },
        Err(reason) => reason,
    };
    // What the cells answer directly they answer; the rest may still have an
    // aggregate core, with SQLite evaluating around it.
    match crate::residue::plan(shared, sql, columns, param_count) {
        Ok(r) => Classified::Residue(Box::new(r)),
        Err(Decline::NoCore) => Classified::Declined(reason.into()),
        Err(r) => Classified::Declined(r),
    }
}

type R<T> = Result<T, String>;

/// The plan of `sql` for the cells, `None` for a two-table join (which
/// `join_plan` decides), or why neither.
fn plan(shared: &Planes, sql: &str, columns: Vec<String>, param_count: usize) -> R<Option<Plan>> {
    let stmts =
        Parser::parse_sql(&SQLiteDialect {}, sql).map_err(|e| format!("not understood ({e})"))?;
    let [Statement::Query(q)] = stmts.as_slice() else {
        return Err("not a single SELECT".into());
    };
    let q: &Query = q;
    if q.with.is_some() || q.fetch.is_some() || !q.locks.is_empty() || q.for_clause.is_some() {
        return Err("WITH, FETCH or locking clauses".into());
    }
    if q.settings.is_some() || q.format_clause.is_some() || !q.pipe_operators.is_empty() {
        return Err("clauses outside SQLite".into());
    }
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return Err("compound or nested SELECT".into());
    };
    let sel: &Select = sel;
    if sel.from.len() == 1 && sel.from[0].joins.len() == 1 {
        return Ok(None);
    }
    let (table_idx, alias) = table_of(shared, sel)?;
    // Out of service is checked at each answer, not here: the plan is cached.
    let entry = shared.entry(table_idx);
    let mut b = Builder {
        table: entry.def.table.clone(),
        alias,
        dims: entry.def.dims.clone(),
        measures: entry.def.measures.clone(),
        dim_aff: entry.cols.dim_aff.clone(),
        columns: entry.cols.columns.clone(),
        aggs: Vec::new(),
        params: Params::default(),
        group_by: Vec::new(),
    };
    if sel.distinct.is_some() || sel.top.is_some() || sel.into.is_some() || sel.exclude.is_some() {
        return Err("DISTINCT, TOP or INTO".into());
    }
    if !sel.lateral_views.is_empty() || sel.prewhere.is_some() || !sel.connect_by.is_empty() {
        return Err("clauses outside SQLite".into());
    }
    if !sel.cluster_by.is_empty() || !sel.distribute_by.is_empty() || !sel.sort_by.is_empty() {
        return Err("clauses outside SQLite".into());
    }
    if !sel.named_window.is_empty() || sel.qualify.is_some() {
        return Err("window clauses".into());
    }
    // FROM resolved; WHERE.
    let filter = match &sel.selection {
        Some(e) => Some(b.pred(e)?),
        None => None,
    };
    // GROUP BY: dimension columns, or positions of dimension outputs.
    let GroupByExpr::Expressions(gexprs, mods) = &sel.group_by else {
        return Err("GROUP BY ALL".into());
    };
    if !mods.is_empty() {
        return Err("GROUP BY modifiers".into());
    }
    for g in gexprs {
        let dim = match literal_position(g) {
            Some(p) => {
                let item = sel
                    .projection
                    .get(p.wrapping_sub(1))
                    .ok_or("GROUP BY position out of range")?;
                let e = match item {
                    SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
                    _ => return Err("GROUP BY position of a wildcard".into()),
                };
                b.dim_of(e).ok_or("GROUP BY a non-dimension")?
            }
            None => b
                .dim_of(g)
                .ok_or("GROUP BY an expression that is not a dimension column")?,
        };
        if !b.group_by.contains(&dim) {
            b.group_by.push(dim);
        }
    }
    // The select list.
    let mut outputs = Vec::new();
    let mut aliases: Vec<Option<String>> = Vec::new();
    for item in &sel.projection {
        let (e, alias) = match item {
            SelectItem::UnnamedExpr(e) => (e, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.clone())),
            _ => return Err("a wildcard in the select list".into()),
        };
        outputs.push(b.out_expr(e)?);
        aliases.push(alias);
    }
    if b.aggs.is_empty() && b.group_by.is_empty() {
        return Err("a row list (no aggregate, no GROUP BY)".into());
    }
    if b.aggs.is_empty() {
        // A bare GROUP BY lists the non-empty groups: count them.
        b.aggs.push(AggFn::CountStar);
    }
    // HAVING.
    let having = match &sel.having {
        Some(h) => {
            if b.group_by.is_empty() && b.aggs.is_empty() {
                return Err("HAVING without aggregates".into());
            }
            Some(b.having(h, &outputs, &aliases)?)
        }
        None => None,
    };
    // ORDER BY.
    let mut order_by = Vec::new();
    if let Some(ob) = &q.order_by {
        if ob.interpolate.is_some() {
            return Err("ORDER BY INTERPOLATE".into());
        }
        let OrderByKind::Expressions(terms) = &ob.kind else {
            return Err("ORDER BY ALL".into());
        };
        for t in terms {
            if t.with_fill.is_some() {
                return Err("ORDER BY WITH FILL".into());
            }
            let desc = match &t.options.sort {
                None | Some(sqlparser::ast::OrderBySort::Asc) => false,
                Some(sqlparser::ast::OrderBySort::Desc) => true,
                Some(_) => return Err("ORDER BY USING".into()),
            };
            let e = b.order_expr(&t.expr, &outputs, &aliases)?;
            let nulls_first = t.options.nulls_first.unwrap_or(!desc);
            order_by.push(OrderTerm {
                e,
                desc,
                nulls_first,
            });
        }
    }
    // LIMIT / OFFSET.
    let (limit, offset) = match &q.limit_clause {
        None => (None, None),
        Some(LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) => {
            if !limit_by.is_empty() {
                return Err("LIMIT BY".into());
            }
            let l = limit.as_ref().map(|e| b.operand(e)).transpose()?;
            let o = offset.as_ref().map(|o| b.operand(&o.value)).transpose()?;
            (l, o)
        }
        Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
            (Some(b.operand(limit)?), Some(b.operand(offset)?))
        }
    };
    if (limit.is_some() || offset.is_some()) && !b.group_by.is_empty() {
        // Rows beyond a partial ORDER BY are SQLite's choice; serve LIMIT only
        // when the order is total: every group column among the sort keys.
        let total = b
            .group_by
            .iter()
            .enumerate()
            .all(|(i, _)| order_by.iter().any(|t| t.e == OutExpr::Group(i)));
        if !total {
            return Err("LIMIT/OFFSET without an ORDER BY over every group column".into());
        }
    }
    if b.params.mixed {
        return Err("mixed or named parameters".into());
    }
    let uses_distinct = b.aggs.iter().any(|a| matches!(a, AggFn::CountDistinct(_)));
    let uses_minmax = b
        .aggs
        .iter()
        .any(|a| matches!(a, AggFn::Min(_) | AggFn::Max(_)));
    let class = if having.is_some() {
        Class::H
    } else if uses_distinct || (uses_minmax && filter.is_some()) {
        Class::D
    } else if !b.group_by.is_empty() {
        Class::G
    } else if filter.is_some() {
        Class::W
    } else {
        Class::T
    };
    Ok(Some(Plan {
        table: b.table,
        class,
        filter,
        group_by: b.group_by,
        aggs: b.aggs,
        outputs,
        having,
        order_by,
        limit,
        offset,
        columns,
        param_count,
    }))
}

/// The planed table in FROM, and the name columns may be qualified with.
fn table_of(shared: &Planes, sel: &Select) -> R<(usize, String)> {
    let [twj] = sel.from.as_slice() else {
        return Err(if sel.from.is_empty() {
            "no FROM".into()
        } else {
            "more than one table".into()
        });
    };
    if !twj.joins.is_empty() {
        return Err("a join".into());
    }
    let (table, alias) = plain_table(&twj.relation)?;
    let idx = shared
        .find(&table)
        .ok_or_else(|| format!("no plane on table {table}"))?;
    Ok((idx, alias))
}

fn literal_position(e: &Expr) -> Option<usize> {
    match e {
        Expr::Value(v) => match &v.value {
            SqlValue::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// Parameter numbering: all `?` (in order) or all `?NNN`.
#[derive(Default)]
struct Params {
    next: usize,
    plain: bool,
    numbered: bool,
    mixed: bool,
}

impl Params {
    fn take(&mut self, p: &str) -> R<usize> {
        if p == "?" {
            self.plain = true;
            self.next += 1;
            if self.numbered {
                self.mixed = true;
            }
            Ok(self.next - 1)
        } else if let Some(n) = p.strip_prefix('?').and_then(|n| n.parse::<usize>().ok()) {
            self.numbered = true;
            if self.plain || n == 0 {
                self.mixed = true;
            }
            Ok(n.saturating_sub(1))
        } else {
            self.mixed = true;
            Err("named parameters".into())
        }
    }
}

struct Builder {
    table: String,
    alias: String,
    dims: Vec<String>,
    measures: Vec<String>,
    dim_aff: Vec<Affinity>,
    /// Every column of the table (SQLite resolves a name to one of them
    /// before an output alias).
    columns: Vec<String>,
    aggs: Vec<AggFn>,
    params: Params,
    group_by: Vec<usize>,
}

enum Col {
    Dim(usize),
    Measure(usize),
}

impl Builder {
    /// A column reference of the planed table.
    fn column(&self, e: &Expr) -> Option<Result<Col, String>> {
        let name = match e {
            Expr::Identifier(i) => &i.value,
            Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [t, c] if t.value.eq_ignore_ascii_case(&self.alias) => &c.value,
                [s, t, c]
                    if s.value.eq_ignore_ascii_case("main")
                        && t.value.eq_ignore_ascii_case(&self.table)
                        && self.alias.eq_ignore_ascii_case(&self.table) =>
                {
                    &c.value
                }
                _ => return Some(Err("a column of another table".into())),
            },
            Expr::Nested(inner) => return self.column(inner),
            _ => return None,
        };
        if let Some(d) = self.dims.iter().position(|d| d.eq_ignore_ascii_case(name)) {
            return Some(Ok(Col::Dim(d)));
        }
        if let Some(m) = self
            .measures
            .iter()
            .position(|m| m.eq_ignore_ascii_case(name))
        {
            return Some(Ok(Col::Measure(m)));
        }
        Some(Err(format!(
            "column {name} is not a dimension or measure of the plane"
        )))
    }

    fn dim_of(&self, e: &Expr) -> Option<usize> {
        match self.column(e) {
            Some(Ok(Col::Dim(d))) => Some(d),
            _ => None,
        }
    }

    fn operand(&mut self, e: &Expr) -> R<Operand> {
        match e {
            Expr::Nested(inner) => self.operand(inner),
            Expr::Value(v) => match &v.value {
                SqlValue::Number(n, false) => number(n, false).map(Operand::Lit),
                SqlValue::SingleQuotedString(s) => Ok(Operand::Lit(Value::Text(s.clone()))),
                SqlValue::Null => Ok(Operand::Lit(Value::Null)),
                SqlValue::Placeholder(p) => self.params.take(p).map(Operand::Param),
                other => Err(format!("literal {other} is not served")),
            },
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr,
            } => match expr.as_ref() {
                Expr::Value(v) => match &v.value {
                    SqlValue::Number(n, false) => number(n, true).map(Operand::Lit),
                    _ => Err("unary minus on a non-number".into()),
                },
                _ => Err("unary minus on an expression".into()),
            },
            _ => Err("an expression where a literal or parameter was expected".into()),
        }
    }

    /// A WHERE predicate over dimension columns.
    fn pred(&mut self, e: &Expr) -> R<PExpr> {
        match e {
            Expr::Nested(inner) => self.pred(inner),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => Ok(PExpr::And(vec![self.pred(left)?, self.pred(right)?])),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Or,
                right,
            } => Ok(PExpr::Or(vec![self.pred(left)?, self.pred(right)?])),
            Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr,
            } => Ok(PExpr::Not(Box::new(self.pred(expr)?))),
            Expr::BinaryOp {
                left,
                op: op @ (BinaryOperator::Is | BinaryOperator::IsNot),
                right,
            } => self.is_pred(left, right, matches!(op, BinaryOperator::IsNot)),
            Expr::BinaryOp { left, op, right } => {
                let op = cmp_op(op).ok_or_else(|| format!("operator {op} is not served"))?;
                if let Some(d) = self.pred_dim(left)? {
                    Ok(PExpr::Cmp {
                        dim: d,
                        op,
                        rhs: self.operand(right)?,
                    })
                } else if let Some(d) = self.pred_dim(right)? {
                    Ok(PExpr::Cmp {
                        dim: d,
                        op: op.flip(),
                        rhs: self.operand(left)?,
                    })
                } else {
                    Err("a comparison without a dimension column".into())
                }
            }
            Expr::IsNull(x) | Expr::IsNotNull(x) => {
                let dim = self.pred_dim(x)?.ok_or("IS NULL on a non-dimension")?;
                Ok(PExpr::IsNull {
                    dim,
                    negated: matches!(e, Expr::IsNotNull(_)),
                })
            }
            Expr::IsNotDistinctFrom(l, r) | Expr::IsDistinctFrom(l, r) => {
                self.is_pred(l, r, matches!(e, Expr::IsDistinctFrom(..)))
            }
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let dim = self.pred_dim(expr)?.ok_or("BETWEEN on a non-dimension")?;
                let both = PExpr::And(vec![
                    PExpr::Cmp {
                        dim,
                        op: CmpOp::Ge,
                        rhs: self.operand(low)?,
                    },
                    PExpr::Cmp {
                        dim,
                        op: CmpOp::Le,
                        rhs: self.operand(high)?,
                    },
                ]);
                Ok(if *negated {
                    PExpr::Not(Box::new(both))
                } else {
                    both
                })
            }
            Expr::In {
                expr,
                target: InTarget::List(list),
                negated,
                global: false,
            } => {
                let dim = self.pred_dim(expr)?.ok_or("IN on a non-dimension")?;
                if list.is_empty() {
                    return Err("an empty IN list".into());
                }
                let list = list
                    .iter()
                    .map(|x| self.operand(x))
                    .collect::<R<Vec<_>>>()?;
                Ok(PExpr::In {
                    dim,
                    list,
                    negated: *negated,
                })
            }
            _ => Err("a predicate form that is not served".into()),
        }
    }

    /// `x IS [NOT] y` with a dimension on either side.
    fn is_pred(&mut self, l: &Expr, r: &Expr, negated: bool) -> R<PExpr> {
        let (dim, other) = match (self.pred_dim(l)?, self.pred_dim(r)?) {
            (Some(d), _) => (d, r),
            (None, Some(d)) => (d, l),
            (None, None) => return Err("IS without a dimension column".into()),
        };
        Ok(PExpr::Is {
            dim,
            rhs: self.operand(other)?,
            negated,
        })
    }

    /// `Some(dim)` if `e` is a dimension column; an error for a measure or a
    /// column outside the plane; `None` for anything else.
    fn pred_dim(&self, e: &Expr) -> R<Option<usize>> {
        match self.column(e) {
            Some(Ok(Col::Dim(d))) => Ok(Some(d)),
            Some(Ok(Col::Measure(m))) => Err(format!("a filter on measure {}", self.measures[m])),
            Some(Err(r)) => Err(format!("a filter on a non-dimension: {r}")),
            None => Ok(None),
        }
    }

    fn agg_index(&mut self, a: AggFn) -> usize {
        if let Some(i) = self.aggs.iter().position(|x| *x == a) {
            return i;
        }
        self.aggs.push(a);
        self.aggs.len() - 1
    }

    /// An aggregate call, if `e` is one; errors for unserved aggregates.
    fn aggregate(&mut self, e: &Expr) -> R<Option<AggFn>> {
        let Expr::Function(f) = e else {
            return Ok(None);
        };
        let name = match f.name.0.as_slice() {
            [ObjectNamePart::Identifier(i)] => i.value.to_ascii_lowercase(),
            _ => return Err("a qualified function name".into()),
        };
        if f.filter.is_some()
            || f.over.is_some()
            || !f.within_group.is_empty()
            || f.null_treatment.is_some()
        {
            return Err(format!("{name}() with FILTER, OVER or WITHIN GROUP"));
        }
        if !matches!(f.parameters, FunctionArguments::None) {
            return Err(format!("{name}() with parameters"));
        }
        let FunctionArguments::List(list) = &f.args else {
            return Err(format!("{name}() without an argument list"));
        };
        if !list.clauses.is_empty() {
            return Err(format!("{name}() with clauses"));
        }
        let distinct = matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct));
        let arg = match list.args.as_slice() {
            [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] => None,
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] => Some(x),
            _ => return Err(format!("{name}() with other than one argument")),
        };
        let known = [
            "count",
            "sum",
            "total",
            "avg",
            "min",
            "max",
            "pleromasumexact",
        ];
        if !known.contains(&name.as_str()) {
            return Err(format!("function {name}() is not served"));
        }
        let col = match arg {
            None if name == "count" && !distinct => return Ok(Some(AggFn::CountStar)),
            None => return Err(format!("{name}(*) is not served")),
            Some(x) => self
                .column(x)
                .ok_or_else(|| format!("{name}() of an expression"))??,
        };
        Ok(Some(match (name.as_str(), col, distinct) {
            ("count", Col::Dim(d), true) => AggFn::CountDistinct(d),
            ("count", Col::Measure(m), false) => AggFn::Count(m),
            ("sum", Col::Measure(m), false) => AggFn::Sum(m),
            ("total", Col::Measure(m), false) => AggFn::Total(m),
            ("avg", Col::Measure(m), false) => AggFn::Avg(m),
            ("min", Col::Measure(m), false) => AggFn::Min(m),
            ("max", Col::Measure(m), false) => AggFn::Max(m),
            ("pleromasumexact", Col::Measure(m), false) => AggFn::SumExact(m),
            (n, Col::Dim(d), _) => {
                return Err(format!("{n}() of dimension {} is not served", self.dims[d]))
            }
            (n, Col::Measure(m), _) => {
                return Err(format!(
                    "{n}(DISTINCT) of measure {} is not served",
                    self.measures[m]
                ))
            }
        }))
    }

    fn out_expr(&mut self, e: &Expr) -> R<OutExpr> {
        if let Expr::Nested(inner) = e {
            return self.out_expr(inner);
        }
        if let Some(a) = self.aggregate(e)? {
            return Ok(OutExpr::Agg(self.agg_index(a)));
        }
        match self.column(e) {
            Some(Ok(Col::Dim(d))) => match self.group_by.iter().position(|g| *g == d) {
                Some(i) => Ok(OutExpr::Group(i)),
                None => Err(format!("bare column {} outside GROUP BY", self.dims[d])),
            },
            Some(Ok(Col::Measure(m))) => Err(format!("bare measure column {}", self.measures[m])),
            Some(Err(r)) => Err(r),
            None => Err("an expression in the select list".into()),
        }
    }

    /// ORDER BY term: a position, an output alias, or an output expression.
    fn order_expr(
        &mut self,
        e: &Expr,
        outputs: &[OutExpr],
        aliases: &[Option<String>],
    ) -> R<OutExpr> {
        if let Some(p) = literal_position(e) {
            return outputs
                .get(p.wrapping_sub(1))
                .copied()
                .ok_or_else(|| "ORDER BY position out of range".into());
        }
        if let Expr::Identifier(i) = e {
            if let Some(k) = aliases.iter().position(|a| {
                a.as_deref()
                    .is_some_and(|a| a.eq_ignore_ascii_case(&i.value))
            }) {
                return Ok(outputs[k]);
            }
        }
        self.out_expr(e)
    }

    fn having(&mut self, e: &Expr, outputs: &[OutExpr], aliases: &[Option<String>]) -> R<HExpr> {
        match e {
            Expr::Nested(inner) => self.having(inner, outputs, aliases),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => Ok(HExpr::And(vec![
                self.having(left, outputs, aliases)?,
                self.having(right, outputs, aliases)?,
            ])),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Or,
                right,
            } => Ok(HExpr::Or(vec![
                self.having(left, outputs, aliases)?,
                self.having(right, outputs, aliases)?,
            ])),
            Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr,
            } => Ok(HExpr::Not(Box::new(self.having(expr, outputs, aliases)?))),
            Expr::BinaryOp { left, op, right } => {
                let op = cmp_op(op).ok_or_else(|| format!("operator {op} in HAVING"))?;
                let l = self.h_operand(left, outputs, aliases)?;
                let r = self.h_operand(right, outputs, aliases)?;
                // A literal compared with a group column takes its affinity.
                let (l, r) = match (l, r) {
                    (HOperand::Lit(x, _), HOperand::Out(OutExpr::Group(g))) => (
                        HOperand::Lit(x, Some(self.dim_aff[self.group_by[g]])),
                        HOperand::Out(OutExpr::Group(g)),
                    ),
                    (HOperand::Out(OutExpr::Group(g)), HOperand::Lit(x, _)) => (
                        HOperand::Out(OutExpr::Group(g)),
                        HOperand::Lit(x, Some(self.dim_aff[self.group_by[g]])),
                    ),
                    (HOperand::Out(OutExpr::Group(_)), HOperand::Out(_))
                    | (HOperand::Out(_), HOperand::Out(OutExpr::Group(_))) => {
                        return Err("HAVING compares a group column with another value".into())
                    }
                    (HOperand::Lit(..), HOperand::Lit(..)) => {
                        return Err("HAVING compares two literals".into())
                    }
                    pair => pair,
                };
                Ok(HExpr::Cmp { lhs: l, op, rhs: r })
            }
            Expr::IsNull(x) | Expr::IsNotNull(x) => match self.h_operand(x, outputs, aliases)? {
                HOperand::Out(o) => Ok(HExpr::IsNull {
                    e: o,
                    negated: matches!(e, Expr::IsNotNull(_)),
                }),
                HOperand::Lit(..) => Err("HAVING literal IS NULL".into()),
            },
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let lo = Expr::BinaryOp {
                    left: expr.clone(),
                    op: BinaryOperator::GtEq,
                    right: low.clone(),
                };
                let hi = Expr::BinaryOp {
                    left: expr.clone(),
                    op: BinaryOperator::LtEq,
                    right: high.clone(),
                };
                let both = HExpr::And(vec![
                    self.having(&lo, outputs, aliases)?,
                    self.having(&hi, outputs, aliases)?,
                ]);
                Ok(if *negated {
                    HExpr::Not(Box::new(both))
                } else {
                    both
                })
            }
            _ => Err("a HAVING form that is not served".into()),
        }
    }

    fn h_operand(
        &mut self,
        e: &Expr,
        outputs: &[OutExpr],
        aliases: &[Option<String>],
    ) -> R<HOperand> {
        if let Ok(o) = self.operand(e) {
            return Ok(HOperand::Lit(o, None));
        }
        if let Expr::Identifier(i) = e {
            // A table column first (any column, and rowid), then an output
            // alias: SQLite's order (resolve.c).
            let column = if crate::mutation::active("having_alias_before_column") {
                self.column(e).is_some_and(|c| c.is_ok())
            } else {
                names_a_column(&self.columns, &i.value)
            };
            if !column {
                if let Some(k) = aliases.iter().position(|a| {
                    a.as_deref()
                        .is_some_and(|a| a.eq_ignore_ascii_case(&i.value))
                }) {
                    return Ok(HOperand::Out(outputs[k]));
                }
            }
        }
        self.out_expr(e).map(HOperand::Out)
    }
}

/// Whether `name` is a column of a table with `columns`: one of them, or
/// the rowid (`rowid`, `oid`, `_rowid_`), which a column of that name
/// hides. A WITHOUT ROWID table has no rowid; taking one for it only
/// declines more.
pub(crate) fn names_a_column(columns: &[String], name: &str) -> bool {
    columns.iter().any(|c| c.eq_ignore_ascii_case(name))
        || ["rowid", "oid", "_rowid_"]
            .iter()
            .any(|r| r.eq_ignore_ascii_case(name))
}

fn cmp_op(op: &BinaryOperator) -> Option<CmpOp> {
    Some(match op {
        BinaryOperator::Eq => CmpOp::Eq,
        BinaryOperator::NotEq => CmpOp::Ne,
        BinaryOperator::Lt => CmpOp::Lt,
        BinaryOperator::LtEq => CmpOp::Le,
        BinaryOperator::Gt => CmpOp::Gt,
        BinaryOperator::GtEq => CmpOp::Ge,
        _ => return None,
    })
}

/// A numeric literal as SQLite reads it: decimal integers within i64 are
/// INTEGER; decimals with `.` or an exponent are REAL; anything else (hex,
/// integers past i64, which SQLite reads as REAL) is declined.
fn number(n: &str, negative: bool) -> R<Value> {
    if negative && n == "9223372036854775808" {
        // SQLite reads a minus before this literal as i64::MIN itself.
        return Ok(Value::Integer(i64::MIN));
    }
    if n.bytes().all(|b| b.is_ascii_digit()) {
        let v: i64 = n
            .parse()
            .map_err(|_| format!("integer literal {n} outside i64"))?;
        return Ok(Value::Integer(if negative { -v } else { v }));
    }
    if n.bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        let v: f64 = n.parse().map_err(|_| format!("numeric literal {n}"))?;
        return Ok(Value::Real(if negative { -v } else { v }));
    }
    Err(format!("numeric literal {n}"))
}

/// A plain table in FROM: its name (main schema) and the name columns may
/// be qualified with.
fn plain_table(f: &TableFactor) -> R<(String, String)> {
    let TableFactor::Table {
        name,
        alias,
        args,
        with_hints,
        version,
        partitions,
        sample,
        index_directives,
        ..
    } = f
    else {
        return Err("a join of something other than plain tables".into());
    };
    if args.is_some()
        || !with_hints.is_empty()
        || version.is_some()
        || !partitions.is_empty()
        || sample.is_some()
        || !index_directives.is_empty()
    {
        return Err("table arguments or hints in a join".into());
    }
    let parts: Vec<&str> = name
        .0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => Ok(i.value.as_str()),
            _ => Err("a computed table name".to_owned()),
        })
        .collect::<R<_>>()?;
    let table = match parts.as_slice() {
        [t] => *t,
        [s, t] if s.eq_ignore_ascii_case("main") => *t,
        _ => return Err("a table outside the main schema".into()),
    };
    let alias = match alias {
        Some(a) if !a.columns.is_empty() => return Err("a table alias with column names".into()),
        Some(a) => a.name.value.clone(),
        None => table.to_owned(),
    };
    Ok((table.to_owned(), alias))
}

/// `alias.column` or a bare column: (qualifier, column).
fn column_ref(e: &Expr) -> Option<(Option<&str>, &str)> {
    match e {
        Expr::Identifier(i) => Some((None, &i.value)),
        Expr::CompoundIdentifier(p) => match p.as_slice() {
            [t, c] => Some((Some(&t.value), &c.value)),
            _ => None,
        },
        Expr::Nested(x) => column_ref(x),
        _ => None,
    }
}

fn join_plan(shared: &Planes, sql: &str, columns: Vec<String>, param_count: usize) -> R<JoinPlan> {
    use sqlparser::ast::{JoinConstraint, JoinOperator};
    let stmts =
        Parser::parse_sql(&SQLiteDialect {}, sql).map_err(|e| format!("not understood ({e})"))?;
    let [Statement::Query(q)] = stmts.as_slice() else {
        return Err("not a single SELECT".into());
    };
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return Err("compound or nested SELECT".into());
    };
    if q.with.is_some() || q.order_by.is_some() || q.limit_clause.is_some() || q.fetch.is_some() {
        return Err("WITH, ORDER BY or LIMIT on a join".into());
    }
    if sel.distinct.is_some() || sel.having.is_some() || sel.top.is_some() || sel.into.is_some() {
        return Err("DISTINCT, HAVING, TOP or INTO on a join".into());
    }
    let [twj] = sel.from.as_slice() else {
        return Err("more than one table".into());
    };
    let [join] = twj.joins.as_slice() else {
        return Err("more than one join".into());
    };
    let on = match &join.join_operator {
        JoinOperator::Inner(JoinConstraint::On(e)) | JoinOperator::Join(JoinConstraint::On(e)) => e,
        JoinOperator::Inner(_) | JoinOperator::Join(_) => return Err("a join without ON".into()),
        _ => return Err("a LEFT, RIGHT, FULL or CROSS join".into()),
    };
    let (t1, a1) = plain_table(&twj.relation)?;
    let (t2, a2) = plain_table(&join.relation)?;
    if a1.eq_ignore_ascii_case(&a2) {
        return Err("a self-join".into());
    }
    let Expr::BinaryOp {
        left,
        op: BinaryOperator::Eq,
        right,
    } = on
    else {
        return Err("a join condition other than one equality".into());
    };
    let (Some((Some(q1), c1)), Some((Some(q2), c2))) = (column_ref(left), column_ref(right)) else {
        return Err("a join condition on unqualified columns".into());
    };
    // Which side is the fact table: the one with a limb on its key.
    let sides = [(&t1, &a1, &t2, &a2), (&t2, &a2, &t1, &a1)];
    let mut found = None;
    for (ft, fa, dt, da) in sides {
        let (fk, dk) = if q1.eq_ignore_ascii_case(fa) && q2.eq_ignore_ascii_case(da) {
            (c1, c2)
        } else if q2.eq_ignore_ascii_case(fa) && q1.eq_ignore_ascii_case(da) {
            (c2, c1)
        } else {
            continue;
        };
        if let Some((fi, di)) = shared.find_limb(ft, fk) {
            let l = shared.entry(fi).def.limb().expect("limb side").clone();
            if l.dim.eq_ignore_ascii_case(dt) && l.dim_key.eq_ignore_ascii_case(dk) {
                found = Some((fi, di, fa.clone(), da.clone()));
                break;
            }
        }
    }
    let (fi, di, fact_alias, dim_alias) = found.ok_or("no limb on this join's key")?;
    let fact = shared.entry(fi);
    let dim = shared.entry(di);
    let (fa, da) = (fact.cols.dim_aff[0], dim.cols.dim_aff[0]);
    if fa != da || !matches!(fa, Affinity::Integer | Affinity::Text) {
        return Err("a join between keys of different affinity".into());
    }
    let mut b = Builder {
        table: fact.def.table.clone(),
        alias: fact_alias,
        dims: fact.def.dims.clone(),
        measures: fact.def.measures.clone(),
        dim_aff: fact.cols.dim_aff.clone(),
        columns: fact.cols.columns.clone(),
        aggs: Vec::new(),
        params: Params::default(),
        group_by: Vec::new(),
    };
    // A bare name of a dimension-table column is that table's.
    let dim_cols = &dim.cols.columns;
    let on_dim_side = |e: &Expr| match column_ref(e) {
        Some((Some(q), c)) if q.eq_ignore_ascii_case(&dim_alias) => Some(c.to_owned()),
        Some((None, c)) if dim_cols.iter().any(|d| d.eq_ignore_ascii_case(c)) => Some(c.to_owned()),
        _ => None,
    };
    let filter = match &sel.selection {
        Some(e) => Some(b.pred(e)?),
        None => None,
    };
    let GroupByExpr::Expressions(gexprs, mods) = &sel.group_by else {
        return Err("GROUP BY ALL".into());
    };
    if !mods.is_empty() {
        return Err("GROUP BY modifiers".into());
    }
    for g in gexprs {
        if on_dim_side(g).is_some() {
            return Err("GROUP BY a column of the dimension table".into());
        }
        let d = b
            .dim_of(g)
            .ok_or("GROUP BY an expression that is not a fact dimension")?;
        if !b.group_by.contains(&d) {
            b.group_by.push(d);
        }
    }
    let mut outputs = Vec::new();
    for item in &sel.projection {
        let e = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => return Err("a wildcard in the select list".into()),
        };
        if let Expr::Function(f) = e {
            let name = f.name.to_string().to_ascii_lowercase();
            if name == "sum" {
                if let FunctionArguments::List(list) = &f.args {
                    if let ([FunctionArg::Unnamed(FunctionArgExpr::Expr(x))], None, None, true) = (
                        list.args.as_slice(),
                        &f.filter,
                        &f.over,
                        list.duplicate_treatment.is_none(),
                    ) {
                        if let Some(c) = on_dim_side(x) {
                            let m = dim
                                .def
                                .measures
                                .iter()
                                .position(|m| m.eq_ignore_ascii_case(&c))
                                .ok_or_else(|| {
                                    format!("SUM of {c}, which the limb does not keep")
                                })?;
                            outputs.push(JOut::SumDim(m));
                            continue;
                        }
                    }
                }
            }
        }
        match b.out_expr(e)? {
            OutExpr::Group(i) => outputs.push(JOut::Group(i)),
            OutExpr::Agg(i) => outputs.push(match b.aggs[i] {
                AggFn::CountStar => JOut::CountStar,
                AggFn::Sum(m) => JOut::SumFact(m),
                _ => return Err("an aggregate other than COUNT(*) or SUM on a join".into()),
            }),
        }
    }
    if b.params.mixed {
        return Err("mixed or named parameters".into());
    }
    let l = fact.def.limb().expect("limb side");
    Ok(JoinPlan {
        fact: l.fact.clone(),
        fact_key: l.fact_key.clone(),
        filter,
        group_by: b.group_by,
        outputs,
        columns,
        param_count,
    })
}
