//! Errors of the plane.

use thiserror::Error;

/// Why the plane could not do what was asked. A plane that hits a fault
/// while applying a delta goes out of service (see [`crate::Plane::fault`]);
/// it never answers wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PlaneError {
    #[error("dimension {dim} has more than {cap} distinct values")]
    CapExceeded { dim: String, cap: usize },
    #[error("wrong arity: expected {expected} {what}, got {got}")]
    Arity {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("a delete of a row the plane does not hold (cell count would go negative)")]
    NegativeCount,
    #[error("plane is out of service: {0}")]
    OutOfService(String),
    #[error("planes have different definitions and cannot be merged")]
    Incompatible,
    #[error("measure {0} holds non-INTEGER values")]
    NonIntegerMeasure(String),
    #[error("unsupported column type for {column}: {found}")]
    ColumnType { column: String, found: String },
    #[error("MIN/MAX unknown in {} cell(s) after a delete of an extremum", .cells.len())]
    UnknownExtremum {
        cells: Vec<(crate::JointKey, usize)>,
    },
    #[error("the joint key would need {bits} bits; at most 64 fit")]
    JointTooWide { bits: u32 },
    #[error("no {what} {index}: the plane has {count}")]
    BadIndex {
        what: &'static str,
        index: usize,
        count: usize,
    },
    #[error("invariant violated: {0}")]
    Invariant(String),
}
