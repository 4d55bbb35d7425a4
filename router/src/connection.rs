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
use crate::txn::{self, StmtKind, TxnState};
use crate::user_counters::UserCounters;
use crate::{Error, Result};

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
    /// The pre-update hook; dropped before `db` closes.
    pre_hook: Option<crate::ffi::PreUpdateHook>,
    pub(crate) shared: Arc<Mutex<Planes>>,
    cache: AHashMap<String, Arc<Classified>>,
    txn: TxnState,
    mode: RouteMode,
    last_route: Route,
    counters: Counters,
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
}

/// Longest a read waits for another connection's publish of a commit it
/// already sees, before SQLite answers it instead.
const PUBLISH_WAIT: std::time::Duration = std::time::Duration::from_millis(2);

/// How many answers the memo keeps.
const MEMO_CAPACITY: usize = 256;

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
        crate::sum_exact::register(&db)?;
        let guard = Arc::new(persist::Guard::default());
        persist::register_guard(&db, guard.clone())?;
        let user_counters = UserCounters::register(&db)?;
        let shared = Arc::new(Mutex::new(Planes::default()));
        let pre_hook = Some(hook::install(&mut db, &shared)?);
        let database = Database::for_connection(&db);
        let persist_on = persist::setting_on(&db)?;
        let member = database.join();
        let mut conn = Connection {
            db,
            pre_hook,
            shared,
            cache: AHashMap::new(),
            txn: TxnState::default(),
            mode: RouteMode::Auto,
            last_route: Route::engine("no statement yet"),
            counters: Counters::default(),
            data_version: 0,
            memo: LruCache::new(MEMO_CAPACITY),
            user_counters,
            plans_epoch: 0,
            persisted: Persisted::new(persist_on, guard.clone()),
            guard,
            last_changes: 0,
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
        Ok(crate::rules::to_arrow(&rows))
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
        self.execute(&format!("SAVEPOINT {}", quote_ident(name)), &[])
            .map(drop)
    }
    pub fn release(&mut self, name: &str) -> Result<()> {
        self.execute(&format!("RELEASE SAVEPOINT {}", quote_ident(name)), &[])
            .map(drop)
    }
    pub fn rollback_to(&mut self, name: &str) -> Result<()> {
        self.execute(&format!("ROLLBACK TO SAVEPOINT {}", quote_ident(name)), &[])
            .map(drop)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Planes> {
        // A panic while holding the lock can only come from the hook, which
        // catches it and faults the plane; the state is still consistent.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read_data_version(&self) -> Result<i64> {
        Ok(data_version(&self.db)?)
    }

    /// The one path every statement takes.
    fn run(&mut self, sql: &str, params: &[Value], want_rows: bool) -> Result<(Rows, usize)> {
        let auto = self.db.is_autocommit();
        let allow = self.allow_guard();
        let r = self.run_allowed(sql, params, want_rows);
        drop(allow);
        if names_columns(sql) && !crate::mutation::active(Mutation::ColumnNamesCached) {
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
            self.refresh_persist()?;
            if auto && self.db.is_autocommit() {
                self.reopen_planes()?;
                let allow = self.allow_guard();
                let r = self.run_allowed(sql, params, want_rows);
                drop(allow);
                self.guard
                    .refused
                    .store(false, std::sync::atomic::Ordering::Relaxed);
                return r;
            }
        }
        r
    }

    /// Open the planes the catalog lists again, as a new connection would.
    fn reopen_planes(&mut self) -> Result<()> {
        self.data_version = self.read_data_version()?;
        self.persisted.forget();
        self.open_planes()?;
        self.forget_plans();
        self.publish()
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
        self.guard
            .allow
            .store(allow, std::sync::atomic::Ordering::Relaxed);
        AllowGuard(self.guard.clone())
    }

    /// Read the persistence setting again (it may have changed in another
    /// connection); a change makes the next write persist a checkpoint.
    fn refresh_persist(&mut self) -> Result<()> {
        let on = persist::setting_on(&self.db)?;
        if on != self.persisted.on {
            self.persisted.on = on;
            self.persisted.forget();
        }
        Ok(())
    }

    fn run_allowed(
        &mut self,
        sql: &str,
        params: &[Value],
        want_rows: bool,
    ) -> Result<(Rows, usize)> {
        let sharing = self.database.shared();
        if let Some(p) = pragma::parse(sql) {
            let p = p.map_err(Error::Pragma)?;
            self.last_route = Route::engine("pleroma pragma");
            if !p.writes_catalog() {
                return self.pragma(p).map(|rows| (rows, 0));
            }
            let _commit = self.database.commit_in_flight();
            if sharing {
                self.sync_external()?;
            }
            let rows = self.pragma(p)?;
            self.publish()?;
            // A new set of planes (or a rebuilt one) is persisted whole.
            self.persisted.forget();
            self.repair()?;
            return Ok((rows, 0));
        }
        // Shared planes: start from the committed state, which another
        // connection may have published (or changed the planes in). A plane
        // answer below uses this sync instead of making its own.
        let synced = if sharing && self.db.is_autocommit() {
            Some(self.sync_external()?)
        } else {
            None
        };
        if self.lock().is_empty() {
            self.last_route = Route::engine("no plane attached");
            // Its commits still have to be published for the others; an
            // attached file's guards must not change what VACUUM does.
            if sharing || txn::vacuum_schema(sql).is_some() {
                return self.run_engine(sql, params, want_rows);
            }
            let r = exec(&self.db, sql, params, want_rows);
            self.note_changes(sql);
            if txn::kind_of(sql).is_schema_change() {
                self.forget_plans();
            }
            return Ok(r?);
        }
        // INSERT, UPDATE, DELETE, REPLACE (and RELEASE, ROLLBACK, DETACH,
        // REINDEX) are never SELECTs: skip the plan cache's hash of the text.
        let first = sql
            .trim_start()
            .as_bytes()
            .first()
            .map(u8::to_ascii_uppercase);
        if matches!(first, Some(b'I' | b'U' | b'D' | b'R')) {
            self.set_engine_route("not a read-only SELECT");
            return self.run_engine(sql, params, want_rows);
        }
        if self.mode == RouteMode::Engine && !crate::mutation::active(Mutation::EngineRouteServes) {
            return self.run_engine_route(sql, params, want_rows);
        }
        match self.try_plane(sql, params, synced)? {
            Attempt::Served(rows) => Ok((rows, 0)),
            // A read-only SELECT: nothing to keep track of.
            Attempt::ReadOnly => Ok(exec(&self.db, sql, params, want_rows)?),
            Attempt::Other => self.run_engine(sql, params, want_rows),
        }
    }

    /// `PRAGMA pleroma_route = engine`: the oracle users and tests compare
    /// with, so nothing of Pleroma's is consulted — no cached
    /// classification, no memo, no plane. Only SQLite's own prepare tells
    /// a read-only SELECT from a statement that needs the write
    /// bookkeeping.
    fn run_engine_route(
        &mut self,
        sql: &str,
        params: &[Value],
        want_rows: bool,
    ) -> Result<(Rows, usize)> {
        let read_only = self
            .db
            .prepare_cached(sql)
            .is_ok_and(|s| s.readonly() && s.column_count() > 0);
        if !read_only {
            self.set_engine_route("not a read-only SELECT");
            return self.run_engine(sql, params, want_rows);
        }
        const WHY: &str = "pleroma_route = engine";
        match self.counters.declined.get_mut(WHY) {
            Some(n) => *n += 1,
            None => {
                self.counters.declined.insert(WHY.to_owned(), 1);
            }
        }
        self.set_engine_route(WHY);
        Ok(exec(&self.db, sql, params, want_rows)?)
    }

    /// Try to answer from a plane; otherwise say how SQLite should run it
    /// (the route and counters already say why).
    /// `synced`: the result of a `sync_external` this statement already
    /// made.
    fn try_plane(&mut self, sql: &str, params: &[Value], synced: Option<bool>) -> Result<Attempt> {
        let class = match self.cache.get(sql) {
            Some(c) => c.clone(),
            None => {
                let c = {
                    let shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                    Arc::new(classify::classify(&self.db, &shared, sql, true))
                };
                if !matches!(&*c, Classified::Declined(Decline::NoColumnMap)) {
                    self.cache.insert(sql.to_owned(), c.clone());
                }
                c
            }
        };
        let table = match &*class {
            Classified::NotSelect => {
                self.set_engine_route("not a read-only SELECT");
                return Ok(Attempt::Other);
            }
            Classified::Declined(reason) => return self.decline(reason.clone(), None),
            Classified::Plan(plan) => &plan.table,
            Classified::Join(join) => &join.fact,
            Classified::Residue(r) => &r.table,
        };
        if self.mode == RouteMode::Engine && !crate::mutation::active(Mutation::EngineRouteServes) {
            return self.decline("pleroma_route = engine", Some(table));
        }
        let epoch = self.plans_epoch;
        let current = match synced {
            Some(current) => current,
            None => self.sync_external()?,
        };
        if !current {
            return self.decline(
                "another connection's commit is being published",
                Some(table),
            );
        }
        if self.plans_epoch != epoch {
            // The planes taken over are another set (a plane attached or
            // detached elsewhere): classify the statement again.
            return self.try_plane(sql, params, Some(true));
        }
        // The memo: an exact earlier answer, while no plane has changed.
        let key = format!("{sql}\0{params:?}");
        let writes = self.lock().writes();
        if let Some(m) = self.memo.get(&key) {
            if m.writes == writes {
                let rows = m.rows.clone();
                self.counters.memo += 1;
                self.last_route = Route {
                    kind: RouteKind::Memo,
                    reason: "memo hit".into(),
                    table: Some(table.clone()),
                    plane_cost: None,
                    engine_cost: None,
                };
                return Ok(Attempt::Served(rows));
            }
        }
        let outcome = match &*class {
            Classified::Plan(plan) => {
                let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                answer_from_cells::answer(&self.db, &mut shared, self.mode, plan, params)?
            }
            Classified::Join(join) => answer_from_limb::answer(&self.lock(), join, params)?,
            Classified::Residue(r) => {
                let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                match answer_with_residue::answer(&self.db, &mut shared, self.mode, r, params) {
                    Ok(o) => o,
                    // The rewritten text failed as it ran: SQLite runs the
                    // user's own, which gives SQLite's answer or its error
                    // (and sets this statement's route).
                    // (The mutation `residue_raising_where` keeps the error,
                    // as the residue did before this net.)
                    Err(e) if !crate::mutation::active(Mutation::ResidueRaisingWhere) => {
                        Outcome::Declined(Decline::residue_failed(&e), None)
                    }
                    Err(e) => {
                        drop(shared);
                        self.set_engine_route("the residue failed");
                        return Err(e);
                    }
                }
            }
            _ => unreachable!("declined above"),
        };
        match outcome {
            Outcome::Served(rows, route) => {
                self.counters.served += 1;
                self.lock().count(table, true);
                self.last_route = route;
                // A residue may read other tables and `'now'`, which the
                // planes' write counter does not follow: not memoized.
                if !matches!(&*class, Classified::Residue(_)) {
                    self.memo.insert(
                        key,
                        Memo {
                            writes,
                            rows: rows.clone(),
                        },
                    );
                }
                Ok(Attempt::Served(rows))
            }
            Outcome::Declined(reason, route) => {
                let r = self.decline(reason, Some(table));
                if let Some(route) = route {
                    self.last_route.plane_cost = route.plane_cost;
                    self.last_route.engine_cost = route.engine_cost;
                }
                r
            }
        }
    }

    /// Drop cached classifications and memos: the schema or the set of
    /// planes changed, so the same text may now mean something else.
    fn forget_plans(&mut self) {
        self.plans_epoch += 1;
        self.cache.clear();
        self.memo.clear();
    }

    fn decline(&mut self, reason: impl Into<Decline>, table: Option<&str>) -> Result<Attempt> {
        let reason = reason.into();
        if self.mode == RouteMode::Plane {
            return Err(Error::NotServed(reason));
        }
        let reason = reason.to_string();
        let reason = reason.as_str();
        match self.counters.declined.get_mut(reason) {
            Some(n) => *n += 1,
            None => {
                self.counters.declined.insert(reason.to_owned(), 1);
            }
        }
        if let Some(t) = table {
            self.lock().count(t, false);
        }
        self.set_engine_route(reason);
        self.last_route.table = table.map(str::to_owned);
        Ok(Attempt::ReadOnly)
    }

    /// Route "engine" for `reason`, reusing the last route's allocation.
    fn set_engine_route(&mut self, reason: &str) {
        let r = &mut self.last_route;
        r.kind = RouteKind::Engine;
        if r.reason != reason {
            r.reason.clear();
            r.reason.push_str(reason);
        }
        r.table = None;
        r.plane_cost = None;
        r.engine_cost = None;
    }

    /// A commit by another connection or process shows only as a new
    /// `data_version`. Before any plane answer (and, when the planes are
    /// shared, before a write that starts from the committed state), bring
    /// the planes to what this connection sees: adopt the published planes
    /// of exactly that state, or rebuild from the table. `Ok(false)`:
    /// another connection of this process has committed and not yet
    /// published, so the planes cannot answer this moment (SQLite does).
    pub(crate) fn sync_external(&mut self) -> Result<bool> {
        let v = self.read_data_version()?;
        if crate::mutation::active(Mutation::ReadTxnMoves) && !self.db.is_autocommit() {
            // The mutation: a read transaction follows the newest commit.
            if let Some(p) = self.database.newest() {
                self.adopt(&p);
            }
        }
        if v == self.data_version || crate::mutation::active(Mutation::ExternalWriteMissed) {
            self.data_version = v;
            return Ok(true);
        }
        // A commit of this process seen before its publish: wait for the
        // publish (a few pointer copies after COMMIT returns, unless the
        // writer's thread is not running), yielding, for at most
        // PUBLISH_WAIT; past that SQLite answers. An autocommit read may
        // also look again at a state that newer commits pushed out of the
        // history while this thread was not running.
        let deadline = std::time::Instant::now() + PUBLISH_WAIT;
        let mut passed = 0;
        loop {
            let Some((v2, id)) = self.view()? else { break };
            match self.database.find(&id) {
                Found::Published(p) => {
                    self.data_version = v2;
                    self.adopt(&p);
                    return Ok(true);
                }
                Found::InFlight if std::time::Instant::now() < deadline => {
                    std::thread::yield_now();
                }
                Found::InFlight => return Ok(false),
                Found::Passed if self.db.is_autocommit() && passed < 3 => passed += 1,
                Found::Passed | Found::Nothing => break,
            }
        }
        // Another process's commit (or one this process no longer has
        // published): follow the persisted log, or rebuild and say why.
        let mut why = Rebuild::External;
        if self.persisted.on && !crate::ffi::writing(&self.db) {
            self.refresh_persist()?;
        }
        if self.persisted.on && !crate::ffi::writing(&self.db) {
            match self.follow_persisted()? {
                None => return Ok(true),
                Some(r) => why = r,
            }
        }
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if self.db.is_autocommit() {
            // From the catalog as it is now: another connection or process
            // may have attached or detached a plane.
            planes::reload_all(&self.db, &mut shared, why)?;
        } else {
            planes::rebuild_all(&self.db, &mut shared, why);
        }
        drop(shared);
        self.persisted.forget();
        self.forget_plans();
        self.data_version = v;
        if self.db.is_autocommit() {
            // Others can take the rebuilt planes instead of rebuilding.
            self.publish()?;
            self.repair()?;
        } else {
            self.txn.stale = true;
        }
        Ok(true)
    }

    /// Open the planes the catalog lists: from the persisted state when it
    /// is provably current, else from the tables (counted as a rebuild,
    /// with the reason), persisting them for the next process.
    fn open_planes(&mut self) -> Result<()> {
        if !self.persisted.on {
            let entries = catalog::load_entries(&self.db)?;
            self.lock().replace_entries(entries);
            return Ok(());
        }
        self.db.prepare_cached("BEGIN")?.execute([])?;
        let r = (|| -> Result<Option<(i64, Vec<catalog::PlaneEntry>)>, Untrusted> {
            let v = data_version(&self.db)?;
            let defs = catalog::load_defs(&self.db)?;
            if defs.is_empty() {
                return Ok(None);
            }
            persist::open(&self.db, &defs, &mut self.persisted).map(|e| Some((v, e)))
        })();
        self.db.prepare_cached("COMMIT")?.execute([])?;
        let why = match r {
            Ok(None) => return Ok(()),
            Ok(Some((v, entries))) => {
                self.data_version = v;
                self.lock().replace_entries(entries);
                return Ok(());
            }
            Err(Untrusted::Sql(e)) => return Err(e.into()),
            Err(Untrusted::Stale(why)) => why,
        };
        // `data_version` was read before the build, at the start.
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        planes::reload_all(&self.db, &mut shared, why)?;
        drop(shared);
        self.persisted.forget();
        self.repair()
    }

    /// Bring the planes to the persisted state of what this connection
    /// sees (its transaction has not written). `None`: done; `Some(why)`:
    /// the persisted state cannot be trusted, rebuild.
    fn follow_persisted(&mut self) -> Result<Option<Rebuild>> {
        let auto = self.db.is_autocommit();
        if auto {
            self.db.prepare_cached("BEGIN")?.execute([])?;
        }
        let r = (|| -> Result<(i64, Result<bool, Rebuild>), rusqlite::Error> {
            let v = data_version(&self.db)?;
            let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            let f = match persist::follow(&self.db, &mut shared, &mut self.persisted) {
                Ok(Followed::Applied { schema_moved }) => {
                    if schema_moved {
                        planes::reverify_all(&self.db, &mut shared);
                    }
                    Ok(schema_moved)
                }
                Ok(Followed::Reload) => {
                    let defs = catalog::load_defs(&self.db)?;
                    match persist::open(&self.db, &defs, &mut self.persisted) {
                        Ok(mut entries) => {
                            for e in &mut entries {
                                if let Some(old) = shared.find_def(&e.def) {
                                    e.stats = old.stats.clone();
                                }
                            }
                            shared.replace_entries(entries);
                            Ok(true)
                        }
                        Err(Untrusted::Sql(e)) => return Err(e),
                        Err(Untrusted::Stale(r)) => Err(r),
                    }
                }
                Err(Untrusted::Sql(e)) => return Err(e),
                Err(Untrusted::Stale(r)) => Err(r),
            };
            Ok((v, f))
        })();
        if auto {
            self.db.prepare_cached("COMMIT")?.execute([])?;
        }
        let (v, f) = r?;
        let moved = match f {
            Ok(moved) => moved,
            Err(why) => return Ok(Some(why)),
        };
        self.data_version = v;
        if moved {
            self.forget_plans();
        }
        if auto {
            self.publish()?;
        } else {
            // Nothing written in this transaction yet: its snapshots are
            // of the state just followed.
            let now = self.lock().snapshots();
            if self.txn.base.is_some() {
                self.txn.base = Some(now.clone());
            }
            for (_, s) in &mut self.txn.saves {
                *s = now.clone();
            }
        }
        Ok(None)
    }

    /// After the planes were built from the tables in autocommit, exactly
    /// as of `self.data_version`: persist them as a checkpoint if the write
    /// lock is free this moment (busy or read-only: the next write here
    /// persists them), so that the next process opens from it.
    fn repair(&mut self) -> Result<()> {
        if !self.persisted.on || !self.db.is_autocommit() || self.lock().is_empty() {
            return Ok(());
        }
        self.persist_now(true, false)
    }

    /// Persist the planes in a transaction of their own: a checkpoint
    /// (`checkpoint`), or a delta if anything changed (after a `VACUUM`,
    /// which runs outside a transaction and moves the schema version).
    /// `wait`: take the write lock with the connection's busy timeout;
    /// otherwise only if it is free now.
    fn persist_now(&mut self, checkpoint: bool, wait: bool) -> Result<()> {
        if !self.lock().main_aliases.is_empty() {
            // `BEGIN IMMEDIATE` would lock the file twice; the guard
            // refuses writes meanwhile, and a later write persists.
            return Ok(());
        }
        let began = if wait {
            self.db.execute_batch("BEGIN IMMEDIATE")
        } else {
            let old: i64 = self.db.query_row("PRAGMA busy_timeout", [], |r| r.get(0))?;
            self.db.busy_timeout(std::time::Duration::ZERO)?;
            let b = self.db.execute_batch("BEGIN IMMEDIATE");
            self.db
                .busy_timeout(std::time::Duration::from_millis(old.max(0) as u64))?;
            b
        };
        if began.is_err() {
            return Ok(());
        }
        let r = (|| -> rusqlite::Result<bool> {
            if data_version(&self.db)? != self.data_version {
                // Someone committed since the planes were current.
                return Ok(false);
            }
            let views = persist::views(&self.lock());
            let persisted = &mut self.persisted;
            self.user_counters.hidden(&self.db, || {
                persist::persist(&self.db, &views, persisted, checkpoint)
            })?;
            Ok(true)
        })();
        let done = match r {
            Ok(true) => self.db.execute_batch("COMMIT").is_ok(),
            _ => false,
        };
        if done {
            self.persisted.committed();
        } else {
            let _ = self.db.execute_batch("ROLLBACK");
            self.persisted.rolled_back();
        }
        self.lock().take_flags();
        Ok(())
    }

    /// The `data_version` and the identity of the committed state this
    /// connection sees: its open read transaction's, or (in autocommit) the
    /// newest. `None` when the file is not in WAL mode, or inside a
    /// transaction that has written (its state is its own).
    fn view(&self) -> Result<Option<(i64, WalSnapshot)>> {
        if !self.db.is_autocommit() {
            let v = self.read_data_version()?;
            return Ok(WalSnapshot::of(&self.db).map(|s| (v, s)));
        }
        self.db.prepare_cached("BEGIN")?.execute([])?;
        let r = self
            .read_data_version()
            .map(|v| WalSnapshot::of(&self.db).map(|s| (v, s)));
        let end = self.db.prepare_cached("COMMIT")?.execute([]);
        let r = r?;
        end?;
        Ok(r)
    }

    /// Take the published planes `p`, which are exactly the state this
    /// connection's SQLite shows.
    fn adopt(&mut self, p: &Published) {
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        // Cached plans hold column affinities: a schema change elsewhere
        // (which re-reads the column maps there) makes them suspect.
        let same = shared.defs_match(&p.entries)
            && shared
                .entries
                .iter()
                .zip(&p.entries)
                .all(|(e, pe)| Arc::ptr_eq(&e.cols, &pe.snap.cols));
        if same {
            // A commit that changed no plane (another table, or the same
            // state published again) leaves the memo valid.
            let mut changed = false;
            for (e, pe) in shared.entries_mut().iter_mut().zip(&p.entries) {
                if !e.is_at(&pe.snap) {
                    e.restore(&pe.snap);
                    changed = true;
                }
            }
            if changed {
                shared.bump_writes();
            }
        } else {
            let entries = p
                .entries
                .iter()
                .map(|pe| database::entry_from_published(pe, shared.find_def(&pe.def)))
                .collect();
            shared.replace_entries(entries);
        }
        // In a transaction this is its first look at the file: nothing has
        // been written yet, so every snapshot it took is of this state.
        if !self.db.is_autocommit() {
            let now = shared.snapshots();
            if self.txn.base.is_some() {
                self.txn.base = Some(now.clone());
            }
            for (_, s) in &mut self.txn.saves {
                *s = now.clone();
            }
        }
        self.persisted.adopted(p.mark, &shared);
        drop(shared);
        if self.persisted.on {
            // Adopted planes skip open's checks: the guard keys of this
            // file still have to be known for its writes to pass.
            self.guard
                .set_keys(persist::file_keys(&self.db).ok().flatten());
        }
        if !same {
            self.forget_plans();
        }
    }

    /// The shared-plane mutations: publish the working copy, with its
    /// uncommitted or rolled-back writes, as the committed state it started
    /// from.
    fn publish_mutated(&self) {
        let entries = self.lock().published();
        self.database.publish_as_newest(entries);
    }

    /// After a commit (or a rebuild) in autocommit: publish the planes for
    /// the other connections of this process, tagged with the committed
    /// state they are exactly, or publish nothing when that cannot be
    /// proven (a commit by someone else since the planes were current).
    fn publish(&mut self) -> Result<()> {
        if !self.database.shared() || !self.db.is_autocommit() {
            return Ok(());
        }
        let Some((v, id)) = self.view()? else {
            return Ok(());
        };
        if v != self.data_version {
            return Ok(());
        }
        let entries = self.lock().published();
        self.database.publish(id, entries, self.persisted.mark());
        Ok(())
    }

    /// Run a statement on SQLite, keeping the planes exact through whatever
    /// SQLite does or undoes.
    fn run_engine(
        &mut self,
        sql: &str,
        params: &[Value],
        want_rows: bool,
    ) -> Result<(Rows, usize)> {
        let kind = txn::kind_of(sql);
        let was_auto = self.db.is_autocommit();
        if was_auto && self.wraps(sql, &kind) {
            return self.run_wrapped(sql, params, want_rows, &kind);
        }
        // The end of an explicit transaction that wrote: its state row
        // goes into it, before the COMMIT.
        // A RELEASE that leaves the transaction open writes none: its
        // guards would come back by a schema statement, at which FTS writes
        // out its pending rows where plain SQLite would not.
        let ends = match &kind {
            StmtKind::Commit => true,
            StmtKind::Release(name) => {
                self.txn.release_may_end(name) || crate::mutation::active(Mutation::InnerReleaseRow)
            }
            _ => false,
        };
        if !was_auto
            && ends
            && self.persisted.on
            && crate::ffi::writing(&self.db)
            && !self.lock().is_empty()
        {
            self.persist_in_txn()?;
            // The state row put every guard back.
            self.txn.guards_out = false;
        }
        // The mutation `persist_rolled_back`: the working copy of a
        // transaction that rolls back is persisted after all.
        let rolled_back_copy = (kind == StmtKind::Rollback
            && !was_auto
            && self.persisted.on
            && crate::mutation::active(Mutation::PersistRolledBack)
            && crate::ffi::writing(&self.db))
        .then(|| self.lock().snapshots());
        if !was_auto && self.persisted.on && !self.txn.guards_out && !self.lock().is_empty() {
            self.guards_out_of_the_way(sql, &kind)?;
        }
        // A statement that may end in a commit: a reader that sees it
        // before it is published waits for the publish instead of
        // rebuilding. Marked whether or not the file is shared now (asked
        // again after the statement): a connection that opens meanwhile
        // must find the commit either in flight or published.
        let sharing = self.database.shared();
        let _commit = (was_auto || matches!(kind, StmtKind::Commit | StmtKind::Release(_)))
            .then(|| self.database.commit_in_flight());
        // Inside a transaction only BEGIN and SAVEPOINT need a snapshot (a
        // failed statement there rebuilds); an autocommit statement logs
        // what it applies instead, which a snapshot's copy-on-write of the
        // first page it writes would cost several times over.
        // VACUUM renumbers the rowids of a table without an index; a guard
        // would keep them (see `vacuum.rs`).
        let vacuum_of = if was_auto {
            txn::vacuum_schema(sql)
        } else {
            None
        };
        let vacuum = vacuum_of
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("main"));
        // (Not while main is attached again: the state row that puts the
        // guards back waits for the next write then.)
        let guarded = || {
            let planes = self.lock();
            !planes.is_empty() && planes.main_aliases.is_empty()
        };
        let guards_dropped = if vacuum && self.persisted.on && guarded() {
            self.user_counters.hidden(&self.db, || {
                crate::vacuum::drop_renumbering_guards(&self.db, "main")
            })?
        } else {
            false
        };
        // Another attached file with persisted planes of its own: its
        // guards would keep its rowids too.
        if let Some(schema) = vacuum_of.as_deref().filter(|_| !vacuum) {
            self.user_counters.hidden(&self.db, || {
                crate::vacuum::drop_renumbering_guards(&self.db, schema)
            })?;
        }
        let before = {
            let mut s = self.lock();
            s.begin_statement(was_auto);
            matches!(kind, StmtKind::Begin | StmtKind::Savepoint(_)).then(|| s.snapshots())
        };
        let ends = |k: StmtKind, m: Mutation| kind == k && crate::mutation::active(m);
        if sharing
            && !was_auto
            && (ends(StmtKind::Commit, Mutation::PublishBeforeCommit)
                || ends(StmtKind::Rollback, Mutation::PublishRollback))
        {
            self.publish_mutated();
        }
        let result = exec(&self.db, sql, params, want_rows);
        self.note_changes(sql);
        if let Some(schema) = vacuum_of
            .as_deref()
            .filter(|_| result.is_ok() && !crate::mutation::active(Mutation::VacuumCountsOwnRows))
        {
            if let Some(rowid) = crate::vacuum::plain_last_insert_rowid(&self.db, schema)? {
                crate::ffi::set_last_insert_rowid(&self.db, rowid);
            }
        }
        let now_auto = self.db.is_autocommit();
        if sharing && !now_auto && crate::mutation::active(Mutation::PublishUncommitted) {
            self.publish_mutated();
        }
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let flags = shared.take_flags();
        let undo_or_rebuild = |shared: &mut Planes, db: &rusqlite::Connection| {
            if !shared.undo_statement() {
                planes::rebuild_all(db, shared, Rebuild::Undo);
            }
        };
        // Undoing a schema change inside the transaction changes what a
        // statement's text means again.
        let mut schema_undone = false;
        if flags.rolled_back {
            schema_undone = self.txn.schema_changed;
            // SQLite rolled back a whole transaction: the explicit one, or
            // the statement's own implicit one.
            if crate::mutation::active(Mutation::IgnoreRollback) {
                // The mutation: SQLite's undo goes unnoticed.
            } else if was_auto {
                undo_or_rebuild(&mut shared, &self.db);
            } else if self.txn.stale {
                planes::rebuild_all(&self.db, &mut shared, Rebuild::StaleSnapshot);
            } else if let Some(t) = self.txn.base.take() {
                shared.restore(&t);
            }
            self.txn.clear();
        } else if result.is_err() {
            if flags.events > 0 {
                if was_auto && now_auto {
                    if !flags.committed {
                        undo_or_rebuild(&mut shared, &self.db);
                    }
                } else if !crate::mutation::active(Mutation::IgnoreFailedStatement) {
                    // Inside a transaction that goes on: ABORT undid the
                    // statement's rows, FAIL kept the earlier ones, and no
                    // hook says which. Resync from the table itself.
                    planes::rebuild_all(&self.db, &mut shared, Rebuild::FailedStatement);
                }
            }
        } else {
            match &kind {
                StmtKind::Begin => {
                    self.txn.base = before;
                    self.txn.by_begin = true;
                }
                StmtKind::Savepoint(name) => {
                    if was_auto {
                        self.txn.base = before.clone();
                    }
                    if let Some(b) = before {
                        self.txn.saves.push((name.clone(), b));
                    }
                }
                StmtKind::Release(name) => self.txn.release(name),
                StmtKind::RollbackTo(name) => {
                    schema_undone = self.txn.schema_changed;
                    // The guards may be back, and what can fail with them.
                    self.txn.guards_out = false;
                    self.txn.guards_matter.clear();
                    self.txn.unhalted = None;
                    if let Some(snaps) = self.txn.rollback_to(name) {
                        if self.txn.stale {
                            planes::rebuild_all(&self.db, &mut shared, Rebuild::StaleSnapshot);
                        } else if !crate::mutation::active(Mutation::IgnoreRollbackTo) {
                            shared.restore(&snaps);
                        }
                    }
                }
                _ => {}
            }
        }
        // A schema statement that failed changed nothing (SQLite undid it),
        // so there is nothing to follow, and no reason to make SQLite read
        // its schema again where it would not without Pleroma.
        let schema_changed = kind.is_schema_change() && result.is_ok();
        if schema_changed && !now_auto {
            self.txn.schema_changed = true;
        }
        if kind.is_schema_change() || is_pragma(sql) {
            self.txn.guards_matter.clear();
            self.txn.unhalted = None;
        }
        if now_auto {
            self.txn.clear();
            if flags.committed {
                self.persisted.committed();
            } else {
                self.persisted.rolled_back();
            }
        }
        if schema_changed || schema_undone {
            planes::reverify_all(&self.db, &mut shared);
            drop(shared);
            self.forget_plans();
        } else {
            drop(shared);
        }
        // Our own commits do not move data_version, so it still tells
        // other connections' writes apart.
        if now_auto && flags.committed {
            self.publish()?;
        }
        // VACUUM runs outside any transaction and moves the schema
        // version: record that, or the next open would distrust the state.
        if was_auto
            && (schema_changed || guards_dropped)
            && self.persisted.on
            && !self.lock().is_empty()
        {
            self.persist_now(false, true)?;
        }
        if let Some(copy) = rolled_back_copy {
            let now = self.lock().snapshots();
            self.lock().restore(&copy);
            self.persist_now(false, true)?;
            self.lock().restore(&now);
        }
        Ok(result?)
    }

    /// Whether an autocommit statement runs wrapped in a transaction that
    /// also writes the planes' state row: a statement that may write, on a
    /// database with persisted planes. Not VACUUM, ATTACH, DETACH or a
    /// PRAGMA (SQLite refuses some of them in a transaction, and none
    /// writes a planed table).
    fn wraps(&self, sql: &str, kind: &StmtKind) -> bool {
        if !self.persisted.on || !matches!(kind, StmtKind::Other | StmtKind::Schema) {
            return false;
        }
        if ["VACUUM", "ATTACH", "DETACH", "PRAGMA"]
            .iter()
            .any(|w| tokenize::starts_with_keyword(sql, w))
        {
            return false;
        }
        {
            // With the file attached a second time, the guard refuses the
            // write instead (see `allow_guard`).
            let planes = self.lock();
            if planes.is_empty() || !planes.main_aliases.is_empty() {
                return false;
            }
        }
        // A statement that does not prepare runs unwrapped and fails as it
        // would anyway.
        self.db
            .prepare_cached(sql)
            .is_ok_and(|stmt| !stmt.readonly())
    }

    /// An autocommit write on a database with persisted planes: `BEGIN
    /// IMMEDIATE`, follow any commit made since the planes were current
    /// (nobody can commit now), the statement, its state row, `COMMIT`. The
    /// outcome is the autocommit statement's: a failure keeps what SQLite
    /// keeps in autocommit (nothing after ABORT, the earlier rows after
    /// FAIL) and commits that.
    fn run_wrapped(
        &mut self,
        sql: &str,
        params: &[Value],
        want_rows: bool,
        kind: &StmtKind,
    ) -> Result<(Rows, usize)> {
        let _commit = self.database.commit_in_flight();
        let begun = self
            .db
            .prepare_cached("BEGIN IMMEDIATE")
            .and_then(|mut s| s.execute([]));
        if let Err(e) = begun {
            if e.sqlite_error_code() != Some(rusqlite::ErrorCode::ReadOnly) {
                return Err(e.into());
            }
            // A read-only connection (`query_only`, a read-only file): the
            // statement cannot write either, and fails as it does in plain
            // SQLite (which also sets `changes()` to 0 then).
            let r = exec(&self.db, sql, params, want_rows);
            self.note_changes(sql);
            return Ok(r?);
        }
        self.lock().take_flags();
        let v = match self.read_data_version() {
            Ok(v) => v,
            Err(e) => return self.abandon_wrap(Err(e)),
        };
        if v != self.data_version {
            let why = match self.follow_persisted() {
                Ok(None) => None,
                Ok(Some(why)) => Some(why),
                Err(e) => return self.abandon_wrap(Err(e)),
            };
            if let Some(why) = why {
                if let Err(e) = self.refresh_persist() {
                    return self.abandon_wrap(Err(e));
                }
                let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = planes::reload_all(&self.db, &mut shared, why) {
                    drop(shared);
                    return self.abandon_wrap(Err(e.into()));
                }
                drop(shared);
                self.persisted.forget();
                self.forget_plans();
            }
            self.data_version = v;
        }
        // ALTER TABLE: SQLite refuses to drop or rename a column an index
        // uses. A transfer: the guards would turn SQLite's optimization off
        // (`txn_guards::may_transfer`). The state row puts them back.
        if is_alter(sql)
            || (crate::txn_guards::may_transfer(sql)
                && !crate::mutation::active(Mutation::TransferWithGuards))
        {
            let dropped = self
                .user_counters
                .hidden(&self.db, || persist::drop_guards(&self.db));
            if let Err(e) = dropped {
                return self.abandon_wrap(Err(e.into()));
            }
        }
        self.lock().begin_statement(true);
        let total_before = self.db.total_changes() as i64;
        let result = exec(&self.db, sql, params, want_rows);
        let statement_rows = self.db.total_changes() as i64 - total_before;
        self.note_changes(sql);
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let flags = shared.take_flags();
        if self.db.is_autocommit() {
            // SQLite ended the transaction itself (a ROLLBACK conflict, or
            // RAISE(ROLLBACK)): as an autocommit statement, nothing stays.
            if flags.rolled_back && !shared.undo_statement() {
                planes::rebuild_all(&self.db, &mut shared, Rebuild::Undo);
            }
            drop(shared);
            self.persisted.rolled_back();
            return Ok(result?);
        }
        if let Err(e) = &result {
            // Commit what plain SQLite would have committed in autocommit
            // (see `failed.rs`), and nothing else; the planes follow what
            // the table holds then, never the other way round.
            if !crate::failed::autocommit_commits(e, self.db.changes(), flags.counted_row) {
                drop(shared);
                let _ = self.db.execute_batch("ROLLBACK");
                let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                shared.take_flags();
                if flags.events > 0 && !shared.undo_statement() {
                    planes::rebuild_all(&self.db, &mut shared, Rebuild::Undo);
                }
                drop(shared);
                self.persisted.rolled_back();
                return Ok(result?);
            }
            if flags.events > 0 {
                // Which of the applied events stayed no hook says: read the
                // table, inside the transaction that commits it.
                planes::rebuild_all(&self.db, &mut shared, Rebuild::FailedStatement);
            }
        }
        let schema_changed = kind.is_schema_change() && result.is_ok();
        if schema_changed {
            planes::reverify_all(&self.db, &mut shared);
        }
        drop(shared);
        if schema_changed {
            self.forget_plans();
        }
        if let Err(e) = self.persist_in_txn() {
            return self.abandon_wrap(Err(e));
        }
        let committed = self.user_counters.committing(&self.db, || {
            self.db
                .prepare_cached("COMMIT")
                .and_then(|mut s| s.execute([]))
        });
        if let Err(e) = committed {
            // A deferred foreign key: SQLite rolls the statement back in
            // autocommit, and counts none of its rows.
            let r = self.abandon_wrap(Err(e.into()));
            self.user_counters
                .statement_rolled_back(&self.db, statement_rows);
            return r;
        }
        self.lock().take_flags();
        self.persisted.committed();
        self.publish()?;
        Ok(result?)
    }

    /// A wrapped statement that cannot commit: roll its transaction back
    /// and take back what the statement applied to the planes.
    fn abandon_wrap<T>(&mut self, err: Result<T>) -> Result<T> {
        let _ = self.db.execute_batch("ROLLBACK");
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        shared.take_flags();
        if !shared.undo_statement() {
            planes::rebuild_all(&self.db, &mut shared, Rebuild::Undo);
        }
        drop(shared);
        self.persisted.rolled_back();
        err
    }

    /// Inside an explicit transaction on a file with persisted planes: drop
    /// the guards of main before a statement whose compile they would
    /// change in a way that matters (`txn_guards.rs`), or before an ALTER
    /// TABLE (SQLite refuses to drop or rename a column an index uses).
    /// The transaction's state row puts them back.
    fn guards_out_of_the_way(&mut self, sql: &str, kind: &StmtKind) -> Result<()> {
        if !matches!(kind, StmtKind::Other | StmtKind::Schema) {
            return Ok(());
        }
        if !is_alter(sql) && !self.guards_matter(sql)? {
            return Ok(());
        }
        self.user_counters
            .hidden(&self.db, || persist::drop_guards(&self.db))?;
        self.txn.guards_out = true;
        Ok(())
    }

    /// Whether the guards would change what this statement keeps inside
    /// the transaction (`txn_guards.rs`): a transfer, or a write that can
    /// fail part-way without a halt. Asked once per text and transaction.
    fn guards_matter(&mut self, sql: &str) -> Result<bool> {
        if crate::txn_guards::may_transfer(sql) {
            return Ok(!crate::mutation::active(Mutation::TransferWithGuards));
        }
        if crate::mutation::active(Mutation::GuardsKeptInTxn) {
            return Ok(false);
        }
        // A read-only statement (SQLite's own word; the statement is cached
        // for the run that follows) writes no guarded table.
        if self.db.prepare_cached(sql).is_ok_and(|s| s.readonly()) {
            return Ok(false);
        }
        let unhalted = match self.txn.unhalted {
            Some(u) => u,
            None => {
                let u = crate::txn_guards::Unhalted::read(&self.db)?;
                self.txn.unhalted = Some(u);
                u
            }
        };
        if !unhalted.possible() {
            return Ok(false);
        }
        if unhalted.vtabs() && !crate::mutation::active(Mutation::GuardsLateWithVtabs) {
            return Ok(true);
        }
        if let Some(m) = self.txn.guards_matter.get(sql) {
            return Ok(*m);
        }
        let guarded: Vec<String> = self
            .lock()
            .entries
            .iter()
            .map(|e| e.def.table.clone())
            .collect();
        let m = crate::txn_guards::guards_matter(&mut self.db, sql, &guarded, unhalted)?;
        self.txn.guards_matter.insert(sql.to_owned(), m);
        Ok(m)
    }

    /// Write the planes' state row inside the open write transaction. If
    /// another commit landed before this transaction's first write, the
    /// working copy lacks it: rebuild it from the table first (inside the
    /// transaction, so with this transaction's own rows).
    fn persist_in_txn(&mut self) -> Result<()> {
        if !self.persisted.on {
            // Turned off (here, or by another connection just followed).
            return Ok(());
        }
        let v = self.read_data_version()?;
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if v != self.data_version {
            planes::rebuild_all(&self.db, &mut shared, Rebuild::StaleBase);
            self.persisted.forget();
            self.data_version = v;
            self.txn.stale = true;
        }
        // Written without the planes lock: the hook takes it for the state
        // row's own row event.
        let views = persist::views(&shared);
        drop(shared);
        let persisted = &mut self.persisted;
        self.user_counters.hidden(&self.db, || {
            persist::persist(&self.db, &views, persisted, false)
        })?;
        Ok(())
    }

    fn pragma(&mut self, p: Pragma) -> Result<Rows> {
        match p {
            Pragma::Attach {
                table,
                dims,
                measures,
            } => {
                self.require_no_txn("pleroma_attach")?;
                let def = catalog::validate_def(&self.db, &table, &dims, &measures)
                    .map_err(Error::Pragma)?;
                if self.lock().find(&def.table).is_some() {
                    return Err(Error::Pragma(format!(
                        "pleroma_attach: table {} already has a plane",
                        def.table
                    )));
                }
                let version = self.read_data_version()?;
                let entry = catalog::build_entry(&self.db, def.clone());
                if let Some(reason) = entry.out_of_service() {
                    return Err(Error::Pragma(format!("pleroma_attach: {reason}")));
                }
                catalog::check_measures(&self.db, &entry).map_err(Error::Pragma)?;
                self.user_counters
                    .hidden(&self.db, || catalog::store(&self.db, &def))?;
                self.lock().add(entry);
                self.after_catalog_change(version);
                Ok(Rows::default())
            }
            Pragma::Limb {
                fact,
                fact_key,
                dim,
                dim_key,
            } => {
                self.require_no_txn("pleroma_limb")?;
                let fact_def = {
                    let shared = self.lock();
                    let i = shared.find(&fact).ok_or_else(|| {
                        Error::Pragma(format!(
                            "pleroma_limb: table {fact} has no plane; PRAGMA pleroma_attach it first"
                        ))
                    })?;
                    shared.entry(i).def.clone()
                };
                let (f, d) = catalog::limb_defs(&self.db, &fact_def, &fact_key, &dim, &dim_key)
                    .map_err(Error::Pragma)?;
                let limb = f.limb().cloned().expect("a limb side");
                if self.lock().find_limb(&limb.fact, &limb.fact_key).is_some() {
                    return Err(Error::Pragma(format!(
                        "pleroma_limb: {}.{} already has a limb",
                        limb.fact, limb.fact_key
                    )));
                }
                let version = self.read_data_version()?;
                let (f, d) = (
                    catalog::build_entry(&self.db, f),
                    catalog::build_entry(&self.db, d),
                );
                for side in [&f, &d] {
                    if let Some(reason) = side.out_of_service() {
                        return Err(Error::Pragma(format!("pleroma_limb: {reason}")));
                    }
                }
                self.user_counters
                    .hidden(&self.db, || catalog::store_limb(&self.db, &limb))?;
                {
                    let mut shared = self.lock();
                    shared.add(f);
                    shared.add(d);
                }
                self.after_catalog_change(version);
                Ok(Rows::default())
            }
            Pragma::Detach { table } => {
                self.require_no_txn("pleroma_detach")?;
                let name = self.known_table(&table, "pleroma_detach")?;
                // The one-row catalog delete goes last (see `UserCounters`).
                self.user_counters.hidden(&self.db, || {
                    persist::drop_guard(&self.db, &name)?;
                    catalog::remove_limbs(&self.db, &name)?;
                    catalog::remove(&self.db, &name)
                })?;
                self.lock().remove(&name);
                self.forget_plans();
                Ok(Rows::default())
            }
            Pragma::Rebuild { table } => {
                self.require_no_txn("pleroma_rebuild")?;
                let name = self.known_table(&table, "pleroma_rebuild")?;
                let version = self.read_data_version()?;
                let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                planes::rebuild_one(&self.db, &mut shared, &name, Rebuild::Requested);
                drop(shared);
                self.after_catalog_change(version);
                Ok(Rows::default())
            }
            Pragma::Planes => Ok(self.lock().planes_rows()),
            Pragma::Explain { sql } => self.explain(&sql),
            Pragma::Route(None) => Ok(Rows {
                columns: vec!["pleroma_route".into()],
                rows: vec![vec![Value::Text(
                    match self.mode {
                        RouteMode::Auto => "auto",
                        RouteMode::Engine => "engine",
                        RouteMode::Plane => "plane",
                    }
                    .into(),
                )]],
            }),
            Pragma::Route(Some(mode)) => {
                self.mode = mode;
                Ok(Rows::default())
            }
            Pragma::Persist(None) => Ok(Rows {
                columns: vec!["pleroma_persist".into()],
                rows: vec![vec![Value::Text(
                    if self.persisted.on { "on" } else { "off" }.into(),
                )]],
            }),
            Pragma::Persist(Some(on)) => {
                self.require_no_txn("pleroma_persist")?;
                if on && !persist::can_persist(&self.db) {
                    return Err(Error::Pragma(
                        "pleroma_persist: an in-memory or temporary database cannot persist planes"
                            .into(),
                    ));
                }
                self.db.execute_batch("BEGIN")?;
                let r = self
                    .user_counters
                    .hidden(&self.db, || persist::set_setting(&self.db, on));
                match r.and_then(|()| self.db.execute_batch("COMMIT")) {
                    Ok(()) => {}
                    Err(e) => {
                        let _ = self.db.execute_batch("ROLLBACK");
                        return Err(e.into());
                    }
                }
                self.lock().take_flags();
                self.persisted.on = on;
                self.persisted.forget();
                // Persisting again from now on: the repair after this
                // PRAGMA writes the checkpoint and the guards.
                self.guard
                    .allow
                    .store(on, std::sync::atomic::Ordering::Relaxed);
                Ok(Rows::default())
            }
        }
    }

    /// `version`: `data_version` read before the build, so that a commit by
    /// another connection during the build still counts as external. With
    /// other planes attached the old value stays: if it differs, they are
    /// stale, and the next answer rebuilds them all.
    fn after_catalog_change(&mut self, version: i64) {
        self.forget_plans();
        if self.lock().tables().count() == 1 {
            self.data_version = version;
        }
    }

    fn require_no_txn(&self, what: &str) -> Result<()> {
        if self.db.is_autocommit() {
            Ok(())
        } else {
            Err(Error::Pragma(format!(
                "{what}: cannot run inside a transaction"
            )))
        }
    }

    fn known_table(&self, table: &str, what: &str) -> Result<String> {
        let shared = self.lock();
        shared
            .find(table)
            .map(|i| shared.entry(i).def.table.clone())
            .ok_or_else(|| Error::Pragma(format!("{what}: table {table} has no plane")))
    }

    fn explain(&mut self, sql: &str) -> Result<Rows> {
        let class = {
            let shared = self.lock();
            classify::classify(&self.db, &shared, sql, false)
        };
        let (route, reason, plane_cost, engine_cost) = match &class {
            Classified::NotSelect => ("engine", "not a SELECT".to_owned(), None, None),
            Classified::Declined(r) => ("engine", r.to_string(), None, None),
            Classified::Join(_) => ("plane", "join limb".to_owned(), None, None),
            Classified::Residue(r) => {
                let _ = self.sync_external()?;
                let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                match answer_with_residue::core_json(&self.db, &mut shared, self.mode, r)? {
                    Ok((_, route)) => (
                        "plane",
                        format!("residue: {}", r.split),
                        route.plane_cost,
                        route.engine_cost,
                    ),
                    Err((reason, _)) => ("engine", reason.to_string(), None, None),
                }
            }
            Classified::Plan(plan) => {
                let _ = self.sync_external()?;
                let est = answer_from_cells::estimate(&self.lock(), plan);
                match est {
                    Ok((pc, ec)) => ("plane", format!("class {}", plan.class), Some(pc), Some(ec)),
                    Err(r) => ("engine", r, None, None),
                }
            }
        };
        let f = |v: Option<f64>| v.map(Value::Real).unwrap_or(Value::Null);
        Ok(Rows {
            columns: vec![
                "route".into(),
                "reason".into(),
                "plane_cost".into(),
                "engine_cost".into(),
            ],
            rows: vec![vec![
                Value::Text(route.into()),
                Value::Text(reason),
                f(plane_cost),
                f(engine_cost),
            ]],
        })
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

/// Run one statement on SQLite and collect its rows.
fn exec(
    db: &rusqlite::Connection,
    sql: &str,
    params: &[Value],
    want_rows: bool,
) -> rusqlite::Result<(Rows, usize)> {
    let mut stmt = db.prepare_cached(sql)?;
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
        .then(|| stmt.column_names().into_iter().map(str::to_owned).collect());
    let mut rows = stmt.query(params)?;
    while let Some(row) = rows.next()? {
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
    out.columns =
        stale.unwrap_or_else(|| stmt.column_names().into_iter().map(str::to_owned).collect());
    Ok((out, db.changes() as usize))
}

impl Connection {
    /// After a statement SQLite ran: what `changes()` says now, read before
    /// Pleroma writes anything of its own (a statement that changes no row,
    /// such as a SELECT, leaves it as it was, as in SQLite).
    fn note_changes(&mut self, sql: &str) {
        let writes = self
            .db
            .prepare_cached(sql)
            .is_ok_and(|stmt| !stmt.readonly());
        // Only INSERT, UPDATE and DELETE (also under WITH) set SQLite's
        // count, to 0 when they match nothing. Other writes (DDL, VACUUM, a
        // PRAGMA) leave the user's count as it was: SQLite's raw value may
        // be Pleroma's own last state row.
        if writes && sets_changes(sql) {
            self.last_changes = self.db.changes();
            self.user_counters.user_set_changes();
        }
    }
}

/// Whether a statement that writes is one whose end sets `changes()`: an
/// INSERT, REPLACE, UPDATE or DELETE, or a WITH that leads to one (a WITH
/// before a SELECT does not write).
fn sets_changes(sql: &str) -> bool {
    tokenize::first(sql).is_some_and(|t| {
        ["INSERT", "REPLACE", "UPDATE", "DELETE", "WITH"]
            .iter()
            .any(|kw| t.is(kw))
    })
}

/// `PRAGMA [schema.]full_column_names` or `short_column_names`, which
/// change the names SQLite gives result columns at prepare.
fn names_columns(sql: &str) -> bool {
    let t = sql.trim_start();
    t.get(..6).is_some_and(|w| w.eq_ignore_ascii_case("PRAGMA")) && {
        let lower = t.to_ascii_lowercase();
        lower.contains("full_column_names") || lower.contains("short_column_names")
    }
}

/// `ALTER TABLE …`: it may drop or rename a column a guard uses.
fn is_pragma(sql: &str) -> bool {
    tokenize::starts_with_keyword(sql, "PRAGMA")
}

fn is_alter(sql: &str) -> bool {
    tokenize::starts_with_keyword(sql, "ALTER")
}

fn data_version(db: &rusqlite::Connection) -> rusqlite::Result<i64> {
    db.prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
