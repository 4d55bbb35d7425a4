//! Cell storage: dense pages while the joint is small, sparse shards above.
//!
//! Both forms keep cells in blocks shared by `Arc`, reached through a
//! two-level [`Table`]: a snapshot shares every block, and the first write
//! after it copies the table's top (one pointer per `GROUP` blocks), one
//! group of `GROUP` pointers and the one block it touches
//! (`Arc::make_mut`), never the whole plane nor a table as long as it.
//!
//! A block stores each measure of each cell as a 40-byte [`Packed`]: 64-bit
//! sums and the non-NULL count with the flags. A measure whose sums leave
//! `i64` (or whose count passes 2^61) is *wide*: its `Packed` is only a
//! mark, and its exact [`Stat`] sits in the block's [`Wide`] table. The form
//! is canonical (wide exactly when the value does not fit), so a measure
//! goes back to 40 bytes as soon as deletes bring it under again.

use std::sync::Arc;

use ahash::AHashMap;

use crate::mem::{arc_bytes, table_bytes, vec_bytes};
use crate::{JointKey, MeasureValue, PlaneError};

/// Joint keys of at most this many bits are stored densely (see
/// `docs/design.md`: at 16 bits a full key space is 65,536 slots, a few MB
/// at most, and pages are only allocated where a cell was ever written).
pub(crate) const DENSE_MAX_BITS: u32 = 16;
/// Cells per dense page: 64 keeps the copy on the first write after a
/// snapshot near 4 KB per measure, and a 16-bit table at 1,024 pages.
const PAGE_BITS: u32 = 6;
const PAGE: usize = 1 << PAGE_BITS;
/// Sparse cells are spread over this many shards by a hash of the key, so a
/// write after a snapshot copies 1/4,096 of the cells (at 200,000 cells,
/// 256 shards made each commit of a persisted plane copy a shard of about
/// 800 cells: `write_cost sparse`).
const SHARD_BITS: u32 = 12;
const SHARDS: usize = 1 << SHARD_BITS;
/// Blocks per group of a [`Table`].
const GROUP_BITS: u32 = 6;
const GROUP: usize = 1 << GROUP_BITS;

/// `len` optional blocks, shared by `Arc` in groups of `GROUP`: what a write
/// after a snapshot copies is the top, one group and one block.
#[derive(Debug)]
struct Table<T> {
    groups: Arc<Vec<Arc<Vec<Option<Arc<T>>>>>>,
    len: usize,
}

impl<T> Clone for Table<T> {
    fn clone(&self) -> Self {
        Table {
            groups: self.groups.clone(),
            len: self.len,
        }
    }
}

impl<T: Clone> Table<T> {
    fn new(len: usize) -> Self {
        let n = len.div_ceil(GROUP);
        let groups = (0..n)
            .map(|g| Arc::new(vec![None; GROUP.min(len - g * GROUP)]))
            .collect();
        Table {
            groups: Arc::new(groups),
            len,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn get(&self, i: usize) -> Option<&T> {
        self.groups
            .get(i >> GROUP_BITS)?
            .get(i & (GROUP - 1))?
            .as_deref()
    }

    /// The block at `i`, made on first use with `make`, unshared first.
    #[inline]
    fn get_mut(&mut self, i: usize, make: impl FnOnce() -> T) -> &mut T {
        let groups = Arc::make_mut(&mut self.groups);
        let group = Arc::make_mut(&mut groups[i >> GROUP_BITS]);
        Arc::make_mut(group[i & (GROUP - 1)].get_or_insert_with(|| Arc::new(make())))
    }

    /// Every slot, in order.
    fn iter(&self) -> impl Iterator<Item = Option<&T>> {
        self.groups
            .iter()
            .flat_map(|g| g.iter().map(|b| b.as_deref()))
    }

    /// The indices of the slots not shared with `base` (same length).
    fn unshared(&self, base: &Table<T>) -> Vec<usize> {
        let mut out = Vec::new();
        if Arc::ptr_eq(&self.groups, &base.groups) {
            return out;
        }
        for (g, (now, was)) in self.groups.iter().zip(base.groups.iter()).enumerate() {
            if Arc::ptr_eq(now, was) {
                continue;
            }
            for (k, (x, y)) in now.iter().zip(was.iter()).enumerate() {
                let same = match (x, y) {
                    (Some(x), Some(y)) => Arc::ptr_eq(x, y),
                    (None, None) => true,
                    _ => false,
                };
                if !same {
                    out.push(g * GROUP + k);
                }
            }
        }
        out
    }

    /// Heap bytes of the table itself (not its blocks).
    fn bytes(&self) -> usize {
        arc_bytes::<Vec<Arc<Vec<Option<Arc<T>>>>>>()
            + vec_bytes::<Arc<Vec<Option<Arc<T>>>>>(self.groups.capacity())
            + self
                .groups
                .iter()
                .map(|g| {
                    arc_bytes::<Vec<Option<Arc<T>>>>() + vec_bytes::<Option<Arc<T>>>(g.capacity())
                })
                .sum::<usize>()
    }
}

/// The cell's MIN of this measure is a lower bound, not the exact minimum.
pub(crate) const MIN_UNKNOWN: u8 = 1;
/// The cell's MAX of this measure is an upper bound, not the exact maximum.
pub(crate) const MAX_UNKNOWN: u8 = 2;

/// The exact value of one measure in one cell, as the plane reasons about
/// it. With `nn == 0` it is all zeros. Otherwise `min` is at most every
/// value of the cell (and equal to the smallest one unless `MIN_UNKNOWN`),
/// `max` likewise from above: a deleted extremum leaves a bound that later
/// inserts can make exact again.
///
/// Cells do not store this form (64 bytes with `i128` alignment): they
/// store a [`Packed`] of 40 bytes, and keep a `Stat` whole only for the
/// rare measure that does not fit one (see [`Wide`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stat {
    /// Exact sum of the positive values.
    pub pos: i128,
    /// Exact sum of the negative values.
    pub neg: i128,
    /// Non-NULL values.
    pub nn: i64,
    pub min: i64,
    pub max: i64,
    pub flags: u8,
}

impl Stat {
    /// Whether a [`Packed`] holds this value exactly: both sums in `i64`,
    /// the non-NULL count under 2^61, and no flag beyond the two known.
    #[inline]
    fn fits(&self) -> bool {
        i64::try_from(self.pos).is_ok()
            && i64::try_from(self.neg).is_ok()
            && (0..NARROW_NN).contains(&self.nn)
            && self.flags & !(MIN_UNKNOWN | MAX_UNKNOWN) == 0
    }

