//! The Pleroma plane: exact aggregate cells over small-domain dimensions.
//!
//! No SQL and no SQLite live here. A [`Plane`] keeps, per combination of
//! dimension values (a bit-packed joint key), the row count and, per measure,
//! the non-NULL count, exact sums, MIN and MAX. Rows arrive as weighted deltas
//! (+1 insert, −1 delete, an update is both). [`Plane::snapshot`] gives an
//! immutable, `Send + Sync` view that readers keep while the writer goes on;
//! [`Plane::restore`] rewinds the working copy to a snapshot.
//!
//! The API is the contract between the plane and the router; see
//! `docs/design.md` for the layout and the invariants.
#![forbid(unsafe_code)]

mod build;
mod cells;
mod dict;
mod error;
mod image;
mod layout;
mod mem;
pub mod mutation;
mod plane;
mod slice;
mod state;
mod value;

pub use dict::Dictionary;
pub use error::PlaneError;
pub use image::Image;
pub use plane::{Plane, Snapshot};
pub use slice::{Agg, AggValue, Group, Pred, SliceQuery, SliceResult, Truth, UnknownCells};
pub use state::PlaneConfig;
pub use value::{DimRef, DimValue, MeasureValue};

/// A code of a dimension value in its dictionary (0-based, dense).
pub type Code = u32;
/// A bit-packed joint key: one field of `bits(d)` bits per dimension.
pub type JointKey = u64;
