//! The read path's fixed cost, for an instruction profiler: `calls` answers
//! of one ledger query through `Connection::query`, on a file with a
//! persisted plane on `invoices(region, status, month)`. Instructions are
//! repeatable where wall time on a shared machine is not:
//!
//! ```sh
//! cargo build --release -p pleroma-benches --example read_cost
//! B=target/release/examples/read_cost
//! valgrind --tool=callgrind --collect-atstart=no \
//!   --toggle-collect='pleroma::connection::Connection::query' $B 20000 memo 1000
//! ```
//!
//! The total over `15 × calls + 2` calls (15 rounds, one call before them
//! and one warm-up) is what `Connection::query` costs; or, without the
//! toggle, the difference of two runs' totals (`calls` 0 and N) over
//! `15 × N`.
//! Modes: `memo` (the same text again: a memo hit), `slice` (the memo
//! cleared before each call: the answer from the cells), `sqlite` (plain
//! rusqlite, a cached statement). The query is the ledger's
//! `paid_h1_by_region_month` unless a fourth argument names another of
//! [`pleroma_benches::ledger::QUERIES`]. Wall times (median of 15 rounds of
//! `calls`) are printed too.

use std::time::Instant;

use pleroma_benches::ledger;

fn main() {
    let mut args = std::env::args().skip(1);
    let rows: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let mode = args.next().unwrap_or_else(|| "memo".into());
    let calls: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let name = args
        .next()
        .unwrap_or_else(|| "paid_h1_by_region_month".into());
    let sql = ledger::QUERIES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("no ledger query named {name}"));

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ledger.db");
    {
        let c = rusqlite::Connection::open(&path).expect("open");
        c.execute_batch("PRAGMA journal_mode = wal").expect("wal");
        ledger::create_and_load(&c, rows, 42, false).expect("load");
    }
    let time = |f: &mut dyn FnMut()| {
        f(); // warm: the statement prepared, the answer memoized
        let mut rounds: Vec<f64> = (0..15)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..calls {
                    f();
                }
                t.elapsed().as_secs_f64() * 1e6 / calls.max(1) as f64
            })
            .collect();
        rounds.sort_by(f64::total_cmp);
        rounds[rounds.len() / 2]
    };
    let us = match mode.as_str() {
        "sqlite" => {
            let c = rusqlite::Connection::open(&path).expect("open");
            time(&mut || {
                let mut st = c.prepare_cached(sql).expect("prepare");
                let n = st.query_map([], |_| Ok(())).expect("query").count();
                assert!(n > 0);
            })
        }
        "memo" | "slice" => {
            let mut c = pleroma::Connection::open(&path).expect("open");
            c.execute_batch(ledger::PLANE_PRAGMA).expect("attach");
            let slice = mode == "slice";
            c.query(sql, &[]).expect("query");
            let us = time(&mut || {
                if slice {
                    c.clear_memo();
                }
                let rows = c.query(sql, &[]).expect("query");
                assert!(!rows.rows.is_empty());
            });
            let route = c.last_route();
            let want = if slice { "plane" } else { "memo" };
            assert_eq!(route.kind.to_string(), want, "{route:?}");
            us
        }
        other => panic!("mode {other}: memo, slice or sqlite"),
    };
    println!("{name} {mode}: {us:.3} us per call (median of 15 rounds of {calls})");
}
