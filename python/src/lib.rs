//! `pleroma._native`: the part of the Python package that talks to the
//! `pleroma` crate. The DB-API itself (implicit transactions, cursors,
//! row factories) is Python, in `python/pleroma/__init__.py`; this module
//! runs statements with the GIL released, converts values both ways as
//! the `sqlite3` module does, and raises the `sqlite3` module's
//! exceptions with SQLite's own messages.

use std::sync::{Mutex, MutexGuard};

mod blob;
mod image;
mod user;

use pleroma::rusqlite::{self, ffi};
use pleroma::{Rows, Value};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOverflowError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTuple};

create_exception!(pleroma, Warning, PyException);
create_exception!(pleroma, Error, PyException);
create_exception!(pleroma, InterfaceError, Error);
create_exception!(pleroma, DatabaseError, Error);
create_exception!(pleroma, DataError, DatabaseError);
create_exception!(pleroma, OperationalError, DatabaseError);
create_exception!(pleroma, IntegrityError, DatabaseError);
create_exception!(pleroma, InternalError, DatabaseError);
create_exception!(pleroma, ProgrammingError, DatabaseError);
create_exception!(pleroma, NotSupportedError, DatabaseError);

/// SQLite's primary result codes' names, as `sqlite_errorname` gives them
/// for an extended code whose own name is not listed here.
fn code_name(code: i32) -> String {
    let primary = match code & 0xff {
        1 => "SQLITE_ERROR",
        2 => "SQLITE_INTERNAL",
        3 => "SQLITE_PERM",
        4 => "SQLITE_ABORT",
        5 => "SQLITE_BUSY",
        6 => "SQLITE_LOCKED",
        7 => "SQLITE_NOMEM",
        8 => "SQLITE_READONLY",
        9 => "SQLITE_INTERRUPT",
        10 => "SQLITE_IOERR",
        11 => "SQLITE_CORRUPT",
        12 => "SQLITE_NOTFOUND",
        13 => "SQLITE_FULL",
        14 => "SQLITE_CANTOPEN",
        15 => "SQLITE_PROTOCOL",
        16 => "SQLITE_EMPTY",
        17 => "SQLITE_SCHEMA",
        18 => "SQLITE_TOOBIG",
        19 => "SQLITE_CONSTRAINT",
        20 => "SQLITE_MISMATCH",
        21 => "SQLITE_MISUSE",
        22 => "SQLITE_NOLFS",
        23 => "SQLITE_AUTH",
        24 => "SQLITE_FORMAT",
        25 => "SQLITE_RANGE",
        26 => "SQLITE_NOTADB",
        _ => return "SQLITE_UNKNOWN".into(),
    };
    let extended = match code {
        275 => "SQLITE_CONSTRAINT_CHECK",
        531 => "SQLITE_CONSTRAINT_COMMITHOOK",
        787 => "SQLITE_CONSTRAINT_FOREIGNKEY",
        1043 => "SQLITE_CONSTRAINT_FUNCTION",
        1299 => "SQLITE_CONSTRAINT_NOTNULL",
        1555 => "SQLITE_CONSTRAINT_PRIMARYKEY",
        1811 => "SQLITE_CONSTRAINT_TRIGGER",
        2067 => "SQLITE_CONSTRAINT_UNIQUE",
        2323 => "SQLITE_CONSTRAINT_VTAB",
        2579 => "SQLITE_CONSTRAINT_ROWID",
        3091 => "SQLITE_CONSTRAINT_DATATYPE",
        261 => "SQLITE_BUSY_RECOVERY",
        517 => "SQLITE_BUSY_SNAPSHOT",
        773 => "SQLITE_BUSY_TIMEOUT",
        262 => "SQLITE_LOCKED_SHAREDCACHE",
        1032 => "SQLITE_READONLY_DBMOVED",
        _ => "",
    };
    if extended.is_empty() {
        primary.into()
    } else {
        extended.into()
    }
}

/// A SQLite failure as the `sqlite3` module raises it: the class from the
/// primary result code (`_pysqlite_seterror`), SQLite's message, and the
/// `sqlite_errorcode` / `sqlite_errorname` attributes.
fn sqlite_error(py: Python<'_>, code: i32, message: String) -> PyErr {
    let err = match code & 0xff {
        ffi::SQLITE_INTERNAL | ffi::SQLITE_NOTFOUND => InternalError::new_err(message),
        ffi::SQLITE_NOMEM => return pyo3::exceptions::PyMemoryError::new_err(()),
        ffi::SQLITE_ERROR
        | ffi::SQLITE_PERM
        | ffi::SQLITE_ABORT
        | ffi::SQLITE_BUSY
        | ffi::SQLITE_LOCKED
        | ffi::SQLITE_READONLY
        | ffi::SQLITE_INTERRUPT
        | ffi::SQLITE_IOERR
        | ffi::SQLITE_FULL
        | ffi::SQLITE_CANTOPEN
        | ffi::SQLITE_PROTOCOL
        | ffi::SQLITE_EMPTY
        | ffi::SQLITE_SCHEMA => OperationalError::new_err(message),
        ffi::SQLITE_CORRUPT => DatabaseError::new_err(message),
        ffi::SQLITE_TOOBIG => DataError::new_err(message),
        ffi::SQLITE_CONSTRAINT | ffi::SQLITE_MISMATCH => IntegrityError::new_err(message),
        ffi::SQLITE_MISUSE | ffi::SQLITE_RANGE => InterfaceError::new_err(message),
        _ => DatabaseError::new_err(message),
    };
    let value = err.value(py);
    let _ = value.setattr("sqlite_errorcode", code);
    let _ = value.setattr("sqlite_errorname", code_name(code));
    err
}

/// A Pleroma error as the exception the `sqlite3` module would raise for
/// its kind.
fn to_py(py: Python<'_>, e: pleroma::Error) -> PyErr {
    match e {
        pleroma::Error::Sqlite(e) => rusqlite_to_py(py, e),
        pleroma::Error::Appender(m) => ProgrammingError::new_err(format!("pleroma appender: {m}")),
        e => OperationalError::new_err(e.to_string()),
    }
}

