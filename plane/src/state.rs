//! What a plane is made of: its definition ([`PlaneConfig`]) and the
//! [`State`] a snapshot captures (dictionaries, layout, cells, counts), with
//! the writes that grow a dictionary and re-pack the cells. The plane
//! (`plane.rs`), its slices (`slice.rs`), its builder and its image all read
//! it; it uses none of them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::cells::{absorb_cell, Cells};
use crate::layout::{bits_for, Layout};
use crate::{Code, Dictionary, DimRef, DimValue, JointKey, PlaneError};

/// The definition of a plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlaneConfig {
    /// Dimension names (for messages only; the plane addresses them by index).
    pub dims: Vec<String>,
    /// Measure names.
    pub measures: Vec<String>,
    /// Most distinct values per dimension (default 1,024).
    pub cap: usize,
}

impl PlaneConfig {
    pub fn new(dims: Vec<String>, measures: Vec<String>) -> Self {
        PlaneConfig {
            dims,
            measures,
            cap: 1024,
        }
    }
}

/// Everything a snapshot must capture. Every part a write may change sits
/// behind its own `Arc`, so a snapshot is one `Arc` clone of the whole and
/// the first write after it copies only this small struct, the block table
/// and the touched block (or dictionary).
#[derive(Clone)]
pub(crate) struct State {
    pub config: Arc<PlaneConfig>,
    pub dicts: Vec<Arc<Dictionary>>,
    pub layout: Arc<Layout>,
    pub cells: Cells,
    pub rows: i64,
    pub nonempty: usize,
    pub foreign: Vec<i64>,
    pub fault: Option<Arc<str>>,
    /// The cells written since the delta epoch began ([`Touched`]).
    pub touched: Touched,
}

/// Most keys a [`Touched`] lists before it gives up (and a delta compares
/// the written blocks instead): bounds what a copy of the state copies.
const TOUCHED_MAX: usize = 1024;

/// Where a state differs from the state its *delta epoch* began at: every
/// cell it changed since is in `keys`, unless it gave up (`over`). Epoch 0
/// tracks nothing. A delta between two states of one epoch need only look
/// at the keys either lists ([`Touched::since`]), so its cost follows the
/// cells written, not the plane's size.
///
/// Invariant: a state of epoch `e != 0` that is not `over` differs from the
/// state its epoch began at only in the cells of `keys`. It holds because
/// every write of a cell lists it ([`State::touch`]), a re-pack (which
/// moves every key) gives up, and a state is only ever replaced whole, by
/// one that holds the invariant itself (a snapshot restored, a new state of
/// epoch 0).
#[derive(Clone, Debug, Default)]
pub(crate) struct Touched {
    epoch: u64,
    over: bool,
    keys: Vec<JointKey>,
}

static EPOCHS: AtomicU64 = AtomicU64::new(1);

impl Touched {
    /// A new epoch, unique in the process, that starts at the state it is
    /// set in.
    pub(crate) fn begin() -> Touched {
        Touched {
            epoch: EPOCHS.fetch_add(1, Ordering::Relaxed),
            over: false,
            keys: Vec::new(),
        }
    }

    /// Every cell in which a state with `self` may differ from one with
    /// `base` (unsorted, repeated), or `None` when the two are of different
    /// epochs or either gave up. Both differ from their epoch's start only
    /// in their own keys, so from each other only in the union.
    pub(crate) fn since(&self, base: &Touched) -> Option<Vec<JointKey>> {
        if self.epoch == 0 || self.epoch != base.epoch || self.over || base.over {
            return None;
        }
        let mut keys = Vec::with_capacity(self.keys.len() + base.keys.len());
        keys.extend_from_slice(&self.keys);
        keys.extend_from_slice(&base.keys);
        Some(keys)
    }
}

impl State {
    /// Cell `key` is being written: list it (the newest key only once in
    /// a row), or give up past [`TOUCHED_MAX`].
    #[inline]
    pub(crate) fn touch(&mut self, key: JointKey) {
        let t = &mut self.touched;
        if t.epoch == 0
            || t.over
            || t.keys.last() == Some(&key)
            || crate::mutation::active("untouched_write")
        {
            return;
        }
        if t.keys.len() >= TOUCHED_MAX {
            t.over = true;
            t.keys = Vec::new();
        } else {
            t.keys.push(key);
        }
    }

    /// Stop listing: this write moves or replaces cells wholesale.
    pub(crate) fn untrack(&mut self) {
        if self.touched.epoch != 0 && !self.touched.over {
            self.touched.over = true;
            self.touched.keys = Vec::new();
        }
    }
}

impl State {
    /// Put the plane out of service because of `e` (the first reason
    /// stays) and hand `e` back.
    pub(crate) fn fail(&mut self, e: PlaneError) -> PlaneError {
        if self.fault.is_none() {
            self.fault = Some(e.to_string().into());
        }
        e
    }

    /// Give `v` a code in dimension `d`, unless the cap or the 64-bit joint
    /// forbids it. The layout is fitted afterwards by [`State::fit_layout`].
    pub(crate) fn push_value(&mut self, d: usize, v: DimRef<'_>) -> Result<Code, PlaneError> {
        let len = self.dicts[d].len();
        if len >= self.config.cap {
            return Err(PlaneError::CapExceeded {
                dim: self.config.dims[d].clone(),
                cap: self.config.cap,
            });
        }
        let bits: u32 = self
            .dicts
            .iter()
            .enumerate()
            .map(|(i, x)| bits_for(if i == d { len + 1 } else { x.len() }))
            .sum();
        if bits > 64 {
            return Err(PlaneError::JointTooWide { bits });
        }
        Ok(Arc::make_mut(&mut self.dicts[d]).push(v))
    }

    /// This plane's code of every value in `dims` (one list per
    /// dimension), adding the values it has not seen, then fitting the
    /// layout. A value past the cap faults the plane.
    pub(crate) fn codes_of<'a>(
        &mut self,
        dims: impl Iterator<Item = &'a [DimValue]>,
    ) -> Result<Vec<Vec<Code>>, PlaneError> {
        let mut maps = Vec::new();
        for (d, vals) in dims.enumerate() {
            let mut map = Vec::with_capacity(vals.len());
            for v in vals {
                let code = match self.dicts[d].code(v) {
                    Some(c) => c,
                    None => match self.push_value(d, v.as_ref()) {
                        Ok(c) => c,
                        Err(e) => {
                            self.fit_layout();
                            return Err(self.fail(e));
                        }
                    },
                };
                map.push(code);
            }
            maps.push(map);
        }
        self.fit_layout();
        Ok(maps)
    }

    /// Re-pack the cells if a dictionary outgrew its bits. Every total is
    /// carried over: a re-pack moves cells, it never merges two of them.
    pub(crate) fn fit_layout(&mut self) {
        if self
            .layout
            .bits
            .iter()
            .zip(&self.dicts)
            .all(|(&b, d)| b == bits_for(d.len()))
        {
            return;
        }
        // Every key moves: the listed ones mean other cells now.
        self.untrack();
        let new = Layout::for_lens(self.dicts.iter().map(|d| d.len()));
        let m = self.foreign.len();
        let mut cells = Cells::new(new.total, m);
        self.cells.for_each(|key, count, stats| {
            cells.update(self.layout.repack(key, &new), |c, s| {
                absorb_cell(c, s, count, &stats, m)
            });
        });
        self.cells = cells;
        self.layout = Arc::new(new);
    }
}
