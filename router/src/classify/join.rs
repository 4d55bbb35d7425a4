//! A SELECT over a fact table and one dimension table joined on their
//! keys: the plan of `answer_from_limb`.
//!
//! Exact because only the one shape a limb holds is accepted (an inner
//! join on the two keys, columns qualified by their table) and anything
//! else is declined.

use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr,
    ObjectNamePart, Query, SelectItem, SetExpr, TableFactor,
};

use super::builder::{literal_position, order_terms, Builder, Params};
use super::{AggFn, JOut, JoinPlan, OutExpr, R};
use crate::affinity::Affinity;
use crate::planes::Planes;

/// A plain table in FROM: its name (main schema) and the name columns may
/// be qualified with.
pub(super) fn plain_table(f: &TableFactor) -> R<(String, String)> {
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
pub(super) fn column_ref(e: &Expr) -> Option<(Option<&str>, &str)> {
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

pub(super) fn join_plan(
    shared: &Planes,
    q: &Query,
    columns: Vec<String>,
    param_count: usize,
) -> R<JoinPlan> {
    use sqlparser::ast::{JoinConstraint, JoinOperator};
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return Err("compound or nested SELECT".into());
    };
    if q.with.is_some() || q.fetch.is_some() {
        return Err("WITH or FETCH on a join".into());
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
        dim_keys: super::builder::dim_keys(&fact.def),
        bucket_cols: vec![None; fact.def.dims.len()],
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
    // `SUM(col)` of a dimension-table column: its place among the limb's
    // dimension-side measures.
    let sum_dim = |e: &Expr| -> Option<R<usize>> {
        let Expr::Function(f) = e else {
            return None;
        };
        if !f.name.to_string().eq_ignore_ascii_case("sum") {
            return None;
        }
        let FunctionArguments::List(list) = &f.args else {
            return None;
        };
        let ([FunctionArg::Unnamed(FunctionArgExpr::Expr(x))], None, None, true) = (
            list.args.as_slice(),
            &f.filter,
            &f.over,
            list.duplicate_treatment.is_none(),
        ) else {
            return None;
        };
        let c = on_dim_side(x)?;
        Some(
            dim.def
                .measures
                .iter()
                .position(|m| m.eq_ignore_ascii_case(&c))
                .ok_or_else(|| format!("SUM of {c}, which the limb does not keep")),
        )
    };
    let mut outputs = Vec::new();
    let mut aliases: Vec<Option<String>> = Vec::new();
    for item in &sel.projection {
        aliases.push(match item {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
            _ => None,
        });
        let e = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => return Err("a wildcard in the select list".into()),
        };
        if let Some(m) = sum_dim(e) {
            outputs.push(JOut::SumDim(m?));
            continue;
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
    // ORDER BY over outputs only: a position, an output alias (a bare
    // ORDER BY name is an alias before a column, as in SQLite), or an
    // expression that is an output's (the same group column, COUNT(*) or
    // SUM of the same fact measure).
    let mut order_by = Vec::new();
    for (e, desc, nulls_first) in order_terms(q)? {
        let at = if let Some(p) = literal_position(e) {
            (1..=outputs.len())
                .contains(&p)
                .then(|| p - 1)
                .ok_or("ORDER BY position out of range")?
        } else if let Some(k) = match e {
            Expr::Identifier(i) => aliases.iter().position(|a| {
                a.as_deref()
                    .is_some_and(|a| a.eq_ignore_ascii_case(&i.value))
            }),
            _ => None,
        } {
            k
        } else {
            let want = match sum_dim(e) {
                Some(m) => JOut::SumDim(m?),
                None => match b.out_expr(e)? {
                    OutExpr::Group(i) => JOut::Group(i),
                    OutExpr::Agg(i) => match b.aggs[i] {
                        AggFn::CountStar => JOut::CountStar,
                        AggFn::Sum(m) => JOut::SumFact(m),
                        _ => return Err("ORDER BY an aggregate that is not an output".into()),
                    },
                },
            };
            outputs
                .iter()
                .position(|o| *o == want)
                .ok_or("ORDER BY a term that is not an output of the join")?
        };
        order_by.push((at, desc, nulls_first));
    }
    let (limit, offset) = b.limit_offset(&q.limit_clause)?;
    if (limit.is_some() || offset.is_some())
        && !(0..b.group_by.len()).all(|i| {
            order_by
                .iter()
                .any(|&(k, _, _)| outputs[k] == JOut::Group(i))
        })
    {
        // Which groups a LIMIT keeps past a partial order is SQLite's choice.
        return Err("LIMIT/OFFSET on a join without an ORDER BY over every group column".into());
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
        order_by,
        limit,
        offset,
        columns,
        param_count,
    })
}
