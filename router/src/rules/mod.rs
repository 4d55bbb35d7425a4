//! The routing rules, one file each. A rule answers only when every part of
//! the statement is exact; otherwise SQLite runs it untouched.

pub(crate) mod answer_from_cells;
pub(crate) mod answer_from_limb;
pub(crate) mod answer_with_residue;

use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, NullArray, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Field, Schema};
use rusqlite::types::Value;

use crate::rows::Rows;

/// Rows as an Arrow batch: one Arrow type per column from its storage
/// classes; a column that mixes them becomes Utf8 of SQLite's text form.
pub(crate) fn to_arrow(rows: &Rows) -> RecordBatch {
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (c, name) in rows.columns.iter().enumerate() {
        let col = rows.rows.iter().map(|r| &r[c]);
        let mut kind: Option<u8> = None;
        let mut mixed = false;
        for v in col.clone() {
            let k = match v {
                Value::Null => continue,
                Value::Integer(_) => 1,
                Value::Real(_) => 2,
                Value::Text(_) => 3,
                Value::Blob(_) => 4,
            };
            if kind.is_some_and(|x| x != k) {
                mixed = true;
            }
            kind = Some(k);
        }
        let (dt, array): (DataType, ArrayRef) = match (kind, mixed) {
            (None, _) => (DataType::Null, Arc::new(NullArray::new(rows.rows.len()))),
            (Some(1), false) => {
                let mut b = Int64Builder::new();
                col.for_each(|v| {
                    b.append_option(if let Value::Integer(i) = v {
                        Some(*i)
                    } else {
                        None
                    })
                });
                (DataType::Int64, Arc::new(b.finish()))
            }
            (Some(2), false) => {
                let mut b = Float64Builder::new();
                col.for_each(|v| {
                    b.append_option(if let Value::Real(f) = v {
                        Some(*f)
                    } else {
                        None
                    })
                });
                (DataType::Float64, Arc::new(b.finish()))
            }
            (Some(4), false) => {
                let mut b = BinaryBuilder::new();
                col.for_each(|v| {
                    b.append_option(if let Value::Blob(x) = v {
                        Some(x)
                    } else {
                        None
                    })
                });
                (DataType::Binary, Arc::new(b.finish()))
            }
            _ => {
                let mut b = StringBuilder::new();
                col.for_each(|v| {
                    b.append_option(match v {
                        Value::Null => None,
                        Value::Integer(i) => Some(i.to_string()),
                        Value::Real(f) => Some(f.to_string()),
                        Value::Text(t) => Some(t.clone()),
                        Value::Blob(x) => Some(String::from_utf8_lossy(x).into_owned()),
                    })
                });
                (DataType::Utf8, Arc::new(b.finish()))
            }
        };
        fields.push(Field::new(name, dt, true));
        arrays.push(array);
    }
    let opts = RecordBatchOptions::new().with_row_count(Some(rows.rows.len()));
    RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &opts)
        .expect("columns built with the schema's types and the same length")
}
