//! The state rows: their body format (checksummed images, chained to the
//! row before), reading them, and opening from or following them (a
//! checkpoint and the deltas after it, each proved contiguous and of the
//! current schema before it is applied).

use super::*;

/// The body format: `PLS2` chains every row to its predecessor.
pub(super) const BODY_MAGIC: &[u8; 4] = b"PLS2";

/// The key of a definition in a state row.
pub(super) fn entry_key(def: &PlaneDef) -> String {
    let role = match &def.role {
        // A named plane's key names it; the table's own keeps the key it
        // had before planes had names.
        Role::Plane => match &def.name {
            None => "plane".to_owned(),
            Some(n) => format!("plane {n}"),
        },
        Role::LimbFact(l) => format!(
            "limb-fact {} {} {} {}",
            l.fact, l.fact_key, l.dim, l.dim_key
        ),
        Role::LimbDim(l) => format!("limb-dim {} {} {} {}", l.fact, l.fact_key, l.dim, l.dim_key),
    };
    format!(
        "{role}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}",
        def.table,
        crate::catalog::dims_text(def),
        def.measures.join(","),
        def.cap
    )
}

pub(super) fn encode_body(prev: u64, items: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut w = Vec::with_capacity(
        24 + items
            .iter()
            .map(|(k, v)| 8 + k.len() + v.len())
            .sum::<usize>(),
    );
    w.extend_from_slice(BODY_MAGIC);
    w.extend_from_slice(&prev.to_le_bytes());
    w.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for (k, v) in items {
        w.extend_from_slice(&(k.len() as u32).to_le_bytes());
        w.extend_from_slice(k.as_bytes());
        w.extend_from_slice(&(v.len() as u32).to_le_bytes());
        w.extend_from_slice(v);
    }
    let crc = crc32fast::hash(&w);
    w.extend_from_slice(&crc.to_le_bytes());
    w
}

pub(super) fn decode_body(b: &[u8]) -> Result<Vec<(String, Image)>, Rebuild> {
    let corrupt = Rebuild::PersistCorrupt;
    if b.len() < 20 {
        return Err(corrupt);
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().map_err(|_| corrupt)?) {
        return Err(corrupt);
    }
    if &body[..4] != BODY_MAGIC {
        return Err(corrupt);
    }
    let mut i: usize = 12;
    let mut take = |n: usize| -> Result<&[u8], Rebuild> {
        let end = i
            .checked_add(n)
            .filter(|&e| e <= body.len())
            .ok_or(corrupt)?;
        let s = &body[i..end];
        i = end;
        Ok(s)
    };
    let u32_of = |s: &[u8]| u32::from_le_bytes(s.try_into().expect("4 bytes")) as usize;
    let n = u32_of(take(4)?);
    let mut out = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let kl = u32_of(take(4)?);
        let k = std::str::from_utf8(take(kl)?)
            .map_err(|_| corrupt)?
            .to_owned();
        let vl = u32_of(take(4)?);
        let img = Image::decode(take(vl)?).map_err(|_| corrupt)?;
        out.push((k, img));
    }
    if i != body.len() {
        return Err(corrupt);
    }
    Ok(out)
}

/// The chain value of the row before this one, recorded in its body
/// (`None`: not a body of this format).
pub(super) fn body_prev(b: &[u8]) -> Option<u64> {
    (b.len() >= 20 && &b[..4] == BODY_MAGIC)
        .then(|| u64::from_le_bytes(b[4..12].try_into().expect("8 bytes")))
}

/// A state row's chain value: a 64-bit SipHash of everything in it, its
/// body included, which holds the previous row's chain value. Equal chain
/// values at one `seq` mean the same history of rows up to it.
pub(super) fn row_chain(r: &StateRow) -> u64 {
    let mut h = siphasher::sip::SipHasher13::new_with_keys(0x706c_6572_6f6d_6121, 0x7374_6174_6521);
    h.write_i64(r.seq);
    h.write(r.kind.as_bytes());
    h.write_i64(r.schema_version);
    h.write_i64(r.schema_hash);
    h.write(&r.body);
    h.finish()
}

pub(super) struct StateRow {
    pub(super) seq: i64,
    pub(super) kind: String,
    pub(super) schema_version: i64,
    pub(super) schema_hash: i64,
    pub(super) body: Vec<u8>,
}

pub(super) fn has_state(db: &rusqlite::Connection) -> rusqlite::Result<bool> {
    Ok(object_sql(db, STATE)?.is_some())
}

