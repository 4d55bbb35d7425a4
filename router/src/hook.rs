//! The change hook: SQLite's pre-update, commit and rollback hooks feed a
//! connection's [`Planes`], behind the mutex that the connection also takes
//! to answer queries.

use crate::mutation::Mutation;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use rusqlite::types::ValueRef;

use crate::catalog::{apply_row, PlaneEntry, Role};
use crate::ffi::{Event, Op, PreUpdateHook};
use crate::planes::{Planes, Undo, UndoLog, UNDO_MAX};

/// One row event: feed it to every plane of its table.
fn on_change(p: &mut Planes, ev: &Event<'_>) {
    if ev.schema != b"main"
        && !p
            .main_aliases
            .iter()
            .any(|a| a.as_bytes().eq_ignore_ascii_case(ev.schema))
    {
        return;
    }
    // The appender's own rows: it feeds them from its values.
    if matches!(ev.op, Op::Insert)
        && p.appending
            .as_deref()
            .is_some_and(|t| t.as_bytes().eq_ignore_ascii_case(ev.table))
        && ev.schema == b"main"
        && ev.depth() == 0
    {
        return;
    }
    let old = |c: i32| {
        ev.old_value(c)
            .ok_or_else(|| rusqlite::Error::InvalidColumnIndex(c as usize))
    };
    let new = |c: i32| {
        ev.new_value(c)
            .ok_or_else(|| rusqlite::Error::InvalidColumnIndex(c as usize))
    };
    // Asked only for a row of a planed table.
    let counted = || matches!(ev.op, Op::Insert | Op::Update) && ev.depth() == 0;
    feed_table(p, ev.table, ev.op, counted, old, new);
}

/// A row of `table` (main) that SQLite stores as `row` gives for each
/// column, inserted (`weight` 1) as the hook would feed it, or taken back
/// out (-1: SQLite did not store it after all). The appender's rows.
pub(crate) fn feed_insert<'a>(
    p: &mut Planes,
    table: &str,
    weight: i64,
    row: impl Fn(i32) -> rusqlite::Result<ValueRef<'a>> + Copy,
) {
    if weight > 0 {
        feed_table(p, table.as_bytes(), Op::Insert, || true, none, row);
    } else {
        feed_table(p, table.as_bytes(), Op::Delete, || false, row, none);
    }
}

fn none<'a>(c: i32) -> rusqlite::Result<ValueRef<'a>> {
    Err(rusqlite::Error::InvalidColumnIndex(c as usize))
}

/// Feed one row change of `table` to every plane of it; `counted`: whether
/// it is a row SQLite counts in `changes()` (asked only when a plane took it).
/// A table with several planes (or limb sides) has each column of the row
/// read from SQLite once, whichever planes read it.
fn feed_table<'a, 'b>(
    p: &mut Planes,
    table: &[u8],
    op: Op,
    counted: impl Fn() -> bool,
    old: impl Fn(i32) -> rusqlite::Result<ValueRef<'a>> + Copy,
    new: impl Fn(i32) -> rusqlite::Result<ValueRef<'b>> + Copy,
) {
    let hits: SmallVec<[usize; 4]> = p
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.def.table.as_bytes().eq_ignore_ascii_case(table))
        .map(|(i, _)| i)
        .collect();
    let (hit, dim_side) = (
        !hits.is_empty(),
        hits.iter()
            .any(|&i| matches!(p.entries[i].def.role, Role::LimbDim(_))),
    );
    if hits.len() == 1 {
        feed_hits(p, &hits, op, old, new);
    } else if hit {
        let old_read = RefCell::new(Read::new());
        let new_read = RefCell::new(Read::new());
        let old = |c: i32| read_once(&old_read, c, old);
        let new = |c: i32| read_once(&new_read, c, new);
        feed_hits(p, &hits, op, old, new);
    }
    if hit {
        p.flags.events += 1;
        if counted() {
            p.flags.counted_row = true;
        }
        if !(dim_side && crate::mutation::active(Mutation::MemoNotInvalidated)) {
            p.writes += 1;
        }
    }
}

/// Feed one row change to the planes `hits` (entry indexes).
fn feed_hits<'a, 'b>(
    p: &mut Planes,
    hits: &[usize],
    op: Op,
    old: impl Fn(i32) -> rusqlite::Result<ValueRef<'a>> + Copy,
    new: impl Fn(i32) -> rusqlite::Result<ValueRef<'b>> + Copy,
) {
    let mut log = p.undo.recording.then_some(&mut p.undo);
    for &i in hits {
        let entry = &mut p.entries[i];
        if crate::mutation::active(Mutation::StaleLimb)
            && matches!(entry.def.role, Role::LimbDim(_))
        {
            continue;
        }
        feed(entry, i, op, old, new, log.as_deref_mut());
    }
}

