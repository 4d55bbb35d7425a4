//! Slice evaluation: filters, group-bys and aggregates over the cells.

use ahash::AHashMap;

use crate::cells::{CellRef, Stats, MAX_UNKNOWN, MIN_UNKNOWN};
use crate::layout::Layout;
use crate::state::State;
use crate::{Code, JointKey, PlaneError};

/// SQL's three truth values. WHERE keeps a row only when its filter is `True`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Truth {
    False,
    True,
    Null,
}

/// A filter over dimensions, evaluated per cell in three-valued logic.
/// A `Leaf` gives the truth of a one-dimension predicate for every code of
/// that dimension (`truth[code]`; codes at or beyond `truth.len()` count as
/// `False`). The caller (the router) computes it with SQL's semantics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pred {
    Const(Truth),
    Leaf { dim: usize, truth: Vec<Truth> },
    Not(Box<Pred>),
    And(Vec<Pred>),
    Or(Vec<Pred>),
}

/// One aggregate to compute per group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Agg {
    CountStar,
    /// Non-NULL values of measure `m`.
    Count(usize),
    Sum(usize),
    Min(usize),
    Max(usize),
    /// Distinct non-NULL values of a dimension.
    CountDistinct(usize),
}

/// The value of one aggregate in one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggValue {
    Count(i64),
    /// `nn` non-NULL values; `pos` is the exact sum of the positive values,
    /// `neg` of the negative ones; `pos + neg` is the sum. Any order of adding
    /// the values stays inside `[neg, pos]`, so the caller can tell whether an
    /// i64 accumulator (SQLite's) could overflow part-way.
    Sum {
        nn: i64,
        pos: i128,
        neg: i128,
    },
    /// `None` when the group has no non-NULL value.
    Min(Option<i64>),
    Max(Option<i64>),
}

impl AggValue {
    /// The exact sum of a `Sum`, and whether it leaves the i64 range.
    pub fn exact_sum(&self) -> Option<(i128, bool)> {
        match *self {
            AggValue::Sum { pos, neg, .. } => {
                let s = pos + neg;
                Some((s, s > i64::MAX as i128 || s < i64::MIN as i128))
            }
            _ => None,
        }
    }
}

/// What to compute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceQuery {
    pub filter: Pred,
    /// Dimension indexes to group by, in output order. Empty: one group
    /// over the whole filter (present even when no row matches).
    pub group_by: Vec<usize>,
    pub aggs: Vec<Agg>,
}

/// One output group: its codes (one per `group_by` dimension) and the
/// aggregate values in `aggs` order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub key: Vec<Code>,
    pub values: Vec<AggValue>,
}

/// The result of a slice: non-empty groups (with an empty `group_by`, exactly
/// one group, whose `CountStar` may be 0). Groups are in no particular order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceResult {
    pub groups: Vec<Group>,
    /// Cell slots probed or scanned (for cost reporting).
    pub cells_visited: usize,
}

/// Cells whose MIN/MAX of a measure is unknown (after a delete of the
/// extremum): `(joint key, measure)`.
pub type UnknownCells = Vec<(JointKey, usize)>;

impl Truth {
    fn not(self) -> Truth {
        match self {
            Truth::True => Truth::False,
            Truth::False => Truth::True,
            Truth::Null => Truth::Null,
        }
    }
}

impl Pred {
    /// The filter's truth for a cell whose code of dimension `d` is
    /// `code(d)`, in SQL's three-valued (Kleene) logic.
    pub fn eval(&self, code: &impl Fn(usize) -> Code) -> Truth {
        match self {
            Pred::Const(t) => *t,
            Pred::Leaf { dim, truth } => truth
                .get(code(*dim) as usize)
                .copied()
                .unwrap_or(Truth::False),
            Pred::Not(p) => p.eval(code).not(),
            Pred::And(ps) => {
                let mut r = Truth::True;
                for p in ps {
                    match p.eval(code) {
                        Truth::False => return Truth::False,
                        Truth::Null => r = Truth::Null,
                        Truth::True => {}
                    }
                }
                r
            }
            Pred::Or(ps) => {
                let mut r = Truth::False;
                for p in ps {
                    match p.eval(code) {
                        Truth::True => return Truth::True,
                        Truth::Null => r = Truth::Null,
                        Truth::False => {}
                    }
                }
                r
            }
        }
    }

