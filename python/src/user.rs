//! What the program sets on its connection that SQLite would apply to
//! every statement: an authorizer, a progress handler, limits. Pleroma's
//! own statements (its catalog, persisted state, write sets, rebuilds) run
//! on the same handle, and must neither be refused by the program's
//! authorizer nor fail on its limits; and a plane's answer runs no SQLite
//! program, so it would skip all three. So:
//!
//! - The authorizer and the limits SQLite checks while it prepares a
//!   statement are applied by preparing the program's statement once more,
//!   with them in place and nothing else on the handle ([`User::screen`]),
//!   before the router runs it with neither. What SQLite refuses there is
//!   refused with SQLite's own error; a statement SQLite would prepare runs
//!   as it would have. An authorizer answering `SQLITE_IGNORE` (which
//!   changes what a statement does, not whether it runs) is declined.
//! - The limits SQLite checks while a statement runs are set on the handle
//!   when that cannot hurt Pleroma's statements (`TRIGGER_DEPTH`,
//!   `ATTACHED`, `WORKER_THREADS`, and raising any limit); lowering
//!   `LENGTH` or `LIKE_PATTERN_LENGTH` below SQLite's own is declined: the
//!   router's statements read the schema's text and its persisted state,
//!   which they would then fail on.
//! - A progress handler is SQLite's, on the handle; while it is set every
//!   statement runs on SQLite (`RouteMode::Engine`), so that it is called,
//!   and can cancel, as in `sqlite3`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use pleroma::rusqlite::ffi;
use pleroma::RouteMode;
use pyo3::prelude::*;

use crate::{handle, report, Fail, NotSupportedError, ProgrammingError};

/// SQLite's limit categories (`SQLITE_LIMIT_LENGTH` … `WORKER_THREADS`).
const CATEGORIES: usize = 12;

/// The categories SQLite checks only while preparing a statement: applied
/// to the program's statements by [`User::screen`], never on the handle.
const PREPARED: [c_int; 7] = [
    ffi::SQLITE_LIMIT_SQL_LENGTH,
    ffi::SQLITE_LIMIT_COLUMN,
    ffi::SQLITE_LIMIT_EXPR_DEPTH,
    ffi::SQLITE_LIMIT_COMPOUND_SELECT,
    ffi::SQLITE_LIMIT_VDBE_OP,
    ffi::SQLITE_LIMIT_FUNCTION_ARG,
    ffi::SQLITE_LIMIT_VARIABLE_NUMBER,
];

/// Runtime categories that Pleroma's own statements could fail on when
/// lowered: `LENGTH` (the schema's text, the persisted state's rows) and
/// `LIKE_PATTERN_LENGTH` (its reads of the schema match patterns).
const FLOORED: [c_int; 2] = [
    ffi::SQLITE_LIMIT_LENGTH,
    ffi::SQLITE_LIMIT_LIKE_PATTERN_LENGTH,
];

/// What the program set on one connection.
#[derive(Default)]
pub(crate) struct User {
    authorizer: Option<Py<PyAny>>,
    /// Installed on the handle while set; dropped after it is replaced.
    progress: Option<Box<Py<PyAny>>>,
    /// The route mode to go back to when the progress handler is cleared.
    route_before: Option<RouteMode>,
    /// Each category's limit as the handle had it before the program set
    /// any (read at the first `getlimit` or `setlimit`).
    original: Option<[c_int; CATEGORIES]>,
    /// The program's limit of each category in [`PREPARED`] (`None`: the
    /// handle's own).
    prepared: [Option<c_int>; CATEGORIES],
}

/// The program's authorizer while [`User::screen`] prepares, and whether
/// it answered `SQLITE_IGNORE` for any action.
struct Asking<'a> {
    callback: &'a Py<PyAny>,
    ignored: bool,
}

