//! Values as the plane sees them.

use std::cmp::Ordering;
use std::sync::Arc;

/// A dimension value. NULL is a value with its own code; `Int(1)` and
/// `Text("1")` are different values, as in SQLite. REAL and BLOB values are
/// not dimension values: the caller reports them as a fault.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DimValue {
    Null,
    Int(i64),
    Text(Arc<str>),
}

impl DimValue {
    /// SQLite's order under the BINARY collation: NULL < INTEGER < TEXT,
    /// integers numerically, text by bytes (memcmp).
    pub fn sqlite_cmp(&self, other: &Self) -> Ordering {
        use DimValue::*;
        match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Null, _) => Ordering::Less,
            (_, Null) => Ordering::Greater,
            (Int(a), Int(b)) => a.cmp(b),
            (Int(_), Text(_)) => Ordering::Less,
            (Text(_), Int(_)) => Ordering::Greater,
            (Text(a), Text(b)) => a.as_bytes().cmp(b.as_bytes()),
        }
    }
}

/// A measure value. `Other` is a REAL, TEXT or BLOB value in a measure
/// column: the plane counts them per measure, and aggregates over a measure
/// with any such value are refused (the router then declines).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeasureValue {
    Null,
    Int(i64),
    Other,
}

/// A borrowed dimension value, for encoding without allocating (the change
/// hook's hot path): the dictionary allocates only for a value it has not
/// seen before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DimRef<'a> {
    Null,
    Int(i64),
    Text(&'a str),
}

impl DimValue {
    pub fn as_ref(&self) -> DimRef<'_> {
        match self {
            DimValue::Null => DimRef::Null,
            DimValue::Int(i) => DimRef::Int(*i),
            DimValue::Text(s) => DimRef::Text(s),
        }
    }
}

impl DimRef<'_> {
    /// The owned form (allocates for text).
    pub fn to_value(self) -> DimValue {
        match self {
            DimRef::Null => DimValue::Null,
            DimRef::Int(i) => DimValue::Int(i),
            DimRef::Text(s) => DimValue::Text(Arc::from(s)),
        }
    }
}

impl From<&str> for DimValue {
    fn from(s: &str) -> Self {
        DimValue::Text(Arc::from(s))
    }
}

impl From<i64> for DimValue {
    fn from(i: i64) -> Self {
        DimValue::Int(i)
    }
}
