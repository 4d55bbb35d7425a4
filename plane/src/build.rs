//! Build a plane from Arrow columns, in parallel.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, LargeStringArray, StringArray};
use rayon::prelude::*;

use crate::cells::{absorb_cell, apply_row, Stat, DENSE_MAX_BITS};
use crate::plane::State;
use crate::{Code, DimRef, MeasureValue, Plane, PlaneConfig, PlaneError};

/// Rows per partial plane: large enough that a chunk's dictionaries and
/// merge cost little against its rows, small enough to spread over cores.
const CHUNK: usize = 1 << 17;

enum DimCol<'a> {
    Int(&'a Int64Array),
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
}

impl<'a> DimCol<'a> {
    #[inline]
    fn get(&self, i: usize) -> DimRef<'a> {
        match self {
            DimCol::Int(a) if a.is_valid(i) => DimRef::Int(a.value(i)),
            DimCol::Utf8(a) if a.is_valid(i) => DimRef::Text(a.value(i)),
            DimCol::LargeUtf8(a) if a.is_valid(i) => DimRef::Text(a.value(i)),
            _ => DimRef::Null,
        }
    }
}

fn type_error(column: &str, a: &ArrayRef) -> PlaneError {
    PlaneError::ColumnType {
        column: column.to_string(),
        found: a.data_type().to_string(),
    }
}

impl Plane {
    /// Build from one Arrow array per dimension (Int64, Utf8 or LargeUtf8,
    /// nulls allowed) and per measure (Int64, nulls allowed), all of the same
    /// length: partial planes per chunk with rayon, then merged.
    pub fn build_from_arrow(
        config: PlaneConfig,
        dims: &[ArrayRef],
        measures: &[ArrayRef],
    ) -> Result<Plane, PlaneError> {
        if dims.len() != config.dims.len() {
            return Err(PlaneError::Arity {
                what: "dimension columns",
                expected: config.dims.len(),
                got: dims.len(),
            });
        }
        if measures.len() != config.measures.len() {
            return Err(PlaneError::Arity {
                what: "measure columns",
                expected: config.measures.len(),
                got: measures.len(),
            });
        }
        let n = dims
            .iter()
            .chain(measures)
            .map(|a| a.len())
            .next()
            .unwrap_or(0);
        if let Some(a) = dims.iter().chain(measures).find(|a| a.len() != n) {
            return Err(PlaneError::Arity {
                what: "rows in a column",
                expected: n,
                got: a.len(),
            });
        }
        let dcols = dims
            .iter()
            .zip(&config.dims)
            .map(|(a, name)| {
                let any = a.as_any();
                if let Some(x) = any.downcast_ref::<Int64Array>() {
                    Ok(DimCol::Int(x))
                } else if let Some(x) = any.downcast_ref::<StringArray>() {
                    Ok(DimCol::Utf8(x))
                } else if let Some(x) = any.downcast_ref::<LargeStringArray>() {
                    Ok(DimCol::LargeUtf8(x))
                } else {
                    Err(type_error(name, a))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mcols = measures
            .iter()
            .zip(&config.measures)
            .map(|(a, name)| {
                a.as_any()
                    .downcast_ref::<Int64Array>()
                    .ok_or_else(|| type_error(name, a))
            })
            .collect::<Result<Vec<_>, _>>()?;

        let parts = (0..n.div_ceil(CHUNK))
            .into_par_iter()
            .map(|c| build_chunk(&config, &dcols, &mcols, c * CHUNK..n.min((c + 1) * CHUNK)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut parts = parts.into_iter();
        let mut plane = parts.next().unwrap_or_else(|| Plane::new(config));
        for p in parts {
            plane.merge(&p)?;
        }
        Ok(plane)
    }
}

/// The plane of rows `range`: each dimension column is encoded first, so
/// the layout is fixed before any cell is written (no re-pack).
fn build_chunk(
    config: &PlaneConfig,
    dcols: &[DimCol<'_>],
    mcols: &[&Int64Array],
    range: Range<usize>,
) -> Result<Plane, PlaneError> {
    let mut plane = Plane::new(config.clone());
    let st = Arc::make_mut(&mut plane.state);
    let codes = dcols
        .iter()
        .enumerate()
        .map(|(d, col)| encode_column(st, d, col, range.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    st.fit_layout();
    let layout = Arc::clone(&st.layout);
    let m = mcols.len();
    let mut row = vec![MeasureValue::Null; m];
    let mut keys = range.clone().map(|_| 0).collect::<Vec<u64>>();
    for (d, cs) in codes.iter().enumerate() {
        for (k, &c) in keys.iter_mut().zip(cs) {
            *k |= layout.place(d, c);
        }
    }
    let fill = |row: &mut [MeasureValue], i: usize| {
        for (v, col) in row.iter_mut().zip(mcols) {
            *v = if col.is_valid(i) {
                MeasureValue::Int(col.value(i))
            } else {
                MeasureValue::Null
            };
        }
    };
    let slots = 1usize << layout.total.min(usize::BITS - 1);
    if layout.total <= DENSE_MAX_BITS && slots <= range.len() {
        // Accumulate into a flat array, then hand the non-empty cells over.
        let mut count = vec![0i64; slots];
        let mut stats = vec![Stat::default(); slots * m];
        for (&key, i) in keys.iter().zip(range.clone()) {
            fill(&mut row, i);
            let k = key as usize;
            apply_row(&mut count[k], &mut stats[k * m..(k + 1) * m], 1, &row)?;
        }
        for (k, &c) in count.iter().enumerate().filter(|(_, &c)| c != 0) {
            st.cells.update(k as u64, |cc, s| {
                absorb_cell(cc, s, c, &stats[k * m..(k + 1) * m])
            });
            st.nonempty += 1;
        }
    } else {
        for (&key, i) in keys.iter().zip(range.clone()) {
            fill(&mut row, i);
            let was = st.cells.update(key, |c, s| {
                let was = *c;
                apply_row(c, s, 1, &row).map(|()| was)
            })?;
            st.nonempty += usize::from(was == 0);
        }
    }
    st.rows = range.len() as i64;
    Ok(plane)
}

/// Codes of one dimension column over `range`, adding values to the
/// dictionary (sorted or clustered data repeats the last value).
fn encode_column(
    st: &mut State,
    d: usize,
    col: &DimCol<'_>,
    range: Range<usize>,
) -> Result<Vec<Code>, PlaneError> {
    let mut out = Vec::with_capacity(range.len());
    let mut last: Option<(DimRef<'_>, Code)> = None;
    for i in range {
        let v = col.get(i);
        let code = match last {
            Some((lv, c)) if lv == v => c,
            _ => {
                let c = match st.dicts[d].code_ref(v) {
                    Some(c) => c,
                    None => st.push_value(d, v)?,
                };
                last = Some((v, c));
                c
            }
        };
        out.push(code);
    }
    Ok(out)
}