fn text(p: *const c_char) -> Option<String> {
    // SAFETY: SQLite passes NULL or a NUL-terminated string that lives for
    // the call.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// SQLite's authorizer callback: asks the program's, as `sqlite3` does
/// (an exception, or an answer that is not an int, denies).
unsafe extern "C" fn authorize(
    data: *mut c_void,
    action: c_int,
    a: *const c_char,
    b: *const c_char,
    db: *const c_char,
    source: *const c_char,
) -> c_int {
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `data` is the `Asking` that `User::screen` installed for
        // the length of its prepare, on this thread.
        let asking = unsafe { &mut *(data as *mut Asking<'_>) };
        let rc = Python::attach(|py| {
            let callback = asking.callback.bind(py);
            let answer = callback.call1((action, text(a), text(b), text(db), text(source)));
            match answer {
                Ok(v) if v.cast::<pyo3::types::PyInt>().is_ok() => match v.extract::<c_int>() {
                    Ok(rc) => rc,
                    Err(e) => {
                        report(py, e, callback);
                        ffi::SQLITE_DENY
                    }
                },
                Ok(_) => ffi::SQLITE_DENY,
                Err(e) => {
                    report(py, e, callback);
                    ffi::SQLITE_DENY
                }
            }
        });
        if rc == ffi::SQLITE_IGNORE {
            asking.ignored = true;
        }
        rc
    }));
    r.unwrap_or(ffi::SQLITE_DENY)
}

/// SQLite's progress callback: the program's handler; an exception, or a
/// true answer, interrupts the statement (as in `sqlite3`).
unsafe extern "C" fn progress(data: *mut c_void) -> c_int {
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `data` is the boxed callable `User::set_progress`
        // installed; it is dropped only after the handle no longer has it.
        let handler = unsafe { &*(data as *const Py<PyAny>) };
        Python::attach(|py| {
            let h = handler.bind(py);
            match h.call0().and_then(|v| v.is_truthy()) {
                Ok(stop) => c_int::from(stop),
                Err(e) => {
                    report(py, e, h);
                    1
                }
            }
        })
    }));
    r.unwrap_or(1)
}

/// The `'category' is out of bounds` check of `getlimit` and `setlimit`.
fn category(c: c_int) -> Result<usize, Fail> {
    usize::try_from(c)
        .ok()
        .filter(|&c| c < CATEGORIES)
        .ok_or_else(|| Fail::Py(ProgrammingError::new_err("'category' is out of bounds")))
}

impl User {
    /// Whether the program's statements must be screened before they run.
    pub(crate) fn screens(&self) -> bool {
        self.authorizer.is_some() || self.prepared.iter().any(Option::is_some)
    }

    pub(crate) fn set_authorizer(&mut self, callback: Option<Py<PyAny>>) {
        self.authorizer = callback;
    }

    /// Set (or, with `None` or `n` < 1, clear) the progress handler, called
    /// every `n` SQLite instructions.
    pub(crate) fn set_progress(
        &mut self,
        c: &mut pleroma::Connection,
        handler: Option<Py<PyAny>>,
        n: c_int,
    ) -> Option<Box<Py<PyAny>>> {
        let db = handle(c);
        let old = self.progress.take();
        match handler.filter(|_| n > 0) {
            Some(h) => {
                let h = Box::new(h);
                let data = &*h as *const Py<PyAny> as *mut c_void;
                // SAFETY: `db` is open (the connection's lock is held); the
                // box lives in `self.progress` until another call replaces
                // it here, after SQLite has the new one.
                unsafe { ffi::sqlite3_progress_handler(db, n, Some(progress), data) };
                self.progress = Some(h);
                if self.route_before.is_none() {
                    self.route_before = Some(c.route_mode());
                    c.set_route_mode(RouteMode::Engine);
                }
            }
            None => {
                // SAFETY: as above; clearing takes nothing.
                unsafe { ffi::sqlite3_progress_handler(db, 0, None, std::ptr::null_mut()) };
                if let Some(mode) = self.route_before.take() {
                    // Unless the program chose a mode of its own since.
                    if c.route_mode() == RouteMode::Engine {
                        c.set_route_mode(mode);
                    }
                }
            }
        }
        old
    }

    /// The handle's limits before the program set any.
    fn original(&mut self, db: *mut ffi::sqlite3) -> [c_int; CATEGORIES] {
        *self.original.get_or_insert_with(|| {
            let mut o = [0; CATEGORIES];
            for (i, v) in o.iter_mut().enumerate() {
                // SAFETY: `db` is open; -1 reads without setting.
                *v = unsafe { ffi::sqlite3_limit(db, i as c_int, -1) };
            }
            o
        })
    }

