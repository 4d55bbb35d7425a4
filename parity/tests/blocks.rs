//! Property: for any sequence of workload blocks, Pleroma answers as SQLite.
//! Each block is drawn from its own seed, so proptest shrinks a failure by
//! dropping blocks; the minimal case is written as a `.sql` reproduction.

use std::path::PathBuf;

use pleroma_parity::gen::{self, Step};
use pleroma_parity::rng::Rng;
use pleroma_parity::schema::Schema;
use pleroma_parity::{repro, runner};
use proptest::prelude::*;

fn steps(schema_seed: u64, blocks: &[u64]) -> Vec<Step> {
    let schema = Schema::generate(&mut Rng::new(schema_seed));
    let mut steps = gen::setup(&schema, 60, schema_seed);
    for b in blocks {
        steps.extend(gen::block(&schema, 60, *b));
    }
    steps
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn any_blocks_answer_as_sqlite(schema_seed in any::<u64>(), blocks in prop::collection::vec(any::<u64>(), 1..24)) {
        let steps = steps(schema_seed, &blocks);
        let (stats, failures) = runner::replay(&steps, Some(PathBuf::from(env!("CARGO_BIN_EXE_pleroma-parity")))).unwrap();
        if !failures.is_empty() {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
            let path = dir.join(format!("parity-blocks-{schema_seed}.sql"));
            std::fs::write(&path, repro::write(&steps, &failures.join("\n"))).unwrap();
            prop_assert!(false, "{} failed ({} passed); reproduction {}: {}", stats.failed, stats.passed, path.display(), failures[0]);
        }
    }
}
