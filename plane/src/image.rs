//! Images of a plane: its whole state (a checkpoint) or the cells that
//! changed since a snapshot (a delta), as bytes with a checksum.
//!
//! An image names dimension values, not codes: it carries its own small
//! dictionaries (every value of the plane for a full image, only the values
//! its cells use for a delta) and each cell's codes index those. So a delta
//! written by one process applies to a plane whose codes were assigned in
//! another order, and applying it is exact whatever codes the receiver has.
//!
//! A cell in an image is its absolute state after the change (row count and
//! each measure's `Stat`), not a difference: applying a delta sets those
//! cells, and a cell whose count is 0 is emptied. Applying the deltas of a
//! log in order therefore gives the state of the last one, and applying one
//! twice changes nothing.

use std::sync::Arc;

use crate::cells::{Cells, Stat, Stats};
use crate::layout::Layout;
use crate::plane::Plane;
use crate::state::{PlaneConfig, State, Touched};
use crate::{Code, DimValue, JointKey, PlaneError};

const MAGIC: &[u8; 4] = b"PLIM";
const VERSION: u8 = 1;
const FULL: u8 = 1;
const FAULT: u8 = 2;

/// The cells of an image, column by column (nothing allocated per cell):
/// cell `i` has the codes `codes[i·d..(i+1)·d]` into the image's `d`
/// dictionaries, the count `count[i]` and one `Stat` per measure,
/// `stats[i·m..(i+1)·m]`.
#[derive(Clone, Debug, PartialEq, Default)]
struct CellsImage {
    codes: Vec<Code>,
    count: Vec<i64>,
    stats: Vec<Stat>,
}

impl CellsImage {
    fn with_capacity(n: usize, nd: usize, m: usize) -> Self {
        CellsImage {
            codes: Vec::with_capacity(n * nd),
            count: Vec::with_capacity(n),
            stats: Vec::with_capacity(n * m),
        }
    }
    fn len(&self) -> usize {
        self.count.len()
    }
    fn is_empty(&self) -> bool {
        self.count.is_empty()
    }
    /// Each cell's codes (`nd` of them), count and stats (`m`).
    fn iter(&self, nd: usize, m: usize) -> impl Iterator<Item = (&[Code], i64, &[Stat])> {
        self.count.iter().enumerate().map(move |(i, &c)| {
            (
                &self.codes[i * nd..(i + 1) * nd],
                c,
                &self.stats[i * m..(i + 1) * m],
            )
        })
    }
}

/// A plane's state, whole or in part (see the module comment).
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    full: bool,
    dims: Vec<Vec<DimValue>>,
    cells: CellsImage,
    rows: i64,
    foreign: Vec<i64>,
    fault: Option<String>,
}

impl Image {
    /// Whether this is a whole state (a checkpoint), not a delta.
    pub fn is_full(&self) -> bool {
        self.full
    }
    /// Cells it sets.
    pub fn cells(&self) -> usize {
        self.cells.len()
    }
    /// Whether a delta sets nothing at all (no cell, same totals).
    pub fn is_empty_delta(&self, of: &Plane) -> bool {
        !self.full
            && self.cells.is_empty()
            && self.rows == of.state.rows
            && self.foreign == of.state.foreign
            && self.fault.as_deref() == of.fault()
    }
    /// The same image, marked out of service for `reason` (a receiver
    /// rebuilds instead of trusting it).
    pub fn faulted(mut self, reason: String) -> Image {
        self.fault = Some(reason);
        self
    }
    /// The fault the plane had when the image was taken.
    pub fn fault(&self) -> Option<&str> {
        self.fault.as_deref()
    }

