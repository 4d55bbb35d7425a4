//! Every raw SQLite call Pleroma makes: `sqlite3_complete`, the pre-update
//! hook, WAL snapshots (the identity of a committed state, for shared
//! planes), the transaction state, the connection counters and the
//! read path's `PRAGMA data_version`. rusqlite wraps everything else.
//!
//! The pre-update hook is registered here rather than through rusqlite's
//! `preupdate_hook` feature, which turns on bindgen (and so needs libclang
//! to build). The bundled SQLite is compiled with
//! `SQLITE_ENABLE_PREUPDATE_HOOK` from `LIBSQLITE3_FLAGS` (see
//! `.cargo/config.toml` and `build.rs`), and libsqlite3-sys's pre-generated
//! bindings already declare the `sqlite3_preupdate_*` functions.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use rusqlite::ffi;
use rusqlite::types::ValueRef;

/// SQLite's own test for "this text ends a complete statement" (the one the
/// `sqlite3` shell uses), which knows about quotes, comments and trigger
/// bodies. Bytes, so that a text that is not UTF-8 (a schema's, as the
/// `sqlite3` shell's `.dump` reads it) can be asked too.
pub fn is_complete(sql: impl AsRef<[u8]>) -> bool {
    let Ok(c) = CString::new(sql.as_ref()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call;
    // sqlite3_complete only reads it and needs no connection.
    unsafe { ffi::sqlite3_complete(c.as_ptr()) != 0 }
}

/// What the build must set for the change hook to exist.
pub(crate) const HOOK_FLAG_HELP: &str = "the bundled SQLite was built without \
SQLITE_ENABLE_PREUPDATE_HOOK, which Pleroma's change hook needs: set \
LIBSQLITE3_FLAGS=\"SQLITE_ENABLE_PREUPDATE_HOOK\" when building (for instance in \
the [env] table of .cargo/config.toml) and rebuild";

/// Whether the linked SQLite has the pre-update hook compiled in.
pub(crate) fn has_preupdate_hook() -> bool {
    // SAFETY: a static NUL-terminated string; sqlite3_compileoption_used
    // only reads it and needs no connection.
    unsafe { ffi::sqlite3_compileoption_used(c"ENABLE_PREUPDATE_HOOK".as_ptr()) != 0 }
}

/// The kind of row change a pre-update event announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Insert,
    Delete,
    Update,
    /// An incremental BLOB I/O write (`sqlite3_blob_write`) into this
    /// column: the row stays, and no new value is given.
    BlobWrite(i32),
}

/// One pre-update event, valid only inside the callback.
pub(crate) struct Event<'a> {
    db: *mut ffi::sqlite3,
    pub op: Op,
    /// Schema name (`main`, `temp`, an ATTACH alias), as SQLite passes it.
    pub schema: &'a [u8],
    pub table: &'a [u8],
}

impl Event<'_> {
    /// Column `i` of the row before the change (DELETE, UPDATE).
    pub fn old_value(&self, i: i32) -> Option<ValueRef<'_>> {
        let mut v: *mut ffi::sqlite3_value = std::ptr::null_mut();
        // SAFETY: `self.db` is the connection SQLite passed to the running
        // pre-update callback, the only place an `Event` exists; SQLite
        // checks `i` and the operation and returns an error code otherwise.
        let rc = unsafe { ffi::sqlite3_preupdate_old(self.db, i, &mut v) };
        // SAFETY: on SQLITE_OK `v` is a protected value that lives until the
        // callback returns, which bounds the borrow of `self`.
        (rc == ffi::SQLITE_OK).then(|| unsafe { value_ref(v) })
    }

    /// 0 for a row of the statement itself, 1 and more for a trigger's or
    /// a foreign-key action's (`sqlite3_preupdate_depth`).
    pub fn depth(&self) -> i32 {
        // SAFETY: as in `old_value`; the call only reads the running VM.
        unsafe { ffi::sqlite3_preupdate_depth(self.db) }
    }

    /// Column `i` of the row after the change (INSERT, UPDATE).
    pub fn new_value(&self, i: i32) -> Option<ValueRef<'_>> {
        let mut v: *mut ffi::sqlite3_value = std::ptr::null_mut();
        // SAFETY: as in `old_value`.
        let rc = unsafe { ffi::sqlite3_preupdate_new(self.db, i, &mut v) };
        // SAFETY: as in `old_value`.
        (rc == ffi::SQLITE_OK).then(|| unsafe { value_ref(v) })
    }
}

