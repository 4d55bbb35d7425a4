//! §1 Ledger: customers and invoices, money as integer cents.
//!
//! Queries (16, [`QUERIES`]): five rollups (total invoiced, invoice count,
//! revenue by region, count by status, revenue by month); two dashboard
//! slices (paid revenue by region and month for a half-year; overdue exposure
//! by region with HAVING); a primary-key lookup; top 10 customers by revenue;
//! the big-ticket count (a filter on the measure); the 10 largest invoices;
//! five joins to `customers`. The plane (dims `region, status, month`,
//! measure `amount_cents`) serves the rollups and the slices and must decline
//! the other nine.
//!
//! Left out: the server (networked) arms and SQL Server of the seed.
//! Bulk-load rows/s per arm with `--load` (a second full load per arm).
//!
//! Run: `cargo run --release --bin pleroma -- bench ledger --rows 1000000`
//! (full size is `--rows 10000000`).

use std::time::Instant;

use anyhow::Result;
use rusqlite::types::Value;

use crate::gen::{self, Rng};
use crate::harness::{self, Arm, Options, Query, Workload};
use crate::writes::ArmConn;
use crate::Outcome;

/// The plane of the ledger: a 10-bit joint (4 regions × 5 statuses × 24 months).
pub const PLANE_PRAGMA: &str =
    "PRAGMA pleroma_attach('invoices', 'region, status, month', 'amount_cents')";

pub const REGIONS: [&str; 4] = ["north", "south", "east", "west"];
pub const SEGMENTS: [&str; 3] = ["consumer", "smb", "enterprise"];
pub const STATUSES: [&str; 5] = ["paid", "open", "overdue", "draft", "void"];
const STATUS_WEIGHTS: [u32; 5] = [60, 15, 10, 10, 5];
const REGION_WEIGHTS: [u32; 4] = [40, 30, 20, 10];
const SEGMENT_WEIGHTS: [u32; 3] = [70, 25, 5];

/// The ledger's 16 queries, (name, SQL).
pub const QUERIES: &[(&str, &str)] = &[
    ("total_invoiced", "SELECT SUM(amount_cents) FROM invoices"),
    ("invoice_count", "SELECT COUNT(*) FROM invoices"),
    ("revenue_by_region", "SELECT region, SUM(amount_cents) FROM invoices GROUP BY region ORDER BY region"),
    ("count_by_status", "SELECT status, COUNT(*) FROM invoices GROUP BY status ORDER BY status"),
    ("revenue_by_month", "SELECT month, SUM(amount_cents) FROM invoices GROUP BY month ORDER BY month"),
    (
        "paid_h1_by_region_month",
        "SELECT region, month, SUM(amount_cents) AS revenue FROM invoices \
         WHERE status = 'paid' AND month BETWEEN 202401 AND 202406 \
         GROUP BY region, month ORDER BY region, month",
    ),
    (
        "overdue_exposure",
        "SELECT region, SUM(amount_cents) AS exposure, COUNT(*) AS n FROM invoices \
         WHERE status = 'overdue' GROUP BY region HAVING SUM(amount_cents) > 100000 \
         ORDER BY exposure DESC",
    ),
    ("pk_lookup", "SELECT id, customer_id, region, status, month, amount_cents FROM invoices WHERE id = 1000"),
    (
        "top_customers",
        "SELECT customer_id, SUM(amount_cents) AS revenue FROM invoices \
         GROUP BY customer_id ORDER BY revenue DESC, customer_id LIMIT 10",
    ),
    ("big_ticket_count", "SELECT COUNT(*) FROM invoices WHERE amount_cents >= 500000"),
    (
        "largest_invoices",
        "SELECT id, customer_id, amount_cents FROM invoices ORDER BY amount_cents DESC, id LIMIT 10",
    ),
    (
        "join_revenue_by_segment",
        "SELECT c.segment, SUM(i.amount_cents) FROM invoices i JOIN customers c ON c.id = i.customer_id \
         GROUP BY c.segment ORDER BY c.segment",
    ),
    (
        "join_count_by_customer_region",
        "SELECT c.region, COUNT(*) FROM invoices i JOIN customers c ON c.id = i.customer_id \
         GROUP BY c.region ORDER BY c.region",
    ),
    (
        "join_enterprise_paid",
        "SELECT SUM(i.amount_cents) FROM invoices i JOIN customers c ON c.id = i.customer_id \
         WHERE c.segment = 'enterprise' AND i.status = 'paid'",
    ),
    (
        "join_top_customer_names",
        "SELECT c.name, SUM(i.amount_cents) AS revenue FROM invoices i JOIN customers c ON c.id = i.customer_id \
         GROUP BY c.id, c.name ORDER BY revenue DESC, c.id LIMIT 10",
    ),
    (
        "join_overdue_by_segment",
        "SELECT c.segment, i.region, COUNT(*), SUM(i.amount_cents) FROM invoices i \
         JOIN customers c ON c.id = i.customer_id WHERE i.status = 'overdue' \
         GROUP BY c.segment, i.region ORDER BY c.segment, i.region",
    ),
];

const SCHEMA: &str =
    "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, region TEXT, segment TEXT);
     CREATE TABLE invoices(id INTEGER PRIMARY KEY, customer_id INTEGER, region TEXT, status TEXT,
                           month INTEGER, amount_cents INTEGER);";