fn rusqlite_to_py(py: Python<'_>, e: rusqlite::Error) -> PyErr {
    match e {
        rusqlite::Error::SqliteFailure(f, msg) => {
            let message = msg.unwrap_or_else(|| f.to_string());
            sqlite_error(py, f.extended_code, message)
        }
        rusqlite::Error::InvalidParameterCount(given, needed) => ProgrammingError::new_err(format!(
            "Incorrect number of bindings supplied. The current statement uses {needed}, and there are {given} supplied."
        )),
        rusqlite::Error::UserFunctionError(e) => OperationalError::new_err(e.to_string()),
        rusqlite::Error::SqlInputError { error, msg, .. } => {
            sqlite_error(py, error.extended_code, msg)
        }
        e => DatabaseError::new_err(e.to_string()),
    }
}

/// A Python value as SQLite stores it (the `sqlite3` module's binding:
/// `bool` is an `int`, any buffer is a BLOB). `index` is the parameter's
/// number, for the message.
fn to_value(
    v: &Bound<'_, PyAny>,
    index: usize,
    adapt: Option<&Bound<'_, PyAny>>,
) -> PyResult<Value> {
    if v.is_none() {
        return Ok(Value::Null);
    }
    if let Some(adapt) = adapt {
        // Exact built-in types bind as they are; anything else (a `bool`,
        // a subclass, another type) goes through the adapters first, as
        // in `sqlite3`.
        let exact = v.is_exact_instance_of::<PyInt>()
            || v.is_exact_instance_of::<PyFloat>()
            || v.is_exact_instance_of::<PyString>()
            || v.is_exact_instance_of::<PyBytes>();
        if !exact {
            let out = adapt.call1((v, index))?;
            return to_value(&out, index, None);
        }
    }
    if let Ok(i) = v.cast::<PyInt>() {
        match i.extract::<i64>() {
            Ok(i) => Ok(Value::Integer(i)),
            Err(_) => Err(PyOverflowError::new_err(
                "Python int too large to convert to SQLite INTEGER",
            )),
        }
    } else if let Ok(f) = v.cast::<PyFloat>() {
        Ok(Value::Real(f.value()))
    } else if let Ok(s) = v.cast::<PyString>() {
        Ok(Value::Text(s.to_cow()?.into_owned()))
    } else if let Ok(b) = v.cast::<PyBytes>() {
        Ok(Value::Blob(b.as_bytes().to_vec()))
    } else if let Ok(b) = v.cast::<PyByteArray>() {
        Ok(Value::Blob(b.to_vec()))
    } else if let Some(b) = buffer_bytes(v)? {
        Ok(Value::Blob(b))
    } else {
        let name = v.get_type().qualname()?;
        Err(ProgrammingError::new_err(format!(
            "Error binding parameter {index}: type '{name}' is not supported"
        )))
    }
}

/// The bytes of an object with the buffer protocol (a `memoryview`, an
/// `array.array`), which `sqlite3` binds as a BLOB; `None` for any other
/// object. A buffer that is not C-contiguous raises `BufferError`, as
/// `sqlite3`'s `PyObject_GetBuffer` does.
fn buffer_bytes(v: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
    let py = v.py();
    let view = if v.cast::<PyMemoryView>().is_ok() {
        v.clone()
    } else {
        match PyMemoryView::from(v) {
            Ok(m) => m.into_any(),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) => return Ok(None),
            Err(e) => return Err(e),
        }
    };
    if !view.getattr("c_contiguous")?.is_truthy()? {
        return Err(pyo3::exceptions::PyBufferError::new_err(
            "memoryview: underlying buffer is not C-contiguous",
        ));
    }
    Ok(Some(view.call_method0("tobytes")?.extract()?))
}

fn to_values(params: &Bound<'_, PyAny>, adapt: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Value>> {
    if params.is_none() {
        return Ok(Vec::new());
    }
    if let Ok(t) = params.cast::<PyTuple>() {
        return t
            .iter()
            .enumerate()
            .map(|(i, v)| to_value(&v, i + 1, adapt))
            .collect();
    }
    if let Ok(l) = params.cast::<PyList>() {
        // By index, to the length it had: an adapter that shortens the
        // list makes it an IndexError, as in sqlite3.
        return (0..l.len())
            .map(|i| to_value(&l.get_item(i)?, i + 1, adapt))
            .collect();
    }
    params
        .try_iter()?
        .enumerate()
        .map(|(i, v)| to_value(&v?, i + 1, adapt))
        .collect()
}

/// A SQLite value as the `sqlite3` module returns it: TEXT through the
/// connection's `text_factory` when it is not `str` (`None` here), given
/// the text's bytes (`bytes` itself keeps them).
fn to_py_value(py: Python<'_>, v: &Value, text: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Value::Null => py.None(),
        Value::Integer(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::Real(f) => f.into_pyobject(py)?.into_any().unbind(),
        Value::Text(s) => match text {
            None => PyString::new(py, s).into_any().unbind(),
            Some(f) => {
                let b = PyBytes::new(py, s.as_bytes());
                if f.is(py.get_type::<PyBytes>()) {
                    b.into_any().unbind()
                } else {
                    f.call1((b,))?.unbind()
                }
            }
        },
        Value::Blob(b) => PyBytes::new(py, b).into_any().unbind(),
    })
}

/// TEXT that is not UTF-8 in column `col` of `sql`'s result, as
/// `sqlite3` reports it (`OperationalError`, naming the column); the text
/// itself is not kept by the router.
fn undecodable(c: &pleroma::Connection, sql: &str, col: usize, e: std::str::Utf8Error) -> Fail {
    let name = c
        .sqlite()
        .prepare(sql)
        .ok()
        .and_then(|s| s.column_name(col).ok().map(str::to_owned))
        .unwrap_or_else(|| col.to_string());
    Fail::Py(OperationalError::new_err(format!(
        "Could not decode to UTF-8 column '{name}': {e}"
    )))
}

fn closed() -> PyErr {
    ProgrammingError::new_err("Cannot operate on a closed database.")
}

