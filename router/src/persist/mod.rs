//! Persistent planes: the planes' state kept in the database file, written
//! in the same SQLite transaction as the rows it describes, so that it
//! commits, rolls back, crashes and replicates with them.
//!
//! One table, `pleroma_state(seq, kind, schema_version, schema_hash, body)`, holds a
//! *checkpoint* (every plane's whole state) and after it one *delta* row per
//! commit that changed a plane or the schema (the absolute state of each
//! cell the commit touched; `pleroma_plane::Image`). A process opens from
//! the newest checkpoint plus the deltas after it, and follows another
//! process's commits by applying the deltas it has not seen. Every so often
//! a commit writes a checkpoint instead, and the rows before it go.
//!
//! The state is trusted only when it is provably the state of the rows (the
//! argument is in `docs/design.md`, "Persistent planes"): every row
//! checksummed, the rows contiguous, the schema unchanged since the last
//! row (`schema_version`), each planed table guarded against writers that
//! do not run Pleroma by a partial index whose WHERE calls a function only
//! Pleroma registers, and a table emptied outside Pleroma (the one write
//! the guard lets through) seen by a one-row probe. Otherwise the planes
//! are rebuilt from the tables, and `pleroma_planes` says why.

use crate::mutation::Mutation;
use std::hash::Hasher;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use pleroma_plane::{Image, Plane, PlaneConfig, Snapshot};
use rusqlite::functions::FunctionFlags;
use rusqlite::OptionalExtension;

use crate::catalog::{self, quote, EntryStats, PlaneDef, PlaneEntry, Rebuild, Role};
use crate::planes::Planes;

mod guard;
mod log;

pub(crate) use guard::*;
pub(crate) use log::*;

/// The table of persisted state.
pub(crate) const STATE: &str = "pleroma_state";
const CHECKPOINT: &str = "checkpoint";
const DELTA: &str = "delta";
/// A commit writes a checkpoint instead of a delta once the deltas after
/// the last one cost an open more than the checkpoint itself: each delta
/// weighs its bytes plus `DELTA_WEIGHT` (an open applies a one-row delta in
/// about 2.6 µs, what it spends on about 100 bytes of a checkpoint), against
/// the checkpoint's bytes, at least `CHECKPOINT_FLOOR`. So a checkpoint's
/// cost is spread over deltas in proportion to its size (a fixed count
/// made a commit pay a share of the whole plane's image: `write_cost
/// sparse`), and an open reads at most about twice a checkpoint's worth.
const DELTA_WEIGHT: usize = 128;
const CHECKPOINT_FLOOR: usize = 1 << 16;
/// And never more deltas than this after a checkpoint.
const COMPACT_DELTAS: usize = 1 << 16;

/// Whether the next commit writes a checkpoint (see `DELTA_WEIGHT`).
fn deltas_outweigh(deltas: usize, delta_bytes: usize, checkpoint_bytes: usize) -> bool {
    deltas >= COMPACT_DELTAS
        || deltas
            .saturating_mul(DELTA_WEIGHT)
            .saturating_add(delta_bytes)
            > checkpoint_bytes.max(CHECKPOINT_FLOOR)
}
/// The settings table (`persist = off` turns persistence off).
const SETTINGS: &str = "pleroma_settings";

/// Whether persistence is on for this database (the default; `PRAGMA
/// pleroma_persist = off` turns it off), and possible (a file).
pub(crate) fn setting_on(db: &rusqlite::Connection) -> rusqlite::Result<bool> {
    if !can_persist(db) {
        return Ok(false);
    }
    if object_sql(db, SETTINGS)?.is_none() {
        return Ok(true);
    }
    let v: Option<String> = db
        .prepare_cached(&format!(
            "SELECT value FROM main.{SETTINGS} WHERE key = 'persist'"
        ))?
        .query_row([], |r| r.get(0))
        .optional()?;
    Ok(v.as_deref() != Some("off"))
}

/// The write lock of main for [`set_setting`], taken before it reads
/// anything, with the busy handler (`txn_guards::lock_main`): of main
/// alone, where `BEGIN IMMEDIATE` would lock every attached file (and the
/// file twice when it is attached again).
pub(crate) fn lock_settings(db: &rusqlite::Connection) -> rusqlite::Result<()> {
    if !crate::txn_guards::lock_main(db, SETTINGS)? {
        // Created as the transaction's first statement: no FTS table holds
        // rows to write out at its savepoint, so none of
        // `user_counters::schema_statement`'s reads (which would open a
        // snapshot first) are needed.
        db.execute_batch(&settings_ddl())?;
    }
    Ok(())
}