    /// The bytes of the image, ending in a CRC-32 of all before it.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Vec::with_capacity(64 + self.cells.len() * (16 + 48 * self.foreign.len()));
        w.extend_from_slice(MAGIC);
        w.push(VERSION);
        w.push((u8::from(self.full) * FULL) | (u8::from(self.fault.is_some()) * FAULT));
        put_u32(&mut w, self.dims.len());
        put_u32(&mut w, self.foreign.len());
        for d in &self.dims {
            put_u32(&mut w, d.len());
            for v in d {
                match v {
                    DimValue::Null => w.push(0),
                    DimValue::Int(i) => {
                        w.push(1);
                        w.extend_from_slice(&i.to_le_bytes());
                    }
                    DimValue::Text(s) => {
                        w.push(2);
                        put_u32(&mut w, s.len());
                        w.extend_from_slice(s.as_bytes());
                    }
                }
            }
        }
        w.extend_from_slice(&self.rows.to_le_bytes());
        for f in &self.foreign {
            w.extend_from_slice(&f.to_le_bytes());
        }
        if let Some(f) = &self.fault {
            put_u32(&mut w, f.len());
            w.extend_from_slice(f.as_bytes());
        }
        put_u32(&mut w, self.cells.len());
        let (nd, m) = (self.dims.len(), self.foreign.len());
        for (codes, count, stats) in self.cells.iter(nd, m) {
            for &code in codes {
                w.extend_from_slice(&code.to_le_bytes());
            }
            w.extend_from_slice(&count.to_le_bytes());
            for s in stats {
                w.extend_from_slice(&s.nn.to_le_bytes());
                w.extend_from_slice(&s.pos.to_le_bytes());
                w.extend_from_slice(&s.neg.to_le_bytes());
                w.extend_from_slice(&s.min.to_le_bytes());
                w.extend_from_slice(&s.max.to_le_bytes());
                w.push(s.flags);
            }
        }
        let crc = crc32fast::hash(&w);
        w.extend_from_slice(&crc.to_le_bytes());
        w
    }

    /// Read an image back. Torn, truncated or altered bytes fail the
    /// checksum or the structure, and are never read as a state.
    pub fn decode(bytes: &[u8]) -> Result<Image, PlaneError> {
        let bad = |why: &str| PlaneError::Invariant(format!("persisted image: {why}"));
        if bytes.len() < MAGIC.len() + 2 + 4 {
            return Err(bad("truncated"));
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        let crc = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
        if crc32fast::hash(body) != crc {
            return Err(bad("checksum mismatch (torn or altered bytes)"));
        }
        let mut r = Reader { b: body, i: 0 };
        if r.take(4)? != MAGIC {
            return Err(bad("not a plane image"));
        }
        if r.u8()? != VERSION {
            return Err(bad("unknown version"));
        }
        let flags = r.u8()?;
        let ndims = r.len()?;
        let m = r.len()?;
        let mut dims = Vec::with_capacity(ndims.min(64));
        for _ in 0..ndims {
            let n = r.len()?;
            let mut vals = Vec::with_capacity(n.min(4096));
            for _ in 0..n {
                vals.push(match r.u8()? {
                    0 => DimValue::Null,
                    1 => DimValue::Int(r.i64()?),
                    2 => {
                        let n = r.len()?;
                        let s = std::str::from_utf8(r.take(n)?).map_err(|_| bad("bad text"))?;
                        DimValue::Text(Arc::from(s))
                    }
                    _ => return Err(bad("bad value tag")),
                });
            }
            dims.push(vals);
        }
        let rows = r.i64()?;
        let foreign = (0..m).map(|_| r.i64()).collect::<Result<Vec<_>, _>>()?;
        let fault = if flags & FAULT != 0 {
            let n = r.len()?;
            Some(String::from_utf8_lossy(r.take(n)?).into_owned())
        } else {
            None
        };
        let ncells = r.len()?;
        // Each cell takes at least 8 bytes: a count bigger than what is
        // left is torn, and allocates nothing.
        if ncells > (body.len() - r.i) / 8 {
            return Err(bad("truncated"));
        }
        let mut cells = CellsImage::with_capacity(ncells, ndims, m);
        for _ in 0..ncells {
            for d in &dims {
                let c = r.u32()?;
                if c as usize >= d.len() {
                    return Err(bad("a code outside its dictionary"));
                }
                cells.codes.push(c);
            }
            cells.count.push(r.i64()?);
            for _ in 0..m {
                cells.stats.push(Stat {
                    nn: r.i64()?,
                    pos: r.i128()?,
                    neg: r.i128()?,
                    min: r.i64()?,
                    max: r.i64()?,
                    flags: r.u8()?,
                });
            }
        }
        if r.i != body.len() {
            return Err(bad("trailing bytes"));
        }
        Ok(Image {
            full: flags & FULL != 0,
            dims,
            cells,
            rows,
            foreign,
            fault,
        })
    }
}

