//! The user-facing connection: every statement passes through here.

use crate::mutation::Mutation;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use ahash::AHashMap;
use hashlink::LruCache;
use rusqlite::types::Value;

use crate::catalog::{self, Rebuild};
use crate::classify::{self, Classified};
use crate::database::{self, Database, Found, Member, Published};
use crate::decline::Decline;
use crate::facts::{Facts, FactsCache};
use crate::ffi::WalSnapshot;
use crate::hook;
use crate::persist::{self, Followed, Persisted, Untrusted};
use crate::planes::{self, Planes};
use crate::pragma::{self, Pragma};
use crate::route::{Counters, Route, RouteKind, RouteMode};
use crate::rows::Rows;
use crate::rules::answer_from_cells::{self, Outcome};
use crate::rules::answer_from_limb;
use crate::rules::answer_with_residue;
use crate::split::split_statements;
use crate::tokenize;
use crate::txn::{StmtKind, TxnState};
use crate::user_counters::UserCounters;
use crate::{Error, Result};

mod append;
pub use append::Appender;
mod pragmas;
mod read;
mod sync;
mod wrap;
mod write;

/// How a statement that the planes did not answer runs on SQLite.
enum Attempt {
    Served(Rows),
    /// A read-only SELECT: it cannot change any table.
    ReadOnly,
    /// Anything else: keep the planes exact through what it does.
    Other,
}

/// A SQLite connection with planes attached.
pub struct Connection {
    db: rusqlite::Connection,
    /// The pre-update hook; `Drop` drops it before `db` closes (its
    /// guard uses `db`'s handle: `ffi::PreUpdateHook::install`).
    pre_hook: Option<crate::ffi::PreUpdateHook>,
    /// `PRAGMA data_version`, prepared once; `Drop` finalizes it before
    /// `db` closes (`ffi::DataVersion::prepare`).
    version: Option<crate::ffi::DataVersion>,
    pub(crate) shared: Arc<Mutex<Planes>>,
    cache: AHashMap<String, Arc<Classified>>,
    /// Per text of an autocommit write: whether it can change a planed
    /// table (or one of Pleroma's own), by what SQLite's authorizer names
    /// while compiling it (`Connection::reaches_no_plane`).
    reach: AHashMap<String, bool>,
    /// Per text: the tables it writes, as SQLite's authorizer names them
    /// while compiling it (`txn_guards::writes`; `None`: it does not
    /// prepare). Installing the authorizer makes SQLite compile every
    /// prepared statement again, so it is asked once per text.
    write_sets: AHashMap<String, Option<Arc<Vec<crate::txn_guards::Write>>>>,
    /// What can make a write fail part-way here (`txn_guards::Unhalted`),
    /// with the `schema_version` of every schema but temp it was read at.
    unhalted: Option<(Vec<i64>, crate::txn_guards::Unhalted)>,
    /// The raw handle was handed out (`Connection::sqlite`): anything may
    /// have been set through it.
    raw_used: std::sync::atomic::AtomicBool,
    /// What each statement's text says, read once per text.
    facts: FactsCache,
    txn: TxnState,
    mode: RouteMode,
    last_route: Route,
    counters: Counters,
    /// The SELECTs SQLite ran because no plane answered them, by text
    /// (`PRAGMA pleroma_advise`).
    declined: crate::advise::Declined,
    /// `PRAGMA data_version` when the planes were last known current.
    data_version: i64,
    /// Exact answers of served statements, by SQL text and parameters.
    memo: LruCache<String, Memo>,
    /// Keeps the catalog writes out of the user's `changes()` and friends.
    user_counters: UserCounters,
    /// Moves whenever cached classifications are dropped.
    plans_epoch: u64,
    /// The planes this process shares for the file (private in memory).
    database: Arc<Database>,
    _member: Member,
    /// Where the working copy stands in the persisted state.
    persisted: Persisted,
    /// What the guard function lets through on this connection.
    guard: Arc<persist::Guard>,
    /// See [`Connection::changes`].
    last_changes: u64,
    /// See [`Connection::rows_before_error`].
    stepped: Option<Rows>,
    /// The user's statement without result columns last run twice in a
    /// row, prepared outside rusqlite's cache (`Connection::exec_user`);
    /// `Drop` finalizes it before `db` closes.
    hot: Option<(String, crate::ffi::Prepared)>,
    /// The text of the user's last statement run through the cache.
    last_text: String,
}