fn settings_ddl() -> String {
    format!("CREATE TABLE IF NOT EXISTS main.{SETTINGS}(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
}

/// `PRAGMA pleroma_persist = on | off`: record it; off also removes the
/// persisted state and every guard (so plain SQLite programs can write the
/// tables again, and planes are rebuilt on open). Inside the caller's
/// transaction; ends with a one-row write.
pub(crate) fn set_setting(db: &rusqlite::Connection, on: bool) -> rusqlite::Result<()> {
    if !on {
        // Pleroma's own only (found from outside: a user's table named
        // `pleroma_state` was dropped here): an index whose SQL calls the
        // guard function, the state table with the state's columns.
        let guards: Vec<String> = db
            .prepare(&format!(
                "SELECT name FROM main.sqlite_schema WHERE type = 'index' \
                 AND name LIKE 'pleroma\\_guard\\_%' ESCAPE '\\' AND sql LIKE '%{GUARD_FN}(%'"
            ))?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for g in guards {
            crate::user_counters::schema_statement(db, &format!("DROP INDEX main.{}", quote(&g)))?;
        }
        if state_is_ours(db)? == Some(true) {
            crate::user_counters::schema_statement(db, &format!("DROP TABLE main.{STATE}"))?;
        }
    }
    crate::user_counters::schema_statement(db, &settings_ddl())?;
    db.execute(
        &format!("INSERT OR REPLACE INTO main.{SETTINGS}(key, value) VALUES ('persist', ?1)"),
        [if on { "on" } else { "off" }],
    )?;
    Ok(())
}

/// What a connection knows of the persisted state.
#[derive(Default)]
pub(crate) struct Persisted {
    /// The database keeps persisted planes (a file, not memory).
    pub on: bool,
    /// The state row that the committed part of the working copy is
    /// exactly; `None` when it is not known to be any (rebuilt from the
    /// tables since, or nothing persisted yet).
    pub seq: Option<i64>,
    /// `schema_version` recorded with that row.
    pub schema_version: i64,
    /// The fingerprint of the schema recorded with it ([`schema_hash`]).
    pub schema_hash: i64,
    /// The chain value of the row at `seq` ([`row_chain`]): a follower
    /// goes on from `seq` only while that row is still exactly this one.
    pub chain: u64,
    /// The guard function's keys of this connection.
    pub guard: Arc<Guard>,
    /// The planes at `seq`, by definition.
    base: Vec<(Arc<PlaneDef>, Snapshot)>,
    /// Deltas since the last checkpoint, their bytes, the checkpoint's.
    deltas: usize,
    delta_bytes: usize,
    checkpoint_bytes: usize,
    /// A row written in the open transaction: `seq` once it commits.
    pending: Option<Pending>,
    /// Each definition's key in a state row ([`entry_key`]), made once.
    keys: Vec<(Arc<PlaneDef>, String)>,
}

struct Pending {
    seq: i64,
    schema_version: i64,
    schema_hash: i64,
    chain: u64,
    base: Vec<(Arc<PlaneDef>, Snapshot)>,
    checkpoint: bool,
    bytes: usize,
}

/// Where a published state stands in the persisted log (shared planes).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Mark {
    pub seq: Option<i64>,
    pub schema_version: i64,
    pub schema_hash: i64,
    pub chain: u64,
}

impl Persisted {
    /// Nothing known yet; `on` for a database file.
    pub fn new(on: bool, guard: Arc<Guard>) -> Persisted {
        Persisted {
            on,
            guard,
            ..Persisted::default()
        }
    }

    pub fn mark(&self) -> Mark {
        Mark {
            seq: self.seq,
            schema_version: self.schema_version,
            schema_hash: self.schema_hash,
            chain: self.chain,
        }
    }

    /// The working copy was made exactly the persisted state `m` (adopted
    /// from another connection of this process).
    pub fn adopted(&mut self, m: Mark, planes: &Planes) {
        self.seq = m.seq;
        self.schema_version = m.schema_version;
        self.schema_hash = m.schema_hash;
        self.chain = m.chain;
        self.base = bases(planes);
        self.pending = None;
    }

