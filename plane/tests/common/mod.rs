//! The naive model the property tests hold the plane against: the rows in
//! a `Vec`, folded from scratch for every query.
#![allow(dead_code)] // each test file uses its own part of the model

use std::collections::HashMap;

use pleroma_plane::{
    Agg, AggValue, Code, DimValue, MeasureValue, Plane, PlaneConfig, PlaneError, Pred, SliceQuery,
    Truth,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub dims: Vec<DimValue>,
    pub ms: Vec<MeasureValue>,
}

/// Groups by their dimension values (codes differ between planes).
pub type Groups = HashMap<Vec<DimValue>, Vec<AggValue>>;

pub const MEASURES: usize = 2;

pub fn config(nd: usize, cap: usize) -> PlaneConfig {
    let mut c = PlaneConfig::new(
        (0..nd).map(|d| format!("d{d}")).collect(),
        (0..MEASURES).map(|m| format!("m{m}")).collect(),
    );
    c.cap = cap;
    c
}

/// NULL, integers and text of the same digits (different values).
pub fn dim_value(domain: i64) -> impl Strategy<Value = DimValue> {
    prop_oneof![
        1 => Just(DimValue::Null),
        3 => (0..domain).prop_map(DimValue::Int),
        2 => (0..domain).prop_map(|i| DimValue::from(i.to_string().as_str())),
    ]
}

/// Small values, NULLs, values at the ends of i64; measure 1 also gets a
/// rare non-INTEGER value.
pub fn measure(m: usize) -> impl Strategy<Value = MeasureValue> {
    let other = if m == 1 { 1 } else { 0 };
    prop_oneof![
        3 => Just(MeasureValue::Null),
        12 => (-40i64..40).prop_map(MeasureValue::Int),
        2 => prop_oneof![Just(i64::MAX), Just(i64::MIN), Just(i64::MAX - 1), Just(1 << 62), Just(-(1 << 62))].prop_map(MeasureValue::Int),
        other => Just(MeasureValue::Other),
    ]
}

pub fn row(nd: usize, domain: i64) -> impl Strategy<Value = Row> {
    (vec(dim_value(domain), nd), (measure(0), measure(1))).prop_map(|(dims, (a, b))| Row {
        dims,
        ms: vec![a, b],
    })
}

pub fn truth() -> impl Strategy<Value = Truth> {
    prop_oneof![Just(Truth::True), Just(Truth::False), Just(Truth::Null)]
}

pub fn pred(nd: usize) -> impl Strategy<Value = Pred> {
    let leaf = prop_oneof![
        1 => truth().prop_map(Pred::Const),
        4 => (0..nd, vec(truth(), 0..12)).prop_map(|(dim, truth)| Pred::Leaf { dim, truth }),
        // An equality: one code True.
        3 => (0..nd, 0usize..12).prop_map(|(dim, c)| {
            let mut truth = vec![Truth::False; c + 1];
            truth[c] = Truth::True;
            Pred::Leaf { dim, truth }
        }),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|p| Pred::Not(Box::new(p))),
            vec(inner.clone(), 0..4).prop_map(Pred::And),
            vec(inner, 0..3).prop_map(Pred::Or),
        ]
    })
}

pub fn agg(nd: usize) -> impl Strategy<Value = Agg> {
    prop_oneof![
        Just(Agg::CountStar),
        (0..MEASURES).prop_map(Agg::Count),
        (0..MEASURES).prop_map(Agg::Sum),
        (0..MEASURES).prop_map(Agg::Min),
        (0..MEASURES).prop_map(Agg::Max),
        (0..nd).prop_map(Agg::CountDistinct),
    ]
}

pub fn query(nd: usize) -> impl Strategy<Value = SliceQuery> {
    (pred(nd), vec(0..nd, 0..=2), vec(agg(nd), 0..5)).prop_map(|(filter, group_by, aggs)| {
        SliceQuery {
            filter,
            group_by,
            aggs,
        }
    })
}

#[derive(Clone, Debug)]
pub enum Op {
    Insert(Row),
    Delete(Index),
    Update(Index, Row),
    Snapshot,
    Restore(Index),
    Query(SliceQuery),
}

