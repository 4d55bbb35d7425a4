//! The change hook: SQLite's pre-update, commit and rollback hooks feed the
//! planes. Everything the hook touches lives in [`Shared`], behind a mutex
//! that the connection also takes to answer queries.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use pleroma_plane::{JointKey, MeasureValue};
use rusqlite::types::{Value, ValueRef};
use smallvec::SmallVec;

use crate::catalog::{apply_row, EntrySnapshot, PlaneDef, PlaneEntry, Role};
use crate::connection::Rows;
use crate::database::PublishedEntry;
use crate::ffi::{Event, Op, PreUpdateHook};

/// Flags the hooks raise during one statement.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Flags {
    /// Row events applied to a plane.
    pub events: u64,
    pub committed: bool,
    pub rolled_back: bool,
}

/// The planes of a connection and the hook's flags.
#[derive(Default)]
pub(crate) struct Shared {
    entries: Vec<PlaneEntry>,
    flags: Flags,
    /// Other schema names under which the main database file is attached
    /// (`ATTACH` of the same file): their row events are main's.
    pub main_aliases: Vec<String>,
    /// Moves on every change to any plane (row event, restore, rebuild):
    /// a memo is valid while it has not moved.
    writes: u64,
    undo: UndoLog,
}

/// One snapshot per plane, in `entries` order.
pub(crate) type Snapshots = Vec<EntrySnapshot>;

