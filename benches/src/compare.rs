//! The regression gate: `pleroma bench compare OLD.json NEW.json`.
//!
//! The seed's rule: every cell is run twice on each build (our two timed
//! loops), and a cell regressed only if it is worse by more than 25 % (or by
//! the baseline's own spread between its two loops, if larger) in *both*
//! pairs (loop 1 against loop 1, loop 2 against loop 2).

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::harness::{fmt_ms, table_row, Cell, Report};

fn read(path: &Path) -> Result<Report> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a benchmark JSON file", path.display()))
}

/// The allowed slowdown of a cell: 25 %, or the baseline's spread if larger.
pub fn tolerance(old: &Cell) -> f64 {
    let (a, b) = (old.loop1_ms, old.loop2_ms);
    let spread = if a > 0.0 && b > 0.0 {
        a.max(b) / a.min(b) - 1.0
    } else {
        0.0
    };
    spread.max(0.25)
}

/// Did `new` regress against `old` under the rule?
pub fn regressed(old: &Cell, new: &Cell) -> bool {
    let tol = 1.0 + tolerance(old);
    let ok = |x: f64| x.is_finite() && x > 0.0;
    if !(ok(old.loop1_ms) && ok(old.loop2_ms) && ok(new.loop1_ms) && ok(new.loop2_ms)) {
        return false;
    }
    new.loop1_ms > old.loop1_ms * tol && new.loop2_ms > old.loop2_ms * tol
}

/// Compare two result files; fails (non-zero exit) when any cell regressed.
pub fn run(old: &Path, new: &Path) -> Result<()> {
    let (old, new) = (read(old)?, read(new)?);
    if old.workload != new.workload || old.rows != new.rows {
        eprintln!(
            "warning: comparing {} at {} rows with {} at {} rows",
            old.workload, old.rows, new.workload, new.rows
        );
    }
    let mut compared = 0;
    let mut out = table_row(
        &[
            "query",
            "arm",
            "old loop1/loop2 ms",
            "new loop1/loop2 ms",
            "allowed",
            "slower by",
        ]
        .map(String::from),
    );
    out.push_str(&table_row(&["---"; 6].map(String::from)));
    let mut bad = 0;
    for n in &new.cells {
        let Some(o) = old
            .cells
            .iter()
            .find(|o| o.query == n.query && o.arm == n.arm)
        else {
            continue;
        };
        compared += 1;
        if regressed(o, n) {
            bad += 1;
            let worst = (n.loop1_ms / o.loop1_ms).min(n.loop2_ms / o.loop2_ms);
            out.push_str(&table_row(&[
                n.query.clone(),
                n.arm.clone(),
                format!("{} / {}", fmt_ms(o.loop1_ms), fmt_ms(o.loop2_ms)),
                format!("{} / {}", fmt_ms(n.loop1_ms), fmt_ms(n.loop2_ms)),
                format!("+{:.0}%", tolerance(o) * 100.0),
                format!("{:.2}x", worst),
            ]));
        }
    }
    println!(
        "{} ({} rows): {compared} cells compared, {bad} regressed",
        new.workload, new.rows
    );
    if bad > 0 {
        print!("{out}");
        // Plain SQLite is the same code on both builds: its cells crossing
        // the line measure the machine, not the change.
        let control = new
            .cells
            .iter()
            .filter(|n| n.arm == "sqlite")
            .filter(|n| {
                old.cells
                    .iter()
                    .any(|o| o.query == n.query && o.arm == n.arm && regressed(o, n))
            })
            .count();
        if control > 0 {
            println!(
                "note: {control} of these are `sqlite` cells, which run the same code on both builds: \
                 the machine was noisier in one run; rerun both builds back to back before trusting the rest"
            );
        }
        bail!("{bad} cells regressed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(l1: f64, l2: f64) -> Cell {
        Cell {
            loop1_ms: l1,
            loop2_ms: l2,
            ..Cell::default()
        }
    }

    #[test]
    fn a_regression_must_show_in_both_pairs() {
        assert!(regressed(&cell(1.0, 1.0), &cell(1.3, 1.3)));
        assert!(!regressed(&cell(1.0, 1.0), &cell(1.3, 1.1)));
        assert!(!regressed(&cell(1.0, 1.0), &cell(1.2, 1.2)));
        // A noisy baseline widens the band to its own spread.
        assert!(!regressed(&cell(1.0, 1.5), &cell(1.4, 2.0)));
    }
}
