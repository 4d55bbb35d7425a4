//! Building a plane from its table: the columns resolved against the
//! table's current schema, the full scan (in parallel ranges for a large
//! table), and one row applied to the cells (also the hook's path).

use super::*;

/// Resolve columns and build the plane from the table's rows. Problems
/// (a missing column, a REAL in a dimension, a dimension over its cap) come
/// back as an out-of-service entry with the reason.
pub(crate) fn build_entry(db: &rusqlite::Connection, def: impl Into<Arc<PlaneDef>>) -> PlaneEntry {
    let mut entry = match empty_entry(db, def.into()) {
        Ok(e) => e,
        Err(broken) => return broken,
    };
    if let Err(e) = fill(db, &mut entry) {
        entry.broken = Some(format!("rebuild failed: {e}"));
    }
    within_bound(&mut entry.plane);
    entry
}

/// `def`'s plane with no row yet, its columns found in the table; `Err`:
/// the entry out of service, with the reason.
fn empty_entry(db: &rusqlite::Connection, def: Arc<PlaneDef>) -> Result<PlaneEntry, PlaneEntry> {
    let mut config = PlaneConfig::new(def.dims.clone(), def.measures.clone());
    config.cap = def.cap;
    let mut entry = PlaneEntry {
        cols: Arc::default(),
        plane: Plane::new(config),
        broken: None,
        stats: EntryStats::default(),
        def,
    };
    match resolve_columns(db, &mut entry) {
        Ok(()) => Ok(entry),
        Err(reason) => {
            entry.broken = Some(reason);
            Err(entry)
        }
    }
}

/// `def`'s plane over the rows of `from` (a sample of its table, as SQL
/// after `FROM`), for `PRAGMA pleroma_advise`.
pub(crate) fn sample_entry(db: &rusqlite::Connection, def: PlaneDef, from: &str) -> PlaneEntry {
    let mut entry = match empty_entry(db, Arc::new(def)) {
        Ok(e) => e,
        Err(broken) => return broken,
    };
    let full = scan_sql(&entry.def, None);
    let table_from = format!(" FROM main.{}", quote(&entry.def.table));
    let sql = match full.strip_suffix(&table_from) {
        Some(head) => format!("{head} FROM {from}"),
        None => full,
    };
    let (nd, nm) = (entry.def.dims.len(), entry.def.measures.len());
    let def = entry.def.clone();
    let r = db
        .prepare(&sql)
        .and_then(|mut stmt| scan_rows(&mut stmt, [], &mut entry.plane, nd, nm, &def));
    if let Err(e) = r {
        entry.broken = Some(format!("sample failed: {e}"));
    }
    within_bound(&mut entry.plane);
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
    let def = &entry.def;
    let mut dim_cols: Vec<i32> = Vec::with_capacity(def.dims.len());
    let mut exprs: Vec<&expr::DimExpr> = Vec::new();
    for (k, d) in def.dims.iter().enumerate() {
        match &def.exprs[k] {
            None => dim_cols.push(idx(d)?),
            Some(e) => {
                let names: Vec<String> = cols.iter().map(|c| c.name.clone()).collect();
                if names_a_column(&names, d) {
                    return Err(format!(
                        "expression dimension {d} is now also a column of {t}; attach it again under another name"
                    ));
                }
                for i in &e.inputs {
                    idx(i)?;
                }
                if let Err(err) =
                    db.prepare(&format!("SELECT {} FROM main.{} LIMIT 0", e.sql, quote(t)))
                {
                    return Err(format!("expression dimension {d} ({}): {err}", e.sql));
                }
                dim_cols.push(-1 - exprs.len() as i32);
                exprs.push(e);
            }
        }
    }
    let meas_cols = entry
        .def
        .measures
        .iter()
        .map(|m| idx(m))
        .collect::<Result<_, _>>()?;
    // An expression's value has no affinity (its top is no column, CAST
    // or unary +, which attach checked).
    let dim_aff: Vec<Affinity> = dim_cols
        .iter()
        .map(|&i| {
            if i < 0 {
                Affinity::Blob
            } else {
                cols[i as usize].aff
            }
        })
        .collect();
    if dim_aff.contains(&Affinity::Real) {
        return Err("a dimension now has REAL affinity".into());
    }
    // Dimensions (and so limb keys) compare by BINARY only: the plane's
    // dictionary tells values apart byte for byte.
    if let Some(c) = dim_cols
        .iter()
        .filter(|&&i| i >= 0)
        .map(|&i| &cols[i as usize])
        .find(|c| {
            !c.coll.eq_ignore_ascii_case("BINARY")
                && !crate::mutation::active(Mutation::CollationIgnored)
        })
    {
        return Err(format!(
            "column {t}.{} has collation {}; only BINARY is supported",
            c.name, c.coll
        ));
    }
    let (expr_inputs, eval) = if exprs.is_empty() {
        (Vec::new(), None)
    } else {
        let eval_cols: Vec<expr::EvalColumn> = cols
            .iter()
            .map(|c| expr::EvalColumn {
                name: c.name.clone(),
                aff: c.aff,
                coll: c.coll.clone(),
            })
            .collect();
        let ev = expr::Evaluator::new(&eval_cols, &exprs)
            .map_err(|e| format!("the expression dimensions' evaluator: {e}"))?;
        (
            ev.inputs().to_vec(),
            Some(Arc::new(std::sync::Mutex::new(ev))),
        )
    };
    entry.cols = Arc::new(ColumnMap {
        dim_cols,
        meas_cols,
        dim_aff,
        col_aff: cols.iter().map(|c| c.aff).collect(),
        strict: db
            .query_row(
                "SELECT strict FROM pragma_table_list WHERE schema = 'main' AND name = ?1",
                [t],
                |r| r.get::<_, i64>(0),
            )
            .is_ok_and(|s| s != 0),
        columns: cols.into_iter().map(|c| c.name).collect(),
        expr_inputs,
        eval,
    });
    Ok(())
}

