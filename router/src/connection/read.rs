//! The read path: a SELECT served from the cells, a join limb or the
//! residue, or declined to SQLite with its reason (`last_route`), and
//! `pleroma_explain`. Nothing here writes: a statement that may write goes
//! to [`Connection::run_engine`] (`write.rs`).

use std::borrow::Cow;

use super::*;

impl Connection {
    /// The plane answered with SQLite's own error (a SUM past i64): the
    /// route says so, as it does for an answer.
    fn raised_by_plane(&mut self, table: &str) {
        self.last_route = Route {
            kind: RouteKind::Plane,
            reason: "the plane raised SQLite's error".into(),
            table: Some(table.to_owned()),
            plane_cost: None,
            engine_cost: None,
        };
    }

    pub(super) fn run_allowed(
        &mut self,
        sql: &str,
        params: &[Value],
        want_rows: bool,
        facts: &Facts,
    ) -> Result<(Rows, usize)> {
        let sharing = self.database.shared();
        if let Some(p) = facts.pleroma_pragma.then(|| pragma::parse(sql)).flatten() {
            let p = p.map_err(Error::Pragma)?;
            self.last_route = Route::engine("pleroma pragma");
            // One that writes the catalog is refused inside a transaction
            // before anything is read: a sync's read would start the
            // transaction's snapshot (found from outside: a refused attach
            // left a transaction reading a stale snapshot in WAL, and
            // holding a shared lock in rollback-journal mode).
            if !p.writes_catalog() || !self.db.is_autocommit() {
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
        // A `BEGIN` or `SAVEPOINT` reads nothing, and with persisted planes
        // the transaction's first write follows any commit under the write
        // lock (`catch_up_under_lock`), its reads before they answer.
        let opens_txn = matches!(facts.kind, StmtKind::Begin | StmtKind::Savepoint(_));
        // COMMIT, ROLLBACK, RELEASE or ROLLBACK TO with no transaction open
        // only fails, reading nothing: a sync's read would fail first with
        // "database is locked" under another connection's exclusive lock
        // (found from outside).
        let ends_none = matches!(
            facts.kind,
            StmtKind::Commit | StmtKind::Rollback | StmtKind::Release(_) | StmtKind::RollbackTo(_)
        );
        let synced = if sharing
            && self.db.is_autocommit()
            && !(opens_txn && self.persisted.on)
            && !ends_none
        {
            match self.sync_external() {
                Ok(synced) => Some(synced),
                Err(e) if e.is_busy() && self.is_read_only(sql) => {
                    // Another connection holds the lock the sync's reads
                    // need (an exclusive lock in rollback-journal mode):
                    // a statement that writes nothing runs on SQLite, which
                    // reads no more than it needs (`SELECT 1` reads no
                    // table, and succeeds as in plain SQLite; found from
                    // outside). The planes stay behind, and the next
                    // statement syncs again.
                    self.set_engine_route("the planes could not sync: the file is locked");
                    return Ok(exec(&self.db, sql, params, want_rows, &mut self.stepped)?);
                }
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        if self.lock().is_empty() {
            self.last_route = Route::engine("no plane attached");
            // For `pleroma_advise`: what may be a SELECT (it reads the
            // words; anything else is left out there).
            if matches!(
                sql.trim_start().as_bytes().first(),
                Some(b'S' | b's' | b'W' | b'w')
            ) {
                self.declined.note(sql);
            }
            // Its commits still have to be published for the others; an
            // attached file's guards must not change what VACUUM does.
            if sharing || facts.vacuum_of.is_some() {
                return self.run_engine(sql, params, want_rows, facts);
            }
            let (r, _) = self.exec_user(sql, params, want_rows, facts);
            if facts.kind.is_schema_change() {
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
            return self.run_engine(sql, params, want_rows, facts);
        }
        if self.mode == RouteMode::Engine && !crate::mutation::active(Mutation::EngineRouteServes) {
            return self.run_engine_route(sql, params, want_rows, facts);
        }
        match self.try_plane(sql, params, synced)? {
            Attempt::Served(rows) => Ok((rows, 0)),
            // A read-only SELECT: nothing to keep track of but its text,
            // for `pleroma_advise`.
            Attempt::ReadOnly => {
                self.declined.note(sql);
                Ok(exec(&self.db, sql, params, want_rows, &mut self.stepped)?)
            }
            Attempt::Other => self.run_engine(sql, params, want_rows, facts),
        }
    }

    /// `PRAGMA pleroma_route = engine`: the oracle users and tests compare
    /// with, so nothing of Pleroma's is consulted — no cached
    /// classification, no memo, no plane. Only SQLite's own prepare tells
    /// a read-only SELECT from a statement that needs the write
    /// bookkeeping.
    pub(super) fn run_engine_route(
        &mut self,
        sql: &str,
        params: &[Value],
        want_rows: bool,
        facts: &Facts,
    ) -> Result<(Rows, usize)> {
        let read_only = self
            .db
            .prepare_cached(sql)
            .is_ok_and(|s| s.readonly() && s.column_count() > 0);
        if !read_only {
            self.set_engine_route("not a read-only SELECT");
            return self.run_engine(sql, params, want_rows, facts);
        }
        const WHY: &str = "pleroma_route = engine";
        match self.counters.declined.get_mut(WHY) {
            Some(n) => *n += 1,
            None => {
                self.counters.declined.insert(WHY.to_owned(), 1);
            }
        }
        self.set_engine_route(WHY);
        self.declined.note(sql);
        Ok(exec(&self.db, sql, params, want_rows, &mut self.stepped)?)
    }

    /// Try to answer from a plane; otherwise say how SQLite should run it
    /// (the route and counters already say why).
    /// `synced`: the result of a `sync_external` this statement already
    /// made.
    pub(super) fn try_plane(
        &mut self,
        sql: &str,
        params: &[Value],
        synced: Option<bool>,
    ) -> Result<Attempt> {
        let class = match self.cache.get(sql) {
            Some(c) => c.clone(),
            None => {
                let c = {
                    let shared = planes::lock(&self.shared);
                    Arc::new(classify::classify(&self.db, &shared, sql, true))
                };
                if !matches!(&*c, Classified::Declined(Decline::NoColumnMap)) {
                    self.cache.insert(sql.to_owned(), c.clone());
                }
                c
            }
        };
        let (table, plane) = match &*class {
            Classified::NotSelect => {
                self.set_engine_route("not a read-only SELECT");
                return Ok(Attempt::Other);
            }
            Classified::Declined(reason) => return self.decline(reason.clone(), None),
            Classified::Plan(plan) => (&plan.table, plan.plane.as_deref()),
            Classified::Join(join) => (&join.fact, None),
            Classified::Residue(r) => (&r.table, r.plane.as_deref()),
        };
        if self.mode == RouteMode::Engine && !crate::mutation::active(Mutation::EngineRouteServes) {
            return self.decline_on("pleroma_route = engine", table, plane);
        }
        let epoch = self.plans_epoch;
        let current = match synced {
            Some(current) => current,
            None => self.sync_external()?,
        };
        if !current {
            return self.decline_on(
                "another connection's commit is being published",
                table,
                plane,
            );
        }
        if self.plans_epoch != epoch {
            // The planes taken over are another set (a plane attached or
            // detached elsewhere): classify the statement again.
            return self.try_plane(sql, params, Some(true));
        }
        // The memo: an exact earlier answer, while no plane has changed.
        // Its key is the text, and the parameters after a NUL (which a
        // text without one cannot end with: SQLite stops reading at a NUL,
        // so such a text is never memoized).
        let memo_key = (!sql.contains('\0')).then(|| {
            if params.is_empty() {
                Cow::Borrowed(sql)
            } else {
                Cow::Owned(format!("{sql}\0{params:?}"))
            }
        });
        let writes = self.lock().writes();
        if let Some(m) = memo_key.as_deref().and_then(|k| self.memo.get(k)) {
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
                let mut shared = planes::lock(&self.shared);
                let r = answer_from_cells::answer(&self.db, &mut shared, self.mode, plan, params);
                drop(shared);
                r.inspect_err(|_| self.raised_by_plane(&plan.table))?
            }
            Classified::Join(join) => {
                let r = answer_from_limb::answer(&self.lock(), join, params);
                r.inspect_err(|_| self.raised_by_plane(&join.fact))?
            }
            Classified::Residue(r) => {
                let mut shared = planes::lock(&self.shared);
                match answer_with_residue::answer(&self.db, &mut shared, self.mode, r, params) {
                    Ok(o) => o,
                    // The rewritten text failed as it ran: SQLite runs the
                    // user's own, which gives SQLite's answer or its error
                    // (and sets this statement's route).
                    // (The mutation `residue_raising_where` keeps the error,
                    // as the residue did before this net.)
                    Err(e) if !crate::mutation::active(Mutation::ResidueRaisingWhere) => {
                        Outcome::Declined(
                            Decline::residue_failed(&e, e.is_integer_overflow()),
                            None,
                        )
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
                self.lock().count(table, plane, true);
                self.last_route = route;
                // A residue may read other tables and `'now'`, which the
                // planes' write counter does not follow: not memoized.
                if let (false, Some(key)) = (matches!(&*class, Classified::Residue(_)), memo_key) {
                    self.memo.insert(
                        key.into_owned(),
                        Memo {
                            writes,
                            rows: rows.clone(),
                        },
                    );
                }
                Ok(Attempt::Served(rows))
            }
            Outcome::Declined(reason, route) => {
                let r = self.decline_on(reason, table, plane);
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
    pub(super) fn forget_plans(&mut self) {
        self.plans_epoch += 1;
        self.cache.clear();
        self.memo.clear();
        self.forget_write_sets();
    }

    /// What a statement writes, and what can fail part-way, may have
    /// changed (a schema change, a PRAGMA, the raw handle, another
    /// connection's schema change).
    pub(super) fn forget_write_sets(&mut self) {
        self.reach.clear();
        self.write_sets.clear();
        self.unhalted = None;
    }

    /// Declined for the plane `plane` of `table` (`None`: its own).
    fn decline_on(
        &mut self,
        reason: impl Into<Decline>,
        table: &str,
        plane: Option<&str>,
    ) -> Result<Attempt> {
        self.decline(reason, Some((table, plane)))
    }

    /// Declined, counted on the plane `at` (a table and its plane's name)
    /// when a plan was made for one.
    pub(super) fn decline(
        &mut self,
        reason: impl Into<Decline>,
        at: Option<(&str, Option<&str>)>,
    ) -> Result<Attempt> {
        let table = at.map(|(t, _)| t);
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
        if let Some((t, plane)) = at {
            self.lock().count(t, plane, false);
        }
        self.set_engine_route(reason);
        self.last_route.table = table.map(str::to_owned);
        Ok(Attempt::ReadOnly)
    }

    /// Route "engine" for `reason`, reusing the last route's allocation.
    /// SQLite's word that `sql` writes nothing (`sqlite3_stmt_readonly`);
    /// `false` when it does not prepare.
    fn is_read_only(&self, sql: &str) -> bool {
        self.db.prepare_cached(sql).is_ok_and(|s| s.readonly())
    }

    pub(super) fn set_engine_route(&mut self, reason: &str) {
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

    pub(super) fn explain(&mut self, sql: &str) -> Result<Rows> {
        let class = {
            let shared = self.lock();
            classify::classify(&self.db, &shared, sql, false)
        };
        // The plane a served statement is answered from, by name.
        let plane = match &class {
            Classified::Plan(p) => Some(p.plane.as_deref().unwrap_or(&p.table).to_owned()),
            Classified::Residue(r) => Some(r.plane.as_deref().unwrap_or(&r.table).to_owned()),
            Classified::Join(j) => Some(j.fact.clone()),
            _ => None,
        };
        let (route, reason, plane_cost, engine_cost) = match &class {
            Classified::NotSelect => ("engine", "not a SELECT".to_owned(), None, None),
            Classified::Declined(r) => ("engine", r.to_string(), None, None),
            Classified::Join(_) => ("plane", "join limb".to_owned(), None, None),
            Classified::Residue(r) => {
                let _ = self.sync_external()?;
                let mut shared = planes::lock(&self.shared);
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
                "plane".into(),
            ]
            .into(),
            rows: vec![vec![
                Value::Text(route.into()),
                Value::Text(reason),
                f(plane_cost),
                f(engine_cost),
                match plane {
                    Some(p) if route == "plane" => Value::Text(p),
                    _ => Value::Null,
                },
            ]]
            .into(),
        })
    }
}
