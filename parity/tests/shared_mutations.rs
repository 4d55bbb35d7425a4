//! Every mutation of shared planes turns the seeded interleavings red (its
//! own test binary: a mutation is a process-wide switch).

use pleroma_parity::shared;

const SEEDS: std::ops::Range<u64> = 1..9;
const STEPS: usize = 400;

#[test]
fn every_shared_plane_mutation_turns_the_interleavings_red() {
    let mut green = Vec::new();
    for &m in pleroma::mutation::SHARED_MUTATIONS {
        pleroma::mutation::set(Some(m));
        let red = SEEDS
            .clone()
            .any(|seed| shared::run(seed, 3, STEPS, false).is_err());
        pleroma::mutation::set(None);
        println!("mutation {m}: {}", if red { "red" } else { "green" });
        if !red {
            green.push(m);
        }
    }
    assert!(
        green.is_empty(),
        "mutations the interleavings do not catch: {green:?}"
    );
}
