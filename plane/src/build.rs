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
        build(config, dims, measures, CHUNK)
    }
}

/// [`Plane::build_from_arrow`] with `chunk` rows per partial plane.
fn build(
    config: PlaneConfig,
    dims: &[ArrayRef],
    measures: &[ArrayRef],
    chunk: usize,
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

    let parts = (0..n.div_ceil(chunk))
        .into_par_iter()
        .map(|c| build_chunk(&config, &dcols, &mcols, c * chunk..n.min((c + 1) * chunk)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut parts = parts.into_iter();
    let mut plane = parts.next().unwrap_or_else(|| Plane::new(config));
    for p in parts {
        plane.merge(&p)?;
    }
    Ok(plane)
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow_array::Float64Array;
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::*;
    use crate::{Agg, AggValue, DimValue, Pred, SliceQuery, Truth};

    #[derive(Clone, Copy, Debug)]
    enum Kind {
        Int,
        Utf8,
        LargeUtf8,
    }

    fn column(kind: Kind, vs: &[Option<i64>]) -> ArrayRef {
        let text = |v: &Option<i64>| v.map(|i| format!("v{i}"));
        match kind {
            Kind::Int => Arc::new(Int64Array::from(vs.to_vec())),
            Kind::Utf8 => Arc::new(StringArray::from(vs.iter().map(text).collect::<Vec<_>>())),
            Kind::LargeUtf8 => Arc::new(LargeStringArray::from(
                vs.iter().map(text).collect::<Vec<_>>(),
            )),
        }
    }

    fn value(kind: Kind, v: Option<i64>) -> DimValue {
        match (kind, v) {
            (_, None) => DimValue::Null,
            (Kind::Int, Some(i)) => DimValue::Int(i),
            (_, Some(i)) => DimValue::from(format!("v{i}").as_str()),
        }
    }

    fn dump(p: &Plane) -> HashMap<Vec<DimValue>, Vec<AggValue>> {
        let nd = p.config().dims.len();
        let aggs = vec![
            Agg::CountStar,
            Agg::Count(0),
            Agg::Sum(0),
            Agg::Min(0),
            Agg::Max(0),
        ];
        let q = SliceQuery {
            filter: Pred::Const(Truth::True),
            group_by: (0..nd).collect(),
            aggs,
        };
        let r = p.slice(&q).unwrap();
        r.groups
            .into_iter()
            .map(|g| {
                (
                    g.key
                        .iter()
                        .enumerate()
                        .map(|(d, &c)| p.dict(d).value(c).clone())
                        .collect(),
                    g.values,
                )
            })
            .collect()
    }

    fn config(nd: usize) -> PlaneConfig {
        PlaneConfig::new((0..nd).map(|d| format!("d{d}")).collect(), vec!["m".into()])
    }

    proptest! {
        #[test]
        fn build_from_arrow_equals_inserts(
            (kinds, cols, m) in (1usize..=3, 0usize..200).prop_flat_map(|(nd, n)| (
                vec(prop_oneof![Just(Kind::Int), Just(Kind::Utf8), Just(Kind::LargeUtf8)], nd),
                vec(vec(proptest::option::weighted(0.9, 0i64..12), n), nd),
                vec(proptest::option::weighted(0.8, any::<i64>()), n),
            )),
            chunk in 1usize..50,
        ) {
            let nd = kinds.len();
            let dims: Vec<ArrayRef> = kinds.iter().zip(&cols).map(|(&k, c)| column(k, c)).collect();
            let measures: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(m.clone()))];
            let built = build(config(nd), &dims, &measures, chunk).unwrap();
            built.validate().unwrap();
            let mut inserted = Plane::new(config(nd));
            for (i, v) in m.iter().enumerate() {
                let row: Vec<DimValue> = (0..nd).map(|d| value(kinds[d], cols[d][i])).collect();
                inserted.insert(&row, &[v.map_or(MeasureValue::Null, MeasureValue::Int)]).unwrap();
            }
            prop_assert_eq!((built.rows(), built.cells(), built.joint_bits()), (inserted.rows(), inserted.cells(), inserted.joint_bits()));
            prop_assert_eq!(dump(&built), dump(&inserted));
            // Codes follow first appearance, chunk by chunk.
            for d in 0..nd {
                prop_assert_eq!(built.dict(d).values(), inserted.dict(d).values());
            }
        }
    }

    #[test]
    fn other_column_types_are_refused() {
        let dims: Vec<ArrayRef> = vec![Arc::new(Float64Array::from(vec![1.5]))];
        let measures: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![1]))];
        assert_eq!(
            Plane::build_from_arrow(config(1), &dims, &measures).unwrap_err(),
            PlaneError::ColumnType {
                column: "d0".into(),
                found: "Float64".into()
            }
        );
        let dims: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![1]))];
        let measures: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec!["x"]))];
        assert!(matches!(
            Plane::build_from_arrow(config(1), &dims, &measures),
            Err(PlaneError::ColumnType { .. })
        ));
        let short: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![1, 2]))];
        assert!(matches!(
            Plane::build_from_arrow(config(1), &short, &measures),
            Err(PlaneError::Arity { .. })
        ));
    }

    #[test]
    fn a_build_over_the_cap_is_refused() {
        let mut c = config(1);
        c.cap = 3;
        let dims: Vec<ArrayRef> = vec![Arc::new(Int64Array::from((0..10).collect::<Vec<i64>>()))];
        let measures: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![0; 10]))];
        assert_eq!(
            build(c, &dims, &measures, 4).unwrap_err(),
            PlaneError::CapExceeded {
                dim: "d0".into(),
                cap: 3
            }
        );
    }
}