/// The rows after `seq`, or from the newest checkpoint on.
pub(super) fn read_rows(
    db: &rusqlite::Connection,
    after: Option<i64>,
) -> rusqlite::Result<Vec<StateRow>> {
    if !has_state(db)? {
        return Ok(Vec::new());
    }
    let map = |r: &rusqlite::Row<'_>| {
        Ok(StateRow {
            seq: r.get(0)?,
            kind: r.get(1)?,
            schema_version: r.get(2)?,
            schema_hash: r.get(3)?,
            body: r.get(4)?,
        })
    };
    let rows = match after {
        Some(s) => db
            .prepare_cached(&format!(
                "SELECT seq, kind, schema_version, schema_hash, body FROM main.{STATE} WHERE seq > ?1 ORDER BY seq"
            ))?
            .query_map([s], map)?
            .collect::<rusqlite::Result<Vec<_>>>()?,
        None => db
            .prepare_cached(&format!(
                "SELECT seq, kind, schema_version, schema_hash, body FROM main.{STATE} WHERE seq >= \
                 (SELECT max(seq) FROM main.{STATE} WHERE kind = '{CHECKPOINT}') ORDER BY seq"
            ))?
            .query_map([], map)?
            .collect::<rusqlite::Result<Vec<_>>>()?,
    };
    Ok(rows)
}

/// The row at `seq`, if any.
pub(super) fn read_row(db: &rusqlite::Connection, seq: i64) -> rusqlite::Result<Option<StateRow>> {
    if !has_state(db)? {
        return Ok(None);
    }
    db.prepare_cached(&format!(
        "SELECT seq, kind, schema_version, schema_hash, body FROM main.{STATE} WHERE seq = ?1"
    ))?
    .query_row([seq], |r| {
        Ok(StateRow {
            seq: r.get(0)?,
            kind: r.get(1)?,
            schema_version: r.get(2)?,
            schema_hash: r.get(3)?,
            body: r.get(4)?,
        })
    })
    .optional()
}

/// Apply a delta or checkpoint body to the planes, by definition.
pub(super) fn apply_body(
    planes: &mut [PlaneEntry],
    body: &[u8],
    full: bool,
) -> Result<(), Untrusted> {
    let items = decode_body(body)?;
    if full && items.len() != planes.len() {
        return Err(Rebuild::Unpersisted.into());
    }
    for (key, img) in items {
        let Some(e) = planes.iter_mut().find(|e| entry_key(&e.def) == key) else {
            if full {
                return Err(Rebuild::Unpersisted.into());
            }
            // A delta of a plane this connection does not have: the
            // catalog changed, which the caller checks first.
            return Err(Rebuild::PersistCorrupt.into());
        };
        if img.fault().is_some() {
            // Out of service when persisted: never trusted.
            return Err(Rebuild::Unpersisted.into());
        }
        e.plane
            .apply_image(&img)
            .map_err(|_| Rebuild::PersistCorrupt)?;
    }
    Ok(())
}

/// Open the planes `defs` from the persisted state, inside the caller's
/// read transaction. `Err`: why they must be built from the tables.
pub(crate) fn open(
    db: &rusqlite::Connection,
    defs: &[PlaneDef],
    p: &mut Persisted,
) -> Result<Vec<PlaneEntry>, Untrusted> {
    let rows = read_rows(db, None)?;
    let Some(first) = rows.first().filter(|r| r.kind == CHECKPOINT) else {
        return Err(Rebuild::Unpersisted.into());
    };
    let mut entries: Vec<PlaneEntry> = defs
        .iter()
        .map(|d| {
            let mut config = PlaneConfig::new(d.dims.clone(), d.measures.clone());
            config.cap = d.cap;
            PlaneEntry {
                def: d.clone().into(),
                cols: Default::default(),
                plane: Plane::new(config),
                broken: None,
                stats: EntryStats::default(),
            }
        })
        .collect();
    apply_body(&mut entries, &first.body, true)?;
    let mut last = first;
    let mut chain = row_chain(first);
    let stale = crate::mutation::active(Mutation::TrustStaleCheckpoint);
    for r in &rows[1..] {
        if stale {
            break;
        }
        if r.seq != last.seq + 1 || body_prev(&r.body) != Some(chain) {
            return Err(Rebuild::PersistGap.into());
        }
        chain = row_chain(r);
        apply_body(&mut entries, &r.body, r.kind == CHECKPOINT)?;
        last = r;
    }
    let mut planes = Planes {
        entries,
        ..Planes::default()
    };
    verify(db, &planes, last.schema_version, last.schema_hash, &p.guard)?;
    for e in &mut planes.entries {
        if let Err(reason) = catalog::resolve_columns(db, e) {
            e.broken = Some(reason);
        }
    }
    p.seq = Some(last.seq);
    p.schema_version = last.schema_version;
    p.schema_hash = last.schema_hash;
    p.chain = chain;
    p.base = bases(&planes);
    p.pending = None;
    p.deltas = rows.len() - 1;
    p.checkpoint_bytes = first.body.len();
    p.delta_bytes = rows[1..].iter().map(|r| r.body.len()).sum();
    Ok(planes.entries)
}

