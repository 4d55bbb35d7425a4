//! Deliberate bugs for the parity suite's mutation runs. Compiled only with
//! the `mutations` feature; without it `active` is a constant `false`.

/// The plane's mutations, by name.
pub const PLANE_MUTATIONS: &[&str] = &[
    "dropped_carry",
    "dropped_carry_on_widening",
    "stale_min_after_delete",
    "null_folded",
    "joint_off_by_one",
    // A cell written without being listed in its delta epoch: the next
    // state row leaves it out (caught where a reopen or another process
    // reads the log).
    "untouched_write",
];

#[cfg(feature = "mutations")]
mod imp {
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Index into `PLANE_MUTATIONS` plus one; 0 is none.
    static ACTIVE: AtomicUsize = AtomicUsize::new(0);

    /// Switch on the named mutation if it is the plane's; any other name
    /// (or `None`) switches the plane's mutations off.
    pub fn set(name: Option<&str>) {
        let i = name
            .and_then(|n| super::PLANE_MUTATIONS.iter().position(|m| *m == n))
            .map_or(0, |i| i + 1);
        ACTIVE.store(i, Ordering::Relaxed);
    }

    #[inline]
    pub fn active(name: &str) -> bool {
        let i = ACTIVE.load(Ordering::Relaxed);
        i != 0 && super::PLANE_MUTATIONS[i - 1] == name
    }
}

#[cfg(feature = "mutations")]
pub use imp::{active, set};

#[cfg(not(feature = "mutations"))]
#[inline(always)]
pub(crate) fn active(_name: &str) -> bool {
    false
}
