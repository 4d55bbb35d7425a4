//! Incremental BLOB I/O (`Connection.blobopen`): SQLite's `sqlite3_blob_*`
//! handles, kept per connection and closed before it closes.
//!
//! A blob write changes a row without the pre-update hook seeing the new
//! value (SQLite reports it as a delete of the old row, and nothing
//! more), and without the guard index of a persisted plane computing
//! anything: a plane, or another process following the file's persisted
//! state, would miss it. So a handle opened for writing is refused on a
//! table with a plane (by name, in any schema, as `PRAGMA pleroma_planes`
//! lists them), a plane's guard (a persisted plane of any connection), or
//! of Pleroma's own (`pleroma_…`); on a connection with planes, it is also
//! refused outside a transaction (see `refusal`); and every write asks
//! again, since a plane may have been attached since the handle was
//! opened. Reading is always allowed.

use std::collections::HashMap;
use std::ffi::{c_int, c_void, CString};

use pleroma::rusqlite::ffi;
use pleroma::Value;
use pyo3::exceptions::PyValueError;

use crate::{errmsg, handle, Fail, OperationalError, ProgrammingError};

/// One open handle.
struct Open {
    /// The `sqlite3_blob *`, valid until `sqlite3_blob_close`.
    handle: usize,
    schema: String,
    table: String,
    writable: bool,
}

/// The handles open on one connection, by the number the Python `Blob`
/// holds.
#[derive(Default)]
pub(crate) struct Blobs {
    open: HashMap<u64, Open>,
    next: u64,
}

fn closed_blob() -> Fail {
    Fail::Py(ProgrammingError::new_err(
        "Cannot operate on a closed blob.",
    ))
}

fn c_string(s: &str) -> Result<CString, Fail> {
    CString::new(s).map_err(|_| Fail::Py(PyValueError::new_err("embedded null character")))
}

/// SQLite's error on `db` after a blob call failed.
fn failure(db: *mut ffi::sqlite3) -> Fail {
    // SAFETY: `db` is open (its connection's lock is held).
    unsafe { Fail::Sqlite(ffi::sqlite3_extended_errcode(db), errmsg(db)) }
}

/// Why a write to `schema`.`table` through a blob is refused, if it is.
fn refusal(c: &mut pleroma::Connection, schema: &str, table: &str) -> Result<Option<String>, Fail> {
    let cannot = |why: &str| {
        Some(format!(
            "pleroma: cannot write to a blob of table {table}: {why} (docs/python.md)"
        ))
    };
    if table
        .get(..8)
        .is_some_and(|p| p.eq_ignore_ascii_case("pleroma_"))
    {
        return Ok(cannot("it is one of Pleroma's own tables"));
    }
    let planes = c.query("PRAGMA pleroma_planes", &[])?;
    if !planes.rows.is_empty() {
        let Some(col) = planes.columns.iter().position(|n| n == "table") else {
            return Ok(cannot("the planes' tables cannot be read"));
        };
        let planed = planes.rows.iter().any(|r| match r.get(col) {
            Some(Value::Text(t)) => t.eq_ignore_ascii_case(table),
            _ => false,
        });
        if planed {
            return Ok(cannot(&format!(
                "table {table} has a plane, and a blob write passes by the change hook that keeps \
                 a plane exact"
            )));
        }
        // Outside a transaction a blob open for writing holds one of its
        // own until it closes: a write to a planed table that Pleroma wraps
        // in a transaction could not commit past it, and its rollback would
        // take the blob's writes with it.
        if c.is_autocommit() {
            return Ok(Some(
                "pleroma: on a connection with planes a blob can be opened for writing only \
                 inside a transaction (docs/python.md)"
                    .into(),
            ));
        }
    }
    let sql = format!(
        "SELECT 1 FROM \"{}\".sqlite_master WHERE type = 'index' AND tbl_name = ?1 COLLATE NOCASE \
         AND name LIKE 'pleroma\\_guard\\_%' ESCAPE '\\'",
        schema.replace('"', "\"\"")
    );
    let guarded = c.sqlite().prepare(&sql).and_then(|mut s| s.exists([table]));
    Ok(match guarded {
        Ok(false) => None,
        Ok(true) => cannot(&format!(
            "table {table} has a persisted plane's guard, which a blob write passes by"
        )),
        Err(_) => cannot(&format!("the schema of {schema} cannot be read")),
    })
}

