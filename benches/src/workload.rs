//! What a read benchmark is about: the workload and its queries, the arms,
//! the run options and an arm's answers. The harness, the answer check and
//! the DuckDB arm all read these; they use none of those.

use std::path::PathBuf;

use anyhow::Result;
use rusqlite::types::Value;
use serde::{Deserialize, Serialize};

/// One query of a workload.
#[derive(Clone, Debug)]
pub struct Query {
    pub name: String,
    pub sql: String,
    /// The seed's class (W, G, H, D, X, T, ...), or "" where the workload has none.
    pub class: String,
}

impl Query {
    pub fn new(name: &str, sql: &str, class: &str) -> Query {
        Query {
            name: name.into(),
            sql: sql.into(),
            class: class.into(),
        }
    }
}

/// A read workload: a cached database, the planes to attach, the queries.
#[derive(Clone, Debug)]
pub struct Workload {
    pub name: String,
    pub rows: u64,
    pub path: PathBuf,
    pub plane_pragmas: Vec<String>,
    /// Tables the DuckDB arm loads.
    pub tables: Vec<String>,
    pub queries: Vec<Query>,
}

/// A side of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arm {
    Sqlite,
    Engine,
    Plane,
    Duckdb,
}

impl Arm {
    pub const ALL: [Arm; 4] = [Arm::Sqlite, Arm::Engine, Arm::Plane, Arm::Duckdb];

    pub fn name(self) -> &'static str {
        match self {
            Arm::Sqlite => "sqlite",
            Arm::Engine => "engine",
            Arm::Plane => "plane",
            Arm::Duckdb => "duckdb",
        }
    }

    pub fn parse(s: &str) -> Result<Arm> {
        Arm::ALL
            .into_iter()
            .find(|a| a.name() == s.trim())
            .ok_or_else(|| {
                anyhow::anyhow!("unknown arm {s:?} (expected sqlite, engine, plane or duckdb)")
            })
    }
}

/// Run settings shared by every workload.
#[derive(Clone, Debug)]
pub struct Options {
    pub arms: Vec<Arm>,
    pub seed: u64,
    /// Time budget of one timed loop of one cell, in milliseconds.
    pub budget_ms: f64,
    /// Calls of one loop: as many as fit the budget, within these bounds.
    pub min_calls: usize,
    pub max_calls: usize,
    /// Run only these queries (by name); empty: all.
    pub only: Vec<String>,
}

impl Options {
    pub fn has(&self, arm: Arm) -> bool {
        self.arms.contains(&arm)
    }

    /// The arms asked for that are SQLite files (all but DuckDB): the
    /// workloads that write or open SQLite connections run these.
    pub fn sqlite_arms(&self) -> Vec<Arm> {
        self.arms
            .iter()
            .copied()
            .filter(|a| *a != Arm::Duckdb)
            .collect()
    }
}

/// The answers one arm gave, for the check.
pub struct Answer {
    pub arm: Arm,
    pub rows: Vec<Vec<Value>>,
}
