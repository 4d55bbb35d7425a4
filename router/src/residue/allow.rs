//! The allow-lists: which functions, aggregates, windows and expression
//! forms a residue may contain, and the small tree helpers that read them.
//!
//! Exact because it is closed: a name or a form that is not listed here
//! declines, so a function SQLite adds later (or a user's own) never reaches
//! a served statement until someone shows it deterministic and lists it.

use sqlparser::ast::{
    CastKind, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, InTarget, ObjectNamePart,
    Value as SqlValue, WindowType,
};

use super::R;

/// Scalar functions that are deterministic and have no side effects: the
/// same arguments give the same value however often they are called. A
/// residue evaluates them once per group instead of once per row.
/// The deterministic functions whose value is INTEGER, TEXT or NULL, or
/// one of their arguments (never a REAL made from an INTEGER): what a
/// representation-stable expression may call (`Walker::stable`).
pub(super) const INT_OR_TEXT: &[&str] = &[
    "coalesce",
    "ifnull",
    "iif",
    "if",
    "nullif",
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
    "date",
    "time",
    "datetime",
    "strftime",
    "unixepoch",
    "concat",
    "concat_ws",
];

pub(super) const FUNCTIONS: &[&str] = &[
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
pub(super) const AGGREGATES: &[&str] = crate::classify::AGGREGATES;

/// Aggregates the cells do not merge (their value depends on the rows or
/// their order, not on mergeable partials).
pub(super) const OTHER_AGGREGATES: &[&str] = &[
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
pub(super) const ORDERED_SUMS: &[&str] = &["sum", "total", "avg", "pleromasumexact"];

/// Window functions whose value does not depend on the order of peers.
pub(super) const PEER_FREE_WINDOWS: &[&str] = &[
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
pub(super) const RAISING: &[&str] = &[
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
pub(super) const ORDERED_WINDOWS: &[&str] = &[
    "row_number",
    "ntile",
    "lag",
    "lead",
    "first_value",
    "last_value",
    "nth_value",
];

/// A function call in an outer query: its rows are the same multiset as
/// without the plane, so aggregates and window functions are SQLite's as
/// they stand; scalar functions must be deterministic.
pub(super) fn function_allowed(f: &sqlparser::ast::Function) -> R<()> {
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

pub(super) fn fn_name(f: &sqlparser::ast::Function) -> R<String> {
    match f.name.0.as_slice() {
        [ObjectNamePart::Identifier(i)] => Ok(i.value.to_ascii_lowercase()),
        _ => Err("a qualified function name".into()),
    }
}

/// `min(a, b)` and `max(a, b)` are scalar functions.
pub(super) fn is_scalar_minmax(f: &sqlparser::ast::Function) -> bool {
    let n = fn_name(f).unwrap_or_default();
    matches!(n.as_str(), "min" | "max")
        && matches!(&f.args, FunctionArguments::List(l) if l.args.len() > 1)
}

pub(super) fn has_aggregate(e: &Expr) -> bool {
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

pub(super) fn has_window(e: &Expr) -> bool {
    let mut found = false;
    visit(e, &mut |x| {
        if let Expr::Function(f) = x {
            found |= f.over.is_some();
        }
        true
    });
    found
}

pub(super) fn is_constant(e: &Expr) -> bool {
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
pub(super) fn raising_form(e: &Expr) -> Option<&'static str> {
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

/// Expression forms a residue may contain (their children are checked
/// separately). Anything else declines.
pub(super) fn expr_form_allowed(e: &Expr) -> R<()> {
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
pub(super) fn children<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
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
pub(crate) fn visit(e: &Expr, f: &mut dyn FnMut(&Expr) -> bool) {
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