    fn dims(&self, out: &mut Vec<usize>) {
        match self {
            Pred::Const(_) => {}
            Pred::Leaf { dim, .. } => out.push(*dim),
            Pred::Not(p) => p.dims(out),
            Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|p| p.dims(out)),
        }
    }

    fn conjuncts<'a>(&'a self, out: &mut Vec<&'a Pred>) {
        match self {
            Pred::And(ps) => ps.iter().for_each(|p| p.conjuncts(out)),
            p => out.push(p),
        }
    }
}

/// Grouped accumulators for one slice.
/// How many groups a slice makes room for before it has seen one.
const GROUPS_ROOM: usize = 64;

struct Groups {
    /// Distinct group-by dimensions: (dimension, shift and mask in the
    /// joint key, offset in the group key).
    gdims: Vec<(usize, u32, u64, u32)>,
    /// Group key → group, as a table when the group key is small.
    table: Option<Vec<u32>>,
    map: AHashMap<u64, u32>,
    keys: Vec<u64>,
    /// The accumulators of a new group, one per aggregate.
    fresh: Vec<Acc>,
    /// `groups × aggs`.
    accs: Vec<Acc>,
    unknown: UnknownCells,
}

/// One aggregate's running value, with what it reads from a cell.
#[derive(Clone, Debug)]
enum Acc {
    Rows(i64),
    NonNull {
        m: usize,
        n: i64,
    },
    Sum {
        m: usize,
        nn: i64,
        pos: i128,
        neg: i128,
    },
    Min {
        m: usize,
        v: Option<i64>,
    },
    Max {
        m: usize,
        v: Option<i64>,
    },
    Distinct {
        shift: u32,
        mask: u64,
        null: Option<Code>,
        bits: Vec<u64>,
    },
}

/// Group keys up to this many bits index a table instead of a hash map.
const TABLE_BITS: u32 = 12;

fn mask_of(bits: u32) -> u64 {
    if bits == 0 {
        0
    } else {
        u64::MAX >> (64 - bits)
    }
}

impl Groups {
    fn new(st: &State, q: &SliceQuery) -> Groups {
        let layout = &*st.layout;
        let mut gdims: Vec<(usize, u32, u64, u32)> = Vec::new();
        let mut off = 0;
        for &d in &q.group_by {
            if gdims.iter().all(|g| g.0 != d) {
                gdims.push((d, layout.shift[d], mask_of(layout.bits[d]), off));
                off += layout.bits[d];
            }
        }
        let fresh: Vec<Acc> = q
            .aggs
            .iter()
            .map(|a| match *a {
                Agg::CountStar => Acc::Rows(0),
                Agg::Count(m) => Acc::NonNull { m, n: 0 },
                Agg::Sum(m) => Acc::Sum {
                    m,
                    nn: 0,
                    pos: 0,
                    neg: 0,
                },
                Agg::Min(m) => Acc::Min { m, v: None },
                Agg::Max(m) => Acc::Max { m, v: None },
                Agg::CountDistinct(d) => Acc::Distinct {
                    shift: layout.shift[d],
                    mask: mask_of(layout.bits[d]),
                    null: st.dicts[d].null_code(),
                    bits: vec![0; st.dicts[d].len().div_ceil(64)],
                },
            })
            .collect();
        // Room for the groups there can be, up to a few dozen, so that
        // the usual dashboard slice never grows its vectors.
        let room = if off <= TABLE_BITS {
            1usize << off
        } else {
            usize::MAX
        }
        .min(GROUPS_ROOM);
        let mut g = Groups {
            gdims,
            table: (off <= TABLE_BITS).then(|| vec![u32::MAX; 1 << off]),
            map: AHashMap::new(),
            keys: Vec::with_capacity(room),
            accs: Vec::with_capacity(room * fresh.len()),
            fresh,
            unknown: Vec::new(),
        };
        if q.group_by.is_empty() {
            g.group(0);
        }
        g
    }

