//! Pleroma's own bookkeeping is invisible to the user's connection counters.
//!
//! The catalog writes of `pleroma_attach`, `pleroma_limb` and
//! `pleroma_detach` are real row changes on the user's connection, which
//! would move `last_insert_rowid()`, `changes()` and `total_changes()`.
//! After them the router puts `last_insert_rowid` back
//! (`sqlite3_set_last_insert_rowid`) and overrides the two SQL functions
//! `changes()` and `total_changes()` (an application function of the same
//! name and arity overrides a built-in one):
//!
//! - `total_changes()` is SQLite's count minus the rows Pleroma changed;
//! - `changes()` is the user's value from before the bookkeeping for as long
//!   as no statement of the user's has set it since. Every bookkeeping step
//!   ends with a write of exactly one row, and a user statement either
//!   changes rows (so `total_changes` moves) or sets `changes` to 0, so
//!   "both still as the bookkeeping left them" identifies that state.

use std::sync::{Arc, Mutex};

use rusqlite::functions::FunctionFlags;

#[derive(Default)]
struct Adjust {
    /// Rows changed by Pleroma's own writes on this connection.
    ours: i64,
    /// `(the user's changes(), total and changes right after our write)`.
    hidden: Option<(i64, i64, i64)>,
}

impl Adjust {
    fn changes(&self, (changes, total): (i64, i64)) -> i64 {
        match self.hidden {
            Some((user, t, c)) if t == total && c == changes => user,
            _ => changes,
        }
    }
}

/// The counters' corrections for one connection.
#[derive(Clone, Default)]
pub(crate) struct UserCounters(Arc<Mutex<Adjust>>);

impl UserCounters {
    /// Register the overriding `changes()` and `total_changes()` on `db`.
    pub fn register(db: &rusqlite::Connection) -> rusqlite::Result<UserCounters> {
        let me = UserCounters::default();
        let flags = FunctionFlags::SQLITE_UTF8;
        let a = me.0.clone();
        db.create_scalar_function("changes", 0, flags, move |ctx| {
            let now = crate::ffi::counters_of(ctx)?;
            Ok(a.lock().unwrap_or_else(|e| e.into_inner()).changes(now))
        })?;
        let a = me.0.clone();
        db.create_scalar_function("total_changes", 0, flags, move |ctx| {
            let (_, total) = crate::ffi::counters_of(ctx)?;
            Ok(total - a.lock().unwrap_or_else(|e| e.into_inner()).ours)
        })?;
        Ok(me)
    }

    /// A statement of the user's that sets `changes()` (an INSERT, UPDATE
    /// or DELETE, failed or not) has just ended: SQLite's raw count is the
    /// user's now, even when it equals what Pleroma's last write left (a
    /// failed INSERT after bookkeeping that ended with 0 rows).
    pub fn user_set_changes(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).hidden = None;
    }

    /// Before Pleroma's own work: the last rowid, SQLite's `(changes,
    /// total)` and the user's `changes()`.
    fn before(&self, db: &rusqlite::Connection) -> (i64, (i64, i64), i64) {
        let rowid = db.last_insert_rowid();
        let before = (db.changes() as i64, db.total_changes() as i64);
        let user = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .changes(before);
        (rowid, before, user)
    }

    /// Run Pleroma's COMMIT of a wrapped statement `f`: what it writes of
    /// SQLite's own (FTS5 flushes its buffer into its shadow tables at a
    /// commit) counts in `total_changes()` as it does in autocommit, but
    /// `changes()` stays the statement's, as when the commit is the
    /// statement's own.
    pub fn committing<T>(
        &self,
        db: &rusqlite::Connection,
        f: impl FnOnce() -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        let (rowid, before, user) = self.before(db);
        let r = f();
        let after = (db.changes() as i64, db.total_changes() as i64);
        crate::ffi::set_last_insert_rowid(db, rowid);
        if after.0 != before.0 {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).hidden =
                Some((user, after.1, after.0));
        }
        r
    }

    /// The wrap's COMMIT failed (a deferred foreign key) after the user's
    /// statement changed `rows` rows, and rolled them back: as in
    /// autocommit, they count in neither `changes()` nor `total_changes()`.
    pub fn statement_rolled_back(&self, db: &rusqlite::Connection, rows: i64) {
        let now = (db.changes() as i64, db.total_changes() as i64);
        let mut a = self.0.lock().unwrap_or_else(|e| e.into_inner());
        a.ours += rows;
        a.hidden = Some((0, now.1, now.0));
    }

    /// `total_changes()` as the user sees it: SQLite's count on `db`
    /// minus the rows Pleroma's own writes changed.
    pub fn total_changes(&self, db: &rusqlite::Connection) -> u64 {
        let ours = self.0.lock().unwrap_or_else(|e| e.into_inner()).ours;
        (db.total_changes() as i64 - ours).max(0) as u64
    }

    /// Run Pleroma's own writes `f` so that the user's counters do not see
    /// them. `f` must end with a statement that changes exactly one row.
    pub fn hidden<T>(
        &self,
        db: &rusqlite::Connection,
        f: impl FnOnce() -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        let (rowid, before, user) = self.before(db);
        // Under the deprecated `count_changes`, an INSERT, UPDATE or DELETE
        // returns its count as a row, which Pleroma's own writes do not
        // expect: off for them, on again after.
        let counting: bool = db
            .prepare_cached("PRAGMA count_changes")?
            .query_row([], |r| r.get(0))?;
        if counting {
            db.execute_batch("PRAGMA count_changes = OFF")?;
        }
        let r = f();
        if counting {
            db.execute_batch("PRAGMA count_changes = ON")?;
        }
        let after = (db.changes() as i64, db.total_changes() as i64);
        crate::ffi::set_last_insert_rowid(db, rowid);
        if crate::mutation::active("counters_moved") {
            return r;
        }
        let mut a = self.0.lock().unwrap_or_else(|e| e.into_inner());
        a.ours += after.1 - before.1;
        if after != before {
            a.hidden = Some((user, after.1, after.0));
        }
        r
    }
}
