//! Plane definitions: validation, the catalog table in the database, and
//! building a plane from the table's rows.

use crate::mutation::Mutation;
use std::sync::Arc;

use pleroma_plane::{DimRef, JointKey, MeasureValue, Plane, PlaneConfig, Snapshot};
use rusqlite::types::ValueRef;
use smallvec::SmallVec;

use crate::affinity::Affinity;

/// The catalog table; one row per attached plane.
const CATALOG: &str = "pleroma_catalog";
/// The limb catalog; one row per join limb.
const LIMBS: &str = "pleroma_limbs";

/// What `PRAGMA pleroma_attach` named, with the table's own spelling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlaneDef {
    pub table: String,
    pub dims: Vec<String>,
    pub measures: Vec<String>,
    /// Most distinct values per dimension.
    pub cap: usize,
    pub role: Role,
}

/// What a plane is for: answering its table's slices, or one side of a
/// join limb (named by the fact table and its key column).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Plane,
    LimbFact(LimbDef),
    LimbDim(LimbDef),
}

/// `PRAGMA pleroma_limb('fact', 'fact_key', 'dim', 'dim_key')`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LimbDef {
    pub fact: String,
    pub fact_key: String,
    pub dim: String,
    pub dim_key: String,
}

/// Most distinct keys of a limb.
pub(crate) const LIMB_CAP: usize = 4095;

/// Where a plane's columns sit in its table, as the schema says now. Part
/// of what a snapshot saves: a schema change rolled back brings the old
/// positions back with the old cells.
#[derive(Clone, Debug, Default)]
pub(crate) struct ColumnMap {
    /// Column index in the table of each dimension and measure.
    pub dim_cols: Vec<i32>,
    pub meas_cols: Vec<i32>,
    /// Affinity of each dimension column (for comparisons with literals).
    pub dim_aff: Vec<Affinity>,
    /// Every column of the table, in order (for messages).
    pub columns: Vec<String>,
}

/// A plane attached to a table, with what the hook needs to feed it.
pub(crate) struct PlaneEntry {
    pub def: PlaneDef,
    pub cols: Arc<ColumnMap>,
    pub plane: Plane,
    /// Out of service for a reason outside the cells (schema changes).
    /// Part of what a snapshot saves, like the cells' own fault.
    pub broken: Option<String>,
    pub stats: EntryStats,
}

/// What `pleroma_planes` counts for a plane on this connection; carried
/// across rebuilds and takeovers.
#[derive(Clone, Debug, Default)]
pub(crate) struct EntryStats {
    pub served: u64,
    pub declined: u64,
    /// Full rebuilds from the table since the plane was attached or opened,
    /// their total time, and why the last one ran.
    pub rebuilds: u64,
    pub rebuild_ms: f64,
    pub last_rebuild: Option<Rebuild>,
}

impl EntryStats {
    /// These counts plus one rebuild of `ms` for `why`.
    pub fn rebuilt(&self, why: Rebuild, ms: f64) -> EntryStats {
        EntryStats {
            rebuilds: self.rebuilds + 1,
            rebuild_ms: self.rebuild_ms + ms,
            last_rebuild: Some(why),
            ..self.clone()
        }
    }
}

/// Everything of an entry that a write, a schema change or a rebuild can
/// change, saved in O(1): what ROLLBACK and ROLLBACK TO restore.
#[derive(Clone)]
pub(crate) struct EntrySnapshot {
    pub(crate) plane: Snapshot,
    pub(crate) cols: Arc<ColumnMap>,
    pub(crate) broken: Option<String>,
}

impl PlaneEntry {
    pub fn snapshot(&self) -> EntrySnapshot {
        EntrySnapshot {
            plane: self.plane.snapshot(),
            cols: self.cols.clone(),
            broken: self.broken.clone(),
        }
    }

    pub fn restore(&mut self, s: &EntrySnapshot) {
        self.plane.restore(&s.plane);
        if !crate::mutation::active(Mutation::SchemaNotRestored) {
            self.cols = s.cols.clone();
            self.broken = s.broken.clone();
        }
    }