    /// Whether removing `-w` copies of `v` (`w < 0`) is consistent with what
    /// the cell holds; a delete of a row never inserted shows up here.
    fn can_remove(&self, v: i64, w: i64, new_count: i64) -> bool {
        let nn = self.nn + w;
        if nn < 0 || nn > new_count || v < self.min || v > self.max {
            return false;
        }
        let amount = v as i128 * w as i128;
        let (pos, neg) = if v > 0 {
            (self.pos + amount, self.neg)
        } else {
            (self.pos, self.neg + amount)
        };
        pos >= 0 && neg <= 0 && (nn > 0 || (pos == 0 && neg == 0))
    }

    /// Add `w` copies of `v` (`w < 0` removes).
    #[inline]
    fn add(&mut self, v: i64, w: i64) {
        let nn = self.nn + w;
        if nn == 0 {
            *self = Stat::default();
            return;
        }
        if w > 0 {
            if self.nn == 0 {
                self.min = v;
                self.max = v;
                self.flags = 0;
            } else {
                // `min` bounds every value from below even when unknown, so
                // a value at or under it is the exact new minimum.
                if v <= self.min {
                    self.min = v;
                    self.flags &= !MIN_UNKNOWN;
                }
                if v >= self.max {
                    self.max = v;
                    self.flags &= !MAX_UNKNOWN;
                }
            }
        } else if !crate::mutation::active("stale_min_after_delete") {
            if v == self.min {
                self.flags |= MIN_UNKNOWN;
            }
            if v == self.max {
                self.flags |= MAX_UNKNOWN;
            }
        }
        let amount = v as i128 * w as i128;
        if crate::mutation::active("dropped_carry") {
            // The sum kept in 64 bits: the carry past 2^63 is lost.
            let s = if v > 0 { &mut self.pos } else { &mut self.neg };
            *s = (*s as i64).wrapping_add(amount as i64) as i128;
        } else if v > 0 {
            self.pos += amount;
        } else {
            self.neg += amount;
        }
        self.nn = nn;
    }

    /// Add another cell's values of the same measure.
    fn absorb(&mut self, o: &Stat) {
        if o.nn == 0 {
            return;
        }
        if self.nn == 0 {
            *self = *o;
            return;
        }
        // The merged bound is the smaller one; it is exact if a side whose
        // bound it is knows its minimum exactly.
        let min = self.min.min(o.min);
        let min_known = (self.min == min && self.flags & MIN_UNKNOWN == 0)
            || (o.min == min && o.flags & MIN_UNKNOWN == 0);
        let max = self.max.max(o.max);
        let max_known = (self.max == max && self.flags & MAX_UNKNOWN == 0)
            || (o.max == max && o.flags & MAX_UNKNOWN == 0);
        self.nn += o.nn;
        self.pos += o.pos;
        self.neg += o.neg;
        self.min = min;
        self.max = max;
        self.flags =
            if min_known { 0 } else { MIN_UNKNOWN } | if max_known { 0 } else { MAX_UNKNOWN };
    }

