//! Build a plane from Arrow columns, in parallel.

use arrow_array::ArrayRef;

use crate::{Plane, PlaneConfig, PlaneError};

impl Plane {
    /// Build from one Arrow array per dimension (Int64, Utf8 or LargeUtf8,
    /// nulls allowed) and per measure (Int64, nulls allowed), all of the same
    /// length: partial planes per chunk with rayon, then merged.
    pub fn build_from_arrow(config: PlaneConfig, dims: &[ArrayRef], measures: &[ArrayRef]) -> Result<Plane, PlaneError> { todo!() }
}
