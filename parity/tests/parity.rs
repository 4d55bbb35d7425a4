//! The parity suite at 2,000 rows: every answer equals SQLite's, every
//! served-class query is served by the plane, and TLP and NoREC hold.
//! A failure is shrunk to a `.sql` reproduction under the test's temp dir.

use std::path::PathBuf;

use pleroma_parity::{run, Config};

#[test]
fn plane_answers_equal_sqlite_at_2000_rows() {
    let mut cfg = Config::new(2_000, 40, 1);
    cfg.helper = Some(PathBuf::from(env!("CARGO_BIN_EXE_pleroma-parity")));
    cfg.repro_dir = Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("parity-failures"));
    let report = run(&cfg);
    println!("{}", report.summary());
    for f in &report.failures {
        println!(
            "FAILED (case seed {}, step {}): {}\n    reproduction: {:?}",
            f.seed, f.step, f.message, f.repro
        );
    }
    println!(
        "parity: {} passed, {} failed",
        report.stats.passed, report.stats.failed
    );
    assert_eq!(
        report.stats.failed, 0,
        "parity failures (reproductions above)"
    );
    assert!(
        report.stats.passed >= 3_000,
        "only {} checks",
        report.stats.passed
    );
    // A suite where everything was declined would pass for nothing.
    for (class, s) in &report.stats.classes {
        if class.served() {
            assert!(
                s.served * 10 >= s.checks * 6,
                "class {class}: only {} of {} served",
                s.served,
                s.checks
            );
        }
    }
}