/// One Pleroma connection. Every method locks it with the GIL released,
/// so a thread that waits for it never holds the GIL (a user function
/// that a statement calls takes the GIL from inside the lock).
#[pyclass(frozen, module = "pleroma._native")]
struct Native {
    conn: Mutex<Option<pleroma::Connection>>,
    /// Set by `close`: read without the lock, which a running statement
    /// holds.
    closed: std::sync::atomic::AtomicBool,
    /// Ends the running statement from another thread, without the lock.
    interrupt: rusqlite::InterruptHandle,
    /// The first exception a collation raised during the statement now
    /// running: raised in the statement's place when it ends.
    raised: std::sync::Arc<Mutex<Option<PyErr>>>,
    /// The thread holding `conn` (0: none): a Python function that a
    /// statement calls, using the same connection, is refused instead of
    /// waiting for itself.
    holder: std::sync::atomic::AtomicU64,
    /// The blob handles open on the connection; used only under `conn`'s
    /// lock, and closed before the connection closes.
    blobs: Mutex<blob::Blobs>,
    /// The program's authorizer, progress handler and limits; used only
    /// under `conn`'s lock.
    user: Mutex<user::User>,
}

impl Drop for Native {
    fn drop(&mut self) {
        // SQLite does not close a connection with open blobs.
        self.blobs
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .close_all();
    }
}

/// Why a call failed, turned into the Python exception once the
/// connection's lock is let go.
enum Fail {
    Pleroma(pleroma::Error),
    /// SQLite's extended result code and message.
    Sqlite(i32, String),
    Py(PyErr),
}

impl From<pleroma::Error> for Fail {
    fn from(e: pleroma::Error) -> Fail {
        Fail::Pleroma(e)
    }
}

impl Fail {
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Fail::Pleroma(e) => to_py(py, e),
            Fail::Sqlite(code, msg) => sqlite_error(py, code, msg),
            Fail::Py(e) => e,
        }
    }
}

/// The raw handle of `c`, for the SQLite calls rusqlite does not wrap
/// here; used only while `c`'s lock is held.
fn handle(c: &pleroma::Connection) -> *mut ffi::sqlite3 {
    // SAFETY: getting the pointer is safe; each use of it is an unsafe
    // block of its own, on an open connection.
    unsafe { c.sqlite().handle() }
}

/// The lock of a mutex that only `conn`'s holder takes.
fn inner<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Both connections' locks, taken in one order (by address) so that two
/// backups in opposite directions cannot wait for each other.
fn lock_pair<'a>(
    a: &'a Native,
    b: &'a Native,
) -> (
    MutexGuard<'a, Option<pleroma::Connection>>,
    MutexGuard<'a, Option<pleroma::Connection>>,
) {
    if (a as *const Native) < (b as *const Native) {
        let ga = a.lock();
        (ga, b.lock())
    } else {
        let gb = b.lock();
        (a.lock(), gb)
    }
}

/// SQLite's message for the last error on `db`.
///
/// # Safety
/// `db` is an open connection handle.
unsafe fn errmsg(db: *mut ffi::sqlite3) -> String {
    // SAFETY: the caller's; sqlite3_errmsg never returns NULL for an open
    // handle.
    unsafe { std::ffi::CStr::from_ptr(ffi::sqlite3_errmsg(db)) }
        .to_string_lossy()
        .into_owned()
}

/// This thread's number for `Native::holder` (never 0).
fn thread_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static ME: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    ME.with(|m| *m)
}

fn reentered(what: &str) -> PyErr {
    ProgrammingError::new_err(format!(
        "pleroma: a function called by a statement cannot {what} the connection running that statement"
    ))
}

impl Native {
    fn lock(&self) -> MutexGuard<'_, Option<pleroma::Connection>> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut pleroma::Connection) -> pleroma::Result<T> + Send,
    ) -> PyResult<T> {
        self.with_fail(py, |c| f(c).map_err(Fail::from))
    }

    /// [`Native::with`] for a call that fails with more than Pleroma's
    /// errors.
    fn with_fail<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut pleroma::Connection) -> Result<T, Fail> + Send,
    ) -> PyResult<T> {
        use std::sync::atomic::Ordering;
        let me = thread_number();
        if self.holder.load(Ordering::Acquire) == me {
            return Err(reentered("use"));
        }
        let r = py.detach(|| {
            let mut g = self.lock();
            self.holder.store(me, Ordering::Release);
            let r = g.as_mut().map(f);
            self.holder.store(0, Ordering::Release);
            r
        });
        match r {
            None => Err(closed()),
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(e.into_py(py)),
        }
    }
}

#[pymethods]
impl Native {
    /// Open `path` (`":memory:"` for a private database; a `file:` URI
    /// when `uri`), waiting up to `timeout` seconds for a lock.
    #[new]
    fn new(py: Python<'_>, path: std::path::PathBuf, timeout: f64, uri: bool) -> PyResult<Self> {
        let mut flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
            | rusqlite::OpenFlags::SQLITE_OPEN_CREATE
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if uri {
            flags |= rusqlite::OpenFlags::SQLITE_OPEN_URI;
        }
        let r = py.detach(move || -> pleroma::Result<pleroma::Connection> {
            let db = rusqlite::Connection::open_with_flags(&path, flags)?;
            let ms = (timeout.max(0.0) * 1000.0).min(i32::MAX as f64) as u64;
            db.busy_timeout(std::time::Duration::from_millis(ms))?;
            pleroma::Connection::wrap(db)
        });
        match r {
            Ok(c) => Ok(Native {
                raised: Default::default(),
                holder: std::sync::atomic::AtomicU64::new(0),
                interrupt: c.sqlite().get_interrupt_handle(),
                conn: Mutex::new(Some(c)),
                closed: std::sync::atomic::AtomicBool::new(false),
                blobs: Default::default(),
                user: Default::default(),
            }),
            Err(pleroma::Error::Sqlite(rusqlite::Error::SqliteFailure(f, _)))
                if f.code == rusqlite::ErrorCode::CannotOpen =>
            {
                Err(sqlite_error(
                    py,
                    f.extended_code,
                    "unable to open database file".into(),
                ))
            }
            Err(e) => Err(to_py(py, e)),
        }
    }