    /// Whether the entry is still exactly `s` (so restoring it changes
    /// nothing, and a memo of its answers stays valid).
    pub fn is_at(&self, s: &EntrySnapshot) -> bool {
        self.plane.is_at(&s.plane) && Arc::ptr_eq(&self.cols, &s.cols) && self.broken == s.broken
    }

    pub fn out_of_service(&self) -> Option<String> {
        self.broken
            .clone()
            .or_else(|| self.plane.fault().map(str::to_owned))
    }
}

struct ColumnInfo {
    name: String,
    decl: String,
    hidden: i64,
    /// The column's affinity, by its table's rules (STRICT or not).
    aff: Affinity,
    /// The column's collation (`BINARY` when none is declared).
    coll: String,
}

fn table_columns(db: &rusqlite::Connection, table: &str) -> rusqlite::Result<Vec<ColumnInfo>> {
    let strict: bool = db
        .query_row(
            "SELECT strict FROM pragma_table_list WHERE schema = 'main' AND name = ?1",
            [table],
            |r| r.get::<_, i64>(0),
        )
        .map(|s| s != 0)
        .unwrap_or(false);
    let mut stmt = db.prepare("SELECT name, type, hidden FROM pragma_table_xinfo(?1, 'main')")?;
    let rows = stmt.query_map([table], |r| {
        let decl: String = r.get(1)?;
        Ok(ColumnInfo {
            name: r.get(0)?,
            aff: Affinity::of_column(&decl, strict),
            decl,
            hidden: r.get(2)?,
            coll: String::new(),
        })
    })?;
    let mut cols: Vec<ColumnInfo> = rows.collect::<rusqlite::Result<_>>()?;
    for c in cols.iter_mut().filter(|c| c.hidden != 1) {
        let (_, coll, ..) = db.column_metadata(Some("main"), table, c.name.as_str())?;
        c.coll = coll
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_else(|| "BINARY".into());
    }
    Ok(cols)
}

/// The table's own spelling of its name, if it is a table in `main`.
fn canonical_table(db: &rusqlite::Connection, table: &str) -> rusqlite::Result<Option<String>> {
    let mut stmt = db.prepare(
        "SELECT name FROM main.sqlite_master WHERE type = 'table' AND name = ?1 COLLATE NOCASE",
    )?;
    let mut rows = stmt.query([table])?;
    Ok(match rows.next()? {
        Some(r) => Some(r.get(0)?),
        None => None,
    })
}

/// Check a definition against the database. Errors name the problem.
pub(crate) fn validate_def(
    db: &rusqlite::Connection,
    table: &str,
    dims: &[String],
    measures: &[String],
) -> Result<PlaneDef, String> {
    let sql_err = |e: rusqlite::Error| format!("pleroma_attach: {e}");
    let name = canonical_table(db, table)
        .map_err(sql_err)?
        .ok_or_else(|| format!("pleroma_attach: no such table: {table}"))?;
    if name.eq_ignore_ascii_case(CATALOG)
        || name.eq_ignore_ascii_case(LIMBS)
        || name.starts_with("sqlite_")
    {
        return Err(format!("pleroma_attach: cannot attach a plane to {name}"));
    }
    let cols = table_columns(db, &name).map_err(sql_err)?;
    if cols.iter().any(|c| c.hidden == 2 || c.hidden == 3) {
        return Err(format!(
            "pleroma_attach: table {name} has generated columns, which the change hook cannot read"
        ));
    }
    if dims.len() > 6 {
        return Err(format!(
            "pleroma_attach: {} dimensions given; at most 6 fit the 64-bit joint key",
            dims.len()
        ));
    }
    let mut seen: Vec<String> = Vec::new();
    let mut resolve = |given: &str, role: &str| -> Result<String, String> {
        let c = cols
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(given))
            .ok_or_else(|| {
                format!("pleroma_attach: no such column: {name}.{given} (given as a {role})")
            })?;
        if seen.iter().any(|s| s.eq_ignore_ascii_case(&c.name)) {
            return Err(format!("pleroma_attach: column {} is given twice", c.name));
        }
        seen.push(c.name.clone());
        Ok(c.name.clone())
    };
    let dims = dims
        .iter()
        .map(|d| resolve(d, "dimension"))
        .collect::<Result<Vec<_>, _>>()?;
    let measures = measures
        .iter()
        .map(|m| resolve(m, "measure"))
        .collect::<Result<Vec<_>, _>>()?;
    for d in &dims {
        let c = cols.iter().find(|c| &c.name == d).expect("resolved");
        if c.aff == Affinity::Real {
            return Err(format!(
                "pleroma_attach: dimension {d} is declared {} (REAL affinity); dimensions hold INTEGER, TEXT or NULL",
                c.decl
            ));
        }
        if !c.coll.eq_ignore_ascii_case("BINARY") {
            return Err(format!(
                "pleroma_attach: dimension {d} has collation {}; only BINARY is supported",
                c.coll
            ));
        }
    }
    Ok(PlaneDef::plane(name, dims, measures))
}