    #[inline]
    fn group(&mut self, gk: u64) -> usize {
        let slot = match &mut self.table {
            Some(t) => &mut t[gk as usize],
            None => self.map.entry(gk).or_insert(u32::MAX),
        };
        if *slot == u32::MAX {
            *slot = self.keys.len() as u32;
            self.keys.push(gk);
            self.accs.extend_from_slice(&self.fresh);
        }
        *slot as usize
    }

    #[inline]
    fn add(&mut self, key: JointKey, count: i64, stats: CellRef<'_>) {
        let gk = self.gdims.iter().fold(0, |k, &(_, shift, mask, off)| {
            k | (key.wrapping_shr(shift) & mask) << off
        });
        let g = self.group(gk);
        let n = self.fresh.len();
        let unknown = &mut self.unknown;
        for acc in &mut self.accs[g * n..(g + 1) * n] {
            match acc {
                Acc::Rows(c) => *c += count,
                Acc::NonNull { m, n } => *n += stats.stat(*m).nn,
                Acc::Sum { m, nn, pos, neg } => {
                    let s = stats.stat(*m);
                    *nn += s.nn;
                    *pos += s.pos;
                    *neg += s.neg;
                }
                Acc::Min { m, v } => {
                    let s = stats.stat(*m);
                    if s.nn > 0 {
                        if s.flags & MIN_UNKNOWN != 0 {
                            unknown.push((key, *m));
                        } else {
                            *v = Some(v.map_or(s.min, |v| v.min(s.min)));
                        }
                    }
                }
                Acc::Max { m, v } => {
                    let s = stats.stat(*m);
                    if s.nn > 0 {
                        if s.flags & MAX_UNKNOWN != 0 {
                            unknown.push((key, *m));
                        } else {
                            *v = Some(v.map_or(s.max, |v| v.max(s.max)));
                        }
                    }
                }
                Acc::Distinct {
                    shift,
                    mask,
                    null,
                    bits,
                } => {
                    let c = (key.wrapping_shr(*shift) & *mask) as Code;
                    if Some(c) != *null {
                        bits[c as usize / 64] |= 1 << (c % 64);
                    }
                }
            }
        }
    }

    fn finish(mut self, group_by: &[usize], cells_visited: usize) -> (SliceResult, UnknownCells) {
        let n = self.fresh.len();
        let gdims = &self.gdims;
        let accs = &self.accs;
        let groups = self
            .keys
            .iter()
            .enumerate()
            .map(|(g, &gk)| Group {
                key: group_by
                    .iter()
                    .map(|&d| {
                        let &(_, _, mask, off) = gdims
                            .iter()
                            .find(|g| g.0 == d)
                            .expect("a group-by dimension");
                        (gk.wrapping_shr(off) & mask) as Code
                    })
                    .collect(),
                values: accs[g * n..(g + 1) * n]
                    .iter()
                    .map(|a| match a {
                        Acc::Rows(c) | Acc::NonNull { n: c, .. } => AggValue::Count(*c),
                        Acc::Sum { nn, pos, neg, .. } => AggValue::Sum {
                            nn: *nn,
                            pos: *pos,
                            neg: *neg,
                        },
                        Acc::Min { v, .. } => AggValue::Min(*v),
                        Acc::Max { v, .. } => AggValue::Max(*v),
                        Acc::Distinct { bits, .. } => {
                            AggValue::Count(bits.iter().map(|w| i64::from(w.count_ones())).sum())
                        }
                    })
                    .collect(),
            })
            .collect();
        self.unknown.sort_unstable();
        self.unknown.dedup();
        (
            SliceResult {
                groups,
                cells_visited,
            },
            self.unknown,
        )
    }
}

