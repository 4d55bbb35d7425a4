//! The planes of one connection: its working copy of every plane and limb,
//! the snapshots transactions take of them, the undo log of the running
//! autocommit statement, and the rebuilds from the tables. The change hook
//! (`hook.rs`) only feeds it; what other connections share is in
//! `database.rs`.

use pleroma_plane::{JointKey, MeasureValue};
use rusqlite::types::Value;
use smallvec::SmallVec;
use std::sync::Arc;

use std::sync::{Mutex, MutexGuard};

use crate::catalog::{self, EntrySnapshot, PlaneDef, PlaneEntry, Rebuild, Role};
use crate::rows::Rows;

/// One plane (or limb side) as published to the other connections of the
/// process (`database.rs`).
#[derive(Clone)]
pub(crate) struct PublishedEntry {
    pub def: Arc<PlaneDef>,
    pub snap: EntrySnapshot,
}

/// Take a connection's planes.
///
/// The lock rule: the hooks (`hook.rs`) take this lock on every row event,
/// commit and rollback, and it is not reentrant, so **nothing may write
/// through SQLite while holding it** (not a state row, not a catalog row, not
/// a rebuild that writes): take what is needed (`persist::views`), drop the
/// guard, then write. Reads through SQLite (a rebuild's scan) are fine.
///
/// A panic while it is held can only come from the hook, which catches it
/// and faults the plane: the state is still consistent, so a poisoned lock
/// is taken as it is.
pub(crate) fn lock(shared: &Mutex<Planes>) -> MutexGuard<'_, Planes> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// Flags the hooks raise during one statement.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Flags {
    /// Row events applied to a plane.
    pub events: u64,
    /// An INSERT or UPDATE row event of the statement itself (depth 0): a
    /// row SQLite counts in `changes()` (see `failed.rs`).
    pub counted_row: bool,
    pub committed: bool,
    pub rolled_back: bool,
}

/// The planes of a connection and the hook's flags.
#[derive(Default)]
pub(crate) struct Planes {
    pub(crate) entries: Vec<PlaneEntry>,
    pub(crate) flags: Flags,
    /// Other schema names under which the main database file is attached
    /// (`ATTACH` of the same file): their row events are main's.
    pub main_aliases: Vec<String>,
    /// Other attached files with the main file's guard keys: copies of it
    /// (a backup, a copied file). Pleroma's guard would pass their writes,
    /// which no state row of theirs follows, so while one is attached the
    /// guard passes nothing.
    pub main_copies: Vec<String>,
    /// Moves on every change to any plane (row event, restore, rebuild):
    /// a memo is valid while it has not moved.
    pub(crate) writes: u64,
    pub(crate) undo: UndoLog,
    /// An appender's table of main (lower case), while it feeds the planes
    /// from its own values: the hook leaves that table's depth-0 INSERT
    /// events to it (`connection/append.rs`).
    pub(crate) appending: Option<String>,
    /// While the classifier tries a table's planes in turn (`classify`):
    /// which of them, smallest first, [`Planes::find`] gives.
    pub(crate) rank: std::cell::Cell<usize>,
}

/// One snapshot per plane, in `entries` order.
pub(crate) type Snapshots = Vec<EntrySnapshot>;

