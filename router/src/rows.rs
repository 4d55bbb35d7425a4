//! A result set, as every route returns it.
//!
//! An answer the memo already holds is handed out again without a copy:
//! [`Rows`] keeps its columns and rows in [`Shared`] values, so a clone is
//! two reference counts, and a caller that changes its copy gets its own
//! (copy on write).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

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
        crate::rules::to_arrow(self)
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
