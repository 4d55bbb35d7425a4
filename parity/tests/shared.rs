//! Shared planes under seeded interleavings of several connections on one
//! file (`pleroma_parity::shared`), and the mutations they must catch.

use pleroma_parity::shared;

const SEEDS: std::ops::Range<u64> = 1..9;
const STEPS: usize = 400;

#[test]
fn interleaved_connections_answer_as_sqlite_and_never_rebuild_for_each_other() {
    let (mut checked, mut served) = (0, 0);
    for seed in SEEDS {
        let st = shared::run(seed, 3, STEPS, false).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(st.external_rebuilds, 0, "seed {seed}: {st:?}");
        checked += st.checked;
        served += st.served;
    }
    assert!(served * 10 >= checked * 6, "served {served} of {checked}");
}

#[test]
fn an_outside_writer_among_them_is_followed_exactly() {
    for seed in SEEDS {
        shared::run(seed, 3, STEPS, true).unwrap_or_else(|e| panic!("{e:#}"));
    }
}
