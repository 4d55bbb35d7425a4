//! The only raw SQLite call Pleroma makes. rusqlite wraps everything else.

use std::ffi::CString;

/// SQLite's own test for "this text ends a complete statement" (the one the
/// `sqlite3` shell uses), which knows about quotes, comments and trigger
/// bodies.
pub fn is_complete(sql: &str) -> bool {
    let Ok(c) = CString::new(sql) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call;
    // sqlite3_complete only reads it and needs no connection.
    unsafe { rusqlite::ffi::sqlite3_complete(c.as_ptr()) != 0 }
}
