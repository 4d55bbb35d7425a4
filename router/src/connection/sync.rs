//! Following other connections: adopting the planes another connection of
//! this process published for a commit, following another process's
//! commits through the persisted state (its deltas, or a rebuild when the
//! state cannot be trusted), publishing this connection's commits, and
//! writing the state row outside a write (`persist_now`).

use super::*;

impl Connection {
    /// A commit by another connection or process shows only as a new
    /// `data_version`. Before any plane answer (and, when the planes are
    /// shared, before a write that starts from the committed state), bring
    /// the planes to what this connection sees: adopt the published planes
    /// of exactly that state, or follow the persisted state's deltas, or
    /// rebuild from the table. `Ok(false)`:
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
        // PUBLISH_WAIT; past that, with persisted planes, follow the commit's
        // state rows as for another process's commit (its state row is in
        // the commit this read sees), else SQLite answers. An autocommit
        // read may also look again at a state that newer commits pushed out
        // of the history while this thread was not running.
        let wait = if self.persisted.on {
            PUBLISH_WAIT_LOGGED
        } else {
            PUBLISH_WAIT
        };
        let deadline = std::time::Instant::now() + wait;
        let mut passed = 0;
        loop {
            let Some((v2, id)) = self.view()? else { break };
            match self.database.find(&id) {
                Found::Published(p) => {
                    self.data_version = v2;
                    self.adopt(&p);
                    return Ok(true);
                }
                // Without planes nothing waits for a publish: SQLite
                // answers, and the next statement looks again.
                Found::InFlight if self.lock().is_empty() => return Ok(false),
                Found::InFlight if std::time::Instant::now() < deadline => {
                    std::thread::yield_now();
                }
                Found::InFlight if self.persisted.on => break,
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
        let mut shared = planes::lock(&self.shared);
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
    pub(super) fn open_planes(&mut self) -> Result<()> {
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
        let mut shared = planes::lock(&self.shared);
        planes::reload_all(&self.db, &mut shared, why)?;
        drop(shared);
        self.persisted.forget();
        self.repair()
    }

    /// Bring the planes to the persisted state of what this connection
    /// sees (its transaction has not written). `None`: done; `Some(why)`:
    /// the persisted state cannot be trusted, rebuild.
    pub(super) fn follow_persisted(&mut self) -> Result<Option<Rebuild>> {
        let auto = self.db.is_autocommit();
        if auto {
            self.db.prepare_cached("BEGIN")?.execute([])?;
        }
        let r = (|| -> Result<(i64, Result<bool, Rebuild>), rusqlite::Error> {
            let v = data_version(&self.db)?;
            let mut shared = planes::lock(&self.shared);
            let f = match persist::follow(&self.db, &mut shared, &mut self.persisted) {
                Ok(Followed::Applied { schema_moved }) => {
                    if schema_moved {
                        reverify(&self.db, &mut shared);
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
    pub(super) fn repair(&mut self) -> Result<()> {
        if !self.persisted.on || !self.db.is_autocommit() || self.lock().is_empty() {
            return Ok(());
        }
        self.persist_now(true, false)
    }

    /// The `data_version` and the identity of the committed state this
    /// connection sees: its open read transaction's, or (in autocommit) the
    /// newest. `None` when the file is not in WAL mode, or inside a
    /// transaction that has written (its state is its own).
    pub(super) fn view(&self) -> Result<Option<(i64, WalSnapshot)>> {
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
    pub(super) fn adopt(&mut self, p: &Published) {
        let mut shared = planes::lock(&self.shared);
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
    pub(super) fn publish_mutated(&self) {
        let entries = self.lock().published();
        self.database.publish_as_newest(entries);
    }

    /// After a commit (or a rebuild) in autocommit: publish the planes for
    /// the other connections of this process, tagged with the committed
    /// state they are exactly, or publish nothing when that cannot be
    /// proven (a commit by someone else since the planes were current).
    pub(super) fn publish(&mut self) -> Result<()> {
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

    /// Open the planes the catalog lists again, as a new connection would.
    /// Inside a transaction of a connection that had no plane, or whose
    /// planes were not persisted, whose write the guard refused (another
    /// connection attached a plane, or turned persistence on, since):
    /// open the planes there from the persisted state. The refused write held the write
    /// lock, so the transaction sees the newest commit, and it has changed
    /// no planed row (each was refused), so the persisted state it reads is
    /// its own state too. Its savepoints were not tracked without planes:
    /// the transaction is marked stale, so a `ROLLBACK` or `ROLLBACK TO`
    /// rebuilds the planes from the tables instead. `false`: no plane to
    /// open.
    pub(super) fn open_planes_in_txn(&mut self) -> Result<bool> {
        let defs = catalog::load_defs(&self.db)?;
        if defs.is_empty() {
            return Ok(false);
        }
        let v = data_version(&self.db)?;
        let entries = match persist::open(&self.db, &defs, &mut self.persisted) {
            Ok(e) => e,
            Err(Untrusted::Sql(e)) => return Err(e.into()),
            Err(Untrusted::Stale(why)) => {
                // The guard passes this connection's writes only with the
                // file's keys (found from outside: after a schema change
                // earlier in the transaction the write was refused again).
                self.guard.set_keys(persist::file_keys(&self.db)?);
                self.persisted.forget();
                let mut entries = catalog::load_entries(&self.db)?;
                for e in &mut entries {
                    e.stats = e.stats.rebuilt(why, 0.0);
                }
                entries
            }
        };
        self.data_version = v;
        let now = {
            let mut shared = self.lock();
            shared.replace_entries(entries);
            shared.snapshots()
        };
        self.txn.base = Some(now.clone());
        for (_, s) in &mut self.txn.saves {
            *s = now.clone();
        }
        self.txn.stale = true;
        self.forget_plans();
        Ok(true)
    }

    pub(super) fn reopen_planes(&mut self) -> Result<()> {
        self.data_version = self.read_data_version()?;
        self.persisted.forget();
        self.open_planes()?;
        self.forget_plans();
        self.publish()
    }

    /// Read the persistence setting again (it may have changed in another
    /// connection); a change makes the next write persist a checkpoint.
    /// `true`: it was turned on since.
    pub(super) fn refresh_persist(&mut self) -> Result<bool> {
        let on = persist::setting_on(&self.db)?;
        let turned_on = on && !self.persisted.on;
        if on != self.persisted.on {
            self.persisted.on = on;
            self.persisted.forget();
        }
        Ok(turned_on)
    }

    /// Persist the planes in a transaction of their own: a checkpoint
    /// (`checkpoint`), or a delta if anything changed (after a `VACUUM`,
    /// which runs outside a transaction and moves the schema version).
    /// `wait`: take the write lock with the connection's busy timeout;
    /// otherwise only if it is free now.
    pub(super) fn persist_now(&mut self, checkpoint: bool, wait: bool) -> Result<()> {
        if !self.lock().main_aliases.is_empty() {
            // `BEGIN IMMEDIATE` would lock the file twice; the guard
            // refuses writes meanwhile, and a later write persists.
            return Ok(());
        }
        // Not waiting: a busy timeout is set to zero for the BEGIN and put
        // back. `PRAGMA busy_timeout` reads 0 both with no handler (the
        // BEGIN fails at once anyway) and with one the application set
        // through `sqlite()`, which cannot be put back once replaced: that
        // one is left alone and decides.
        let old: i64 = if wait {
            0
        } else {
            self.db.query_row("PRAGMA busy_timeout", [], |r| r.get(0))?
        };
        let began = if old > 0 {
            self.db.busy_timeout(std::time::Duration::ZERO)?;
            let b = self.begin_writing_main();
            self.db
                .busy_timeout(std::time::Duration::from_millis(old as u64))?;
            b
        } else {
            self.begin_writing_main()
        };
        if began.is_err() {
            return Ok(());
        }
        let r = (|| -> rusqlite::Result<bool> {
            if data_version(&self.db)? != self.data_version {
                // Someone committed since the planes were current.
                return Ok(false);
            }
            let views = persist::views(&mut self.lock());
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A commit of this process that a reader sees before its publish (the
    /// writer's thread not running): with persisted planes the reader
    /// follows the commit's state rows itself, exactly, instead of waiting
    /// or letting SQLite answer.
    #[test]
    fn a_reader_follows_an_unpublished_commit_from_its_state_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.db");
        let mut w = Connection::open(&path).unwrap();
        w.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE t(id INTEGER PRIMARY KEY, d INTEGER, m INTEGER);
             INSERT INTO t(d, m) VALUES (1, 10), (2, 20);
             PRAGMA pleroma_attach('t', 'd', 'm');",
        )
        .unwrap();
        let mut r = Connection::open(&path).unwrap();
        let q = "SELECT d, SUM(m) FROM t GROUP BY d ORDER BY d";
        r.query(q, &[]).unwrap();
        // The writer publishes where the reader does not look, and a commit
        // stays in flight for the reader's file.
        w.database = Arc::new(Database::new());
        let _in_flight = r.database.commit_in_flight();
        w.execute("INSERT INTO t(d, m) VALUES (2, 5), (3, 7)", &[])
            .unwrap();
        let rows = r.query(q, &[]).unwrap();
        assert_ne!(
            r.last_route().kind,
            RouteKind::Engine,
            "{:?}",
            r.last_route()
        );
        let want: Vec<Vec<Value>> = [(1, 10), (2, 25), (3, 7)]
            .iter()
            .map(|&(d, m)| vec![Value::Integer(d), Value::Integer(m)])
            .collect();
        assert_eq!(*rows.rows, want);
        let planes = r.query("PRAGMA pleroma_planes", &[]).unwrap();
        let k = planes.columns.iter().position(|c| c == "rebuilds").unwrap();
        assert_eq!(planes.rows[0][k], Value::Integer(0));
    }
}