    /// The working copy was rebuilt from the tables: it is no persisted
    /// state, and the next write persists a checkpoint.
    pub fn forget(&mut self) {
        self.seq = None;
        self.base.clear();
        self.pending = None;
    }

    /// The open transaction committed: its row is the state now.
    pub fn committed(&mut self) {
        if let Some(p) = self.pending.take() {
            self.seq = Some(p.seq);
            self.schema_version = p.schema_version;
            self.schema_hash = p.schema_hash;
            self.chain = p.chain;
            self.base = p.base;
            if p.checkpoint {
                self.deltas = 0;
                self.delta_bytes = 0;
                self.checkpoint_bytes = p.bytes;
            } else {
                self.deltas += 1;
                self.delta_bytes += p.bytes;
            }
        }
    }

    /// The open transaction rolled back: so did its row.
    pub fn rolled_back(&mut self) {
        self.pending = None;
    }
}

/// `def`'s key in a state row, made once per definition.
fn key_of(keys: &mut Vec<(Arc<PlaneDef>, String)>, def: &Arc<PlaneDef>) -> String {
    if let Some((_, k)) = keys.iter().find(|(d, _)| Arc::ptr_eq(d, def)) {
        return k.clone();
    }
    if keys.len() >= 64 {
        keys.clear();
    }
    let k = entry_key(def);
    keys.push((def.clone(), k.clone()));
    k
}

fn bases(planes: &Planes) -> Vec<(Arc<PlaneDef>, Snapshot)> {
    planes
        .entries
        .iter()
        .map(|e| (e.def.clone(), e.plane.snapshot()))
        .collect()
}

/// A plane as `persist` writes it: taken under the planes lock, written
/// after it is released (the hook takes that lock for every row event,
/// the state row's own too).
pub(crate) struct View {
    def: Arc<PlaneDef>,
    /// The plane whose state the row is written of.
    plane: Plane,
    /// The same state in a new delta epoch, begun on the working copy:
    /// the base of the next delta once the row commits.
    next_base: Snapshot,
    out_of_service: Option<String>,
    /// Out of service by a schema change: its columns may be gone, so it
    /// has no guard (its image is marked out of service, never trusted).
    broken: bool,
}

/// The planes, for [`persist`]. Each working copy begins a new delta epoch
/// here (`Plane::begin_delta_epoch`), after the view of its state is taken:
/// the row written from these views becomes the base of the next delta,
/// whose cost then follows the cells written since, not the plane's size.
pub(crate) fn views(planes: &mut Planes) -> Vec<View> {
    planes
        .entries
        .iter_mut()
        .map(|e| {
            let plane = e.plane.clone();
            e.plane.begin_delta_epoch();
            View {
                def: e.def.clone(),
                plane,
                next_base: e.plane.snapshot(),
                out_of_service: e.out_of_service(),
                broken: e.broken.is_some(),
            }
        })
        .collect()
}

/// A fingerprint of the schema: CRC-32 of every object's type, name,
/// table, root page and SQL. The online backup API moves the copy's
/// `schema_version` (so its readers reload the schema) but copies this
/// exactly; DDL outside Pleroma changes it (a re-created object gets its
/// text back, but not, in general, its root page).
///
/// Litestream's own two tables are left out (`_litestream_seq`,
/// `_litestream_lock`; Litestream is a WAL-shipping replicator): its
/// first sync of a file creates them, which moved the fingerprint with the
/// `schema_version`, so the primary rebuilt its planes once and a replica
/// restored before the primary's next state row rebuilt them too (found by
/// `router/tests/litestream.rs`). Creating a table moves no other object's
/// root page (except under auto-vacuum, which then shows in that object's
/// row), and a rename of a planed table to one of these names still drops
/// that table's row from the fingerprint, so what it proves is unchanged.
pub(crate) fn schema_hash(db: &rusqlite::Connection) -> rusqlite::Result<i64> {
    let mut h = crc32fast::Hasher::new();
    let mut stmt = db.prepare_cached(
        "SELECT type, name, tbl_name, rootpage, sql FROM main.sqlite_schema \
         WHERE NOT (type = 'table' AND name IN ('_litestream_seq', '_litestream_lock')) \
         ORDER BY name, type",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        for i in 0..5 {
            match r.get_ref(i)? {
                rusqlite::types::ValueRef::Integer(n) => h.update(&n.to_le_bytes()),
                rusqlite::types::ValueRef::Text(t) => h.update(t),
                _ => h.update(b"\0null"),
            }
            h.update(b"\x1f");
        }
        h.update(b"\n");
    }
    Ok(i64::from(h.finalize()))
}

