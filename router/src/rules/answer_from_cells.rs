//! Rule: answer a classified SELECT from a plane's cells.
//!
//! Each step either keeps SQLite's semantics exactly or declines: literal
//! affinity, three-valued logic, SUM's overflow (which in SQLite depends on
//! the order rows are added: the plane knows the sums of the positive and the
//! negative values apart, so it can prove when no order overflows), TOTAL and
//! AVG as SQLite computes them, NULL ordering, and the result column names.

use crate::mutation::Mutation;
use std::cmp::Ordering;

use pleroma_plane::{AggValue, DimValue, Plane, PlaneError, Pred, SliceQuery, Truth};
use rusqlite::types::Value;

use crate::affinity::{convert_operand, dim_to_value, sort_cmp, sql_cmp};
use crate::catalog::{quote, PlaneEntry};
use crate::classify::{AggFn, CmpOp, HExpr, HOperand, Operand, OutExpr, PExpr, Plan};
use crate::decline::Decline;
use crate::planes::Planes;
use crate::route::{Route, RouteKind, RouteMode};
use crate::rows::Rows;
use crate::Result;

/// Most cells whose MIN/MAX is recomputed from SQLite in one answer; past
/// that the query is declined (SQLite's own scan is then the cheaper path).
pub(crate) const MAX_RECOMPUTE: usize = 64;

pub(crate) enum Outcome {
    Served(Rows, Route),
    Declined(Decline, Option<Route>),
}

type R<T> = std::result::Result<T, String>;

