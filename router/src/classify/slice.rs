//! A SELECT over one planed table: the direct plan of `answer_from_cells`.
//!
//! Exact because it is all-or-nothing: the statement is one block over the
//! table, every term is built by `builder` or the whole plan is declined
//! (and the residue is tried next).

use sqlparser::ast::{GroupByExpr, Query, Select, SelectItem, SetExpr};

use super::builder::{literal_position, order_terms, Builder, Params};
use super::join::plain_table;
use super::{AggFn, Class, OrderTerm, OutExpr, Plan, R};
use crate::planes::Planes;

/// The plan of `sql` for the cells, `None` for a two-table join (which
/// `join_plan` decides), or why neither.
pub(super) fn plan(
    shared: &Planes,
    q: &Query,
    columns: Vec<String>,
    param_count: usize,
) -> R<Option<Plan>> {
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
    let plane = entry.def.name.clone();
    let mut b = Builder {
        table: entry.def.table.clone(),
        alias,
        dims: entry.def.dims.clone(),
        measures: entry.def.measures.clone(),
        dim_aff: entry.cols.dim_aff.clone(),
        dim_keys: super::builder::dim_keys(&entry.def),
        bucket_cols: super::builder::bucket_cols(&entry.def, &entry.cols.columns, &|c| {
            // Only an INTEGER column of a STRICT table is sure to hold no
            // REAL (whose bucket SQLite rounds to the millisecond, across
            // an edge) and no BLOB (which sorts after every number).
            if !entry.cols.strict {
                return None;
            }
            entry
                .cols
                .col_aff
                .get(entry.cols.columns.iter().position(|x| x == c)?)
                .copied()
        }),
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
        Some(e) => Some(b.where_pred(e)?),
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
            None => match output_alias(&b, sel, g) {
                // A name that is no column of the table but an output's
                // alias groups by that output (SQLite's order, resolve.c).
                Some(e) => b.dim_of(e).ok_or("GROUP BY an alias of a non-dimension")?,
                None => b
                    .dim_of(g)
                    .ok_or("GROUP BY an expression that is not a dimension column")?,
            },
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
    for (e, desc, nulls_first) in order_terms(q)? {
        let e = b.order_expr(e, &outputs, &aliases)?;
        order_by.push(OrderTerm {
            e,
            desc,
            nulls_first,
        });
    }
    let (limit, offset) = b.limit_offset(&q.limit_clause)?;
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
        plane,
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
pub(super) fn table_of(shared: &Planes, sel: &Select) -> R<(usize, String)> {
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

/// The expression of the output whose alias `g` names, when `g` is a bare
/// name that no column of the table (nor the rowid) takes first.
fn output_alias<'a>(
    b: &Builder,
    sel: &'a Select,
    g: &sqlparser::ast::Expr,
) -> Option<&'a sqlparser::ast::Expr> {
    let sqlparser::ast::Expr::Identifier(i) = g else {
        return None;
    };
    if super::names_a_column(&b.columns, &i.value) {
        return None;
    }
    sel.projection.iter().find_map(|item| match item {
        SelectItem::ExprWithAlias { expr, alias } if alias.value.eq_ignore_ascii_case(&i.value) => {
            Some(expr)
        }
        _ => None,
    })
}
