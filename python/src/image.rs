//! `Connection.serialize` and `deserialize`: a database as the bytes of its
//! file (`sqlite3_serialize`, `sqlite3_deserialize`).
//!
//! Deserializing replaces a schema's content behind the change hook, as a
//! backup into the connection does; the connection then opens its planes
//! again from what it holds (`Connection::reload_planes`). Only on a
//! connection whose main database is in memory: one on a file shares its
//! planes with the file's other connections in this process, and its main
//! database would stop being that file.

use std::ffi::{c_void, CString};

use pleroma::rusqlite::ffi;
use pyo3::exceptions::PyValueError;

use crate::{errmsg, handle, Fail, NotSupportedError, OperationalError};

fn schema(name: &str) -> Result<CString, Fail> {
    CString::new(name).map_err(|_| Fail::Py(PyValueError::new_err("embedded null character")))
}

/// The bytes of database `name`, as its file would hold them.
pub(crate) fn serialize(c: &pleroma::Connection, name: &str) -> Result<Vec<u8>, Fail> {
    let s = schema(name)?;
    let db = handle(c);
    let mut size: ffi::sqlite3_int64 = 0;
    // SAFETY: `db` is open; SQLite hands out a copy of `size` bytes, which
    // is freed with sqlite3_free once copied.
    unsafe {
        let data = ffi::sqlite3_serialize(db, s.as_ptr(), &mut size, 0);
        if data.is_null() {
            return Err(Fail::Py(OperationalError::new_err(format!(
                "unable to serialize '{name}'"
            ))));
        }
        let out = std::slice::from_raw_parts(data, size as usize).to_vec();
        ffi::sqlite3_free(data as *mut c_void);
        Ok(out)
    }
}

/// Replace database `name` with `data`, then open the planes again.
pub(crate) fn deserialize(
    c: &mut pleroma::Connection,
    data: &[u8],
    name: &str,
) -> Result<(), Fail> {
    let s = schema(name)?;
    let db = handle(c);
    // SAFETY: `db` is open; "main" always exists.
    let file = unsafe { ffi::sqlite3_db_filename(db, c"main".as_ptr()) };
    // SAFETY: NULL or a string that lives as long as the connection.
    let in_memory = file.is_null() || unsafe { *file } == 0;
    if !in_memory {
        return Err(Fail::Py(NotSupportedError::new_err(
            "pleroma: deserialize() is supported on a connection to an in-memory database \
             only (docs/python.md)",
        )));
    }
    let size = data.len() as ffi::sqlite3_int64;
    // SAFETY: `buf` holds `size` bytes; SQLite owns it from the call on
    // (SQLITE_DESERIALIZE_FREEONCLOSE), also when the call fails.
    unsafe {
        let buf = ffi::sqlite3_malloc64(data.len().max(1) as u64) as *mut u8;
        if buf.is_null() {
            return Err(Fail::Sqlite(ffi::SQLITE_NOMEM, "out of memory".into()));
        }
        std::ptr::copy_nonoverlapping(data.as_ptr(), buf, data.len());
        let flags = ffi::SQLITE_DESERIALIZE_FREEONCLOSE | ffi::SQLITE_DESERIALIZE_RESIZEABLE;
        let rc = ffi::sqlite3_deserialize(db, s.as_ptr(), buf, size, size, flags);
        if rc != ffi::SQLITE_OK {
            return Err(Fail::Sqlite(ffi::sqlite3_extended_errcode(db), errmsg(db)));
        }
    }
    match c.reload_planes() {
        // Bytes that are not a database: as in sqlite3, the error comes
        // from the next statement (every one fails on SQLite before the
        // planes could answer it, the router's check of the file first).
        Err(pleroma::Error::Sqlite(e))
            if e.sqlite_error_code() == Some(pleroma::rusqlite::ErrorCode::NotADatabase) =>
        {
            Ok(())
        }
        r => Ok(r?),
    }
}
