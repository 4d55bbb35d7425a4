//! The plane: dictionaries, layout and cells behind one type.

use std::fmt;
use std::sync::Arc;

use crate::cells::{
    absorb_cell, apply_row, check_cell, Cells, Stats, StatsMut, MAX_UNKNOWN, MIN_UNKNOWN,
};
use crate::layout::Layout;
use crate::mem::{arc_bytes, arc_str_bytes, vec_bytes};
use crate::slice::UnknownCells;
use crate::state::PlaneConfig;
use crate::state::{State, Touched};
use crate::{
    Agg, Code, Dictionary, DimRef, DimValue, JointKey, MeasureValue, PlaneError, SliceQuery,
    SliceResult,
};

/// The working copy of a plane. Cloning is cheap (shared pages); a write
/// after a clone copies only the pages it touches.
///
/// Writes: any `Err` from a write leaves the plane out of service (see
/// [`Plane::fault`]). While it is out of service, writes are ignored and
/// return `Ok(())` (and [`Plane::encode`] returns key 0), so a change feed
/// needs no special case; reads say why through `Err(OutOfService)`.
#[derive(Clone)]
pub struct Plane {
    pub(crate) state: Arc<State>,
    /// The code each dimension encoded last: the common delta repeats it.
    /// Not part of the state; checked against the dictionary on use.
    pub(crate) last: Vec<Code>,
}

/// An immutable view of a plane at one moment: `Send + Sync`, cheap to take
/// and to hold; any number of readers may slice it while the writer goes on.
#[derive(Clone, Debug)]
pub struct Snapshot(pub(crate) Plane);

impl fmt::Debug for Plane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = &self.state;
        f.debug_struct("Plane")
            .field("dims", &st.config.dims)
            .field("measures", &st.config.measures)
            .field("bits", &st.layout.bits)
            .field("rows", &st.rows)
            .field("cells", &st.nonempty)
            .field("fault", &st.fault)
            .finish()
    }
}

impl Plane {
    /// An empty plane.
    pub fn new(config: PlaneConfig) -> Plane {
        let (d, m) = (config.dims.len(), config.measures.len());
        let state = State {
            config: Arc::new(config),
            dicts: (0..d).map(|_| Arc::default()).collect(),
            layout: Arc::new(Layout::for_lens(vec![0; d])),
            cells: Cells::new(0, m),
            rows: 0,
            nonempty: 0,
            foreign: vec![0; m],
            fault: None,
            touched: Touched::default(),
        };
        Plane {
            state: Arc::new(state),
            last: Vec::new(),
        }
    }

    pub fn config(&self) -> &PlaneConfig {
        &self.state.config
    }

    /// The dictionary of dimension `dim`.
    ///
    /// # Panics
    /// If `dim` is not a dimension of the plane.
    pub fn dict(&self, dim: usize) -> &Dictionary {
        &self.state.dicts[dim]
    }

    /// Bits of dimension `dim` in the joint key.
    ///
    /// # Panics
    /// If `dim` is not a dimension of the plane.
    pub fn dim_bits(&self, dim: usize) -> u32 {
        self.state.layout.bits[dim]
    }

    /// Total bits of the joint key.
    pub fn joint_bits(&self) -> u32 {
        self.state.layout.total
    }

    /// Whether the cells are stored densely (by key) rather than in hash maps.
    pub fn is_dense(&self) -> bool {
        self.state.cells.is_dense()
    }

    /// Rows held (sum of cell counts).
    pub fn rows(&self) -> i64 {
        self.state.rows
    }

    /// Non-empty cells.
    pub fn cells(&self) -> usize {
        self.state.nonempty
    }

    /// Exact heap bytes of the cells, dictionaries and layout (and the small
    /// state around them), computed from the containers' capacities. Blocks
    /// shared with a snapshot count in full here and in the snapshot.
    pub fn bytes(&self) -> usize {
        let st = &*self.state;
        let names = |v: &Vec<String>| {
            vec_bytes::<String>(v.capacity()) + v.iter().map(String::capacity).sum::<usize>()
        };
        let config =
            arc_bytes::<PlaneConfig>() + names(&st.config.dims) + names(&st.config.measures);
        let dicts = vec_bytes::<Arc<Dictionary>>(st.dicts.capacity())
            + st.dicts
                .iter()
                .map(|d| arc_bytes::<Dictionary>() + d.heap_bytes())
                .sum::<usize>();
        let layout = arc_bytes::<Layout>()
            + vec_bytes::<u32>(st.layout.bits.capacity())
            + vec_bytes::<u32>(st.layout.shift.capacity());
        arc_bytes::<State>()
            + config
            + dicts
            + layout
            + st.cells.heap_bytes()
            + vec_bytes::<i64>(st.foreign.capacity())
            + st.fault.as_ref().map_or(0, |f| arc_str_bytes(f.len()))
            + vec_bytes::<Code>(self.last.capacity())
    }