impl Shared {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn add(&mut self, e: PlaneEntry) {
        self.entries.push(e);
    }
    /// Remove a table's plane and the limbs whose fact table it is.
    pub fn remove(&mut self, table: &str) {
        self.entries.retain(|e| match e.def.limb() {
            None => !e.def.table.eq_ignore_ascii_case(table),
            Some(l) => !l.fact.eq_ignore_ascii_case(table),
        });
        self.bump_writes();
    }
    /// The plane of a table (not a limb side).
    pub fn find(&self, table: &str) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.def.role == Role::Plane && e.def.table.eq_ignore_ascii_case(table))
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
    pub fn count(&mut self, table: &str, served: bool) {
        if let Some(i) = self.find(table) {
            let e = &mut self.entries[i];
            if served {
                e.served += 1;
            } else {
                e.declined += 1;
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
        self.entries.iter().find(|e| e.def == *def)
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
                    .map(|(i, d)| {
                        format!("{d}({} values, {} bits)", p.dict(i).len(), p.dim_bits(i))
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
                    Value::Integer(e.served as i64),
                    Value::Integer(e.declined as i64),
                    Value::Integer(e.rebuilds as i64),
                    Value::Real((e.rebuild_ms * 1e3).round() / 1e3),
                    e.last_rebuild
                        .map(|r| Value::Text(r.reason().into()))
                        .unwrap_or(Value::Null),
                ]
            })
            .collect();
        Rows {
            columns: columns.iter().map(|s| s.to_string()).collect(),
            rows,
        }
    }

    fn on_change(&mut self, ev: &Event<'_>) {
        if ev.schema != b"main"
            && !self
                .main_aliases
                .iter()
                .any(|a| a.as_bytes().eq_ignore_ascii_case(ev.schema))
        {
            return;
        }
        let (mut hit, mut dim_side) = (false, false);
        let mut log = self.undo.recording.then_some(&mut self.undo);
        for (i, entry) in self.entries.iter_mut().enumerate() {
            if entry.def.table.as_bytes().eq_ignore_ascii_case(ev.table) {
                hit = true;
                dim_side |= matches!(entry.def.role, Role::LimbDim(_));
                if crate::mutation::active("stale_limb")
                    && matches!(entry.def.role, Role::LimbDim(_))
                {
                    continue;
                }
                feed(entry, i, ev, log.as_deref_mut());
            }
        }
        if hit {
            self.flags.events += 1;
            if !(dim_side && crate::mutation::active("memo_not_invalidated")) {
                self.writes += 1;
            }
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
const UNDO_MAX: usize = 1 << 16;

/// The applied rows of the running autocommit statement.
#[derive(Default)]
pub(crate) struct UndoLog {
    recording: bool,
    /// The log cannot undo the statement: too long, or a plane faulted.
    overflowed: bool,
    log: Vec<Undo>,
}

struct Undo {
    entry: usize,
    key: JointKey,
    weight: i64,
    /// The plane's joint bits when the key was encoded.
    bits: u32,
    meas: SmallVec<[MeasureValue; 8]>,
}

/// Apply one row event to one plane.
fn feed(entry: &mut PlaneEntry, idx: usize, ev: &Event<'_>, mut log: Option<&mut UndoLog>) {
    let old = |c: i32| {
        ev.old_value(c)
            .ok_or(rusqlite::Error::InvalidColumnIndex(c as usize))
    };
    let new = |c: i32| {
        ev.new_value(c)
            .ok_or(rusqlite::Error::InvalidColumnIndex(c as usize))
    };
    let r = catch_unwind(AssertUnwindSafe(|| match ev.op {
        Op::Insert => apply(entry, idx, 1, new, log.as_deref_mut()),
        Op::Delete => {
            if !crate::mutation::active("missed_delete") {
                apply(entry, idx, -1, old, log.as_deref_mut());
            }
        }
        Op::Update => {
            apply(entry, idx, -1, old, log.as_deref_mut());
            apply(entry, idx, 1, new, log.as_deref_mut());
        }
        // Incremental BLOB I/O can rewrite a TEXT value in place, and the
        // hook is not told the new value. A measure holding TEXT or BLOB is
        // foreign before and after, so only a dimension matters.
        Op::BlobWrite(col) => {
            if entry.cols.dim_cols.contains(&col) {
                let name = entry
                    .cols
                    .columns
                    .get(col as usize)
                    .cloned()
                    .unwrap_or_default();
                entry.plane.set_fault(format!(
                    "incremental BLOB I/O wrote dimension {name}; PRAGMA pleroma_rebuild('{}')",
                    entry.def.table
                ));
                if let Some(u) = log {
                    u.overflowed = true;
                }
            }
        }
    }));
    if r.is_err() {
        entry.plane.set_fault("a panic in the change hook".into());
    }
}

/// Feed one row image of an attached table to its plane.
fn apply<'a>(
    entry: &mut PlaneEntry,
    idx: usize,
    weight: i64,
    get: impl Fn(i32) -> rusqlite::Result<ValueRef<'a>>,
    log: Option<&mut UndoLog>,
) {
    if entry.broken.is_some() || entry.plane.fault().is_some() {
        return;
    }
    let PlaneEntry { plane, cols, .. } = entry;
    let (dim_cols, meas_cols, columns) = (&cols.dim_cols, &cols.meas_cols, &cols.columns);
    let nd = dim_cols.len();
    let col = |k: usize| {
        if k < nd {
            dim_cols[k]
        } else {
            meas_cols[k - nd]
        }
    };
    match apply_row(plane, weight, nd, meas_cols.len(), |k| get(col(k))) {
        Ok(Some(a)) => {
            if let Some(u) = log {
                if u.log.len() >= UNDO_MAX {
                    u.overflowed = true;
                } else if !u.overflowed {
                    u.log.push(Undo {
                        entry: idx,
                        key: a.key,
                        weight,
                        bits: plane.joint_bits(),
                        meas: a.meas,
                    });
                }
            }
        }
        Ok(None) => {
            // The plane faulted on this row: only a rebuild undoes that.
            if let Some(u) = log {
                u.overflowed = true;
            }
        }
        Err((k, what)) => {
            if let Some(u) = log {
                u.overflowed = true;
            }
            let name = columns.get(col(k) as usize).cloned().unwrap_or_default();
            plane.set_fault(format!(
                "column {name} received {what}; PRAGMA pleroma_rebuild after fixing the data"
            ));
        }
    }
}

/// Register the hooks on `db`, feeding `shared`. The returned guard owns
/// the pre-update hook and must drop before `db` closes.
pub(crate) fn install(
    db: &mut rusqlite::Connection,
    shared: &Arc<Mutex<Shared>>,
) -> crate::Result<PreUpdateHook> {
    let s = shared.clone();
    let pre = PreUpdateHook::install(db, move |ev| {
        let mut g = s.lock().unwrap_or_else(|e| e.into_inner());
        g.on_change(ev);
    })
    .map_err(crate::Error::Setup)?;
    let s = shared.clone();
    db.commit_hook(Some(move || {
        s.lock().unwrap_or_else(|e| e.into_inner()).flags.committed = true;
        false
    }))?;
    let s = shared.clone();
    db.rollback_hook(Some(move || {
        s.lock()
            .unwrap_or_else(|e| e.into_inner())
            .flags
            .rolled_back = true;
    }))?;
    Ok(pre)
}

/// Unregister the commit and rollback hooks (the pre-update hook goes with
/// its guard).
pub(crate) fn uninstall(db: &mut rusqlite::Connection) {
    let _ = db.commit_hook(None::<fn() -> bool>);
    let _ = db.rollback_hook(None::<fn()>);
}