/// After the build: a measure that received a REAL, TEXT or BLOB value is
/// refused, with the storage class named. The build counted them, so the
/// table is read again only to name the class.
pub(crate) fn check_measures(db: &rusqlite::Connection, entry: &PlaneEntry) -> Result<(), String> {
    for (i, m) in entry.def.measures.iter().enumerate() {
        if entry.plane.foreign(i) == 0 {
            continue;
        }
        let sql = format!(
            "SELECT typeof({q}) FROM main.{t} WHERE typeof({q}) NOT IN ('integer', 'null') LIMIT 1",
            q = quote(m),
            t = quote(&entry.def.table)
        );
        let class: String = db
            .query_row(&sql, [], |r| r.get(0))
            .unwrap_or_else(|_| "non-INTEGER".into());
        return Err(format!(
            "pleroma_attach: measure {m} holds {} values; measures hold only INTEGER or NULL",
            class.to_uppercase()
        ));
    }
    Ok(())
}

impl PlaneDef {
    pub fn plane(table: String, dims: Vec<String>, measures: Vec<String>) -> PlaneDef {
        PlaneDef {
            table,
            dims,
            measures,
            cap: 1024,
            role: Role::Plane,
        }
    }

    pub fn limb(&self) -> Option<&LimbDef> {
        match &self.role {
            Role::Plane => None,
            Role::LimbFact(l) | Role::LimbDim(l) => Some(l),
        }
    }
}

/// The two planes of a limb: the fact side (the key, then the fact plane's
/// dimensions; its measures) and the dimension side (the key; the dimension
/// table's INTEGER columns that hold only integers).
pub(crate) fn limb_defs(
    db: &rusqlite::Connection,
    fact_plane: &PlaneDef,
    fact_key: &str,
    dim: &str,
    dim_key: &str,
) -> Result<(PlaneDef, PlaneDef), String> {
    let sql_err = |e: rusqlite::Error| format!("pleroma_limb: {e}");
    let fact_cols = table_columns(db, &fact_plane.table).map_err(sql_err)?;
    let fk = fact_cols
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(fact_key))
        .ok_or_else(|| {
            format!(
                "pleroma_limb: no such column: {}.{fact_key}",
                fact_plane.table
            )
        })?;
    let dim_name = canonical_table(db, dim)
        .map_err(sql_err)?
        .ok_or_else(|| format!("pleroma_limb: no such table: {dim}"))?;
    let dim_cols = table_columns(db, &dim_name).map_err(sql_err)?;
    if dim_cols.iter().any(|c| c.hidden == 2 || c.hidden == 3) {
        return Err(format!("pleroma_limb: table {dim_name} has generated columns, which the change hook cannot read"));
    }
    let dk = dim_cols
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(dim_key))
        .ok_or_else(|| format!("pleroma_limb: no such column: {dim_name}.{dim_key}"))?;
    let limb = LimbDef {
        fact: fact_plane.table.clone(),
        fact_key: fk.name.clone(),
        dim: dim_name.clone(),
        dim_key: dk.name.clone(),
    };
    let mut fact_dims = vec![fk.name.clone()];
    fact_dims.extend(fact_plane.dims.iter().filter(|d| **d != fk.name).cloned());
    let fact_side = PlaneDef {
        table: fact_plane.table.clone(),
        dims: fact_dims,
        measures: fact_plane.measures.clone(),
        cap: LIMB_CAP,
        role: Role::LimbFact(limb.clone()),
    };
    let mut dim_measures = Vec::new();
    for c in dim_cols
        .iter()
        .filter(|c| c.name != dk.name && c.aff == Affinity::Integer)
    {
        let sql = format!(
            "SELECT count(*) FROM main.{} WHERE typeof({}) NOT IN ('integer', 'null')",
            quote(&dim_name),
            quote(&c.name)
        );
        if db
            .query_row(&sql, [], |r| r.get::<_, i64>(0))
            .map_err(sql_err)?
            == 0
        {
            dim_measures.push(c.name.clone());
        }
    }
    let dim_side = PlaneDef {
        table: dim_name,
        dims: vec![dk.name.clone()],
        measures: dim_measures,
        cap: LIMB_CAP,
        role: Role::LimbDim(limb),
    };
    Ok((fact_side, dim_side))
}