/// A borrowed view of an `sqlite3_value`, without copying text or blobs.
///
/// # Safety
/// `v` must be a valid value that outlives `'a`.
unsafe fn value_ref<'a>(v: *mut ffi::sqlite3_value) -> ValueRef<'a> {
    // SAFETY: the caller guarantees `v` is valid for `'a`. Text and blob
    // pointers stay valid until the value changes, which it does not while
    // the callback runs; the length is read after the pointer, as SQLite
    // asks.
    unsafe {
        match ffi::sqlite3_value_type(v) {
            ffi::SQLITE_NULL => ValueRef::Null,
            ffi::SQLITE_INTEGER => ValueRef::Integer(ffi::sqlite3_value_int64(v)),
            ffi::SQLITE_FLOAT => ValueRef::Real(ffi::sqlite3_value_double(v)),
            ffi::SQLITE_TEXT => {
                // A record's text is not NUL-terminated: `sqlite3_value_text`
                // copies it to add one (about 300 instructions a row in a
                // batch). Its bytes, as `sqlite3_value_blob` gives them, are
                // the same when they are UTF-8 (the value stays TEXT).
                let p = if ffi::sqlite3_value_encoding(v) == ffi::SQLITE_UTF8 {
                    ffi::sqlite3_value_blob(v).cast::<u8>()
                } else {
                    ffi::sqlite3_value_text(v)
                };
                let n = ffi::sqlite3_value_bytes(v) as usize;
                if p.is_null() {
                    ValueRef::Text(&[])
                } else {
                    ValueRef::Text(std::slice::from_raw_parts(p, n))
                }
            }
            _ => {
                let p = ffi::sqlite3_value_blob(v) as *const u8;
                let n = ffi::sqlite3_value_bytes(v) as usize;
                if p.is_null() {
                    ValueRef::Blob(&[])
                } else {
                    ValueRef::Blob(std::slice::from_raw_parts(p, n))
                }
            }
        }
    }
}

/// A statement prepared once and stepped for one row at a time, without
/// rusqlite's statement cache (its lookup and its row wrappers cost more
/// than the step itself for the one-row evaluations of expression
/// dimensions).
pub(crate) struct OneRow {
    stmt: *mut ffi::sqlite3_stmt,
    db: *mut ffi::sqlite3,
}

// SAFETY: the statement is used only through `&mut self` (one thread at a
// time), and its connection is owned next to it (see `OneRow::prepare`).
unsafe impl Send for OneRow {}

impl OneRow {
    /// Prepare `sql` on `db`.
    ///
    /// # Safety
    /// `db` must stay open for as long as the returned statement lives.
    pub(crate) unsafe fn prepare(db: *mut ffi::sqlite3, sql: &str) -> Result<OneRow, String> {
        let c = CString::new(sql).map_err(|e| e.to_string())?;
        let mut stmt = std::ptr::null_mut();
        // SAFETY: `db` is open (the caller's contract); `c` outlives the call.
        let rc =
            unsafe { ffi::sqlite3_prepare_v2(db, c.as_ptr(), -1, &mut stmt, std::ptr::null_mut()) };
        if rc != ffi::SQLITE_OK || stmt.is_null() {
            // SAFETY: `db` is open.
            return Err(unsafe { errmsg(db) });
        }
        Ok(OneRow { stmt, db })
    }