    /// Why the plane is out of service, if it is. A fault is part of the
    /// state: restoring a snapshot taken before the fault clears it.
    pub fn fault(&self) -> Option<&str> {
        self.state.fault.as_deref()
    }

    /// Put the plane out of service with a reason (e.g. the caller met a
    /// value it cannot encode). Further deltas are ignored until a restore.
    /// A plane already out of service keeps its first reason.
    pub fn set_fault(&mut self, reason: String) {
        if self.state.fault.is_none() {
            Arc::make_mut(&mut self.state).fault = Some(reason.into());
        }
    }

    /// Count of non-INTEGER (REAL/TEXT/BLOB) values held in measure `m`
    /// (0 for a measure the plane does not have).
    pub fn foreign(&self, m: usize) -> i64 {
        self.state.foreign.get(m).copied().unwrap_or(0)
    }

    /// Encode dimension values to a joint key, adding dictionary codes (and
    /// re-packing the cells) as needed. On cap overflow the plane faults.
    pub fn encode(&mut self, dims: &[DimValue]) -> Result<JointKey, PlaneError> {
        self.encode_by(dims.len(), |i| dims[i].as_ref())
    }

    /// [`Plane::encode`] from borrowed values; allocates only for a value the
    /// dictionary has not seen (keep a per-dimension last-value fast path).
    pub fn encode_ref(&mut self, dims: &[DimRef<'_>]) -> Result<JointKey, PlaneError> {
        self.encode_by(dims.len(), |i| dims[i])
    }

    #[inline]
    fn encode_by<'v>(
        &mut self,
        n: usize,
        get: impl Fn(usize) -> DimRef<'v>,
    ) -> Result<JointKey, PlaneError> {
        if self.state.fault.is_some() {
            return Ok(0);
        }
        let d = self.state.dicts.len();
        if n != d {
            let e = PlaneError::Arity {
                what: "dimension values",
                expected: d,
                got: n,
            };
            return Err(Arc::make_mut(&mut self.state).fail(e));
        }
        if self.last.len() != d {
            self.last = vec![Code::MAX; d];
        }
        let mut key = 0;
        let mut grew = false;
        for i in 0..d {
            let v = get(i);
            let dict = &self.state.dicts[i];
            let code = if dict.is(self.last[i], v) {
                self.last[i]
            } else if let Some(c) = dict.code_ref(v) {
                c
            } else {
                let st = Arc::make_mut(&mut self.state);
                match st.push_value(i, v) {
                    Ok(c) => {
                        grew = true;
                        c
                    }
                    Err(e) => {
                        st.fit_layout();
                        return Err(st.fail(e));
                    }
                }
            };
            self.last[i] = code;
            if !grew {
                key |= self.state.layout.place(i, code);
            }
        }
        if grew {
            let st = Arc::make_mut(&mut self.state);
            st.fit_layout();
            key = self
                .last
                .iter()
                .enumerate()
                .fold(0, |k, (i, &c)| k | st.layout.place(i, c));
        }
        Ok(key)
    }

    /// The code of a value of dimension `dim`, if it has one (no insertion).
    pub fn code_of(&self, dim: usize, value: &DimValue) -> Option<Code> {
        self.state.dicts.get(dim)?.code(value)
    }