fn refused(why: String) -> Fail {
    Fail::Py(OperationalError::new_err(why))
}

impl Blobs {
    /// `sqlite3_blob_open`: the handle's number and the blob's length.
    pub(crate) fn open(
        &mut self,
        c: &mut pleroma::Connection,
        schema: &str,
        table: &str,
        column: &str,
        row: i64,
        readonly: bool,
    ) -> Result<(u64, c_int), Fail> {
        let (s, t, col) = (c_string(schema)?, c_string(table)?, c_string(column)?);
        let db = handle(c);
        let mut handle = std::ptr::null_mut();
        // SAFETY: `db` is open; the strings outlive the call; the handle is
        // closed by `close` or `close_all`, before the connection closes.
        let rc = unsafe {
            ffi::sqlite3_blob_open(
                db,
                s.as_ptr(),
                t.as_ptr(),
                col.as_ptr(),
                row,
                c_int::from(!readonly),
                &mut handle,
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(failure(db));
        }
        // SAFETY: `handle` is open.
        let len = unsafe { ffi::sqlite3_blob_bytes(handle) };
        let id = self.next;
        self.next += 1;
        self.open.insert(
            id,
            Open {
                handle: handle as usize,
                schema: schema.to_owned(),
                table: table.to_owned(),
                writable: !readonly,
            },
        );
        if !readonly {
            let fail = match refusal(c, schema, table) {
                Ok(None) => None,
                Ok(Some(why)) => Some(refused(why)),
                Err(e) => Some(e),
            };
            if let Some(fail) = fail {
                self.close(id);
                return Err(fail);
            }
        }
        Ok((id, len))
    }

    fn handle(&self, id: u64) -> Result<&Open, Fail> {
        self.open.get(&id).ok_or_else(closed_blob)
    }

    /// `n` bytes from `offset`.
    pub(crate) fn read(
        &self,
        c: &pleroma::Connection,
        id: u64,
        offset: c_int,
        n: c_int,
    ) -> Result<Vec<u8>, Fail> {
        let h = self.handle(id)?.handle as *mut ffi::sqlite3_blob;
        let mut buf = vec![0u8; usize::try_from(n).unwrap_or(0)];
        // SAFETY: `h` is open; `buf` holds `n` bytes.
        let rc = unsafe {
            ffi::sqlite3_blob_read(
                h,
                buf.as_mut_ptr() as *mut c_void,
                buf.len() as c_int,
                offset,
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(failure(handle(c)));
        }
        Ok(buf)
    }

    /// Write `data` at `offset`, unless the table has a plane by now.
    pub(crate) fn write(
        &self,
        c: &mut pleroma::Connection,
        id: u64,
        offset: c_int,
        data: &[u8],
    ) -> Result<(), Fail> {
        let open = self.handle(id)?;
        if open.writable {
            if let Some(why) = refusal(c, &open.schema, &open.table)? {
                return Err(refused(why));
            }
        }
        let h = open.handle as *mut ffi::sqlite3_blob;
        // SAFETY: `h` is open; `data` is `data.len()` bytes (the caller
        // keeps it under SQLite's int).
        let rc = unsafe {
            ffi::sqlite3_blob_write(
                h,
                data.as_ptr() as *const c_void,
                data.len() as c_int,
                offset,
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(failure(handle(c)));
        }
        Ok(())
    }

    /// Close one handle (nothing if it is closed already).
    pub(crate) fn close(&mut self, id: u64) {
        if let Some(o) = self.open.remove(&id) {
            // SAFETY: the handle is open, and forgotten here.
            unsafe { ffi::sqlite3_blob_close(o.handle as *mut ffi::sqlite3_blob) };
        }
    }

    /// Close every handle: before the connection closes (SQLite does not
    /// close a connection with open blobs).
    pub(crate) fn close_all(&mut self) {
        let ids: Vec<u64> = self.open.keys().copied().collect();
        for id in ids {
            self.close(id);
        }
    }
}
