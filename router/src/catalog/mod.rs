//! Plane definitions: validation, the catalog table in the database, and
//! building a plane from the table's rows.

use crate::mutation::Mutation;
use std::sync::Arc;

use pleroma_plane::{DimRef, JointKey, MeasureValue, Plane, PlaneConfig, Snapshot};
use rusqlite::types::ValueRef;
use smallvec::SmallVec;

use crate::affinity::Affinity;

mod build;
pub(crate) mod expr;

pub(crate) use build::*;

/// The catalog table; one row per table's own plane (the one named after
/// its table, which `pleroma_attach` with three arguments makes).
pub(crate) const CATALOG: &str = "pleroma_catalog";
/// The named planes (`pleroma_attach`'s fourth argument): one row each.
const NAMED: &str = "pleroma_catalog_named";
/// The limb catalog; one row per join limb.
const LIMBS: &str = "pleroma_limbs";

/// What `PRAGMA pleroma_attach` named, with the table's own spelling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlaneDef {
    pub table: String,
    /// A named plane's name; `None` for the table's own plane (whose name
    /// is its table's). Never equal to the table's name.
    pub name: Option<String>,
    /// Each dimension's name: a column, or an expression dimension's alias.
    pub dims: Vec<String>,
    /// Per dimension: `Some` for an expression dimension (`EXPR AS name`).
    pub exprs: Vec<Option<expr::DimExpr>>,
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

/// Most distinct values of a plane's dimension: the joint key re-packs as
/// a dimension grows, up to 16 bits each, while all of them fit 64 bits.
pub(crate) const DIM_CAP: usize = 65_536;

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
    /// Every column of the table, in order (for messages), and each one's
    /// affinity.
    pub columns: Vec<String>,
    pub col_aff: Vec<Affinity>,
    /// Whether the table is STRICT (an INTEGER column there holds only
    /// INTEGER or NULL).
    pub strict: bool,
    /// The columns that expression dimensions read, and their evaluator
    /// (an expression dimension `j` has `dim_cols` `-1 - j`).
    pub expr_inputs: Vec<i32>,
    pub eval: Option<Arc<std::sync::Mutex<expr::Evaluator>>>,
}

/// A plane attached to a table, with what the hook needs to feed it.
pub(crate) struct PlaneEntry {
    pub def: Arc<PlaneDef>,
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

/// Whether main's `table` is STRICT.
pub(crate) fn is_strict(db: &rusqlite::Connection, table: &str) -> bool {
    db.query_row(
        "SELECT strict FROM pragma_table_list WHERE schema = 'main' AND name = ?1",
        [table],
        |r| r.get::<_, i64>(0),
    )
    .is_ok_and(|s| s != 0)
}

fn table_columns(db: &rusqlite::Connection, table: &str) -> rusqlite::Result<Vec<ColumnInfo>> {
    let strict = is_strict(db, table);
    let mut stmt =
        db.prepare_cached("SELECT name, type, hidden FROM pragma_table_xinfo(?1, 'main')")?;
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
    let mut stmt = db.prepare_cached(
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
    // Litestream's tables, which the persisted state's schema fingerprint
    // leaves out (`persist::schema_hash`): a plane on one would not see its
    // table re-created from outside.
    if name.eq_ignore_ascii_case("_litestream_seq") || name.eq_ignore_ascii_case("_litestream_lock")
    {
        return Err(format!(
            "pleroma_attach: cannot attach a plane to {name}, a table of Litestream's"
        ));
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
    let eval_cols: Vec<expr::EvalColumn> = cols
        .iter()
        .filter(|c| c.hidden == 0)
        .map(|c| expr::EvalColumn {
            name: c.name.clone(),
            aff: c.aff,
            coll: c.coll.clone(),
        })
        .collect();
    let col_names: Vec<String> = eval_cols.iter().map(|c| c.name.clone()).collect();
    let mut names = Vec::new();
    let mut exprs = Vec::new();
    for d in dims {
        match expr::split_alias(d) {
            Some((sql, alias)) => {
                if names_a_column(&col_names, &alias) {
                    return Err(format!(
                        "pleroma_attach: dimension {alias} ({sql}) is named like a column of {name}; \
                         give the expression another name"
                    ));
                }
                if names
                    .iter()
                    .any(|n: &String| n.eq_ignore_ascii_case(&alias))
                {
                    return Err(format!("pleroma_attach: dimension {alias} is given twice"));
                }
                expr::check(db, &name, &alias, &sql, &eval_cols)?;
                names.push(alias);
                exprs.push(Some(expr::DimExpr::new(&sql, &col_names)));
            }
            None => {
                names.push(resolve(d, "dimension")?);
                exprs.push(None);
            }
        }
    }
    let measures = measures
        .iter()
        .map(|m| resolve(m, "measure"))
        .collect::<Result<Vec<_>, _>>()?;
    for (k, d) in names.iter().enumerate() {
        if exprs[k].is_some() {
            continue;
        }
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
    let mut def = PlaneDef::plane(name, names, measures);
    def.exprs = exprs;
    Ok(def)
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
            name: None,
            exprs: vec![None; dims.len()],
            dims,
            measures,
            cap: DIM_CAP,
            role: Role::Plane,
        }
    }

    /// The plane's name: its own, or its table's.
    pub fn plane_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.table)
    }

