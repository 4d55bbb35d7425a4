//! What the classifier hands the rules: the plans of the statements the
//! cells answer, in terms of plane dimensions, measures and parameters.
//!
//! Exact because a plan holds nothing the rules must guess: each operand is
//! a literal or a numbered parameter, each aggregate one the cells keep
//! exactly, each output a group term or an aggregate.

use std::fmt;

use pleroma_plane::Agg;
use rusqlite::types::Value;

use crate::affinity::Affinity;

/// An output of a served join.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JOut {
    /// The value of `group_by[i]`.
    Group(usize),
    CountStar,
    /// SUM of a fact measure.
    SumFact(usize),
    /// SUM of a dimension-table INTEGER column (index in the limb's
    /// dimension side).
    SumDim(usize),
}

/// `SELECT ... FROM fact JOIN dim ON fact.k = dim.k [WHERE] [GROUP BY]`
/// answered from a limb.
#[derive(Debug)]
pub(crate) struct JoinPlan {
    pub fact: String,
    pub fact_key: String,
    /// Over the limb's fact side (dimension 0 is the key).
    pub filter: Option<PExpr>,
    pub group_by: Vec<usize>,
    pub outputs: Vec<JOut>,
    /// ORDER BY: (output index, DESC, NULLS FIRST), over outputs only.
    pub order_by: Vec<(usize, bool, bool)>,
    /// LIMIT and OFFSET, only under an ORDER BY over every group column.
    pub limit: Option<Operand>,
    pub offset: Option<Operand>,
    pub columns: Vec<String>,
    pub param_count: usize,
}

/// The query class, as the benchmarks name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// Whole-table totals.
    T,
    /// Scalar aggregates under a filter.
    W,
    /// GROUP BY.
    G,
    /// HAVING.
    H,
    /// COUNT(DISTINCT dim), MIN/MAX under a filter.
    D,
}

impl Class {
    /// The route's reason for an answer of this class.
    pub(crate) fn served(self) -> &'static str {
        match self {
            Class::T => "served (class T)",
            Class::W => "served (class W)",
            Class::G => "served (class G)",
            Class::H => "served (class H)",
            Class::D => "served (class D)",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// A literal or a bound parameter (0-based index).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Operand {
    Lit(Value),
    Param(usize),
}

/// A one-dimension predicate or a boolean combination of them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PExpr {
    And(Vec<PExpr>),
    Or(Vec<PExpr>),
    Not(Box<PExpr>),
    Cmp {
        dim: usize,
        op: CmpOp,
        rhs: Operand,
    },
    In {
        dim: usize,
        list: Vec<Operand>,
        negated: bool,
    },
    IsNull {
        dim: usize,
        negated: bool,
    },
    /// `IS` / `IS NOT` against a value (NULL-safe equality).
    Is {
        dim: usize,
        rhs: Operand,
        negated: bool,
    },
    /// `col >= lo AND col < hi` on the raw column of a time-bucket
    /// expression dimension (a top-level conjunct of WHERE only): the
    /// buckets from `lo`'s to `hi - 1`'s, when both bounds are bucket edges
    /// (checked at answer time, with the bound values).
    Bucket {
        dim: usize,
        column: String,
        lo: Operand,
        hi: Operand,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub(super) fn flip(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            o => o,
        }
    }
}

/// An aggregate as SQL spells it; each maps onto one plane aggregate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AggFn {
    CountStar,
    Count(usize),
    Sum(usize),
    Total(usize),
    Avg(usize),
    Min(usize),
    Max(usize),
    CountDistinct(usize),
    /// `PleromaSumExact(m)`: the exact sum as TEXT.
    SumExact(usize),
}

impl AggFn {
    pub fn plane_agg(self) -> Agg {
        match self {
            AggFn::CountStar => Agg::CountStar,
            AggFn::Count(m) => Agg::Count(m),
            AggFn::Sum(m) | AggFn::Total(m) | AggFn::Avg(m) | AggFn::SumExact(m) => Agg::Sum(m),
            AggFn::Min(m) => Agg::Min(m),
            AggFn::Max(m) => Agg::Max(m),
            AggFn::CountDistinct(d) => Agg::CountDistinct(d),
        }
    }
}

/// A value computed per output group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutExpr {
    /// The value of `group_by[i]`.
    Group(usize),
    /// An aggregate (index into `Plan::aggs`).
    Agg(usize),
}

/// A HAVING predicate over output values.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum HExpr {
    And(Vec<HExpr>),
    Or(Vec<HExpr>),
    Not(Box<HExpr>),
    Cmp {
        lhs: HOperand,
        op: CmpOp,
        rhs: HOperand,
    },
    IsNull {
        e: OutExpr,
        negated: bool,
    },
}

/// A HAVING operand: an output value or a literal. A literal compared with
/// a group column takes the column's affinity (`aff`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum HOperand {
    Out(OutExpr),
    Lit(Operand, Option<Affinity>),
}

#[derive(Clone, Debug)]
pub(crate) struct OrderTerm {
    pub e: OutExpr,
    pub desc: bool,
    pub nulls_first: bool,
}

/// A statement the cells can answer.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The planed table (its own spelling).
    pub table: String,
    /// Which of its planes (`None`: the table's own).
    pub plane: Option<String>,
    pub class: Class,
    pub filter: Option<PExpr>,
    /// Dimension indexes.
    pub group_by: Vec<usize>,
    pub aggs: Vec<AggFn>,
    pub outputs: Vec<OutExpr>,
    pub having: Option<HExpr>,
    pub order_by: Vec<OrderTerm>,
    pub limit: Option<Operand>,
    pub offset: Option<Operand>,
    /// Result column names, as SQLite names them (from its own prepare).
    pub columns: Vec<String>,
    pub param_count: usize,
}

#[cfg(test)]
mod tests {
    use super::Class;

    #[test]
    fn a_served_reason_names_its_class() {
        for c in [Class::T, Class::W, Class::G, Class::H, Class::D] {
            assert_eq!(c.served(), format!("served (class {c})"));
        }
    }
}