    /// Run one statement; `begin` first (the implicit BEGIN of the DB-API)
    /// when given and no transaction is open. Returns the result, the
    /// rows it changed and `last_insert_rowid()`.
    /// With `trace`, it is called with each statement run (the BEGIN, the
    /// statement with its parameters expanded), as `sqlite3`'s trace
    /// callback is, whether it then fails or not.
    /// `written`: the statement as the program wrote it, for the trace.
    /// `screen`: the statement is the program's, and prepares on SQLite:
    /// the program's authorizer and limits apply to it (`user.rs`).
    #[pyo3(signature = (sql, params, begin=None, adapt=None, trace=None, written=None, screen=true))]
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        py: Python<'_>,
        sql: &str,
        params: &Bound<'_, PyAny>,
        begin: Option<&str>,
        adapt: Option<Bound<'_, PyAny>>,
        trace: Option<Bound<'_, PyAny>>,
        written: Option<&str>,
        screen: bool,
    ) -> PyResult<(Option<Py<PyList>>, NativeResult, u64, i64)> {
        let values = to_values(params, adapt.as_ref())?;
        self.raised.lock().unwrap_or_else(|e| e.into_inner()).take();
        let tracing = trace.is_some();
        let mut traced: Vec<String> = Vec::new();
        let r = self.with_fail(py, |c| {
            {
                let user = inner(&self.user);
                if screen && user.screens() {
                    user.screen(c, sql)?;
                    if let Some(b) = begin.filter(|_| c.is_autocommit()) {
                        user.screen(c, b)?;
                    }
                }
            }
            if let Some(b) = begin {
                if c.is_autocommit() {
                    if tracing {
                        traced.push(b.to_owned());
                    }
                    c.execute(b, &[])?;
                }
            }
            if tracing {
                // As SQLite traces it: only a statement that prepares, as
                // written (its `;` too), parameters expanded.
                if let Some(t) = written
                    .and_then(|w| c.expanded_sql(w, &values))
                    .or_else(|| c.expanded_sql(sql, &values))
                {
                    traced.push(t);
                }
            }
            let rows = match c.query(sql, &values) {
                Err(pleroma::Error::Sqlite(rusqlite::Error::Utf8Error(col, e))) => {
                    return Err(undecodable(c, sql, col, e));
                }
                r => r?,
            };
            Ok((rows, c.changes(), c.last_insert_rowid()))
        });
        if let Some(e) = self.raised.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Err(e);
        }
        if let Some(t) = &trace {
            for s in traced {
                // As sqlite3: an error in the trace callback is not the
                // statement's.
                if let Err(e) = t.call1((s,)) {
                    report(py, e, t);
                }
            }
        }
        let (rows, changes, rowid) = r?;
        let columns = if rows.columns.is_empty() {
            None
        } else {
            Some(PyList::new(py, rows.columns.iter())?.unbind())
        };
        Ok((
            columns,
            NativeResult {
                rows,
                next: Mutex::new(0),
            },
            changes,
            rowid,
        ))
    }

    /// `COMMIT` or `ROLLBACK` (`verb`) when a transaction is open, checked
    /// and run under one lock (another thread may share the connection).
    /// Returns whether it ran.
    /// `screen`: the program's own (its authorizer is asked).
    #[pyo3(signature = (verb, screen=true))]
    fn end(&self, py: Python<'_>, verb: &str, screen: bool) -> PyResult<bool> {
        self.with_fail(py, |c| {
            if c.is_autocommit() {
                return Ok(false);
            }
            let user = inner(&self.user);
            if screen && user.screens() {
                user.screen(c, verb)?;
            }
            drop(user);
            c.execute(verb, &[])?;
            Ok(true)
        })
    }

    /// Run each statement of `sql`, as `executescript` does.
    fn script(&self, py: Python<'_>, sql: &str) -> PyResult<()> {
        self.with(py, |c| c.execute_batch(sql))
    }

    /// The parameters of `sql` as SQLite numbers them (`None` for `?`),
    /// its columns' declared types, and whether it writes nothing
    /// (`sqlite3_stmt_readonly`).
    #[allow(clippy::type_complexity)]
    fn parameters(
        &self,
        py: Python<'_>,
        sql: &str,
    ) -> PyResult<(Vec<Option<String>>, Vec<Option<String>>, bool)> {
        self.with(py, |c| c.parameters(sql))
    }

    /// The statements of `sql`, split as SQLite would run them.
    #[staticmethod]
    fn split(sql: &str) -> Vec<String> {
        pleroma::split::statements(sql)
            .into_iter()
            .map(|r| sql[r].to_owned())
            .collect()
    }

    /// The statements of `sql`, each with its text as SQLite's trace shows
    /// it inside a script: from the end of the one before (blanks and
    /// comments included) to its own `;`.
    #[staticmethod]
    fn split_traced(sql: &str) -> Vec<(String, String)> {
        let mut from = 0;
        pleroma::split::statements(sql)
            .into_iter()
            .map(|r| {
                let mut end = r.end;
                let blanks = sql[end..].len() - sql[end..].trim_start().len();
                if sql[end + blanks..].starts_with(';') {
                    end += blanks + 1;
                }
                let raw = sql[from.min(r.start)..end].to_owned();
                from = end;
                (raw, sql[r].to_owned())
            })
            .collect()
    }

    /// Whether `sql` ends in a complete statement (`sqlite3_complete`).
    #[staticmethod]
    fn complete(sql: &str) -> bool {
        pleroma::split::is_complete(sql)
    }

    fn in_transaction(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |c| Ok(!c.is_autocommit()))
    }

    fn total_changes(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |c| Ok(c.total_changes()))
    }

    /// The last statement's route: `plane`, `memo`, `limb`, `residue` or
    /// `engine`.
    fn last_route(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |c| Ok(c.last_route().label()))
    }

    /// Why the last statement took its route.
    fn last_route_reason(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |c| Ok(c.last_route().reason.clone()))
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Make the statement running on this connection (in another thread)
    /// fail with "interrupted", as `sqlite3_interrupt` does.
    fn interrupt(&self) -> PyResult<()> {
        if self.is_closed() {
            return Err(closed());
        }
        self.interrupt.interrupt();
        Ok(())
    }

    /// Close the connection; an open transaction is rolled back (as
    /// SQLite does when a connection closes).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if self.holder.load(std::sync::atomic::Ordering::Acquire) == thread_number() {
            return Err(reentered("close"));
        }
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        let (c, progress) = py.detach(|| {
            let mut g = self.lock();
            inner(&self.blobs).close_all();
            let progress = inner(&self.user).clear();
            (g.take(), progress)
        });
        py.detach(move || drop(c));
        // The handler's callable, once SQLite can no longer call it.
        drop(progress);
        Ok(())
    }

    /// Screen the program's statement `sql` (`user.rs`): SQLite's error if
    /// the program's authorizer or limits refuse it.
    fn screen(&self, py: Python<'_>, sql: &str) -> PyResult<()> {
        self.with_fail(py, |c| {
            let user = inner(&self.user);
            if user.screens() {
                user.screen(c, sql)?;
            }
            Ok(())
        })
    }

    /// Whether the program's statements are screened (`user.rs`).
    fn screens(&self, py: Python<'_>) -> PyResult<bool> {
        self.with_fail(py, |_| Ok(inner(&self.user).screens()))
    }

    /// Set (or, with `None`, clear) the program's authorizer.
    fn set_authorizer(&self, py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
        self.with_fail(py, |_| {
            inner(&self.user).set_authorizer(callback);
            Ok(())
        })
    }

    /// Set (or, with `None` or `n` < 1, clear) the program's progress
    /// handler.
    fn set_progress_handler(
        &self,
        py: Python<'_>,
        handler: Option<Py<PyAny>>,
        n: i32,
    ) -> PyResult<()> {
        let old = self.with_fail(py, |c| Ok(inner(&self.user).set_progress(c, handler, n)))?;
        drop(old);
        Ok(())
    }

    /// `getlimit(category)`.
    fn getlimit(&self, py: Python<'_>, category: i32) -> PyResult<i32> {
        self.with_fail(py, |c| inner(&self.user).limit(c, category))
    }

    /// `setlimit(category, limit)`: the limit before.
    fn setlimit(&self, py: Python<'_>, category: i32, limit: i32) -> PyResult<i32> {
        self.with_fail(py, |c| inner(&self.user).set_limit(c, category, limit))
    }

    /// Open a blob: its handle's number and its length.
    fn blob_open(
        &self,
        py: Python<'_>,
        table: &str,
        column: &str,
        row: i64,
        readonly: bool,
        name: &str,
    ) -> PyResult<(u64, i32)> {
        self.with_fail(py, |c| {
            inner(&self.blobs).open(c, name, table, column, row, readonly)
        })
    }

    /// `n` bytes of blob `id` from `offset`.
    fn blob_read<'py>(
        &self,
        py: Python<'py>,
        id: u64,
        offset: i32,
        n: i32,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let b = self.with_fail(py, |c| inner(&self.blobs).read(c, id, offset, n))?;
        Ok(PyBytes::new(py, &b))
    }

    /// Write `data` into blob `id` at `offset`.
    fn blob_write(&self, py: Python<'_>, id: u64, offset: i32, data: &[u8]) -> PyResult<()> {
        self.with_fail(py, |c| inner(&self.blobs).write(c, id, offset, data))
    }

    /// Close blob `id` (nothing when it is closed, or the connection is).
    fn blob_close(&self, py: Python<'_>, id: u64) -> PyResult<()> {
        if self.is_closed() {
            return Ok(());
        }
        self.with_fail(py, |_| {
            inner(&self.blobs).close(id);
            Ok(())
        })
    }

    /// The bytes of database `name`.
    fn serialize<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyBytes>> {
        let b = self.with_fail(py, |c| image::serialize(c, name))?;
        Ok(PyBytes::new(py, &b))
    }

    /// Replace database `name` with `data`.
    fn deserialize(&self, py: Python<'_>, data: &[u8], name: &str) -> PyResult<()> {
        self.with_fail(py, |c| image::deserialize(c, data, name))
    }

    /// Copy database `name` of this connection into `target`'s main
    /// database, `pages` at a time (all when negative), calling
    /// `progress(status, remaining, total)` after each step and sleeping
    /// `sleep` seconds when a step meets a lock; then `target` opens its
    /// planes again from what it now holds.
    #[pyo3(signature = (target, pages, name, progress, sleep))]
    fn backup(
        &self,
        py: Python<'_>,
        target: &Bound<'_, Native>,
        pages: i32,
        name: &str,
        progress: Option<Bound<'_, PyAny>>,
        sleep: f64,
    ) -> PyResult<()> {
        let target = target.get();
        if std::ptr::eq(self, target) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "target cannot be the same connection instance",
            ));
        }
        if self.is_closed() || target.is_closed() {
            return Err(closed());
        }
        let name = std::ffi::CString::new(name)
            .map_err(|_| pyo3::exceptions::PyValueError::new_err("embedded null character"))?;
        // (backup handle, or the target's error code and message)
        let init = py.detach(|| {
            let (s, t) = lock_pair(self, target);
            let (Some(s), Some(t)) = (s.as_ref(), t.as_ref()) else {
                return Err((
                    ffi::SQLITE_MISUSE,
                    "Cannot operate on a closed database.".to_owned(),
                ));
            };
            // SAFETY: both handles are open while their locks are held; the
            // backup handle is finished below before either lock is dropped
            // for good (`finish`).
            unsafe {
                let th = t.sqlite().handle();
                let b = ffi::sqlite3_backup_init(
                    th,
                    c"main".as_ptr(),
                    s.sqlite().handle(),
                    name.as_ptr(),
                );
                if b.is_null() {
                    Err((ffi::sqlite3_extended_errcode(th), errmsg(th)))
                } else {
                    Ok(b as usize)
                }
            }
        });
        let b = init.map_err(|(code, msg)| sqlite_error(py, code, msg))?;
        let finish = |py: Python<'_>| -> Option<(i32, String)> {
            py.detach(|| {
                let (_s, t) = lock_pair(self, target);
                // SAFETY: `b` came from sqlite3_backup_init and is finished once.
                unsafe {
                    let rc = ffi::sqlite3_backup_finish(b as *mut ffi::sqlite3_backup);
                    match (rc, t.as_ref()) {
                        (ffi::SQLITE_OK, _) => None,
                        (_, Some(t)) => {
                            let th = t.sqlite().handle();
                            Some((ffi::sqlite3_extended_errcode(th), errmsg(th)))
                        }
                        (rc, None) => Some((rc, "backup failed".to_owned())),
                    }
                }
            })
        };
        loop {
            let (rc, remaining, total) = py.detach(|| {
                let (_s, _t) = lock_pair(self, target);
                // SAFETY: as above; both connections are locked.
                unsafe {
                    let bp = b as *mut ffi::sqlite3_backup;
                    let rc = ffi::sqlite3_backup_step(bp, pages);
                    (
                        rc,
                        ffi::sqlite3_backup_remaining(bp),
                        ffi::sqlite3_backup_pagecount(bp),
                    )
                }
            });
            if let Some(p) = &progress {
                if let Err(e) = p.call1((rc, remaining, total)) {
                    let _ = finish(py);
                    return Err(e);
                }
            }
            match rc {
                ffi::SQLITE_DONE => break,
                ffi::SQLITE_OK => {}
                ffi::SQLITE_BUSY | ffi::SQLITE_LOCKED => {
                    let d = std::time::Duration::from_secs_f64(sleep.max(0.0));
                    py.detach(|| std::thread::sleep(d));
                }
                _ => break,
            }
        }
        if let Some((code, msg)) = finish(py) {
            return Err(sqlite_error(py, code, msg));
        }
        target.with(py, |c| c.reload_planes())
    }

    /// Register an aggregate SQL function backed by a Python class.
    fn create_aggregate(
        &self,
        py: Python<'_>,
        name: &str,
        narg: i32,
        class: Py<PyAny>,
    ) -> PyResult<()> {
        if !(-1..=127).contains(&narg) {
            return Err(OperationalError::new_err("Error creating aggregate"));
        }
        let name = name.to_owned();
        self.with(py, move |c| {
            c.sqlite()
                .create_aggregate_function(
                    name.as_str(),
                    narg,
                    rusqlite::functions::FunctionFlags::SQLITE_UTF8,
                    PyAggregate { class },
                )
                .map_err(pleroma::Error::from)
        })
    }

    /// Register (or, with `None`, remove) a window function backed by a
    /// Python class.
    fn create_window_function(
        &self,
        py: Python<'_>,
        name: &str,
        narg: i32,
        class: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        if !(-1..=127).contains(&narg) {
            return Err(ProgrammingError::new_err(
                "bad parameter or other API misuse",
            ));
        }
        let name = name.to_owned();
        self.with(py, move |c| {
            let db = c.sqlite();
            match class {
                None => db.remove_function(name.as_str(), narg),
                Some(class) => db.create_window_function(
                    name.as_str(),
                    narg,
                    rusqlite::functions::FunctionFlags::SQLITE_UTF8,
                    PyAggregate { class },
                ),
            }
            .map_err(pleroma::Error::from)
        })
    }

    /// Register (or, with `None`, remove) a collation backed by a Python
    /// callable that compares two strings as a negative, zero or positive
    /// number.
    fn create_collation(
        &self,
        py: Python<'_>,
        name: &str,
        func: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let name = name.to_owned();
        let raised = self.raised.clone();
        self.with(py, move |c| {
            let db = c.sqlite();
            match func {
                None => db.remove_collation(name.as_str()),
                Some(func) => db.create_collation(name.as_str(), move |a, b| {
                    Python::attach(|py| {
                        let r = func.bind(py).call1((a, b)).and_then(|v| v.extract::<i64>());
                        match r {
                            Ok(n) => n.cmp(&0),
                            // SQLite cannot fail a comparison: the first
                            // exception is raised when the statement ends,
                            // as sqlite3 raises it.
                            Err(e) => {
                                let mut slot = raised.lock().unwrap_or_else(|e| e.into_inner());
                                if slot.is_none() {
                                    *slot = Some(e);
                                }
                                std::cmp::Ordering::Equal
                            }
                        }
                    })
                }),
            }
            .map_err(pleroma::Error::from)
        })
    }

    /// Register a scalar SQL function backed by a Python callable.
    #[pyo3(signature = (name, narg, func, deterministic=false))]
    fn create_function(
        &self,
        py: Python<'_>,
        name: &str,
        narg: i32,
        func: Py<PyAny>,
        deterministic: bool,
    ) -> PyResult<()> {
        let mut flags = rusqlite::functions::FunctionFlags::SQLITE_UTF8;
        if deterministic {
            flags |= rusqlite::functions::FunctionFlags::SQLITE_DETERMINISTIC;
        }
        if !(-1..=127).contains(&narg) {
            // SQLite's own limit (SQLITE_MISUSE), as `sqlite3` reports it.
            return Err(OperationalError::new_err("Error creating function"));
        }
        let name = name.to_owned();
        self.with(py, move |c| {
            c.sqlite()
                .create_scalar_function(name.as_str(), narg, flags, move |ctx| {
                    call_function(&func, ctx)
                })
                .map_err(pleroma::Error::from)
        })
    }
}

