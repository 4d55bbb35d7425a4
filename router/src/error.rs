//! Errors of the router.

use thiserror::Error;

/// An error from a Pleroma connection. SQLite's own errors pass through
/// unchanged (`Error::Sqlite`), so a user sees exactly what SQLite says.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// A malformed or invalid Pleroma PRAGMA; the message names the problem.
    #[error("{0}")]
    Pragma(String),
    /// `PRAGMA pleroma_route = plane` and the plane cannot serve the query.
    #[error("pleroma: the plane cannot serve this query: {0}")]
    NotServed(crate::Decline),
    /// The SQLite linked in cannot run Pleroma (built without the
    /// pre-update hook); the message says what to set.
    #[error("pleroma: {0}")]
    Setup(String),
    /// An appender given what it cannot append (no such table or column,
    /// a row of the wrong length); SQLite's own errors stay `Sqlite`.
    #[error("pleroma appender: {0}")]
    Appender(String),
    #[error("plane: {0}")]
    Plane(#[from] pleroma_plane::PlaneError),
}

impl Error {
    /// SQLite's "database is locked" (`SQLITE_BUSY`) or "database table is
    /// locked" (`SQLITE_LOCKED`), with any extended code.
    pub(crate) fn is_busy(&self) -> bool {
        matches!(
            self,
            Error::Sqlite(e) if matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            )
        )
    }

    /// SQLite's "integer overflow" (it has no code of its own: SQLITE_ERROR
    /// and the text).
    pub(crate) fn is_integer_overflow(&self) -> bool {
        matches!(
            self,
            Error::Sqlite(rusqlite::Error::SqliteFailure(_, Some(m))) if m == "integer overflow"
        )
    }
}