    /// Apply one weighted row to a cell: `weight` +1 inserts, −1 deletes.
    /// `key` must come from [`Plane::encode`] since the last re-pack.
    /// A delete the cell cannot hold (its count, non-NULL count or sums
    /// would go negative, or the value lies outside the cell's MIN/MAX)
    /// changes nothing and faults the plane with `NegativeCount`.
    #[inline]
    pub fn apply_encoded(
        &mut self,
        key: JointKey,
        weight: i64,
        measures: &[MeasureValue],
    ) -> Result<(), PlaneError> {
        if self.state.fault.is_some() {
            return Ok(());
        }
        let st = Arc::make_mut(&mut self.state);
        if measures.len() != st.foreign.len() {
            let e = PlaneError::Arity {
                what: "measure values",
                expected: st.foreign.len(),
                got: measures.len(),
            };
            return Err(st.fail(e));
        }
        if !st.layout.holds(key) {
            let e = PlaneError::Invariant(format!(
                "key {key:#x} is outside the {}-bit joint",
                st.layout.total
            ));
            return Err(st.fail(e));
        }
        let foreign_ok = st
            .foreign
            .iter()
            .zip(measures)
            .all(|(&f, mv)| *mv != MeasureValue::Other || f + weight >= 0);
        if !foreign_ok {
            return Err(st.fail(PlaneError::NegativeCount));
        }
        st.touch(key);
        let res = st.cells.update(key, |c, s| {
            let was = *c;
            apply_row(c, s, weight, measures).map(|()| (was, *c))
        });
        match res {
            Ok((was, now)) => {
                st.rows += weight;
                if was == 0 && now != 0 {
                    st.nonempty += 1;
                } else if was != 0 && now == 0 {
                    st.nonempty -= 1;
                }
                for (f, mv) in st.foreign.iter_mut().zip(measures) {
                    if *mv == MeasureValue::Other {
                        *f += weight;
                    }
                }
                Ok(())
            }
            Err(e) => Err(st.fail(e)),
        }
    }

    /// Insert one row.
    pub fn insert(
        &mut self,
        dims: &[DimValue],
        measures: &[MeasureValue],
    ) -> Result<(), PlaneError> {
        let key = self.encode(dims)?;
        self.apply_encoded(key, 1, measures)
    }

    /// Delete one row (that was inserted before). A row with a value the
    /// dictionary never saw cannot be held: `NegativeCount`, and a fault.
    pub fn delete(
        &mut self,
        dims: &[DimValue],
        measures: &[MeasureValue],
    ) -> Result<(), PlaneError> {
        if self.state.fault.is_some() {
            return Ok(());
        }
        let st = &self.state;
        if dims.len() != st.dicts.len() {
            let e = PlaneError::Arity {
                what: "dimension values",
                expected: st.dicts.len(),
                got: dims.len(),
            };
            return Err(Arc::make_mut(&mut self.state).fail(e));
        }
        let key = dims.iter().enumerate().try_fold(0, |k, (i, v)| {
            Some(k | st.layout.place(i, st.dicts[i].code(v)?))
        });
        match key {
            Some(key) => self.apply_encoded(key, -1, measures),
            None => Err(Arc::make_mut(&mut self.state).fail(PlaneError::NegativeCount)),
        }
    }

    /// An update: delete the old row, insert the new one.
    pub fn update(
        &mut self,
        old_dims: &[DimValue],
        old_measures: &[MeasureValue],
        new_dims: &[DimValue],
        new_measures: &[MeasureValue],
    ) -> Result<(), PlaneError> {
        self.delete(old_dims, old_measures)?;
        self.insert(new_dims, new_measures)
    }

    /// Cells whose MIN/MAX is unknown among those `q` would visit for the
    /// aggregates it asks (empty when the slice can be answered, and when it
    /// fails for another reason), sorted by key and measure.
    pub fn unknown_extrema(&self, q: &SliceQuery) -> UnknownCells {
        if self.state.fault.is_some() {
            return Vec::new();
        }
        crate::slice::run(&self.state, q)
            .map(|(_, u)| u)
            .unwrap_or_default()
    }

    /// Set the exact MIN and MAX of measure `m` in cell `key` (recomputed by
    /// the caller from the base table). `None` leaves that side as it was;
    /// an empty cell, or one with no value of `m`, has nothing to set.
    pub fn set_extrema(&mut self, key: JointKey, m: usize, min: Option<i64>, max: Option<i64>) {
        let st = &self.state;
        if st.fault.is_some()
            || m >= st.foreign.len()
            || st.cells.get(key).is_none_or(|(_, s)| s.stat(m).nn == 0)
        {
            return;
        }
        let st = Arc::make_mut(&mut self.state);
        st.touch(key);
        st.cells.update(key, |_, cell| {
            let mut s = cell.stat(m);
            if let Some(v) = min {
                s.min = v;
                s.flags &= !MIN_UNKNOWN;
            }
            if let Some(v) = max {
                s.max = v;
                s.flags &= !MAX_UNKNOWN;
            }
            cell.set_stat(m, s);
        });
    }

