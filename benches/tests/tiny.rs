//! Every workload at a tiny size through `run_cli`, answers checked on every
//! arm: the harness must not rot between the runs of `benches/ci.sh`.

use pleroma_benches::run_cli;

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn every_workload_runs_and_every_arm_agrees() {
    let dir = std::env::temp_dir().join(format!("pleroma-bench-tiny-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The only test in this binary: no other thread reads the environment.
    std::env::set_var("PLEROMA_BENCH_DATA", &dir);
    let json = dir.join("ledger.json");
    let fast = "--budget-ms 1 --max-calls 3";
    for w in ["ledger", "dashboard", "classes", "tenants"] {
        run_cli(args(&format!(
            "{w} --rows 500 {fast} --json {} --svg {}",
            json.display(),
            dir.join("c.svg").display()
        )))
        .unwrap_or_else(|e| panic!("{w}: {e:#}"));
    }
    run_cli(args("residue --rows 500")).unwrap();
    run_cli(args("writes --rows 500")).unwrap();
    run_cli(args("speedtest --rows 300")).unwrap();
    run_cli(args(&format!(
        "compare {} {}",
        json.display(),
        json.display()
    )))
    .unwrap();
    assert!(run_cli(args("ledger --arms nosuch")).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