fn put_u32(w: &mut Vec<u8>, n: usize) {
    w.extend_from_slice(&(n as u32).to_le_bytes());
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], PlaneError> {
        let end = self
            .i
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| PlaneError::Invariant("persisted image: truncated".into()))?;
        let s = &self.b[self.i..end];
        self.i = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, PlaneError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, PlaneError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn len(&mut self) -> Result<usize, PlaneError> {
        self.u32().map(|n| n as usize)
    }
    fn i64(&mut self) -> Result<i64, PlaneError> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn i128(&mut self) -> Result<i128, PlaneError> {
        Ok(i128::from_le_bytes(self.take(16)?.try_into().expect("16")))
    }
}

impl Plane {
    /// The whole state as an image (a checkpoint).
    pub fn image(&self) -> Image {
        let st = &*self.state;
        let m = st.foreign.len();
        let nd = st.dicts.len();
        let mut cells = CellsImage::with_capacity(st.nonempty, nd, m);
        st.cells.for_each(|key, count, s| {
            cells.codes.extend((0..nd).map(|d| st.layout.code(key, d)));
            cells.count.push(count);
            cells.stats.extend((0..m).map(|j| s.stat(j)));
        });
        Image {
            full: true,
            dims: st.dicts.iter().map(|d| d.values().to_vec()).collect(),
            cells,
            rows: st.rows,
            foreign: st.foreign.clone(),
            fault: st.fault.as_deref().map(str::to_owned),
        }
    }

    /// The cells that changed since `base` (a snapshot of this plane), as a
    /// delta; a full image when the layout changed since (a re-pack moved
    /// every key). Cost: the block table and the blocks written since.
    pub fn image_since(&self, base: &Snapshot) -> Image {
        self.image_since_by(base, true)
    }

    /// [`Plane::image_since`]; `listed`: take the cells the delta epoch
    /// lists when it can (else, and without it, compare the blocks).
    fn image_since_by(&self, base: &Snapshot, listed: bool) -> Image {
        let st = &*self.state;
        let b = &*base.0.state;
        if st.config != b.config || !Arc::ptr_eq(&st.layout, &b.layout) {
            return self.image();
        }
        let since = if listed {
            st.touched.since(&b.touched)
        } else {
            None
        };
        let keys = match since {
            Some(mut keys) => {
                keys.sort_unstable();
                keys.dedup();
                keys
            }
            None => match st.cells.changed_since(&b.cells) {
                Some(keys) => keys,
                None => return self.image(),
            },
        };
        let m = st.foreign.len();
        let nd = st.dicts.len();
        // Local dictionaries: only the values the changed cells use.
        let mut local: Vec<ahash::AHashMap<Code, Code>> = vec![Default::default(); nd];
        let mut dims: Vec<Vec<DimValue>> = vec![Vec::new(); nd];
        let mut cells = CellsImage::default();
        for key in keys {
            let now = st.cells.get(key);
            let was = b.cells.get(key);
            let differs = match (&now, &was) {
                (None, None) => false,
                (Some((c1, s1)), Some((c2, s2))) => {
                    c1 != c2 || (0..m).any(|j| s1.stat(j) != s2.stat(j))
                }
                _ => true,
            };
            if !differs {
                continue;
            }
            cells.codes.extend((0..nd).map(|d| {
                let code = st.layout.code(key, d);
                *local[d].entry(code).or_insert_with(|| {
                    dims[d].push(st.dicts[d].value(code).clone());
                    (dims[d].len() - 1) as Code
                })
            }));
            cells.count.push(now.as_ref().map_or(0, |(c, _)| *c));
            cells.stats.extend(
                (0..m).map(|j| now.as_ref().map_or_else(Stat::default, |(_, s)| s.stat(j))),
            );
        }
        Image {
            full: false,
            dims,
            cells,
            rows: st.rows,
            foreign: st.foreign.clone(),
            fault: st.fault.as_deref().map(str::to_owned),
        }
    }

    /// A plane of `config` holding exactly a full image.
    pub fn from_image(config: PlaneConfig, img: &Image) -> Result<Plane, PlaneError> {
        if !img.full {
            return Err(PlaneError::Invariant(
                "persisted image: a delta is not a whole state".into(),
            ));
        }
        let mut p = Plane::new(config);
        p.apply_image(img)?;
        Ok(p)
    }