pub fn op(nd: usize, domain: i64) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => row(nd, domain).prop_map(Op::Insert),
        3 => any::<Index>().prop_map(Op::Delete),
        2 => (any::<Index>(), row(nd, domain)).prop_map(|(i, r)| Op::Update(i, r)),
        1 => Just(Op::Snapshot),
        1 => any::<Index>().prop_map(Op::Restore),
        3 => query(nd).prop_map(Op::Query),
    ]
}

/// A plane shape: dimensions, values per dimension, cap. Wide domains
/// push the joint past the dense threshold.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub nd: usize,
    pub domain: i64,
    pub cap: usize,
}

pub fn shape() -> impl Strategy<Value = Shape> {
    (
        1usize..=6,
        prop_oneof![Just(3i64), Just(10), Just(40), Just(300)],
        prop_oneof![5 => Just(1024usize), 1 => Just(6)],
    )
        .prop_map(|(nd, domain, cap)| Shape { nd, domain, cap })
}

/// SQL's three-valued logic, written out separately from the plane's.
pub fn truth_of(p: &Pred, codes: &[Code]) -> Truth {
    match p {
        Pred::Const(t) => *t,
        Pred::Leaf { dim, truth } => truth
            .get(codes[*dim] as usize)
            .copied()
            .unwrap_or(Truth::False),
        Pred::Not(p) => match truth_of(p, codes) {
            Truth::True => Truth::False,
            Truth::False => Truth::True,
            Truth::Null => Truth::Null,
        },
        Pred::And(ps) => {
            let ts: Vec<Truth> = ps.iter().map(|p| truth_of(p, codes)).collect();
            if ts.contains(&Truth::False) {
                Truth::False
            } else if ts.contains(&Truth::Null) {
                Truth::Null
            } else {
                Truth::True
            }
        }
        Pred::Or(ps) => {
            let ts: Vec<Truth> = ps.iter().map(|p| truth_of(p, codes)).collect();
            if ts.contains(&Truth::True) {
                Truth::True
            } else if ts.contains(&Truth::Null) {
                Truth::Null
            } else {
                Truth::False
            }
        }
    }
}

fn int(m: &MeasureValue) -> Option<i64> {
    match m {
        MeasureValue::Int(v) => Some(*v),
        _ => None,
    }
}

/// The slice folded from the rows. Codes (for the filter's truth tables)
/// come from the plane's dictionaries, as the router computes them.
pub fn naive(plane: &Plane, rows: &[Row], q: &SliceQuery) -> Result<Groups, PlaneError> {
    if let Some(f) = plane.fault() {
        return Err(PlaneError::OutOfService(f.to_string()));
    }
    for a in &q.aggs {
        if let Agg::Count(m) | Agg::Sum(m) | Agg::Min(m) | Agg::Max(m) = *a {
            if rows.iter().any(|r| r.ms[m] == MeasureValue::Other) {
                return Err(PlaneError::NonIntegerMeasure(format!("m{m}")));
            }
        }
    }
    let mut by_group: HashMap<Vec<DimValue>, Vec<&Row>> = HashMap::new();
    if q.group_by.is_empty() {
        by_group.insert(vec![], vec![]);
    }
    for r in rows {
        let codes: Vec<Code> = r
            .dims
            .iter()
            .enumerate()
            .map(|(d, v)| plane.code_of(d, v).expect("a held value has a code"))
            .collect();
        if truth_of(&q.filter, &codes) == Truth::True {
            by_group
                .entry(q.group_by.iter().map(|&d| r.dims[d].clone()).collect())
                .or_default()
                .push(r);
        }
    }
    Ok(by_group
        .into_iter()
        .map(|(k, rs)| {
            let vals = q
                .aggs
                .iter()
                .map(|a| match *a {
                    Agg::CountStar => AggValue::Count(rs.len() as i64),
                    Agg::Count(m) => {
                        AggValue::Count(rs.iter().filter_map(|r| int(&r.ms[m])).count() as i64)
                    }
                    Agg::Sum(m) => {
                        let vs: Vec<i128> = rs
                            .iter()
                            .filter_map(|r| int(&r.ms[m]))
                            .map(i128::from)
                            .collect();
                        AggValue::Sum {
                            nn: vs.len() as i64,
                            pos: vs.iter().filter(|&&v| v > 0).sum(),
                            neg: vs.iter().filter(|&&v| v < 0).sum(),
                        }
                    }
                    Agg::Min(m) => AggValue::Min(rs.iter().filter_map(|r| int(&r.ms[m])).min()),
                    Agg::Max(m) => AggValue::Max(rs.iter().filter_map(|r| int(&r.ms[m])).max()),
                    Agg::CountDistinct(d) => {
                        let mut vs: Vec<&DimValue> = rs
                            .iter()
                            .map(|r| &r.dims[d])
                            .filter(|v| **v != DimValue::Null)
                            .collect();
                        vs.sort_by(|a, b| a.sqlite_cmp(b));
                        vs.dedup();
                        AggValue::Count(vs.len() as i64)
                    }
                })
                .collect();
            (k, vals)
        })
        .collect())
}

