//! SQLite's errors as PostgreSQL errors: a SQLSTATE a driver can act on,
//! and SQLite's own message, unchanged.

use pgwire::error::{ErrorInfo, SEVERITY_ERROR, SEVERITY_FATAL};
use pleroma::rusqlite::ffi;
use pleroma::rusqlite::ErrorCode;

pub(crate) fn error(code: &str, message: impl Into<String>) -> ErrorInfo {
    ErrorInfo::new(SEVERITY_ERROR.to_owned(), code.to_owned(), message.into())
}

pub(crate) fn fatal(code: &str, message: impl Into<String>) -> ErrorInfo {
    ErrorInfo::new(SEVERITY_FATAL.to_owned(), code.to_owned(), message.into())
}

/// The SQLSTATE of a router error; the message is the router's (SQLite's).
pub(crate) fn from_router(e: &pleroma::Error) -> ErrorInfo {
    let message = e.to_string();
    let code = match e {
        pleroma::Error::Sqlite(s) => from_sqlite(s, &message),
        pleroma::Error::Pragma(_) => "22023",
        pleroma::Error::NotServed(_) => "0A000",
        _ => "XX000",
    };
    if code == "57014" {
        // Only a cancel request interrupts a session's statement.
        return error(code, crate::jobs::MESSAGE);
    }
    error(code, message)
}

fn from_sqlite(e: &pleroma::rusqlite::Error, message: &str) -> &'static str {
    use pleroma::rusqlite::Error as E;
    match e {
        E::SqliteFailure(f, _) => match f.code {
            ErrorCode::ConstraintViolation => match f.extended_code {
                ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => "23505",
                ffi::SQLITE_CONSTRAINT_NOTNULL => "23502",
                ffi::SQLITE_CONSTRAINT_FOREIGNKEY => "23503",
                ffi::SQLITE_CONSTRAINT_CHECK => "23514",
                _ => "23000",
            },
            // Another connection holds the lock: lock_not_available; a read
            // transaction that can no longer be upgraded to a write is a
            // serialization failure, which drivers retry.
            ErrorCode::DatabaseBusy if f.extended_code == ffi::SQLITE_BUSY_SNAPSHOT => "40001",
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => "55P03",
            ErrorCode::ReadOnly => "25006",
            ErrorCode::TooBig => "54000",
            ErrorCode::TypeMismatch => "42804",
            ErrorCode::OperationInterrupted => "57014",
            ErrorCode::DiskFull => "53100",
            ErrorCode::OutOfMemory => "53200",
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => "XX001",
            ErrorCode::SystemIoFailure | ErrorCode::CannotOpen => "58030",
            ErrorCode::AuthorizationForStatementDenied => "42501",
            ErrorCode::ParameterOutOfRange => "08P01",
            _ => from_message(message),
        },
        E::InvalidParameterCount(..) | E::InvalidParameterName(_) => "08P01",
        E::IntegralValueOutOfRange(..) => "22003",
        E::Utf8Error(..) => "22021",
        _ => from_message(message),
    }
}

/// SQLITE_ERROR covers many errors; SQLite's message tells them apart.
pub(crate) fn from_message(m: &str) -> &'static str {
    let has = |s: &str| m.contains(s);
    if has("syntax error") || has("incomplete input") || has("unrecognized token") {
        "42601"
    } else if has("no such table") {
        "42P01"
    } else if has("no such column") {
        "42703"
    } else if has("no such function") {
        "42883"
    } else if has("already exists") {
        "42P07"
    } else if has("ambiguous column name") {
        "42702"
    } else if has("integer overflow") {
        "22003"
    } else if has("within a transaction") {
        "25001"
    } else if has("no transaction is active") {
        "25P01"
    } else if has("no such savepoint") {
        "3B001"
    } else if has("datatype mismatch") {
        "42804"
    } else if has("wrong number of arguments") {
        "42883"
    // PostgreSQL's errors of pleroma_pg_cast, the `::` cast (translate.rs).
    } else if has("invalid input syntax for type") {
        "22P02"
    } else if has("date/time field value out of range") {
        "22008"
    } else if has("integer out of range")
        || has("smallint out of range")
        || has("bigint out of range")
        || has("is out of range for type")
    {
        "22003"
    } else if has("cannot cast type") {
        "42846"
    } else if has("timestamp out of range") {
        "22008"
    } else if has("pleroma serve does not translate")
        || has("pleroma serve translates")
        || has("pleroma serve cannot tell")
        || has("pleroma serve adds an interval")
    {
        "0A000"
    } else {
        "XX000"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(sql: &str) -> String {
        let mut db = pleroma::Connection::open_in_memory().unwrap();
        db.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
            .unwrap();
        db.execute("INSERT INTO t VALUES (1, 'a')", &[]).unwrap();
        let e = db.query(sql, &[]).unwrap_err();
        let info = from_router(&e);
        assert_eq!(info.message, e.to_string(), "SQLite's message is kept");
        info.code
    }

    #[test]
    fn sqlite_errors_get_their_sqlstate() {
        assert_eq!(code_of("SELEC 1"), "42601");
        assert_eq!(code_of("SELECT * FROM nope"), "42P01");
        assert_eq!(code_of("SELECT nope FROM t"), "42703");
        assert_eq!(code_of("INSERT INTO t VALUES (1, 'b')"), "23505");
        assert_eq!(code_of("INSERT INTO t VALUES (2, NULL)"), "23502");
        assert_eq!(code_of("CREATE TABLE t(x)"), "42P07");
    }
}
