//! The routing rules, one file each. A rule answers only when every part of
//! the statement is exact; otherwise SQLite runs it untouched.

pub(crate) mod answer_from_cells;
pub(crate) mod answer_from_limb;
pub(crate) mod answer_with_residue;