/// A Python aggregate class (`create_aggregate`): an instance per group,
/// `step(*args)` per row, `finalize()` for the value.
struct PyAggregate {
    class: Py<PyAny>,
}

/// An error inside an aggregate, with `sqlite3`'s message.
#[derive(Debug)]
struct RaisedInAggregate(&'static str);

impl std::fmt::Display for RaisedInAggregate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.strip_suffix(" not defined") {
            Some(m) => write!(f, "user-defined aggregate's '{m}' method not defined"),
            None => write!(
                f,
                "user-defined aggregate's '{}' method raised error",
                self.0
            ),
        }
    }
}

impl std::error::Error for RaisedInAggregate {}

/// An exception in the aggregate class `class`'s method `what`, as
/// SQLite's error ([`callback_error`]).
fn agg_fail<'a>(
    py: Python<'a>,
    class: &'a Py<PyAny>,
    what: &'static str,
) -> impl Fn(PyErr) -> rusqlite::Error + 'a {
    move |e| callback_error(py, e, class.bind(py), Box::new(RaisedInAggregate(what)))
}

/// Whether an exception in a callback is reported to
/// `sys.unraisablehook` (`enable_callback_tracebacks`).
static TRACEBACKS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `enable_callback_tracebacks(flag)`'s part here.
#[pyfunction]
fn set_callback_tracebacks(flag: bool) {
    TRACEBACKS.store(flag, std::sync::atomic::Ordering::Relaxed);
}

