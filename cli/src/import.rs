//! `pleroma import`: a CSV or Parquet file into a table, in one transaction
//! through the Pleroma connection, so that any plane on the table is kept
//! exact row by row; a bad row rolls everything back.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_cast::cast::{cast_with_options, CastOptions};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_csv::reader::Format;
use arrow_schema::{DataType, Field, Schema};
use indicatif::{ProgressBar, ProgressStyle};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use pleroma::{Appender, Connection, Value};

const BATCH: usize = 8192;

pub(crate) fn run(path: &Path, table: &str, file: &Path) -> Result<()> {
    File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut conn =
        Connection::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let start = Instant::now();
    let n = load(&mut conn, table, file)?;
    println!(
        "imported {n} rows into {table} in {:.2} s",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Load `file` into `table` in one transaction on `conn`; on any error
/// nothing is loaded. Returns the rows loaded.
pub(crate) fn load(conn: &mut Connection, table: &str, file: &Path) -> Result<u64> {
    let ext = file
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let parquet = match ext.as_str() {
        "csv" => false,
        "parquet" | "pq" => true,
        _ => bail!("{}: expected a .csv or .parquet file", file.display()),
    };
    File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
    // The write lock first: the appender then feeds the planes from the
    // values (`Connection::appender`). Inside the connection's open
    // transaction (the shell's `.import` after a `BEGIN`): a savepoint of it.
    let inside = !conn.sqlite().is_autocommit();
    if inside {
        conn.savepoint(SAVEPOINT)?;
    } else {
        conn.execute("BEGIN IMMEDIATE", &[])?;
    }
    let loaded = if parquet {
        load_parquet(conn, table, file)
    } else {
        load_csv(conn, table, file)
    };
    let end = |conn: &mut Connection| {
        if inside {
            conn.release(SAVEPOINT)
        } else {
            conn.commit()
        }
    };
    match loaded.and_then(|n| end(conn).map(|()| n).map_err(Into::into)) {
        Ok(n) => Ok(n),
        Err(e) => {
            // The rollback also undoes a CREATE TABLE made for this import.
            if !conn.sqlite().is_autocommit() {
                if inside {
                    conn.rollback_to(SAVEPOINT)
                        .and_then(|()| conn.release(SAVEPOINT))
                        .context("rolling back the import")?;
                } else {
                    conn.rollback().context("rolling back the import")?;
                }
            }
            Err(e.context(format!("import into {table} failed; nothing was loaded")))
        }
    }
}

const SAVEPOINT: &str = "pleroma_import";

/// What a CSV field becomes, by the target column's type affinity.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Integer,
    Real,
    Text,
    /// NUMERIC or no type: an integer or a number if it reads as one, else text.
    Any,
}

impl Kind {
    /// SQLite's rules for a declared type's affinity.
    fn of_declared(decl: &str) -> Kind {
        let d = decl.to_ascii_uppercase();
        if d.contains("INT") {
            Kind::Integer
        } else if d.contains("CHAR") || d.contains("CLOB") || d.contains("TEXT") {
            Kind::Text
        } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
            Kind::Real
        } else {
            Kind::Any
        }
    }

    fn of_arrow(t: &DataType) -> Kind {
        if t.is_integer() || *t == DataType::Boolean {
            Kind::Integer
        } else if t.is_floating() {
            Kind::Real
        } else {
            Kind::Text
        }
    }

    fn sql_type(self) -> &'static str {
        match self {
            Kind::Integer => "INTEGER",
            Kind::Real => "REAL",
            Kind::Text | Kind::Any => "TEXT",
        }
    }

    fn parse(self, s: &str) -> Result<Value, String> {
        // The blanks SQLite itself skips around a number: ASCII only.
        let t = s.trim_matches(|c: char| c.is_ascii_whitespace());
        // `NaN` and `inf` read as floats in Rust, not in SQLite (a NaN
        // bound as REAL would be stored as NULL).
        let finite = |t: &str| t.parse::<f64>().ok().filter(|r| r.is_finite());
        match self {
            Kind::Text => Ok(Value::Text(s.to_owned())),
            Kind::Integer => t
                .parse()
                .map(Value::Integer)
                .or_else(|_| bool_int(t).ok_or_else(|| format!("'{s}' is not an integer"))),
            Kind::Real => finite(t)
                .map(Value::Real)
                .ok_or_else(|| format!("'{s}' is not a number")),
            Kind::Any => Ok(t
                .parse()
                .map(Value::Integer)
                .ok()
                .or_else(|| finite(t).map(Value::Real))
                .unwrap_or_else(|| Value::Text(s.to_owned()))),
        }
    }
}

