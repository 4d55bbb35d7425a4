//! Persistent planes: the planes' state kept in the database file, written
//! in the same SQLite transaction as the rows it describes, so that it
//! commits, rolls back, crashes and replicates with them.
//!
//! One table, `pleroma_state(seq, kind, schema_version, body)`, holds a
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

/// The table of persisted state.
pub(crate) const STATE: &str = "pleroma_state";
/// The function the guard indexes call: only Pleroma connections have it.
pub(crate) const GUARD_FN: &str = "pleroma_guard";
const CHECKPOINT: &str = "checkpoint";
const DELTA: &str = "delta";
/// A commit writes a checkpoint instead of a delta once this many deltas
/// follow the last one, or once they outweigh it.
const COMPACT_DELTAS: usize = 256;
/// The body format: `PLS2` chains every row to its predecessor.
const BODY_MAGIC: &[u8; 4] = b"PLS2";

/// The settings table (`persist = off` turns persistence off).
const SETTINGS: &str = "pleroma_settings";

/// What the guard function lets through on one connection.
#[derive(Default)]
pub(crate) struct Guard {
    /// Pleroma is running a statement whose writes it persists. Outside
    /// that (a write through `Connection::sqlite()`, or persistence turned
    /// off here while another connection turned it on) a write to a
    /// guarded table fails before it changes anything.
    pub allow: AtomicBool,
    /// The guard refused a write since this was last cleared.
    pub refused: AtomicBool,
    /// The main file's guard keys (0: none known): its guards pass `id` as
    /// the first argument, and a row stays out of a guard index only when
    /// the function returns `secret`, which only this function does, and
    /// only for the file whose writes this connection persists.
    pub id: AtomicI64,
    pub secret: AtomicI64,
}

impl Guard {
    pub(crate) fn set_keys(&self, keys: Option<(i64, i64)>) {
        let (id, secret) = keys.unwrap_or((0, 0));
        self.id.store(id, Ordering::Relaxed);
        self.secret.store(secret, Ordering::Relaxed);
    }

    /// Pleroma's own writes of the state row: allowed while `f` runs.
    fn allowing<T>(&self, f: impl FnOnce() -> T) -> T {
        let was = self.allow.swap(true, Ordering::Relaxed);
        let r = f();
        self.allow.store(was, Ordering::Relaxed);
        r
    }
}

/// Register the guard function on a Pleroma connection. Deterministic (a
/// partial index needs that) and innocuous (so `trusted_schema = OFF`
/// still lets the schema call it). A guard reads `WHERE pleroma_guard(id,
/// cols…) IS NOT secret`: it returns the file's secret only for a write
/// this connection persists for that very file (`id`), so no such row is
/// ever in a guard index, and any stand-in that returns anything else puts
/// the rows it writes into the index (or fails an `UPDATE`/`DELETE` with
/// SQLite's index-corruption check), which open and follow see.
pub(crate) fn register_guard(db: &rusqlite::Connection, g: Arc<Guard>) -> rusqlite::Result<()> {
    db.create_scalar_function(
        GUARD_FN,
        -1,
        FunctionFlags::SQLITE_UTF8
            | FunctionFlags::SQLITE_DETERMINISTIC
            | FunctionFlags::SQLITE_INNOCUOUS,
        move |ctx| {
            let id = if ctx.is_empty() {
                None
            } else {
                ctx.get_raw(0).as_i64().ok()
            };
            let known = g.id.load(Ordering::Relaxed);
            let this_file = known != 0 && id == Some(known);
            if g.allow.load(Ordering::Relaxed)
                && (this_file || crate::mutation::active(Mutation::GuardPassesAnyFile))
            {
                return Ok(g.secret.load(Ordering::Relaxed));
            }
            g.refused.store(true, Ordering::Relaxed);
            Err(rusqlite::Error::UserFunctionError(
                "pleroma_guard: this table has a persisted plane, and this write would bypass it: \
                 write through pleroma::Connection::execute (not Connection::sqlite()) on a \
                 connection opened on this very file (a write into another attached file with \
                 persisted planes, or into the main file through a second name or into a copy of it, is refused)"
                    .into(),
            ))
        },
    )
}

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