/// Report `exc` to `sys.unraisablehook` with `obj` as its object, as
/// `sqlite3` reports an exception in a callback it cannot raise.
#[pyfunction]
fn unraisable(exc: Bound<'_, pyo3::exceptions::PyBaseException>, obj: Bound<'_, PyAny>) {
    PyErr::from_value(exc.into_any()).write_unraisable(obj.py(), Some(&obj));
}

/// Report an exception of the callback `callable` that SQLite cannot
/// raise, when `enable_callback_tracebacks` asked for it.
fn report(py: Python<'_>, e: PyErr, callable: &Bound<'_, PyAny>) {
    if TRACEBACKS.load(std::sync::atomic::Ordering::Relaxed) {
        e.write_unraisable(py, Some(callable));
    }
}

/// A Python exception inside a function or aggregate, as `sqlite3` turns
/// it into the statement's error (its `set_sqlite_error`): a
/// `MemoryError` is SQLite's out of memory, an `OverflowError` SQLite's
/// "string or blob too big", anything else `message`; reported with the
/// callable as its object.
fn callback_error(
    py: Python<'_>,
    e: PyErr,
    callable: &Bound<'_, PyAny>,
    message: Box<dyn std::error::Error + Send + Sync>,
) -> rusqlite::Error {
    let code = if e.is_instance_of::<pyo3::exceptions::PyMemoryError>(py) {
        Some(ffi::SQLITE_NOMEM)
    } else if e.is_instance_of::<PyOverflowError>(py) {
        Some(ffi::SQLITE_TOOBIG)
    } else {
        None
    };
    report(py, e, callable);
    match code {
        // No message of ours: rusqlite would set it after the code, which
        // turns the code back into SQLITE_ERROR; SQLite's own message for
        // the code is the one wanted.
        Some(code) => rusqlite::Error::SqliteFailure(ffi::Error::new(code), None),
        None => rusqlite::Error::UserFunctionError(message),
    }
}

