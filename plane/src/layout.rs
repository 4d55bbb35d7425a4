//! The joint key layout: how many bits each dimension takes and where.

use crate::{Code, JointKey};

/// Bits and shifts of every dimension in the joint key. Dimension 0 sits in
/// the lowest bits; each takes the fewest bits that hold its codes, so the
/// key space is as small as the dictionaries allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub bits: Vec<u32>,
    pub shift: Vec<u32>,
    pub total: u32,
}

/// The fewest bits that hold `n` distinct codes (`0..n`).
pub(crate) fn bits_for(n: usize) -> u32 {
    if n <= 1 {
        0
    } else if crate::mutation::active("joint_off_by_one") && n > 2 && (n - 1).is_power_of_two() {
        // One bit short when the last code needs a new bit.
        usize::BITS - (n - 1).leading_zeros() - 1
    } else {
        usize::BITS - (n - 1).leading_zeros()
    }
}

impl Layout {
    /// The layout for dictionaries of these sizes. The caller keeps the
    /// total at or under 64 bits.
    pub fn for_lens(lens: impl IntoIterator<Item = usize>) -> Layout {
        let bits: Vec<u32> = lens.into_iter().map(bits_for).collect();
        let mut shift = Vec::with_capacity(bits.len());
        let mut total = 0;
        for &b in &bits {
            shift.push(total);
            total += b;
        }
        debug_assert!(total <= 64, "joint key of {total} bits");
        Layout { bits, shift, total }
    }

    /// The code of dimension `d` in `key`.
    #[inline]
    pub fn code(&self, key: JointKey, d: usize) -> Code {
        let b = self.bits[d];
        if b == 0 {
            0
        } else {
            ((key >> self.shift[d]) & (u64::MAX >> (64 - b))) as Code
        }
    }

    /// `code` of dimension `d` in its place in the key.
    #[inline]
    pub fn place(&self, d: usize, code: Code) -> JointKey {
        if self.bits[d] == 0 {
            0
        } else {
            JointKey::from(code) << self.shift[d]
        }
    }

    /// The key with the same codes under another layout.
    pub fn repack(&self, key: JointKey, to: &Layout) -> JointKey {
        (0..self.bits.len()).fold(0, |k, d| k | to.place(d, self.code(key, d)))
    }

    /// Whether `key` has no bit set above the layout's total.
    pub fn holds(&self, key: JointKey) -> bool {
        self.total >= 64 || key >> self.total == 0
    }
}