    /// Whether this is the plane `name` of its table (`None`: the table's
    /// own plane), names compared as SQLite compares identifiers.
    pub fn is_named(&self, name: Option<&str>) -> bool {
        match (name, &self.name) {
            (None, None) => true,
            (Some(n), Some(m)) => n.eq_ignore_ascii_case(m),
            _ => false,
        }
    }

    /// Whether dimension `k` is an expression dimension.
    pub fn is_expr(&self, k: usize) -> bool {
        self.exprs.get(k).is_some_and(Option::is_some)
    }

    /// Dimension `k` as SQL over the table: its quoted column, or its
    /// expression in parentheses.
    pub fn dim_sql(&self, k: usize) -> String {
        match self.exprs.get(k).and_then(Option::as_ref) {
            Some(e) => format!("({})", e.sql),
            None => quote(&self.dims[k]),
        }
    }

    /// Dimension `k` as `pleroma_attach` takes it (an expression's name
    /// quoted unless it is a plain word, so that it reads back the same).
    pub fn dim_text(&self, k: usize) -> String {
        match self.exprs.get(k).and_then(Option::as_ref) {
            Some(e) => {
                let n = &self.dims[k];
                let plain = n
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                let name = if plain { n.clone() } else { quote(n) };
                format!("{} AS {name}", e.sql)
            }
            None => self.dims[k].clone(),
        }
    }

    /// The columns whose TEXT values a scan checks for the clock: the
    /// inputs of expression dimensions that call a date function.
    pub fn clock_inputs(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for e in self.exprs.iter().flatten().filter(|e| e.clock) {
            for c in &e.inputs {
                if !out.contains(&c.as_str()) {
                    out.push(c);
                }
            }
        }
        out
    }