/// The arguments of a call, as Python values.
fn call_args<'py>(
    py: Python<'py>,
    ctx: &rusqlite::functions::Context<'_>,
) -> PyResult<Bound<'py, PyTuple>> {
    use rusqlite::types::ValueRef;
    let mut args = Vec::with_capacity(ctx.len());
    for i in 0..ctx.len() {
        let v = match ctx.get_raw(i) {
            ValueRef::Null => py.None(),
            ValueRef::Integer(i) => i.into_pyobject(py)?.into_any().unbind(),
            ValueRef::Real(f) => f.into_pyobject(py)?.into_any().unbind(),
            ValueRef::Text(t) => PyString::new(py, &String::from_utf8_lossy(t))
                .into_any()
                .unbind(),
            ValueRef::Blob(b) => PyBytes::new(py, b).into_any().unbind(),
        };
        args.push(v);
    }
    PyTuple::new(py, args)
}

impl rusqlite::functions::Aggregate<std::panic::AssertUnwindSafe<Py<PyAny>>, Value>
    for PyAggregate
{
    fn init(
        &self,
        _: &mut rusqlite::functions::Context<'_>,
    ) -> rusqlite::Result<std::panic::AssertUnwindSafe<Py<PyAny>>> {
        Python::attach(|py| {
            let obj = self
                .class
                .bind(py)
                .call0()
                .map_err(agg_fail(py, &self.class, "__init__"))?;
            Ok(std::panic::AssertUnwindSafe(obj.unbind()))
        })
    }

    fn step(
        &self,
        ctx: &mut rusqlite::functions::Context<'_>,
        acc: &mut std::panic::AssertUnwindSafe<Py<PyAny>>,
    ) -> rusqlite::Result<()> {
        Python::attach(|py| {
            let args = call_args(py, ctx).map_err(agg_fail(py, &self.class, "step"))?;
            let step = acc.bind(py).getattr("step").map_err(agg_fail(
                py,
                &self.class,
                "step not defined",
            ))?;
            step.call1(args)
                .map_err(agg_fail(py, &self.class, "step"))?;
            Ok(())
        })
    }

    fn finalize(
        &self,
        ctx: &mut rusqlite::functions::Context<'_>,
        acc: Option<std::panic::AssertUnwindSafe<Py<PyAny>>>,
    ) -> rusqlite::Result<Value> {
        let _ = ctx;
        // As sqlite3: no row stepped, no instance, NULL.
        let Some(acc) = acc else {
            return Ok(Value::Null);
        };
        Python::attach(|py| {
            let finalize = acc.bind(py).getattr("finalize").map_err(agg_fail(
                py,
                &self.class,
                "finalize not defined",
            ))?;
            let out = finalize
                .call0()
                .map_err(agg_fail(py, &self.class, "finalize"))?;
            result_value(&out, agg_fail(py, &self.class, "finalize"))
        })
    }
}

/// A Python window function class (`create_window_function`): an
/// aggregate with `value()` and `inverse(*args)`.
impl rusqlite::functions::WindowAggregate<std::panic::AssertUnwindSafe<Py<PyAny>>, Value>
    for PyAggregate
{
    fn value(
        &self,
        acc: Option<&mut std::panic::AssertUnwindSafe<Py<PyAny>>>,
    ) -> rusqlite::Result<Value> {
        let Some(acc) = acc else {
            return Ok(Value::Null);
        };
        Python::attach(|py| {
            let value = acc.bind(py).getattr("value").map_err(agg_fail(
                py,
                &self.class,
                "value not defined",
            ))?;
            let out = value.call0().map_err(agg_fail(py, &self.class, "value"))?;
            result_value(&out, agg_fail(py, &self.class, "value"))
        })
    }

    fn inverse(
        &self,
        ctx: &mut rusqlite::functions::Context<'_>,
        acc: &mut std::panic::AssertUnwindSafe<Py<PyAny>>,
    ) -> rusqlite::Result<()> {
        Python::attach(|py| {
            let args = call_args(py, ctx).map_err(agg_fail(py, &self.class, "inverse"))?;
            let inverse = acc.bind(py).getattr("inverse").map_err(agg_fail(
                py,
                &self.class,
                "inverse not defined",
            ))?;
            inverse
                .call1(args)
                .map_err(agg_fail(py, &self.class, "inverse"))?;
            Ok(())
        })
    }
}

