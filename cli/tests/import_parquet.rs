//! `pleroma import DB TABLE FILE.parquet` maps Arrow types to SQLite's:
//! integers and booleans to INTEGER, floats to REAL, strings to TEXT.

mod common;

use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int32Array, RecordBatch, StringArray};
use common::{pleroma, sql_ok};
use parquet::arrow::ArrowWriter;

#[test]
fn loads_a_parquet_file_into_a_new_table() {
    let dir = tempfile::tempdir().unwrap();
    let (db, file) = (dir.path().join("t.db"), dir.path().join("inv.parquet"));
    let batch = RecordBatch::try_from_iter([
        (
            "region",
            Arc::new(StringArray::from(vec![Some("north"), None, Some("south")])) as ArrayRef,
        ),
        (
            "amount_cents",
            Arc::new(Int32Array::from(vec![Some(1250), Some(990), None])) as ArrayRef,
        ),
        (
            "rate",
            Arc::new(Float64Array::from(vec![0.5, 1.0, 2.25])) as ArrayRef,
        ),
        (
            "paid",
            Arc::new(BooleanArray::from(vec![true, false, true])) as ArrayRef,
        ),
    ])
    .unwrap();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();

    let r = pleroma(
        &[
            "import",
            db.to_str().unwrap(),
            "inv",
            file.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let out = sql_ok(
        &db,
        &["SELECT region, amount_cents, rate, paid, typeof(rate) FROM inv ORDER BY rowid"],
    );
    assert_eq!(
        out,
        "north|1250|0.5|1|real\n|990|1.0|0|real\nsouth||2.25|1|real\n"
    );
}