    /// The invariants of one measure in a non-empty cell of `count` rows.
    fn check(&self, count: i64) -> Result<(), String> {
        if self.nn < 0 || self.nn > count {
            return Err(format!("non-NULL count {} outside 0..={count}", self.nn));
        }
        if self.pos < 0 || self.neg > 0 {
            return Err(format!(
                "positive sum {} or negative sum {} has the wrong sign",
                self.pos, self.neg
            ));
        }
        if self.nn == 0 {
            return if *self == Stat::default() {
                Ok(())
            } else {
                Err(format!("no values but not cleared: {self:?}"))
            };
        }
        if self.flags & !(MIN_UNKNOWN | MAX_UNKNOWN) != 0 || self.min > self.max {
            return Err(format!("extrema out of order: {self:?}"));
        }
        let nn = self.nn as i128;
        if self.pos > nn * self.max.max(0) as i128 || self.neg < nn * self.min.min(0) as i128 {
            return Err(format!(
                "sums outside what {} values in [{}, {}] allow",
                self.nn, self.min, self.max
            ));
        }
        if self.flags == 0
            && self.nn == 1
            && (self.min != self.max || self.pos + self.neg != self.min as i128)
        {
            return Err(format!(
                "one value, but min, max and sum disagree: {self:?}"
            ));
        }
        Ok(())
    }
}

/// A packed word holds the non-NULL count above this many flag bits.
const TAG_BITS: u32 = 3;
/// The largest non-NULL count a [`Packed`] holds, plus one (2^61).
const NARROW_NN: i64 = 1 << (64 - TAG_BITS);
/// The measure is wide: its `Stat` is in the block's [`Wide`] table.
const WIDE: u64 = 4;

/// One measure of one cell as a block stores it: 40 bytes, with no padding
/// (five measures' worth fits where two cache-line `Stat`s did).
///
/// Narrow (`WIDE` clear): `pos` and `neg` are the exact sums, `tag` is
/// `nn << 3 | flags`. Wide: exactly [`Packed::WIDE_MARK`], and the block's
/// [`Wide`] table holds the `Stat`. A measure is wide exactly when its
/// `Stat` does not fit ([`Stat::fits`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Packed {
    pos: i64,
    neg: i64,
    min: i64,
    max: i64,
    tag: u64,
}

impl Packed {
    /// What a wide measure stores in its block.
    const WIDE_MARK: Packed = Packed {
        pos: 0,
        neg: 0,
        min: 0,
        max: 0,
        tag: WIDE,
    };

    #[inline]
    fn is_wide(&self) -> bool {
        self.tag & WIDE != 0
    }

    /// The packed form of `s`, if it fits.
    #[inline]
    fn narrow(s: &Stat) -> Option<Packed> {
        s.fits().then(|| Packed {
            pos: s.pos as i64,
            neg: s.neg as i64,
            min: s.min,
            max: s.max,
            tag: (s.nn as u64) << TAG_BITS | u64::from(s.flags),
        })
    }

    /// The value of a narrow measure.
    #[inline]
    fn unpack(&self) -> Stat {
        Stat {
            pos: i128::from(self.pos),
            neg: i128::from(self.neg),
            nn: (self.tag >> TAG_BITS) as i64,
            min: self.min,
            max: self.max,
            flags: (self.tag & u64::from(MIN_UNKNOWN | MAX_UNKNOWN)) as u8,
        }
    }

    /// The `dropped_carry_on_widening` mutation: `s` forced into 64 bits.
    fn truncated(s: &Stat) -> Packed {
        Packed {
            pos: s.pos as i64,
            neg: s.neg as i64,
            min: s.min,
            max: s.max,
            tag: (s.nn as u64) << TAG_BITS | u64::from(s.flags & 3),
        }
    }
}

/// The exact `Stat`s of a block's wide measures, by the measure's index in
/// the block's `Packed` column, sorted. Empty (and unallocated) unless a
/// sum of the block left `i64`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Wide(Vec<(usize, Stat)>);

impl Wide {
    #[inline(never)]
    #[cold]
    fn get(&self, i: usize) -> Stat {
        match self.0.binary_search_by_key(&i, |e| e.0) {
            Ok(k) => self.0[k].1,
            // Only a broken block gets here; `Cells::check` reports it.
            Err(_) => Stat::default(),
        }
    }

    #[cold]
    fn set(&mut self, i: usize, s: Stat) {
        match self.0.binary_search_by_key(&i, |e| e.0) {
            Ok(k) => self.0[k].1 = s,
            Err(k) => self.0.insert(k, (i, s)),
        }
    }