/// Longest a read waits for another connection's publish of a commit it
/// already sees, before SQLite answers it instead.
const PUBLISH_WAIT: std::time::Duration = std::time::Duration::from_millis(2);

/// The same with persisted planes, after which the read follows the
/// commit's state rows itself (a delta of the cells it changed).
const PUBLISH_WAIT_LOGGED: std::time::Duration = std::time::Duration::from_micros(200);

/// How many answers the memo keeps.
const MEMO_CAPACITY: usize = 256;
/// Prepared statements kept per connection (see `Connection::wrap`).
const STATEMENT_CACHE: usize = 128;

/// A served answer, valid while the planes' write counter stays `writes`.
struct Memo {
    writes: u64,
    rows: Rows,
}

impl Connection {
    /// Open (or create) a database file; planes recorded in its catalog are
    /// re-attached and rebuilt.
    pub fn open(path: impl AsRef<Path>) -> Result<Connection> {
        Connection::wrap(rusqlite::Connection::open(path)?)
    }

    /// A new in-memory database.
    pub fn open_in_memory() -> Result<Connection> {
        Connection::wrap(rusqlite::Connection::open_in_memory()?)
    }

    /// Wrap an open rusqlite connection (it must not have hooks of its own:
    /// Pleroma takes the pre-update, commit and rollback hooks).
    pub fn wrap(mut db: rusqlite::Connection) -> Result<Connection> {
        // The user's statements and Pleroma's own (the state rows, the
        // catalog, the checks of a follow) share rusqlite's cache of
        // prepared statements; at its default of 16 a dashboard's
        // statements and a follow's pushed each other out, and every use
        // prepared again (tens of thousands of instructions each).
        db.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        crate::sum_exact::register(&db)?;
        let guard = Arc::new(persist::Guard::default());
        persist::register_guard(&db, guard.clone())?;
        let user_counters = UserCounters::register(&db)?;
        let shared = Arc::new(Mutex::new(Planes::default()));
        // SAFETY: `Drop for Connection` drops `pre_hook` before `db`
        // closes (explicitly, not by the order of the fields).
        let pre_hook = Some(unsafe { hook::install(&mut db, &shared)? });
        // SAFETY: as the hook, dropped first by `Drop for Connection`.
        let version = Some(unsafe { crate::ffi::DataVersion::prepare(&db)? });
        let database = Database::for_connection(&db);
        let persist_on = persist::setting_on(&db)?;
        let member = database.join();
        let mut conn = Connection {
            db,
            pre_hook,
            version,
            shared,
            cache: AHashMap::new(),
            reach: AHashMap::new(),
            write_sets: AHashMap::new(),
            unhalted: None,
            raw_used: std::sync::atomic::AtomicBool::new(true),
            facts: FactsCache::default(),
            txn: TxnState::default(),
            mode: RouteMode::Auto,
            last_route: Route::engine("no statement yet"),
            counters: Counters::default(),
            declined: Default::default(),
            data_version: 0,
            memo: LruCache::new(MEMO_CAPACITY),
            user_counters,
            plans_epoch: 0,
            persisted: Persisted::new(persist_on, guard.clone()),
            guard,
            last_changes: 0,
            stepped: None,
            hot: None,
            last_text: String::new(),
            database,
            _member: member,
        };
        let _allow = conn.allow_guard();
        conn.data_version = conn.read_data_version()?;
        // Another connection of this process may have published exactly the
        // state this one sees: take it instead of building.
        if let Some((v, id)) = conn.view()? {
            if let Found::Published(p) = conn.database.find(&id) {
                conn.data_version = v;
                conn.adopt(&p);
                return Ok(conn);
            }
        }
        conn.open_planes()?;
        conn.publish()?;
        Ok(conn)
    }

