//! The write outcome tree: a statement SQLite runs, and what its outcome
//! (done, failed part-way, rolled back, committed) means for the planes,
//! the transaction's snapshots and the persisted state. Why each branch is
//! exact: `docs/design.md`, "Router invariants".

use super::*;

impl Connection {
    /// Run a statement on SQLite, keeping the planes exact through whatever
    /// SQLite does or undoes.
    pub(super) fn run_engine(
        &mut self,
        sql: &str,
        params: &[Value],
        want_rows: bool,
        facts: &Facts,
    ) -> Result<(Rows, usize)> {
        let was_auto = self.db.is_autocommit();
        if was_auto && self.wraps(sql, facts) {
            if self.reaches_no_plane(sql, facts)? {
                return self.run_unguarded(sql, params, want_rows, facts);
            }
            return self.run_wrapped(sql, params, want_rows, facts);
        }
        self.run_plain(sql, params, want_rows, facts, was_auto)
    }

    /// A statement that needs no state row of its own (one in a
    /// transaction, or an autocommit statement on planes that are not
    /// persisted or that it cannot change): SQLite runs it, and the planes
    /// follow what it did.
    pub(super) fn run_plain(
        &mut self,
        sql: &str,
        params: &[Value],
        want_rows: bool,
        facts: &Facts,
        was_auto: bool,
    ) -> Result<(Rows, usize)> {
        let kind = &facts.kind;
        // The end of an explicit transaction that wrote: its state row
        // goes into it, before the COMMIT.
        // A RELEASE that leaves the transaction open writes none: its
        // guards would come back by a schema statement, at which FTS writes
        // out its pending rows where plain SQLite would not.
        let ends = match kind {
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
        let rolled_back_copy = (*kind == StmtKind::Rollback
            && !was_auto
            && self.persisted.on
            && crate::mutation::active(Mutation::PersistRolledBack)
            && crate::ffi::writing(&self.db))
        .then(|| self.lock().snapshots());
        if !was_auto && self.persisted.on && !self.txn.guards_out && !self.lock().is_empty() {
            self.guards_out_of_the_way(sql, facts)?;
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
            facts.vacuum_of.clone()
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
        let ends = |k: StmtKind, m: Mutation| *kind == k && crate::mutation::active(m);
        if sharing
            && !was_auto
            && (ends(StmtKind::Commit, Mutation::PublishBeforeCommit)
                || ends(StmtKind::Rollback, Mutation::PublishRollback))
        {
            self.publish_mutated();
        }
        let (result, _) = self.exec_user(sql, params, want_rows, facts);
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
        let mut shared = planes::lock(&self.shared);
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
            match kind {
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
                    match self.txn.rollback_to(name) {
                        Some(_) | None if self.txn.stale => {
                            planes::rebuild_all(&self.db, &mut shared, Rebuild::StaleSnapshot);
                        }
                        Some(snaps) if !crate::mutation::active(Mutation::IgnoreRollbackTo) => {
                            shared.restore(&snaps);
                        }
                        _ => {}
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
        if kind.is_schema_change() || facts.pragma {
            self.txn.guards_matter.clear();
            self.txn.unhalted = None;
            // `foreign_keys` and `recursive_triggers` change what a
            // statement's compiled program writes.
            self.reach.clear();
            self.write_sets.clear();
            self.unhalted = None;
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
            reverify(&self.db, &mut shared);
            drop(shared);
            self.forget_plans();
        } else {
            drop(shared);
        }
        // BEGIN IMMEDIATE or EXCLUSIVE holds main's write lock before the
        // transaction writes anything: follow the commits made since the
        // planes were current here now, as a first write under the lock
        // would (`catch_up_under_lock`). Its first write finds the lock
        // taken and does not; without this, its COMMIT rebuilt the planes
        // from the table (found by `pleroma bench serve`, whose write
        // transactions begin IMMEDIATE: 200 ms each at 1M rows).
        if *kind == StmtKind::Begin
            && result.is_ok()
            && self.persisted.on
            && self
                .db
                .transaction_state(Some(rusqlite::MAIN_DB))
                .is_ok_and(|s| s == rusqlite::TransactionState::Write)
        {
            self.catch_up_under_lock()?;
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
}
