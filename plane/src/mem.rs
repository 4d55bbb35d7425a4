//! Exact heap sizes of the containers the plane uses.
//!
//! `bytes()` must be exact, so these follow the allocation each container
//! makes for its current capacity rather than guessing from lengths.

use std::mem::{align_of, size_of};

/// Control-byte group width of the SwissTable behind `std`/`ahash` maps:
/// 16 with SSE2, 8 otherwise (NEON and the generic fallback on 64-bit).
const GROUP: usize = if cfg!(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "sse2"
)) {
    16
} else {
    8
};

/// Heap bytes of a hash table of `T = (K, V)` entries with `capacity` as
/// reported by `HashMap::capacity` (buckets hold 7/8 of their count, at
/// least 4 buckets; data array then one control byte per bucket plus a group).
pub(crate) fn table_bytes<T>(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 4 {
        4
    } else if capacity < 8 {
        8
    } else {
        (capacity * 8 / 7).next_power_of_two()
    };
    let align = align_of::<T>().max(GROUP);
    (size_of::<T>() * buckets).next_multiple_of(align) + buckets + GROUP
}

/// Heap bytes of an `Arc<T>` allocation (two counters, then `T`).
pub(crate) fn arc_bytes<T>() -> usize {
    (2 * size_of::<usize>() + size_of::<T>())
        .next_multiple_of(align_of::<T>().max(align_of::<usize>()))
}

/// Heap bytes of an `Arc<str>` of `len` bytes.
pub(crate) fn arc_str_bytes(len: usize) -> usize {
    (2 * size_of::<usize>() + len).next_multiple_of(align_of::<usize>())
}

/// Heap bytes of a `Vec<T>` with `capacity`.
pub(crate) fn vec_bytes<T>(capacity: usize) -> usize {
    capacity * size_of::<T>()
}
