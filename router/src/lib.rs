//! Pleroma: SQLite with planes attached.
//!
//! A [`Connection`] wraps a rusqlite connection (bundled SQLite). Every
//! statement passes through it: Pleroma's own PRAGMAs are answered here,
//! SELECTs that a plane can answer exactly are answered from its cells, and
//! everything else runs on SQLite untouched. The change hook keeps each plane
//! exact through every write, transaction, savepoint and failed statement.
//!
//! ```
//! use pleroma::{Connection, Value};
//! let mut db = Connection::open_in_memory()?;
//! db.execute_batch("CREATE TABLE t(region TEXT, amount INTEGER);
//!                   INSERT INTO t VALUES ('eu', 5), ('us', 7), ('eu', 1);")?;
//! db.execute_batch("PRAGMA pleroma_attach('t', 'region', 'amount')")?;
//! let rows = db.query("SELECT SUM(amount) FROM t WHERE region = ?", &[Value::Text("eu".into())])?;
//! assert_eq!(rows.rows, vec![vec![Value::Integer(6)]]);
//! assert_eq!(db.last_route().kind, pleroma::RouteKind::Plane);
//! # Ok::<(), pleroma::Error>(())
//! ```

mod advise;
mod affinity;
mod catalog;
mod classify;
mod connection;
mod database;
mod decline;
mod error;
mod facts;
mod failed;
mod ffi;
mod hook;
pub mod mutation;
mod persist;
mod planes;
mod pragma;
mod residue;
mod route;
mod rows;
mod rules;
pub mod split;
mod sum_exact;
pub mod tokenize;
mod txn;
mod txn_guards;
mod user_counters;
mod vacuum;

pub use connection::{Appender, Connection};
pub use decline::Decline;
pub use error::Error;
pub use pleroma_plane::PlaneError;
pub use route::{Counters, Route, RouteKind, RouteMode};
pub use rows::{Rows, Shared};
pub use rusqlite;
pub use rusqlite::types::Value;

/// The README, whose Rust example runs as a doctest of this crate.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