/// The checks that make a state current for the rows: no schema change
/// outside Pleroma since the last row, every guard in place, no table
/// emptied outside Pleroma.
pub(super) fn verify(
    db: &rusqlite::Connection,
    planes: &Planes,
    recorded: i64,
    recorded_hash: i64,
    guard: &Guard,
) -> Result<(), Untrusted> {
    if crate::mutation::active(Mutation::PlainWriteIgnored) {
        return Ok(());
    }
    // The same version: no DDL since. Another version with the same
    // fingerprint (which holds the file's guard keys) is a copy made by the
    // backup API (which moves the version) only if no write passed a guard
    // since: every guard index empty, checked next, whatever the version.
    let version = schema_version(db)?;
    if version != recorded && schema_hash(db)? != recorded_hash {
        return Err(Rebuild::SchemaOutside.into());
    }
    guards_ok(db, planes, guard, version)?;
    if !probes_ok(db, planes)? {
        return Err(Rebuild::EmptiedOutside.into());
    }
    Ok(())
}

/// What following the log did.
pub(crate) enum Followed {
    /// The planes are the persisted state now. `schema_moved`: a Pleroma
    /// commit changed the schema (column maps must be read again).
    Applied { schema_moved: bool },
    /// The catalog lists other planes: open them again.
    Reload,
}

/// Bring the planes to the persisted state after another connection's or
/// process's commits, inside the caller's transaction (which has not
/// written): apply the rows after `p.seq`.
pub(crate) fn follow(
    db: &rusqlite::Connection,
    planes: &mut Planes,
    p: &mut Persisted,
) -> Result<Followed, Untrusted> {
    let Some(seq) = p.seq else {
        // Nothing followed yet (planes attached since this connection
        // opened, or never persisted here): open them from the persisted
        // state as a new connection would, instead of building them from
        // the tables and writing a checkpoint from a read (found from
        // outside: a SELECT wrote a state row).
        return Ok(Followed::Reload);
    };
    let defs = catalog::load_defs(db)?;
    if defs.len() != planes.entries.len()
        || defs.iter().zip(&planes.entries).any(|(d, e)| *d != *e.def)
    {
        return Ok(Followed::Reload);
    }
    // Continuity: the row this connection applied last must still be
    // there, exactly (a restored backup, an emptied or rewritten log, a
    // reused seq all change it), and each row after it must name it as its
    // predecessor. Otherwise open again from the file's own state.
    if !crate::mutation::active(Mutation::FollowWithoutContinuity)
        && read_row(db, seq)?.map(|r| row_chain(&r)) != Some(p.chain)
    {
        return Ok(Followed::Reload);
    }
    let rows = read_rows(db, Some(seq))?;
    if rows.iter().any(|r| r.kind == CHECKPOINT) {
        return Ok(Followed::Reload);
    }
    let mut work = Planes {
        entries: planes
            .entries
            .iter()
            .map(|e| PlaneEntry {
                def: e.def.clone(),
                cols: e.cols.clone(),
                plane: e.plane.clone(),
                broken: e.broken.clone(),
                stats: EntryStats::default(),
            })
            .collect(),
        ..Planes::default()
    };
    let mut last = (seq, p.schema_version, p.schema_hash);
    let mut chain = p.chain;
    let skip = crate::mutation::active(Mutation::SkipLogEntry);
    for (i, r) in rows.iter().enumerate() {
        if r.seq != last.0 + 1 {
            return Err(Rebuild::PersistGap.into());
        }
        if body_prev(&r.body) != Some(chain)
            && !crate::mutation::active(Mutation::FollowWithoutContinuity)
        {
            return Ok(Followed::Reload);
        }
        chain = row_chain(r);
        if !(skip && i == 0) {
            apply_body(&mut work.entries, &r.body, false)?;
        }
        last = (r.seq, r.schema_version, r.schema_hash);
    }
    verify(db, &work, last.1, last.2, &p.guard)?;
    let schema_moved = last.1 != p.schema_version;
    let changed = !rows.is_empty();
    for (e, w) in planes.entries.iter_mut().zip(work.entries) {
        e.plane = w.plane;
    }
    if changed {
        planes.bump_writes();
    }
    p.deltas += rows.len();
    p.delta_bytes += rows.iter().map(|r| r.body.len()).sum::<usize>();
    p.seq = Some(last.0);
    p.schema_version = last.1;
    p.schema_hash = last.2;
    p.chain = chain;
    p.base = bases(planes);
    Ok(Followed::Applied { schema_moved })
}
