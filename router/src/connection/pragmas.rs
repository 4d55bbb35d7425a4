//! Pleroma's PRAGMAs: `pleroma_attach`, `pleroma_limb`, `pleroma_detach`,
//! `pleroma_rebuild`, `pleroma_persist` and the rest (parsed in
//! `pragma.rs`), each run against the catalog and the shared planes.

use super::*;

impl Connection {
    pub(super) fn pragma(&mut self, p: Pragma) -> Result<Rows> {
        match p {
            Pragma::Attach {
                table,
                dims,
                measures,
                name,
            } => {
                self.require_no_txn("pleroma_attach")?;
                let mut def = catalog::validate_def(&self.db, &table, &dims, &measures)
                    .map_err(Error::Pragma)?;
                if let Some(n) = name.as_deref().filter(|n| n.chars().any(char::is_control)) {
                    return Err(Error::Pragma(format!(
                        "pleroma_attach: plane name {n:?} holds a control character"
                    )));
                }
                // A plane named after its table is the table's own plane.
                def.name = name.filter(|n| !n.eq_ignore_ascii_case(&def.table));
                if self
                    .lock()
                    .find_named(&def.table, def.name.as_deref())
                    .is_some()
                {
                    return Err(Error::Pragma(match &def.name {
                        None => format!(
                            "pleroma_attach: table {} already has a plane; name another one with a fourth argument",
                            def.table
                        ),
                        Some(n) => format!(
                            "pleroma_attach: table {} already has a plane named {n}",
                            def.table
                        ),
                    }));
                }
                if self.persisted.on {
                    if let Some(why) = persist::names_taken(&self.db, &def.table)? {
                        return Err(Error::Pragma(format!("pleroma_attach: {why}")));
                    }
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
                    // A limb is made from the fact table's own plane.
                    let i = shared.find_named(&fact, None).ok_or_else(|| {
                        Error::Pragma(format!(
                            "pleroma_limb: table {fact} has no plane of its own; PRAGMA pleroma_attach it first (three arguments)"
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
            Pragma::Detach { table, plane } => {
                self.require_no_txn("pleroma_detach")?;
                let name = self.known_table(&table, "pleroma_detach")?;
                let plane = self.known_plane(&name, plane, "pleroma_detach")?;
                // The planes it removes, named ones first; each catalog
                // delete is one row, and one goes last (see `UserCounters`).
                let mut gone: Vec<Option<String>> = {
                    let shared = self.lock();
                    shared
                        .planes_of(&name)
                        .into_iter()
                        .map(|i| shared.entry(i).def.name.clone())
                        .filter(|n| plane.as_ref().is_none_or(|p| p == n))
                        .collect()
                };
                gone.sort_by_key(Option::is_none);
                let last_plane = gone.len() == self.lock().planes_of(&name).len();
                self.user_counters.hidden(&self.db, || {
                    // A guard stays while a plane of its table does; the
                    // next state row makes it again over the columns of
                    // the planes left.
                    if last_plane {
                        persist::drop_guard(&self.db, &name)?;
                    }
                    // Limbs are the table's own plane's.
                    if gone.contains(&None) {
                        catalog::remove_limbs(&self.db, &name)?;
                    }
                    for n in &gone {
                        catalog::remove(&self.db, &name, n.as_deref())?;
                    }
                    Ok(())
                })?;
                {
                    let mut shared = self.lock();
                    for n in &gone {
                        match n {
                            Some(n) => shared.remove_named(&name, n),
                            None => shared.remove_own(&name),
                        }
                    }
                }
                self.forget_plans();
                Ok(Rows::default())
            }
            Pragma::Rebuild { table, plane } => {
                self.require_no_txn("pleroma_rebuild")?;
                let name = self.known_table(&table, "pleroma_rebuild")?;
                let plane = self.known_plane(&name, plane, "pleroma_rebuild")?;
                let version = self.read_data_version()?;
                let mut shared = planes::lock(&self.shared);
                match plane {
                    None => planes::rebuild_one(&self.db, &mut shared, &name, Rebuild::Requested),
                    Some(p) => planes::rebuild_plane(
                        &self.db,
                        &mut shared,
                        &name,
                        p.as_deref(),
                        Rebuild::Requested,
                    ),
                }
                drop(shared);
                self.after_catalog_change(version);
                Ok(Rows::default())
            }
            Pragma::Planes => {
                // As a plane answer would: first follow what other
                // connections and processes committed (found from outside:
                // the counts stayed at the last state this one had seen).
                self.sync_external()?;
                Ok(self.lock().planes_rows())
            }
            Pragma::Explain { sql } => self.explain(&sql),
            Pragma::Advise(only) => {
                self.sync_external()?;
                let shared = planes::lock(&self.shared);
                crate::advise::advise(&self.db, &shared, &self.declined, only.as_deref())
                    .map_err(Error::Pragma)
            }
            Pragma::Route(None) => Ok(Rows {
                columns: vec!["pleroma_route".into()].into(),
                rows: vec![vec![Value::Text(
                    match self.mode {
                        RouteMode::Auto => "auto",
                        RouteMode::Engine => "engine",
                        RouteMode::Plane => "plane",
                    }
                    .into(),
                )]]
                .into(),
            }),
            Pragma::Route(Some(mode)) => {
                self.mode = mode;
                Ok(Rows::default())
            }
            Pragma::Persist(None) => Ok(Rows {
                columns: vec!["pleroma_persist".into()].into(),
                rows: vec![vec![Value::Text(
                    if self.persisted.on { "on" } else { "off" }.into(),
                )]]
                .into(),
            }),
            Pragma::Persist(Some(on)) => {
                self.require_no_txn("pleroma_persist")?;
                if on && !persist::can_persist(&self.db) {
                    return Err(Error::Pragma(
                        "pleroma_persist: an in-memory or temporary database cannot persist planes"
                            .into(),
                    ));
                }
                if on {
                    let tables: Vec<String> = self.lock().tables().map(str::to_owned).collect();
                    for t in tables {
                        if let Some(why) = persist::names_taken(&self.db, &t)? {
                            return Err(Error::Pragma(format!("pleroma_persist: {why}")));
                        }
                    }
                }
                self.db.execute_batch("BEGIN")?;
                let r = self.user_counters.hidden(&self.db, || {
                    persist::lock_settings(&self.db)?;
                    persist::set_setting(&self.db, on)
                });
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
    pub(super) fn after_catalog_change(&mut self, version: i64) {
        self.forget_plans();
        if self.lock().tables().count() == 1 {
            self.data_version = version;
        }
    }

    pub(super) fn require_no_txn(&self, what: &str) -> Result<()> {
        if self.db.is_autocommit() {
            Ok(())
        } else {
            Err(Error::Pragma(format!(
                "{what}: cannot run inside a transaction"
            )))
        }
    }

    pub(super) fn known_table(&self, table: &str, what: &str) -> Result<String> {
        let shared = self.lock();
        shared
            .planes_of(table)
            .first()
            .map(|&i| shared.entry(i).def.table.clone())
            .ok_or_else(|| Error::Pragma(format!("{what}: table {table} has no plane")))
    }

    /// The plane `plane` names on `table` (which has planes): `None` for
    /// every plane of the table, `Some(None)` for the table's own (named
    /// after it), `Some(Some(name))` for a named one.
    fn known_plane(
        &self,
        table: &str,
        plane: Option<String>,
        what: &str,
    ) -> Result<Option<Option<String>>> {
        let Some(p) = plane else {
            return Ok(None);
        };
        let name = (!p.eq_ignore_ascii_case(table)).then_some(p);
        let shared = self.lock();
        match shared.find_named(table, name.as_deref()) {
            Some(i) => Ok(Some(shared.entry(i).def.name.clone())),
            None => Err(Error::Pragma(format!(
                "{what}: table {table} has no plane named {}",
                name.as_deref().unwrap_or(table)
            ))),
        }
    }
}