    #[cold]
    fn remove(&mut self, i: usize) -> Option<Stat> {
        let k = self.0.binary_search_by_key(&i, |e| e.0).ok()?;
        let (_, s) = self.0.remove(k);
        if self.0.is_empty() {
            // A block back under i64 costs nothing extra.
            self.0 = Vec::new();
        }
        Some(s)
    }

    fn bytes(&self) -> usize {
        vec_bytes::<(usize, Stat)>(self.0.capacity())
    }

    /// The table matches the column: sorted, one entry per wide mark and
    /// only there, and each entry a value that does not fit a `Packed`.
    fn check(&self, stats: &[Packed]) -> Result<(), String> {
        if !self.0.windows(2).all(|w| w[0].0 < w[1].0) {
            return Err("the wide table is not sorted".into());
        }
        for &(i, ref s) in &self.0 {
            if stats.get(i) != Some(&Packed::WIDE_MARK) {
                return Err(format!("wide entry {i} has no wide mark"));
            }
            if s.fits() {
                return Err(format!("wide entry {i} fits 64 bits: {s:?}"));
            }
        }
        let marks = stats.iter().filter(|p| p.is_wide()).count();
        if marks != self.0.len() || stats.iter().any(|p| p.is_wide() && *p != Packed::WIDE_MARK) {
            return Err(format!(
                "{marks} wide marks (or a malformed one) for {} wide entries",
                self.0.len()
            ));
        }
        Ok(())
    }
}

/// Read access to the measures of one cell.
pub(crate) trait Stats {
    fn stat(&self, j: usize) -> Stat;
}

/// Write access to the measures of one cell.
pub(crate) trait StatsMut: Stats {
    fn set_stat(&mut self, j: usize, s: Stat);
}

impl Stats for [Stat] {
    #[inline]
    fn stat(&self, j: usize) -> Stat {
        self[j]
    }
}

impl StatsMut for [Stat] {
    #[inline]
    fn set_stat(&mut self, j: usize, s: Stat) {
        self[j] = s;
    }
}

/// The measures of one stored cell.
#[derive(Clone, Copy)]
pub(crate) struct CellRef<'a> {
    stats: &'a [Packed],
    wide: &'a Wide,
    /// Index of the cell's first measure in its block.
    base: usize,
}

impl Stats for CellRef<'_> {
    #[inline]
    fn stat(&self, j: usize) -> Stat {
        let p = &self.stats[j];
        if p.is_wide() {
            self.wide.get(self.base + j)
        } else {
            p.unpack()
        }
    }
}

/// The measures of one stored cell, writable.
pub(crate) struct CellMut<'a> {
    stats: &'a mut [Packed],
    wide: &'a mut Wide,
    base: usize,
}

impl Stats for CellMut<'_> {
    #[inline]
    fn stat(&self, j: usize) -> Stat {
        let p = &self.stats[j];
        if p.is_wide() {
            self.wide.get(self.base + j)
        } else {
            p.unpack()
        }
    }
}

impl StatsMut for CellMut<'_> {
    /// Store `s` packed if it fits, wide otherwise (and narrow again a
    /// measure that came back under).
    #[inline]
    fn set_stat(&mut self, j: usize, s: Stat) {
        let packed = Packed::narrow(&s).or_else(|| {
            crate::mutation::active("dropped_carry_on_widening").then(|| Packed::truncated(&s))
        });
        match packed {
            Some(p) => {
                if self.stats[j].is_wide() {
                    self.wide.remove(self.base + j);
                }
                self.stats[j] = p;
            }
            None => {
                self.wide.set(self.base + j, s);
                self.stats[j] = Packed::WIDE_MARK;
            }
        }
    }
}

/// Apply `w` copies of a row to a cell (`w < 0` removes). Checks first, then
/// writes, so a delete of a row the cell does not hold changes nothing.
#[inline]
pub(crate) fn apply_row<S: StatsMut + ?Sized>(
    count: &mut i64,
    stats: &mut S,
    w: i64,
    ms: &[MeasureValue],
) -> Result<(), PlaneError> {
    if w == 0 {
        return Ok(());
    }
    let new_count = count
        .checked_add(w)
        .filter(|&c| c >= 0)
        .ok_or(PlaneError::NegativeCount)?;
    if w < 0 {
        for (j, mv) in ms.iter().enumerate() {
            let s = stats.stat(j);
            let ok = match *mv {
                MeasureValue::Int(v) => s.can_remove(v, w, new_count),
                _ => s.nn <= new_count,
            };
            if !ok {
                return Err(PlaneError::NegativeCount);
            }
        }
    }
    *count = new_count;
    for (j, mv) in ms.iter().enumerate() {
        if let MeasureValue::Int(v) = *mv {
            let mut s = stats.stat(j);
            s.add(v, w);
            stats.set_stat(j, s);
        }
    }
    Ok(())
}