/// What a Python function returned, as SQLite's result (an int past 64
/// bits is `fail`'s `OverflowError`, SQLite's "string or blob too big").
fn result_value(
    out: &Bound<'_, PyAny>,
    fail: impl Fn(PyErr) -> rusqlite::Error,
) -> rusqlite::Result<Value> {
    to_value(out, 0, None).map_err(fail)
}

/// The error a Python function's exception becomes inside SQLite; the
/// `sqlite3` module reports it with this message.
#[derive(Debug)]
struct RaisedInFunction;

impl std::fmt::Display for RaisedInFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("user-defined function raised exception")
    }
}

impl std::error::Error for RaisedInFunction {}

fn call_function(
    func: &Py<PyAny>,
    ctx: &rusqlite::functions::Context<'_>,
) -> rusqlite::Result<Value> {
    use rusqlite::types::ValueRef;
    Python::attach(|py| {
        let mut args = Vec::with_capacity(ctx.len());
        for i in 0..ctx.len() {
            let v = match ctx.get_raw(i) {
                ValueRef::Null => py.None(),
                ValueRef::Integer(i) => i
                    .into_pyobject(py)
                    .map(|o| o.into_any().unbind())
                    .unwrap_or(py.None()),
                ValueRef::Real(f) => f
                    .into_pyobject(py)
                    .map(|o| o.into_any().unbind())
                    .unwrap_or(py.None()),
                ValueRef::Text(t) => PyString::new(py, &String::from_utf8_lossy(t))
                    .into_any()
                    .unbind(),
                ValueRef::Blob(b) => PyBytes::new(py, b).into_any().unbind(),
            };
            args.push(v);
        }
        let fail = |e| callback_error(py, e, func.bind(py), Box::new(RaisedInFunction));
        let args = PyTuple::new(py, args).map_err(fail)?;
        let out = func.bind(py).call1(args).map_err(fail)?;
        result_value(&out, fail)
    })
}

/// A statement's result: the rows are converted to Python objects as they
/// are fetched, or handed to Arrow whole.
#[pyclass(frozen, module = "pleroma._native")]
struct NativeResult {
    rows: Rows,
    next: Mutex<usize>,
}

#[pymethods]
impl NativeResult {
    /// Up to `n` more rows (all that are left when `None`), as tuples.
    #[pyo3(signature = (n=None, text=None))]
    fn fetch<'py>(
        &self,
        py: Python<'py>,
        n: Option<usize>,
        text: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let start = *next;
        let end = match n {
            Some(n) => start.saturating_add(n).min(self.rows.rows.len()),
            None => self.rows.rows.len(),
        };
        let list = PyList::empty(py);
        for row in &self.rows.rows[start..end] {
            let items = row
                .iter()
                .map(|v| to_py_value(py, v, text.as_ref()))
                .collect::<PyResult<Vec<_>>>()?;
            list.append(PyTuple::new(py, items)?)?;
        }
        *next = end;
        Ok(list)
    }

    /// The next row, or `None`.
    #[pyo3(signature = (text=None))]
    fn fetchone<'py>(
        &self,
        py: Python<'py>,
        text: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let Some(row) = self.rows.rows.get(*next) else {
            return Ok(None);
        };
        *next += 1;
        let items = row
            .iter()
            .map(|v| to_py_value(py, v, text.as_ref()))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Some(PyTuple::new(py, items)?))
    }

    /// The rows not fetched yet, as an Arrow C data interface pair of
    /// capsules (`arrow_schema`, `arrow_array`) of one struct array: the
    /// PyCapsule protocol's `__arrow_c_array__`. Nothing is copied row by
    /// row into Python.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(
        Bound<'py, pyo3::types::PyCapsule>,
        Bound<'py, pyo3::types::PyCapsule>,
    )> {
        let _ = requested_schema;
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let rest = if *next == 0 {
            self.rows.clone()
        } else {
            Rows::new(self.rows.columns.to_vec(), self.rows.rows[*next..].to_vec())
        };
        *next = self.rows.rows.len();
        drop(next);
        let batch = py.detach(|| rest.to_arrow());
        let data = arrow_array::StructArray::from(batch);
        let data = arrow_array::Array::to_data(&data);
        let (array, schema) =
            arrow_array::ffi::to_ffi(&data).map_err(|e| DatabaseError::new_err(e.to_string()))?;
        let schema = pyo3::types::PyCapsule::new(py, schema, Some(c"arrow_schema".to_owned()))?;
        let array = pyo3::types::PyCapsule::new(py, array, Some(c"arrow_array".to_owned()))?;
        Ok((schema, array))
    }

    /// The identity of the rows: the memo hands out the same rows again
    /// for the same answer (never a copy), so a driver may keep their
    /// Python form under this key while it holds this result.
    fn key(&self) -> usize {
        &*self.rows.rows as *const Vec<Vec<Value>> as usize
    }

    /// Whether no row was fetched yet.
    fn untouched(&self) -> bool {
        *self.next.lock().unwrap_or_else(|e| e.into_inner()) == 0
    }

    /// Mark every row fetched (the driver had their Python form already).
    fn skip_all(&self) {
        *self.next.lock().unwrap_or_else(|e| e.into_inner()) = self.rows.rows.len();
    }

    /// How many rows are left to fetch.
    fn remaining(&self) -> usize {
        let next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        self.rows.rows.len() - *next
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Native>()?;
    m.add_class::<NativeResult>()?;
    m.add("Warning", py.get_type::<Warning>())?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("InterfaceError", py.get_type::<InterfaceError>())?;
    m.add("DatabaseError", py.get_type::<DatabaseError>())?;
    m.add("DataError", py.get_type::<DataError>())?;
    m.add("OperationalError", py.get_type::<OperationalError>())?;
    m.add("IntegrityError", py.get_type::<IntegrityError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    m.add("ProgrammingError", py.get_type::<ProgrammingError>())?;
    m.add("NotSupportedError", py.get_type::<NotSupportedError>())?;
    m.add("sqlite_version", rusqlite::version())?;
    m.add_function(pyo3::wrap_pyfunction!(set_callback_tracebacks, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(unraisable, m)?)?;
    Ok(())
}