    /// Decode a joint key to one code per dimension.
    pub fn decode(&self, key: JointKey) -> Vec<Code> {
        let layout = &self.state.layout;
        (0..layout.bits.len())
            .map(|d| layout.code(key, d))
            .collect()
    }

    /// Evaluate a slice. Errors: out of service, a measure with foreign
    /// values, or MIN/MAX unknown in a visited cell.
    pub fn slice(&self, q: &SliceQuery) -> Result<SliceResult, PlaneError> {
        let st = &*self.state;
        if let Some(f) = &st.fault {
            return Err(PlaneError::OutOfService(f.to_string()));
        }
        for agg in &q.aggs {
            if let Agg::Count(m) | Agg::Sum(m) | Agg::Min(m) | Agg::Max(m) = *agg {
                match st.foreign.get(m) {
                    None => {
                        return Err(PlaneError::BadIndex {
                            what: "measure",
                            index: m,
                            count: st.foreign.len(),
                        })
                    }
                    Some(&f) if f > 0 => {
                        return Err(PlaneError::NonIntegerMeasure(st.config.measures[m].clone()))
                    }
                    Some(_) => {}
                }
            }
        }
        let (result, unknown) = crate::slice::run(st, q)?;
        if unknown.is_empty() {
            Ok(result)
        } else {
            Err(PlaneError::UnknownExtremum { cells: unknown })
        }
    }

    /// Add another plane over the same definition, cell by cell. Codes are
    /// matched by value, so the two dictionaries may differ. Merging a plane
    /// that is out of service puts this one out of service too.
    pub fn merge(&mut self, other: &Plane) -> Result<(), PlaneError> {
        if self.state.config != other.state.config {
            return Err(PlaneError::Incompatible);
        }
        if self.state.fault.is_some() {
            return Ok(());
        }
        let st = Arc::make_mut(&mut self.state);
        let o = &*other.state;
        if let Some(reason) = &o.fault {
            st.fault = Some(Arc::clone(reason));
            return Err(PlaneError::OutOfService(reason.to_string()));
        }
        st.untrack();
        let maps = st.codes_of(o.dicts.iter().map(|d| d.values()))?;
        let layout = Arc::clone(&st.layout);
        let nonempty = &mut st.nonempty;
        let cells = &mut st.cells;
        let m = st.foreign.len();
        o.cells.for_each(|key, count, stats| {
            let to = (0..maps.len()).fold(0, |k, d| {
                k | layout.place(d, maps[d][o.layout.code(key, d) as usize])
            });
            cells.update(to, |c, s| {
                *nonempty += usize::from(*c == 0);
                absorb_cell(c, s, count, &stats, m);
            });
        });
        st.rows += o.rows;
        for (f, of) in st.foreign.iter_mut().zip(&o.foreign) {
            *f += of;
        }
        Ok(())
    }

    /// Begin a new delta epoch at the current state: a snapshot taken now
    /// and this plane's later states are told apart by the cells written
    /// since ([`Plane::image_since`] then costs those cells, not the
    /// plane's size). Call it where a snapshot is kept as the base of the
    /// next delta.
    pub fn begin_delta_epoch(&mut self) {
        Arc::make_mut(&mut self.state).touched = Touched::begin();
    }

