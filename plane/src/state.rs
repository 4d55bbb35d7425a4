//! What a plane is made of: its definition ([`PlaneConfig`]) and the
//! [`State`] a snapshot captures (dictionaries, layout, cells, counts), with
//! the writes that grow a dictionary and re-pack the cells. The plane
//! (`plane.rs`), its slices (`slice.rs`), its builder and its image all read
//! it; it uses none of them.

use std::sync::Arc;

use crate::cells::{absorb_cell, Cells};
use crate::layout::{bits_for, Layout};
use crate::{Code, Dictionary, DimRef, DimValue, PlaneError};

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