/// Arrow infers `true`/`false` as booleans; SQLite stores them as 1/0.
fn bool_int(s: &str) -> Option<Value> {
    if s.eq_ignore_ascii_case("true") {
        Some(Value::Integer(1))
    } else if s.eq_ignore_ascii_case("false") {
        Some(Value::Integer(0))
    } else {
        None
    }
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// The table's columns and declared types; empty if there is no such table.
fn table_columns(conn: &Connection, table: &str) -> Result<Vec<(String, String)>> {
    let mut stmt = conn
        .sqlite()
        .prepare("SELECT name, type FROM pragma_table_info(?1)")?;
    let cols = stmt
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    Ok(cols)
}

/// Match the file's columns to the table's (creating the table if it is
/// missing, with `new_kind` types), and return the table's column for each
/// of the file's, and each column's kind.
fn prepare_target(
    conn: &mut Connection,
    table: &str,
    file: &Path,
    schema: &Schema,
    new_kind: impl Fn(&Field) -> Kind,
) -> Result<(Vec<String>, Vec<Kind>)> {
    if schema.fields().is_empty() {
        bail!(
            "{}: no columns (an empty file, or no header row)",
            file.display()
        );
    }
    let existing = table_columns(conn, table)?;
    let mut names = Vec::new();
    let mut kinds = Vec::new();
    if existing.is_empty() {
        let defs: Vec<String> = schema
            .fields()
            .iter()
            .map(|f| {
                let k = new_kind(f);
                kinds.push(k);
                names.push(f.name().clone());
                format!("{} {}", quote(f.name()), k.sql_type())
            })
            .collect();
        conn.execute(
            &format!("CREATE TABLE {}({})", quote(table), defs.join(", ")),
            &[],
        )?;
    } else {
        for f in schema.fields() {
            let Some((name, decl)) = existing
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(f.name()))
            else {
                let have: Vec<&str> = existing.iter().map(|(n, _)| n.as_str()).collect();
                bail!(
                    "{}: column {} is not in table {table} (its columns: {})",
                    file.display(),
                    f.name(),
                    have.join(", ")
                );
            };
            if names.contains(name) {
                bail!("{}: column {} appears twice", file.display(), f.name());
            }
            names.push(name.clone());
            kinds.push(Kind::of_declared(decl));
        }
    }
    Ok((names, kinds))
}

fn progress(len: u64, bytes: bool) -> ProgressBar {
    let pb = ProgressBar::new(len);
    let template = if bytes {
        "{spinner} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})"
    } else {
        "{spinner} [{bar:40}] {human_pos}/{human_len} rows ({per_sec}, eta {eta})"
    };
    pb.set_style(
        ProgressStyle::with_template(template)
            .expect("static template")
            .progress_chars("=> "),
    );
    pb
}

