//! Persistence around a write: an autocommit write on a file with
//! persisted planes runs inside `BEGIN IMMEDIATE … COMMIT` with its state
//! row (the wrap), an explicit transaction's state row goes in before its
//! COMMIT (`persist_in_txn`), and inside transactions the guards leave
//! before a statement they would change (`txn_guards.rs`).

use super::*;

/// Texts whose reach `Connection::reaches_no_plane` keeps.
const REACH_CAPACITY: usize = 1024;

impl Connection {
    /// Whether an autocommit statement runs wrapped in a transaction that
    /// also writes the planes' state row: a statement that may write, on a
    /// database with persisted planes. Not VACUUM, ATTACH, DETACH or a
    /// PRAGMA (SQLite refuses some of them in a transaction, and none
    /// writes a planed table).
    pub(super) fn wraps(&self, sql: &str, facts: &Facts) -> bool {
        if !self.persisted.on
            || !matches!(facts.kind, StmtKind::Other | StmtKind::Schema)
            || facts.not_wrapped
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

    /// The tables of main that have a plane (and a guard).
    fn planed_tables(&self) -> Vec<String> {
        self.lock()
            .entries
            .iter()
            .map(|e| e.def.table.clone())
            .collect()
    }

    /// Whether an autocommit write that [`Connection::wraps`] would wrap
    /// provably changes no planed table, so that it needs no state row and
    /// no transaction of Pleroma's: a DML statement (not a transfer, whose
    /// guards Pleroma must move) on planes whose persisted state is the
    /// working copy, that writes no table of main with a plane or of
    /// Pleroma's own. What it writes is what SQLite's authorizer names while
    /// compiling it: the statement's own tables, every trigger's (recursive
    /// ones under `recursive_triggers`) and the foreign-key actions'. Asked
    /// once per text until the schema, the planes or a PRAGMA change.
    /// Unsure (it does not prepare): `false`. A write that reaches a plane
    /// all the same (a virtual table or a function that writes one, a
    /// schema another connection changed since) is refused by the guard
    /// and runs once more, wrapped (`run_unguarded`).
    pub(super) fn reaches_no_plane(&mut self, sql: &str, facts: &Facts) -> Result<bool> {
        if facts.kind != StmtKind::Other || self.persisted.seq.is_none() || facts.may_transfer {
            return Ok(false);
        }
        if crate::mutation::active(Mutation::UnguardedWritePasses) {
            return Ok(true);
        }
        if let Some(reaches) = self.reach.get(sql) {
            return Ok(!*reaches);
        }
        let planed = self.planed_tables();
        let reaches = match self.write_set(sql)? {
            None => true,
            Some(writes) => writes.iter().any(|w| w.of_main() && w.reaches(&planed)),
        };
        if self.reach.len() >= REACH_CAPACITY {
            self.reach.clear();
        }
        self.reach.insert(sql.to_owned(), reaches);
        Ok(!reaches)
    }

    /// An autocommit write that changes no planed table
    /// ([`Connection::reaches_no_plane`]): it runs as without persisted
    /// planes, SQLite's own autocommit statement, with the guard refusing
    /// every write to a planed table meanwhile. A refusal fails the
    /// statement before it changes a planed row (the guard is an index
    /// the row's write computes first), and SQLite undoes it whole (an
    /// error from a function is no halt: `OE_Abort`, in autocommit): it
    /// runs once more, wrapped, and its text is wrapped from then on.
    pub(super) fn run_unguarded(
        &mut self,
        sql: &str,
        params: &[Value],
        want_rows: bool,
        facts: &Facts,
    ) -> Result<(Rows, usize)> {
        use std::sync::atomic::Ordering::Relaxed;
        let passes = crate::mutation::active(Mutation::UnguardedWritePasses);
        let allowed = self.guard.allow.swap(passes, Relaxed);
        let total_before = self.db.total_changes() as i64;
        let r = self.run_plain(sql, params, want_rows, facts, true);
        self.guard.allow.store(allowed, Relaxed);
        if r.is_err() && self.db.is_autocommit() && self.guard.refused.swap(false, Relaxed) {
            self.reach.insert(sql.to_owned(), true);
            // Rows a trigger of the undone run counted are not the user's.
            self.user_counters.discount(&self.db, total_before);
            return self.run_wrapped(sql, params, want_rows, facts);
        }
        r
    }

    /// An autocommit write on a database with persisted planes: `BEGIN
    /// IMMEDIATE`, follow any commit made since the planes were current
    /// (nobody can commit now), the statement, its state row, `COMMIT`. The
    /// outcome is the autocommit statement's: a failure keeps what SQLite
    /// keeps in autocommit (nothing after ABORT, the earlier rows after
    /// FAIL) and commits that.
    pub(super) fn run_wrapped(
        &mut self,
        sql: &str,
        params: &[Value],
        want_rows: bool,
        facts: &Facts,
    ) -> Result<(Rows, usize)> {
        let _commit = self.database.commit_in_flight();
        let begun = self.begin_writing_main();
        if let Err(e) = begun {
            if e.sqlite_error_code() != Some(rusqlite::ErrorCode::ReadOnly) {
                return Err(e.into());
            }
            // A read-only connection (`query_only`, a read-only file): the
            // statement cannot write either, and fails as it does in plain
            // SQLite (which also sets `changes()` to 0 then).
            let (r, _) = self.exec_user(sql, params, want_rows, facts);
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
                let mut shared = planes::lock(&self.shared);
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
        if facts.alter
            || (facts.may_transfer && !crate::mutation::active(Mutation::TransferWithGuards))
        {
            let dropped = self
                .user_counters
                .hidden(&self.db, || persist::drop_guards(&self.db));
            if let Err(e) = dropped {
                return self.abandon_wrap(Err(e.into()));
            }
        }
        self.lock().begin_statement(true);
        let total_before = self.db.total_changes();
        let (result, readonly) = self.exec_user(sql, params, want_rows, facts);
        // The statement's own rows (`changes()`): what plain SQLite takes
        // out of `total_changes()` when its autocommit fails at the commit.
        // Its triggers' and foreign-key actions' rows stay counted there
        // (each trigger program adds its rows when it ends).
        let statement_rows = if readonly == Some(false) && facts.sets_changes {
            self.db.changes() as i64
        } else {
            0
        };
        let mut shared = planes::lock(&self.shared);
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
            // Nothing kept (no row of any table, triggers' included,
            // changed): rolling back and committing leave the same file,
            // and a COMMIT would need the lock a reader may hold in
            // rollback-journal mode, which plain SQLite's rollback of an
            // `OE_Abort` halt does not (found from outside: a NOT NULL
            // failure came back as "database is locked").
            let kept = self.db.total_changes() != total_before;
            if !kept || !crate::failed::autocommit_commits(e, self.db.changes(), flags.counted_row)
            {
                drop(shared);
                let _ = self.db.execute_batch("ROLLBACK");
                let mut shared = planes::lock(&self.shared);
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
        // A failed statement that changed no planed row leaves the planes
        // as the last state row has them: no state row, as for a write
        // that reaches no plane. Its COMMIT then writes only what SQLite
        // kept (nothing, after an `OE_Abort` halt on the first row), and
        // needs no lock that a reader could hold (found from outside: a
        // NOT NULL failure came back as "database is locked" in
        // rollback-journal mode while another connection read).
        let persist = result.is_ok() || flags.events > 0;
        let schema_changed = facts.kind.is_schema_change() && result.is_ok();
        if schema_changed {
            reverify(&self.db, &mut shared);
        }
        drop(shared);
        if schema_changed {
            self.forget_plans();
        }
        if persist {
            if let Err(e) = self.persist_in_txn() {
                return self.abandon_wrap(Err(e));
            }
        }
        let committed = self.user_counters.committing(&self.db, || {
            self.db
                .prepare_cached("COMMIT")
                .and_then(|mut s| s.execute([]))
        });
        if let Err(e) = committed {
            // A deferred foreign key: SQLite rolls the statement back in
            // autocommit, and counts none of its own rows.
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
    pub(super) fn abandon_wrap<T>(&mut self, err: Result<T>) -> Result<T> {
        let _ = self.db.execute_batch("ROLLBACK");
        let mut shared = planes::lock(&self.shared);
        shared.take_flags();
        if !shared.undo_statement() {
            planes::rebuild_all(&self.db, &mut shared, Rebuild::Undo);
        }
        drop(shared);
        self.persisted.rolled_back();
        err
    }

    /// Begin a transaction that holds main's write lock, and no other file's:
    /// `BEGIN IMMEDIATE` locks every attached file, so with one attached
    /// Pleroma's own write (the wrap of an autocommit statement, a state
    /// row) would wait for, and block, that file's writers where plain
    /// SQLite does not. Then a deferred `BEGIN` and
    /// `txn_guards::lock_main` (hidden from the counters) take main's lock
    /// alone.
    pub(super) fn begin_writing_main(&self) -> rusqlite::Result<()> {
        if !crate::ffi::attached_files(&self.db) {
            return self
                .db
                .prepare_cached("BEGIN IMMEDIATE")
                .and_then(|mut s| s.execute([]))
                .map(drop);
        }
        self.db.prepare_cached("BEGIN")?.execute([])?;
        let locked = self.user_counters.hidden(&self.db, || {
            crate::txn_guards::lock_main(&self.db, crate::catalog::CATALOG)
        });
        match locked {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.db.execute_batch("ROLLBACK")?;
                self.db.execute_batch("BEGIN IMMEDIATE")
            }
            Err(e) => {
                let _ = self.db.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Inside an explicit transaction on a file with persisted planes: drop
    /// the guards of main before a statement whose compile they would
    /// change in a way that matters (`txn_guards.rs`), or before an ALTER
    /// TABLE (SQLite refuses to drop or rename a column an index uses).
    /// The transaction's state row puts them back.
    pub(super) fn guards_out_of_the_way(&mut self, sql: &str, facts: &Facts) -> Result<()> {
        if !matches!(facts.kind, StmtKind::Other | StmtKind::Schema) {
            return Ok(());
        }
        if !facts.alter && !self.guards_matter(sql, facts)? {
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
    pub(super) fn guards_matter(&mut self, sql: &str, facts: &Facts) -> Result<bool> {
        if facts.may_transfer {
            return Ok(!crate::mutation::active(Mutation::TransferWithGuards));
        }
        if crate::mutation::active(Mutation::GuardsKeptInTxn) {
            return Ok(false);
        }
        // Kept per text until the transaction ends, a schema statement, a
        // PRAGMA or a ROLLBACK TO (each clears it). The first run of a text
        // that writes main took main's lock, so a later one needs nothing
        // of what comes before the answer either.
        if let Some(m) = self.txn.guards_matter.get(sql) {
            return Ok(*m);
        }
        let m = self.guards_matter_now(sql)?;
        self.txn.guards_matter.insert(sql.to_owned(), m);
        Ok(m)
    }

    fn guards_matter_now(&mut self, sql: &str) -> Result<bool> {
        // A read-only statement (SQLite's own word; the statement is cached
        // for the run that follows) writes no guarded table.
        if self.db.prepare_cached(sql).is_ok_and(|s| s.readonly()) {
            return Ok(false);
        }
        // The transaction's first statement that touches main and writes
        // it: take main's write lock first, as the statement would, so
        // that the reads below find a transaction open and the busy
        // handler runs (`txn_guards::lock_main`).
        let untouched = self
            .db
            .transaction_state(Some(rusqlite::MAIN_DB))
            .is_ok_and(|s| s == rusqlite::TransactionState::None);
        if untouched && !crate::mutation::active(Mutation::BusyHandlerSkipped) {
            let writes_main = self
                .write_set(sql)?
                .is_some_and(|w| w.iter().any(|w| w.of_main()));
            if writes_main {
                let locked = self.user_counters.hidden(&self.db, || {
                    crate::txn_guards::lock_main(&self.db, crate::catalog::CATALOG)
                })?;
                if locked {
                    self.catch_up_under_lock()?;
                }
            }
        }
        let unhalted = match self.txn.unhalted {
            Some(u) => u,
            None => {
                let u = self.unhalted_now()?;
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
        let guarded = self.planed_tables();
        Ok(match self.write_set(sql)? {
            Some(writes) => {
                crate::txn_guards::guards_matter(&self.db, &writes, &guarded, unhalted)?
            }
            None => false,
        })
    }

    /// The tables `sql` writes (`txn_guards::writes`), asked once per text.
    fn write_set(&mut self, sql: &str) -> Result<Option<Arc<Vec<crate::txn_guards::Write>>>> {
        if let Some(w) = self.write_sets.get(sql) {
            return Ok(w.clone());
        }
        let w = crate::txn_guards::writes(&mut self.db, sql)?.map(Arc::new);
        if self.write_sets.len() >= REACH_CAPACITY {
            self.write_sets.clear();
        }
        self.write_sets.insert(sql.to_owned(), w.clone());
        Ok(w)
    }

    /// What can make a write fail part-way on this connection now: read
    /// again only when a schema changed since (every schema's
    /// `schema_version` but temp's, which only this connection changes and
    /// then forgets the write sets) or the raw handle was used; the heap
    /// limit, which any connection of the process can set, every time.
    /// Read where the transaction already holds its snapshot (after the
    /// first write's lock), like the schema reads it replaces; a moved
    /// version also drops the write sets read from the old schema.
    fn unhalted_now(&mut self) -> Result<crate::txn_guards::Unhalted> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.raw_used.swap(false, Relaxed) {
            self.forget_write_sets();
        }
        let versions = crate::txn_guards::schema_versions(&self.db)?;
        let u = match &self.unhalted {
            Some((v, u)) if *v == versions => *u,
            _ => {
                self.forget_write_sets();
                let u = crate::txn_guards::Unhalted::read(&self.db)?;
                self.unhalted = Some((versions, u));
                u
            }
        };
        Ok(u.with_heap_limit(crate::ffi::hard_heap_limit() > 0))
    }

    /// The transaction's first write holds main's write lock now, and has
    /// written nothing: if another connection or process committed since
    /// the planes were current, follow its state rows here (nobody can
    /// commit meanwhile, so the log is complete, and this transaction's
    /// snapshot is its newest state), and the transaction's snapshots with
    /// them; its own writes then apply on top, and its COMMIT writes the
    /// next state row without a rebuild. Anything the log cannot prove
    /// leaves the planes as they were: the COMMIT rebuilds them then.
    pub(super) fn catch_up_under_lock(&mut self) -> Result<()> {
        let v = self.read_data_version()?;
        if v == self.data_version {
            return Ok(());
        }
        if crate::mutation::active(Mutation::CatchUpSkipsLog) {
            // The mutation: the other commit is taken as followed.
            self.data_version = v;
            return Ok(());
        }
        // Another connection may have turned persistence off (found from
        // outside: this transaction's COMMIT then made the state table and
        // the guards again, and plain programs were refused): read the
        // setting under the lock, where nobody can change it.
        self.refresh_persist()?;
        if !self.persisted.on {
            return Ok(());
        }
        // `Some(why)`: not provable from the log; the COMMIT rebuilds.
        let _ = self.follow_persisted()?;
        Ok(())
    }

    /// Write the planes' state row inside the open write transaction. If
    /// another commit landed before this transaction's first write, the
    /// working copy lacks it: rebuild it from the table first (inside the
    /// transaction, so with this transaction's own rows).
    pub(super) fn persist_in_txn(&mut self) -> Result<()> {
        if !self.persisted.on {
            // Turned off (here, or by another connection just followed).
            return Ok(());
        }
        let v = self.read_data_version()?;
        let mut shared = planes::lock(&self.shared);
        if v != self.data_version {
            planes::rebuild_all(&self.db, &mut shared, Rebuild::StaleBase);
            self.persisted.forget();
            self.data_version = v;
            self.txn.stale = true;
        }
        // Written without the planes lock: the hook takes it for the state
        // row's own row event.
        let views = persist::views(&mut shared);
        drop(shared);
        let persisted = &mut self.persisted;
        self.user_counters.hidden(&self.db, || {
            persist::persist(&self.db, &views, persisted, false)
        })?;
        Ok(())
    }
}
