//! Rule: answer a statement with a residue (`crate::residue`): the cells
//! give the core's rows, SQLite evaluates the rewritten statement over them.
//!
//! The core's values are bound exactly: dimension values as the plane holds
//! them (INTEGER or TEXT, each under a CAST to its column's affinity, which
//! is the identity on the values such a column holds), partial counts and
//! sums as integers. A sum is bound only when no order of adding the rows of
//! any group could leave i64, as in `answer_from_cells`; otherwise SQLite
//! answers, and raises its own error if it overflows.

use crate::mutation::Mutation;
use std::fmt::Write;

use pleroma_plane::{Agg, AggValue, DimValue, PlaneError, Pred, SliceQuery, Truth};
use rusqlite::types::Value;

use crate::affinity::{sort_cmp, Affinity};
use crate::decline::Decline;
use crate::planes::Planes;
use crate::residue::ResiduePlan;
use crate::route::{Route, RouteKind, RouteMode};
use crate::rows::Rows;
use crate::rules::answer_from_cells::{recompute_extrema, Outcome, MAX_RECOMPUTE};
use crate::Result;

/// The core's rows as JSON and the route, or why not (with the route when
/// the plane was reached).
type Core = std::result::Result<(String, Route), (Decline, Option<Route>)>;

/// The core's rows as JSON, or why not.
pub(crate) fn core_json(
    db: &rusqlite::Connection,
    shared: &mut Planes,
    mode: RouteMode,
    plan: &ResiduePlan,
) -> Result<Core> {
    let Some(i) = shared.find_plan(&plan.table, plan.plane.as_deref()) else {
        return Ok(Err((
            format!("no plane on table {}", plan.table).into(),
            None,
        )));
    };
    let entry = shared.entry_mut(i);
    if let Some(reason) = entry.out_of_service() {
        let r = format!("plane on {} is out of service: {reason}", plan.table);
        return Ok(Err((r.into(), None)));
    }
    let est = entry.plane.cells() as f64;
    let rows = entry.plane.rows() as f64;
    let route = Route {
        kind: RouteKind::Residue,
        reason: format!("served with a residue ({})", plan.split),
        table: Some(plan.table.clone()),
        plane_cost: Some(est),
        engine_cost: Some(rows),
    };
    if mode == RouteMode::Auto && est > rows.max(1.0) {
        let r = format!("cost: the plane would visit {est} cells for {rows} rows");
        return Ok(Err((r.into(), Some(route))));
    }
    let mut aggs = vec![Agg::CountStar];
    for &m in &plan.measures {
        aggs.push(Agg::Sum(m));
        if plan.extrema.contains(&m) {
            aggs.push(Agg::Min(m));
            aggs.push(Agg::Max(m));
        }
    }
    let q = SliceQuery {
        filter: Pred::Const(Truth::True),
        group_by: plan.dims.clone(),
        aggs,
    };
    let result = loop {
        match entry.plane.slice(&q) {
            Ok(r) => break r,
            Err(PlaneError::UnknownExtremum { cells }) if cells.len() <= MAX_RECOMPUTE => {
                recompute_extrema(db, entry, &cells)?;
            }
            Err(e) => return Ok(Err((Decline::Plane(e), Some(route)))),
        }
    };
    // Every partial sum of one accumulator, in any grouping and any order,
    // lies in [the sum of the negatives of every measure it may add, the
    // sum of their positives (+ one per row where it adds 1s)]: a CASE that
    // picks one measure or another per row adds both into one sum.
    let bounds = |m: usize| {
        let k = 1 + plan.measures.iter().position(|x| *x == m).map_or(0, |p| {
            plan.measures[..p]
                .iter()
                .map(|x| if plan.extrema.contains(x) { 3 } else { 1 })
                .sum::<usize>()
        });
        let (mut pos, mut neg) = (0i128, 0i128);
        for g in &result.groups {
            if let AggValue::Sum { pos: p, neg: n, .. } = g.values[k] {
                pos += p;
                neg += n;
            }
        }
        (pos, neg)
    };
    // A lookup join adds a core row's partials once per row it meets in
    // each joined table: at most that table's row count.
    let mut times: i128 = 1;
    for t in &plan.joined {
        let n: i64 = db.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))?;
        times = times.saturating_mul(n.max(1) as i128);
    }
    let ones = (entry.plane.rows() as i128).saturating_mul(times);
    let fits = |pos: i128, neg: i128| {
        pos.saturating_mul(times) <= i64::MAX as i128
            && neg.saturating_mul(times) >= i64::MIN as i128
    };
    for s in &plan.sums {
        let one = if s.ones { ones } else { 0 };
        let ok = if crate::mutation::active(Mutation::ResidueSumPerMeasure) {
            // The mutation: each measure bounded alone.
            s.measures.iter().all(|&m| {
                let (p, n) = bounds(m);
                fits(p + one, n)
            })
        } else {
            let (mut pos, mut neg) = (one, 0i128);
            for &m in &s.measures {
                let (p, n) = bounds(m);
                pos += p;
                neg += n;
            }
            fits(pos, neg)
        };
        if !ok {
            return Ok(Err((Decline::SumOverflowPartWay, Some(route))));
        }
    }
    let plane = &entry.plane;
    let mut json = String::with_capacity(16 + result.groups.len() * 8 * (2 + plan.dims.len()));
    json.push('[');
    // The core's rows are the groups that hold rows: a statement that names
    // no dimension has one whole-table group, empty on an empty table,
    // where SQLite's scan meets no row (its aggregates see none).
    let mut groups: Vec<_> = result
        .groups
        .iter()
        .filter(|g| {
            !matches!(g.values.first(), Some(AggValue::Count(0)))
                || crate::mutation::active(Mutation::ResidueEmptyGroup)
        })
        .collect();
    // `abs()` of a dimension per row raises on -2^63: served only when no
    // row holds it.
    for g in &groups {
        for (&code, &d) in g.key.iter().zip(&plan.dims) {
            if plan.abs_dims.contains(&d)
                && matches!(plane.dict(d).value(code), DimValue::Int(i64::MIN))
                && !crate::mutation::active(Mutation::ResidueRaisingWhere)
            {
                let dim = entry.def.dims[d].clone();
                return Ok(Err((Decline::AbsOfMinInteger { dim }, Some(route))));
            }
        }
    }
    if crate::mutation::active(Mutation::ResidueWrongGroups) && groups.len() > 1 {
        groups.pop();
    }
    for (gi, g) in groups.iter().enumerate() {
        if gi > 0 {
            json.push(',');
        }
        json.push('[');
        for ((&code, &d), aff) in g.key.iter().zip(&plan.dims).zip(&plan.dim_aff) {
            match plane.dict(d).value(code) {
                // The mutation: NULL bound as the column's zero value, so a
                // predicate or function of the dimension sees it wrongly.
                DimValue::Null if crate::mutation::active(Mutation::ResidueNullDim) => {
                    json.push_str(if *aff == Affinity::Text { "\"\"" } else { "0" })
                }
                DimValue::Null => json.push_str("null"),
                DimValue::Int(v) => {
                    if *aff == Affinity::Text {
                        return Ok(Err((
                            format!("an integer in TEXT dimension {}", entry.def.dims[d]).into(),
                            Some(route),
                        )));
                    }
                    let _ = write!(json, "{v}");
                }
                DimValue::Text(s) => {
                    if matches!(aff, Affinity::Integer | Affinity::Numeric | Affinity::Real) {
                        // A CAST to the column's affinity would change it.
                        let dim = entry.def.dims[d].clone();
                        let r = Decline::TextInNumericDimension { dim };
                        return Ok(Err((r, Some(route))));
                    }
                    if s.contains('\0') {
                        return Ok(Err(("a text value with NUL".into(), Some(route))));
                    }
                    json_string(&mut json, s);
                }
            }
            json.push(',');
        }
        let mut vals = g.values.iter();
        match vals.next() {
            Some(AggValue::Count(n)) => {
                let _ = write!(json, "{n}");
            }
            _ => return Ok(Err(("unexpected aggregate".into(), Some(route)))),
        }
        for &m in &plan.measures {
            let Some(AggValue::Sum { nn, pos, neg }) = vals.next().copied() else {
                return Ok(Err(("unexpected aggregate".into(), Some(route))));
            };
            let s = pos + neg;
            if nn == 0 || s > i64::MAX as i128 || s < i64::MIN as i128 {
                // Only a measure that is not summed can get here with nn > 0.
                let _ = write!(json, ",{nn},null");
            } else {
                let _ = write!(json, ",{nn},{s}");
            }
            if plan.extrema.contains(&m) {
                for _ in 0..2 {
                    match vals.next() {
                        Some(AggValue::Min(Some(v)) | AggValue::Max(Some(v))) => {
                            let _ = write!(json, ",{v}");
                        }
                        _ => json.push_str(",null"),
                    }
                }
            } else {
                json.push_str(",null,null");
            }
        }
        json.push(']');
    }
    json.push(']');
    Ok(Ok((json, route)))
}