/// Evaluate `q` over `st`: the groups, and the cells whose needed extremum
/// is unknown (the groups' MIN/MAX are then not to be trusted). Checks the
/// dimension and measure indexes; the caller checks fault and foreign values.
pub(crate) fn run(st: &State, q: &SliceQuery) -> Result<(SliceResult, UnknownCells), PlaneError> {
    run_as(st, q, None)
}

/// [`run`], with the choice between probing keys (`Some(true)`) and
/// scanning cells (`Some(false)`) forced for tests.
fn run_as(
    st: &State,
    q: &SliceQuery,
    probe: Option<bool>,
) -> Result<(SliceResult, UnknownCells), PlaneError> {
    let (nd, nm) = (st.dicts.len(), st.foreign.len());
    let bad_dim = |index| PlaneError::BadIndex {
        what: "dimension",
        index,
        count: nd,
    };
    let mut used = Vec::new();
    q.filter.dims(&mut used);
    if let Some(&d) = used.iter().chain(&q.group_by).find(|&&d| d >= nd) {
        return Err(bad_dim(d));
    }
    for agg in &q.aggs {
        match *agg {
            Agg::CountStar => {}
            Agg::CountDistinct(d) if d >= nd => return Err(bad_dim(d)),
            Agg::CountDistinct(_) => {}
            Agg::Count(m) | Agg::Sum(m) | Agg::Min(m) | Agg::Max(m) => {
                if m >= nm {
                    return Err(PlaneError::BadIndex {
                        what: "measure",
                        index: m,
                        count: nm,
                    });
                }
            }
        }
    }

    // `COUNT(*)` of everything is the plane's row count: no cell is read
    // (it was a scan of every cell, 56M instructions at 200,000 cells).
    if q.filter == Pred::Const(Truth::True)
        && q.group_by.is_empty()
        && q.aggs.iter().all(|a| *a == Agg::CountStar)
    {
        let values = vec![AggValue::Count(st.rows); q.aggs.len()];
        return Ok((
            SliceResult {
                groups: vec![Group {
                    key: Vec::new(),
                    values,
                }],
                cells_visited: 0,
            },
            Vec::new(),
        ));
    }

    // Allowed codes per dimension, from the conjuncts over one dimension,
    // each evaluated exactly for every code: a key made of allowed codes
    // makes all of them True, so only the other conjuncts (the residual)
    // remain to evaluate per cell.
    let mut allowed: Vec<Option<Vec<Code>>> = vec![None; nd];
    let mut residual = Vec::new();
    let mut nothing = false;
    let mut conjuncts = Vec::new();
    q.filter.conjuncts(&mut conjuncts);
    for c in conjuncts {
        let mut ds = Vec::new();
        c.dims(&mut ds);
        ds.sort_unstable();
        ds.dedup();
        match ds[..] {
            [] => nothing |= c.eval(&|_| 0) != Truth::True,
            [d] => {
                let ok: Vec<Code> = (0..st.dicts[d].len() as Code)
                    .filter(|&code| c.eval(&|_| code) == Truth::True)
                    .collect();
                allowed[d] = Some(match allowed[d].take() {
                    None => ok,
                    Some(prev) => prev
                        .into_iter()
                        .filter(|x| ok.binary_search(x).is_ok())
                        .collect(),
                });
            }
            _ => residual.push(c),
        }
    }

    let layout = &*st.layout;
    let mut groups = Groups::new(st, q);
    let mut visited = 0usize;
    let code = |key: JointKey| move |d| layout.code(key, d);
    if !nothing {
        let lists: Vec<Vec<Code>> = allowed
            .into_iter()
            .enumerate()
            .map(|(d, a)| a.unwrap_or_else(|| (0..st.dicts[d].len() as Code).collect()))
            .collect();
        let product = lists.iter().fold(1u128, |p, l| p * l.len() as u128);
        // A probe by key costs about one slot of a dense scan, and about
        // four cells of a sparse scan (a hash lookup against a walk).
        let probe_weight = if st.cells.is_dense() { 1 } else { 4 };
        if probe.unwrap_or(product * probe_weight * 2 <= st.cells.scan_cost() as u128) {
            enumerate(&lists, layout, |key| {
                visited += 1;
                if let Some((count, stats)) = st.cells.get(key) {
                    if residual.iter().all(|c| c.eval(&code(key)) == Truth::True) {
                        groups.add(key, count, stats);
                    }
                }
            });
        } else {
            visited = st.cells.scan_cost();
            st.cells.for_each(|key, count, stats| {
                if q.filter.eval(&code(key)) == Truth::True {
                    groups.add(key, count, stats);
                }
            });
        }
    }
    Ok(groups.finish(&q.group_by, visited))
}

