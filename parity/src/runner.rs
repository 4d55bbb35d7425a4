//! Runs cases, counts checks, shrinks a failure to a minimal `.sql`
//! reproduction, and sweeps the deliberate mutations.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::gen::{self, Size, Step};
use crate::oracle::{Pair, Stats};
use crate::repro;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Rows loaded into each case's table.
    pub rows: usize,
    /// Cases: each a new schema, data set and workload.
    pub cases: usize,
    /// Case `i` runs with seed `seed + i`.
    pub seed: u64,
    /// Blocks of writes and checks per case.
    pub blocks: usize,
    /// The program that plays the second process (`--exec-sql`).
    pub helper: Option<PathBuf>,
    /// Shrink a failing case and write its reproduction here.
    pub repro_dir: Option<PathBuf>,
    /// Time allowed to shrink one failure.
    pub shrink_budget: Duration,
    /// Stop at the first failure (mutation runs).
    pub stop_at_first: bool,
    /// Print a line per case.
    pub verbose: bool,
}

impl Config {
    pub fn new(rows: usize, cases: usize, seed: u64) -> Config {
        Config {
            rows,
            cases,
            seed,
            blocks: 60,
            helper: None,
            repro_dir: None,
            shrink_budget: Duration::from_secs(60),
            stop_at_first: false,
            verbose: false,
        }
    }
}

/// One failure.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The case's seed (`--seed SEED --cases 1` runs it alone).
    pub seed: u64,
    pub step: usize,
    pub message: String,
    /// The shrunk reproduction, if one was written.
    pub repro: Option<PathBuf>,
}

#[derive(Clone, Debug, Default)]
pub struct Report {
    pub stats: Stats,
    pub failures: Vec<Failure>,
    pub elapsed: Duration,
}

impl Report {
    /// The per-class table and the totals, as the command prints them.
    pub fn summary(&self) -> String {
        let mut s = String::from("class  checks  served  declined(allowed)  declined\n");
        for (c, k) in &self.stats.classes {
            s += &format!(
                "{:<5}  {:>6}  {:>6}  {:>17}  {:>8}\n",
                c.to_string(),
                k.checks,
                k.served,
                k.allowed,
                k.declined
            );
        }
        for (r, n) in &self.stats.allowed {
            s += &format!("allowed decline: {n} x {r}\n");
        }
        let o: Vec<String> = self
            .stats
            .oracles
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        s += &format!("checks by oracle: {}\n", o.join(", "));
        s += &format!("time: {:.1} s\n", self.elapsed.as_secs_f64());
        s
    }
}

/// Failures shrunk to reproductions in one run.
const MAX_SHRUNK: usize = 3;

/// Run every case of `cfg`.
pub fn run(cfg: &Config) -> Report {
    let start = Instant::now();
    let mut report = Report::default();
    let mut case_cfg = cfg.clone();
    for i in 0..cfg.cases {
        let seed = cfg.seed.wrapping_add(i as u64);
        // Shrinking takes up to a minute: the first few failures are enough.
        if report.failures.iter().filter(|f| f.repro.is_some()).count() >= MAX_SHRUNK {
            case_cfg.repro_dir = None;
        }
        let (stats, failures) = run_case(&case_cfg, seed);
        if cfg.verbose {
            eprintln!(
                "case seed {seed}: {} passed, {} failed",
                stats.passed, stats.failed
            );
        }
        report.stats.merge(&stats);
        let stop = cfg.stop_at_first && !failures.is_empty();
        report.failures.extend(failures);
        if stop {
            break;
        }
    }
    report.elapsed = start.elapsed();
    report
}

fn run_case(cfg: &Config, seed: u64) -> (Stats, Vec<Failure>) {
    let (_schema, steps) = gen::case(
        seed,
        Size {
            rows: cfg.rows,
            blocks: cfg.blocks,
        },
    );
    let mut stats = Stats::default();
    let mut failures = Vec::new();
    let mut pair = match Pair::new(cfg.helper.clone()) {
        Ok(p) => p,
        Err(e) => {
            stats.failed += 1;
            failures.push(Failure {
                seed,
                step: 0,
                message: format!("cannot open the databases: {e}"),
                repro: None,
            });
            return (stats, failures);
        }
    };
    for (i, step) in steps.iter().enumerate() {
        if let Err(message) = pair.step(step, &mut stats) {
            stats.failed += 1;
            let mut f = Failure {
                seed,
                step: i,
                message,
                repro: None,
            };
            if let Some(dir) = &cfg.repro_dir {
                drop(pair);
                f.repro = shrink_and_save(cfg, dir, &steps[..=i], &f);
                failures.push(f);
                // The shrink replays the steps; the case ends here.
                return (stats, failures);
            }
            failures.push(f);
            // A write that differs leaves the two databases apart.
            if cfg.stop_at_first || !step.is_check() {
                break;
            }
        }
    }
    (stats, failures)
}

