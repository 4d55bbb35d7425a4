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

use crate::mutation::Mutation;
use std::cell::Cell;
use std::sync::{Arc, Mutex};

thread_local! {
    /// Rows SQLite counted in `total_changes()` during Pleroma's own schema
    /// statements, since the last [`UserCounters::hidden`] began. A schema
    /// statement changes no counted row itself; what it counts is FTS3/4/5
    /// writing out its pending rows at the statement's savepoint, which are
    /// the user's (plain SQLite writes them out at the commit, and counts
    /// them there).
    static NOT_OURS: Cell<i64> = const { Cell::new(0) };
    /// `changes()` as FTS's write-out in such a statement left it, which is
    /// the user's after the commit in plain SQLite (a COMMIT does not set
    /// `changes()` itself; the write-out's statements do).
    static WRITTEN_OUT: Cell<Option<i64>> = const { Cell::new(None) };
}

/// Run one of Pleroma's own schema statements (its tables and guard
/// indexes): the rows `total_changes()` counts meanwhile are the user's,
/// except one per FTS3/4 table of main that writes out its pending rows
/// here. At a savepoint FTS3/4 does that by running
/// `INSERT INTO f(f) VALUES('flush')`, which counts one row more than the
/// same write-out at a commit (`fts3SavepointMethod` and `fts3SyncMethod`
/// in `fts3.c`); a write-out always adds a row to the table's `_segdir`.
pub(crate) fn schema_statement(db: &rusqlite::Connection, sql: &str) -> rusqlite::Result<()> {
    let segdirs = fts3_segdirs(db)?;
    let tops = segdirs
        .iter()
        .map(|t| last_rowid(db, t))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let before = db.total_changes() as i64;
    let r = db.execute_batch(sql);
    let mut moved = db.total_changes() as i64 - before;
    if moved != 0 {
        WRITTEN_OUT.with(|w| w.set(Some(db.changes() as i64)));
    }
    for (t, top) in segdirs.iter().zip(tops) {
        if last_rowid(db, t)? != top {
            moved -= 1;
        }
    }
    NOT_OURS.with(|n| n.set(n.get() + moved));
    r
}

/// The `_segdir` shadow tables of main's FTS3/4 tables, quoted. (Main's
/// only: reading another schema here would open a read of it inside the
/// transaction, which blocks the commit when it is the same file attached
/// again. FTS tables of attached files are not compensated.)
fn fts3_segdirs(db: &rusqlite::Connection) -> rusqlite::Result<Vec<String>> {
    db.prepare_cached(
        "SELECT s.name FROM main.sqlite_schema v JOIN main.sqlite_schema s \
         ON s.name = v.name || '_segdir' AND s.type = 'table' \
         WHERE v.type = 'table' AND v.sql LIKE 'create virtual table%'",
    )?
    .query_map([], |r| {
        let name: String = r.get(0)?;
        Ok(format!("main.{}", crate::tokenize::quote(&name)))
    })?
    .collect()
}

fn last_rowid(db: &rusqlite::Connection, table: &str) -> rusqlite::Result<Option<i64>> {
    db.prepare_cached(&format!("SELECT max(rowid) FROM {table}"))?
        .query_row([], |r| r.get(0))
}

use rusqlite::functions::FunctionFlags;

#[derive(Default)]
struct Adjust {
    /// Rows changed by Pleroma's own writes on this connection.
    ours: i64,
    /// `(the user's changes(), total and changes right after our write)`.
    hidden: Option<(i64, i64, i64)>,
    /// `PRAGMA count_changes` as last read (`None`: not known since a
    /// statement that can set it). Reading it costs a compile each time:
    /// SQLite runs a flag PRAGMA's program only once.
    count_rows: Option<bool>,
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

    /// A statement that may set `PRAGMA count_changes` runs (any PRAGMA or
    /// EXPLAIN, or anything through the raw handle): read it again before
    /// the next of Pleroma's own writes.
    pub fn forget_count_rows(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).count_rows = None;
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
        // Either count moving means SQLite's commit-time writes ran (FTS's
        // last write-out statement may change one row, as Pleroma's last
        // did): `changes()` stays the user's.
        if after != before {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).hidden =
                Some((user, after.1, after.0));
        }
        r
    }

    /// The wrap's COMMIT failed (a deferred foreign key) after the user's
    /// statement changed `rows` rows of its own, and rolled them back: as
    /// in autocommit, they count in neither `changes()` nor
    /// `total_changes()` (its triggers' rows do count in the latter: SQLite
    /// adds them when each trigger program ends).
    pub fn statement_rolled_back(&self, db: &rusqlite::Connection, rows: i64) {
        let now = (db.changes() as i64, db.total_changes() as i64);
        let mut a = self.0.lock().unwrap_or_else(|e| e.into_inner());
        a.ours += rows;
        a.hidden = Some((0, now.1, now.0));
    }

    /// A statement that Pleroma runs once more, its first run undone whole
    /// (refused by the guard): rows SQLite counted in `total_changes()`
    /// since `total_before` (a trigger's that ended before the refusal)
    /// are not the user's.
    pub fn discount(&self, db: &rusqlite::Connection, total_before: i64) {
        let moved = db.total_changes() as i64 - total_before;
        self.0.lock().unwrap_or_else(|e| e.into_inner()).ours += moved;
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
        let (rowid, before, mut user) = self.before(db);
        // Under the deprecated `count_changes`, an INSERT, UPDATE or DELETE
        // returns its count as a row, which Pleroma's own writes do not
        // expect: off for them, on again after.
        let known = self.0.lock().unwrap_or_else(|e| e.into_inner()).count_rows;
        let counting = match known {
            Some(c) => c,
            None => {
                let c: bool = db
                    .prepare_cached("PRAGMA count_changes")?
                    .query_row([], |r| r.get(0))?;
                self.0.lock().unwrap_or_else(|e| e.into_inner()).count_rows = Some(c);
                c
            }
        };
        if counting {
            db.execute_batch("PRAGMA count_changes = OFF")?;
        }
        NOT_OURS.with(|n| n.set(0));
        WRITTEN_OUT.with(|w| w.set(None));
        let r = f();
        let not_ours = NOT_OURS.with(|n| n.replace(0));
        if let Some(c) = WRITTEN_OUT.with(|w| w.take()) {
            user = c;
        }
        if counting {
            db.execute_batch("PRAGMA count_changes = ON")?;
        }
        let after = (db.changes() as i64, db.total_changes() as i64);
        crate::ffi::set_last_insert_rowid(db, rowid);
        if crate::mutation::active(Mutation::CountersMoved) {
            return r;
        }
        let mut a = self.0.lock().unwrap_or_else(|e| e.into_inner());
        a.ours += after.1 - before.1 - not_ours;

        if after != before {
            a.hidden = Some((user, after.1, after.0));
        }
        r
    }
}
