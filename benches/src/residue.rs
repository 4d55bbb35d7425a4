//! Residue classes: a corpus of 34 dashboard-shaped queries over the §5
//! `facts` table (see `classes.rs`: dims `g` INTEGER (10 values), `tag` TEXT
//! (4), `k1` INTEGER (40); measures `m, n`), each of whose answers the cells
//! determine: expressions over aggregates, HAVING over expressions, ORDER BY
//! an aggregate with LIMIT, windows over the groups, CTE and subquery
//! wrappers, scalar subqueries, UNION ALL, GROUP BY an alias or a function of
//! a dimension, LIKE/GLOB/CASE/IFNULL on dimensions, FILTER, SUM(CASE …),
//! DISTINCT, MIN/MAX of a dimension, a join of the aggregated rows to a
//! lookup table, and a few plain slices.
//!
//! Each query runs on plain SQLite (median of 3 runs) and through Pleroma
//! with its memo cleared before every call (median of 30), so the figure is
//! the rule's own cost: the core from the cells plus SQLite's evaluation of
//! the residue. Every answer is compared with SQLite's (rows, storage
//! classes, order where ORDER BY fixes it); a difference fails the run.
//! Printed: per query the route, both times and the speed-up; the served
//! share of the corpus; the median and lowest speed-up of the queries
//! served with a residue.
//!
//! Not measured here: writes (the residue reads the same cells as every
//! other plane answer), the memo (a repeated statement is a memo hit), DuckDB.
//!
//! Run: `cargo run --release --bin pleroma -- bench residue --rows 1000000`

use std::time::Instant;

use anyhow::{bail, Result};

use crate::check;
use crate::classes;
use crate::gen;
use crate::harness::{fmt_ms, fmt_ratio, median, millis, table_row, Options, Report};
use crate::Outcome;

pub const QUERIES: &[(&str, &str)] = &[
    ("avg_ratio", "SELECT SUM(m) * 1.0 / COUNT(*) FROM facts"),
    ("spread_by_g", "SELECT g, MAX(m) - MIN(m) FROM facts GROUP BY g ORDER BY g"),
    ("round_avg", "SELECT tag, ROUND(AVG(n), 2) FROM facts GROUP BY tag ORDER BY tag"),
    ("case_over_sum", "SELECT g, CASE WHEN SUM(m) > 4000000 THEN 'up' ELSE 'down' END FROM facts GROUP BY g"),
    ("printf_count", "SELECT tag, printf('%d items', COUNT(*)) FROM facts GROUP BY tag"),
    ("having_expr", "SELECT k1, SUM(n) FROM facts GROUP BY k1 HAVING SUM(n) * 1.0 / COUNT(*) > 499 ORDER BY k1"),
    ("top5_total_order", "SELECT k1, SUM(m) AS s FROM facts GROUP BY k1 ORDER BY s DESC, k1 LIMIT 5"),
    ("top5_by_sum", "SELECT k1, SUM(m) FROM facts GROUP BY k1 ORDER BY SUM(m) DESC LIMIT 5"),
    ("rank_window", "SELECT k1, RANK() OVER (ORDER BY SUM(m) DESC) FROM facts GROUP BY k1"),
    ("running_total", "SELECT g, SUM(SUM(n)) OVER (ORDER BY g) FROM facts GROUP BY g ORDER BY g"),
    ("share_of_total", "SELECT tag, COUNT(*) * 100.0 / (SELECT COUNT(*) FROM facts) FROM facts GROUP BY tag ORDER BY tag"),
    ("cte_wrapper", "WITH s AS (SELECT g, SUM(m) AS total FROM facts GROUP BY g) SELECT g, total FROM s WHERE total > 0 ORDER BY total DESC, g"),
    ("subquery_wrapper", "SELECT * FROM (SELECT tag, k1, COUNT(*) AS c FROM facts GROUP BY tag, k1) WHERE c > 2500 ORDER BY tag, k1"),
    ("union_all", "SELECT tag, COUNT(*) FROM facts GROUP BY tag UNION ALL SELECT 'all', COUNT(*) FROM facts"),
    ("group_by_alias", "SELECT g % 2 AS parity, SUM(n) FROM facts GROUP BY parity ORDER BY parity"),
    ("group_by_upper", "SELECT upper(tag), COUNT(*) FROM facts GROUP BY upper(tag)"),
    ("case_bucket", "SELECT CASE WHEN k1 < 10 THEN 'low' WHEN k1 < 30 THEN 'mid' ELSE 'high' END AS b, COUNT(*), SUM(m) FROM facts GROUP BY b"),
    ("like_filter", "SELECT COUNT(*) FROM facts WHERE tag LIKE 'A%' OR tag LIKE 'b%'"),
    ("glob_filter", "SELECT SUM(n) FROM facts WHERE glob('[ab]', tag)"),
    ("ifnull_group", "SELECT IFNULL(tag, '-'), COUNT(*) FROM facts GROUP BY 1"),
    ("filter_clause", "SELECT COUNT(*) FILTER (WHERE tag = 'a'), SUM(m) FILTER (WHERE g > 5) FROM facts"),
    ("sum_case", "SELECT g, SUM(CASE WHEN tag = 'a' THEN m ELSE 0 END) FROM facts GROUP BY g ORDER BY g"),
    ("count_case", "SELECT SUM(CASE WHEN k1 % 2 = 0 THEN 1 ELSE 0 END) FROM facts"),
    ("distinct_dim", "SELECT DISTINCT tag FROM facts ORDER BY tag"),
    ("distinct_two", "SELECT DISTINCT g, tag FROM facts ORDER BY g, tag"),
    ("min_max_dim", "SELECT MIN(k1), MAX(k1), MIN(tag) FROM facts"),
    ("count_distinct_expr", "SELECT COUNT(DISTINCT k1 / 10) FROM facts"),
    ("function_filter", "SELECT COUNT(*) FROM facts WHERE abs(g - 5) <= 2"),
    ("cast_ratio", "SELECT CAST(SUM(m) AS REAL) / 1000, CAST(AVG(n) AS INTEGER) FROM facts WHERE g IN (1, 2, 3)"),
    ("iif_sign", "SELECT iif(SUM(m) > 0, 'profit', 'loss') FROM facts WHERE tag = 'b'"),
    ("lookup_after_agg", "SELECT d.name, x.s FROM (SELECT k1, SUM(m) AS s FROM facts GROUP BY k1) AS x JOIN dim1 AS d ON d.id = x.k1 ORDER BY d.name, x.s"),
    ("lookup_group", "SELECT d.name, SUM(f.m) FROM facts f JOIN dim2 d ON d.id = f.k1 GROUP BY d.name ORDER BY d.name"),
    ("plain_group", "SELECT g, SUM(m) FROM facts GROUP BY g ORDER BY g"),
    ("plain_filter", "SELECT COUNT(*), SUM(n) FROM facts WHERE tag = 'c' AND k1 < 20"),
];

