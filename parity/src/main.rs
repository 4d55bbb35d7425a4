//! The parity command.
//!
//! ```text
//! pleroma-parity [--rows N] [--cases N] [--seed S] [--blocks N] [--verbose]
//!                [--repro-dir DIR] [--no-shrink]
//! pleroma-parity --mutations [--rows N] [--cases N] [--seed S]
//! pleroma-parity --mutation NAME [--rows N] [--cases N] [--seed S]
//!                                      (the sweep of that one mutation)
//! pleroma-parity [--mutation NAME] --replay FILE.sql
//! pleroma-parity --shrink FILE.sql     (writes FILE.min.sql)
//! pleroma-parity --dump FILE.sql [--rows N] [--seed S] [--blocks N]
//!                                      (the case's steps, not run)
//! ```
//!
//! The last line is `parity: N passed, M failed` (or, with `--mutations`,
//! `mutations: N red, M green`); the exit status is non-zero on a failure
//! (or a green mutation).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use pleroma_parity::{oracle, repro, runner, Config};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The second process of a `Process` step.
    if args.first().map(String::as_str) == Some("--exec-sql") {
        if args.len() != 3 {
            eprintln!("usage: --exec-sql DB SQL");
            return ExitCode::from(2);
        }
        return ExitCode::from(oracle::exec_sql_main(&args[1], &args[2]) as u8);
    }
    match real_main(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn real_main(args: &[String]) -> anyhow::Result<bool> {
    let mut cfg = Config::new(2_000, 8, 1);
    cfg.helper = std::env::current_exe().ok();
    // Reproductions go under the build's target dir when run from the repo.
    let target = PathBuf::from("target");
    cfg.repro_dir = Some(
        if target.is_dir() {
            target
        } else {
            std::env::temp_dir()
        }
        .join("parity-failures"),
    );
    let mut mutations = false;
    let mut only: Option<String> = None;
    let mut replay: Option<PathBuf> = None;
    let mut shrink: Option<PathBuf> = None;
    let mut dump: Option<PathBuf> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--rows" => cfg.rows = val()?.parse().context("--rows")?,
            "--cases" => cfg.cases = val()?.parse().context("--cases")?,
            "--seed" => cfg.seed = val()?.parse().context("--seed")?,
            "--blocks" => cfg.blocks = val()?.parse().context("--blocks")?,
            "--repro-dir" => cfg.repro_dir = Some(PathBuf::from(val()?)),
            "--no-shrink" => cfg.repro_dir = None,
            "--verbose" => cfg.verbose = true,
            "--mutations" => mutations = true,
            "--mutation" => {
                mutations = true;
                only = Some(val()?.clone());
            }
            "--replay" => replay = Some(PathBuf::from(val()?)),
            "--shrink" => shrink = Some(PathBuf::from(val()?)),
            "--dump" => dump = Some(PathBuf::from(val()?)),
            "--help" | "-h" => {
                println!("usage: pleroma-parity [--rows N] [--cases N] [--seed S] [--blocks N] [--verbose] [--repro-dir DIR] [--no-shrink]\n       pleroma-parity --mutations [--rows N] [--cases N] [--seed S]\n       pleroma-parity --mutation NAME [--rows N] [--cases N] [--seed S]\n       pleroma-parity [--mutation NAME] --replay FILE.sql\n       pleroma-parity --shrink FILE.sql   (writes FILE.min.sql)\n       pleroma-parity --dump FILE.sql [--rows N] [--seed S] [--blocks N]");
                return Ok(true);
            }
            other => bail!("unknown argument {other} (try --help)"),
        }
    }
    if let Some(file) = dump {
        // The case of `--seed` (with `--rows`, `--blocks`) as a reproduction
        // file, without running it.
        let (_, steps) = pleroma_parity::gen::case(
            cfg.seed,
            pleroma_parity::gen::Size {
                rows: cfg.rows,
                blocks: cfg.blocks,
            },
        );
        std::fs::write(
            &file,
            repro::write(&steps, &format!("seed {} (rows {})", cfg.seed, cfg.rows)),
        )?;
        println!("{} steps: {}", steps.len(), file.display());
        return Ok(true);
    }
    if let Some(file) = shrink {
        let text =
            std::fs::read_to_string(&file).with_context(|| format!("read {}", file.display()))?;
        let steps = repro::parse(&text)?;
        let Some((small, message)) =
            runner::shrink_file(&steps, cfg.helper.clone(), cfg.shrink_budget)
        else {
            println!("{}: nothing fails", file.display());
            return Ok(true);
        };
        let out = file.with_extension("min.sql");
        std::fs::write(&out, repro::write(&small, &message))?;
        println!(
            "{} steps -> {} steps: {}",
            steps.len(),
            small.len(),
            out.display()
        );
        println!("{message}");
        return Ok(false);
    }
    if let Some(file) = replay {
        let text =
            std::fs::read_to_string(&file).with_context(|| format!("read {}", file.display()))?;
        let steps = repro::parse(&text)?;
        // `--mutation NAME --replay FILE`: the file under that mutation.
        pleroma::mutation::set(only.as_deref());
        let (stats, failures) = runner::replay(&steps, cfg.helper.clone())?;
        pleroma::mutation::set(None);
        for f in &failures {
            println!("FAILED: {f}");
        }
        println!("parity: {} passed, {} failed", stats.passed, stats.failed);
        return Ok(stats.failed == 0);
    }
    if mutations {
        let mut names = runner::mutation_names();
        if let Some(one) = &only {
            // Any mutation by name, the persisted planes' own too.
            names.extend(pleroma::mutation::PERSIST_MUTATIONS);
            names.retain(|n| n == one);
            names.dedup();
            if names.is_empty() {
                bail!("--mutation {one}: no such mutation");
            }
        }
        println!(
            "mutation sweep: {} mutations, {} rows, {} cases from seed {}",
            names.len(),
            cfg.rows,
            cfg.cases,
            cfg.seed
        );
        let results = runner::run_mutations(&cfg, &names, |name, red, report| {
            let first = report
                .failures
                .first()
                .map(|f| f.message.lines().next().unwrap_or("").to_owned())
                .unwrap_or_default();
            println!("mutation {name}: {}", if red { "red" } else { "green" });
            if red {
                println!(
                    "    caught after {} checks ({:.1} s): {first}",
                    report.stats.passed,
                    report.elapsed.as_secs_f64()
                );
            }
        });
        let red = results.iter().filter(|r| r.1).count();
        let green = results.len() - red;
        println!("mutations: {red} red, {green} green");
        return Ok(green == 0);
    }
    println!(
        "parity: {} rows, {} cases from seed {}, {} blocks each",
        cfg.rows, cfg.cases, cfg.seed, cfg.blocks
    );
    let report = pleroma_parity::run(&cfg);
    print!("{}", report.summary());
    for f in &report.failures {
        println!(
            "FAILED (case seed {}, step {}): {}",
            f.seed, f.step, f.message
        );
        if let Some(p) = &f.repro {
            println!("    reproduction: {}", p.display());
        }
        println!(
            "    rerun: cargo run --release -p pleroma-parity -- --rows {} --cases 1 --seed {}",
            cfg.rows, f.seed
        );
    }
    println!(
        "parity: {} passed, {} failed",
        report.stats.passed, report.stats.failed
    );
    Ok(report.stats.failed == 0)
}
