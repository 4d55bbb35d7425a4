//! Every deliberate mutation turns a small parity run red (the full sweep is
//! `cargo run --release -p pleroma-parity -- --mutations`).

use std::path::PathBuf;

use pleroma_parity::{run_mutations, runner, Config};

#[test]
fn every_mutation_turns_the_suite_red() {
    let mut cfg = Config::new(300, 10, 1);
    cfg.helper = Some(PathBuf::from(env!("CARGO_BIN_EXE_pleroma-parity")));
    let names = runner::mutation_names();
    let results = run_mutations(&cfg, &names, |name, red, _| {
        println!("mutation {name}: {}", if red { "red" } else { "green" })
    });
    let green: Vec<&str> = results
        .iter()
        .filter(|r| !r.1)
        .map(|r| r.0.as_str())
        .collect();
    assert!(
        green.is_empty(),
        "mutations the suite does not catch: {green:?}"
    );
}