/// Answer `plan`: the core from the cells, the rest by SQLite.
pub(crate) fn answer(
    db: &rusqlite::Connection,
    shared: &mut Planes,
    mode: RouteMode,
    plan: &ResiduePlan,
    params: &[Value],
) -> Result<Outcome> {
    if params.len() != plan.param_count {
        return Ok(Outcome::Declined(
            "parameter count differs from the statement's".into(),
            None,
        ));
    }
    // A LIMIT or OFFSET parameter's value, as SQLite takes it; one that
    // SQLite would convert or refuse declines, and SQLite runs the text.
    let cut = match &plan.cut {
        None => None,
        Some(c) => match (c.limit.value(params), c.offset.value(params)) {
            // The mutation: a parameter's bound value not read (no cut).
            _ if crate::mutation::active(Mutation::ResidueLimitParamIgnored)
                && [c.limit, c.offset]
                    .iter()
                    .any(|b| matches!(b, crate::residue::Bound::Param(_))) =>
            {
                Some((c, -1, 0))
            }
            (Some(limit), Some(offset)) => Some((c, limit, offset)),
            _ => {
                return Ok(Outcome::Declined(
                    "a LIMIT or OFFSET parameter that is not an INTEGER".into(),
                    None,
                ))
            }
        },
    };
    let (json, route) = match core_json(db, shared, mode, plan)? {
        Ok(x) => x,
        Err((r, route)) => return Ok(Outcome::Declined(r, route)),
    };
    let sql = format!("{}{}{}", plan.head, json.replace('\'', "''"), plan.tail);
    // A text that SQLite does not take as written (a name that no longer
    // resolves) is declined: SQLite runs the original.
    let mut stmt = match db.prepare(&sql) {
        Ok(s) => s,
        Err(e) => {
            return Ok(Outcome::Declined(
                format!("the residue does not prepare: {e}").into(),
                Some(route),
            ))
        }
    };
    if stmt.parameter_count() != plan.param_count || stmt.column_count() != plan.columns.len() {
        return Ok(Outcome::Declined(
            "the residue's parameters or columns differ".into(),
            Some(route),
        ));
    }
    let n = plan.columns.len();
    let mut out = Rows {
        columns: plan.columns.clone().into(),
        rows: Vec::new().into(),
    };
    let mut rows = stmt.query(rusqlite::params_from_iter(params.iter()))?;
    while let Some(row) = rows.next()? {
        let mut r = Vec::with_capacity(n);
        for i in 0..n {
            r.push(row.get::<_, Value>(i)?);
        }
        out.rows.push(r);
    }
    if let Some((cut, limit, offset)) = cut {
        // Served only when the cut does not fall between rows that tie on the
        // ORDER BY keys: then the rows it keeps do not depend on the order
        // SQLite gives ties.
        let tie = |a: &[Value], b: &[Value]| {
            cut.keys
                .iter()
                .all(|&k| sort_cmp(&a[k], &b[k]) == std::cmp::Ordering::Equal)
        };
        let rows = &out.rows;
        let o = usize::try_from(offset.max(0)).unwrap_or(usize::MAX);
        let end = if limit < 0 {
            rows.len()
        } else {
            o.saturating_add(usize::try_from(limit).unwrap_or(usize::MAX))
                .min(rows.len())
        };
        let at_start = o > 0 && o < rows.len() && tie(&rows[o - 1], &rows[o]);
        let at_end = end > o && end < rows.len() && tie(&rows[end - 1], &rows[end]);
        if at_start || at_end {
            return Ok(Outcome::Declined(Decline::TieAtLimitCut, Some(route)));
        }
        out.rows = out
            .rows
            .drain(..)
            .skip(o)
            .take(end.saturating_sub(o))
            .collect();
    }
    Ok(Outcome::Served(out, route))
}

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
