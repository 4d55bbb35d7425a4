//! The appender: rows into one table of main, committed at `flush` (or
//! drop) in one transaction, with the table's planes fed from the values
//! themselves instead of the pre-update hook reading every row back.
//!
//! Why it is exact (`docs/design.md`, "Router invariants", the appender):
//! - it takes the write lock first (`BEGIN IMMEDIATE`, then follows any
//!   commit made before it with `catch_up_under_lock`; inside the user's
//!   transaction, a savepoint, only once that holds the lock); if the planes
//!   are still not current, every row goes through the router instead;
//! - a row is fed just before SQLite stores it (where the hook would have
//!   fed it), with the value SQLite stores for it (`affinity::stored`), and
//!   taken back out if SQLite stored nothing (`changes()` is 0: an IGNORE
//!   conflict clause, a trigger's `RAISE(IGNORE)`); where the stored value
//!   is not certain, the hook reads the row as for any INSERT;
//! - only that row's own depth-0 INSERT event is left to the appender
//!   (`Planes::appending`): a REPLACE's deletes, a trigger's or a cascade's
//!   rows still come through the hook;
//! - any error rolls the whole batch back through the router, which puts
//!   the planes back to the snapshot of its `BEGIN`.

use std::borrow::Cow;

use rusqlite::types::ValueRef;
use rusqlite::OptionalExtension;
use smallvec::SmallVec;

use super::*;
use crate::affinity::{self, Affinity};

/// Loads rows into one table faster than SQL statements through the router,
/// like DuckDB's appender: [`Appender::append_row`] takes one value per
/// column (in the order of [`Appender::columns`]); [`Appender::flush`]
/// commits what was appended in one transaction (inside an open transaction
/// of the connection: a savepoint of it). Dropping the appender flushes,
/// but an error there is lost: call `flush` to see it.
///
/// Values are stored exactly as an `INSERT` with the same parameters would
/// store them (column affinity, STRICT checks, constraints, conflict
/// clauses); an error is SQLite's own, and nothing of the batch it ends
/// stays.
pub struct Appender<'c> {
    conn: &'c mut Connection,
    table: String,
    columns: Vec<String>,
    insert: String,
    batch: Batch,
    /// How the fast path writes, while `batch` is `Fast`.
    plan: Option<Plan>,
    /// The INSERT, prepared once per batch of the fast path.
    stmt: Option<crate::ffi::Prepared>,
    /// Rows written in the open batch.
    pending: u64,
    /// Rows given to `append_row` since the appender was made.
    seen: u64,
    /// See [`Appender::failed_row`].
    failed: Option<u64>,
}

/// The open batch's transaction.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Batch {
    Idle,
    /// Rows fed from their values: in `BEGIN IMMEDIATE` by the appender,
    /// or a savepoint of a transaction that holds the write lock.
    Fast {
        savepoint: bool,
    },
    /// Every row through the router: in a transaction of the appender's
    /// own (`BEGIN`), or a savepoint of the user's.
    Routed {
        savepoint: bool,
    },
}

const SAVEPOINT: &str = "pleroma_appender";

/// How the fast path writes and feeds one table, read under the write lock.
struct Plan {
    /// The plane columns of the table (table column index), and for each
    /// how the appender sets it; `None`: not appended (its default is
    /// SQLite's business), so the hook reads the row.
    plane_cols: Vec<i32>,
    given: Vec<Option<Given>>,
    /// For each table column, its place in `plane_cols` (`usize::MAX`:
    /// none).
    slot: Vec<usize>,
    table_lower: String,
}

