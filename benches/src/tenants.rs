//! §4 Tenants and joins: events spread over six tenant tables and a
//! `products` dimension table of 2,000 rows.
//!
//! `tenant_1` … `tenant_6` (`id, region TEXT (8), kind TEXT (5), product_id
//! INTEGER (2,000 keys), amount INTEGER, qty INTEGER`) hold 40 %, 24 %, 16 %,
//! 10 %, 7 % and 3 % of `--rows` (the seed: 2,000,000 down to 150,000 of
//! 5,000,000); `products(id INTEGER PRIMARY KEY, category TEXT (12), price
//! INTEGER, weight INTEGER)`. Each tenant has a plane on `region, kind` with
//! measures `amount, qty` and a limb on `product_id → products.id`.
//!
//! Queries: per tenant a filter with COUNT and SUM (`t1_filter` … `t6_filter`);
//! on the largest and the smallest tenant the join to products with COUNT(*)
//! alone and with two SUMs (one of each table), the second a filtered one;
//! and two joins the limb must decline, which tie the engine: a filter on
//! `products` and a GROUP BY on `products`. A repeated identical statement is
//! answered from the memo (route `memo`, the warm figures); the first call of
//! each join is the limb's own path.
//!
//! Left out: the "after a write" cell (a write between calls would need a
//! write phase in the read harness); the first-call column is the limb path.
//!
//! Run: `cargo run --release --bin pleroma -- bench tenants --rows 5000000`.

use anyhow::Result;

use crate::gen::{self, Rng};
use crate::harness::{self, Options, Query, Workload};
use crate::Outcome;

const SHARES: [u64; 6] = [40, 24, 16, 10, 7, 3];
const REGIONS: [&str; 8] = ["na", "sa", "eu", "me", "af", "as", "oc", "an"];
const KINDS: [&str; 5] = ["view", "cart", "buy", "refund", "review"];
const PRODUCTS: i64 = 2000;

fn tenant_rows(rows: u64, i: usize) -> u64 {
    (rows * SHARES[i] / 100).max(1)
}

pub fn create_and_load(
    conn: &rusqlite::Connection,
    rows: u64,
    seed: u64,
    progress: bool,
) -> Result<()> {
    let mut rng = Rng::new(seed);
    conn.execute_batch(
        "CREATE TABLE products(id INTEGER PRIMARY KEY, category TEXT, price INTEGER, weight INTEGER);",
    )?;
    conn.execute_batch("BEGIN")?;
    for id in 1..=PRODUCTS {
        conn.execute(
            "INSERT INTO products VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![
                id,
                format!("c{:02}", rng.below(12)),
                100 + rng.below(50_000) as i64,
                rng.below(20) as i64
            ],
        )?;
    }
    let pb = gen::progress(progress, rows, "tenants");
    for i in 0..SHARES.len() {
        let t = i + 1;
        conn.execute_batch(&format!(
            "CREATE TABLE tenant_{t}(id INTEGER PRIMARY KEY, region TEXT, kind TEXT, product_id INTEGER, \
             amount INTEGER, qty INTEGER)"
        ))?;
        let mut ins = conn.prepare(&format!(
            "INSERT INTO tenant_{t} VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        ))?;
        for id in 1..=tenant_rows(rows, i) as i64 {
            ins.execute(rusqlite::params![
                id,
                REGIONS[rng.weighted(&[30, 10, 25, 5, 5, 20, 4, 1])],
                KINDS[rng.weighted(&[60, 20, 12, 3, 5])],
                1 + rng.below(PRODUCTS as u64) as i64,
                rng.below(100_000) as i64,
                1 + rng.below(5) as i64,
            ])?;
            if id % 65536 == 0 {
                pb.inc(65536);
            }
        }
    }
    conn.execute_batch("COMMIT")?;
    pb.finish_and_clear();
    Ok(())
}

pub fn queries() -> Vec<Query> {
    let mut v = Vec::new();
    for t in 1..=SHARES.len() {
        v.push(Query::new(
            &format!("t{t}_filter"),
            &format!("SELECT COUNT(*), SUM(amount) FROM tenant_{t} WHERE region = 'eu' AND kind IN ('buy', 'refund')"),
            "",
        ));
    }
    for t in [1, SHARES.len()] {
        let j = format!("FROM tenant_{t} e JOIN products p ON e.product_id = p.id");
        v.push(Query::new(
            &format!("t{t}_join_count"),
            &format!("SELECT COUNT(*) {j}"),
            "",
        ));
        v.push(Query::new(
            &format!("t{t}_join_sums"),
            &format!("SELECT COUNT(*), SUM(e.amount), SUM(p.price) {j} WHERE e.kind = 'buy'"),
            "",
        ));
    }
    let j = "FROM tenant_1 e JOIN products p ON e.product_id = p.id";
    v.push(Query::new(
        "join_filter_on_products",
        &format!("SELECT COUNT(*), SUM(e.amount) {j} WHERE p.category = 'c03'"),
        "",
    ));
    v.push(Query::new(
        "join_group_on_products",
        &format!("SELECT p.category, COUNT(*) {j} GROUP BY p.category ORDER BY p.category"),
        "",
    ));
    v
}

pub fn workload(rows: u64, seed: u64) -> Result<Workload> {
    let path = gen::cached_db("tenants", rows, seed, |conn| {
        conn.execute_batch(gen::FAST_LOAD)?;
        create_and_load(conn, rows, seed, true)
    })?;
    let mut plane_pragmas = Vec::new();
    let mut tables = vec!["products".to_owned()];
    for t in 1..=SHARES.len() {
        plane_pragmas.push(format!(
            "PRAGMA pleroma_attach('tenant_{t}', 'region, kind', 'amount, qty')"
        ));
        plane_pragmas.push(format!(
            "PRAGMA pleroma_limb('tenant_{t}', 'product_id', 'products', 'id')"
        ));
        tables.push(format!("tenant_{t}"));
    }
    Ok(Workload {
        name: "tenants".into(),
        rows,
        path,
        plane_pragmas,
        tables,
        queries: queries(),
    })
}

pub fn run(rows: u64, opts: &Options) -> Result<Outcome> {
    let w = workload(rows, opts.seed)?;
    let report = harness::run_reads(&w, opts)?;
    let markdown = harness::markdown(&report, &w.queries);
    Ok(Outcome {
        report,
        markdown,
        chart: w.queries.iter().map(|q| q.name.clone()).collect(),
    })
}