/// Answer `plan` from the planes `shared` of the connection `db`, or decline.
pub(crate) fn answer(
    db: &rusqlite::Connection,
    shared: &mut Planes,
    mode: RouteMode,
    plan: &Plan,
    params: &[Value],
) -> Result<Outcome> {
    if params.len() != plan.param_count {
        return Ok(Outcome::Declined(
            "parameter count differs from the statement's".into(),
            None,
        ));
    }
    let Some(i) = shared.find_plan(&plan.table, plan.plane.as_deref()) else {
        return Ok(Outcome::Declined(
            format!("no plane on table {}", plan.table).into(),
            None,
        ));
    };
    let entry = shared.entry_mut(i);
    if let Some(reason) = entry.out_of_service() {
        return Ok(Outcome::Declined(
            format!("plane on {} is out of service: {reason}", plan.table).into(),
            None,
        ));
    }
    let filter = match plan
        .filter
        .as_ref()
        .map(|f| build_pred(entry, f, params))
        .transpose()
    {
        Ok(f) => f.unwrap_or(Pred::Const(Truth::True)),
        Err(r) => return Ok(Outcome::Declined(r.into(), None)),
    };
    let est = estimate_cells(&entry.plane, &filter);
    let rows = entry.plane.rows() as f64;
    let route = Route {
        kind: RouteKind::Plane,
        reason: plan.class.served().to_owned(),
        table: Some(plan.table.clone()),
        plane_cost: Some(est),
        engine_cost: Some(rows),
    };
    if mode == RouteMode::Auto && est > rows.max(1.0) {
        let r = format!("cost: the plane would visit {est} cells for {rows} rows");
        return Ok(Outcome::Declined(r.into(), Some(route)));
    }
    let q = SliceQuery {
        filter,
        group_by: plan.group_by.clone(),
        aggs: plan.aggs.iter().map(|a| a.plane_agg()).collect(),
    };
    let result = loop {
        match entry.plane.slice(&q) {
            Ok(r) => break r,
            Err(PlaneError::UnknownExtremum { cells }) if cells.len() <= MAX_RECOMPUTE => {
                recompute_extrema(db, entry, &cells)?;
            }
            Err(e) => return Ok(Outcome::Declined(Decline::Plane(e), Some(route))),
        }
    };
    let plane = &entry.plane;
    // Every kept group's values in one buffer: its group columns, then its
    // aggregates (one allocation for them all, not a few per group).
    let keys = plan.group_by.len();
    let stride = keys + plan.aggs.len();
    let mut vals: Vec<Value> = Vec::with_capacity(result.groups.len() * stride);
    let mut kept = 0usize;
    // Groups with a SUM past i64: SQLite raises "integer overflow" when it
    // finalizes one; `None` when HAVING rejects the group on group columns
    // alone (SQLite may move such terms into WHERE and never finalize it).
    let mut overflow = false;
    let mut overflow_unsure = false;
    for g in &result.groups {
        let start = vals.len();
        vals.extend(
            g.key
                .iter()
                .zip(&plan.group_by)
                .map(|(&c, &d)| dim_to_value(plane.dict(d).value(c))),
        );
        let mut group_overflow = false;
        for (a, v) in plan.aggs.iter().zip(&g.values) {
            match agg_value(*a, v) {
                Ok(v) => vals.push(v),
                Err(AggErr::Overflow) => {
                    group_overflow = true;
                    vals.push(Value::Null);
                }
                Err(AggErr::Unsure(r)) => return Ok(Outcome::Declined(r, Some(route))),
            }
        }
        let group = &vals[start..];
        let val = |e: &OutExpr| group[slot(keys, e)].clone();
        let keep = if group_overflow {
            match plan
                .having
                .as_ref()
                .map(|h| group_terms_pass(h, &val, params))
                .transpose()
            {
                Ok(None | Some(true)) => overflow = true,
                Ok(Some(false)) => overflow_unsure = true,
                Err(r) => return Ok(Outcome::Declined(r.into(), Some(route))),
            }
            false
        } else if let Some(h) = &plan.having {
            match eval_having(h, &val, params) {
                Ok(Some(true)) => true,
                Ok(_) => false,
                Err(r) => return Ok(Outcome::Declined(r.into(), Some(route))),
            }
        } else {
            true
        };
        if keep {
            kept += 1;
        } else {
            vals.truncate(start);
        }
    }
    if overflow_unsure && !overflow {
        return Ok(Outcome::Declined(Decline::SumOverflowHaving, Some(route)));
    }
    if overflow {
        if plan.limit.is_some() || plan.offset.is_some() {
            // SQLite finalizes only the groups it outputs before LIMIT stops
            // it; which ones those are is its business.
            return Ok(Outcome::Declined(
                Decline::SumOverflowUnderLimit,
                Some(route),
            ));
        }
        if result.groups.len() > 1 {
            // The groups SQLite outputs before the one that overflows are
            // stepped rows the caller sees (`Connection::rows_before_error`, the
            // shell prints them): which ones, in its order, is its business.
            return Ok(Outcome::Declined(Decline::SumOverflowGrouped, Some(route)));
        }
        return Err(integer_overflow());
    }
    let group = |i: usize| &vals[i * stride..(i + 1) * stride];
    let null_order = crate::mutation::active(Mutation::NullOrder);
    let mut order: Vec<usize> = (0..kept).collect();
    order.sort_by(|&a, &b| {
        let (ga, gb) = (group(a), group(b));
        for t in &plan.order_by {
            let (x, y) = (&ga[slot(keys, &t.e)], &gb[slot(keys, &t.e)]);
            let o = match (x, y) {
                (Value::Null, Value::Null) => Ordering::Equal,
                (Value::Null, _) => null_side(t.nulls_first ^ null_order),
                (_, Value::Null) => null_side(t.nulls_first ^ null_order).reverse(),
                _ if t.desc => sort_cmp(y, x),
                _ => sort_cmp(x, y),
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        // SQLite emits groups in group-key order.
        ga[..keys]
            .iter()
            .zip(&gb[..keys])
            .map(|(x, y)| sort_cmp(x, y))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    });
    let offset = match plan
        .offset
        .as_ref()
        .map(|o| int_operand(o, params))
        .transpose()
    {
        Ok(o) => o.unwrap_or(0).max(0) as usize,
        Err(r) => return Ok(Outcome::Declined(r.into(), Some(route))),
    };
    let limit = match plan
        .limit
        .as_ref()
        .map(|o| int_operand(o, params))
        .transpose()
    {
        Ok(Some(l)) if l >= 0 => l as usize,
        Ok(_) => usize::MAX,
        Err(r) => return Ok(Outcome::Declined(r.into(), Some(route))),
    };
    let rows = order
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|i| {
            let g = group(i);
            plan.outputs
                .iter()
                .map(|e| g[slot(keys, e)].clone())
                .collect()
        })
        .collect();
    Ok(Outcome::Served(
        Rows {
            columns: plan.columns.clone().into(),
            rows,
        },
        route,
    ))
}

/// Where an output's value sits among a group's values: its group columns
/// (`keys` of them), then its aggregates.
fn slot(keys: usize, e: &OutExpr) -> usize {
    match *e {
        OutExpr::Group(i) => i,
        OutExpr::Agg(i) => keys + i,
    }
}

fn null_side(nulls_first: bool) -> Ordering {
    if nulls_first {
        Ordering::Less
    } else {
        Ordering::Greater
    }
}

/// The error SQLite raises for a SUM past i64, as rusqlite reports it.
pub(crate) fn integer_overflow() -> crate::Error {
    crate::Error::Sqlite(rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
        Some("integer overflow".into()),
    ))
}

