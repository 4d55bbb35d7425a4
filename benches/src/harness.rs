//! The arms, the timing method, the answer check and the reports.

use std::path::PathBuf;

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