    /// The underlying rusqlite connection, for anything Pleroma does not wrap.
    /// Reads are fine. A write through it to a table whose plane is
    /// persisted (the default for a file) is refused by the plane's guard,
    /// since it would commit without the planes' state row; with `PRAGMA
    /// pleroma_persist = off` such writes still reach the planes (the hook
    /// sees them). Transaction control through it bypasses Pleroma's
    /// bookkeeping: use [`Connection::execute`] for
    /// BEGIN/COMMIT/ROLLBACK/SAVEPOINT.
    pub fn sqlite(&self) -> &rusqlite::Connection {
        // Anything may be run through it, `PRAGMA count_changes` too.
        self.user_counters.forget_count_rows();
        self.raw_used
            .store(true, std::sync::atomic::Ordering::Relaxed);
        &self.db
    }

    /// The route the last statement took.
    pub fn last_route(&self) -> &Route {
        &self.last_route
    }

    /// Drop the memo's answers, so the next statement takes its rule again
    /// (the benchmarks measure the rules' own cost this way).
    pub fn clear_memo(&mut self) {
        self.memo.clear();
    }

    /// The rows SQLite stepped out of the last statement before it failed
    /// while running (the `sqlite3` shell prints them before the error):
    /// `Some` only when that statement's [`Connection::query`] returned
    /// SQLite's error from a step; `None` after one that succeeded, failed
    /// before it ran, or was answered by Pleroma.
    pub fn rows_before_error(&self) -> Option<&Rows> {
        self.stepped.as_ref()
    }

    /// Rows changed by the most recent INSERT, UPDATE or DELETE the user
    /// ran, as SQLite's `sqlite3_changes()` would count them without
    /// Pleroma (whose own state-row writes `Connection::sqlite().changes()`
    /// does see). The SQL function `changes()` gives the same.
    pub fn changes(&self) -> u64 {
        self.last_changes
    }

    /// Rows changed by the user's statements since the connection opened,
    /// as SQLite's `sqlite3_total_changes()` would count them without
    /// Pleroma's own state and catalog rows. The SQL function
    /// `total_changes()` gives the same.
    pub fn total_changes(&self) -> u64 {
        self.user_counters.total_changes(&self.db)
    }

    /// `sqlite3_last_insert_rowid()` as plain SQLite would return it:
    /// Pleroma puts it back after its own state and catalog rows.
    pub fn last_insert_rowid(&self) -> i64 {
        self.db.last_insert_rowid()
    }

    /// `sql`'s first statement with `params` bound, as SQLite expands it
    /// for a trace (`sqlite3_expanded_sql`); `None` when it does not
    /// prepare or bind (the statement itself then reports the error).
    pub fn expanded_sql(&self, sql: &str, params: &[Value]) -> Option<String> {
        // Not the statement cache, which trims the text.
        let mut stmt = self.db.prepare(sql).ok()?;
        for (i, v) in params.iter().enumerate() {
            stmt.raw_bind_parameter(i + 1, v).ok()?;
        }
        let out = stmt.expanded_sql();
        stmt.clear_bindings();
        out
    }

    /// Open the planes again from the file as it is now: for a file whose
    /// content was replaced through the raw handle behind Pleroma's back,
    /// such as the destination of a backup (`sqlite3_backup_*`), which
    /// changes no `data_version` this connection could see.
    pub fn reload_planes(&mut self) -> Result<()> {
        let _allow = self.allow_guard();
        self.reopen_planes()
    }

    /// Whether no transaction is open (`sqlite3_get_autocommit`).
    pub fn is_autocommit(&self) -> bool {
        self.db.is_autocommit()
    }

    /// The parameters of the statement `sql` as SQLite numbers them: one
    /// entry per number, with its name (`:a`, `@a`, `$a`, `?1`) or `None`
    /// for an anonymous `?`; its result columns' declared types; and whether
    /// it writes nothing (`sqlite3_stmt_readonly`).
    /// SQLite's error when it does not prepare. Drivers bind a mapping of
    /// names, and convert declared types, with it.
    #[allow(clippy::type_complexity)]
    pub fn parameters(
        &self,
        sql: &str,
    ) -> Result<(Vec<Option<String>>, Vec<Option<String>>, bool)> {
        let stmt = self.db.prepare_cached(sql)?;
        let names = (1..=stmt.parameter_count())
            .map(|i| stmt.parameter_name(i).map(str::to_owned))
            .collect();
        let decltypes = stmt
            .columns()
            .map(|c| c.decl_type().map(str::to_owned))
            .collect();
        Ok((names, decltypes, stmt.readonly()))
    }