/// `PRAGMA pleroma_persist = on | off`: record it; off also removes the
/// persisted state and every guard (so plain SQLite programs can write the
/// tables again, and planes are rebuilt on open). Inside the caller's
/// transaction; ends with a one-row write.
pub(crate) fn set_setting(db: &rusqlite::Connection, on: bool) -> rusqlite::Result<()> {
    if !on {
        let guards: Vec<String> = db
            .prepare("SELECT name FROM main.sqlite_schema WHERE type = 'index' AND name LIKE 'pleroma\\_guard\\_%' ESCAPE '\\'")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for g in guards {
            crate::user_counters::schema_statement(db, &format!("DROP INDEX main.{}", quote(&g)))?;
        }
        crate::user_counters::schema_statement(db, &format!("DROP TABLE IF EXISTS main.{STATE}"))?;
    }
    crate::user_counters::schema_statement(
        db,
        &format!(
            "CREATE TABLE IF NOT EXISTS main.{SETTINGS}(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        ),
    )?;
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
    base: Vec<(PlaneDef, Snapshot)>,
    /// Deltas since the last checkpoint, their bytes, the checkpoint's.
    deltas: usize,
    delta_bytes: usize,
    checkpoint_bytes: usize,
    /// A row written in the open transaction: `seq` once it commits.
    pending: Option<Pending>,
}

struct Pending {
    seq: i64,
    schema_version: i64,
    schema_hash: i64,
    chain: u64,
    base: Vec<(PlaneDef, Snapshot)>,
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

fn bases(planes: &Planes) -> Vec<(PlaneDef, Snapshot)> {
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
    def: PlaneDef,
    plane: Plane,
    out_of_service: Option<String>,
    /// Out of service by a schema change: its columns may be gone, so it
    /// has no guard (its image is marked out of service, never trusted).
    broken: bool,
}

/// The planes, for [`persist`].
pub(crate) fn views(planes: &Planes) -> Vec<View> {
    planes
        .entries
        .iter()
        .map(|e| View {
            def: e.def.clone(),
            plane: e.plane.clone(),
            out_of_service: e.out_of_service(),
            broken: e.broken.is_some(),
        })
        .collect()
}

/// The key of a definition in a state row.
fn entry_key(def: &PlaneDef) -> String {
    let role = match &def.role {
        Role::Plane => "plane".to_owned(),
        Role::LimbFact(l) => format!(
            "limb-fact {} {} {} {}",
            l.fact, l.fact_key, l.dim, l.dim_key
        ),
        Role::LimbDim(l) => format!("limb-dim {} {} {} {}", l.fact, l.fact_key, l.dim, l.dim_key),
    };
    format!(
        "{role}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}",
        def.table,
        def.dims.join(","),
        def.measures.join(","),
        def.cap
    )
}

fn encode_body(prev: u64, items: &[(String, Vec<u8>)]) -> Vec<u8> {
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

fn decode_body(b: &[u8]) -> Result<Vec<(String, Image)>, Rebuild> {
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
fn body_prev(b: &[u8]) -> Option<u64> {
    (b.len() >= 20 && &b[..4] == BODY_MAGIC)
        .then(|| u64::from_le_bytes(b[4..12].try_into().expect("8 bytes")))
}

/// A state row's chain value: a 64-bit SipHash of everything in it, its
/// body included, which holds the previous row's chain value. Equal chain
/// values at one `seq` mean the same history of rows up to it.
fn row_chain(r: &StateRow) -> u64 {
    let mut h = siphasher::sip::SipHasher13::new_with_keys(0x706c_6572_6f6d_6121, 0x7374_6174_6521);
    h.write_i64(r.seq);
    h.write(r.kind.as_bytes());
    h.write_i64(r.schema_version);
    h.write_i64(r.schema_hash);
    h.write(&r.body);
    h.finish()
}

/// A fingerprint of the schema: CRC-32 of every object's type, name,
/// table, root page and SQL. The online backup API moves the copy's
/// `schema_version` (so its readers reload the schema) but copies this
/// exactly; DDL outside Pleroma changes it (a re-created object gets its
/// text back, but not, in general, its root page).
pub(crate) fn schema_hash(db: &rusqlite::Connection) -> rusqlite::Result<i64> {
    let mut h = crc32fast::Hasher::new();
    let mut stmt = db.prepare_cached(
        "SELECT type, name, tbl_name, rootpage, sql FROM main.sqlite_schema ORDER BY name, type",
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

/// The guard of one table: its index name and its statement.
fn guard_of(table: &str, columns: &[&str], (id, secret): (i64, i64)) -> (String, String) {
    let name = format!("pleroma_guard_{table}");
    let cols = columns
        .iter()
        .map(|c| quote(c))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "CREATE INDEX {} ON {}({}) WHERE {GUARD_FN}({id}, {cols}) IS NOT {secret}",
        quote(&name),
        quote(table),
        quote(columns[0]),
    );
    (name, sql)
}

/// The guards the planes need: one per planed table (and the state table
/// itself), over every column a plane of that table reads.
fn guards_needed<'a>(
    defs: impl Iterator<Item = &'a PlaneDef>,
    keys: (i64, i64),
) -> Vec<(String, String)> {
    let mut tables: Vec<(String, Vec<&str>)> = Vec::new();
    for def in defs {
        let cols = def.dims.iter().chain(&def.measures).map(String::as_str);
        match tables
            .iter_mut()
            .find(|(t, _)| t.eq_ignore_ascii_case(&def.table))
        {
            Some((_, cs)) => {
                for c in cols {
                    if !cs.iter().any(|x| x.eq_ignore_ascii_case(c)) {
                        cs.push(c);
                    }
                }
            }
            None => tables.push((def.table.clone(), cols.collect())),
        }
    }
    let mut out: Vec<_> = tables
        .iter()
        .filter(|(_, cs)| !cs.is_empty())
        .map(|(t, cs)| guard_of(t, cs, keys))
        .collect();
    out.push(guard_of(
        STATE,
        &["seq", "kind", "schema_version", "schema_hash", "body"],
        keys,
    ));
    out
}

/// The file's guard keys, as its state table's guard records them.
pub(crate) fn file_keys(db: &rusqlite::Connection) -> rusqlite::Result<Option<(i64, i64)>> {
    file_keys_in(db, "main")
}

/// The guard keys of the file attached as `schema`.
pub(crate) fn file_keys_in(
    db: &rusqlite::Connection,
    schema: &str,
) -> rusqlite::Result<Option<(i64, i64)>> {
    let name = format!("pleroma_guard_{STATE}");
    let Some(Some(sql)) = object_sql_in(db, schema, &name)? else {
        return Ok(None);
    };
    let num = |s: &str| -> Option<i64> {
        let d: String = s.chars().take_while(char::is_ascii_digit).collect();
        d.parse().ok().filter(|&n: &i64| n > 0)
    };
    let id = sql
        .find(&format!("{GUARD_FN}("))
        .and_then(|i| num(&sql[i + GUARD_FN.len() + 1..]));
    let secret = sql.rfind(" IS NOT ").and_then(|i| num(&sql[i + 8..]));
    Ok(id.zip(secret))
}

/// Fresh keys for a file that has no guard: random, positive.
fn new_keys() -> (i64, i64) {
    use std::hash::BuildHasher;
    let r = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        (h.finish() & (i64::MAX as u64)).max(1) as i64
    };
    (r(), r())
}

/// Whether a guard index holds no entry: its root page is an empty leaf
/// (one page read through `dbstat`, whose first row is the root).
fn guard_empty(db: &rusqlite::Connection, name: &str) -> rusqlite::Result<bool> {
    let root: Option<(String, i64)> = db
        .prepare_cached("SELECT pagetype, ncell FROM dbstat('main') WHERE name = ?1 LIMIT 1")?
        .query_row([name], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(matches!(root, Some((t, 0)) if t == "leaf"))
}

/// The state table and every guard, created or brought up to date (a
/// guard with an entry in it is made again). Inside the caller's write
/// transaction.
fn ensure_schema(db: &rusqlite::Connection, views: &[View], guard: &Guard) -> rusqlite::Result<()> {
    let keys = match file_keys(db)? {
        Some(k) => k,
        None => new_keys(),
    };
    guard.set_keys(Some(keys));
    crate::user_counters::schema_statement(
        db,
        &format!(
            "CREATE TABLE IF NOT EXISTS main.{STATE}(seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, \
         schema_version INTEGER NOT NULL, schema_hash INTEGER NOT NULL, body BLOB NOT NULL)"
        ),
    )?;
    for (name, sql) in guards_needed(views.iter().filter(|v| !v.broken).map(|v| &v.def), keys) {
        match object_sql(db, &name)? {
            Some(Some(s)) if s == sql && guard_empty(db, &name)? => continue,
            Some(_) => crate::user_counters::schema_statement(
                db,
                &format!("DROP INDEX main.{}", quote(&name)),
            )?,
            None => {}
        }
        // The guard goes into the schema the table is in: main (a TEMP
        // table of the same name puts the plane out of service anyway).
        crate::user_counters::schema_statement(
            db,
            &sql.replacen("CREATE INDEX ", "CREATE INDEX main.", 1),
        )?;
    }
    Ok(())
}

/// Whether every guard is in place as Pleroma wrote it (`Err`: which
/// check failed), and empty: no write passed it but Pleroma's.
fn guards_ok(db: &rusqlite::Connection, planes: &Planes, guard: &Guard) -> Result<(), Untrusted> {
    let keys = file_keys(db)?;
    guard.set_keys(keys);
    let Some(keys) = keys else {
        return Err(Rebuild::GuardMissing.into());
    };
    for (name, sql) in guards_needed(
        planes
            .entries
            .iter()
            .filter(|e| e.broken.is_none())
            .map(|e| &e.def),
        keys,
    ) {
        let stored = object_sql(db, &name)?.flatten();
        let want = sql.replacen("CREATE INDEX ", "CREATE INDEX main.", 1);
        if stored.as_deref() != Some(sql.as_str()) && stored.as_deref() != Some(want.as_str()) {
            return Err(Rebuild::GuardMissing.into());
        }
        if !crate::mutation::active(Mutation::GuardIndexUnchecked) && !guard_empty(db, &name)? {
            return Err(Rebuild::GuardBypassed.into());
        }
    }
    Ok(())
}

/// Before an `ALTER TABLE`: drop every guard (SQLite refuses to drop or
/// rename a column an index uses). The state row of the transaction puts
/// them back for every plane still in service.
pub(crate) fn drop_guards(db: &rusqlite::Connection) -> rusqlite::Result<()> {
    let guards: Vec<String> = db
        .prepare_cached(
            "SELECT name FROM main.sqlite_schema WHERE type = 'index' \
             AND name LIKE 'pleroma\\_guard\\_%' ESCAPE '\\' AND tbl_name <> 'pleroma_state'",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for g in guards {
        crate::user_counters::schema_statement(db, &format!("DROP INDEX main.{}", quote(&g)))?;
    }
    Ok(())
}

/// Drop the guard of a table that no longer has a plane.
pub(crate) fn drop_guard(db: &rusqlite::Connection, table: &str) -> rusqlite::Result<()> {
    let name = format!("pleroma_guard_{table}");
    if object_sql(db, &name)?.is_some() {
        crate::user_counters::schema_statement(db, &format!("DROP INDEX main.{}", quote(&name)))?;
    }
    Ok(())
}

/// Whether the table has a row (one index step; the probe for a `DELETE`
/// without `WHERE` outside Pleroma, the one write the guard lets through).
fn has_rows(db: &rusqlite::Connection, table: &str) -> rusqlite::Result<bool> {
    db.prepare_cached(&format!("SELECT 1 FROM main.{} LIMIT 1", quote(table)))?
        .exists([])
}

/// Every plane's row count agrees with whether its table has rows.
fn probes_ok(db: &rusqlite::Connection, planes: &Planes) -> rusqlite::Result<bool> {
    for e in &planes.entries {
        if e.broken.is_some() || e.plane.fault().is_some() {
            continue;
        }
        if has_rows(db, &e.def.table)? != (e.plane.rows() > 0) {
            return Ok(false);
        }
    }
    Ok(true)
}

struct StateRow {
    seq: i64,
    kind: String,
    schema_version: i64,
    schema_hash: i64,
    body: Vec<u8>,
}

fn has_state(db: &rusqlite::Connection) -> rusqlite::Result<bool> {
    Ok(object_sql(db, STATE)?.is_some())
}

/// The rows after `seq`, or from the newest checkpoint on.
fn read_rows(db: &rusqlite::Connection, after: Option<i64>) -> rusqlite::Result<Vec<StateRow>> {
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
fn read_row(db: &rusqlite::Connection, seq: i64) -> rusqlite::Result<Option<StateRow>> {
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

/// Apply a delta or checkpoint body to the planes, by definition.
fn apply_body(planes: &mut [PlaneEntry], body: &[u8], full: bool) -> Result<(), Untrusted> {
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
                def: d.clone(),
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
    let mut planes = Planes::default();
    planes.entries = entries;
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
fn verify(
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
    if schema_version(db)? != recorded && schema_hash(db)? != recorded_hash {
        return Err(Rebuild::SchemaOutside.into());
    }
    guards_ok(db, planes, guard)?;
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
        return Err(Rebuild::Unpersisted.into());
    };
    let defs = catalog::load_defs(db)?;
    if defs.len() != planes.entries.len()
        || defs.iter().zip(&planes.entries).any(|(d, e)| *d != e.def)
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
    let mut work = Planes::default();
    work.entries = planes
        .entries
        .iter()
        .map(|e| PlaneEntry {
            def: e.def.clone(),
            cols: e.cols.clone(),
            plane: e.plane.clone(),
            broken: e.broken.clone(),
            stats: EntryStats::default(),
        })
        .collect();
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
    let fresh = !has_state(db)?;
    let sv0 = schema_version(db)?;
    if fresh || force_checkpoint || p.seq.is_none() || sv0 != p.schema_version {
        // A schema change (ours, or one since the state) may have dropped
        // or renamed a guard: put every guard back as it must be.
        ensure_schema(db, views, &p.guard)?;
    }
    let sv = schema_version(db)?;
    let hash = if p.seq.is_some() && sv == p.schema_version {
        p.schema_hash
    } else {
        schema_hash(db)?
    };
    let same_planes =
        p.base.len() == views.len() && p.base.iter().zip(views).all(|((d, _), v)| *d == v.def);
    let big = p.deltas >= COMPACT_DELTAS || p.delta_bytes > p.checkpoint_bytes.max(1 << 16);
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
            items.push((entry_key(&v.def), image(v, None).encode()));
        }
    } else {
        for (v, (_, b)) in views.iter().zip(&p.base) {
            let img = image(v, Some(b));
            if !img.is_full() && img.is_empty_delta(&v.plane) && v.out_of_service.is_none() {
                continue;
            }
            items.push((entry_key(&v.def), img.encode()));
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
    db.prepare_cached(&format!("DELETE FROM main.{STATE} WHERE seq = ?1"))?
        .execute([seq])?;
    db.prepare_cached(&format!(
        "INSERT INTO main.{STATE}(seq, kind, schema_version, schema_hash, body) \
         VALUES (?1, ?2, ?3, ?4, ?5)"
    ))?
    .execute(rusqlite::params![seq, kind, sv, hash, body])?;
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
            .map(|v| (v.def.clone(), v.plane.snapshot()))
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