enum AggErr {
    Overflow,
    Unsure(Decline),
}

/// One aggregate's SQL value from the plane's exact totals.
fn agg_value(a: AggFn, v: &AggValue) -> std::result::Result<Value, AggErr> {
    let sum = |v: &AggValue| -> std::result::Result<(i64, i128, bool), AggErr> {
        let AggValue::Sum { nn, pos, neg } = *v else {
            return Err(AggErr::Unsure("unexpected aggregate".into()));
        };
        let total = pos + neg;
        // Every partial sum lies in [neg, pos]: inside i64, no order overflows.
        let safe = pos <= i64::MAX as i128 && neg >= i64::MIN as i128;
        Ok((nn, total, safe))
    };
    Ok(match (a, *v) {
        (AggFn::CountStar | AggFn::Count(_) | AggFn::CountDistinct(_), AggValue::Count(n)) => {
            Value::Integer(n)
        }
        (AggFn::Min(_), AggValue::Min(m)) | (AggFn::Max(_), AggValue::Max(m)) => {
            m.map_or(Value::Null, Value::Integer)
        }
        (AggFn::Sum(_), _) => {
            let (nn, total, safe) = sum(v)?;
            if nn == 0 {
                Value::Null
            } else if total > i64::MAX as i128 || total < i64::MIN as i128 {
                return Err(AggErr::Overflow);
            } else if !safe {
                return Err(AggErr::Unsure(Decline::SumOverflowPartWay));
            } else {
                Value::Integer(total as i64)
            }
        }
        (AggFn::Total(_), _) => {
            let (nn, total, safe) = sum(v)?;
            if nn == 0 {
                Value::Real(0.0)
            } else if !safe {
                return Err(AggErr::Unsure(Decline::PastI64OrderDependent {
                    agg: "TOTAL",
                }));
            } else {
                Value::Real(total as i64 as f64)
            }
        }
        (AggFn::Avg(_), _) => {
            let (nn, total, safe) = sum(v)?;
            if nn == 0 {
                Value::Null
            } else if !safe {
                return Err(AggErr::Unsure(Decline::PastI64OrderDependent {
                    agg: "AVG",
                }));
            } else if crate::mutation::active(Mutation::AvgAsIntegerDivision) {
                Value::Real((total as i64 / nn) as f64)
            } else {
                // SQLite: (double)iSum / (double)cnt.
                Value::Real(total as i64 as f64 / nn as f64)
            }
        }
        (AggFn::SumExact(_), _) => {
            let (nn, total, _) = sum(v)?;
            if nn == 0 {
                Value::Null
            } else {
                Value::Text(total.to_string())
            }
        }
        _ => return Err(AggErr::Unsure("unexpected aggregate value".into())),
    })
}

pub(crate) fn resolve(o: &Operand, params: &[Value]) -> Value {
    match o {
        Operand::Lit(v) => v.clone(),
        Operand::Param(i) => params.get(*i).cloned().unwrap_or(Value::Null),
    }
}

fn int_operand(o: &Operand, params: &[Value]) -> R<i64> {
    match resolve(o, params) {
        Value::Integer(i) => Ok(i),
        _ => Err("LIMIT/OFFSET that is not an integer".into()),
    }
}