    /// The table's columns that the plane reads: each column dimension,
    /// each column an expression dimension names, each measure.
    pub fn columns_read(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for (k, d) in self.dims.iter().enumerate() {
            match &self.exprs[k] {
                Some(e) => out.extend(e.inputs.iter().map(String::as_str)),
                None => out.push(d),
            }
        }
        out.extend(self.measures.iter().map(String::as_str));
        let mut seen: Vec<&str> = Vec::new();
        out.retain(|c| {
            let new = !seen.iter().any(|s| s.eq_ignore_ascii_case(c));
            seen.push(*c);
            new
        });
        out
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
    // The limb's fact side keeps the plane's column dimensions only.
    fact_dims.extend(
        fact_plane
            .dims
            .iter()
            .enumerate()
            .filter(|(k, d)| **d != fk.name && !fact_plane.is_expr(*k))
            .map(|(_, d)| d.clone()),
    );
    let fact_side = PlaneDef {
        table: fact_plane.table.clone(),
        name: None,
        exprs: vec![None; fact_dims.len()],
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
        name: None,
        exprs: vec![None],
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
fn load_limbs_from(db: &rusqlite::Connection, has: [bool; 3]) -> rusqlite::Result<Vec<LimbDef>> {
    if !has[2] {
        return Ok(Vec::new());
    }
    let mut stmt = db.prepare_cached(&format!(
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

pub(crate) use crate::tokenize::quote;

/// Record a definition in the catalog: a table's own plane in
/// [`CATALOG`], a named one in [`NAMED`]. Ends with a one-row write.
pub(crate) fn store(db: &rusqlite::Connection, def: &PlaneDef) -> rusqlite::Result<()> {
    crate::user_counters::schema_statement(db, &format!(
        "CREATE TABLE IF NOT EXISTS main.{CATALOG}(tbl TEXT PRIMARY KEY, dims TEXT NOT NULL, measures TEXT NOT NULL)"
    ))?;
    let (dims, measures) = (dims_text(def), def.measures.join(","));
    match &def.name {
        None => db.execute(
            &format!(
                "INSERT OR REPLACE INTO main.{CATALOG}(tbl, dims, measures) VALUES (?1, ?2, ?3)"
            ),
            [&def.table, &dims, &measures],
        )?,
        Some(name) => {
            crate::user_counters::schema_statement(db, &format!(
                "CREATE TABLE IF NOT EXISTS main.{NAMED}(tbl TEXT NOT NULL, name TEXT NOT NULL COLLATE NOCASE, \
                 dims TEXT NOT NULL, measures TEXT NOT NULL, PRIMARY KEY(tbl, name))"
            ))?;
            db.execute(
                &format!("INSERT OR REPLACE INTO main.{NAMED}(tbl, name, dims, measures) VALUES (?1, ?2, ?3, ?4)"),
                [&def.table, name, &dims, &measures],
            )?
        }
    };
    Ok(())
}

/// The separator of a catalog `dims` text that holds an expression
/// dimension (whose SQL may hold commas). A version without expression
/// dimensions reads such a text as columns it cannot find, and keeps the
/// plane out of service.
const EXPR_SEP: char = '\u{1f}';

/// A definition's dimensions as the catalog stores them: the names joined
/// by commas, or with any expression dimension, each as `pleroma_attach`
/// takes it, each followed by [`EXPR_SEP`].
pub(crate) fn dims_text(def: &PlaneDef) -> String {
    if def.exprs.iter().all(Option::is_none) {
        return def.dims.join(",");
    }
    // Each item ends with the separator, so that one item alone has it.
    (0..def.dims.len())
        .map(|k| format!("{}{EXPR_SEP}", def.dim_text(k)))
        .collect()
}

/// A catalog row's definition, its expression dimensions read against the
/// table's columns now.
fn def_of_row(db: &rusqlite::Connection, table: String, dims: &str, measures: &str) -> PlaneDef {
    let split = |s: &str, sep: char| {
        s.split(sep)
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let measures = split(measures, ',');
    if !dims.contains(EXPR_SEP) {
        return PlaneDef::plane(table, split(dims, ','), measures);
    }
    let columns: Vec<String> = table_columns(db, &table)
        .map(|cs| cs.into_iter().map(|c| c.name).collect())
        .unwrap_or_default();
    let (mut names, mut exprs) = (Vec::new(), Vec::new());
    for item in split(dims, EXPR_SEP) {
        match expr::split_alias(&item) {
            Some((sql, name)) => {
                names.push(name);
                exprs.push(Some(expr::DimExpr::new(&sql, &columns)));
            }
            None => {
                names.push(item);
                exprs.push(None);
            }
        }
    }
    let mut def = PlaneDef::plane(table, names, measures);
    def.exprs = exprs;
    def
}

/// Forget one plane of `table` (`name` `None`: the table's own). Deletes
/// one row.
pub(crate) fn remove(
    db: &rusqlite::Connection,
    table: &str,
    name: Option<&str>,
) -> rusqlite::Result<()> {
    match name {
        None => db.execute(
            &format!("DELETE FROM main.{CATALOG} WHERE tbl = ?1"),
            [table],
        )?,
        Some(n) => db.execute(
            &format!("DELETE FROM main.{NAMED} WHERE tbl = ?1 AND name = ?2"),
            [table, n],
        )?,
    };
    Ok(())
}

/// Which of Pleroma's catalog tables main has: [`CATALOG`], [`NAMED`],
/// [`LIMBS`] (one look at the schema for the three; `OR`, not `IN`, whose
/// list SQLite builds into a temporary b-tree at every step).
fn catalog_tables(db: &rusqlite::Connection) -> rusqlite::Result<[bool; 3]> {
    let mut stmt = db.prepare_cached(&format!(
        "SELECT lower(name) FROM main.sqlite_master WHERE type = 'table' \
         AND (lower(name) = '{CATALOG}' OR lower(name) = '{NAMED}' OR lower(name) = '{LIMBS}')"
    ))?;
    let names: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok([CATALOG, NAMED, LIMBS].map(|t| names.iter().any(|n| n == t)))
}

/// The definitions recorded in the database: by table, each table's own
/// plane before its named ones (by name).
fn load_from(db: &rusqlite::Connection, has: [bool; 3]) -> rusqlite::Result<Vec<PlaneDef>> {
    let mut rows: Vec<(String, Option<String>, String, String)> = Vec::new();
    for (sql, there) in [
        (select_from(CATALOG, "tbl, NULL, dims, measures"), has[0]),
        (select_from(NAMED, "tbl, name, dims, measures"), has[1]),
    ] {
        if !there {
            continue;
        }
        let mut stmt = db.prepare_cached(&sql)?;
        let it = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
        rows.extend(it.collect::<rusqlite::Result<Vec<_>>>()?);
    }
    rows.sort_by(|a, b| (&a.0, a.1.is_some(), &a.1).cmp(&(&b.0, b.1.is_some(), &b.1)));
    Ok(rows
        .into_iter()
        .map(|(t, n, d, m)| {
            let mut def = def_of_row(db, t, &d, &m);
            def.name = n;
            def
        })
        .collect())
}

/// `SELECT cols FROM main.table`.
fn select_from(table: &str, cols: &str) -> String {
    format!("SELECT {cols} FROM main.{table}")
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
    let has = catalog_tables(db)?;
    let defs = load_from(db, has)?;
    let mut out = defs.clone();
    for l in load_limbs_from(db, has)? {
        // A limb is made from its fact table's own plane.
        let Some(fact) = defs.iter().find(|d| d.table == l.fact && d.name.is_none()) else {
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

/// Whether `name` is a column of a table with `columns`: one of them, or
/// the rowid (`rowid`, `oid`, `_rowid_`), which a column of that name
/// hides. A WITHOUT ROWID table has no rowid; taking one for it only
/// declines more.
pub(crate) fn names_a_column(columns: &[String], name: &str) -> bool {
    columns.iter().any(|c| c.eq_ignore_ascii_case(name))
        || ["rowid", "oid", "_rowid_"]
            .iter()
            .any(|r| r.eq_ignore_ascii_case(name))
}