    /// Served and declined counts since the connection opened.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub fn route_mode(&self) -> RouteMode {
        self.mode
    }

    pub fn set_route_mode(&mut self, mode: RouteMode) {
        self.mode = mode;
    }

    /// Run one statement; returns the number of rows it changed.
    pub fn execute(&mut self, sql: &str, params: &[Value]) -> Result<usize> {
        let (_, changes) = self.run(sql, params, false)?;
        Ok(changes)
    }

    /// Run every statement of `sql` in order, stopping at the first error.
    pub fn execute_batch(&mut self, sql: &str) -> Result<()> {
        for stmt in split_statements(sql) {
            self.run(stmt, &[], false)?;
        }
        Ok(())
    }

    /// Run one statement and return its rows.
    pub fn query(&mut self, sql: &str, params: &[Value]) -> Result<Rows> {
        Ok(self.run(sql, params, true)?.0)
    }

    /// [`Connection::query`] as an Arrow `RecordBatch` (INTEGER → Int64,
    /// REAL → Float64, TEXT → Utf8, BLOB → Binary; a column mixing storage
    /// classes becomes Utf8 of SQLite's text rendering).
    pub fn query_arrow(&mut self, sql: &str, params: &[Value]) -> Result<arrow_array::RecordBatch> {
        let rows = self.query(sql, params)?;
        Ok(rows.to_arrow())
    }

    pub fn begin(&mut self) -> Result<()> {
        self.execute("BEGIN", &[]).map(drop)
    }

    pub fn commit(&mut self) -> Result<()> {
        self.execute("COMMIT", &[]).map(drop)
    }

    pub fn rollback(&mut self) -> Result<()> {
        self.execute("ROLLBACK", &[]).map(drop)
    }

    pub fn savepoint(&mut self, name: &str) -> Result<()> {
        self.execute(&format!("SAVEPOINT {}", tokenize::quote(name)), &[])
            .map(drop)
    }

    pub fn release(&mut self, name: &str) -> Result<()> {
        self.execute(&format!("RELEASE SAVEPOINT {}", tokenize::quote(name)), &[])
            .map(drop)
    }

    pub fn rollback_to(&mut self, name: &str) -> Result<()> {
        self.execute(
            &format!("ROLLBACK TO SAVEPOINT {}", tokenize::quote(name)),
            &[],
        )
        .map(drop)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Planes> {
        planes::lock(&self.shared)
    }

    fn read_data_version(&self) -> Result<i64> {
        match &self.version {
            Some(v) => Ok(v.read()?),
            None => Ok(data_version(&self.db)?),
        }
    }

    /// The one path every statement takes.
    fn run(&mut self, sql: &str, params: &[Value], want_rows: bool) -> Result<(Rows, usize)> {
        self.stepped = None;
        let facts = self.facts.get(sql);
        // SQLite sets `count_changes` when it compiles the PRAGMA (an
        // EXPLAIN of one too), not when it runs it.
        if facts.may_set_flags {
            self.user_counters.forget_count_rows();
        }
        let auto = self.db.is_autocommit();
        let allow = self.allow_guard();
        let r = self.run_allowed(sql, params, want_rows, &facts);
        drop(allow);
        if facts.names_columns && !crate::mutation::active(Mutation::ColumnNamesCached) {
            // SQLite names a statement's columns when it prepares it: a
            // cached statement or classification keeps the names of before.
            self.db.flush_prepared_statement_cache();
            self.forget_plans();
        }
        if r.is_err()
            && self
                .guard
                .refused
                .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            // Another connection may have turned persistence on, attached a
            // plane or made new guards: follow the file. An autocommit
            // statement (undone whole by SQLite) runs once more on the
            // planes as they are now.
            let turned_on = self.refresh_persist()?;
            // Inside a transaction, a connection that had no plane, or
            // whose planes were not persisted, opens them where it stands
            // (found from outside: every write of its transactions to the
            // newly planed table was refused).
            let reopened = if auto && self.db.is_autocommit() {
                self.reopen_planes()?;
                true
            } else {
                !self.db.is_autocommit()
                    && self.persisted.on
                    && (turned_on || self.lock().is_empty())
                    && self.open_planes_in_txn()?
            };
            if reopened {
                let allow = self.allow_guard();
                let r = self.run_allowed(sql, params, want_rows, &facts);
                drop(allow);
                self.guard
                    .refused
                    .store(false, std::sync::atomic::Ordering::Relaxed);
                return r;
            }
        }
        r
    }

    /// While it lives, the guard function lets this connection's writes
    /// through (when its planes are persisted).
    fn allow_guard(&self) -> AllowGuard {
        // With the file attached a second time, a write through that
        // handle cannot share a transaction with the state row: refused.
        // A connection without planes persists nothing: it passes no guard.
        let allow = self.persisted.on && {
            let planes = self.lock();
            planes.main_aliases.is_empty()
                && (planes.main_copies.is_empty()
                    || crate::mutation::active(Mutation::GuardPassesAnyFile))
                && (!planes.is_empty() || crate::mutation::active(Mutation::GuardPassesAnyFile))
        };
        if allow && self.guard.id.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            // Planes built from the tables while another connection held
            // the write lock (a rebuild whose repair could not write) know
            // no keys yet: this connection persists its writes to this
            // file, so its guards are the file's (found from outside).
            self.guard
                .set_keys(persist::file_keys(&self.db).ok().flatten());
        }
        self.guard
            .allow
            .store(allow, std::sync::atomic::Ordering::Relaxed);
        AllowGuard(self.guard.clone())
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // rusqlite 0.43 frees the rollback-hook closure before SQLite calls it
        // while closing with a transaction open: end the transaction and
        // unregister the hooks first.
        if !self.db.is_autocommit() {
            let _ = self.db.execute_batch("ROLLBACK");
        }
        hook::uninstall(&mut self.db);
        self.pre_hook = None;
        self.version = None;
        self.hot = None;
    }
}