/// Replay `steps` on fresh databases; `Some(message)` if the last step fails
/// (and no step before it does).
pub fn replay_fails(steps: &[Step], helper: Option<PathBuf>) -> Option<String> {
    let mut pair = Pair::new(helper).ok()?;
    let mut st = Stats::default();
    let (last, head) = steps.split_last()?;
    for s in head {
        if pair.step(s, &mut st).is_err() {
            return None;
        }
    }
    pair.step(last, &mut st).err()
}

/// Run a reproduction file; returns the stats and the failures' messages.
pub fn replay(steps: &[Step], helper: Option<PathBuf>) -> anyhow::Result<(Stats, Vec<String>)> {
    let mut pair = Pair::new(helper)?;
    let mut st = Stats::default();
    let mut failures = Vec::new();
    for s in steps {
        if let Err(m) = pair.step(s, &mut st) {
            st.failed += 1;
            failures.push(m);
        }
    }
    Ok((st, failures))
}

fn shrink_and_save(cfg: &Config, dir: &Path, steps: &[Step], f: &Failure) -> Option<PathBuf> {
    let (cur, message) = shrink(steps, cfg.helper.clone(), cfg.shrink_budget)?;
    std::fs::create_dir_all(dir).ok()?;
    let path = dir.join(format!("parity-seed-{}-rows-{}.sql", f.seed, cfg.rows));
    let message = message.unwrap_or_else(|| f.message.clone());
    let text = repro::write(
        &cur,
        &format!(
            "seed {} (rows {}), step {}\n{message}",
            f.seed, cfg.rows, f.step
        ),
    );
    std::fs::write(&path, text).ok()?;
    Some(path)
}

/// Shrink a reproduction: replay `steps`, cut them after the first failing
/// step, and shrink that. `None` if nothing fails.
pub fn shrink_file(
    steps: &[Step],
    helper: Option<PathBuf>,
    budget: Duration,
) -> Option<(Vec<Step>, String)> {
    let mut pair = Pair::new(helper.clone()).ok()?;
    let mut st = Stats::default();
    let first = steps.iter().position(|s| pair.step(s, &mut st).is_err())?;
    drop(pair);
    let (cur, message) = shrink(&steps[..=first], helper, budget)?;
    Some((cur, message.unwrap_or_default()))
}

/// Delta-debug the steps before the failing one (keeping it last): the
/// smallest list found within `budget` that still fails, and its message.
pub fn shrink(
    steps: &[Step],
    helper: Option<PathBuf>,
    budget: Duration,
) -> Option<(Vec<Step>, Option<String>)> {
    let deadline = Instant::now() + budget;
    let (last, head) = steps.split_last()?;
    // Earlier checks cannot matter to the failing one.
    let mut cur: Vec<Step> = head.iter().filter(|s| !s.is_check()).cloned().collect();
    let fails = |v: &[Step]| {
        let mut all = v.to_vec();
        all.push(last.clone());
        replay_fails(&all, helper.clone()).is_some()
    };
    if !fails(&cur) {
        cur = head.to_vec();
    }
    let mut n = 2usize;
    while cur.len() >= 2 && Instant::now() < deadline {
        let chunk = cur.len().div_ceil(n);
        let mut removed = false;
        let mut start = 0;
        while start < cur.len() && Instant::now() < deadline {
            let end = (start + chunk).min(cur.len());
            let cand: Vec<Step> = cur[..start].iter().chain(&cur[end..]).cloned().collect();
            if fails(&cand) {
                cur = cand;
                removed = true;
            } else {
                start = end;
            }
        }
        if removed {
            n = n.saturating_sub(1).max(2);
        } else if chunk == 1 {
            break;
        } else {
            n = (n * 2).min(cur.len());
        }
    }
    // Then the rows of multi-row INSERTs, one statement at a time.
    for i in 0..cur.len() {
        'halving: while Instant::now() < deadline {
            for smaller in repro::halve_values(&cur[i]) {
                let mut cand = cur.clone();
                cand[i] = smaller;
                if fails(&cand) {
                    cur = cand;
                    continue 'halving;
                }
            }
            break;
        }
    }
    cur.push(last.clone());
    let message = replay_fails(&cur, helper);
    Some((cur, message))
}

/// The deliberate bugs, by name, from `pleroma::mutation` (the router's,
/// the plane's and the joins'), so that a new mutation is swept as soon as it
/// is listed there.
pub fn mutation_names() -> Vec<&'static str> {
    let mut names = pleroma::mutation::all();
    // The suite checks joins too (class J).
    for m in pleroma::mutation::JOIN_MUTATIONS {
        if !names.contains(m) {
            names.push(m);
        }
    }
    names
}

/// Run the suite under each mutation: `(name, red)`.
pub fn run_mutations(
    cfg: &Config,
    names: &[&str],
    mut each: impl FnMut(&str, bool, &Report),
) -> Vec<(String, bool)> {
    let mut cfg = cfg.clone();
    cfg.stop_at_first = true;
    cfg.repro_dir = None;
    let mut out = Vec::new();
    for name in names {
        pleroma::mutation::set(Some(name));
        let report = run(&cfg);
        pleroma::mutation::set(None);
        let red = report.stats.failed > 0;
        each(name, red, &report);
        out.push((name.to_string(), red));
    }
    out
}