/// Record a limb in the catalog.
pub(crate) fn store_limb(db: &rusqlite::Connection, l: &LimbDef) -> rusqlite::Result<()> {
    crate::user_counters::schema_statement(db, &format!(
        "CREATE TABLE IF NOT EXISTS main.{LIMBS}(fact TEXT, fact_key TEXT, dim TEXT NOT NULL, dim_key TEXT NOT NULL, \
         PRIMARY KEY(fact, fact_key))"
    ))?;
    db.execute(
        &format!("INSERT OR REPLACE INTO main.{LIMBS}(fact, fact_key, dim, dim_key) VALUES (?1, ?2, ?3, ?4)"),
        [&l.fact, &l.fact_key, &l.dim, &l.dim_key],
    )?;
    Ok(())
}

/// The limbs recorded in the database.
pub(crate) fn load_limbs(db: &rusqlite::Connection) -> rusqlite::Result<Vec<LimbDef>> {
    if canonical_table(db, LIMBS)?.is_none() {
        return Ok(Vec::new());
    }
    let mut stmt = db.prepare(&format!(
        "SELECT fact, fact_key, dim, dim_key FROM main.{LIMBS} ORDER BY fact, fact_key"
    ))?;
    let rows = stmt.query_map([], |r| {
        Ok(LimbDef {
            fact: r.get(0)?,
            fact_key: r.get(1)?,
            dim: r.get(2)?,
            dim_key: r.get(3)?,
        })
    })?;
    rows.collect()
}

/// Forget the limbs of a fact table.
pub(crate) fn remove_limbs(db: &rusqlite::Connection, fact: &str) -> rusqlite::Result<()> {
    if canonical_table(db, LIMBS)?.is_some() {
        db.execute(&format!("DELETE FROM main.{LIMBS} WHERE fact = ?1"), [fact])?;
    }
    Ok(())
}

pub(crate) fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// Resolve columns and build the plane from the table's rows. Problems
/// (a missing column, a REAL in a dimension, a dimension over its cap) come
/// back as an out-of-service entry with the reason.
pub(crate) fn build_entry(db: &rusqlite::Connection, def: PlaneDef) -> PlaneEntry {
    let mut config = PlaneConfig::new(def.dims.clone(), def.measures.clone());
    config.cap = def.cap;
    let mut entry = PlaneEntry {
        cols: Arc::default(),
        plane: Plane::new(config),
        broken: None,
        stats: EntryStats::default(),
        def,
    };
    if let Err(reason) = resolve_columns(db, &mut entry) {
        entry.broken = Some(reason);
        return entry;
    }
    if let Err(e) = fill(db, &mut entry) {
        entry.broken = Some(format!("rebuild failed: {e}"));
    }
    entry
}

