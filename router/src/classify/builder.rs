//! The builder: a block's expressions as the plan's predicates,
//! aggregates, outputs, HAVING and ORDER BY terms, with the parameters
//! numbered as SQLite numbers them.
//!
//! Exact because each form it accepts has one meaning over the cells (a
//! column is a dimension or a measure of the plane, a comparison compares
//! under the column's affinity); anything else comes back as a reason.

use crate::mutation::Mutation;
use rusqlite::types::Value;
use sqlparser::ast::{
    BinaryOperator, DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    InTarget, ObjectNamePart, UnaryOperator, Value as SqlValue,
};

use super::{names_a_column, AggFn, CmpOp, HExpr, HOperand, Operand, OutExpr, PExpr, R};
use crate::affinity::Affinity;

/// Parameter numbering: all `?` (in order) or all `?NNN`.
#[derive(Default)]
pub(super) struct Params {
    pub(super) next: usize,
    pub(super) plain: bool,
    pub(super) numbered: bool,
    pub(super) mixed: bool,
}

impl Params {
    pub(super) fn take(&mut self, p: &str) -> R<usize> {
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

pub(super) struct Builder {
    pub(super) table: String,
    pub(super) alias: String,
    pub(super) dims: Vec<String>,
    pub(super) measures: Vec<String>,
    pub(super) dim_aff: Vec<Affinity>,
    /// Per dimension: an expression dimension's token key (its SQL as
    /// sqlparser prints it, read by `expr::token_key`).
    pub(super) dim_keys: Vec<Option<Vec<(crate::tokenize::Kind, String)>>>,
    /// Per expression dimension that is a time bucket of a raw INTEGER or
    /// NUMERIC column (`date(ts, 'unixepoch')`): that column's name.
    pub(super) bucket_cols: Vec<Option<String>>,
    /// Every column of the table (SQLite resolves a name to one of them
    /// before an output alias).
    pub(super) columns: Vec<String>,
    pub(super) aggs: Vec<AggFn>,
    pub(super) params: Params,
    pub(super) group_by: Vec<usize>,
}

pub(super) enum Col {
    Dim(usize),
    Measure(usize),
}

/// The ORDER BY terms of a query: (expression, DESC, NULLS FIRST), with
/// SQLite's default NULL placement (first when ascending).
pub(super) fn order_terms(q: &sqlparser::ast::Query) -> R<Vec<(&Expr, bool, bool)>> {
    let Some(ob) = &q.order_by else {
        return Ok(Vec::new());
    };
    if ob.interpolate.is_some() {
        return Err("ORDER BY INTERPOLATE".into());
    }
    let sqlparser::ast::OrderByKind::Expressions(terms) = &ob.kind else {
        return Err("ORDER BY ALL".into());
    };
    let mut out = Vec::with_capacity(terms.len());
    for t in terms {
        if t.with_fill.is_some() {
            return Err("ORDER BY WITH FILL".into());
        }
        let desc = match &t.options.sort {
            None | Some(sqlparser::ast::OrderBySort::Asc) => false,
            Some(sqlparser::ast::OrderBySort::Desc) => true,
            Some(_) => return Err("ORDER BY USING".into()),
        };
        out.push((&t.expr, desc, t.options.nulls_first.unwrap_or(!desc)));
    }
    Ok(out)
}

impl Builder {
    /// LIMIT and OFFSET as operands (literals or parameters), numbered in
    /// the order of the text: in `LIMIT o, l` the offset comes first, so
    /// its anonymous `?` is numbered first.
    pub(super) fn limit_offset(
        &mut self,
        l: &Option<sqlparser::ast::LimitClause>,
    ) -> R<(Option<Operand>, Option<Operand>)> {
        use sqlparser::ast::LimitClause;
        Ok(match l {
            None => (None, None),
            Some(LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) => {
                if !limit_by.is_empty() {
                    return Err("LIMIT BY".into());
                }
                let l = limit.as_ref().map(|e| self.operand(e)).transpose()?;
                let o = offset
                    .as_ref()
                    .map(|o| self.operand(&o.value))
                    .transpose()?;
                (l, o)
            }
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
                let (o, l) = if crate::mutation::active(Mutation::CommaLimitParamsSwapped) {
                    let l = self.operand(limit)?;
                    (self.operand(offset)?, l)
                } else {
                    let o = self.operand(offset)?;
                    (o, self.operand(limit)?)
                };
                (Some(l), Some(o))
            }
        })
    }
    /// An expression dimension that `e` is (the same tokens, up to case,
    /// quotes and the table's qualifier).
    fn expr_dim(&self, e: &Expr) -> Option<usize> {
        if self.dim_keys.iter().all(Option::is_none) {
            return None;
        }
        let key = crate::catalog::expr::token_key(
            &e.to_string(),
            &[self.alias.as_str(), self.table.as_str(), "main"],
        );
        self.dim_keys
            .iter()
            .position(|k| k.as_ref().is_some_and(|k| *k == key))
    }

    /// A column reference of the planed table, or an expression dimension.
    pub(super) fn column(&self, e: &Expr) -> Option<Result<Col, String>> {
        if !matches!(
            e,
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Nested(_)
        ) {
            return self.expr_dim(e).map(|d| Ok(Col::Dim(d)));
        }
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
        // An expression dimension's name is no column of the table.
        if let Some(d) = (0..self.dims.len())
            .find(|&d| self.dim_keys[d].is_none() && self.dims[d].eq_ignore_ascii_case(name))
        {
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

    pub(super) fn dim_of(&self, e: &Expr) -> Option<usize> {
        match self.column(e) {
            Some(Ok(Col::Dim(d))) => Some(d),
            _ => None,
        }
    }

    pub(super) fn operand(&mut self, e: &Expr) -> R<Operand> {
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

    /// A whole WHERE clause: its top-level conjuncts, where a pair
    /// `col >= lo AND col < hi` on the raw column of a time-bucket
    /// dimension becomes a bucket range (`PExpr::Bucket`), and the rest
    /// predicates over dimensions. Only at the top level: there a row whose
    /// bucket is NULL (its column NULL, TEXT or out of range) fails the
    /// range as the pair fails it; under NOT or OR their NULL and FALSE
    /// would differ.
    pub(super) fn where_pred(&mut self, e: &Expr) -> R<PExpr> {
        if self.bucket_cols.iter().all(Option::is_none) {
            return self.pred(e);
        }
        let mut conjuncts = Vec::new();
        flatten_and(e, &mut conjuncts);
        // Per bucket dimension: its column, and the lower and upper bounds
        // with the conjuncts they came from.
        type Bounds<'e> = Vec<(usize, &'e Expr)>;
        let mut ranges: Vec<(usize, String, Bounds, Bounds)> = Vec::new();
        for (i, c) in conjuncts.iter().enumerate() {
            let Expr::BinaryOp { left, op, right } = c else {
                continue;
            };
            let (col, bound, lower) =
                match (self.raw_bucket_col(left), self.raw_bucket_col(right), op) {
                    (Some(k), None, BinaryOperator::GtEq) => (k, right.as_ref(), true),
                    (Some(k), None, BinaryOperator::Lt) => (k, right.as_ref(), false),
                    (None, Some(k), BinaryOperator::LtEq) => (k, left.as_ref(), true),
                    (None, Some(k), BinaryOperator::Gt) => (k, left.as_ref(), false),
                    _ => continue,
                };
            let (dim, name) = col;
            let at = match ranges.iter().position(|r| r.0 == dim) {
                Some(p) => p,
                None => {
                    ranges.push((dim, name, Vec::new(), Vec::new()));
                    ranges.len() - 1
                }
            };
            if lower {
                ranges[at].2.push((i, bound));
            } else {
                ranges[at].3.push((i, bound));
            }
        }
        let mut used = vec![false; conjuncts.len()];
        let mut parts = Vec::new();
        for (dim, column, lows, highs) in ranges {
            let ([(li, lo)], [(hi_i, hi)]) = (lows.as_slice(), highs.as_slice()) else {
                continue;
            };
            used[*li] = true;
            used[*hi_i] = true;
            parts.push(PExpr::Bucket {
                dim,
                column,
                lo: self.operand(lo)?,
                hi: self.operand(hi)?,
            });
        }
        if parts.is_empty() {
            return self.pred(e);
        }
        for (i, c) in conjuncts.iter().enumerate() {
            if !used[i] {
                parts.push(self.pred(c)?);
            }
        }
        Ok(PExpr::And(parts))
    }

    /// The time-bucket dimension whose raw column `e` names, with the
    /// column's name; only for a column that is no dimension or measure.
    fn raw_bucket_col(&self, e: &Expr) -> Option<(usize, String)> {
        let name = match e {
            Expr::Identifier(i) => &i.value,
            Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [t, c] if t.value.eq_ignore_ascii_case(&self.alias) => &c.value,
                _ => return None,
            },
            Expr::Nested(inner) => return self.raw_bucket_col(inner),
            _ => return None,
        };
        if matches!(self.column(e), Some(Ok(_))) {
            return None;
        }
        self.bucket_cols.iter().enumerate().find_map(|(d, c)| {
            c.as_ref()
                .filter(|c| c.eq_ignore_ascii_case(name))
                .map(|c| (d, c.clone()))
        })
    }

    /// A WHERE predicate over dimension columns.
    pub(super) fn pred(&mut self, e: &Expr) -> R<PExpr> {
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
    pub(super) fn is_pred(&mut self, l: &Expr, r: &Expr, negated: bool) -> R<PExpr> {
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
    pub(super) fn pred_dim(&self, e: &Expr) -> R<Option<usize>> {
        match self.column(e) {
            Some(Ok(Col::Dim(d))) => Ok(Some(d)),
            Some(Ok(Col::Measure(m))) => Err(format!("a filter on measure {}", self.measures[m])),
            Some(Err(r)) => Err(format!("a filter on a non-dimension: {r}")),
            None => Ok(None),
        }
    }

    pub(super) fn agg_index(&mut self, a: AggFn) -> usize {
        if let Some(i) = self.aggs.iter().position(|x| *x == a) {
            return i;
        }
        self.aggs.push(a);
        self.aggs.len() - 1
    }

    /// An aggregate call, if `e` is one; errors for unserved aggregates.
    pub(super) fn aggregate(&mut self, e: &Expr) -> R<Option<AggFn>> {
        let Expr::Function(f) = e else {
            return Ok(None);
        };
        let name = match f.name.0.as_slice() {
            [ObjectNamePart::Identifier(i)] => i.value.to_ascii_lowercase(),
            _ => return Err("a qualified function name".into()),
        };
        if !super::AGGREGATES.contains(&name.as_str()) {
            // A scalar function: an expression dimension, or not served.
            return match self.expr_dim(e) {
                Some(_) => Ok(None),
                None => Err(format!("function {name}() is not served")),
            };
        }
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
        if !super::AGGREGATES.contains(&name.as_str()) {
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

    pub(super) fn out_expr(&mut self, e: &Expr) -> R<OutExpr> {
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
    pub(super) fn order_expr(
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

    pub(super) fn having(
        &mut self,
        e: &Expr,
        outputs: &[OutExpr],
        aliases: &[Option<String>],
    ) -> R<HExpr> {
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

    pub(super) fn h_operand(
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
            let column = if crate::mutation::active(Mutation::HavingAliasBeforeColumn) {
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

pub(super) fn cmp_op(op: &BinaryOperator) -> Option<CmpOp> {
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
pub(super) fn number(n: &str, negative: bool) -> R<Value> {
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

/// A bare integer literal (`GROUP BY 2`, `ORDER BY 1`): the position it
/// names.
pub(super) fn literal_position(e: &Expr) -> Option<usize> {
    match e {
        Expr::Value(v) => match &v.value {
            SqlValue::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// Each expression dimension's token key, from its SQL as sqlparser prints
/// it (so that a query's expression, printed the same way, compares by its
/// tokens). One that does not parse gets a key nothing matches.
pub(super) fn dim_keys(
    def: &crate::catalog::PlaneDef,
) -> Vec<Option<Vec<(crate::tokenize::Kind, String)>>> {
    def.exprs
        .iter()
        .map(|e| {
            e.as_ref().map(|e| {
                sqlparser::parser::Parser::new(&sqlparser::dialect::SQLiteDialect {})
                    .try_with_sql(&e.sql)
                    .and_then(|mut p| p.parse_expr())
                    .map(|x| crate::catalog::expr::token_key(&x.to_string(), &[]))
                    .unwrap_or_default()
            })
        })
        .collect()
}

/// The conjuncts of an AND chain (parentheses looked through).
fn flatten_and<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::Nested(inner) => flatten_and(inner, out),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            flatten_and(left, out);
            flatten_and(right, out);
        }
        other => out.push(other),
    }
}

/// Per dimension: the raw column of a time-bucket expression dimension
/// (`date(c, 'unixepoch')`, `strftime('%Y-%m', c, 'unixepoch')`, …: each
/// monotone in `c` over integers, its bucket edges at whole seconds, its
/// values text that sorts as time does), when `affinity` says `c` holds
/// only INTEGER or NULL (the caller gives INTEGER affinity only for an
/// INTEGER column of a STRICT table: a REAL within half a millisecond of
/// an edge has the next bucket, and a BLOB, which sorts after every
/// number, has a date — both found from outside).
pub(super) fn bucket_cols(
    def: &crate::catalog::PlaneDef,
    columns: &[String],
    affinity: &dyn Fn(&str) -> Option<Affinity>,
) -> Vec<Option<String>> {
    const FORMS: &[&str] = &[
        "date(?, 'unixepoch')",
        "date(?, 'unixepoch', 'start of month')",
        "date(?, 'unixepoch', 'start of year')",
        "datetime(?, 'unixepoch', 'start of day')",
        "datetime(?, 'unixepoch', 'start of month')",
        "strftime('%Y-%m-%d', ?, 'unixepoch')",
        "strftime('%Y-%m', ?, 'unixepoch')",
        "strftime('%Y', ?, 'unixepoch')",
    ];
    def.exprs
        .iter()
        .map(|e| {
            let e = e.as_ref()?;
            let [c] = e.inputs.as_slice() else {
                return None;
            };
            if !columns.iter().any(|x| x == c) || affinity(c) != Some(Affinity::Integer) {
                return None;
            }
            let key = crate::catalog::expr::token_key(&e.sql, &[]);
            let form = FORMS.iter().any(|f| {
                crate::catalog::expr::token_key(&f.replace('?', &crate::tokenize::quote(c)), &[])
                    == key
            });
            form.then(|| c.clone())
        })
        .collect()
}
