//! Why a SELECT goes to SQLite: the reasons as a type.
//!
//! Like `catalog::Rebuild`, a reason is a variant, and its `Display` is the
//! text users see (in `pleroma_explain`, the route's reason, the counters
//! and `Error::NotServed`); that text is a contract and stays as it was when
//! the reasons were strings. Code that acts on a reason (the classifier's
//! fallback, the cache, the parity oracle) matches the variant, never the
//! text. Reasons nothing acts on are `Other`, worded by the rule that
//! declines.

use std::fmt;

use pleroma_plane::PlaneError;

/// Why the cells do not answer a statement.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decline {
    /// No block of the statement reads the planed table alone: the residue
    /// has no core (the classifier's own reason is the one given).
    NoCore,
    /// A plane has no column map (a column of its table is gone): the
    /// classification is not cached, so it is made again once the plane is
    /// back.
    NoColumnMap,
    /// A SUM past i64 in a group that HAVING rejects on group columns
    /// alone: SQLite may never finalize it.
    SumOverflowHaving,
    /// A SUM past i64 under LIMIT: SQLite finalizes only the groups it
    /// outputs.
    SumOverflowUnderLimit,
    /// A SUM past i64 in one group of several: SQLite outputs the groups it
    /// finalized before that one, then the error.
    SumOverflowGrouped,
    /// A SUM whose partial sums may leave i64 part-way, depending on the
    /// order SQLite adds the rows in.
    SumOverflowPartWay,
    /// TOTAL or AVG past i64, whose rounding depends on SQLite's row order.
    PastI64OrderDependent { agg: &'static str },
    /// The plane could not answer (a fault, MIN/MAX unknown in more cells
    /// than are recomputed).
    Plane(PlaneError),
    /// A limb could not answer.
    Limb(PlaneError),
    /// A text value in a numeric dimension, which the residue's CAST to the
    /// column's affinity would change.
    TextInNumericDimension { dim: String },
    /// `abs()` of a dimension per row while a row holds -2^63 there (SQLite
    /// raises there, or not, by its plan).
    AbsOfMinInteger { dim: String },
    /// Rows on either side of the residue's LIMIT cut tie on its keys: which
    /// ones the cut keeps is SQLite's choice.
    TieAtLimitCut,
    /// The residue's rewritten statement failed as it ran (SQLite's error,
    /// and whether it is SQLite's "integer overflow"); SQLite then runs the
    /// user's own.
    ResidueFailed {
        error: String,
        integer_overflow: bool,
    },
    /// Any other reason, as the rule words it.
    Other(String),
}

impl Decline {
    /// The residue's statement failed with `e` (`integer_overflow`:
    /// `Error::is_integer_overflow`).
    pub(crate) fn residue_failed(e: &impl std::fmt::Display, integer_overflow: bool) -> Decline {
        Decline::ResidueFailed {
            error: e.to_string(),
            integer_overflow,
        }
    }
}

impl fmt::Display for Decline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decline::NoCore => f.write_str("no block reads the planed table alone"),
            Decline::NoColumnMap => {
                f.write_str("a plane is out of service (a column of its table is gone)")
            }
            Decline::SumOverflowHaving => {
                f.write_str("SUM overflow in a group HAVING rejects on group columns")
            }
            Decline::SumOverflowUnderLimit => f.write_str("SUM overflow under LIMIT"),
            Decline::SumOverflowGrouped => {
                f.write_str("SUM overflow in a group: SQLite outputs the groups before it")
            }
            Decline::SumOverflowPartWay => {
                f.write_str("SUM may overflow part-way, depending on row order")
            }
            Decline::PastI64OrderDependent { agg } => {
                write!(f, "{agg} past i64 is order-dependent in SQLite")
            }
            Decline::Plane(e) => write!(f, "plane: {e}"),
            Decline::Limb(e) => write!(f, "limb: {e}"),
            Decline::TextInNumericDimension { dim } => {
                write!(f, "a text value in numeric dimension {dim}")
            }
            Decline::AbsOfMinInteger { dim } => write!(f, "abs() of -2^63 in dimension {dim}"),
            Decline::TieAtLimitCut => f.write_str("a tie at the LIMIT cut"),
            Decline::ResidueFailed { error, .. } => write!(f, "the residue failed: {error}"),
            Decline::Other(r) => f.write_str(r),
        }
    }
}

impl From<String> for Decline {
    fn from(r: String) -> Decline {
        Decline::Other(r)
    }
}

impl From<&str> for Decline {
    fn from(r: &str) -> Decline {
        Decline::Other(r.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts users saw when the reasons were strings: unchanged.
    #[test]
    fn display_is_the_text_users_see() {
        let cases: &[(Decline, &str)] = &[
            (Decline::NoCore, "no block reads the planed table alone"),
            (
                Decline::NoColumnMap,
                "a plane is out of service (a column of its table is gone)",
            ),
            (
                Decline::SumOverflowHaving,
                "SUM overflow in a group HAVING rejects on group columns",
            ),
            (Decline::SumOverflowUnderLimit, "SUM overflow under LIMIT"),
            (
                Decline::SumOverflowGrouped,
                "SUM overflow in a group: SQLite outputs the groups before it",
            ),
            (
                Decline::SumOverflowPartWay,
                "SUM may overflow part-way, depending on row order",
            ),
            (
                Decline::PastI64OrderDependent { agg: "TOTAL" },
                "TOTAL past i64 is order-dependent in SQLite",
            ),
            (
                Decline::Plane(PlaneError::UnknownExtremum { cells: vec![] }),
                "plane: MIN/MAX unknown in 0 cell(s) after a delete of an extremum",
            ),
            (
                Decline::Limb(PlaneError::NegativeCount),
                "limb: a delete of a row the plane does not hold (cell count would go negative)",
            ),
            (
                Decline::TextInNumericDimension { dim: "d".into() },
                "a text value in numeric dimension d",
            ),
            (
                Decline::AbsOfMinInteger { dim: "d".into() },
                "abs() of -2^63 in dimension d",
            ),
            (Decline::TieAtLimitCut, "a tie at the LIMIT cut"),
            (
                Decline::from("pleroma_route = engine"),
                "pleroma_route = engine",
            ),
        ];
        for (d, text) in cases {
            assert_eq!(d.to_string(), *text);
        }
    }

    #[test]
    fn a_residue_failure_knows_sqlite_s_integer_overflow() {
        let overflow = crate::rules::answer_from_cells::integer_overflow();
        let d = Decline::residue_failed(&overflow, overflow.is_integer_overflow());
        assert_eq!(d.to_string(), "the residue failed: integer overflow");
        assert!(matches!(
            d,
            Decline::ResidueFailed {
                integer_overflow: true,
                ..
            }
        ));
        let other = crate::Error::Pragma("no such table".into());
        assert!(matches!(
            Decline::residue_failed(&other, other.is_integer_overflow()),
            Decline::ResidueFailed {
                integer_overflow: false,
                ..
            }
        ));
    }
}
