//! §2 Dashboard: one `events` table, 32 ad-hoc slices.
//!
//! `events(id, ts, user_id, country, device, os, plan, channel, daypart,
//! duration_ms, revenue_cents, items)`: one user per 10 events, six
//! small-domain dimensions (8 countries, 3 devices, 4 OSes, 3 plans,
//! 6 channels, 4 dayparts: a 14-bit joint), measures duration_ms,
//! revenue_cents, items.
//!
//! Slices (32): 9 W (scalar filters with COUNT/SUM/AVG), 8 G (group-bys with
//! and without a filter, ORDER BY/LIMIT), 3 H (HAVING), 4 D (COUNT DISTINCT
//! of a dimension, MIN/MAX with a filter), 7 X (a filter on `ts`,
//! COUNT(DISTINCT user_id), SUM of a non-measure, top 10 by user, a filter on
//! a measure, a row list, a point lookup) and 1 T (the whole-table total).
//! Per class it prints the median speed-up of `plane` over `engine` and over
//! the best other arm, warm and first call.
//!
//! Left out: TOTAL() (DuckDB has no such aggregate), the server arms.
//!
//! Run: `cargo run --release --bin pleroma -- bench dashboard --rows 1000000`
//! (full size is `--rows 10000000`).

use anyhow::Result;

use crate::gen::{self, Rng};
use crate::harness::{
    self, fmt_ratio, median, speedup, table_row, Arm, Options, Query, Report, Workload,
};
use crate::Outcome;

pub const PLANE_PRAGMA: &str =
    "PRAGMA pleroma_attach('events', 'country, device, os, plan, channel, daypart', \
                                'duration_ms, revenue_cents, items')";

const COUNTRIES: [&str; 8] = ["US", "GB", "DE", "FR", "ES", "JP", "BR", "IN"];
const COUNTRY_W: [u32; 8] = [30, 15, 12, 10, 10, 8, 8, 7];
const DEVICES: [&str; 3] = ["mobile", "desktop", "tablet"];
const DEVICE_W: [u32; 3] = [55, 35, 10];
const OSES: [&str; 4] = ["ios", "android", "windows", "macos"];
const PLANS: [&str; 3] = ["free", "pro", "team"];
const PLAN_W: [u32; 3] = [60, 30, 10];
const CHANNELS: [&str; 6] = ["search", "ads", "social", "email", "direct", "referral"];
const CHANNEL_W: [u32; 6] = [30, 20, 15, 10, 15, 10];
const DAYPARTS: [&str; 4] = ["morning", "afternoon", "evening", "night"];
/// 2024-01-01T00:00:00Z; the events spread over a year.
const TS0: i64 = 1_704_067_200;
const YEAR: i64 = 366 * 86_400;