/// Add a whole cell of another plane (`m` measures) into this one.
pub(crate) fn absorb_cell<S: StatsMut + ?Sized, O: Stats + ?Sized>(
    count: &mut i64,
    stats: &mut S,
    o_count: i64,
    o_stats: &O,
    m: usize,
) {
    *count += o_count;
    for j in 0..m {
        let o = o_stats.stat(j);
        if o.nn != 0 {
            let mut s = stats.stat(j);
            s.absorb(&o);
            stats.set_stat(j, s);
        }
    }
}

/// Check one cell (`count > 0`) of `m` measures and return nothing or why
/// it is broken.
pub(crate) fn check_cell<S: Stats + ?Sized>(count: i64, stats: &S, m: usize) -> Result<(), String> {
    if count < 0 {
        return Err(format!("negative count {count}"));
    }
    (0..m).try_for_each(|j| {
        stats
            .stat(j)
            .check(count)
            .map_err(|e| format!("measure {j}: {e}"))
    })
}

#[derive(Clone, Debug)]
pub(crate) enum Cells {
    Dense(Dense),
    Sparse(Sparse),
}

/// Cells indexed by joint key, in pages allocated on first write.
#[derive(Clone, Debug)]
pub(crate) struct Dense {
    pages: Table<Page>,
    slots: usize,
    m: usize,
}

#[derive(Clone, Debug)]
struct Page {
    count: Vec<i64>,
    /// `slots × m`, cell-major.
    stats: Vec<Packed>,
    wide: Wide,
}

/// Cells in hash maps, sharded by a hash of the key.
#[derive(Clone, Debug)]
pub(crate) struct Sparse {
    shards: Table<Shard>,
    m: usize,
}

/// Non-empty cells only: an empty cell is removed (memory per cell).
#[derive(Clone, Debug, Default)]
struct Shard {
    index: AHashMap<JointKey, u32>,
    keys: Vec<JointKey>,
    count: Vec<i64>,
    stats: Vec<Packed>,
    wide: Wide,
}

#[inline]
fn shard_of(key: JointKey) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SHARD_BITS)) as usize
}

impl Shard {
    /// Swap-remove the empty cell `i`: the last cell moves into its place,
    /// and so do its wide measures' entries.
    fn remove(&mut self, i: usize, m: usize) {
        self.index.remove(&self.keys[i]);
        let last = self.keys.len() - 1;
        for j in 0..m {
            if self.stats[i * m + j].is_wide() {
                self.wide.remove(i * m + j);
            }
        }
        if i != last {
            self.keys[i] = self.keys[last];
            self.count[i] = self.count[last];
            self.stats.copy_within(last * m..(last + 1) * m, i * m);
            for j in 0..m {
                if self.stats[i * m + j].is_wide() {
                    if let Some(s) = self.wide.remove(last * m + j) {
                        self.wide.set(i * m + j, s);
                    }
                }
            }
            self.index.insert(self.keys[i], i as u32);
        }
        self.keys.pop();
        self.count.pop();
        self.stats.truncate(last * m);
    }
}

impl Cells {
    /// Empty storage for a joint of `total_bits` and `m` measures.
    pub fn new(total_bits: u32, m: usize) -> Cells {
        if total_bits <= DENSE_MAX_BITS {
            let keys = 1usize << total_bits;
            let slots = keys.min(PAGE);
            Cells::Dense(Dense {
                pages: Table::new(keys / slots),
                slots,
                m,
            })
        } else {
            Cells::Sparse(Sparse {
                shards: Table::new(SHARDS),
                m,
            })
        }
    }

    pub fn is_dense(&self) -> bool {
        matches!(self, Cells::Dense(_))
    }

    /// The cell at `key`, if it is not empty.
    #[inline]
    pub fn get(&self, key: JointKey) -> Option<(i64, CellRef<'_>)> {
        match self {
            Cells::Dense(d) => {
                let page = d.pages.get((key >> PAGE_BITS) as usize)?;
                let s = key as usize & (PAGE - 1);
                let c = *page.count.get(s)?;
                (c != 0).then(|| (c, page.cell(s, d.m)))
            }
            Cells::Sparse(sp) => {
                let shard = sp.shards.get(shard_of(key))?;
                let i = *shard.index.get(&key)? as usize;
                Some((shard.count[i], shard.cell(i, sp.m)))
            }
        }
    }

