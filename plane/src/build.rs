//! Build a plane from Arrow columns, in parallel.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, GenericStringArray, Int64Array, LargeStringArray, OffsetSizeTrait, StringArray,
};
use rayon::prelude::*;

use crate::cells::{absorb_cell, apply_row, Stat, DENSE_MAX_BITS};
use crate::state::State;
use crate::{Code, DimRef, MeasureValue, Plane, PlaneConfig, PlaneError};

/// Rows per partial plane: large enough that a chunk's dictionaries and
/// merge cost little against its rows, small enough to spread over cores.
const CHUNK: usize = 1 << 17;

enum DimCol<'a> {
    Int(&'a Int64Array),
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
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
                absorb_cell(cc, s, c, &stats[k * m..(k + 1) * m], m)
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

/// Slots of the per-column cache of recent values (direct-mapped).
const RECENT_BITS: u32 = 10;

/// A direct-mapped cache of value → code in front of the dictionary: most
/// rows hit it without hashing a string or comparing bytes. A value is
/// held as a 128-bit tag that is the value itself (see `int_tag`,
/// `text_tag`), so a tag match is a value match.
struct Recent(Vec<(u128, Code)>);

impl Recent {
    fn new() -> Recent {
        Recent(vec![(0, Code::MAX); 1 << RECENT_BITS])
    }

    #[inline]
    fn get(
        &mut self,
        tag: u128,
        miss: impl FnOnce() -> Result<Code, PlaneError>,
    ) -> Result<Code, PlaneError> {
        let h = ((tag as u64) ^ ((tag >> 64) as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let slot = &mut self.0[(h >> (64 - RECENT_BITS)) as usize];
        if slot.1 != Code::MAX && slot.0 == tag {
            return Ok(slot.1);
        }
        let code = miss()?;
        *slot = (tag, code);
        Ok(code)
    }
}

/// An integer's tag: the value, with 0xFF in the top byte (a text tag has
/// its length, at most 15, there).
fn int_tag(v: i64) -> u128 {
    u128::from(v as u64) | 0xFF << 120
}

/// The code of `v` in dimension `d`, adding it if it is new.
fn code_or_push(st: &mut State, d: usize, v: DimRef<'_>) -> Result<Code, PlaneError> {
    match st.dicts[d].code_ref(v) {
        Some(c) => Ok(c),
        None => st.push_value(d, v),
    }
}

/// Codes of one dimension column over `range`, adding values to the
/// dictionary.
fn encode_column(
    st: &mut State,
    d: usize,
    col: &DimCol<'_>,
    range: Range<usize>,
) -> Result<Vec<Code>, PlaneError> {
    match col {
        DimCol::Int(a) => encode_ints(st, d, a, range),
        DimCol::Utf8(a) => encode_texts(st, d, a, range),
        DimCol::LargeUtf8(a) => encode_texts(st, d, a, range),
    }
}

fn encode_ints(
    st: &mut State,
    d: usize,
    a: &Int64Array,
    range: Range<usize>,
) -> Result<Vec<Code>, PlaneError> {
    let mut recent = Recent::new();
    let values = a.values();
    range
        .map(|i| {
            if a.is_null(i) {
                return code_or_push(st, d, DimRef::Null);
            }
            let v = values[i];
            recent.get(int_tag(v), || code_or_push(st, d, DimRef::Int(v)))
        })
        .collect()
}

fn encode_texts<O: OffsetSizeTrait>(
    st: &mut State,
    d: usize,
    a: &GenericStringArray<O>,
    range: Range<usize>,
) -> Result<Vec<Code>, PlaneError> {
    let mut recent = Recent::new();
    let (offsets, data) = (a.value_offsets(), a.value_data());
    range
        .map(|i| {
            if a.is_null(i) {
                return code_or_push(st, d, DimRef::Null);
            }
            let (start, end) = (offsets[i].as_usize(), offsets[i + 1].as_usize());
            let len = end - start;
            // A text of up to 15 bytes is its own tag: its bytes, and its
            // length in the top byte (read as one 16-byte load when the
            // buffer has room, else copied).
            let tag = (len <= 15).then(|| {
                let word = match data.get(start..start + 16) {
                    Some(w) => u128::from_le_bytes(w.try_into().expect("16 bytes")),
                    None => {
                        let mut b = [0u8; 16];
                        b[..len].copy_from_slice(&data[start..end]);
                        u128::from_le_bytes(b)
                    }
                };
                let low = if len == 0 {
                    0
                } else {
                    word & (u128::MAX >> (128 - 8 * len))
                };
                low | (len as u128) << 120
            });
            let v = || DimRef::Text(a.value(i));
            match tag {
                Some(t) => recent.get(t, || code_or_push(st, d, v())),
                None => code_or_push(st, d, v()),
            }
        })
        .collect()
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

    /// Texts of 0, a few, 15, 16 and more bytes (the cache tags up to 15).
    fn text(i: i64) -> String {
        match i {
            0 => String::new(),
            1..=5 => format!("v{i}"),
            6 => "fifteen bytes!!".into(),
            7 => "sixteen bytes!!!".into(),
            _ => format!("a longer text value, number {i}"),
        }
    }

    fn column(kind: Kind, vs: &[Option<i64>]) -> ArrayRef {
        let text = |v: &Option<i64>| v.map(text);
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
            (_, Some(i)) => DimValue::from(text(i).as_str()),
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