/// Write the exact MIN/MAX of every cell the plane says it does not know,
/// from the rows, as the router would from the base table.
pub fn refresh(plane: &mut Plane, rows: &[Row], cells: &[(u64, usize)]) {
    for &(key, m) in cells {
        let values: Vec<DimValue> = plane
            .decode(key)
            .iter()
            .enumerate()
            .map(|(d, &c)| plane.dict(d).value(c).clone())
            .collect();
        let vs = rows
            .iter()
            .filter(|r| r.dims == values)
            .filter_map(|r| int(&r.ms[m]));
        let (min, max) = vs.fold((None, None), |(lo, hi): (Option<i64>, Option<i64>), v| {
            (
                Some(lo.map_or(v, |x| x.min(v))),
                Some(hi.map_or(v, |x| x.max(v))),
            )
        });
        plane.set_extrema(key, m, min, max);
    }
}

/// The plane's answer by values, after recomputing unknown extrema on a
/// copy (so a snapshot's plane can be asked too).
pub fn actual(plane: &Plane, rows: &[Row], q: &SliceQuery) -> Result<Groups, PlaneError> {
    let mut p = plane.clone();
    let r = loop {
        match p.slice(q) {
            Err(PlaneError::UnknownExtremum { cells }) => {
                assert_eq!(
                    cells,
                    p.unknown_extrema(q),
                    "unknown_extrema lists what slice refuses"
                );
                refresh(&mut p, rows, &cells);
                p.validate().unwrap();
                assert!(p.unknown_extrema(q).is_empty());
            }
            r => break r?,
        }
    };
    if !q.group_by.is_empty() {
        assert!(r.groups.iter().all(|g| g
            .values
            .iter()
            .zip(&q.aggs)
            .all(|(v, a)| *a != Agg::CountStar || *v != AggValue::Count(0))));
    }
    let groups: Groups = r
        .groups
        .iter()
        .map(|g| {
            (
                g.key
                    .iter()
                    .zip(&q.group_by)
                    .map(|(&c, &d)| p.dict(d).value(c).clone())
                    .collect(),
                g.values.clone(),
            )
        })
        .collect();
    assert_eq!(groups.len(), r.groups.len(), "each group appears once");
    Ok(groups)
}

/// Every aggregate over every dimension: two planes with equal dumps hold
/// the same multiset of rows (up to foreign values, which refuse).
pub fn dump_query(nd: usize) -> SliceQuery {
    let mut aggs = vec![Agg::CountStar];
    for m in 0..MEASURES {
        aggs.extend([Agg::Count(m), Agg::Sum(m), Agg::Min(m), Agg::Max(m)]);
    }
    SliceQuery {
        filter: Pred::Const(Truth::True),
        group_by: (0..nd).collect(),
        aggs,
    }
}

/// The dump without measure 1 (which may hold foreign values).
pub fn counts_query(nd: usize) -> SliceQuery {
    let aggs = vec![
        Agg::CountStar,
        Agg::Count(0),
        Agg::Sum(0),
        Agg::Min(0),
        Agg::Max(0),
    ];
    SliceQuery {
        filter: Pred::Const(Truth::True),
        group_by: (0..nd).collect(),
        aggs,
    }
}

pub fn assert_same(plane: &Plane, rows: &[Row], q: &SliceQuery) {
    assert_eq!(actual(plane, rows, q), naive(plane, rows, q), "query {q:?}");
}
