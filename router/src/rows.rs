//! A result set, as every route returns it.

use rusqlite::types::Value;

/// A result set: column names as SQLite names them, and rows of SQLite values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}