    /// An immutable view of the current state: one `Arc` clone.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot(Plane {
            state: Arc::clone(&self.state),
            last: Vec::new(),
        })
    }

    /// Rewind the working copy to a snapshot: one `Arc` clone. The blocks
    /// written since are dropped when nothing else holds them.
    pub fn restore(&mut self, snap: &Snapshot) {
        self.state = Arc::clone(&snap.0.state);
    }

    /// Whether the working copy is still exactly `snap`: nothing written
    /// since it was taken (or restored). O(1), a pointer comparison.
    pub fn is_at(&self, snap: &Snapshot) -> bool {
        Arc::ptr_eq(&self.state, &snap.0.state)
    }

    /// Check every invariant (listed in `docs/design.md`); `Err` names the
    /// first one broken.
    pub fn validate(&self) -> Result<(), PlaneError> {
        self.check().map_err(PlaneError::Invariant)
    }

    fn check(&self) -> Result<(), String> {
        let st = &*self.state;
        let (nd, nm) = (st.config.dims.len(), st.config.measures.len());
        if st.dicts.len() != nd || st.layout.bits.len() != nd || st.foreign.len() != nm {
            return Err(format!("{nd} dimensions and {nm} measures, but {} dictionaries, {} layout fields and {} foreign counts", st.dicts.len(), st.layout.bits.len(), st.foreign.len()));
        }
        for (d, dict) in st.dicts.iter().enumerate() {
            dict.check()
                .map_err(|e| format!("dictionary of {}: {e}", st.config.dims[d]))?;
            if dict.len() > st.config.cap {
                return Err(format!(
                    "dictionary of {} holds {} values, over the cap {}",
                    st.config.dims[d],
                    dict.len(),
                    st.config.cap
                ));
            }
        }
        let fitted = Layout::for_lens(st.dicts.iter().map(|d| d.len()));
        if *st.layout != fitted {
            return Err(format!(
                "layout {:?} is not the fewest bits for the dictionaries ({:?})",
                st.layout.bits, fitted.bits
            ));
        }
        st.cells.check(st.layout.total, nm)?;
        let (mut rows, mut cells) = (0i64, 0usize);
        let mut broken = None;
        st.cells.for_each(|key, count, stats| {
            if broken.is_some() {
                return;
            }
            let outside = !st.layout.holds(key)
                || (0..nd).any(|d| st.layout.code(key, d) as usize >= st.dicts[d].len());
            if outside {
                broken = Some(format!(
                    "non-empty cell {key:#x} has a code outside its dictionary"
                ));
            } else if let Err(e) = check_cell(count, &stats, nm) {
                broken = Some(format!("cell {key:#x}: {e}"));
            }
            rows += count;
            cells += 1;
        });
        if let Some(e) = broken {
            return Err(e);
        }
        if rows != st.rows || cells != st.nonempty {
            return Err(format!(
                "cells hold {rows} rows in {cells} cells; the plane says {} in {}",
                st.rows, st.nonempty
            ));
        }
        if let Some(m) = st.foreign.iter().position(|&f| f < 0) {
            return Err(format!(
                "measure {} has {} foreign values",
                st.config.measures[m], st.foreign[m]
            ));
        }
        if st.fault.as_deref() == Some("") {
            return Err("out of service without a reason".into());
        }
        Ok(())
    }
}

impl Snapshot {
    /// Read access to the snapshot's state (slices, dictionaries, counts).
    pub fn plane(&self) -> &Plane {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AggValue, Pred, Truth};

    fn plane(dims: &[&str], measures: &[&str]) -> Plane {
        Plane::new(PlaneConfig::new(
            dims.iter().map(|s| s.to_string()).collect(),
            measures.iter().map(|s| s.to_string()).collect(),
        ))
    }

    fn total(p: &Plane, aggs: Vec<Agg>) -> Result<Vec<AggValue>, PlaneError> {
        let q = SliceQuery {
            filter: Pred::Const(Truth::True),
            group_by: vec![],
            aggs,
        };
        p.slice(&q)
            .map(|r| r.groups.into_iter().next().unwrap().values)
    }

    #[test]
    fn crossing_the_cap_faults_and_a_restore_clears_it() {
        let mut p = plane(&["region"], &[]);
        for i in 0..1024 {
            p.insert(&[DimValue::Int(i)], &[]).unwrap();
        }
        assert_eq!(p.dim_bits(0), 10);
        let before = p.snapshot();
        let err = p
            .insert(&[DimValue::from("one too many")], &[])
            .unwrap_err();
        assert_eq!(
            err,
            PlaneError::CapExceeded {
                dim: "region".into(),
                cap: 1024
            }
        );
        assert_eq!(
            p.fault(),
            Some("dimension region has more than 1024 distinct values")
        );
        assert_eq!(
            p.insert(&[DimValue::Int(1)], &[]),
            Ok(()),
            "deltas are ignored while out of service"
        );
        assert_eq!(p.rows(), 1024);
        assert!(matches!(
            total(&p, vec![Agg::CountStar]),
            Err(PlaneError::OutOfService(_))
        ));
        p.validate().unwrap();
        p.restore(&before);
        assert_eq!(p.fault(), None);
        assert_eq!(
            total(&p, vec![Agg::CountStar]).unwrap(),
            vec![AggValue::Count(1024)]
        );
    }