impl Connection {
    /// An appender for every column of `table` (in main) that an INSERT can
    /// set, in table order (generated columns left out).
    pub fn appender(&mut self, table: &str) -> Result<Appender<'_>> {
        let columns: Vec<String> = table_columns(&self.db, table)?
            .into_iter()
            .filter(|c| c.hidden == 0)
            .map(|c| c.name)
            .collect();
        self.appender_for(table, &columns)
    }

    /// An appender for these columns of `table` (in main); the others take
    /// their defaults.
    pub fn appender_for<S: AsRef<str>>(
        &mut self,
        table: &str,
        columns: &[S],
    ) -> Result<Appender<'_>> {
        let known = table_columns(&self.db, table)?;
        let mut names = Vec::with_capacity(columns.len());
        for c in columns {
            let c = c.as_ref();
            match known.iter().find(|k| k.name.eq_ignore_ascii_case(c)) {
                Some(k) if k.hidden == 0 => names.push(k.name.clone()),
                Some(_) => {
                    return Err(Error::Appender(format!(
                        "cannot append to generated column {c} of {table}"
                    )))
                }
                None => {
                    return Err(Error::Appender(format!(
                        "table {table} has no column named {c}"
                    )))
                }
            }
        }
        if names.is_empty() {
            return Err(Error::Appender(format!("no columns of {table} to append")));
        }
        let insert = format!(
            "INSERT INTO main.{}({}) VALUES ({})",
            tokenize::quote(table),
            names
                .iter()
                .map(|n| tokenize::quote(n))
                .collect::<Vec<_>>()
                .join(", "),
            (1..=names.len())
                .map(|i| format!("?{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(Appender {
            conn: self,
            table: table.to_owned(),
            columns: names,
            insert,
            batch: Batch::Idle,
            plan: None,
            stmt: None,
            pending: 0,
            seen: 0,
            failed: None,
        })
    }

    /// Under the write lock: how the fast path writes `table`, or `None`
    /// when it goes through the router (not an ordinary rowid table of
    /// main; main attached again, or a copy of it, where the guard passes
    /// nothing).
    fn append_plan(&self, table: &str, columns: &[String]) -> Result<Option<Plan>> {
        let kind: Option<(String, bool, bool)> = self
            .db
            .prepare_cached("SELECT type, wr, strict FROM pragma_table_list WHERE schema = 'main' AND name = ?1 COLLATE NOCASE")?
            .query_row([table], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        let Some((kind, without_rowid, strict)) = kind else {
            return Ok(None);
        };
        if kind != "table" || without_rowid {
            return Ok(None);
        }
        let known = table_columns(&self.db, table)?;
        let planes = self.lock();
        if !planes.main_aliases.is_empty() || !planes.main_copies.is_empty() {
            return Ok(None);
        }
        let mut plane_cols: Vec<i32> = Vec::new();
        for e in planes
            .entries
            .iter()
            .filter(|e| e.def.table.eq_ignore_ascii_case(table))
        {
            // An expression dimension (a negative index) reads its inputs.
            for &c in e
                .cols
                .dim_cols
                .iter()
                .chain(&e.cols.meas_cols)
                .chain(&e.cols.expr_inputs)
                .filter(|&&c| c >= 0)
            {
                if !plane_cols.contains(&c) {
                    plane_cols.push(c);
                }
            }
        }
        drop(planes);
        let mut given = Vec::with_capacity(plane_cols.len());
        for &c in &plane_cols {
            let Some(k) = known.get(c as usize) else {
                return Ok(None);
            };
            given.push(
                columns
                    .iter()
                    .position(|n| n.eq_ignore_ascii_case(&k.name))
                    .filter(|_| k.hidden == 0)
                    .map(|pos| Given {
                        pos,
                        aff: Affinity::of_column(&k.decl, strict),
                        pk: k.pk,
                        not_null: k.not_null,
                    }),
            );
        }
        let mut slot = vec![usize::MAX; known.len()];
        for (k, &c) in plane_cols.iter().enumerate() {
            slot[c as usize] = k;
        }
        Ok(Some(Plan {
            plane_cols,
            given,
            slot,
            table_lower: table.to_ascii_lowercase(),
        }))
    }

    /// The fast path for one row: fed to the planes just before SQLite
    /// stores it (so that an AFTER INSERT trigger's change to it comes
    /// after it, as through the hook), with the values SQLite stores; a row
    /// whose stored values are not certain is left to the hook. A row
    /// SQLite did not store (a conflict clause `IGNORE` in the schema, a
    /// trigger's `RAISE(IGNORE)`: the statement succeeds and `changes()` is
    /// 0) is taken back out.
    fn append_fast(
        &mut self,
        plan: &Plan,
        stmt: &crate::ffi::Prepared,
        row: &[Value],
    ) -> Result<()> {
        let mut vals: SmallVec<[Cow<'_, Value>; 8]> = SmallVec::new();
        let mut sure = !plan.plane_cols.is_empty();
        for g in &plan.given {
            let v = match *g {
                // SQLite decides what a NULL into a NOT NULL column, or
                // anything but an integer into a key column, becomes.
                Some(g) if g.pk && !matches!(row[g.pos], Value::Integer(_)) => None,
                Some(g) if g.not_null && matches!(row[g.pos], Value::Null) => None,
                Some(g) => affinity::stored(g.aff, &row[g.pos]),
                None => None,
            };
            match v {
                Some(v) => vals.push(v),
                None => {
                    sure = false;
                    break;
                }
            }
        }
        let get = |c: i32| match plan.slot.get(c as usize) {
            Some(&k) if k < vals.len() => Ok(ValueRef::from(&*vals[k])),
            _ => Err(rusqlite::Error::InvalidColumnIndex(c as usize)),
        };
        {
            let mut shared = planes::lock(&self.shared);
            if sure {
                hook::feed_insert(&mut shared, &plan.table_lower, 1, get);
                if shared.appending.is_none() {
                    shared.appending = Some(plan.table_lower.clone());
                }
            } else {
                shared.appending = None;
            }
        }
        let _allow = self.allow_guard();
        let r = stmt.run(row);
        drop(_allow);
        if let Err(e) = r {
            // A failed INSERT sets `changes()` to 0, as plain SQLite's.
            self.last_changes = self.db.changes();
            self.user_counters.user_set_changes();
            return Err(e.into());
        }
        self.last_changes = self.db.changes();
        self.user_counters.user_set_changes();
        if sure && self.last_changes == 0 {
            hook::feed_insert(&mut planes::lock(&self.shared), &plan.table_lower, -1, get);
        }
        Ok(())
    }

    /// SQLite ended the appender's transaction itself (a conflict clause
    /// `ON CONFLICT ROLLBACK`, a full disk): the planes go back to the
    /// transaction's start, as `run_plain` does for a statement.
    fn append_rolled_back(&mut self) {
        let mut shared = planes::lock(&self.shared);
        shared.take_flags();
        if self.txn.stale {
            planes::rebuild_all(&self.db, &mut shared, Rebuild::StaleSnapshot);
        } else if let Some(t) = self.txn.base.take() {
            shared.restore(&t);
        } else {
            planes::rebuild_all(&self.db, &mut shared, Rebuild::Undo);
        }
        drop(shared);
        self.txn.clear();
        self.persisted.rolled_back();
    }
}

impl Appender<'_> {
    /// The columns each row gives, in order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Append one row: one value per column of [`Appender::columns`]. An
    /// error is SQLite's own (or a row of the wrong length), and rolls the
    /// whole batch since the last flush back.
    pub fn append_row(&mut self, row: &[Value]) -> Result<()> {
        if row.len() != self.columns.len() {
            self.failed = None;
            return Err(Error::Appender(format!(
                "{} values for {} columns of {}",
                row.len(),
                self.columns.len(),
                self.table
            )));
        }
        self.seen += 1;
        let r = self.start().and_then(|()| match (&self.plan, &self.stmt) {
            (Some(plan), Some(stmt)) => self.conn.append_fast(plan, stmt, row),
            _ => self.conn.execute(&self.insert, row).map(drop),
        });
        match r {
            Ok(()) => {
                self.pending += 1;
                Ok(())
            }
            Err(e) => {
                self.failed = Some(self.seen - 1);
                self.abort();
                Err(e)
            }
        }
    }

    /// Commit every row appended since the last flush, in one transaction
    /// (a savepoint of the connection's open transaction). Returns how many.
    pub fn flush(&mut self) -> Result<u64> {
        let end = match self.batch {
            Batch::Idle => return Ok(0),
            Batch::Fast { savepoint: false } | Batch::Routed { savepoint: false } => {
                "COMMIT".to_owned()
            }
            Batch::Fast { savepoint: true } | Batch::Routed { savepoint: true } => {
                format!("RELEASE {SAVEPOINT}")
            }
        };
        self.conn.lock().appending = None;
        self.stmt = None;
        if let Err(e) = self.conn.execute(&end, &[]) {
            self.failed = None;
            self.abort();
            return Err(e);
        }
        self.batch = Batch::Idle;
        self.plan = None;
        Ok(std::mem::take(&mut self.pending))
    }

    /// The row whose INSERT failed in the last error of `append_row` or
    /// `flush`, numbered from 0 over every row given to this appender;
    /// `None` when the error was no row's (a failed commit, a bad row
    /// length).
    pub fn failed_row(&self) -> Option<u64> {
        self.failed
    }

    /// Open the batch's transaction if none is open, choosing the fast
    /// path (`self.plan`) or the router.
    fn start(&mut self) -> Result<()> {
        if self.batch != Batch::Idle {
            return Ok(());
        }
        let conn = &mut *self.conn;
        self.plan = None;
        let savepoint = !conn.db.is_autocommit();
        if savepoint {
            conn.execute(&format!("SAVEPOINT {SAVEPOINT}"), &[])?;
            self.batch = Batch::Routed { savepoint: true };
            // Without the write lock another commit can still land.
            if !crate::ffi::writing(&conn.db) {
                return Ok(());
            }
        } else {
            conn.execute("BEGIN IMMEDIATE", &[])?;
            self.batch = Batch::Routed { savepoint: false };
            // Nobody can commit now: follow what was committed before.
            if conn.persisted.on {
                conn.catch_up_under_lock()?;
            }
        }
        if conn.read_data_version()? != conn.data_version {
            return Ok(());
        }
        let Some(plan) = conn.append_plan(&self.table, &self.columns)? else {
            return Ok(());
        };
        // SAFETY: the statement lives in this appender, which borrows the
        // connection: it is finalized before the connection can close.
        self.stmt = Some(unsafe { crate::ffi::Prepared::prepare(&conn.db, &self.insert)? });
        self.plan = Some(plan);
        self.batch = Batch::Fast { savepoint };
        Ok(())
    }

    /// Roll the open batch back (SQLite's error ended it).
    fn abort(&mut self) {
        let conn = &mut *self.conn;
        conn.lock().appending = None;
        let batch = std::mem::replace(&mut self.batch, Batch::Idle);
        self.plan = None;
        self.stmt = None;
        self.pending = 0;
        if conn.db.is_autocommit() {
            // SQLite rolled the transaction back itself.
            if matches!(batch, Batch::Fast { .. }) {
                conn.append_rolled_back();
            }
            return;
        }
        let _ = match batch {
            Batch::Idle => Ok(()),
            Batch::Fast { savepoint: false } | Batch::Routed { savepoint: false } => {
                conn.execute("ROLLBACK", &[]).map(drop)
            }
            Batch::Fast { savepoint: true } | Batch::Routed { savepoint: true } => conn
                .execute(&format!("ROLLBACK TO {SAVEPOINT}"), &[])
                .and_then(|_| conn.execute(&format!("RELEASE {SAVEPOINT}"), &[]))
                .map(drop),
        };
    }
}

