//! The `duckdb` arm: DuckDB from its PyPI wheel (`pip install duckdb`), driven
//! as a Python subprocess running `benches/duckdb_arm.py` (embedded here).
//!
//! The harness exports the workload's tables from the same SQLite file to
//! CSV (cached beside the database), the script loads them into an in-memory
//! DuckDB and times each query in-process (first call, two loops), returning
//! the rows for the answer check. Python is `$PLEROMA_PYTHON`, else `python3`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use rusqlite::types::{Value, ValueRef};
use serde::Deserialize;
use serde_json::json;

use crate::workload::{Options, Workload};

const SCRIPT: &str = include_str!("../duckdb_arm.py");

#[derive(Deserialize)]
pub struct DuckQuery {
    pub first_ms: f64,
    pub loop1_ms: Vec<f64>,
    pub loop2_ms: Vec<f64>,
    #[serde(deserialize_with = "rows_of_values")]
    pub rows: Vec<Vec<Value>>,
    pub error: Option<String>,
}

#[derive(Deserialize)]
pub struct DuckRun {
    pub version: String,
    pub load_ms: f64,
    pub queries: Vec<DuckQuery>,
}

fn rows_of_values<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Vec<Value>>, D::Error> {
    let raw: Vec<Vec<serde_json::Value>> = Deserialize::deserialize(d)?;
    Ok(raw
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|v| match v {
                    serde_json::Value::Null => Value::Null,
                    serde_json::Value::Bool(b) => Value::Integer(b as i64),
                    serde_json::Value::Number(n) => match n.as_i64() {
                        Some(i) => Value::Integer(i),
                        None => Value::Real(n.as_f64().unwrap_or(f64::NAN)),
                    },
                    serde_json::Value::String(s) => Value::Text(s),
                    other => Value::Text(other.to_string()),
                })
                .collect()
        })
        .collect())
}

/// DuckDB's type for a SQLite declared type.
fn duck_type(decl: &str) -> &'static str {
    let d = decl.to_ascii_uppercase();
    if d.contains("INT") {
        "BIGINT"
    } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
        "DOUBLE"
    } else {
        "VARCHAR"
    }
}

fn csv_field(out: &mut impl Write, v: ValueRef<'_>) -> std::io::Result<()> {
    match v {
        ValueRef::Null => Ok(()),
        ValueRef::Integer(i) => write!(out, "{i}"),
        ValueRef::Real(r) => write!(out, "{r:?}"),
        ValueRef::Text(t) => {
            let s = String::from_utf8_lossy(t);
            write!(out, "\"{}\"", s.replace('"', "\"\""))
        }
        ValueRef::Blob(b) => write!(
            out,
            "\"{}\"",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
    }
}

/// Export `table` to `dir/table.csv` (once; cached with the database).
fn export(
    db: &rusqlite::Connection,
    table: &str,
    dir: &Path,
    db_path: &Path,
) -> Result<(PathBuf, Vec<(String, String)>)> {
    let mut cols = Vec::new();
    {
        let mut stmt = db.prepare("SELECT name, type FROM pragma_table_info(?1)")?;
        let mut rows = stmt.query([table])?;
        while let Some(r) = rows.next()? {
            let name: String = r.get(0)?;
            let decl: String = r.get(1)?;
            cols.push((name, duck_type(&decl).to_owned()));
        }
    }
    let path = dir.join(format!("{table}.csv"));
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if !path.exists() || modified(&path) < modified(db_path) {
        let tmp = dir.join(format!("{table}.csv.tmp"));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        writeln!(
            out,
            "{}",
            cols.iter()
                .map(|c| c.0.as_str())
                .collect::<Vec<_>>()
                .join(",")
        )?;
        let mut stmt = db.prepare(&format!("SELECT * FROM \"{table}\""))?;
        let n = stmt.column_count();
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            for i in 0..n {
                if i > 0 {
                    out.write_all(b",")?;
                }
                csv_field(&mut out, r.get_ref(i)?)?;
            }
            out.write_all(b"\n")?;
        }
        out.flush()?;
        drop(out);
        std::fs::rename(&tmp, &path)?;
    }
    Ok((std::fs::canonicalize(&path)?, cols))
}

/// Run the workload's queries on DuckDB.
pub fn run(w: &Workload, opts: &Options) -> Result<DuckRun> {
    let dir = w.path.with_extension("csv.d");
    std::fs::create_dir_all(&dir)?;
    let db = rusqlite::Connection::open(&w.path)?;
    let mut tables = Vec::new();
    for t in &w.tables {
        let (csv, columns) = export(&db, t, &dir, &w.path)?;
        tables.push(json!({ "name": t, "csv": csv, "columns": columns }));
    }
    drop(db);
    let queries: Vec<_> = w
        .queries
        .iter()
        .map(|q| json!({ "name": q.name, "sql": q.sql }))
        .collect();
    let spec = json!({ "tables": tables, "queries": queries, "budget_ms": opts.budget_ms, "min_calls": opts.min_calls, "max_calls": opts.max_calls });
    let spec_path = dir.join("spec.json");
    std::fs::write(&spec_path, serde_json::to_vec(&spec)?)?;
    let script = dir.join("duckdb_arm.py");
    std::fs::write(&script, SCRIPT)?;
    let python = std::env::var("PLEROMA_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .arg(&script)
        .arg(&spec_path)
        .output()
        .with_context(|| {
            format!("running {python} for the duckdb arm (install: pip install duckdb)")
        })?;
    if !out.status.success() {
        bail!(
            "the duckdb arm failed (install it with `pip install duckdb`):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let run: DuckRun =
        serde_json::from_slice(&out.stdout).context("reading the duckdb arm's answer")?;
    if run.queries.len() != w.queries.len() {
        bail!(
            "the duckdb arm answered {} of {} queries",
            run.queries.len(),
            w.queries.len()
        );
    }
    Ok(run)
}