    #[test]
    fn growing_a_dimension_repacks_and_keeps_every_total() {
        let mut p = plane(&["region", "status", "month"], &["amount"]);
        let mut expect = 0i128;
        for i in 0..480i64 {
            let (r, s, m) = (i % 4, i % 5, i % 24);
            p.insert(
                &[
                    DimValue::Int(r),
                    DimValue::from(format!("s{s}").as_str()),
                    DimValue::Int(m),
                ],
                &[MeasureValue::Int(i)],
            )
            .unwrap();
            expect += i as i128;
            p.validate().unwrap();
        }
        assert_eq!(
            (p.dim_bits(0), p.dim_bits(1), p.dim_bits(2), p.joint_bits()),
            (2, 3, 5, 10)
        );
        assert_eq!((p.rows(), p.cells()), (480, 120));
        let sum = total(&p, vec![Agg::Sum(0)]).unwrap()[0]
            .exact_sum()
            .unwrap();
        assert_eq!(sum, (expect, false));
        // A fifth region takes region from 2 to 3 bits and moves every cell.
        p.insert(
            &[DimValue::Null, DimValue::from("s0"), DimValue::Int(0)],
            &[MeasureValue::Null],
        )
        .unwrap();
        assert_eq!(p.joint_bits(), 11);
        assert_eq!(
            total(&p, vec![Agg::CountStar, Agg::Sum(0)]).unwrap(),
            vec![
                AggValue::Count(481),
                AggValue::Sum {
                    nn: 480,
                    pos: expect,
                    neg: 0
                }
            ]
        );
        p.validate().unwrap();
    }

    #[test]
    fn sums_past_64_bits_stay_exact_and_are_flagged() {
        let mut p = plane(&["d"], &["m"]);
        let k = p.encode(&[DimValue::Int(0)]).unwrap();
        for _ in 0..3 {
            p.apply_encoded(k, 1, &[MeasureValue::Int(i64::MAX)])
                .unwrap();
        }
        let v = total(&p, vec![Agg::Sum(0)]).unwrap()[0];
        assert_eq!(
            v.exact_sum(),
            Some((3 * i64::MAX as i128, true)),
            "past 2^64"
        );
        p.apply_encoded(k, 1, &[MeasureValue::Int(i64::MIN)])
            .unwrap();
        p.apply_encoded(k, 1, &[MeasureValue::Int(i64::MIN)])
            .unwrap();
        let v = total(&p, vec![Agg::Sum(0)]).unwrap()[0];
        assert_eq!(
            v,
            AggValue::Sum {
                nn: 5,
                pos: 3 * i64::MAX as i128,
                neg: 2 * i64::MIN as i128
            }
        );
        assert_eq!(
            v.exact_sum(),
            Some((i64::MAX as i128 - 2, false)),
            "back in range, though partial sums left it"
        );
        p.apply_encoded(k, -1, &[MeasureValue::Int(i64::MIN)])
            .unwrap();
        p.apply_encoded(k, -1, &[MeasureValue::Int(i64::MAX)])
            .unwrap();
        let v = total(&p, vec![Agg::Sum(0)]).unwrap()[0];
        assert_eq!(
            v.exact_sum().unwrap().0,
            2 * i64::MAX as i128 + i64::MIN as i128
        );
        p.apply_encoded(k, 1, &[MeasureValue::Int(i64::MAX)])
            .unwrap();
        p.apply_encoded(k, 1, &[MeasureValue::Int(1)]).unwrap();
        let (s, flagged) = total(&p, vec![Agg::Sum(0)]).unwrap()[0]
            .exact_sum()
            .unwrap();
        assert_eq!(
            (s, flagged),
            (3 * i64::MAX as i128 + i64::MIN as i128 + 1, true),
            "just past 2^63"
        );
        p.validate().unwrap();
    }

