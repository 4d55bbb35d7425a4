//! Slice evaluation: filters, group-bys and aggregates over the cells.

use crate::{Code, JointKey};

/// SQL's three truth values. WHERE keeps a row only when its filter is `True`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Truth {
    False,
    True,
    Null,
}

/// A filter over dimensions, evaluated per cell in three-valued logic.
/// A `Leaf` gives the truth of a one-dimension predicate for every code of
/// that dimension (`truth[code]`; codes at or beyond `truth.len()` count as
/// `False`). The caller (the router) computes it with SQL's semantics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pred {
    Const(Truth),
    Leaf { dim: usize, truth: Vec<Truth> },
    Not(Box<Pred>),
    And(Vec<Pred>),
    Or(Vec<Pred>),
}

/// One aggregate to compute per group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Agg {
    CountStar,
    /// Non-NULL values of measure `m`.
    Count(usize),
    Sum(usize),
    Min(usize),
    Max(usize),
    /// Distinct non-NULL values of a dimension.
    CountDistinct(usize),
}

/// The value of one aggregate in one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggValue {
    Count(i64),
    /// `nn` non-NULL values; `pos` is the exact sum of the positive values,
    /// `neg` of the negative ones; `pos + neg` is the sum. Any order of adding
    /// the values stays inside `[neg, pos]`, so the caller can tell whether an
    /// i64 accumulator (SQLite's) could overflow part-way.
    Sum { nn: i64, pos: i128, neg: i128 },
    /// `None` when the group has no non-NULL value.
    Min(Option<i64>),
    Max(Option<i64>),
}

impl AggValue {
    /// The exact sum of a `Sum`, and whether it leaves the i64 range.
    pub fn exact_sum(&self) -> Option<(i128, bool)> {
        match *self {
            AggValue::Sum { pos, neg, .. } => {
                let s = pos + neg;
                Some((s, s > i64::MAX as i128 || s < i64::MIN as i128))
            }
            _ => None,
        }
    }
}

/// What to compute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceQuery {
    pub filter: Pred,
    /// Dimension indexes to group by, in output order. Empty: one group
    /// over the whole filter (present even when no row matches).
    pub group_by: Vec<usize>,
    pub aggs: Vec<Agg>,
}

/// One output group: its codes (one per `group_by` dimension) and the
/// aggregate values in `aggs` order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub key: Vec<Code>,
    pub values: Vec<AggValue>,
}

/// The result of a slice: non-empty groups (with an empty `group_by`, exactly
/// one group, whose `CountStar` may be 0). Groups are in no particular order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceResult {
    pub groups: Vec<Group>,
    /// Cells visited (for cost reporting).
    pub cells_visited: usize,
}

/// Cells whose MIN/MAX of a measure is unknown (after a delete of the
/// extremum): `(joint key, measure)`.
pub type UnknownCells = Vec<(JointKey, usize)>;