/// Call `f` with every key whose code of each dimension is in its list.
/// Dimension 0 (the lowest bits) turns fastest, so keys come in
/// ascending runs that stay within a page.
fn enumerate(lists: &[Vec<Code>], layout: &Layout, mut f: impl FnMut(JointKey)) {
    if lists.iter().any(|l| l.is_empty()) {
        return;
    }
    if lists.is_empty() {
        return f(0);
    }
    // Each code already in its place: fields are disjoint, so a key is the
    // OR of one entry per dimension and XOR takes an entry out again.
    let placed: Vec<Vec<JointKey>> = lists
        .iter()
        .enumerate()
        .map(|(d, l)| l.iter().map(|&c| layout.place(d, c)).collect())
        .collect();
    let (inner, outer) = placed.split_first().expect("at least one dimension");
    let mut at = vec![0usize; outer.len()];
    let mut key = outer.iter().fold(0, |k, p| k | p[0]);
    loop {
        for &k0 in inner {
            f(key | k0);
        }
        let mut d = 0;
        loop {
            let Some(p) = outer.get(d) else { return };
            key ^= p[at[d]];
            at[d] += 1;
            if at[d] == p.len() {
                at[d] = 0;
            }
            key |= p[at[d]];
            if at[d] != 0 {
                break;
            }
            d += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::*;
    use crate::{DimValue, MeasureValue, Plane, PlaneConfig};

    fn plane(nd: usize, rows: &[(Vec<i64>, i64)]) -> Plane {
        let mut p = Plane::new(PlaneConfig::new(
            (0..nd).map(|d| format!("d{d}")).collect(),
            vec!["m".into()],
        ));
        for (dims, m) in rows {
            let dims: Vec<DimValue> = dims
                .iter()
                .map(|&v| {
                    if v < 0 {
                        DimValue::Null
                    } else {
                        DimValue::Int(v)
                    }
                })
                .collect();
            p.insert(&dims, &[MeasureValue::Int(*m)]).unwrap();
        }
        p
    }

    fn all(p: &Plane, filter: Pred, group_by: Vec<usize>) -> SliceQuery {
        let nd = p.config().dims.len();
        let mut aggs = vec![
            Agg::CountStar,
            Agg::Count(0),
            Agg::Sum(0),
            Agg::Min(0),
            Agg::Max(0),
        ];
        aggs.extend((0..nd).map(Agg::CountDistinct));
        SliceQuery {
            filter,
            group_by,
            aggs,
        }
    }

    fn eq(dim: usize, code: usize) -> Pred {
        let mut truth = vec![Truth::False; code + 1];
        truth[code] = Truth::True;
        Pred::Leaf { dim, truth }
    }

    #[test]
    fn an_equality_filter_visits_only_its_slice() {
        let rows: Vec<(Vec<i64>, i64)> = (0..4096)
            .map(|i| (vec![i % 16, i / 16 % 16, i / 256], i))
            .collect();
        let p = plane(3, &rows);
        let r = p.slice(&all(&p, eq(1, 3), vec![])).unwrap();
        assert_eq!(r.cells_visited, 256);
        assert_eq!(r.groups[0].values[0], AggValue::Count(256));
        let both = Pred::And(vec![eq(0, 5), Pred::And(vec![eq(2, 7), eq(2, 7)])]);
        let r = p.slice(&all(&p, both, vec![1])).unwrap();
        assert_eq!((r.cells_visited, r.groups.len()), (16, 16));
    }

    #[test]
    fn empty_slices_have_one_group_without_group_by_and_none_with_it() {
        let p = plane(2, &[]);
        let r = p.slice(&all(&p, Pred::Const(Truth::True), vec![])).unwrap();
        assert_eq!(
            r.groups,
            vec![Group {
                key: vec![],
                values: vec![
                    AggValue::Count(0),
                    AggValue::Count(0),
                    AggValue::Sum {
                        nn: 0,
                        pos: 0,
                        neg: 0
                    },
                    AggValue::Min(None),
                    AggValue::Max(None),
                    AggValue::Count(0),
                    AggValue::Count(0),
                ]
            }]
        );
        assert!(p
            .slice(&all(&p, Pred::Const(Truth::True), vec![0]))
            .unwrap()
            .groups
            .is_empty());
        let p = plane(2, &[(vec![1, 2], 3)]);
        let r = p.slice(&all(&p, Pred::Const(Truth::Null), vec![])).unwrap();
        assert_eq!(
            (r.groups[0].values[0], r.cells_visited),
            (AggValue::Count(0), 0)
        );
        assert!(
            p.slice(&all(&p, eq(0, 1), vec![1]))
                .unwrap()
                .groups
                .is_empty(),
            "code 1 is not in the dictionary"
        );
    }

    #[test]
    fn count_distinct_skips_null() {
        let p = plane(
            2,
            &[
                (vec![-1, 0], 1),
                (vec![4, 0], 1),
                (vec![5, 1], 1),
                (vec![4, 1], 1),
            ],
        );
        let q = SliceQuery {
            filter: Pred::Const(Truth::True),
            group_by: vec![1],
            aggs: vec![Agg::CountDistinct(0)],
        };
        let mut groups: Vec<(Vec<Code>, AggValue)> = p
            .slice(&q)
            .unwrap()
            .groups
            .into_iter()
            .map(|g| (g.key, g.values[0]))
            .collect();
        groups.sort_by_key(|g| g.0.clone());
        assert_eq!(
            groups,
            vec![(vec![0], AggValue::Count(1)), (vec![1], AggValue::Count(2))]
        );
    }

    fn pred(nd: usize) -> impl Strategy<Value = Pred> {
        let truth = prop_oneof![Just(Truth::True), Just(Truth::False), Just(Truth::Null)];
        let leaf = prop_oneof![
            (0..nd, vec(truth, 0..10)).prop_map(|(dim, truth)| Pred::Leaf { dim, truth }),
            (0..nd, 0usize..10).prop_map(|(d, c)| eq(d, c)),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                inner.clone().prop_map(|p| Pred::Not(Box::new(p))),
                vec(inner.clone(), 0..4).prop_map(Pred::And),
                vec(inner, 0..3).prop_map(Pred::Or),
            ]
        })
    }

    fn sorted(r: SliceResult) -> Vec<Group> {
        let mut g = r.groups;
        g.sort_by(|a, b| a.key.cmp(&b.key));
        g
    }

    proptest! {
        #[test]
        fn probing_keys_equals_scanning_cells(
            (nd, rows, filter, group_by) in (1usize..=4).prop_flat_map(|nd| (
                Just(nd),
                vec((vec(-1i64..9, nd), -5i64..5), 0..80),
                pred(nd),
                vec(0..nd, 0..=2),
            )),
            deletes in 0usize..20,
        ) {
            let mut p = plane(nd, &rows);
            for (dims, m) in rows.iter().take(deletes) {
                let dims: Vec<DimValue> = dims.iter().map(|&v| if v < 0 { DimValue::Null } else { DimValue::Int(v) }).collect();
                p.delete(&dims, &[MeasureValue::Int(*m)]).unwrap();
            }
            let q = all(&p, filter, group_by);
            let probe = run_as(&p.state, &q, Some(true)).unwrap();
            let scan = run_as(&p.state, &q, Some(false)).unwrap();
            prop_assert_eq!(&probe.1, &scan.1);
            prop_assert_eq!(sorted(probe.0), sorted(scan.0));
        }
    }
}