    /// `getlimit(category)`.
    pub(crate) fn limit(&mut self, c: &pleroma::Connection, cat: c_int) -> Result<c_int, Fail> {
        let i = category(cat)?;
        let db = handle(c);
        self.original(db);
        // SAFETY: `db` is open; -1 reads without setting.
        Ok(self.prepared[i].unwrap_or_else(|| unsafe { ffi::sqlite3_limit(db, cat, -1) }))
    }

    /// `setlimit(category, limit)`: the limit before; a negative `limit`
    /// changes nothing, one above SQLite's hard bound is that bound.
    pub(crate) fn set_limit(
        &mut self,
        c: &pleroma::Connection,
        cat: c_int,
        limit: c_int,
    ) -> Result<c_int, Fail> {
        let before = self.limit(c, cat)?;
        if limit < 0 {
            return Ok(before);
        }
        let i = cat as usize;
        let db = handle(c);
        let original = self.original(db)[i];
        if PREPARED.contains(&cat) {
            // SQLite's hard bound, read by asking for more than any.
            // SAFETY: `db` is open; the handle's own value is put back.
            let bound = unsafe {
                let own = ffi::sqlite3_limit(db, cat, c_int::MAX);
                ffi::sqlite3_limit(db, cat, own)
            };
            let limit = limit.min(bound);
            self.prepared[i] = (limit != original).then_some(limit);
            return Ok(before);
        }
        if FLOORED.contains(&cat) && limit < original {
            return Err(Fail::Py(NotSupportedError::new_err(format!(
                "pleroma: lowering limit {cat} below SQLite's {original} is not supported \
                 (Pleroma's own statements run under it; docs/python.md)"
            ))));
        }
        // SAFETY: `db` is open.
        unsafe { ffi::sqlite3_limit(db, cat, limit) };
        Ok(before)
    }

    /// Prepare the program's statement `sql` as SQLite would, with the
    /// program's authorizer and prepared limits in place, then take them off
    /// again: SQLite's error when it refuses it, a `NotSupportedError` when
    /// the authorizer answered `SQLITE_IGNORE` for any part of it.
    pub(crate) fn screen(&self, c: &pleroma::Connection, sql: &str) -> Result<(), Fail> {
        let db = handle(c);
        let mut put_back = Vec::new();
        for (i, l) in self.prepared.iter().enumerate() {
            if let Some(l) = l {
                // SAFETY: `db` is open; every value is put back below.
                put_back.push((i, unsafe { ffi::sqlite3_limit(db, i as c_int, *l) }));
            }
        }
        let mut asking = self.authorizer.as_ref().map(|callback| Asking {
            callback,
            ignored: false,
        });
        if let Some(a) = asking.as_mut() {
            // SAFETY: `db` is open; `asking` outlives the prepare below,
            // after which the authorizer is taken off again (SQLite calls it
            // only while preparing, on this thread).
            unsafe {
                ffi::sqlite3_set_authorizer(
                    db,
                    Some(authorize),
                    a as *mut Asking<'_> as *mut c_void,
                )
            };
        }
        let prepared = c.sqlite().prepare(sql).map(drop);
        if asking.is_some() {
            // SAFETY: `db` is open.
            unsafe { ffi::sqlite3_set_authorizer(db, None, std::ptr::null_mut()) };
        }
        for (i, l) in put_back {
            // SAFETY: `db` is open.
            unsafe { ffi::sqlite3_limit(db, i as c_int, l) };
        }
        prepared.map_err(|e| Fail::Pleroma(pleroma::Error::Sqlite(e)))?;
        if asking.is_some_and(|a| a.ignored) {
            return Err(Fail::Py(NotSupportedError::new_err(
                "pleroma: an authorizer answering SQLITE_IGNORE is not supported \
                 (docs/python.md)",
            )));
        }
        Ok(())
    }

    /// Take everything off before the connection closes: the progress
    /// handler's callable, to be dropped after.
    pub(crate) fn clear(&mut self) -> Option<Box<Py<PyAny>>> {
        self.authorizer = None;
        self.progress.take()
    }
}