/// Create and fill `events` with `rows` rows.
pub fn create_and_load(
    conn: &rusqlite::Connection,
    rows: u64,
    seed: u64,
    progress: bool,
) -> Result<()> {
    conn.execute_batch(
        "CREATE TABLE events(id INTEGER PRIMARY KEY, ts INTEGER, user_id INTEGER, country TEXT, device TEXT,
                             os TEXT, plan TEXT, channel TEXT, daypart TEXT, duration_ms INTEGER,
                             revenue_cents INTEGER, items INTEGER);",
    )?;
    let users = (rows / 10).max(1);
    let step = (YEAR / rows.max(1) as i64).max(1);
    let mut rng = Rng::new(seed);
    let pb = gen::progress(progress, rows, "events");
    conn.execute_batch("BEGIN")?;
    {
        let mut ins = conn.prepare(
            "INSERT INTO events VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )?;
        for id in 1..=rows {
            let ts = TS0 + id as i64 * step + rng.below(step as u64) as i64;
            let device = rng.weighted(&DEVICE_W);
            // Phones run iOS or Android, computers Windows or macOS.
            let os = if device == 1 {
                2 + rng.below(2)
            } else {
                rng.below(2)
            };
            let plan = rng.weighted(&PLAN_W);
            let revenue = if plan == 0 { 0 } else { rng.below(5000) as i64 };
            let daypart = ((ts / 3600) % 24 / 6) as usize;
            ins.execute(rusqlite::params![
                id as i64,
                ts,
                rng.below(users) as i64 + 1,
                COUNTRIES[rng.weighted(&COUNTRY_W)],
                DEVICES[device],
                OSES[os as usize],
                PLANS[plan],
                CHANNELS[rng.weighted(&CHANNEL_W)],
                DAYPARTS[daypart],
                100 + rng.below(600_000) as i64,
                revenue,
                rng.below(6) as i64,
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

/// The 32 slices, with thresholds scaled to `rows`.
pub fn queries(rows: u64) -> Vec<Query> {
    let r = rows as i64;
    let q = |n: &str, c: &str, s: String| Query::new(n, &s, c);
    vec![
        q("w1_country", "W", "SELECT COUNT(*) FROM events WHERE country = 'DE'".into()),
        q("w2_mobile_pro", "W", "SELECT SUM(revenue_cents) FROM events WHERE device = 'mobile' AND plan = 'pro'".into()),
        q("w3_ios_evening", "W", "SELECT AVG(duration_ms) FROM events WHERE os = 'ios' AND daypart = 'evening'".into()),
        q(
            "w4_anglo_not_email",
            "W",
            "SELECT COUNT(*), SUM(items) FROM events WHERE country IN ('US', 'GB', 'IN') AND channel <> 'email'".into(),
        ),
        q("w5_ads_or_social", "W", "SELECT SUM(revenue_cents) FROM events WHERE channel = 'ads' OR channel = 'social'".into()),
        q(
            "w6_four_dims",
            "W",
            "SELECT COUNT(*) FROM events WHERE plan = 'free' AND device = 'desktop' AND os = 'windows' \
             AND daypart = 'night'"
                .into(),
        ),
        q(
            "w7_team_range",
            "W",
            "SELECT COUNT(revenue_cents), AVG(revenue_cents) FROM events WHERE plan = 'team' \
             AND country BETWEEN 'DE' AND 'JP'"
                .into(),
        ),
        q(
            "w8_not_tablet_daytime",
            "W",
            "SELECT SUM(duration_ms) FROM events WHERE NOT (device = 'tablet') AND daypart IN ('morning', 'afternoon')"
                .into(),
        ),
        q(
            "w9_fr_es_pro_search",
            "W",
            "SELECT COUNT(*), SUM(revenue_cents), SUM(items) FROM events WHERE (country = 'FR' OR country = 'ES') \
             AND plan = 'pro' AND channel = 'search'"
                .into(),
        ),
        q("g1_by_country", "G", "SELECT country, COUNT(*) FROM events GROUP BY country ORDER BY country".into()),
        q(
            "g2_device_os",
            "G",
            "SELECT device, os, SUM(duration_ms) FROM events GROUP BY device, os ORDER BY device, os".into(),
        ),
        q(
            "g3_us_by_plan",
            "G",
            "SELECT plan, SUM(revenue_cents) FROM events WHERE country = 'US' GROUP BY plan ORDER BY plan".into(),
        ),
        q(
            "g4_mobile_by_channel",
            "G",
            "SELECT channel, COUNT(*), AVG(items) FROM events WHERE device = 'mobile' GROUP BY channel ORDER BY channel"
                .into(),
        ),
        q(
            "g5_paid_top10",
            "G",
            "SELECT daypart, country, SUM(revenue_cents) AS rev FROM events WHERE plan <> 'free' \
             GROUP BY daypart, country ORDER BY rev DESC, daypart, country LIMIT 10"
                .into(),
        ),
        q(
            "g6_three_dims",
            "G",
            "SELECT country, device, plan, COUNT(*), SUM(items) FROM events GROUP BY country, device, plan \
             ORDER BY country, device, plan"
                .into(),
        ),
        q(
            "g7_late_ads_by_os",
            "G",
            "SELECT os, SUM(revenue_cents) FROM events WHERE daypart IN ('evening', 'night') AND channel = 'ads' \
             GROUP BY os ORDER BY os"
                .into(),
        ),
        q("g8_channel_daypart", "G", "SELECT channel, daypart, COUNT(*) FROM events GROUP BY channel, daypart".into()),
        q(
            "h1_big_countries",
            "H",
            format!(
                "SELECT country, SUM(revenue_cents) FROM events GROUP BY country HAVING SUM(revenue_cents) > {} \
                 ORDER BY country",
                r * 90
            ),
        ),
        q(
            "h2_pro_device_channel",
            "H",
            format!(
                "SELECT device, channel, COUNT(*) AS n FROM events WHERE plan = 'pro' GROUP BY device, channel \
                 HAVING COUNT(*) >= {} ORDER BY n DESC, device, channel",
                r / 60
            ),
        ),
        q(
            "h3_os_short_sessions",
            "H",
            "SELECT os, AVG(duration_ms), MAX(items) FROM events GROUP BY os \
             HAVING MIN(duration_ms) < 1000 AND COUNT(*) > 10 ORDER BY os"
                .into(),
        ),
        q("d1_team_countries", "D", "SELECT COUNT(DISTINCT country) FROM events WHERE plan = 'team'".into()),
        q(
            "d2_jp_tablet_channels",
            "D",
            "SELECT COUNT(DISTINCT channel) FROM events WHERE country = 'JP' AND device = 'tablet'".into(),
        ),
        q(
            "d3_de_night_minmax",
            "D",
            "SELECT MIN(duration_ms), MAX(duration_ms) FROM events WHERE country = 'DE' AND daypart = 'night'".into(),
        ),
        q(
            "d4_email_phones",
            "D",
            "SELECT MAX(revenue_cents), MIN(items) FROM events WHERE channel = 'email' AND os IN ('ios', 'android')"
                .into(),
        ),
        q("x1_ts_filter", "X", format!("SELECT COUNT(*) FROM events WHERE ts >= {}", TS0 + YEAR / 2)),
        q("x2_distinct_users", "X", "SELECT COUNT(DISTINCT user_id) FROM events WHERE country = 'US'".into()),
        q("x3_sum_non_measure", "X", "SELECT SUM(user_id) FROM events WHERE device = 'mobile'".into()),
        q(
            "x4_top_users",
            "X",
            "SELECT user_id, SUM(revenue_cents) AS rev FROM events GROUP BY user_id \
             ORDER BY rev DESC, user_id LIMIT 10"
                .into(),
        ),
        q("x5_measure_filter", "X", "SELECT COUNT(*) FROM events WHERE revenue_cents > 4000".into()),
        q(
            "x6_row_list",
            "X",
            "SELECT id, ts, country, revenue_cents FROM events WHERE country = 'BR' AND plan = 'team' \
             AND channel = 'email' ORDER BY id LIMIT 100"
                .into(),
        ),
        q("x7_point_lookup", "X", format!("SELECT * FROM events WHERE id = {}", (r / 2).max(1))),
        q(
            "t1_total",
            "T",
            "SELECT COUNT(*), SUM(duration_ms), SUM(revenue_cents), SUM(items) FROM events".into(),
        ),
    ]
}

pub fn workload(rows: u64, seed: u64) -> Result<Workload> {
    let path = gen::cached_db("dashboard", rows, seed, |conn| {
        conn.execute_batch(gen::FAST_LOAD)?;
        create_and_load(conn, rows, seed, true)
    })?;
    Ok(Workload {
        name: "dashboard".into(),
        rows,
        path,
        plane_pragmas: vec![PLANE_PRAGMA.into()],
        tables: vec!["events".into()],
        queries: queries(rows),
    })
}

/// Per class: median speed-up of the plane over the engine and over the best
/// other arm, warm and first call (the seed's summary).
pub fn class_summary(report: &Report, queries: &[Query]) -> String {
    let mut classes: Vec<&str> = Vec::new();
    for q in queries {
        if !classes.contains(&q.class.as_str()) {
            classes.push(&q.class);
        }
    }
    let head = [
        "class",
        "queries",
        "served by plane",
        "vs engine warm",
        "vs engine 1st",
        "vs best other warm",
        "vs best other 1st",
        "noisy cells",
    ]
    .map(String::from);
    let mut out = table_row(&head);
    out.push_str(&table_row(&head.clone().map(|_| "---".to_owned())));
    for class in classes {
        let qs: Vec<&Query> = queries
            .iter()
            .filter(|q| q.class == class && report.cells.iter().any(|c| c.query == q.name))
            .collect();
        let (mut ew, mut ef, mut bw, mut bf, mut served, mut noisy) =
            (vec![], vec![], vec![], vec![], 0, 0);
        for q in &qs {
            let Some(p) = report.cell(&q.name, Arm::Plane) else {
                continue;
            };
            if p.route != "engine" {
                served += 1;
            }
            let others: Vec<_> = report
                .cells
                .iter()
                .filter(|c| c.query == q.name && c.arm != "plane")
                .collect();
            noisy += report
                .cells
                .iter()
                .filter(|c| c.query == q.name && c.noisy)
                .count();
            if let Some(e) = report.cell(&q.name, Arm::Engine) {
                ew.push(speedup(p.warm_ms, e.warm_ms));
                ef.push(speedup(p.first_ms, e.first_ms));
            }
            let best_w = others
                .iter()
                .map(|c| c.warm_ms)
                .filter(|t| t.is_finite())
                .fold(f64::INFINITY, f64::min);
            let best_f = others
                .iter()
                .map(|c| c.first_ms)
                .filter(|t| t.is_finite())
                .fold(f64::INFINITY, f64::min);
            if best_w.is_finite() {
                bw.push(speedup(p.warm_ms, best_w));
                bf.push(speedup(p.first_ms, best_f));
            }
        }
        out.push_str(&table_row(&[
            class.to_owned(),
            qs.len().to_string(),
            served.to_string(),
            fmt_ratio(median(&ew)),
            fmt_ratio(median(&ef)),
            fmt_ratio(median(&bw)),
            fmt_ratio(median(&bf)),
            noisy.to_string(),
        ]));
    }
    out
}

pub fn run(rows: u64, opts: &Options) -> Result<Outcome> {
    let w = workload(rows, opts.seed)?;
    let mut report = harness::run_reads(&w, opts)?;
    let markdown = harness::markdown(&report, &w.queries);
    if opts.has(Arm::Plane) {
        report.summaries.push(class_summary(&report, &w.queries));
    }
    Ok(Outcome {
        report,
        markdown,
        chart: w.queries.iter().map(|q| q.name.clone()).collect(),
    })
}
