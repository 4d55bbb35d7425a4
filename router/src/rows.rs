//! A result set, as every route returns it.
//!
//! An answer the memo already holds is handed out again without a copy:
//! [`Rows`] keeps its columns and rows in [`Shared`] values, so a clone is
//! two reference counts, and a caller that changes its copy gets its own
//! (copy on write).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, NullArray, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Field, Schema};
use rusqlite::types::Value;

/// A result set: column names as SQLite names them, and rows of SQLite values.
#[derive(Clone, Debug, PartialEq)]
pub struct Rows {
    pub columns: Shared<Vec<String>>,
    pub rows: Shared<Vec<Vec<Value>>>,
}

thread_local! {
    /// The empty result every write returns: shared, so that a statement
    /// without rows allocates nothing for them (a batch INSERT's rows are
    /// each such a statement).
    static EMPTY: Rows = Rows {
        columns: Shared(Arc::default()),
        rows: Shared(Arc::default()),
    };
}

impl Default for Rows {
    fn default() -> Rows {
        EMPTY.with(Rows::clone)
    }
}

impl Rows {
    pub fn new(columns: Vec<String>, rows: Vec<Vec<Value>>) -> Rows {
        Rows {
            columns: columns.into(),
            rows: rows.into(),
        }
    }

    /// The rows as one Arrow batch (see [`crate::Connection::query_arrow`]).
    pub fn to_arrow(&self) -> arrow_array::RecordBatch {
        to_arrow(self)
    }
}

/// A value shared between the memo and the answers it gave: it reads as a
/// `T` (`Deref`), and the first change through `DerefMut` copies it if
/// another answer still shares it.
#[derive(Default, PartialEq)]
pub struct Shared<T>(Arc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<T: Clone> Shared<T> {
    /// The value itself, copied only if it is shared.
    pub fn into_inner(self) -> T {
        Arc::unwrap_or_clone(self.0)
    }
}

impl<T> From<T> for Shared<T> {
    fn from(v: T) -> Self {
        Shared(Arc::new(v))
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone> DerefMut for Shared<T> {
    fn deref_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

impl<T: fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

// Compared with what a `Vec` compares with, as the fields were before.
impl<T: PartialEq<U>, U> PartialEq<Vec<U>> for Shared<Vec<T>> {
    fn eq(&self, other: &Vec<U>) -> bool {
        *self.0 == *other
    }
}

impl<T: PartialEq<U>, U, const N: usize> PartialEq<[U; N]> for Shared<Vec<T>> {
    fn eq(&self, other: &[U; N]) -> bool {
        *self.0 == *other
    }
}

impl<T: PartialEq<U>, U> PartialEq<&[U]> for Shared<Vec<T>> {
    fn eq(&self, other: &&[U]) -> bool {
        *self.0 == *other
    }
}

impl<'a, E> IntoIterator for &'a Shared<Vec<E>> {
    type Item = &'a E;
    type IntoIter = std::slice::Iter<'a, E>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<E> FromIterator<E> for Shared<Vec<E>> {
    fn from_iter<I: IntoIterator<Item = E>>(iter: I) -> Self {
        Shared(Arc::new(iter.into_iter().collect()))
    }
}

impl<E: Clone> IntoIterator for Shared<Vec<E>> {
    type Item = E;
    type IntoIter = std::vec::IntoIter<E>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_inner().into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_shares_until_one_side_changes() {
        let a = Rows::new(vec!["x".into()], vec![vec![Value::Integer(1)]]);
        let mut b = a.clone();
        assert!(Arc::ptr_eq(&a.rows.0, &b.rows.0));
        b.rows.push(vec![Value::Integer(2)]);
        assert_eq!(a.rows, vec![vec![Value::Integer(1)]]);
        assert_eq!(
            b.rows,
            vec![vec![Value::Integer(1)], vec![Value::Integer(2)]]
        );
        assert!(!Arc::ptr_eq(&a.rows.0, &b.rows.0));
        let owned: Vec<Vec<Value>> = b.rows.into_iter().collect();
        assert_eq!(owned.len(), 2);
    }
}

/// Rows as an Arrow batch: one Arrow type per column from its storage
/// classes; a column that mixes them becomes Utf8 of SQLite's text form.
fn to_arrow(rows: &Rows) -> RecordBatch {
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (c, name) in rows.columns.iter().enumerate() {
        let col = rows.rows.iter().map(|r| &r[c]);
        let mut kind: Option<u8> = None;
        let mut mixed = false;
        for v in col.clone() {
            let k = match v {
                Value::Null => continue,
                Value::Integer(_) => 1,
                Value::Real(_) => 2,
                Value::Text(_) => 3,
                Value::Blob(_) => 4,
            };
            if kind.is_some_and(|x| x != k) {
                mixed = true;
            }
            kind = Some(k);
        }
        let (dt, array): (DataType, ArrayRef) = match (kind, mixed) {
            (None, _) => (DataType::Null, Arc::new(NullArray::new(rows.rows.len()))),
            (Some(1), false) => {
                let mut b = Int64Builder::new();
                col.for_each(|v| {
                    b.append_option(if let Value::Integer(i) = v {
                        Some(*i)
                    } else {
                        None
                    })
                });
                (DataType::Int64, Arc::new(b.finish()))
            }
            (Some(2), false) => {
                let mut b = Float64Builder::new();
                col.for_each(|v| {
                    b.append_option(if let Value::Real(f) = v {
                        Some(*f)
                    } else {
                        None
                    })
                });
                (DataType::Float64, Arc::new(b.finish()))
            }
            (Some(4), false) => {
                let mut b = BinaryBuilder::new();
                col.for_each(|v| {
                    b.append_option(if let Value::Blob(x) = v {
                        Some(x)
                    } else {
                        None
                    })
                });
                (DataType::Binary, Arc::new(b.finish()))
            }
            _ => {
                let mut b = StringBuilder::new();
                col.for_each(|v| {
                    b.append_option(match v {
                        Value::Null => None,
                        Value::Integer(i) => Some(i.to_string()),
                        Value::Real(f) => Some(f.to_string()),
                        Value::Text(t) => Some(t.clone()),
                        Value::Blob(x) => Some(String::from_utf8_lossy(x).into_owned()),
                    })
                });
                (DataType::Utf8, Arc::new(b.finish()))
            }
        };
        fields.push(Field::new(name, dt, true));
        arrays.push(array);
    }
    let opts = RecordBatchOptions::new().with_row_count(Some(rows.rows.len()));
    RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &opts)
        .expect("columns built with the schema's types and the same length")
}
