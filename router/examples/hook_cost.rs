//! The change hook's cost per row, for an instruction profiler: one batch
//! INSERT of N rows into the `writes` workload's 9-column table, in one
//! transaction, with a plane on 4 dimensions and 3 measures (or, with
//! `noplane`, without one). Instructions are repeatable where wall time on a
//! shared machine is not:
//!
//! ```sh
//! cargo build --release -p pleroma --example hook_cost
//! valgrind --tool=callgrind target/release/examples/hook_cost 20000 noplane
//! valgrind --tool=callgrind target/release/examples/hook_cost 20000
//! ```
//!
//! The difference of the two totals, over N, is the plane's cost per row
//! (`callgrind_annotate --inclusive=yes` splits it: SQLite's
//! `sqlite3_preupdate_new`, encoding, applying). Wall times are printed too.

use pleroma::Connection;

fn main() {
    let mut args = std::env::args().skip(1);
    let rows: i64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let plane = args.next().as_deref() != Some("noplane");
    let mut c = Connection::open_in_memory().expect("open");
    c.execute_batch(
        "CREATE TABLE w(id INTEGER PRIMARY KEY, d1 TEXT, d2 TEXT, d3 INTEGER, d4 INTEGER, \
         m1 INTEGER, m2 INTEGER, m3 INTEGER, note TEXT)",
    )
    .expect("create");
    if plane {
        c.execute(
            "PRAGMA pleroma_attach('w', 'd1, d2, d3, d4', 'm1, m2, m3')",
            &[],
        )
        .expect("attach");
    }
    let start = std::time::Instant::now();
    c.execute_batch("BEGIN").expect("begin");
    {
        let mut st = c
            .sqlite()
            .prepare("INSERT INTO w(d1, d2, d3, d4, m1, m2, m3, note) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")
            .expect("prepare");
        let regions = ["north", "south", "east", "west"];
        let kinds = ["a", "b", "c", "d", "e", "f"];
        for i in 0..rows {
            st.execute(pleroma::rusqlite::params![
                regions[(i % 4) as usize],
                kinds[(i % 6) as usize],
                i % 24,
                i % 7,
                i,
                i * 3,
                -i,
                "note"
            ])
            .expect("insert");
        }
    }
    c.execute_batch("COMMIT").expect("commit");
    let took = start.elapsed();
    let check = c
        .query("SELECT COUNT(*), SUM(m1) FROM w", &[])
        .expect("check");
    println!(
        "{rows} rows, plane {plane}: {took:?}, {:.0} ns a row; COUNT, SUM(m1) = {:?}",
        took.as_nanos() as f64 / rows as f64,
        check.rows[0]
    );
}