    /// Step to the first row and give `n` columns of it as owned values;
    /// SQLite's error message if the step fails or gives no row.
    pub(crate) fn first_row(&mut self, n: usize) -> Result<Vec<rusqlite::types::Value>, String> {
        // SAFETY: `stmt` is a live statement of the open `db`.
        unsafe {
            ffi::sqlite3_reset(self.stmt);
            let rc = ffi::sqlite3_step(self.stmt);
            if rc != ffi::SQLITE_ROW {
                let msg = errmsg(self.db);
                ffi::sqlite3_reset(self.stmt);
                return Err(if rc == ffi::SQLITE_DONE {
                    "no row".into()
                } else {
                    msg
                });
            }
            let out = (0..n)
                .map(|i| {
                    let v = value_ref(ffi::sqlite3_column_value(self.stmt, i as c_int));
                    rusqlite::types::Value::try_from(v)
                        .map_err(|_| "text that is not UTF-8".to_owned())
                })
                .collect();
            ffi::sqlite3_reset(self.stmt);
            out
        }
    }
}

impl Drop for OneRow {
    fn drop(&mut self) {
        // SAFETY: finalized once, while `db` is still open.
        unsafe {
            ffi::sqlite3_finalize(self.stmt);
        }
    }
}

/// The connection's last error message.
///
/// # Safety
/// `db` must be an open connection.
unsafe fn errmsg(db: *mut ffi::sqlite3) -> String {
    // SAFETY: SQLite returns a NUL-terminated string owned by `db`.
    unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db)) }
        .to_string_lossy()
        .into_owned()
}

