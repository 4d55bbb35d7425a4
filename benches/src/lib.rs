//! The benchmark harness: the workloads of `BENCHMARKS.md`, each run on the
//! `sqlite`, `engine`, `plane` (and optionally `duckdb`) arms side by side.
//!
//! `pleroma bench WORKLOAD [--rows N] [--arms sqlite,engine,plane,duckdb]
//! [--json FILE] [--svg FILE]` and `pleroma bench compare OLD.json NEW.json`.

pub mod gen;
pub mod harness;
pub mod ledger;

/// The body of `pleroma bench`: `args` are the words after `bench`.
pub fn run_cli(args: Vec<String>) -> anyhow::Result<()> {
    anyhow::bail!("pleroma bench {}: not built yet", args.join(" "))
}
