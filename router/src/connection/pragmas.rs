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
                let mut shared = planes::lock(&self.shared);
                planes::rebuild_one(&self.db, &mut shared, &name, Rebuild::Requested);
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
            .find(table)
            .map(|i| shared.entry(i).def.table.clone())
            .ok_or_else(|| Error::Pragma(format!("{what}: table {table} has no plane")))
    }
}