type Callback = Box<dyn FnMut(&Event<'_>) + Send>;

/// A registered pre-update hook. Dropping it unregisters the hook and frees
/// the callback; it must drop before the connection closes.
pub(crate) struct PreUpdateHook {
    db: *mut ffi::sqlite3,
    boxed: *mut Callback,
}

// SAFETY: the hook is only touched through the connection that owns it
// (registration and removal), and the callback itself is `Send`.
unsafe impl Send for PreUpdateHook {}

impl PreUpdateHook {
    /// Register `f` as `db`'s pre-update hook (replacing any other).
    ///
    /// # Safety
    ///
    /// The returned guard keeps `db`'s raw handle and uses it when dropped:
    /// it must be dropped while `db` is still open. (`Connection`'s `Drop`
    /// drops it first, explicitly, whatever the order of its fields.)
    pub unsafe fn install(
        db: &rusqlite::Connection,
        f: impl FnMut(&Event<'_>) + Send + 'static,
    ) -> Result<PreUpdateHook, String> {
        if !has_preupdate_hook() {
            return Err(HOOK_FLAG_HELP.into());
        }
        let boxed: *mut Callback = Box::into_raw(Box::new(Box::new(f)));
        // SAFETY: the handle is only used to register the hook on this
        // connection, which outlives the returned guard (the caller's
        // contract).
        let handle = unsafe { db.handle() };
        // SAFETY: `boxed` stays valid until `Drop` unregisters the hook and
        // frees it; `trampoline` matches the callback's C signature.
        unsafe {
            ffi::sqlite3_preupdate_hook(handle, Some(trampoline), boxed.cast::<c_void>());
        }
        Ok(PreUpdateHook { db: handle, boxed })
    }
}

impl Drop for PreUpdateHook {
    fn drop(&mut self) {
        // SAFETY: `self.db` is still open (see `install`); after the call
        // SQLite no longer refers to `boxed`, which we then free exactly once.
        unsafe {
            ffi::sqlite3_preupdate_hook(self.db, None, std::ptr::null_mut());
            drop(Box::from_raw(self.boxed));
        }
    }
}

unsafe extern "C" fn trampoline(
    ctx: *mut c_void,
    db: *mut ffi::sqlite3,
    op: c_int,
    schema: *const c_char,
    table: *const c_char,
    _old_rowid: ffi::sqlite3_int64,
    _new_rowid: ffi::sqlite3_int64,
) {
    // SAFETY: SQLite passes `db` of the running statement. An incremental
    // BLOB write arrives as a DELETE with this set to the column written.
    let blob = unsafe { ffi::sqlite3_preupdate_blobwrite(db) };
    let op = match op {
        _ if blob >= 0 => Op::BlobWrite(blob),
        ffi::SQLITE_INSERT => Op::Insert,
        ffi::SQLITE_DELETE => Op::Delete,
        ffi::SQLITE_UPDATE => Op::Update,
        _ => return,
    };
    // SAFETY: SQLite passes NUL-terminated names valid during the call.
    let (schema, table) = unsafe { (CStr::from_ptr(schema), CStr::from_ptr(table)) };
    let event = Event {
        db,
        op,
        schema: schema.to_bytes(),
        table: table.to_bytes(),
    };
    // SAFETY: `ctx` is the `Callback` registered by `install`, alive until
    // the hook is unregistered; SQLite calls the hook from one thread at a
    // time per connection.
    let f = unsafe { &mut *ctx.cast::<Callback>() };
    // A panic must never unwind into C; the callback faults its planes
    // itself, so there is nothing more to do here.
    let _ = catch_unwind(AssertUnwindSafe(|| f(&event)));
}

/// Whether `main` has a write transaction open on this connection
/// (`sqlite3_txn_state`): a transaction that has written, or `BEGIN
/// IMMEDIATE`.
pub(crate) fn writing(db: &rusqlite::Connection) -> bool {
    // SAFETY: the handle is valid for the life of `db`; the schema name is a
    // static NUL-terminated string; sqlite3_txn_state only reads.
    unsafe { ffi::sqlite3_txn_state(db.handle(), c"main".as_ptr()) == ffi::SQLITE_TXN_WRITE }
}

/// Set what `last_insert_rowid()` returns (Pleroma's own catalog writes
/// must not move it).
pub(crate) fn set_last_insert_rowid(db: &rusqlite::Connection, rowid: i64) {
    // SAFETY: the handle belongs to the open connection `db`, and
    // sqlite3_set_last_insert_rowid only stores the value.
    unsafe { ffi::sqlite3_set_last_insert_rowid(db.handle(), rowid) }
}

/// `(changes, total_changes)` of the connection running a SQL function.
pub(crate) fn counters_of(ctx: &rusqlite::functions::Context<'_>) -> rusqlite::Result<(i64, i64)> {
    // SAFETY: the connection reference lives only for this call, inside the
    // function SQLite is running on that connection, and is used only to
    // read its counters.
    let conn = unsafe { ctx.get_connection()? };
    Ok((conn.changes() as i64, conn.total_changes() as i64))
}

/// The identity of one committed state of a WAL database: SQLite's
/// `sqlite3_snapshot` of a read transaction. Two are equal when they name
/// the same WAL generation and the same last frame, which is the same
/// committed state of the file (`sqlite3_snapshot_cmp`).
pub(crate) struct WalSnapshot(*mut ffi::sqlite3_snapshot);

// SAFETY: a snapshot is an immutable block that SQLite only reads (in
// sqlite3_snapshot_cmp) and frees (sqlite3_snapshot_free, thread-safe);
// it is not tied to the connection that took it.
unsafe impl Send for WalSnapshot {}
// SAFETY: as above: shared references only ever read it.
unsafe impl Sync for WalSnapshot {}

impl WalSnapshot {
    /// The snapshot of `db`'s read transaction on `main`; `db` must be
    /// inside a transaction that has not written (SQLite opens the read
    /// transaction if none is open). `None` when the database is not in
    /// WAL mode or SQLite refuses for any other reason.
    pub fn of(db: &rusqlite::Connection) -> Option<WalSnapshot> {
        let mut p: *mut ffi::sqlite3_snapshot = std::ptr::null_mut();
        // SAFETY: the handle belongs to the open connection `db`; on
        // SQLITE_OK, `p` is a new snapshot that we own and free in `Drop`.
        let rc = unsafe { ffi::sqlite3_snapshot_get(db.handle(), c"main".as_ptr(), &mut p) };
        (rc == ffi::SQLITE_OK && !p.is_null()).then_some(WalSnapshot(p))
    }
}

impl Clone for WalSnapshot {
    fn clone(&self) -> WalSnapshot {
        let size = std::mem::size_of::<ffi::sqlite3_snapshot>();
        // SAFETY: a fresh allocation of the snapshot's size, filled with a
        // copy of the live snapshot `self.0` (a plain block of bytes, as
        // sqlite3_snapshot_get makes it); freed by sqlite3_snapshot_free,
        // which is sqlite3_free.
        unsafe {
            let p = ffi::sqlite3_malloc(size as c_int).cast::<ffi::sqlite3_snapshot>();
            assert!(!p.is_null(), "out of memory copying a WAL snapshot");
            std::ptr::copy_nonoverlapping(self.0, p, 1);
            WalSnapshot(p)
        }
    }
}

impl WalSnapshot {
    /// Whether this names an older committed state than `other`.
    pub fn older_than(&self, other: &WalSnapshot) -> bool {
        // SAFETY: both pointers are live snapshots; sqlite3_snapshot_cmp
        // only reads them.
        unsafe { ffi::sqlite3_snapshot_cmp(self.0, other.0) < 0 }
    }
}

impl PartialEq for WalSnapshot {
    fn eq(&self, other: &WalSnapshot) -> bool {
        // SAFETY: both pointers are live snapshots (freed only in `Drop`);
        // sqlite3_snapshot_cmp only reads them.
        unsafe { ffi::sqlite3_snapshot_cmp(self.0, other.0) == 0 }
    }
}

impl Drop for WalSnapshot {
    fn drop(&mut self) {
        // SAFETY: we own the snapshot and free it exactly once.
        unsafe { ffi::sqlite3_snapshot_free(self.0) }
    }
}

/// `PRAGMA data_version`, prepared once and stepped directly. The read path
/// asks it before every plane answer (the only way to see another
/// process's commit), and through rusqlite's statement cache it cost half
/// again SQLite's own work (`docs/benchmarks.md`, issue 20). Finalized when
/// dropped, which must happen while its connection is open.
pub(crate) struct DataVersion {
    db: *mut ffi::sqlite3,
    stmt: *mut ffi::sqlite3_stmt,
}

// SAFETY: the statement is only stepped through the connection that owns
// it, from that connection's thread of the moment.
unsafe impl Send for DataVersion {}

impl DataVersion {
    /// # Safety
    ///
    /// The returned statement keeps `db`'s raw handle: it must be dropped
    /// while `db` is still open. (`Connection`'s `Drop` drops it first,
    /// explicitly, whatever the order of its fields.)
    pub unsafe fn prepare(db: &rusqlite::Connection) -> rusqlite::Result<DataVersion> {
        // SAFETY: the handle is valid while `db` is open (the caller's
        // contract covers the statement's life).
        let handle = unsafe { db.handle() };
        let mut stmt = std::ptr::null_mut();
        // SAFETY: a valid handle, a NUL-terminated text, and an out pointer
        // SQLite fills with a statement (or leaves null on error).
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                handle,
                c"PRAGMA data_version".as_ptr(),
                -1,
                &mut stmt,
                std::ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(error(handle, rc));
        }
        Ok(DataVersion { db: handle, stmt })
    }

    /// Step the statement once, read its value, and reset it (which ends
    /// the read transaction it began in autocommit).
    pub fn read(&self) -> rusqlite::Result<i64> {
        // SAFETY: `stmt` is a live statement of the open connection `db`
        // (finalized only in `Drop`); step, column and reset are called in
        // the order SQLite requires, the column only after a row.
        unsafe {
            let rc = ffi::sqlite3_step(self.stmt);
            let v = (rc == ffi::SQLITE_ROW).then(|| ffi::sqlite3_column_int64(self.stmt, 0));
            let reset = ffi::sqlite3_reset(self.stmt);
            match v {
                Some(v) => Ok(v),
                None if rc == ffi::SQLITE_DONE => Err(error(self.db, reset)),
                None => Err(error(self.db, rc)),
            }
        }
    }
}

impl Drop for DataVersion {
    fn drop(&mut self) {
        // SAFETY: the connection is still open (see `prepare`), and the
        // statement is finalized exactly once.
        unsafe {
            ffi::sqlite3_finalize(self.stmt);
        }
    }
}

/// A statement prepared once and run again and again with bound values,
/// outside rusqlite's statement cache, whose lookup, return and rebinding
/// cost about 1,500 instructions a run: the appender's INSERT
/// (`connection/append.rs`), and a user's statement run twice in a row
/// (`Connection::exec_user`). Finalized when dropped, which must happen
/// while its connection is open.
pub(crate) struct Prepared {
    db: *mut ffi::sqlite3,
    stmt: *mut ffi::sqlite3_stmt,
}

impl Prepared {
    /// # Safety
    ///
    /// The statement keeps `db`'s raw handle: it must be dropped while `db`
    /// is still open (the appender that holds it borrows the connection).
    pub unsafe fn prepare(db: &rusqlite::Connection, sql: &str) -> rusqlite::Result<Prepared> {
        // SAFETY: the handle is valid while `db` is open (the caller's
        // contract covers the statement's life).
        let handle = unsafe { db.handle() };
        let mut stmt = std::ptr::null_mut();
        let len = c_int::try_from(sql.len()).map_err(|_| rusqlite::Error::InvalidQuery)?;
        // SAFETY: a valid handle, a text of `len` bytes, and an out pointer
        // SQLite fills with a statement (or leaves null on error).
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                handle,
                sql.as_ptr().cast(),
                len,
                &mut stmt,
                std::ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(error(handle, rc));
        }
        if stmt.is_null() {
            return Err(rusqlite::Error::InvalidQuery);
        }
        Ok(Prepared { db: handle, stmt })
    }

    /// Bind `row` (one value per parameter, in order), step once and reset:
    /// the outcome rusqlite's `Statement::execute` gives.
    pub fn run(&self, row: &[rusqlite::types::Value]) -> rusqlite::Result<()> {
        self.bind_all(row)?;
        self.step_reset().map(drop)
    }

    /// As rusqlite's `Statement::execute(params_from_iter(params))`: the
    /// same parameter count check and errors, then `changes()`.
    pub fn execute(&self, params: &[rusqlite::types::Value]) -> rusqlite::Result<usize> {
        // SAFETY: `stmt` is a live statement (finalized only in `Drop`).
        let expected = unsafe { ffi::sqlite3_bind_parameter_count(self.stmt) } as usize;
        self.bind_all(&params[..params.len().min(expected)])?;
        let given = params.len().min(expected + 1);
        if given != expected {
            return Err(rusqlite::Error::InvalidParameterCount(given, expected));
        }
        self.step_reset()
    }

    /// `sqlite3_stmt_readonly`, as rusqlite's `Statement::readonly`.
    pub fn readonly(&self) -> bool {
        // SAFETY: a live statement.
        unsafe { ffi::sqlite3_stmt_readonly(self.stmt) != 0 }
    }

    /// Step once and reset: `changes()` when the statement is done.
    fn step_reset(&self) -> rusqlite::Result<usize> {
        // SAFETY: a live statement of the open connection `db`; step and
        // reset in the order SQLite requires.
        unsafe {
            let rc = ffi::sqlite3_step(self.stmt);
            let reset = ffi::sqlite3_reset(self.stmt);
            match rc {
                ffi::SQLITE_DONE if reset == ffi::SQLITE_OK => {
                    Ok(ffi::sqlite3_changes64(self.db) as usize)
                }
                ffi::SQLITE_DONE => Err(error(self.db, reset)),
                ffi::SQLITE_ROW => Err(rusqlite::Error::ExecuteReturnedResults),
                _ => Err(error(self.db, rc)),
            }
        }
    }

    /// Bind each value of `row` to its parameter (1, 2, …).
    fn bind_all(&self, row: &[rusqlite::types::Value]) -> rusqlite::Result<()> {
        use rusqlite::types::Value;
        // SAFETY: `stmt` is a live statement of the open connection `db`
        // (finalized only in `Drop`); each bind copies its value
        // (SQLITE_TRANSIENT) and checks the index.
        unsafe {
            for (i, v) in row.iter().enumerate() {
                let i = c_int::try_from(i + 1).map_err(|_| rusqlite::Error::InvalidQuery)?;
                let rc = match v {
                    Value::Null => ffi::sqlite3_bind_null(self.stmt, i),
                    Value::Integer(x) => ffi::sqlite3_bind_int64(self.stmt, i, *x),
                    Value::Real(x) => ffi::sqlite3_bind_double(self.stmt, i, *x),
                    Value::Text(t) => ffi::sqlite3_bind_text64(
                        self.stmt,
                        i,
                        t.as_ptr().cast(),
                        t.len() as u64,
                        ffi::SQLITE_TRANSIENT(),
                        ffi::SQLITE_UTF8 as u8,
                    ),
                    Value::Blob(b) => ffi::sqlite3_bind_blob64(
                        self.stmt,
                        i,
                        b.as_ptr().cast(),
                        b.len() as u64,
                        ffi::SQLITE_TRANSIENT(),
                    ),
                };
                if rc != ffi::SQLITE_OK {
                    return Err(error(self.db, rc));
                }
            }
        }
        Ok(())
    }
}