const INSERTS: [&str; 2] = [
    "INSERT INTO customers VALUES (?1, ?2, ?3, ?4)",
    "INSERT INTO invoices VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
];

/// Generate the ledger's rows in load order, handing each to `emit` with
/// the index of its INSERT in [`INSERTS`] (0 customers, 1 invoices).
fn generate(
    invoices: u64,
    seed: u64,
    progress: bool,
    mut emit: impl FnMut(usize, &[Value]) -> Result<()>,
) -> Result<()> {
    let customers = (invoices / 50).max(1);
    let mut rng = Rng::new(seed);
    let pb = gen::progress(progress, customers + invoices, "ledger");
    let mut cust_region = Vec::with_capacity(customers as usize);
    for id in 1..=customers {
        let region = rng.weighted(&REGION_WEIGHTS);
        let segment = SEGMENTS[rng.weighted(&SEGMENT_WEIGHTS)];
        emit(
            0,
            &[
                Value::Integer(id as i64),
                Value::Text(format!("customer {id:06}")),
                Value::Text(REGIONS[region].into()),
                Value::Text(segment.into()),
            ],
        )?;
        cust_region.push(region as u8);
        if id % 65536 == 0 {
            pb.inc(65536);
        }
    }
    pb.set_position(customers);
    for id in 1..=invoices {
        let cust = rng.below(customers);
        let region = REGIONS[cust_region[cust as usize] as usize];
        let status = STATUSES[rng.weighted(&STATUS_WEIGHTS)];
        let m = rng.below(24) as i64;
        let month = 202301 + (m / 12) * 100 + m % 12;
        // Skewed towards small invoices: 1.00 to 10,000.00.
        let u = rng.unit();
        let amount = 100 + (u * u * u * 999_900.0) as i64;
        emit(
            1,
            &[
                Value::Integer(id as i64),
                Value::Integer(cust as i64 + 1),
                Value::Text(region.into()),
                Value::Text(status.into()),
                Value::Integer(month),
                Value::Integer(amount),
            ],
        )?;
        if id % 65536 == 0 {
            pb.inc(65536);
        }
    }
    pb.finish_and_clear();
    Ok(())
}

/// Create `customers` and `invoices` on `conn` and fill them with `invoices`
/// rows (and one customer per 50 invoices), deterministically from `seed`,
/// in one transaction with prepared INSERTs.
pub fn create_and_load(
    conn: &rusqlite::Connection,
    invoices: u64,
    seed: u64,
    progress: bool,
) -> Result<()> {
    conn.execute_batch(SCHEMA)?;
    conn.execute_batch("BEGIN")?;
    {
        let mut ins = [conn.prepare(INSERTS[0])?, conn.prepare(INSERTS[1])?];
        generate(invoices, seed, progress, |k, row| {
            ins[k].execute(rusqlite::params_from_iter(row))?;
            Ok(())
        })?;
    }
    conn.execute_batch("COMMIT")?;
    Ok(())
}

/// Bulk-load rows/s of each arm: the whole ledger into a new file in one
/// transaction (the plane arm attaches to the empty table first, so the
/// load feeds it row by row).
pub fn load_rates(rows: u64, opts: &Options, report: &mut harness::Report) -> Result<()> {
    for &arm in &opts.arms {
        if arm == Arm::Duckdb {
            continue;
        }
        let dir = gen::data_dir().join("scratch");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("ledger-load-{}.db", arm.name()));
        let _ = std::fs::remove_file(&path);
        let mut c = ArmConn::open(arm, &path)?;
        c.batch(SCHEMA)?;
        if arm == Arm::Plane {
            c.batch(PLANE_PRAGMA)?;
        }
        let t = Instant::now();
        c.exec("BEGIN", &[])?;
        generate(rows, opts.seed, false, |k, row| c.exec(INSERTS[k], row))?;
        c.exec("COMMIT", &[])?;
        let secs = t.elapsed().as_secs_f64();
        let total = rows + (rows / 50).max(1);
        report.figures.insert(
            format!("bulk load rows/s {}", arm.name()),
            (total as f64 / secs).round(),
        );
        drop(c);
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}

/// The cached ledger database with `rows` invoices.
pub fn database(rows: u64, seed: u64) -> Result<std::path::PathBuf> {
    gen::cached_db("ledger", rows, seed, |conn| {
        conn.execute_batch(gen::FAST_LOAD)?;
        create_and_load(conn, rows, seed, true)
    })
}

/// The workload as the harness runs it.
pub fn workload(rows: u64, seed: u64) -> Result<Workload> {
    Ok(Workload {
        name: "ledger".into(),
        rows,
        path: database(rows, seed)?,
        plane_pragmas: vec![PLANE_PRAGMA.into()],
        tables: vec!["customers".into(), "invoices".into()],
        queries: QUERIES.iter().map(|(n, s)| Query::new(n, s, "")).collect(),
    })
}

/// Run the ledger on every arm.
pub fn run(rows: u64, opts: &Options, load: bool) -> Result<Outcome> {
    let w = workload(rows, opts.seed)?;
    let mut report = harness::run_reads(&w, opts)?;
    if load {
        load_rates(rows, opts, &mut report)?;
    }
    let markdown = harness::markdown(&report, &w.queries);
    Ok(Outcome {
        report,
        markdown,
        chart: w.queries.iter().map(|q| q.name.clone()).collect(),
    })
}