impl Planes {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn add(&mut self, e: PlaneEntry) {
        self.entries.push(e);
    }
    /// Remove a table's own plane and the limbs whose fact table it is
    /// (they are made from that plane); its named planes stay.
    pub fn remove_own(&mut self, table: &str) {
        self.entries.retain(|e| match e.def.limb() {
            None => !(e.def.table.eq_ignore_ascii_case(table) && e.def.name.is_none()),
            Some(l) => !l.fact.eq_ignore_ascii_case(table),
        });
        self.bump_writes();
    }
    /// Remove one named plane of a table (its limbs are the table's own
    /// plane's, and stay).
    pub fn remove_named(&mut self, table: &str, name: &str) {
        self.entries.retain(|e| {
            !(e.def.role == Role::Plane
                && e.def.table.eq_ignore_ascii_case(table)
                && e.def.is_named(Some(name)))
        });
        self.bump_writes();
    }
    /// The plane of a table (not a limb side) that the classifier tries
    /// now: of several, the `rank`-th smallest (by occupied cells; the
    /// largest past the last), so that a statement goes to the smallest
    /// plane that serves it.
    pub fn find(&self, table: &str) -> Option<usize> {
        let rank = self.rank.get();
        let mut of = self.planes_of(table);
        if of.len() > 1 {
            of.sort_by_key(|&i| (self.entries[i].plane.cells(), i));
        }
        of.get(rank).or(of.last()).copied()
    }
    /// The planes of a table (not limb sides), in `entries` order.
    pub fn planes_of(&self, table: &str) -> SmallVec<[usize; 4]> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.def.role == Role::Plane && e.def.table.eq_ignore_ascii_case(table))
            .map(|(i, _)| i)
            .collect()
    }
    /// The plane `name` of a table (`None`: the table's own plane).
    pub fn find_named(&self, table: &str, name: Option<&str>) -> Option<usize> {
        self.entries.iter().position(|e| {
            e.def.role == Role::Plane
                && e.def.table.eq_ignore_ascii_case(table)
                && e.def.is_named(name)
        })
    }
    /// The plane a plan was made for. (Mutation `wrong_plane`: the table's
    /// first plane, whichever the plan was made for.)
    pub fn find_plan(&self, table: &str, name: Option<&str>) -> Option<usize> {
        if crate::mutation::active(crate::mutation::Mutation::WrongPlane) {
            return self.planes_of(table).first().copied();
        }
        self.find_named(table, name)
    }
    /// The most planes any one table has.
    pub fn most_per_table(&self) -> usize {
        let mut most = 0;
        for (i, e) in self.entries.iter().enumerate() {
            if e.def.role == Role::Plane && e.def.name.is_some() {
                most = most.max(self.planes_of(&self.entries[i].def.table).len());
            }
        }
        most.max(1)
    }
    /// The two sides of the limb of `fact` joined on `fact_key`.
    pub fn find_limb(&self, fact: &str, fact_key: &str) -> Option<(usize, usize)> {
        let side = |dim_side: bool| {
            self.entries
                .iter()
                .position(|e| match (&e.def.role, dim_side) {
                    (Role::LimbFact(l), false) | (Role::LimbDim(l), true) => {
                        l.fact.eq_ignore_ascii_case(fact)
                            && l.fact_key.eq_ignore_ascii_case(fact_key)
                    }
                    _ => false,
                })
        };
        Some((side(false)?, side(true)?))
    }
    /// Tables with a plane or a limb side.
    pub fn tables(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.def.table.as_str())
    }
    pub fn writes(&self) -> u64 {
        self.writes
    }
    pub fn bump_writes(&mut self) {
        self.writes += 1;
    }
    pub fn entry(&self, i: usize) -> &PlaneEntry {
        &self.entries[i]
    }
    pub fn entry_mut(&mut self, i: usize) -> &mut PlaneEntry {
        &mut self.entries[i]
    }
    pub fn entries_mut(&mut self) -> &mut [PlaneEntry] {
        &mut self.entries
    }
    /// Count a statement served or declined on the plane `name` of `table`
    /// (`None`: the table's own, or its first).
    pub fn count(&mut self, table: &str, name: Option<&str>, served: bool) {
        let i = self
            .find_named(table, name)
            .or_else(|| self.planes_of(table).first().copied());
        if let Some(i) = i {
            let e = &mut self.entries[i];
            if served {
                e.stats.served += 1;
            } else {
                e.stats.declined += 1;
            }
        }
    }
    pub fn take_flags(&mut self) -> Flags {
        std::mem::take(&mut self.flags)
    }
    /// The planes as published for other connections.
    pub fn published(&self) -> Vec<PublishedEntry> {
        self.entries
            .iter()
            .map(|e| PublishedEntry {
                def: e.def.clone(),
                snap: e.snapshot(),
            })
            .collect()
    }

    /// Whether `published` holds the same planes, in the same order.
    pub fn defs_match(&self, published: &[PublishedEntry]) -> bool {
        self.entries.len() == published.len()
            && self
                .entries
                .iter()
                .zip(published)
                .all(|(e, p)| e.def == p.def)
    }

    /// This connection's entry of a definition (for its counters).
    pub fn find_def(&self, def: &PlaneDef) -> Option<&PlaneEntry> {
        self.entries.iter().find(|e| *e.def == *def)
    }

    /// A new set of planes (adopted from another connection).
    pub fn replace_entries(&mut self, entries: Vec<PlaneEntry>) {
        self.entries = entries;
        self.bump_writes();
    }

    pub fn snapshots(&self) -> Snapshots {
        self.entries.iter().map(PlaneEntry::snapshot).collect()
    }
    pub fn restore(&mut self, snaps: &Snapshots) {
        if snaps.len() != self.entries.len() {
            // Attach and detach are refused inside transactions, so this
            // cannot happen; never guess if it does.
            for e in &mut self.entries {
                e.plane
                    .set_fault("plane set changed inside a transaction".into());
            }
            return;
        }
        for (e, s) in self.entries.iter_mut().zip(snaps) {
            e.restore(s);
        }
        self.bump_writes();
    }

    /// `PRAGMA pleroma_planes`.
    pub fn planes_rows(&self) -> Rows {
        let columns = [
            "table",
            "dimensions",
            "measures",
            "joint_bits",
            "cells",
            "bytes",
            "rows",
            "state",
            "reason",
            "served",
            "declined",
            "rebuilds",
            "rebuild_ms",
            "last_rebuild",
            "plane",
            "cap",
        ];
        let rows = self
            .entries
            .iter()
            .map(|e| {
                let p = &e.plane;
                let dims = e
                    .def
                    .dims
                    .iter()
                    .enumerate()
                    .map(|(i, _)| {
                        format!(
                            "{}({} values, {} bits)",
                            e.def.dim_text(i),
                            p.dict(i).len(),
                            p.dim_bits(i)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let reason = e.out_of_service();
                let table = match &e.def.role {
                    Role::Plane => e.def.table.clone(),
                    Role::LimbFact(l) => format!(
                        "{} (limb {} -> {}.{}, fact side)",
                        l.fact, l.fact_key, l.dim, l.dim_key
                    ),
                    Role::LimbDim(l) => format!(
                        "{} (limb {}.{} -> {}, dimension side)",
                        l.dim, l.fact, l.fact_key, l.dim_key
                    ),
                };
                vec![
                    Value::Text(table),
                    Value::Text(dims),
                    Value::Text(e.def.measures.join(", ")),
                    Value::Integer(p.joint_bits() as i64),
                    Value::Integer(p.cells() as i64),
                    Value::Integer(p.bytes() as i64),
                    Value::Integer(p.rows()),
                    Value::Text(
                        if reason.is_some() {
                            "out of service"
                        } else {
                            "in service"
                        }
                        .into(),
                    ),
                    reason.map(Value::Text).unwrap_or(Value::Null),
                    Value::Integer(e.stats.served as i64),
                    Value::Integer(e.stats.declined as i64),
                    Value::Integer(e.stats.rebuilds as i64),
                    Value::Real((e.stats.rebuild_ms * 1e3).round() / 1e3),
                    e.stats
                        .last_rebuild
                        .map(|r| Value::Text(r.reason().into()))
                        .unwrap_or(Value::Null),
                    match &e.def.role {
                        Role::Plane => Value::Text(e.def.plane_name().to_owned()),
                        _ => Value::Null,
                    },
                    Value::Integer(e.def.cap as i64),
                ]
            })
            .collect();
        Rows {
            columns: columns.iter().map(|s| s.to_string()).collect(),
            rows,
        }
    }

    /// Start a statement: clear the flags; in autocommit, log what the
    /// statement applies so that a failure can take it back.
    pub fn begin_statement(&mut self, autocommit: bool) {
        self.flags = Flags::default();
        self.undo.log.clear();
        // A long statement's log is not kept between statements.
        self.undo.log.shrink_to(4096);
        self.undo.recording = autocommit;
        self.undo.overflowed = false;
    }

    /// Take back what the statement applied, newest first. `false`: that
    /// is not possible (a layout re-packed, a plane faulted, the log
    /// overflowed) and the planes must be rebuilt from the table.
    pub fn undo_statement(&mut self) -> bool {
        self.bump_writes();
        if self.undo.overflowed {
            return false;
        }
        let log = std::mem::take(&mut self.undo.log);
        let mut ok = true;
        for u in log.iter().rev() {
            let plane = &mut self.entries[u.entry].plane;
            // Bits only grow: the same total means the key is still valid.
            if plane.fault().is_some() || plane.joint_bits() != u.bits {
                ok = false;
                break;
            }
            if plane.apply_encoded(u.key, -u.weight, &u.meas).is_err() {
                ok = false;
                break;
            }
        }
        self.undo.log = log;
        self.undo.log.clear();
        ok
    }
}

/// Most rows one autocommit statement logs for its undo; past that, a
/// failure rebuilds instead (a bulk INSERT … SELECT would hold every row).
pub(crate) const UNDO_MAX: usize = 1 << 16;

/// The applied rows of the running autocommit statement.
#[derive(Default)]
pub(crate) struct UndoLog {
    pub(crate) recording: bool,
    /// The log cannot undo the statement: too long, or a plane faulted.
    pub(crate) overflowed: bool,
    pub(crate) log: Vec<Undo>,
}

pub(crate) struct Undo {
    pub(crate) entry: usize,
    pub(crate) key: JointKey,
    pub(crate) weight: i64,
    /// The plane's joint bits when the key was encoded.
    pub(crate) bits: u32,
    pub(crate) meas: SmallVec<[MeasureValue; 8]>,
}

/// Build `e` again from its table, keeping its counters.
fn rebuild_entry(db: &rusqlite::Connection, e: &mut PlaneEntry, why: Rebuild) {
    let start = std::time::Instant::now();
    let mut fresh = catalog::build_entry(db, e.def.clone());
    fresh.stats = e.stats.rebuilt(why, start.elapsed().as_secs_f64() * 1e3);
    *e = fresh;
}

/// The plane of `table` and the limbs whose fact table it is (both sides),
/// from the table.
pub(crate) fn rebuild_one(
    db: &rusqlite::Connection,
    shared: &mut Planes,
    table: &str,
    why: Rebuild,
) {
    let ours = |e: &PlaneEntry| match e.def.limb() {
        None => e.def.table.eq_ignore_ascii_case(table),
        Some(l) => l.fact.eq_ignore_ascii_case(table),
    };
    for e in shared.entries_mut().iter_mut().filter(|e| ours(e)) {
        rebuild_entry(db, e, why);
    }
    shared.bump_writes();
}

/// One plane of `table` (`name` `None`: its own, with the limbs made from
/// it), from the table.
pub(crate) fn rebuild_plane(
    db: &rusqlite::Connection,
    shared: &mut Planes,
    table: &str,
    name: Option<&str>,
    why: Rebuild,
) {
    let ours = |e: &PlaneEntry| match e.def.limb() {
        None => e.def.table.eq_ignore_ascii_case(table) && e.def.is_named(name),
        Some(l) => name.is_none() && l.fact.eq_ignore_ascii_case(table),
    };
    for e in shared.entries_mut().iter_mut().filter(|e| ours(e)) {
        rebuild_entry(db, e, why);
    }
    shared.bump_writes();
}

/// After another connection's or process's commit (or at open, when the
/// persisted state cannot be trusted): the planes the catalog now lists,
/// built from their tables, each keeping its counters and counted as a
/// rebuild for `why`.
pub(crate) fn reload_all(
    db: &rusqlite::Connection,
    shared: &mut Planes,
    why: Rebuild,
) -> rusqlite::Result<()> {
    let start = std::time::Instant::now();
    let mut entries = catalog::load_entries(db)?;
    let ms = start.elapsed().as_secs_f64() * 1e3 / entries.len().max(1) as f64;
    for e in &mut entries {
        let old = shared
            .find_def(&e.def)
            .map(|o| o.stats.clone())
            .unwrap_or_default();
        e.stats = old.rebuilt(why, ms);
    }
    shared.replace_entries(entries);
    Ok(())
}

/// Every plane and limb, from its table.
pub(crate) fn rebuild_all(db: &rusqlite::Connection, shared: &mut Planes, why: Rebuild) {
    for e in shared.entries_mut() {
        rebuild_entry(db, e, why);
    }
    shared.bump_writes();
}

/// After a schema change: re-read column positions; a plane whose table or
/// columns went away goes out of service until `pleroma_rebuild`. (The
/// caller also sets `main_copies`: `persist::main_copies`.)
pub(crate) fn reverify_all(db: &rusqlite::Connection, shared: &mut Planes) {
    shared.main_aliases = catalog::main_aliases(db).unwrap_or_default();
    for e in shared.entries_mut() {
        if e.broken.is_some() {
            continue;
        }
        if let Err(reason) = catalog::resolve_columns(db, e) {
            e.broken = Some(format!(
                "{reason}; PRAGMA pleroma_rebuild('{}') after fixing it",
                e.def.table
            ));
        }
    }
}