pub(crate) fn schema_version(db: &rusqlite::Connection) -> rusqlite::Result<i64> {
    db.prepare_cached("PRAGMA main.schema_version")?
        .query_row([], |r| r.get(0))
}

/// The `sql` of a schema object in main (see `object_sql_in`).
fn object_sql(db: &rusqlite::Connection, name: &str) -> rusqlite::Result<Option<Option<String>>> {
    object_sql_in(db, "main", name)
}

/// The `sql` of a schema object in `schema` (`Some(None)`: an object
/// without SQL, such as an automatic index; `None`: no such object).
fn object_sql_in(
    db: &rusqlite::Connection,
    schema: &str,
    name: &str,
) -> rusqlite::Result<Option<Option<String>>> {
    db.prepare_cached(&format!(
        "SELECT sql FROM {}.sqlite_schema WHERE name = ?1",
        quote(schema)
    ))?
    .query_row([name], |r| r.get(0))
    .optional()
}

/// Why the persisted state cannot be trusted (the planes are rebuilt), or a
/// SQLite error reading it.
pub(crate) enum Untrusted {
    Stale(Rebuild),
    Sql(rusqlite::Error),
}

impl From<rusqlite::Error> for Untrusted {
    fn from(e: rusqlite::Error) -> Self {
        Untrusted::Sql(e)
    }
}
impl From<Rebuild> for Untrusted {
    fn from(r: Rebuild) -> Self {
        Untrusted::Stale(r)
    }
}

/// Inside a write transaction, just before it commits: write the state row
/// that makes the persisted state the planes' (a delta of the cells
/// changed since `p.seq`, or a checkpoint), unless nothing changed. Taken
/// as the state when the commit succeeds ([`Persisted::committed`]).
pub(crate) fn persist(
    db: &rusqlite::Connection,
    views: &[View],
    p: &mut Persisted,
    force_checkpoint: bool,
) -> rusqlite::Result<()> {
    let guard = p.guard.clone();
    guard.allowing(|| persist_allowed(db, views, p, force_checkpoint))
}