pub fn run(rows: u64, opts: &Options) -> Result<Outcome> {
    let path = gen::cached_db("classes", rows, opts.seed, |conn| {
        conn.execute_batch(gen::FAST_LOAD)?;
        classes::create_and_load(conn, rows, opts.seed, true)
    })?;
    let mut report = Report::new("residue", rows, opts);
    let sq = rusqlite::Connection::open(&path)?;
    let mut pl = pleroma::Connection::open(&path)?;
    pl.execute_batch(classes::PLANE_PRAGMA)?;
    let head = [
        "query",
        "route",
        "SQLite ms",
        "Pleroma ms",
        "vs SQLite",
        "why (route reason)",
    ]
    .map(String::from);
    let mut md = table_row(&head);
    md.push_str(&table_row(&head.clone().map(|_| "---".to_owned())));
    let (mut served, mut residue_ratios) = (0usize, Vec::new());
    let mut total = 0usize;
    for (name, sql) in QUERIES {
        if !opts.only.is_empty() && !opts.only.iter().any(|o| o == name) {
            continue;
        }
        total += 1;
        let want = crate::harness::sqlite_rows(&sq, sql)?;
        let mut sq_ms = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let r = crate::harness::sqlite_rows(&sq, sql)?;
            sq_ms.push(millis(t));
            drop(r);
        }
        pl.clear_memo();
        let got = pl.query(sql, &[])?.rows;
        let route = pl.last_route().clone();
        if let Err(e) = check::same_rows(&want, &got, check::ordered(sql), false) {
            report.mismatches.push(format!("{name}: {e}"));
        }
        let calls = if route.kind == pleroma::RouteKind::Engine {
            3
        } else {
            30
        };
        let mut pl_ms = Vec::new();
        for _ in 0..calls {
            pl.clear_memo();
            let t = Instant::now();
            let r = pl.query(sql, &[])?;
            pl_ms.push(millis(t));
            drop(r);
        }
        let (s, p) = (median(&sq_ms), median(&pl_ms));
        let kind = route.kind.as_str();
        if route.kind != pleroma::RouteKind::Engine {
            served += 1;
            if route.reason.starts_with("served with a residue") {
                residue_ratios.push(s / p);
            }
        }
        let why: String = route.reason.chars().take(90).collect();
        md.push_str(&table_row(&[
            name.to_string(),
            kind.to_owned(),
            fmt_ms(s),
            fmt_ms(p),
            fmt_ratio(s / p),
            why.replace('|', "/"),
        ]));
        report.figures.insert(format!("{name}_sqlite_ms"), s);
        report.figures.insert(format!("{name}_pleroma_ms"), p);
    }
    if total == 0 {
        bail!("--only matched no query");
    }
    residue_ratios.sort_by(|a, b| a.total_cmp(b));
    report.figures.insert("served".into(), served as f64);
    report.figures.insert("queries".into(), total as f64);
    report.figures.insert(
        "served_share_pct".into(),
        100.0 * served as f64 / total as f64,
    );
    if !residue_ratios.is_empty() {
        report
            .figures
            .insert("residue_median_speedup".into(), median(&residue_ratios));
        report
            .figures
            .insert("residue_min_speedup".into(), residue_ratios[0]);
        report
            .figures
            .insert("residue_served".into(), residue_ratios.len() as f64);
    }
    Ok(Outcome {
        report,
        markdown: md,
        chart: Vec::new(),
    })
}