    /// Set the cells an image holds (a full image replaces the whole state).
    /// The image must be of this plane's definition; a value past the cap
    /// or a malformed cell is an error, and the plane is then out of service.
    pub fn apply_image(&mut self, img: &Image) -> Result<(), PlaneError> {
        let m = self.state.foreign.len();
        let nd = self.state.dicts.len();
        let arity = img.dims.len() != nd
            || img.foreign.len() != m
            || img.cells.codes.len() != img.cells.len() * nd
            || img.cells.stats.len() != img.cells.len() * m;
        if arity {
            let e = PlaneError::Incompatible;
            self.set_fault(format!("persisted image: {e}"));
            return Err(e);
        }
        if img.full {
            let config = Arc::clone(&self.state.config);
            self.state = Arc::new(State {
                dicts: vec![Arc::default(); nd],
                layout: Arc::new(Layout::for_lens(vec![0; nd])),
                cells: Cells::new(0, m),
                rows: 0,
                nonempty: 0,
                foreign: vec![0; m],
                fault: None,
                touched: Touched::default(),
                config,
            });
            self.last.clear();
        }
        let st = Arc::make_mut(&mut self.state);
        // Codes of the image's values here, adding the new ones.
        let maps = st.codes_of(img.dims.iter().map(Vec::as_slice))?;
        for (codes, count, stats) in img.cells.iter(nd, m) {
            if let Err(why) = crate::cells::check_cell(count, stats, m) {
                return Err(st.fail(PlaneError::Invariant(format!("persisted image: {why}"))));
            }
            let key: JointKey = codes.iter().enumerate().fold(0, |k, (d, &code)| {
                k | st.layout.place(d, maps[d][code as usize])
            });
            st.touch(key);
            let was = st.cells.put(key, count, stats);
            match (was != 0, count != 0) {
                (false, true) => st.nonempty += 1,
                (true, false) => st.nonempty -= 1,
                _ => {}
            }
        }
        st.rows = img.rows;
        st.foreign.clone_from(&img.foreign);
        st.fault = img.fault.as_deref().map(Arc::from);
        Ok(())
    }
}