/// Lets the guard function pass while it lives (see `Connection::run`).
struct AllowGuard(Arc<persist::Guard>);

impl Drop for AllowGuard {
    fn drop(&mut self) {
        self.0
            .allow
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Run one statement on SQLite and collect its rows; if a step fails,
/// `stepped` gets the rows before it ([`Connection::rows_before_error`]).
fn exec(
    db: &rusqlite::Connection,
    sql: &str,
    params: &[Value],
    want_rows: bool,
    stepped: &mut Option<Rows>,
) -> rusqlite::Result<(Rows, usize)> {
    exec_seen(db, sql, params, want_rows, &mut None, stepped)
}

/// [`exec`], and once the statement prepared, `readonly` says whether the
/// program SQLite ran makes no direct change (`sqlite3_stmt_readonly`,
/// read after it ran: a step may have compiled it again).
fn exec_seen(
    db: &rusqlite::Connection,
    sql: &str,
    params: &[Value],
    want_rows: bool,
    readonly: &mut Option<bool>,
    stepped: &mut Option<Rows>,
) -> rusqlite::Result<(Rows, usize)> {
    *stepped = None;
    let mut stmt = db.prepare_cached(sql)?;
    let r = run_prepared(db, &mut stmt, params, want_rows, stepped);
    *readonly = Some(stmt.readonly());
    r
}

fn run_prepared(
    db: &rusqlite::Connection,
    stmt: &mut rusqlite::CachedStatement<'_>,
    params: &[Value],
    want_rows: bool,
    stepped: &mut Option<Rows>,
) -> rusqlite::Result<(Rows, usize)> {
    let params = rusqlite::params_from_iter(params.iter());
    if stmt.column_count() == 0 {
        let changes = stmt.execute(params)?;
        return Ok((Rows::default(), changes));
    }
    // The columns are read after the statement ran: a cached statement
    // whose schema changed since (ALTER TABLE, a table made again) is
    // prepared again by its first step, and only then has its new columns.
    let mut out = Rows::default();
    // The mutation: the columns of the statement's first compile.
    let stale: Option<Vec<String>> = crate::mutation::active(Mutation::ColumnsBeforeStep)
        .then(|| stmt.column_names().map(str::to_owned).collect());
    let mut rows = stmt.query(params)?;
    loop {
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(e) => {
                drop(rows);
                if want_rows {
                    out.columns = stale
                        .unwrap_or_else(|| stmt.column_names().map(str::to_owned).collect())
                        .into();
                    *stepped = Some(out);
                }
                return Err(e);
            }
        };
        if want_rows {
            let n = stale.as_ref().map_or(row.as_ref().column_count(), Vec::len);
            let mut r = Vec::with_capacity(n);
            for i in 0..n {
                r.push(row.get::<_, Value>(i)?);
            }
            out.rows.push(r);
        }
    }
    drop(rows);
    out.columns = stale
        .unwrap_or_else(|| stmt.column_names().map(str::to_owned).collect())
        .into();
    Ok((out, db.changes() as usize))
}

impl Connection {
    /// After a statement SQLite ran: what `changes()` says now, read before
    /// Pleroma writes anything of its own (a statement that changes no row,
    /// such as a SELECT, leaves it as it was, as in SQLite).
    /// `readonly`: what [`exec_seen`] said (`None`: it did not prepare).
    /// Run the user's statement on SQLite (keeping the rows it stepped
    /// before an error) and take its `changes()` as the user's; returns
    /// the outcome and SQLite's `readonly` of the statement that ran.
    fn exec_user(
        &mut self,
        sql: &str,
        params: &[Value],
        want_rows: bool,
        facts: &Facts,
    ) -> (rusqlite::Result<(Rows, usize)>, Option<bool>) {
        let mut readonly = None;
        // A statement without result columns (an INSERT of a batch, an
        // UPDATE in a loop) run again: stepped as rusqlite's cached
        // statement would be, without the cache's lookup and return.
        if let Some((_, stmt)) = self.hot.as_ref().filter(|(text, _)| text == sql) {
            self.stepped = None;
            let r = stmt.execute(params).map(|n| (Rows::default(), n));
            readonly = Some(stmt.readonly());
            self.note_changes(facts, readonly);
            return (r, readonly);
        }
        let r = exec_seen(
            &self.db,
            sql,
            params,
            want_rows,
            &mut readonly,
            &mut self.stepped,
        );
        self.note_changes(facts, readonly);
        if self.last_text != sql {
            self.last_text.clear();
            self.last_text.push_str(sql);
        } else if r.as_ref().is_ok_and(|(rows, _)| rows.columns.is_empty()) {
            // The second run in a row: prepared for the next ones. (A
            // text of several statements fails in `exec_seen`, so this
            // is one statement, all of it.)
            // SAFETY: `hot` is dropped before `db` closes (`Drop`).
            if let Ok(stmt) = unsafe { crate::ffi::Prepared::prepare(&self.db, sql) } {
                self.hot = Some((sql.to_owned(), stmt));
            }
        }
        (r, readonly)
    }

    fn note_changes(&mut self, facts: &Facts, readonly: Option<bool>) {
        let writes = readonly == Some(false);
        // Only INSERT, UPDATE and DELETE (also under WITH) set SQLite's
        // count, to 0 when they match nothing. Other writes (DDL, VACUUM, a
        // PRAGMA) leave the user's count as it was: SQLite's raw value may
        // be Pleroma's own last state row.
        if writes && facts.sets_changes {
            self.last_changes = self.db.changes();
            self.user_counters.user_set_changes();
        }
    }
}

/// After a schema change: the planes' columns again, and which attached
/// files are copies of main (the guard passes nothing while one is).
fn reverify(db: &rusqlite::Connection, shared: &mut Planes) {
    planes::reverify_all(db, shared);
    shared.main_copies = persist::main_copies(db, &shared.main_aliases).unwrap_or_default();
}

fn data_version(db: &rusqlite::Connection) -> rusqlite::Result<i64> {
    db.prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))
}