fn persist_allowed(
    db: &rusqlite::Connection,
    views: &[View],
    p: &mut Persisted,
    force_checkpoint: bool,
) -> rusqlite::Result<()> {
    // A row this transaction wrote before (at a RELEASE, or before a COMMIT
    // that failed): the row written now replaces it, or it goes.
    let earlier = p.pending.take();
    let sv0 = schema_version(db)?;
    // The schema of this connection's last state row: its table is there.
    let known = p.seq.is_some() && sv0 == p.schema_version;
    let fresh = !known && !has_state(db)?;
    let sv = if fresh || force_checkpoint || !known {
        // A schema change (ours, or one since the state) may have dropped
        // or renamed a guard: put every guard back as it must be.
        ensure_schema(db, views, &p.guard)?;
        schema_version(db)?
    } else {
        sv0
    };
    let hash = if p.seq.is_some() && sv == p.schema_version {
        p.schema_hash
    } else {
        schema_hash(db)?
    };
    let same_planes =
        p.base.len() == views.len() && p.base.iter().zip(views).all(|((d, _), v)| *d == v.def);
    let big = deltas_outweigh(p.deltas, p.delta_bytes, p.checkpoint_bytes);
    let checkpoint = force_checkpoint || fresh || p.seq.is_none() || !same_planes || big;
    let image = |v: &View, base: Option<&Snapshot>| {
        let img = match base {
            Some(b) => v.plane.image_since(b),
            None => v.plane.image(),
        };
        match &v.out_of_service {
            Some(reason) => img.faulted(reason.clone()),
            None => img,
        }
    };
    let mut items = Vec::new();
    if checkpoint {
        for v in views {
            items.push((key_of(&mut p.keys, &v.def), image(v, None).encode()));
        }
    } else {
        for (v, (_, b)) in views.iter().zip(&p.base) {
            let img = image(v, Some(b));
            if !img.is_full() && img.is_empty_delta(&v.plane) && v.out_of_service.is_none() {
                continue;
            }
            items.push((key_of(&mut p.keys, &v.def), img.encode()));
        }
        if items.is_empty() && sv == p.schema_version {
            if let Some(e) = earlier.filter(|_| !crate::mutation::active(Mutation::ReleaseRowKept))
            {
                db.prepare_cached(&format!("DELETE FROM main.{STATE} WHERE seq = ?1"))?
                    .execute([e.seq])?;
            }
            return Ok(());
        }
    }
    let seq = p.seq.map_or(1, |s| s + 1);
    // A state table made by someone else may already be further on (an
    // untrusted state being replaced): start after it.
    let seq = if checkpoint {
        let max: Option<i64> = db
            .prepare_cached(&format!("SELECT max(seq) FROM main.{STATE}"))?
            .query_row([], |r| r.get(0))?;
        seq.max(max.map_or(1, |m| m + 1))
    } else {
        seq
    };
    let body = encode_body(if checkpoint { 0 } else { p.chain }, &items);
    if checkpoint {
        // Row by row: a DELETE of several rows is a multi-write (below).
        let older: Vec<i64> = db
            .prepare_cached(&format!("SELECT seq FROM main.{STATE} WHERE seq <> ?1"))?
            .query_map([seq], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let mut delete = db.prepare_cached(&format!("DELETE FROM main.{STATE} WHERE seq = ?1"))?;
        for s in older {
            delete.execute([s])?;
        }
    }
    let kind = if checkpoint { CHECKPOINT } else { DELTA };
    let bytes = body.len();
    // A DELETE by key and a one-row INSERT, not `INSERT OR REPLACE`: with
    // the state table's guard index, a REPLACE (or a DELETE of several
    // rows) is a multi-write whose function call may abort, so SQLite gives
    // it a statement journal, whose savepoint makes FTS3/4/5 write out
    // their pending rows inside Pleroma's statement (counted as Pleroma's,
    // and earlier than plain SQLite's commit). Neither of these gets one.
    //
    // The row at `seq` is there only when this transaction wrote it before
    // (`earlier`): under the write lock the planes follow every newer row
    // first, so `seq` is past the file's newest. Should a row be there all
    // the same, the INSERT fails on the key, changing nothing, and the row
    // is replaced as before.
    let delete = || {
        db.prepare_cached(&format!("DELETE FROM main.{STATE} WHERE seq = ?1"))?
            .execute([seq])
    };
    if earlier.is_some_and(|e| e.seq == seq) {
        delete()?;
    }
    let insert = || {
        db.prepare_cached(&format!(
            "INSERT INTO main.{STATE}(seq, kind, schema_version, schema_hash, body) \
             VALUES (?1, ?2, ?3, ?4, ?5)"
        ))?
        .execute(rusqlite::params![seq, kind, sv, hash, body])
    };
    match insert() {
        Err(e)
            if e.sqlite_error().map(|e| e.extended_code)
                == Some(rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY) =>
        {
            delete()?;
            insert()?;
        }
        r => {
            r?;
        }
    }
    let chain = row_chain(&StateRow {
        seq,
        kind: kind.to_owned(),
        schema_version: sv,
        schema_hash: hash,
        body,
    });
    p.pending = Some(Pending {
        seq,
        schema_version: sv,
        schema_hash: hash,
        chain,
        base: views
            .iter()
            .map(|v| (v.def.clone(), v.next_base.clone()))
            .collect(),
        checkpoint,
        bytes,
    });
    Ok(())
}

/// Whether the file can hold persisted planes: a database file, not memory
/// or a temporary database.
pub(crate) fn can_persist(db: &rusqlite::Connection) -> bool {
    db.path().is_some_and(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small plane checkpoints after a few hundred one-row deltas (about
    /// 100 bytes each); a large one after as many deltas as its checkpoint's
    /// bytes pay for, never more than `COMPACT_DELTAS`.
    #[test]
    fn deltas_outweigh_a_checkpoint_by_its_size() {
        let small = |n: usize| deltas_outweigh(n, n * 100, 2_000);
        assert!(!small(200));
        assert!(small(300));
        let first = (1..1000).find(|&n| small(n)).unwrap();
        assert_eq!(first, CHECKPOINT_FLOOR / (DELTA_WEIGHT + 100) + 1);
        let big = |n: usize| deltas_outweigh(n, n * 100, 6_000_000);
        assert!(!big(10_000));
        assert!(big(30_000));
        let huge = |n: usize| deltas_outweigh(n, n * 100, usize::MAX / 2);
        assert!(!huge(COMPACT_DELTAS - 1));
        assert!(huge(COMPACT_DELTAS));
    }
}