impl Drop for Appender<'_> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// A plane column the appender sets.
#[derive(Clone, Copy)]
struct Given {
    /// Its place in the appended row.
    pos: usize,
    aff: Affinity,
    /// In the primary key: a value that is no integer may be the rowid's
    /// alias, which SQLite fills in.
    pk: bool,
    /// NOT NULL: a NULL fails, or (`ON CONFLICT REPLACE`) becomes the
    /// column's default.
    not_null: bool,
}

/// A column of a table as `PRAGMA table_xinfo` gives it.
struct Column {
    name: String,
    decl: String,
    pk: bool,
    not_null: bool,
    /// 0: ordinary; 1: hidden; 2, 3: generated.
    hidden: i64,
}

fn table_columns(db: &rusqlite::Connection, table: &str) -> Result<Vec<Column>> {
    let cols: Vec<Column> = db
        .prepare_cached(
            "SELECT name, type, pk, hidden, \"notnull\" FROM pragma_table_xinfo(?1, 'main')",
        )?
        .query_map([table], |r| {
            Ok(Column {
                name: r.get(0)?,
                decl: r.get(1)?,
                pk: r.get::<_, i64>(2)? > 0,
                hidden: r.get(3)?,
                not_null: r.get::<_, i64>(4)? != 0,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    if cols.is_empty() {
        return Err(Error::Appender(format!("no such table: main.{table}")));
    }
    Ok(cols)
}
