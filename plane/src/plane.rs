//! The plane: dictionaries, layout and cells behind one type.

use std::sync::Arc;

use crate::slice::UnknownCells;
use crate::{Code, DimValue, Dictionary, JointKey, MeasureValue, PlaneError, SliceQuery, SliceResult};

/// The definition of a plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlaneConfig {
    /// Dimension names (for messages only; the plane addresses them by index).
    pub dims: Vec<String>,
    /// Measure names.
    pub measures: Vec<String>,
    /// Most distinct values per dimension (default 1,024).
    pub cap: usize,
}

impl PlaneConfig {
    pub fn new(dims: Vec<String>, measures: Vec<String>) -> Self {
        PlaneConfig { dims, measures, cap: 1024 }
    }
}

/// The working copy of a plane. Cloning is cheap (shared pages); a write
/// after a clone copies only the pages it touches.
#[derive(Clone, Debug)]
pub struct Plane {
    // Implementation: see docs/design.md. Fields are private.
    pub(crate) inner: Arc<()>,
}

/// An immutable view of a plane at one moment: `Send + Sync`, cheap to take
/// and to hold; any number of readers may slice it while the writer goes on.
#[derive(Clone, Debug)]
pub struct Snapshot(pub(crate) Plane);

impl Plane {
    /// An empty plane.
    pub fn new(config: PlaneConfig) -> Plane { todo!() }

    pub fn config(&self) -> &PlaneConfig { todo!() }

    /// The dictionary of dimension `dim`.
    pub fn dict(&self, dim: usize) -> &Dictionary { todo!() }

    /// Bits of dimension `dim` in the joint key.
    pub fn dim_bits(&self, dim: usize) -> u32 { todo!() }

    /// Total bits of the joint key.
    pub fn joint_bits(&self) -> u32 { todo!() }

    /// Rows held (sum of cell counts).
    pub fn rows(&self) -> i64 { todo!() }

    /// Non-empty cells.
    pub fn cells(&self) -> usize { todo!() }

    /// Exact heap bytes of the cells, dictionaries and layout.
    pub fn bytes(&self) -> usize { todo!() }

    /// Why the plane is out of service, if it is. A fault is part of the
    /// state: restoring a snapshot taken before the fault clears it.
    pub fn fault(&self) -> Option<&str> { todo!() }

    /// Put the plane out of service with a reason (e.g. the caller met a
    /// value it cannot encode). Further deltas are ignored until a restore.
    pub fn set_fault(&mut self, reason: String) { todo!() }

    /// Count of non-INTEGER (REAL/TEXT/BLOB) values held in measure `m`.
    pub fn foreign(&self, m: usize) -> i64 { todo!() }

    /// Encode dimension values to a joint key, adding dictionary codes (and
    /// re-packing the cells) as needed. On cap overflow the plane faults.
    pub fn encode(&mut self, dims: &[DimValue]) -> Result<JointKey, PlaneError> { todo!() }

    /// [`Plane::encode`] from borrowed values; allocates only for a value the
    /// dictionary has not seen (keep a per-dimension last-value fast path).
    pub fn encode_ref(&mut self, dims: &[crate::DimRef<'_>]) -> Result<JointKey, PlaneError> { todo!() }

    /// The code of a value of dimension `dim`, if it has one (no insertion).
    pub fn code_of(&self, dim: usize, value: &DimValue) -> Option<Code> { todo!() }

    /// Apply one weighted row to a cell: `weight` +1 inserts, −1 deletes.
    /// `key` must come from [`Plane::encode`] since the last re-pack.
    pub fn apply_encoded(&mut self, key: JointKey, weight: i64, measures: &[MeasureValue]) -> Result<(), PlaneError> { todo!() }

    /// Insert one row.
    pub fn insert(&mut self, dims: &[DimValue], measures: &[MeasureValue]) -> Result<(), PlaneError> { todo!() }

    /// Delete one row (that was inserted before).
    pub fn delete(&mut self, dims: &[DimValue], measures: &[MeasureValue]) -> Result<(), PlaneError> { todo!() }

    /// An update: delete the old row, insert the new one.
    pub fn update(&mut self, old_dims: &[DimValue], old_measures: &[MeasureValue], new_dims: &[DimValue], new_measures: &[MeasureValue]) -> Result<(), PlaneError> { todo!() }

    /// Cells whose MIN/MAX is unknown among those `q` would visit for the
    /// aggregates it asks (empty when the slice can be answered).
    pub fn unknown_extrema(&self, q: &SliceQuery) -> UnknownCells { todo!() }

    /// Set the exact MIN and MAX of measure `m` in cell `key` (recomputed by
    /// the caller from the base table).
    pub fn set_extrema(&mut self, key: JointKey, m: usize, min: Option<i64>, max: Option<i64>) { todo!() }

    /// Decode a joint key to one code per dimension.
    pub fn decode(&self, key: JointKey) -> Vec<Code> { todo!() }

    /// Evaluate a slice. Errors: out of service, a measure with foreign
    /// values, or MIN/MAX unknown in a visited cell.
    pub fn slice(&self, q: &SliceQuery) -> Result<SliceResult, PlaneError> { todo!() }

    /// Add another plane over the same definition, cell by cell.
    pub fn merge(&mut self, other: &Plane) -> Result<(), PlaneError> { todo!() }

    /// An immutable view of the current state.
    pub fn snapshot(&self) -> Snapshot { todo!() }

    /// Rewind the working copy to a snapshot.
    pub fn restore(&mut self, snap: &Snapshot) { todo!() }

    /// Check every invariant; `Err` names the first one broken.
    pub fn validate(&self) -> Result<(), PlaneError> { todo!() }
}

impl Snapshot {
    /// Read access to the snapshot's state (slices, dictionaries, counts).
    pub fn plane(&self) -> &Plane { &self.0 }
}
