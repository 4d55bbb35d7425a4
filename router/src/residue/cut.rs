//! The LIMIT cut and the order of rows: which rows a LIMIT, a scalar
//! subquery's first row or an outer query's bare column sees must not depend
//! on the order SQLite meets them in.
//!
//! Exact because over the core the rows come in the core's order, not the
//! table's: each check here either proves the order total (every group term
//! or DISTINCT output among the keys), proves one row at most, or leaves a
//! cut to be checked for ties when the statement runs.

use crate::mutation::Mutation;
use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, InTarget, LimitClause,
    OrderByKind, Query, Select, SelectItem, SetExpr, Value as SqlValue, WindowType,
};

use super::allow::{
    children, fn_name, has_aggregate, is_scalar_minmax, AGGREGATES, OTHER_AGGREGATES,
};
use super::walker::{projection, Walker};
use super::{Bound, Cut, R};
use crate::tokenize::Kind;

impl Walker<'_> {
    /// The LIMIT clause of the statement, with its bounds (literals, or
    /// parameters read when the statement runs). With literals alone the
    /// clause leaves the text; with a parameter it stays, as a clause that
    /// cuts nothing but keeps every parameter where it was (SQLite numbers
    /// an anonymous `?` by its place): `LIMIT -1 + 0 * (x) OFFSET 0 * (y)`.
    /// The answer declines unless each parameter is bound to an INTEGER,
    /// so the kept clause is evaluated only on integers, and never fails.
    pub(super) fn limit_cut(&mut self, q: &Query, l: &LimitClause, keys: Vec<usize>) -> R<Cut> {
        let lit = |e: &Expr| -> R<Bound> {
            match e {
                Expr::Value(v) => match &v.value {
                    SqlValue::Number(n, false) => n
                        .parse()
                        .map(Bound::Lit)
                        .map_err(|_| "a LIMIT that is not an integer".to_owned()),
                    SqlValue::Placeholder(_) => {
                        let at = self.expr_range(e)?.start;
                        Ok(Bound::Param(self.param_number(at)?))
                    }
                    _ => Err("a LIMIT that is not an integer".into()),
                },
                Expr::UnaryOp {
                    op: sqlparser::ast::UnaryOperator::Minus,
                    expr,
                } => match expr.as_ref() {
                    Expr::Value(v) => match &v.value {
                        SqlValue::Number(n, false) => n
                            .parse::<i64>()
                            .map(|x| Bound::Lit(-x))
                            .map_err(|_| "a LIMIT that is not an integer".to_owned()),
                        _ => Err("a LIMIT expression".into()),
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
        let comma = matches!(l, LimitClause::OffsetCommaLimit { .. });
        let limit_text = self.sql[self.expr_range(limit)?].to_owned();
        let offset_text = match offset {
            Some(o) => Some(self.sql[self.expr_range(o)?].to_owned()),
            None => None,
        };
        let (limit, offset) = (
            lit(limit)?,
            offset.map(lit).transpose()?.unwrap_or(Bound::Lit(0)),
        );
        let kept = match (limit, offset) {
            (Bound::Lit(_), Bound::Lit(_)) => String::new(),
            _ => {
                let l = format!("-1 + 0 * ({limit_text})");
                match (comma, offset_text) {
                    (true, Some(o)) => format!("LIMIT 0 * ({o}), {l}"),
                    (false, Some(o)) => format!("LIMIT {l} OFFSET 0 * ({o})"),
                    (_, None) => format!("LIMIT {l}"),
                }
            }
        };
        // From the LIMIT keyword to the end of the last bound.
        let mut start = usize::MAX;
        let mut end = 0;
        for e in exprs {
            let r = self.expr_range(e)?;
            start = start.min(r.start);
            end = end.max(r.end);
        }
        let at = self.toks.partition_point(|t| t.start < start);
        let kw = self.toks[..at]
            .iter()
            .rposition(|t| t.is("limit"))
            .ok_or("a LIMIT without its keyword")?;
        if kw + 1 != at {
            return Err("a LIMIT clause of another form".into());
        }
        let kw = self.toks[kw].start;
        let after = self.toks.partition_point(|t| t.start < end);
        if self.toks[after..].iter().any(|t| t.kind != Kind::Semi) || q.order_by.is_none() {
            return Err("a LIMIT that does not end the statement".into());
        }
        self.edits.push((kw..end, kept));
        self.rest
            .push("LIMIT (checked for a tie at the cut)".into());
        Ok(Cut {
            keys,
            limit,
            offset,
        })
    }

    /// The number SQLite gives the parameter token at byte `at`
    /// (`sqlite3ExprAssignVarNumber`): `?` the next after the largest so
    /// far, `?NNN` its own, a name (`:a`, `@a`, `$a`, `#a`) the number of
    /// its first use, or the next.
    fn param_number(&self, at: usize) -> R<usize> {
        let mut largest = 0usize;
        let mut names: Vec<(&str, usize)> = Vec::new();
        for t in self.toks.iter().filter(|t| t.kind == Kind::Variable) {
            let n = if t.text == "?" {
                largest + 1
            } else if let Some(d) = t.text.strip_prefix('?') {
                let n: usize = d
                    .parse()
                    .map_err(|_| "a parameter number SQLite would refuse".to_owned())?;
                match names.iter().find(|(x, _)| *x == t.text) {
                    Some(&(_, k)) => k,
                    None => {
                        names.push((t.text, n));
                        n
                    }
                }
            } else {
                match names.iter().find(|(x, _)| *x == t.text) {
                    Some(&(_, k)) => k,
                    None => {
                        names.push((t.text, largest + 1));
                        largest + 1
                    }
                }
            };
            largest = largest.max(n);
            if t.start == at {
                return Ok(n);
            }
        }
        Err("a LIMIT parameter not found in the text".into())
    }
}

/// An outer query's rows come in the order of the blocks it reads, which
/// over the core is not the table's: nothing it answers may depend on
/// which row SQLite meets first. So in an outer aggregate query every
/// column outside an aggregate must be a GROUP BY term (a bare column takes
/// the value of some row of its group: the first, or the one with the
/// MIN/MAX, of ties the first met), and a DISTINCT query may ORDER BY its
/// outputs only.
pub(super) fn outer_order_free(sel: &Select, order: &[&Expr]) -> R<()> {
    if crate::mutation::active(Mutation::ResidueOuterBareColumn) {
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
pub(super) fn first_row_fixed(q: &Query) -> R<()> {
    if crate::mutation::active(Mutation::ResidueScalarFirstRow) {
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
pub(super) fn bare_free(e: &Expr, groups: &[String]) -> R<()> {
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