/// The columns of one row image read so far, by index.
type Read<'a> = SmallVec<[(i32, ValueRef<'a>); 16]>;

/// Column `c` of a row image: as read before, or read now and kept.
fn read_once<'a>(
    read: &RefCell<Read<'a>>,
    c: i32,
    get: impl Fn(i32) -> rusqlite::Result<ValueRef<'a>>,
) -> rusqlite::Result<ValueRef<'a>> {
    if let Some(&(_, v)) = read.borrow().iter().find(|(k, _)| *k == c) {
        return Ok(v);
    }
    let v = get(c)?;
    read.borrow_mut().push((c, v));
    Ok(v)
}

/// Apply one row change to one plane.
fn feed<'a, 'b>(
    entry: &mut PlaneEntry,
    idx: usize,
    op: Op,
    old: impl Fn(i32) -> rusqlite::Result<ValueRef<'a>> + Copy,
    new: impl Fn(i32) -> rusqlite::Result<ValueRef<'b>> + Copy,
    mut log: Option<&mut UndoLog>,
) {
    let r = catch_unwind(AssertUnwindSafe(|| match op {
        Op::Insert => apply(entry, idx, 1, new, log.as_deref_mut()),
        Op::Delete => {
            if !crate::mutation::active(Mutation::MissedDelete) {
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
            if entry.cols.dim_cols.contains(&col) || entry.cols.expr_inputs.contains(&col) {
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
    let PlaneEntry {
        plane, cols, def, ..
    } = entry;
    let (dim_cols, meas_cols, columns) = (&cols.dim_cols, &cols.meas_cols, &cols.columns);
    let nd = dim_cols.len();
    let col = |k: usize| {
        if k < nd {
            dim_cols[k]
        } else {
            meas_cols[k - nd]
        }
    };
    // Expression dimensions: SQLite's values over this row image.
    let values = match &cols.eval {
        None => Vec::new(),
        Some(ev) => {
            let mut ev = ev.lock().unwrap_or_else(|e| e.into_inner());
            match ev.eval(&get) {
                Ok(v) => v,
                Err(what) => {
                    if let Some(u) = log {
                        u.overflowed = true;
                    }
                    plane.set_fault(format!(
                        "an expression dimension's row holds {what}; PRAGMA pleroma_rebuild after fixing the data"
                    ));
                    return;
                }
            }
        }
    };
    let value = |k: usize| -> rusqlite::Result<ValueRef<'_>> {
        match col(k) {
            c if c < 0 => Ok(ValueRef::from(&values[(-1 - c) as usize])),
            c => get(c),
        }
    };
    match apply_row(plane, weight, nd, meas_cols.len(), value) {
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
            let name = if k < nd {
                def.dims[k].clone()
            } else {
                columns.get(col(k) as usize).cloned().unwrap_or_default()
            };
            plane.set_fault(format!(
                "column {name} received {what}; PRAGMA pleroma_rebuild after fixing the data"
            ));
        }
    }
}

/// Register the hooks on `db`, feeding `shared`.
///
/// Each hook takes the planes' lock (`planes::lock`, whose rule is: nothing
/// writes through SQLite while holding it, or the hook waits on itself).
///
/// # Safety
///
/// The returned guard owns the pre-update hook: it must be dropped while
/// `db` is still open ([`PreUpdateHook::install`]).
pub(crate) unsafe fn install(
    db: &mut rusqlite::Connection,
    shared: &Arc<Mutex<Planes>>,
) -> crate::Result<PreUpdateHook> {
    let s = shared.clone();
    // SAFETY: the caller drops the guard while `db` is open (this
    // function's contract).
    let pre = unsafe {
        PreUpdateHook::install(db, move |ev| {
            on_change(&mut crate::planes::lock(&s), ev);
        })
    }
    .map_err(crate::Error::Setup)?;
    let s = shared.clone();
    db.commit_hook(Some(move || {
        crate::planes::lock(&s).flags.committed = true;
        false
    }))?;
    let s = shared.clone();
    db.rollback_hook(Some(move || {
        crate::planes::lock(&s).flags.rolled_back = true;
    }))?;
    Ok(pre)
}

/// Unregister the commit and rollback hooks (the pre-update hook goes with
/// its guard).
pub(crate) fn uninstall(db: &mut rusqlite::Connection) {
    let _ = db.commit_hook(None::<fn() -> bool>);
    let _ = db.rollback_hook(None::<fn()>);
}
