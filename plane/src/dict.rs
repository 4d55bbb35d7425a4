//! Per-dimension dictionaries: value → code.

use crate::{Code, DimValue};

/// Value ↔ code for one dimension. Codes are dense, in order of first
/// appearance, and never reused while the plane lives.
#[derive(Clone, Debug, Default)]
pub struct Dictionary {}

impl Dictionary {
    pub fn len(&self) -> usize { todo!() }
    pub fn is_empty(&self) -> bool { todo!() }
    pub fn value(&self, code: Code) -> &DimValue { todo!() }
    pub fn code(&self, value: &DimValue) -> Option<Code> { todo!() }
    /// All values, indexed by code.
    pub fn values(&self) -> &[DimValue] { todo!() }
}