    /// Run `f` on the cell at `key` (an empty one if it has none), copying
    /// the block it lives in first if a snapshot shares it. The caller keeps
    /// `key` inside the layout.
    #[inline]
    pub fn update<R>(
        &mut self,
        key: JointKey,
        f: impl FnOnce(&mut i64, &mut CellMut<'_>) -> R,
    ) -> R {
        match self {
            Cells::Dense(d) => {
                let (slots, m) = (d.slots, d.m);
                let page = d.pages.get_mut((key >> PAGE_BITS) as usize, || Page {
                    count: vec![0; slots],
                    stats: vec![Packed::default(); slots * m],
                    wide: Wide::default(),
                });
                let s = key as usize & (PAGE - 1);
                let mut cell = CellMut {
                    stats: &mut page.stats[s * m..(s + 1) * m],
                    wide: &mut page.wide,
                    base: s * m,
                };
                f(&mut page.count[s], &mut cell)
            }
            Cells::Sparse(sp) => {
                let m = sp.m;
                let shard = sp.shards.get_mut(shard_of(key), Default::default);
                let i = match shard.index.get(&key) {
                    Some(&i) => i as usize,
                    None => {
                        let i = shard.keys.len();
                        shard.index.insert(key, i as u32);
                        shard.keys.push(key);
                        shard.count.push(0);
                        shard.stats.resize((i + 1) * m, Packed::default());
                        i
                    }
                };
                let mut cell = CellMut {
                    stats: &mut shard.stats[i * m..(i + 1) * m],
                    wide: &mut shard.wide,
                    base: i * m,
                };
                let r = f(&mut shard.count[i], &mut cell);
                if shard.count[i] == 0 {
                    shard.remove(i, m);
                }
                r
            }
        }
    }

    /// Visit every non-empty cell.
    pub fn for_each(&self, mut f: impl FnMut(JointKey, i64, CellRef<'_>)) {
        match self {
            Cells::Dense(d) => {
                for (p, page) in d.pages.iter().enumerate() {
                    let Some(page) = page else { continue };
                    let base = (p as JointKey) << PAGE_BITS;
                    for (s, &c) in page.count.iter().enumerate() {
                        if c != 0 {
                            f(base | s as JointKey, c, page.cell(s, d.m));
                        }
                    }
                }
            }
            Cells::Sparse(sp) => {
                for shard in sp.shards.iter().flatten() {
                    for (i, (&k, &c)) in shard.keys.iter().zip(&shard.count).enumerate() {
                        f(k, c, shard.cell(i, sp.m));
                    }
                }
            }
        }
    }

    /// What a full scan costs, in cell slots looked at.
    pub fn scan_cost(&self) -> usize {
        match self {
            Cells::Dense(d) => d.pages.iter().flatten().count() * d.slots,
            Cells::Sparse(sp) => sp.shards.iter().flatten().map(|s| s.keys.len()).sum(),
        }
    }

    /// Exact heap bytes, counting shared blocks as this copy's own.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Cells::Dense(d) => {
                let pages: usize = d
                    .pages
                    .iter()
                    .flatten()
                    .map(|p| {
                        arc_bytes::<Page>()
                            + vec_bytes::<i64>(p.count.capacity())
                            + vec_bytes::<Packed>(p.stats.capacity())
                            + p.wide.bytes()
                    })
                    .sum();
                d.pages.bytes() + pages
            }
            Cells::Sparse(sp) => {
                let shards: usize = sp
                    .shards
                    .iter()
                    .flatten()
                    .map(|s| {
                        arc_bytes::<Shard>()
                            + table_bytes::<(JointKey, u32)>(s.index.capacity())
                            + vec_bytes::<JointKey>(s.keys.capacity())
                            + vec_bytes::<i64>(s.count.capacity())
                            + vec_bytes::<Packed>(s.stats.capacity())
                            + s.wide.bytes()
                    })
                    .sum();
                sp.shards.bytes() + shards
            }
        }
    }

    /// Structural invariants of the storage for a joint of `total_bits`:
    /// the right form and block sizes, empty dense slots all zero, a sparse
    /// index that matches its cells (each in the shard of its key), and in
    /// every block a wide table that matches its wide marks.
    pub fn check(&self, total_bits: u32, m: usize) -> Result<(), String> {
        let fresh = Cells::new(total_bits, m);
        match (self, &fresh) {
            (Cells::Dense(d), Cells::Dense(f)) => {
                if d.m != m || d.slots != f.slots || d.pages.len() != f.pages.len() {
                    return Err(format!("dense pages do not fit a {total_bits}-bit joint"));
                }
                for page in d.pages.iter().flatten() {
                    if page.count.len() != d.slots || page.stats.len() != d.slots * m {
                        return Err("a dense page has the wrong size".into());
                    }
                    for (s, &c) in page.count.iter().enumerate() {
                        if c == 0
                            && page.stats[s * m..(s + 1) * m]
                                .iter()
                                .any(|st| *st != Packed::default())
                        {
                            return Err("an empty dense cell holds measure values".into());
                        }
                    }
                    page.wide.check(&page.stats)?;
                }
            }
            (Cells::Sparse(sp), Cells::Sparse(_)) => {
                if sp.m != m || sp.shards.len() != SHARDS {
                    return Err("sparse shards do not fit the plane".into());
                }
                for (n, shard) in sp.shards.iter().enumerate() {
                    let Some(shard) = shard else { continue };
                    let len = shard.keys.len();
                    if shard.count.len() != len
                        || shard.stats.len() != len * m
                        || shard.index.len() != len
                    {
                        return Err("a sparse shard's columns differ in length".into());
                    }
                    for (i, &k) in shard.keys.iter().enumerate() {
                        if shard.index.get(&k) != Some(&(i as u32)) || shard_of(k) != n {
                            return Err(format!("sparse key {k} is misplaced"));
                        }
                        if shard.count[i] == 0 {
                            return Err(format!("sparse key {k} is stored empty"));
                        }
                    }
                    shard.wide.check(&shard.stats)?;
                }
            }
            _ => {
                return Err(format!(
                    "storage form does not match a {total_bits}-bit joint"
                ))
            }
        }
        Ok(())
    }
}