/// A dimension value against an operand already converted by affinity.
fn cmp_dim(d: &DimValue, v: &Value) -> Option<Ordering> {
    Some(match (d, v) {
        (DimValue::Null, _) | (_, Value::Null) => return None,
        (DimValue::Int(a), Value::Integer(b)) => a.cmp(b),
        (DimValue::Int(a), b @ Value::Real(_)) => sort_cmp(&Value::Integer(*a), b),
        (DimValue::Int(_), _) => Ordering::Less,
        (DimValue::Text(_), Value::Integer(_) | Value::Real(_)) => Ordering::Greater,
        (DimValue::Text(a), Value::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
        (DimValue::Text(_), Value::Blob(_)) => Ordering::Less,
    })
}

fn truth(b: bool) -> Truth {
    if b {
        Truth::True
    } else {
        Truth::False
    }
}

fn op_truth(op: CmpOp, o: Option<Ordering>) -> Truth {
    match o {
        None => Truth::Null,
        Some(o) => truth(match op {
            CmpOp::Eq => o == Ordering::Equal,
            CmpOp::Ne => o != Ordering::Equal,
            CmpOp::Lt => o == Ordering::Less,
            CmpOp::Le => o != Ordering::Greater,
            CmpOp::Gt => o == Ordering::Greater,
            CmpOp::Ge => o != Ordering::Less,
        }),
    }
}

fn not(t: Truth) -> Truth {
    match t {
        Truth::True => Truth::False,
        Truth::False => Truth::True,
        Truth::Null => Truth::Null,
    }
}

fn or(a: Truth, b: Truth) -> Truth {
    match (a, b) {
        (Truth::True, _) | (_, Truth::True) => Truth::True,
        (Truth::Null, _) | (_, Truth::Null) => Truth::Null,
        _ => Truth::False,
    }
}

/// A WHERE predicate as per-code truth tables.
pub(crate) fn build_pred(entry: &PlaneEntry, e: &PExpr, params: &[Value]) -> R<Pred> {
    let conv = |dim: usize, o: &Operand| -> R<Value> {
        convert_operand(entry.cols.dim_aff[dim], &resolve(o, params)).ok_or_else(|| {
            format!(
                "a {} compared with a value whose conversion is not certain",
                entry.def.dims[dim]
            )
        })
    };
    let leaf = |dim: usize, f: &dyn Fn(&DimValue) -> Truth| Pred::Leaf {
        dim,
        truth: entry.plane.dict(dim).values().iter().map(f).collect(),
    };
    Ok(match e {
        PExpr::And(v) => Pred::And(
            v.iter()
                .map(|x| build_pred(entry, x, params))
                .collect::<R<_>>()?,
        ),
        PExpr::Or(v) => Pred::Or(
            v.iter()
                .map(|x| build_pred(entry, x, params))
                .collect::<R<_>>()?,
        ),
        PExpr::Not(x) => Pred::Not(Box::new(build_pred(entry, x, params)?)),
        PExpr::Cmp { dim, op, rhs } => {
            let v = conv(*dim, rhs)?;
            leaf(*dim, &|d| op_truth(*op, cmp_dim(d, &v)))
        }
        PExpr::In { dim, list, negated } => {
            let vs = list.iter().map(|o| conv(*dim, o)).collect::<R<Vec<_>>>()?;
            leaf(*dim, &|d| {
                let t = vs.iter().fold(Truth::False, |acc, v| {
                    or(acc, op_truth(CmpOp::Eq, cmp_dim(d, v)))
                });
                if *negated {
                    not(t)
                } else {
                    t
                }
            })
        }
        PExpr::IsNull { dim, negated } => {
            leaf(*dim, &|d| truth((*d == DimValue::Null) != *negated))
        }
        PExpr::Bucket {
            dim,
            column,
            lo,
            hi,
        } => bucket_range(
            entry,
            *dim,
            column,
            &resolve(lo, params),
            &resolve(hi, params),
        )?,
        PExpr::Is { dim, rhs, negated } => {
            let v = conv(*dim, rhs)?;
            leaf(*dim, &|d| {
                let same = match (d, &v) {
                    (DimValue::Null, Value::Null) => true,
                    (DimValue::Null, _) | (_, Value::Null) => false,
                    _ => cmp_dim(d, &v) == Some(Ordering::Equal),
                };
                truth(same != *negated)
            })
        }
    })
}

/// `column >= lo AND column < hi` as the buckets of dimension `dim` it
/// covers, when `lo` and `hi` are integers that start a bucket: SQLite's
/// value of the bucket (the dimension's own expression, evaluated by the
/// plane's evaluator) differs at `lo - 1` and `lo`, and at `hi - 1` and
/// `hi`, and all four are text that sorts as time (a four-digit year
/// first). Then, the bucket expression being monotone over integers with
/// its edges at whole seconds, and the column an INTEGER column of a STRICT
/// table (only INTEGER or NULL: the classifier checked), an integer in
/// `[lo, hi)` has a bucket in `[b(lo), b(hi - 1)]`, an integer outside has
/// one outside, and a NULL fails `column >= lo` and has a NULL bucket.
/// Anything else declines.
fn bucket_range(entry: &PlaneEntry, dim: usize, column: &str, lo: &Value, hi: &Value) -> R<Pred> {
    let why = || {
        format!(
            "a range on {column} that is not sure to fall on the buckets of {}",
            entry.def.dims[dim]
        )
    };
    let (Value::Integer(lo), Value::Integer(hi)) = (lo, hi) else {
        return Err(why());
    };
    if lo >= hi {
        // No row has `lo <= column < hi`.
        return Ok(Pred::Const(Truth::False));
    }
    let (Some(ev), Some(col)) = (
        entry.cols.eval.as_ref(),
        entry.cols.columns.iter().position(|c| c == column),
    ) else {
        return Err(why());
    };
    let slot = match entry.cols.dim_cols.get(dim) {
        Some(&c) if c < 0 => (-1 - c) as usize,
        _ => return Err(why()),
    };
    let mut ev = ev.lock().unwrap_or_else(|e| e.into_inner());
    let mut bucket = |x: i64| -> Option<String> {
        let vals = ev
            .eval(|c| {
                Ok(if c == col as i32 {
                    rusqlite::types::ValueRef::Integer(x)
                } else {
                    rusqlite::types::ValueRef::Null
                })
            })
            .ok()?;
        match vals.into_iter().nth(slot)? {
            Value::Text(t) if t.len() >= 4 && t.as_bytes()[..4].iter().all(u8::is_ascii_digit) => {
                Some(t)
            }
            _ => None,
        }
    };
    let (Some(lo1), Some(lo0), Some(hi1), Some(hi0)) = (
        lo.checked_sub(1).and_then(&mut bucket),
        bucket(*lo),
        hi.checked_sub(1).and_then(&mut bucket),
        bucket(*hi),
    ) else {
        return Err(why());
    };
    if (lo1 == lo0 || hi1 == hi0) && !crate::mutation::active(Mutation::BucketEdgeUnchecked) {
        return Err(why());
    }
    Ok(Pred::Leaf {
        dim,
        truth: entry
            .plane
            .dict(dim)
            .values()
            .iter()
            .map(|d| match d {
                DimValue::Text(t) => {
                    truth(lo0.as_str() <= t.as_ref() && t.as_ref() <= hi1.as_str())
                }
                _ => Truth::False,
            })
            .collect(),
    })
}

/// Cells the slice may visit: the product of the codes each dimension
/// allows under the top-level conjunction, at most the non-empty cells.
fn estimate_cells(plane: &Plane, p: &Pred) -> f64 {
    let dims = plane.config().dims.len();
    let mut allowed: Vec<f64> = (0..dims).map(|d| plane.dict(d).len() as f64).collect();
    let mut visit = |p: &Pred| {
        if let Pred::Leaf { dim, truth } = p {
            let n = truth.iter().filter(|t| **t == Truth::True).count() as f64;
            allowed[*dim] = allowed[*dim].min(n);
        }
    };
    match p {
        Pred::And(v) => v.iter().for_each(&mut visit),
        other => visit(other),
    }
    allowed.iter().product::<f64>().min(plane.cells() as f64)
}

/// Estimated costs for `PRAGMA pleroma_explain`: (cells, rows).
pub(crate) fn estimate(shared: &Planes, plan: &Plan) -> R<(f64, f64)> {
    let i = shared
        .find_plan(&plan.table, plan.plane.as_deref())
        .ok_or("no plane")?;
    let e = shared.entry(i);
    if let Some(r) = e.out_of_service() {
        return Err(format!("plane on {} is out of service: {r}", plan.table));
    }
    let cells = match (&plan.filter, plan.param_count) {
        (Some(f), 0) => estimate_cells(&e.plane, &build_pred(e, f, &[])?),
        _ => e.plane.cells() as f64,
    };
    Ok((cells, e.plane.rows() as f64))
}

/// Recompute MIN/MAX of the given cells from the table.
pub(crate) fn recompute_extrema(
    db: &rusqlite::Connection,
    entry: &mut PlaneEntry,
    cells: &[(u64, usize)],
) -> Result<()> {
    for &(key, m) in cells {
        let codes = entry.plane.decode(key);
        let conds: Vec<String> = entry
            .def
            .dims
            .iter()
            .enumerate()
            .map(|(i, _)| format!("{} IS ?{}", entry.def.dim_sql(i), i + 1))
            .collect();
        let mcol = quote(&entry.def.measures[m]);
        let sql = format!(
            "SELECT MIN({mcol}), MAX({mcol}) FROM main.{}{}{}",
            quote(&entry.def.table),
            if conds.is_empty() { "" } else { " WHERE " },
            conds.join(" AND ")
        );
        let vals: Vec<Value> = codes
            .iter()
            .enumerate()
            .map(|(d, &c)| dim_to_value(entry.plane.dict(d).value(c)))
            .collect();
        let mut stmt = db.prepare_cached(&sql)?;
        let (min, max): (Option<i64>, Option<i64>) = stmt
            .query_row(rusqlite::params_from_iter(vals.iter()), |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        entry.plane.set_extrema(key, m, min, max);
    }
    Ok(())
}

/// Whether a group passes the HAVING conjuncts that read group columns
/// only (those SQLite may evaluate before finalizing aggregates).
fn group_terms_pass(h: &HExpr, val: &dyn Fn(&OutExpr) -> Value, params: &[Value]) -> R<bool> {
    fn only_groups(h: &HExpr) -> bool {
        let out = |o: &HOperand| !matches!(o, HOperand::Out(OutExpr::Agg(_)));
        match h {
            HExpr::And(v) | HExpr::Or(v) => v.iter().all(only_groups),
            HExpr::Not(x) => only_groups(x),
            HExpr::IsNull { e, .. } => !matches!(e, OutExpr::Agg(_)),
            HExpr::Cmp { lhs, rhs, .. } => out(lhs) && out(rhs),
        }
    }
    // The conjuncts at any depth of ANDs: SQLite splits `(a AND b) AND c`
    // into three WHERE terms alike (found by the blocks property test).
    fn conjuncts<'h>(h: &'h HExpr, out: &mut Vec<&'h HExpr>) {
        match h {
            HExpr::And(v) => v.iter().for_each(|x| conjuncts(x, out)),
            other => out.push(other),
        }
    }
    let mut terms = Vec::new();
    conjuncts(h, &mut terms);
    for t in terms.into_iter().filter(|t| only_groups(t)) {
        if eval_having(t, val, params)? != Some(true) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// HAVING in three-valued logic; `Ok(None)` is NULL.
fn eval_having(h: &HExpr, val: &dyn Fn(&OutExpr) -> Value, params: &[Value]) -> R<Option<bool>> {
    Ok(match h {
        HExpr::And(v) => {
            let mut acc = Some(true);
            for x in v {
                match eval_having(x, val, params)? {
                    Some(false) => return Ok(Some(false)),
                    None => acc = None,
                    Some(true) => {}
                }
            }
            acc
        }
        HExpr::Or(v) => {
            let mut acc = Some(false);
            for x in v {
                match eval_having(x, val, params)? {
                    Some(true) => return Ok(Some(true)),
                    None => acc = None,
                    Some(false) => {}
                }
            }
            acc
        }
        HExpr::Not(x) => eval_having(x, val, params)?.map(|b| !b),
        HExpr::IsNull { e, negated } => Some(matches!(val(e), Value::Null) != *negated),
        HExpr::Cmp { lhs, op, rhs } => {
            let side = |o: &HOperand| -> R<Value> {
                match o {
                    HOperand::Out(e) => Ok(val(e)),
                    HOperand::Lit(op, None) => Ok(resolve(op, params)),
                    HOperand::Lit(op, Some(aff)) => convert_operand(*aff, &resolve(op, params))
                        .ok_or_else(|| "HAVING literal whose conversion is not certain".to_owned()),
                }
            };
            match op_truth(*op, sql_cmp(&side(lhs)?, &side(rhs)?)) {
                Truth::True => Some(true),
                Truth::False => Some(false),
                Truth::Null => None,
            }
        }
    })
}
