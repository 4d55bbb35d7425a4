//! Rule: answer a join of a planed fact table to a small dimension table
//! from the limb's two sides.
//!
//! Per join key `v`, the fact side gives the row count `c(g, v)` and exact
//! sums of each group `g` under the WHERE; the dimension side gives the row
//! count `n(v)` and the sums of its INTEGER columns. The inner join then has
//! `Σ_v c·n` rows, `SUM(f.m) = Σ_v s_f·n` and `SUM(d.x) = Σ_v c·s_d`, kept
//! apart by sign (as the plane does) so that SQLite's row-order-dependent
//! overflow can be proven absent, or the query declined. Every product and
//! sum is checked: past i128 the query is declined.

use std::cmp::Ordering;

use ahash::AHashMap;
use pleroma_plane::{Agg, AggValue, DimValue, Pred, SliceQuery, Truth};
use rusqlite::types::Value;

use crate::affinity::{dim_to_value, sort_cmp};
use crate::classify::{JOut, JoinPlan};
use crate::decline::Decline;
use crate::planes::Planes;
use crate::route::{Route, RouteKind};
use crate::rows::Rows;
use crate::rules::answer_from_cells::{build_pred, integer_overflow, Outcome};
use crate::Result;

/// Exact totals of one SUM over joined rows.
#[derive(Clone, Copy, Default)]
struct Sum {
    nn: i128,
    pos: i128,
    neg: i128,
}

impl Sum {
    /// Add `times` copies of `(nn, pos, neg)`; `None` past i128.
    fn add(&mut self, times: i128, nn: i64, pos: i128, neg: i128) -> Option<()> {
        self.nn = self.nn.checked_add(times.checked_mul(nn as i128)?)?;
        self.pos = self.pos.checked_add(times.checked_mul(pos)?)?;
        self.neg = self.neg.checked_add(times.checked_mul(neg)?)?;
        Some(())
    }
}

fn sum_parts(v: &AggValue) -> (i64, i128, i128) {
    match *v {
        AggValue::Sum { nn, pos, neg } => (nn, pos, neg),
        _ => (0, 0, 0),
    }
}

fn count(v: &AggValue) -> i64 {
    match *v {
        AggValue::Count(n) => n,
        _ => 0,
    }
}