/// Find each column's index and affinity; fails if the table or a column
/// has gone, or if a temp table shadows the table.
pub(crate) fn resolve_columns(
    db: &rusqlite::Connection,
    entry: &mut PlaneEntry,
) -> Result<(), String> {
    // SQLite compares text by the bytes of the file's encoding (BINARY
    // memcmp()s UTF-16 code units there); a plane orders and compares
    // UTF-8 bytes, which differ from UTF-16 order past U+FFFF and between
    // U+0100 and the ASCII letters in UTF-16le.
    let encoding: String = db
        .query_row("PRAGMA main.encoding", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if encoding != "UTF-8" {
        return Err(format!(
            "the database's text encoding is {encoding}: SQLite compares its text in {encoding}, a plane in UTF-8"
        ));
    }
    let t = &entry.def.table;
    let shadow: bool = db
        .query_row("SELECT count(*) FROM temp.sqlite_master WHERE type IN ('table','view') AND name = ?1 COLLATE NOCASE", [t], |r| r.get::<_, i64>(0))
        .map(|n| n > 0)
        .unwrap_or(false);
    if shadow {
        return Err(format!("a temp table {t} shadows main.{t}"));
    }
    let cols = table_columns(db, t).map_err(|e| e.to_string())?;
    if cols.is_empty() {
        return Err(format!("table {t} no longer exists"));
    }
    if cols.iter().any(|c| c.hidden == 2 || c.hidden == 3) {
        return Err(format!("table {t} has generated columns"));
    }
    let idx = |name: &str| -> Result<i32, String> {
        cols.iter()
            .position(|c| c.name == name)
            .map(|i| i as i32)
            .ok_or_else(|| format!("column {t}.{name} no longer exists"))
    };
    let dim_cols: Vec<i32> = entry
        .def
        .dims
        .iter()
        .map(|d| idx(d))
        .collect::<Result<_, _>>()?;
    let meas_cols = entry
        .def
        .measures
        .iter()
        .map(|m| idx(m))
        .collect::<Result<_, _>>()?;
    let dim_aff: Vec<Affinity> = dim_cols.iter().map(|&i| cols[i as usize].aff).collect();
    if dim_aff.contains(&Affinity::Real) {
        return Err("a dimension now has REAL affinity".into());
    }
    // Dimensions (and so limb keys) compare by BINARY only: the plane's
    // dictionary tells values apart byte for byte.
    if let Some(c) = dim_cols.iter().map(|&i| &cols[i as usize]).find(|c| {
        !c.coll.eq_ignore_ascii_case("BINARY")
            && !crate::mutation::active(Mutation::CollationIgnored)
    }) {
        return Err(format!(
            "column {t}.{} has collation {}; only BINARY is supported",
            c.name, c.coll
        ));
    }
    entry.cols = Arc::new(ColumnMap {
        dim_cols,
        meas_cols,
        dim_aff,
        columns: cols.into_iter().map(|c| c.name).collect(),
    });
    Ok(())
}

/// Below this many rows a single scan is as fast as starting readers.
const PARALLEL_MIN_ROWS: i64 = 200_000;

/// Scan the table into an empty plane: in parallel over rowid ranges with
/// read-only connections when the database is a file and the table is big
/// (every reader sees committed data only, so this runs outside
/// transactions — attach and rebuild are refused inside one, and an external
/// rebuild inside a transaction scans on this connection instead).
fn fill(db: &rusqlite::Connection, entry: &mut PlaneEntry) -> rusqlite::Result<()> {
    if let Some(plane) = fill_parallel(db, entry)? {
        entry.plane = plane;
        return Ok(());
    }
    let nd = entry.def.dims.len();
    let sql = scan_sql(&entry.def, None);
    let mut stmt = db.prepare(&sql)?;
    scan_rows(
        &mut stmt,
        [],
        &mut entry.plane,
        nd,
        entry.def.measures.len(),
        &entry.def,
    )
}

fn scan_sql(def: &PlaneDef, range: Option<()>) -> String {
    let list: Vec<String> = def
        .dims
        .iter()
        .chain(&def.measures)
        .map(|c| quote(c))
        .collect();
    let cols = if list.is_empty() {
        "1".to_owned()
    } else {
        list.join(", ")
    };
    let filter = if range.is_some() {
        " WHERE rowid BETWEEN ?1 AND ?2"
    } else {
        ""
    };
    format!("SELECT {cols} FROM main.{}{filter}", quote(&def.table))
}

fn scan_rows(
    stmt: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    plane: &mut Plane,
    nd: usize,
    nm: usize,
    def: &PlaneDef,
) -> rusqlite::Result<()> {
    let mut rows = stmt.query(params)?;
    while let Some(row) = rows.next()? {
        if let Err((k, what)) = apply_row(plane, 1, nd, nm, |k| row.get_ref(k)) {
            let name = if k < nd {
                &def.dims[k]
            } else {
                &def.measures[k - nd]
            };
            plane.set_fault(format!("column {name} holds {what}"));
        }
        if plane.fault().is_some() {
            break;
        }
    }
    Ok(())
}

fn fill_parallel(db: &rusqlite::Connection, entry: &PlaneEntry) -> rusqlite::Result<Option<Plane>> {
    let path = match db.path() {
        Some(p) if !p.is_empty() && db.is_autocommit() => p.to_owned(),
        _ => return Ok(None),
    };
    let range = format!(
        "SELECT min(rowid), max(rowid) FROM main.{}",
        quote(&entry.def.table)
    );
    // WITHOUT ROWID tables have no rowid to split on.
    // min and max of the rowid read the b-tree's two ends; their span
    // stands in for the row count (a count(*) would be a scan).
    let Ok((lo, hi)) = db.query_row(&range, [], |r| {
        Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?))
    }) else {
        return Ok(None);
    };
    let (Some(lo), Some(hi)) = (lo, hi) else {
        return Ok(None);
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8) as i64;
    if (hi as i128 - lo as i128) < PARALLEL_MIN_ROWS as i128 || threads < 2 {
        return Ok(None);
    }
    let span = (hi as i128 - lo as i128 + 1) as f64 / threads as f64;
    let bounds: Vec<(i64, i64)> = (0..threads)
        .map(|i| {
            let a = lo as i128 + (span * i as f64) as i128;
            let b = if i + 1 == threads {
                hi as i128
            } else {
                lo as i128 + (span * (i + 1) as f64) as i128 - 1
            };
            (a as i64, b as i64)
        })
        .collect();
    let def = &entry.def;
    let config = entry.plane.config().clone();
    let parts: Vec<rusqlite::Result<Plane>> = std::thread::scope(|s| {
        let handles: Vec<_> = bounds
            .iter()
            .map(|&(a, b)| {
                let (path, config) = (&path, config.clone());
                s.spawn(move || -> rusqlite::Result<Plane> {
                    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
                    let reader = rusqlite::Connection::open_with_flags(path, flags)?;
                    let mut plane = Plane::new(config);
                    let mut stmt = reader.prepare(&scan_sql(def, Some(())))?;
                    scan_rows(
                        &mut stmt,
                        [a, b],
                        &mut plane,
                        def.dims.len(),
                        def.measures.len(),
                        def,
                    )?;
                    Ok(plane)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("plane build thread panicked"))
            .collect()
    });
    let mut planes = parts
        .into_iter()
        .collect::<rusqlite::Result<Vec<_>>>()?
        .into_iter();
    let mut plane = planes.next().expect("at least two ranges");
    for p in planes {
        // A merge that fails (a cap crossed, a fault) faults `plane` itself.
        let _ = plane.merge(&p);
    }
    Ok(Some(plane))
}

/// A row applied to a plane: its cell and measure values, enough to take it
/// back out while the layout stands.
pub(crate) struct Applied {
    pub key: JointKey,
    pub meas: SmallVec<[MeasureValue; 8]>,
}

/// Read one row image (dimensions at positions `0..nd`, then measures) and
/// apply it with `weight`. `Err((position, what))` names a value the plane
/// cannot hold; the caller faults the plane with it. `Ok(None)`: the plane
/// faulted itself (a cap crossed) and says why.
pub(crate) fn apply_row<'a>(
    plane: &mut Plane,
    weight: i64,
    nd: usize,
    nm: usize,
    get: impl Fn(usize) -> rusqlite::Result<ValueRef<'a>>,
) -> Result<Option<Applied>, (usize, String)> {
    // Inline buffers: nothing is allocated for a value the plane knows.
    let mut dims: SmallVec<[DimRef<'a>; 8]> = SmallVec::new();
    let mut meas: SmallVec<[MeasureValue; 8]> = SmallVec::new();
    for k in 0..nd {
        dims.push(match get(k) {
            Ok(ValueRef::Null) => DimRef::Null,
            Ok(ValueRef::Integer(i)) => DimRef::Int(i),
            Ok(ValueRef::Text(t)) => match std::str::from_utf8(t) {
                Ok(s) => DimRef::Text(s),
                Err(_) => return Err((k, "text that is not UTF-8".into())),
            },
            Ok(ValueRef::Real(_)) => {
                return Err((
                    k,
                    "a REAL value (dimensions hold INTEGER, TEXT or NULL)".into(),
                ))
            }
            Ok(ValueRef::Blob(_)) => {
                return Err((
                    k,
                    "a BLOB value (dimensions hold INTEGER, TEXT or NULL)".into(),
                ))
            }
            Err(e) => return Err((k, format!("an unreadable value ({e})"))),
        });
    }
    for k in nd..nd + nm {
        meas.push(match get(k) {
            Ok(ValueRef::Null) => MeasureValue::Null,
            Ok(ValueRef::Integer(i)) => MeasureValue::Int(i),
            Ok(_) => MeasureValue::Other,
            Err(e) => return Err((k, format!("an unreadable value ({e})"))),
        });
    }
    let Ok(key) = plane.encode_ref(&dims) else {
        return Ok(None);
    };
    Ok(plane
        .apply_encoded(key, weight, &meas)
        .ok()
        .map(|()| Applied { key, meas }))
}

/// Record a definition in the catalog table.
pub(crate) fn store(db: &rusqlite::Connection, def: &PlaneDef) -> rusqlite::Result<()> {
    crate::user_counters::schema_statement(db, &format!(
        "CREATE TABLE IF NOT EXISTS main.{CATALOG}(tbl TEXT PRIMARY KEY, dims TEXT NOT NULL, measures TEXT NOT NULL)"
    ))?;
    db.execute(
        &format!("INSERT OR REPLACE INTO main.{CATALOG}(tbl, dims, measures) VALUES (?1, ?2, ?3)"),
        [&def.table, &def.dims.join(","), &def.measures.join(",")],
    )?;
    Ok(())
}

pub(crate) fn remove(db: &rusqlite::Connection, table: &str) -> rusqlite::Result<()> {
    db.execute(
        &format!("DELETE FROM main.{CATALOG} WHERE tbl = ?1"),
        [table],
    )?;
    Ok(())
}

/// The definitions recorded in the database.
pub(crate) fn load(db: &rusqlite::Connection) -> rusqlite::Result<Vec<PlaneDef>> {
    if canonical_table(db, CATALOG)?.is_none() {
        return Ok(Vec::new());
    }
    let mut stmt = db.prepare(&format!(
        "SELECT tbl, dims, measures FROM main.{CATALOG} ORDER BY tbl"
    ))?;
    let split = |s: String| {
        s.split(',')
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let rows = stmt.query_map([], |r| {
        Ok(PlaneDef::plane(
            r.get(0)?,
            split(r.get(1)?),
            split(r.get(2)?),
        ))
    })?;
    rows.collect()
}

/// Why a plane was rebuilt from its table (shown by `pleroma_planes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rebuild {
    /// Another connection or process committed (`data_version` moved).
    External,
    /// A statement failed inside a transaction that goes on: no hook says
    /// how much SQLite kept.
    FailedStatement,
    /// An autocommit statement's undo log could not take it back.
    Undo,
    /// A savepoint or transaction was undone after an external rebuild.
    StaleSnapshot,
    /// `PRAGMA pleroma_rebuild`.
    Requested,
    /// Opened with no persisted state for the plane (attached by an older
    /// version, or the state was removed).
    Unpersisted,
    /// The persisted state failed its checksum or does not read as one.
    PersistCorrupt,
    /// A row of the persisted log is missing.
    PersistGap,
    /// The schema changed since the last persisted commit, outside Pleroma.
    SchemaOutside,
    /// A plane's write guard (its partial index) is missing.
    GuardMissing,
    /// The table was emptied outside Pleroma (`DELETE` without `WHERE`).
    EmptiedOutside,
    /// A write passed a guard without Pleroma: a stand-in for its function
    /// left rows in the guard index.
    GuardBypassed,
    /// Another commit landed between this transaction's last sync and its
    /// first write.
    StaleBase,
}

impl Rebuild {
    pub fn reason(self) -> &'static str {
        match self {
            Rebuild::External => "another connection or process committed",
            Rebuild::FailedStatement => "a statement failed inside a transaction",
            Rebuild::Undo => "a failed statement could not be undone from its log",
            Rebuild::StaleSnapshot => "a rollback to a state older than an external commit",
            Rebuild::Requested => "PRAGMA pleroma_rebuild",
            Rebuild::Unpersisted => "no persisted state to open from",
            Rebuild::PersistCorrupt => "the persisted state failed its checksum",
            Rebuild::PersistGap => "the persisted log has a gap",
            Rebuild::SchemaOutside => "the schema changed outside Pleroma",
            Rebuild::GuardMissing => "the plane's write guard is missing",
            Rebuild::EmptiedOutside => "the table was emptied outside Pleroma",
            Rebuild::GuardBypassed => {
                "a write passed the plane's guard outside Pleroma (its index is not empty)"
            }
            Rebuild::StaleBase => "a commit landed before this transaction's first write",
        }
    }
}

/// Schema names other than `main` that are the same file as `main`.
pub(crate) fn main_aliases(db: &rusqlite::Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = db.prepare("SELECT name, file FROM pragma_database_list")?;
    let rows: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let main = rows
        .iter()
        .find(|(n, _)| n == "main")
        .map(|(_, f)| f.clone())
        .unwrap_or_default();
    if main.is_empty() {
        return Ok(Vec::new());
    }
    // The same file by any path (a hard link included): the same device
    // and inode.
    let ident = |f: &str| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(f).ok().map(|m| (m.dev(), m.ino()))
    };
    let main_c = ident(&main);
    Ok(rows
        .into_iter()
        .filter(|(n, f)| {
            n != "main" && !f.is_empty() && (f == &main || (main_c.is_some() && ident(f) == main_c))
        })
        .map(|(n, _)| n)
        .collect())
}

/// The planes and limbs recorded in the catalog, built from their tables.
pub(crate) fn load_entries(db: &rusqlite::Connection) -> rusqlite::Result<Vec<PlaneEntry>> {
    Ok(load_defs(db)?
        .into_iter()
        .map(|d| build_entry(db, d))
        .collect())
}

/// Every plane and limb side the catalog lists, in the order connections
/// keep them: the planes by table, then both sides of each limb.
pub(crate) fn load_defs(db: &rusqlite::Connection) -> rusqlite::Result<Vec<PlaneDef>> {
    let defs = load(db)?;
    let mut out = defs.clone();
    for l in load_limbs(db)? {
        let Some(fact) = defs.iter().find(|d| d.table == l.fact) else {
            continue;
        };
        // A limb whose tables or columns went away stays out of the way:
        // its joins run on SQLite.
        if let Ok((f, d)) = limb_defs(db, fact, &l.fact_key, &l.dim, &l.dim_key) {
            out.push(f);
            out.push(d);
        }
    }
    Ok(out)
}