fn load_csv(conn: &mut Connection, table: &str, file: &Path) -> Result<u64> {
    let open = || File::open(file).with_context(|| format!("cannot read {}", file.display()));
    let format = Format::default().with_header(true);
    let (inferred, _) = format
        .infer_schema(open()?, None)
        .with_context(|| format!("{}", file.display()))?;
    // A byte-order mark (as spreadsheet exports write) is no part of the
    // first column's name.
    let inferred = Schema::new(
        inferred
            .fields()
            .iter()
            .map(|f| {
                f.as_ref()
                    .clone()
                    .with_name(f.name().trim_start_matches('\u{feff}'))
            })
            .collect::<Vec<_>>(),
    );
    let (names, kinds) = prepare_target(conn, table, file, &inferred, |f| {
        Kind::of_arrow(f.data_type())
    })?;
    // Read every field as text: the conversion is ours, with errors that
    // name the line and the column.
    let text_schema = Arc::new(Schema::new(
        inferred
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ));
    let size = open()?.metadata()?.len();
    let pb = progress(size, true);
    let reader = arrow_csv::ReaderBuilder::new(text_schema.clone())
        .with_header(true)
        .with_batch_size(BATCH)
        .build(pb.wrap_read(open()?))?;
    let mut rows = 0u64;
    let mut params = vec![Value::Null; kinds.len()];
    let mut ap = conn.appender_for(table, &names)?;
    // The header is line 1.
    let at = |ap: &Appender, e| match ap.failed_row() {
        Some(r) => anyhow!("{} line {}: {e}", file.display(), r + 2),
        None => anyhow!("{}: {e}", file.display()),
    };
    for batch in reader {
        let batch = batch.map_err(|e| anyhow!("{}: {e}", file.display()))?;
        let cols: Vec<_> = batch
            .columns()
            .iter()
            .map(|c| c.as_string::<i32>())
            .collect();
        for r in 0..batch.num_rows() {
            // The header is line 1.
            let line = rows + 2;
            for (i, col) in cols.iter().enumerate() {
                params[i] = if col.is_null(r) {
                    Value::Null
                } else {
                    kinds[i].parse(col.value(r)).map_err(|why| {
                        anyhow!(
                            "{} line {line}, column {}: {why}",
                            file.display(),
                            text_schema.field(i).name()
                        )
                    })?
                };
            }
            ap.append_row(&params).map_err(|e| at(&ap, e))?;
            rows += 1;
        }
    }
    ap.flush().map_err(|e| at(&ap, e))?;
    pb.finish_and_clear();
    Ok(rows)
}

