//! The parity suite: Pleroma's answers against plain SQLite, row for row.
//!
//! A case draws a schema, loads rows, attaches a plane and runs blocks of
//! writes (transactions, savepoints, failing statements, triggers, foreign-key
//! cascades, writes from a second connection and a second process, reopens)
//! with checks between them, all from one seed ([`gen`]). Every check runs on
//! both databases ([`oracle`]): the answers must match, served classes must be
//! served by the plane, and two metamorphic oracles (TLP and NoREC) catch bugs
//! that SQLite and the plane could share. A failure is shrunk to a minimal
//! `.sql` reproduction ([`repro`]). The mutation sweep ([`runner::run_mutations`])
//! switches each deliberate bug on and expects the suite to go red.
//!
//! See `docs/testing.md`.

pub mod gen;
pub mod oracle;
pub mod repro;
pub mod rng;
pub mod runner;
pub mod schema;
pub mod shared;

pub use runner::{run, run_mutations, Config, Report};