    #[test]
    fn deleting_the_extremum_makes_min_max_unknown_until_set() {
        let mut p = plane(&["d"], &["m"]);
        for v in [10, 20, 30] {
            p.insert(&[DimValue::Int(1)], &[MeasureValue::Int(v)])
                .unwrap();
        }
        p.delete(&[DimValue::Int(1)], &[MeasureValue::Int(30)])
            .unwrap();
        let q = SliceQuery {
            filter: Pred::Const(Truth::True),
            group_by: vec![],
            aggs: vec![Agg::Min(0), Agg::Max(0)],
        };
        let key = p.code_of(0, &DimValue::Int(1)).map(JointKey::from).unwrap();
        assert_eq!(p.unknown_extrema(&q), vec![(key, 0)]);
        assert_eq!(
            p.slice(&q),
            Err(PlaneError::UnknownExtremum {
                cells: vec![(key, 0)]
            })
        );
        assert_eq!(
            total(&p, vec![Agg::Min(0)]).unwrap(),
            vec![AggValue::Min(Some(10))],
            "MIN alone is still known"
        );
        p.set_extrema(key, 0, Some(10), Some(20));
        assert!(p.unknown_extrema(&q).is_empty());
        assert_eq!(
            p.slice(&q).unwrap().groups[0].values,
            vec![AggValue::Min(Some(10)), AggValue::Max(Some(20))]
        );
        p.delete(&[DimValue::Int(1)], &[MeasureValue::Int(10)])
            .unwrap();
        p.delete(&[DimValue::Int(1)], &[MeasureValue::Int(20)])
            .unwrap();
        assert_eq!(
            p.slice(&q).unwrap().groups[0].values,
            vec![AggValue::Min(None), AggValue::Max(None)]
        );
        p.validate().unwrap();
    }

    #[test]
    fn foreign_measure_values_refuse_only_their_measure() {
        let mut p = plane(&["d"], &["a", "b"]);
        p.insert(
            &[DimValue::Int(1)],
            &[MeasureValue::Other, MeasureValue::Int(5)],
        )
        .unwrap();
        p.insert(
            &[DimValue::Int(1)],
            &[MeasureValue::Int(7), MeasureValue::Int(5)],
        )
        .unwrap();
        assert_eq!(p.foreign(0), 1);
        assert_eq!(
            total(&p, vec![Agg::Sum(0)]),
            Err(PlaneError::NonIntegerMeasure("a".into()))
        );
        assert_eq!(
            total(&p, vec![Agg::CountStar, Agg::Sum(1)]).unwrap(),
            vec![
                AggValue::Count(2),
                AggValue::Sum {
                    nn: 2,
                    pos: 10,
                    neg: 0
                }
            ]
        );
        let snap = p.snapshot();
        p.delete(
            &[DimValue::Int(1)],
            &[MeasureValue::Other, MeasureValue::Int(5)],
        )
        .unwrap();
        assert_eq!(
            total(&p, vec![Agg::Count(0), Agg::Max(0)]).unwrap(),
            vec![AggValue::Count(1), AggValue::Max(Some(7))]
        );
        p.restore(&snap);
        assert_eq!(p.foreign(0), 1);
        p.validate().unwrap();
    }

    #[test]
    fn a_delete_of_a_row_never_inserted_faults() {
        let mut p = plane(&["d"], &["m"]);
        p.insert(&[DimValue::Int(1)], &[MeasureValue::Int(3)])
            .unwrap();
        assert_eq!(
            p.delete(&[DimValue::Int(2)], &[MeasureValue::Int(3)]),
            Err(PlaneError::NegativeCount)
        );
        assert!(p.fault().is_some());
        p.validate().unwrap();
    }

    #[test]
    fn snapshots_and_planes_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Plane>();
        send_sync::<Snapshot>();
    }

    #[test]
    fn bytes_follow_cells_not_rows() {
        let mut p = plane(&["a", "b"], &["m"]);
        for i in 0..10_000i64 {
            p.insert(
                &[DimValue::Int(i % 16), DimValue::Int(i % 3)],
                &[MeasureValue::Int(i)],
            )
            .unwrap();
        }
        let b = p.bytes();
        for i in 0..10_000i64 {
            p.insert(
                &[DimValue::Int(i % 16), DimValue::Int(i % 3)],
                &[MeasureValue::Int(i)],
            )
            .unwrap();
        }
        assert_eq!(p.bytes(), b);
        assert!(b < 16 * 1024, "{b}");
    }

    #[test]
    fn a_plane_with_no_dimensions_is_one_cell() {
        let mut p = plane(&[], &["f2", "f3"]);
        p.insert(&[], &[MeasureValue::Int(1), MeasureValue::Null])
            .unwrap();
        p.insert(&[], &[MeasureValue::Int(2), MeasureValue::Int(-4)])
            .unwrap();
        assert_eq!(
            total(&p, vec![Agg::CountStar, Agg::Sum(0), Agg::Min(1)]).unwrap(),
            vec![
                AggValue::Count(2),
                AggValue::Sum {
                    nn: 2,
                    pos: 3,
                    neg: 0
                },
                AggValue::Min(Some(-4))
            ]
        );
        p.validate().unwrap();
    }
}