use crate::plane::Snapshot;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DimValue as V, MeasureValue as M};

    fn plane() -> Plane {
        Plane::new(PlaneConfig::new(
            vec!["a".into(), "b".into()],
            vec!["x".into()],
        ))
    }

    #[test]
    fn a_full_image_round_trips() {
        let mut p = plane();
        for i in 0..500i64 {
            let a = V::Text(format!("r{}", i % 7).into());
            let b = if i % 5 == 0 { V::Null } else { V::Int(i % 3) };
            p.insert(&[a, b], &[M::Int(i * 1_000_000_007 - 3)]).unwrap();
        }
        p.delete(&[V::Text("r0".into()), V::Null], &[M::Int(-3)])
            .unwrap();
        let bytes = p.image().encode();
        let q = Plane::from_image(p.config().clone(), &Image::decode(&bytes).unwrap()).unwrap();
        q.validate().unwrap();
        assert_eq!(q.image(), p.image());
        assert_eq!(q.rows(), p.rows());
        assert_eq!(q.cells(), p.cells());
    }

    #[test]
    fn a_delta_applies_to_a_plane_with_other_codes() {
        let mut p = plane();
        p.insert(&[V::Text("x".into()), V::Int(1)], &[M::Int(5)])
            .unwrap();
        p.insert(&[V::Text("y".into()), V::Int(2)], &[M::Int(7)])
            .unwrap();
        p.insert(&[V::Text("w".into()), V::Int(2)], &[M::Int(-1)])
            .unwrap();
        // The receiver saw the values in another order.
        let mut q = plane();
        q.insert(&[V::Text("w".into()), V::Int(2)], &[M::Int(-1)])
            .unwrap();
        q.insert(&[V::Text("y".into()), V::Int(2)], &[M::Int(7)])
            .unwrap();
        q.insert(&[V::Text("x".into()), V::Int(1)], &[M::Int(5)])
            .unwrap();
        let base = p.snapshot();
        p.delete(&[V::Text("x".into()), V::Int(1)], &[M::Int(5)])
            .unwrap();
        p.insert(&[V::Text("z".into()), V::Int(1)], &[M::Int(9)])
            .unwrap();
        let delta = Image::decode(&p.image_since(&base).encode()).unwrap();
        assert!(!delta.is_full());
        assert_eq!(delta.cells(), 2);
        q.apply_image(&delta).unwrap();
        q.validate().unwrap();
        let total = |p: &Plane| {
            let mut v = Vec::new();
            p.state.cells.for_each(|k, c, s| {
                let codes = p.decode(k);
                let vals: Vec<_> = codes
                    .iter()
                    .enumerate()
                    .map(|(d, &c)| p.dict(d).value(c).clone())
                    .collect();
                v.push((format!("{vals:?}"), c, s.stat(0)));
            });
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        assert_eq!(total(&q), total(&p));
        assert_eq!(q.rows(), p.rows());
        // Applying it again changes nothing.
        q.apply_image(&delta).unwrap();
        assert_eq!(total(&q), total(&p));
    }

    /// The cells of a plane by value: what a delta must carry over.
    fn by_value(p: &Plane) -> Vec<(String, i64, Vec<Stat>)> {
        let m = p.state.foreign.len();
        let mut v = Vec::new();
        p.state.cells.for_each(|k, c, s| {
            let vals: Vec<_> = p
                .decode(k)
                .iter()
                .enumerate()
                .map(|(d, &c)| p.dict(d).value(c).clone())
                .collect();
            v.push((format!("{vals:?}"), c, (0..m).map(|j| s.stat(j)).collect()));
        });
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    use proptest::prelude::*;

    proptest! {
        /// A delta from the cells its epoch lists is the delta the blocks
        /// give, and carries a copy at the base to the plane, through
        /// inserts, deletes, new values that re-pack, snapshots restored,
        /// epochs begun, extrema set and images applied.
        #[test]
        fn a_listed_delta_is_the_blocks_delta(
            ops in proptest::collection::vec((0u8..10, 0i64..40, -50i64..50, 0usize..8), 1..120),
        ) {
            let mut p = plane();
            type Rows = Vec<(i64, i64, i64)>;
            let mut rows: Rows = Vec::new();
            let mut snaps: Vec<(Snapshot, Rows)> = vec![(p.snapshot(), Vec::new())];
            let row = |a: i64, b: i64| [V::Text(format!("v{a}").into()), if b % 5 == 0 { V::Null } else { V::Int(b % 9) }];
            for (op, a, x, pick) in ops {
                match op {
                    0..=3 => {
                        p.insert(&row(a, x), &[M::Int(x)]).unwrap();
                        rows.push((a, x, x));
                    }
                    4 | 5 if !rows.is_empty() => {
                        let (a, b, x) = rows.swap_remove(pick % rows.len());
                        p.delete(&row(a, b), &[M::Int(x)]).unwrap();
                    }
                    6 => snaps.push((p.snapshot(), rows.clone())),
                    7 => p.begin_delta_epoch(),
                    8 => {
                        // As a transaction's undo does: the snapshots
                        // after the one restored are gone with it (a base
                        // is always a state the working copy came from).
                        snaps.truncate(pick % snaps.len() + 1);
                        let (s, r) = snaps.last().unwrap();
                        p.restore(s);
                        rows.clone_from(r);
                    }
                    _ => {
                        if let Some(&(a, b, _)) = rows.get(pick % rows.len().max(1)) {
                            let key = {
                                let st = &p.state;
                                let r = row(a, b);
                                (0..2).fold(0, |k, d| k | st.layout.place(d, st.dicts[d].code(&r[d]).unwrap()))
                            };
                            // The exact extremes, as a rebuild of the cell reads them.
                            let xs = rows.iter().filter(|r| row(r.0, r.1) == row(a, b)).map(|r| r.2);
                            p.set_extrema(key, 0, xs.clone().min(), xs.max());
                        }
                    }
                }
                for (base, _) in &snaps {
                    let listed = p.image_since_by(base, true);
                    let blocks = p.image_since_by(base, false);
                    prop_assert_eq!(&listed, &blocks);
                    let mut q = base.plane().clone();
                    q.apply_image(&Image::decode(&listed.encode()).unwrap()).unwrap();
                    prop_assert_eq!(by_value(&q), by_value(&p));
                    prop_assert_eq!(q.rows(), p.rows());
                }
            }
        }
    }

    #[test]
    fn altered_bytes_are_refused() {
        let mut p = plane();
        p.insert(&[V::Int(1), V::Int(2)], &[M::Int(3)]).unwrap();
        let bytes = p.image().encode();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x20;
            assert!(Image::decode(&b).is_err(), "flipped byte {i} accepted");
        }
        for n in 0..bytes.len() {
            assert!(
                Image::decode(&bytes[..n]).is_err(),
                "truncated to {n} accepted"
            );
        }
    }
}
