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
//!
//! The rooms: `allow` (the lists of functions, aggregates, windows and
//! expression forms), `span` (byte positions and the source text of an
//! expression), `walk` (the `Walker` over the query tree), `core` (the
//! core block, its CTE and the merges that replace its aggregates), `cut`
//! (the LIMIT cut and the order-of-rows checks); this file holds `plan` and
//! the types the router reads.

mod allow;
/// A pre-order walk over an expression (also for expression dimensions).
pub(crate) use allow::visit as visit_expr;
mod core;
mod cut;
mod span;
mod walk;
mod walker;

use crate::mutation::Mutation;
use sqlparser::ast::Query;

use crate::affinity::Affinity;
use crate::decline::Decline;
use crate::planes::Planes;
use span::{names_pleroma_or_collate, quoted_names_are_words};
use walker::Walker;

type R<T> = Result<T, String>;

/// The name of the bound core; a statement that spells it is declined.
pub(crate) const CORE: &str = "pleroma$core";

/// What a statement needs from the cells, and its text around them.
#[derive(Debug)]
pub(crate) struct ResiduePlan {
    pub table: String,
    /// Which of its planes answers the core (`None`: the table's own).
    pub plane: Option<String>,
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
    /// Tables the core is joined to (lookup joins): a core row's partial
    /// sum may be added once per row of each, so the sums' bound is
    /// multiplied by their row counts.
    pub joined: Vec<String>,
    /// The statement up to the core's JSON, and after it.
    pub head: String,
    pub tail: String,
    pub columns: Vec<String>,
    pub param_count: usize,
    pub cut: Option<Cut>,
    /// For `pleroma_explain`: what the cells answer, what SQLite evaluates.
    pub split: String,
}

/// An ordinary table's columns, by schema (if given) and name; `None` for
/// a view, a virtual table or no table.
pub(crate) type Lookup<'a> = dyn Fn(Option<&str>, &str) -> Option<Vec<OtherColumn>> + 'a;

/// A column of a table a lookup join joins to the core.
#[derive(Debug, Clone)]
pub(crate) struct OtherColumn {
    pub name: String,
    pub aff: Affinity,
    pub coll: String,
}

/// One sum's accumulator: the measures it may add per row, and whether it
/// may add the constant 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SumTerm {
    pub measures: Vec<usize>,
    pub ones: bool,
}

/// The residue plan of `sql`, or why it has none (`Decline::NoCore`: no
/// block of it reads the planed table alone).
pub(crate) fn plan(
    shared: &Planes,
    sql: &str,
    q: &Query,
    columns: Vec<String>,
    param_count: usize,
    lookup: &Lookup<'_>,
) -> Result<ResiduePlan, Decline> {
    if names_pleroma_or_collate(sql) || !quoted_names_are_words(sql) {
        // A quoted name that is not a plain word may spell the name SQLite
        // gives an aggregate column, which the rewrite changes.
        return Err(Decline::NoCore);
    }
    let mut w = Walker::new(shared, sql, lookup);
    if let Err(r) = w.query(q, false) {
        // Without a block over the planed table, the classifier's own
        // reason is the one to give.
        return Err(if w.table.is_some() {
            r.into()
        } else {
            Decline::NoCore
        });
    }
    let Some(t) = w.table else {
        return Err(Decline::NoCore);
    };
    if w.raises && w.limited && !crate::mutation::active(Mutation::ResidueRaisingWhere) {
        // Under LIMIT SQLite may stop before it evaluates some group (an
        // index gives the order), where the core's sort evaluates them all.
        return Err("a function that can raise an error, under LIMIT".into());
    }
    let entry = shared.entry(t);
    let dims: Vec<usize> = w.dims.iter().copied().collect();
    let dim_aff: Vec<Affinity> = dims.iter().map(|&d| entry.cols.dim_aff[d]).collect();
    for (&d, a) in dims.iter().zip(&dim_aff) {
        if *a == Affinity::Real {
            return Err(format!("REAL dimension {}", entry.def.dims[d]).into());
        }
    }
    let measures: Vec<usize> = w.measures.iter().copied().collect();
    let cte_head = core::cte_head(&entry.def.dims, &dims, &dim_aff, &measures);
    // Insert the CTE: first in the user's WITH, or a WITH of its own.
    let (at, joiner) = match &q.with {
        Some(with) => {
            let first = with.cte_tables.first().ok_or("an empty WITH")?;
            (
                w.offset(first.alias.name.span.start)?,
                "') AS \"pleroma$j\"), ",
            )
        }
        None => (0, "') AS \"pleroma$j\") "),
    };
    let rewritten = core::rewrite(sql, &mut w.edits)?;
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
        plane: entry.def.name.clone(),
        dims,
        dim_aff,
        measures,
        sums: w.sums,
        extrema: w.extrema.into_iter().collect(),
        abs_dims: w.abs_dims.into_iter().collect(),
        joined: w.joined,
        head,
        tail,
        columns,
        param_count,
        cut: w.cut,
        split,
    })
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
    pub limit: Bound,
    pub offset: Bound,
}

/// A LIMIT or OFFSET value: a literal, or a parameter (its number in
/// SQLite's numbering, from 1) whose bound value the answer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    Lit(i64),
    Param(usize),
}

impl Bound {
    /// The value, as SQLite takes it, when that is sure: a literal, or a
    /// parameter bound to an INTEGER. Anything else (NULL, TEXT, REAL, a
    /// BLOB: SQLite converts or fails) is `None`, and the answer declines.
    pub(crate) fn value(self, params: &[rusqlite::types::Value]) -> Option<i64> {
        match self {
            Bound::Lit(v) => Some(v),
            Bound::Param(i) => match params.get(i.checked_sub(1)?)? {
                rusqlite::types::Value::Integer(v) => Some(*v),
                _ => None,
            },
        }
    }
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bound::Lit(v) => write!(f, "{v}"),
            Bound::Param(i) => write!(f, "?{i}"),
        }
    }
}

#[cfg(test)]
mod tests;