fn load_parquet(conn: &mut Connection, table: &str, file: &Path) -> Result<u64> {
    let f = File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(f)
        .with_context(|| format!("{}", file.display()))?;
    let total = builder.metadata().file_metadata().num_rows();
    let schema = builder.schema().clone();
    let (names, _) = prepare_target(conn, table, file, &schema, |f| match f.data_type() {
        t if t.is_integer() || t.is_floating() || *t == DataType::Boolean => Kind::of_arrow(t),
        _ => Kind::Text,
    })?;
    let reader = builder.with_batch_size(BATCH).build()?;
    let pb = progress(u64::try_from(total).unwrap_or(0), false);
    let mut rows = 0u64;
    let mut ap = conn.appender_for(table, &names)?;
    let at = |ap: &Appender, e| match ap.failed_row() {
        Some(r) => anyhow!("{} row {}: {e}", file.display(), r + 1),
        None => anyhow!("{}: {e}", file.display()),
    };
    for batch in reader {
        let batch: RecordBatch = batch.map_err(|e| anyhow!("{}: {e}", file.display()))?;
        let cols = batch
            .columns()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                column_values(c).with_context(|| {
                    format!("{}: column {}", file.display(), schema.field(i).name())
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for r in 0..batch.num_rows() {
            rows += 1;
            let params: Vec<Value> = cols.iter().map(|c| c[r].clone()).collect();
            ap.append_row(&params).map_err(|e| at(&ap, e))?;
        }
        pb.inc(batch.num_rows() as u64);
    }
    ap.flush().map_err(|e| at(&ap, e))?;
    pb.finish_and_clear();
    Ok(rows)
}

/// An Arrow column as SQLite values: integers (and booleans) as INTEGER,
/// floats as REAL, strings as TEXT, binaries as BLOB, anything else
/// (dates, decimals, ...) as its text.
fn column_values(a: &ArrayRef) -> Result<Vec<Value>> {
    // Fail on a value that does not fit (a UInt64 past i64) instead of NULL.
    let strict = CastOptions {
        safe: false,
        ..Default::default()
    };
    let t = a.data_type();
    let nulls = |f: &dyn Fn(usize) -> Value| {
        (0..a.len())
            .map(|i| if a.is_null(i) { Value::Null } else { f(i) })
            .collect()
    };
    Ok(if t.is_integer() || *t == DataType::Boolean {
        let c = cast_with_options(a, &DataType::Int64, &strict)?;
        let c = c.as_primitive::<arrow_array::types::Int64Type>();
        nulls(&|i| Value::Integer(c.value(i)))
    } else if t.is_floating() {
        let c = cast_with_options(a, &DataType::Float64, &strict)?;
        let c = c.as_primitive::<arrow_array::types::Float64Type>();
        nulls(&|i| Value::Real(c.value(i)))
    } else if matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) {
        let c = cast_with_options(a, &DataType::Utf8, &strict)?;
        let c = c.as_string::<i32>();
        nulls(&|i| Value::Text(c.value(i).to_owned()))
    } else if matches!(
        t,
        DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_)
    ) {
        let c = cast_with_options(a, &DataType::Binary, &strict)?;
        let c = c.as_binary::<i32>();
        nulls(&|i| Value::Blob(c.value(i).to_vec()))
    } else {
        let fmt = ArrayFormatter::try_new(a.as_ref(), &FormatOptions::default())?;
        nulls(&|i| Value::Text(fmt.value(i).to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_map_to_sqlite_affinity() {
        assert_eq!(Kind::of_declared("BIGINT"), Kind::Integer);
        assert_eq!(Kind::of_declared("varchar(10)"), Kind::Text);
        assert_eq!(Kind::of_declared("DOUBLE"), Kind::Real);
        assert_eq!(Kind::of_declared(""), Kind::Any);
        assert_eq!(Kind::of_declared("DECIMAL(10,2)"), Kind::Any);
    }

    #[test]
    fn fields_convert_by_kind_or_say_why_not() {
        assert_eq!(Kind::Integer.parse("42"), Ok(Value::Integer(42)));
        assert_eq!(Kind::Integer.parse("true"), Ok(Value::Integer(1)));
        assert_eq!(
            Kind::Integer.parse("4.5"),
            Err("'4.5' is not an integer".into())
        );
        assert_eq!(Kind::Real.parse("4"), Ok(Value::Real(4.0)));
        assert_eq!(Kind::Any.parse("4.5"), Ok(Value::Real(4.5)));
        assert_eq!(Kind::Any.parse("x"), Ok(Value::Text("x".into())));
        assert_eq!(Kind::Text.parse(" 7"), Ok(Value::Text(" 7".into())));
        // Found from outside: what SQLite does not read as a number stays
        // text (or fails a REAL column), not NaN (stored as NULL) or inf.
        assert_eq!(Kind::Any.parse("NaN"), Ok(Value::Text("NaN".into())));
        assert_eq!(Kind::Any.parse("inf"), Ok(Value::Text("inf".into())));
        assert_eq!(Kind::Real.parse("NaN"), Err("'NaN' is not a number".into()));
        // Only ASCII blanks around a number, as SQLite skips.
        assert_eq!(Kind::Any.parse(" 7 "), Ok(Value::Integer(7)));
        assert_eq!(
            Kind::Any.parse("\u{a0}7"),
            Ok(Value::Text("\u{a0}7".into()))
        );
        assert_eq!(
            Kind::Integer.parse("\u{3000}7"),
            Err("'\u{3000}7' is not an integer".into())
        );
    }
}