impl Page {
    #[inline]
    fn cell(&self, s: usize, m: usize) -> CellRef<'_> {
        CellRef {
            stats: &self.stats[s * m..(s + 1) * m],
            wide: &self.wide,
            base: s * m,
        }
    }
}

impl Shard {
    #[inline]
    fn cell(&self, i: usize, m: usize) -> CellRef<'_> {
        CellRef {
            stats: &self.stats[i * m..(i + 1) * m],
            wide: &self.wide,
            base: i * m,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(vs: &[i64]) -> Vec<MeasureValue> {
        vs.iter().map(|&v| MeasureValue::Int(v)).collect()
    }

    #[test]
    fn deleting_the_minimum_makes_it_unknown_and_a_lower_insert_makes_it_exact() {
        let (mut c, mut s) = (0, [Stat::default()]);
        for v in [5, 3, 9] {
            apply_row(&mut c, &mut s[..], 1, &ints(&[v])).unwrap();
        }
        assert_eq!((s[0].min, s[0].max, s[0].flags), (3, 9, 0));
        apply_row(&mut c, &mut s[..], -1, &ints(&[3])).unwrap();
        assert_eq!(s[0].flags, MIN_UNKNOWN);
        apply_row(&mut c, &mut s[..], 1, &ints(&[4])).unwrap();
        assert_eq!(
            s[0].flags, MIN_UNKNOWN,
            "4 is above the bound 3: the minimum may be 4 or 5"
        );
        apply_row(&mut c, &mut s[..], 1, &ints(&[2])).unwrap();
        assert_eq!((s[0].min, s[0].flags), (2, 0));
        check_cell(c, &s[..], 1).unwrap();
    }

    #[test]
    fn removing_the_last_value_clears_the_extrema() {
        let (mut c, mut s) = (0, [Stat::default()]);
        apply_row(&mut c, &mut s[..], 1, &ints(&[7])).unwrap();
        apply_row(&mut c, &mut s[..], 1, &[MeasureValue::Null]).unwrap();
        apply_row(&mut c, &mut s[..], -1, &ints(&[7])).unwrap();
        assert_eq!((c, s[0]), (1, Stat::default()));
    }

    #[test]
    fn a_delete_the_cell_cannot_hold_changes_nothing() {
        let (mut c, mut s) = (0, [Stat::default()]);
        apply_row(&mut c, &mut s[..], 1, &ints(&[5])).unwrap();
        let before = (c, s);
        for bad in [ints(&[3]), ints(&[6]), ints(&[-5])] {
            assert_eq!(
                apply_row(&mut c, &mut s[..], -1, &bad),
                Err(PlaneError::NegativeCount)
            );
            assert_eq!((c, s), before);
        }
        apply_row(&mut c, &mut s[..], -1, &[MeasureValue::Null]).unwrap_err();
        apply_row(&mut c, &mut s[..], -1, &ints(&[5])).unwrap();
        assert_eq!(
            apply_row(&mut c, &mut s[..], -1, &[MeasureValue::Null]),
            Err(PlaneError::NegativeCount)
        );
    }

    #[test]
    fn absorb_keeps_the_exact_side_of_a_bound() {
        let unknown = Stat {
            pos: 10,
            neg: 0,
            nn: 2,
            min: 3,
            max: 7,
            flags: MIN_UNKNOWN,
        };
        let mut a = unknown;
        a.absorb(&Stat {
            pos: 2,
            neg: 0,
            nn: 1,
            min: 2,
            max: 2,
            flags: 0,
        });
        assert_eq!((a.min, a.flags), (2, 0));
        let mut b = unknown;
        b.absorb(&Stat {
            pos: 4,
            neg: 0,
            nn: 1,
            min: 4,
            max: 4,
            flags: 0,
        });
        assert_eq!((b.min, b.max, b.flags), (3, 7, MIN_UNKNOWN));
    }

    #[test]
    fn sparse_cells_are_removed_when_empty() {
        let mut cells = Cells::new(40, 1);
        for k in 0..1000u64 {
            cells
                .update(k << 20, |c, s| apply_row(c, s, 1, &ints(&[k as i64])))
                .unwrap();
        }
        for k in (0..1000u64).step_by(2) {
            cells
                .update(k << 20, |c, s| apply_row(c, s, -1, &ints(&[k as i64])))
                .unwrap();
        }
        assert_eq!(cells.scan_cost(), 500);
        cells.check(40, 1).unwrap();
        let mut seen = 0;
        cells.for_each(|k, c, s| {
            assert_eq!((c, s.stat(0).pos), (1, (k >> 20) as i128));
            seen += 1;
        });
        assert_eq!(seen, 500);
        assert!(cells.get(2 << 20).is_none() && cells.get(3 << 20).is_some());
    }

    fn wide_entries(cells: &Cells) -> usize {
        match cells {
            Cells::Dense(d) => d.pages.iter().flatten().map(|p| p.wide.0.len()).sum(),
            Cells::Sparse(sp) => sp.shards.iter().flatten().map(|s| s.wide.0.len()).sum(),
        }
    }

    #[test]
    fn a_non_null_count_past_2_pow_61_widens_and_narrows_again() {
        let mut cells = Cells::new(4, 1);
        let w = NARROW_NN;
        cells
            .update(3, |c, s| apply_row(c, s, w, &ints(&[1])))
            .unwrap();
        cells.check(4, 1).unwrap();
        assert_eq!(wide_entries(&cells), 1);
        let (c, s) = cells.get(3).unwrap();
        assert_eq!((c, s.stat(0).nn, s.stat(0).pos), (w, w, w as i128));
        check_cell(c, &s, 1).unwrap();
        cells
            .update(3, |c, s| apply_row(c, s, 1 - w, &ints(&[1])))
            .unwrap();
        cells.check(4, 1).unwrap();
        assert_eq!(wide_entries(&cells), 0);
        assert_eq!(cells.get(3).unwrap().1.stat(0).nn, 1);
    }

    #[test]
    fn a_wide_mark_without_its_entry_fails_the_check() {
        let mut cells = Cells::new(4, 1);
        cells
            .update(3, |c, s| apply_row(c, s, 2, &ints(&[i64::MAX])))
            .unwrap();
        cells.check(4, 1).unwrap();
        let Cells::Dense(d) = &mut cells else {
            unreachable!()
        };
        let page = d.pages.get_mut(0, || unreachable!());
        page.wide = Wide::default();
        assert!(cells.check(4, 1).is_err());
    }
}

impl Cells {
    /// Keys whose cell may differ from `base`'s: every slot of a block that
    /// is not shared with `base` (a write copies the block it touches, so
    /// a shared block is unchanged). `None` when the two are not of one
    /// layout (a re-pack since `base`). Cost: the block table, plus the
    /// slots of the copied blocks.
    pub fn changed_since(&self, base: &Cells) -> Option<Vec<JointKey>> {
        let mut out = Vec::new();
        match (self, base) {
            (Cells::Dense(d), Cells::Dense(b)) => {
                if d.m != b.m || d.slots != b.slots || d.pages.len() != b.pages.len() {
                    return None;
                }
                for p in d.pages.unshared(&b.pages) {
                    let base_key = (p as JointKey) << PAGE_BITS;
                    out.extend((0..d.slots as JointKey).map(|s| base_key | s));
                }
            }
            (Cells::Sparse(s), Cells::Sparse(b)) => {
                if s.m != b.m {
                    return None;
                }
                for n in s.shards.unshared(&b.shards) {
                    for sh in [s.shards.get(n), b.shards.get(n)].into_iter().flatten() {
                        out.extend(sh.keys.iter().copied());
                    }
                }
                out.sort_unstable();
                out.dedup();
            }
            _ => return None,
        }
        Some(out)
    }

    /// Set the cell at `key` to exactly `count` and `stats` (`count == 0`
    /// empties it). Returns the count it had.
    pub fn put(&mut self, key: JointKey, count: i64, stats: &[Stat]) -> i64 {
        self.update(key, |c, cell| {
            let was = *c;
            *c = count;
            for (j, s) in stats.iter().enumerate() {
                cell.set_stat(j, if count == 0 { Stat::default() } else { *s });
            }
            was
        })
    }
}