// SAFETY: the statement is only stepped through the connection (or the
// appender borrowing it) that owns it, from that connection's thread of the
// moment; SQLite's default threading mode serializes a connection's calls.
unsafe impl Send for Prepared {}

impl Drop for Prepared {
    fn drop(&mut self) {
        // SAFETY: the connection is still open (see `prepare`), and the
        // statement is finalized exactly once.
        unsafe {
            ffi::sqlite3_finalize(self.stmt);
        }
    }
}

/// The error SQLite reports for `rc` on `db`, as rusqlite would give it.
fn error(db: *mut ffi::sqlite3, rc: c_int) -> rusqlite::Error {
    // SAFETY: `db` is an open connection; `sqlite3_errmsg` returns a
    // NUL-terminated text that stays valid until the next call on it, and
    // is copied at once.
    let msg = unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db)) }
        .to_string_lossy()
        .into_owned();
    rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some(msg))
}

/// Whether a file other than main and temp is attached
/// (`sqlite3_db_name`, which reads the connection's list and opens no
/// transaction).
pub(crate) fn attached_files(db: &rusqlite::Connection) -> bool {
    // SAFETY: the handle is valid for the life of `db`; index 2 is the
    // first attached file, and SQLite returns null past the last one.
    unsafe { !ffi::sqlite3_db_name(db.handle(), 2).is_null() }
}

/// The names of the connection's schemas, main first (`sqlite3_db_name`:
/// no SQL, no transaction). Temp is left out when it was never made.
pub(crate) fn schema_names(db: &rusqlite::Connection) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0.. {
        // SAFETY: the handle is valid for the life of `db`; SQLite returns
        // null past the last schema, and a name it returns is a
        // NUL-terminated string valid until the schema list changes (it is
        // copied at once).
        let name = unsafe { ffi::sqlite3_db_name(db.handle(), i) };
        if name.is_null() {
            break;
        }
        // SAFETY: as above.
        let name = unsafe { std::ffi::CStr::from_ptr(name) };
        out.push(name.to_string_lossy().into_owned());
    }
    out
}

/// The process's hard heap limit in bytes (0: none), read without changing
/// it (`sqlite3_hard_heap_limit64` with a negative argument). Process-wide:
/// any connection's `PRAGMA hard_heap_limit` sets it.
pub(crate) fn hard_heap_limit() -> i64 {
    // SAFETY: a negative argument only reads the limit.
    unsafe { ffi::sqlite3_hard_heap_limit64(-1) }
}