/// Answer `plan` from the limb in `shared`, or decline.
pub(crate) fn answer(shared: &Planes, plan: &JoinPlan, params: &[Value]) -> Result<Outcome> {
    let declined = |r: &str| Ok(Outcome::Declined(r.into(), None));
    if params.len() != plan.param_count {
        return declined("parameter count differs from the statement's");
    }
    let Some((fi, di)) = shared.find_limb(&plan.fact, &plan.fact_key) else {
        return declined("the limb is gone");
    };
    let (fact, dim) = (shared.entry(fi), shared.entry(di));
    for side in [fact, dim] {
        if let Some(r) = side.out_of_service() {
            return Ok(Outcome::Declined(
                format!(
                    "limb on {}.{} is out of service: {r}",
                    plan.fact, plan.fact_key
                )
                .into(),
                None,
            ));
        }
    }
    let filter = match plan
        .filter
        .as_ref()
        .map(|f| build_pred(fact, f, params))
        .transpose()
    {
        Ok(f) => f.unwrap_or(Pred::Const(Truth::True)),
        Err(r) => return Ok(Outcome::Declined(r.into(), None)),
    };
    let fact_sums: Vec<usize> = plan
        .outputs
        .iter()
        .filter_map(|o| {
            if let JOut::SumFact(m) = o {
                Some(*m)
            } else {
                None
            }
        })
        .collect();
    let dim_sums: Vec<usize> = plan
        .outputs
        .iter()
        .filter_map(|o| {
            if let JOut::SumDim(x) = o {
                Some(*x)
            } else {
                None
            }
        })
        .collect();
    // The dimension side per key value.
    let dq = SliceQuery {
        filter: Pred::Const(Truth::True),
        group_by: vec![0],
        aggs: std::iter::once(Agg::CountStar)
            .chain(dim_sums.iter().map(|&x| Agg::Sum(x)))
            .collect(),
    };
    let dres = match dim.plane.slice(&dq) {
        Ok(r) => r,
        Err(e) => return Ok(Outcome::Declined(Decline::Limb(e), None)),
    };
    let mut per_key: AHashMap<&DimValue, &[AggValue]> = AHashMap::with_capacity(dres.groups.len());
    for g in &dres.groups {
        let v = dim.plane.dict(0).value(g.key[0]);
        if *v != DimValue::Null {
            per_key.insert(v, &g.values);
        }
    }
    // The fact side per (key, group).
    let mut group_by = vec![0];
    group_by.extend(&plan.group_by);
    let fq = SliceQuery {
        filter,
        group_by,
        aggs: std::iter::once(Agg::CountStar)
            .chain(fact_sums.iter().map(|&m| Agg::Sum(m)))
            .collect(),
    };
    let fres = match fact.plane.slice(&fq) {
        Ok(r) => r,
        Err(e) => return Ok(Outcome::Declined(Decline::Limb(e), None)),
    };
    let overflow = || Ok(Outcome::Declined("join totals past i128".into(), None));
    // Output groups: group codes → (joined rows, fact sums, dimension sums).
    let mut groups: AHashMap<Vec<u32>, (i128, Vec<Sum>, Vec<Sum>)> = AHashMap::new();
    for g in &fres.groups {
        let key = fact.plane.dict(0).value(g.key[0]);
        let Some(dv) = per_key.get(key) else { continue };
        let (c, n) = (count(&g.values[0]) as i128, count(&dv[0]) as i128);
        let slot = groups.entry(g.key[1..].to_vec()).or_insert_with(|| {
            (
                0,
                vec![Sum::default(); fact_sums.len()],
                vec![Sum::default(); dim_sums.len()],
            )
        });
        let Some(rows) = c.checked_mul(n).and_then(|r| slot.0.checked_add(r)) else {
            return overflow();
        };
        slot.0 = rows;
        for (i, s) in slot.1.iter_mut().enumerate() {
            let (nn, pos, neg) = sum_parts(&g.values[1 + i]);
            if s.add(n, nn, pos, neg).is_none() {
                return overflow();
            }
        }
        for (i, s) in slot.2.iter_mut().enumerate() {
            let (nn, pos, neg) = sum_parts(&dv[1 + i]);
            if s.add(c, nn, pos, neg).is_none() {
                return overflow();
            }
        }
    }
    if plan.group_by.is_empty() && groups.is_empty() {
        groups.insert(
            Vec::new(),
            (
                0,
                vec![Sum::default(); fact_sums.len()],
                vec![Sum::default(); dim_sums.len()],
            ),
        );
    }
    let mut out: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(groups.len());
    let mut overflowed = false;
    for (codes, (rows, fs, ds)) in groups {
        if !plan.group_by.is_empty() && rows == 0 {
            continue;
        }
        let keys: Vec<Value> = codes
            .iter()
            .zip(&plan.group_by)
            .map(|(&c, &d)| dim_to_value(fact.plane.dict(d).value(c)))
            .collect();
        let (mut fi, mut di) = (0, 0);
        let mut row = Vec::with_capacity(plan.outputs.len());
        for o in &plan.outputs {
            let s = match o {
                JOut::Group(i) => {
                    row.push(keys[*i].clone());
                    continue;
                }
                JOut::CountStar => match i64::try_from(rows) {
                    Ok(r) => {
                        row.push(Value::Integer(r));
                        continue;
                    }
                    Err(_) => return Ok(Outcome::Declined("COUNT(*) past i64".into(), None)),
                },
                JOut::SumFact(_) => {
                    fi += 1;
                    fs[fi - 1]
                }
                JOut::SumDim(_) => {
                    di += 1;
                    ds[di - 1]
                }
            };
            let total = s.pos + s.neg;
            if s.nn == 0 {
                row.push(Value::Null);
            } else if total > i64::MAX as i128 || total < i64::MIN as i128 {
                overflowed = true;
                row.push(Value::Null);
            } else if s.pos > i64::MAX as i128 || s.neg < i64::MIN as i128 {
                return Ok(Outcome::Declined(Decline::SumOverflowPartWay, None));
            } else {
                row.push(Value::Integer(total as i64));
            }
        }
        out.push((row, keys));
    }
    let cut = plan.limit.is_some() || plan.offset.is_some();
    if overflowed {
        if cut {
            // SQLite finalizes only the groups it outputs before LIMIT stops
            // it; which ones those are is its business.
            return Ok(Outcome::Declined(Decline::SumOverflowUnderLimit, None));
        }
        if out.len() > 1 {
            // As for the cells: the groups before the error are SQLite's.
            return Ok(Outcome::Declined(Decline::SumOverflowGrouped, None));
        }
        return Err(integer_overflow());
    }
    // SQLite emits groups in group-key order; an ORDER BY sorts them by its
    // terms (a stable sort: ties keep that order, which the comparison of
    // an ORDER BY's keys alone does not look at).
    out.sort_by(|a, b| {
        a.1.iter()
            .zip(&b.1)
            .map(|(x, y)| sort_cmp(x, y))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    });
    out.sort_by(|a, b| {
        for &(k, desc, nulls_first) in &plan.order_by {
            let (x, y) = (&a.0[k], &b.0[k]);
            let first = if nulls_first {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            let o = match (x, y) {
                (Value::Null, Value::Null) => Ordering::Equal,
                (Value::Null, _) => first,
                (_, Value::Null) => first.reverse(),
                _ if desc => sort_cmp(y, x),
                _ => sort_cmp(x, y),
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });
    let bound = |o: &Option<crate::classify::Operand>| -> std::result::Result<Option<i64>, ()> {
        match o {
            None => Ok(None),
            Some(o) => match crate::rules::answer_from_cells::resolve(o, params) {
                Value::Integer(i) => Ok(Some(i)),
                _ => Err(()),
            },
        }
    };
    let (Ok(limit), Ok(offset)) = (bound(&plan.limit), bound(&plan.offset)) else {
        return Ok(Outcome::Declined(
            "LIMIT/OFFSET that is not an integer".into(),
            None,
        ));
    };
    let offset = usize::try_from(offset.unwrap_or(0).max(0)).unwrap_or(usize::MAX);
    let limit = match limit {
        Some(l)
            if l >= 0 && !crate::mutation::active(crate::mutation::Mutation::JoinLimitIgnored) =>
        {
            usize::try_from(l).unwrap_or(usize::MAX)
        }
        _ => usize::MAX,
    };
    let out: Vec<_> = out.into_iter().skip(offset).take(limit).collect();
    let route = Route {
        kind: RouteKind::Plane,
        reason: crate::route::LIMB_REASON.into(),
        table: Some(plan.fact.clone()),
        plane_cost: Some(fres.cells_visited as f64 + dres.cells_visited as f64),
        engine_cost: Some(fact.plane.rows() as f64),
    };
    Ok(Outcome::Served(
        Rows {
            columns: plan.columns.clone().into(),
            rows: out.into_iter().map(|(r, _)| r).collect(),
        },
        route,
    ))
}