/// Below this many rows a single scan is as fast as starting readers.
pub(super) const PARALLEL_MIN_ROWS: i64 = 200_000;

/// Scan the table into an empty plane: in parallel over rowid ranges with
/// read-only connections when the database is a file and the table is big
/// (every reader sees committed data only, so this runs outside
/// transactions — attach and rebuild are refused inside one, and an external
/// rebuild inside a transaction scans on this connection instead).
pub(super) fn fill(db: &rusqlite::Connection, entry: &mut PlaneEntry) -> rusqlite::Result<()> {
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

pub(super) fn scan_sql(def: &PlaneDef, range: Option<()>) -> String {
    let list: Vec<String> = (0..def.dims.len())
        .map(|k| def.dim_sql(k))
        .chain(def.measures.iter().map(|c| quote(c)))
        .chain(def.clock_inputs().into_iter().map(quote))
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

pub(super) fn scan_rows(
    stmt: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    plane: &mut Plane,
    nd: usize,
    nm: usize,
    def: &PlaneDef,
) -> rusqlite::Result<()> {
    let clock = def.clock_inputs();
    let mut rows = stmt.query(params)?;
    while let Some(row) = rows.next()? {
        for (i, c) in clock.iter().enumerate() {
            if expr::reads_the_clock(row.get_ref(nd + nm + i)?) {
                plane.set_fault(format!(
                    "column {c} holds a TEXT value that a date function of an expression dimension \
                     may read as the clock or the time zone"
                ));
            }
        }
        if plane.fault().is_some() {
            break;
        }
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

pub(super) fn fill_parallel(
    db: &rusqlite::Connection,
    entry: &PlaneEntry,
) -> rusqlite::Result<Option<Plane>> {
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
    if plane.apply_encoded(key, weight, &meas).is_err() {
        return Ok(None);
    }
    if !within_bound(plane) {
        return Ok(None);
    }
    Ok(Some(Applied { key, meas }))
}

/// Most occupied cells a plane holds (about 1 GB at the 239 bytes a cell of
/// a sparse plane with 3 measures takes: `docs/design.md`); past it the
/// plane goes out of service, and an attach that would pass it is refused.
pub(crate) const MAX_CELLS: usize = 1 << 22;

/// `false`, with the plane faulted, when it holds more than [`MAX_CELLS`].
pub(crate) fn within_bound(plane: &mut Plane) -> bool {
    if plane.cells() <= MAX_CELLS {
        return true;
    }
    plane.set_fault(format!(
        "the plane holds more than {MAX_CELLS} occupied cells, its memory bound; \
         attach one with fewer or smaller dimensions"
    ));
    false
}
