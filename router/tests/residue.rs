//! The residue: the cells answer the aggregate core, SQLite evaluates the
//! rest over the grouped rows. Every answer is compared with plain SQLite
//! (rows, storage classes, column names, errors), and the route asserted.

mod common;
use common::*;
use pleroma::{RouteKind, Value};

const SETUP: &str = "
CREATE TABLE t(id INTEGER PRIMARY KEY, region TEXT, status, month INTEGER, day TEXT, amount INTEGER, qty INTEGER, note TEXT);
INSERT INTO t(region, status, month, day, amount, qty, note) VALUES
 ('eu', 'paid', 202401, '2024-01-05', 100, 1, 'a'), ('eu', 'open', 202402, '2024-02-11', -50, NULL, 'b'),
 ('us', 'paid', 202401, '2024-01-20', 70, 3, 'c'), ('us', 5, 202403, '2024-03-02', NULL, 2, 'd'),
 (NULL, 'paid', NULL, NULL, 10, 1, 'e'), ('apac', '5', 202402, '2024-02-29', 900, 1, 'f'),
 ('eu', 'paid', 202403, '2024-03-02', 1, 1, 'g'), ('us', 'open', 202401, '2024-01-05', 33, 7, 'h');
CREATE TABLE names(code TEXT, label TEXT);
INSERT INTO names VALUES ('eu', 'Europe'), ('us', 'United States'), ('us', 'USA');
";
const ATTACH: &str = "PRAGMA pleroma_attach('t', 'region, status, month, day', 'amount, qty')";

/// Queries the residue must serve, each equal to SQLite's answer.
const SERVED: &[&str] = &[
    "SELECT SUM(amount) * 1.0 / COUNT(*) FROM t",
    "SELECT region, MAX(amount) + MIN(amount) AS spread FROM t GROUP BY region",
    "SELECT region, ROUND(AVG(amount), 2), printf('%d rows', COUNT(*)) FROM t GROUP BY region ORDER BY 1",
    "SELECT region, CASE WHEN SUM(amount) > 100 THEN 'big' ELSE 'small' END AS size FROM t GROUP BY region",
    "SELECT CAST(SUM(amount) AS REAL), SUM(amount) > 500, TOTAL(qty), AVG(qty) FROM t WHERE region <> 'eu'",
    "SELECT region, COUNT(*) FROM t GROUP BY region HAVING SUM(amount) * 2 > 100",
    "SELECT region, SUM(amount) FROM t GROUP BY region ORDER BY SUM(amount) DESC, region LIMIT 2",
    "SELECT region, SUM(amount) AS s, RANK() OVER (ORDER BY SUM(amount) DESC) FROM t GROUP BY region",
    "SELECT month, SUM(amount), SUM(SUM(amount)) OVER (ORDER BY month) AS running FROM t GROUP BY month ORDER BY month",
    "SELECT * FROM (SELECT region, SUM(amount) AS s FROM t GROUP BY region) WHERE s > 50 ORDER BY s DESC",
    "WITH x AS (SELECT status, COUNT(*) AS n FROM t GROUP BY status) SELECT status, n FROM x WHERE n > 1",
    "SELECT (SELECT COUNT(*) FROM t WHERE region = 'eu') * 100.0 / (SELECT COUNT(*) FROM t)",
    "SELECT region, COUNT(*) FROM t WHERE region = 'eu' GROUP BY region UNION ALL SELECT 'all', COUNT(*) FROM t",
    "SELECT substr(day, 1, 7) AS ym, SUM(amount) FROM t GROUP BY ym ORDER BY ym",
    "SELECT strftime('%m', day) AS m, COUNT(*) FROM t WHERE day IS NOT NULL GROUP BY 1",
    "SELECT upper(region), COUNT(*) FROM t GROUP BY upper(region)",
    "SELECT IFNULL(region, '-') AS r, COUNT(*) FROM t GROUP BY r",
    "SELECT CASE WHEN region IN ('eu', 'us') THEN 'west' ELSE 'rest' END AS w, SUM(qty) FROM t GROUP BY w",
    "SELECT COUNT(*) FROM t WHERE region LIKE 'E%'",
    "SELECT COUNT(*) FROM t WHERE glob('2024-0[12]*', day)",
    "SELECT COUNT(*) FILTER (WHERE status = 'paid'), SUM(amount) FILTER (WHERE month >= 202402) FROM t",
    "SELECT region, SUM(CASE WHEN status = 'paid' THEN amount ELSE 0 END) AS paid FROM t GROUP BY region",
    "SELECT SUM(CASE WHEN status = 'open' THEN 1 ELSE 0 END), COUNT(CASE WHEN region = 'us' THEN qty END) FROM t",
    "SELECT DISTINCT region FROM t",
    "SELECT DISTINCT region, status FROM t ORDER BY region, status LIMIT 3",
    "SELECT MIN(day), MAX(month), COUNT(DISTINCT upper(region)) FROM t",
    "SELECT month, MIN(region) FROM t GROUP BY month",
    "SELECT COUNT(*) FROM t WHERE month = '202401'",
    "SELECT COUNT(*) FROM t WHERE status = 5",
    "SELECT COUNT(*) FROM t WHERE status = '5'",
    "SELECT COUNT(*) FROM t WHERE region = 5 OR abs(month) > 202402",
    "SELECT typeof(month), COUNT(*) FROM t GROUP BY typeof(month)",
    "SELECT l.label, s FROM (SELECT region, SUM(amount) AS s FROM t GROUP BY region) AS x JOIN names AS l ON l.code = x.region",
    "SELECT region, COUNT(*) FROM t WHERE day >= date('2024-03-02', '-30 days') GROUP BY region",
    "SELECT AVG(amount), COUNT(amount), MIN(qty) FROM t WHERE region = 'nowhere'",
    "SELECT region, COUNT(*) AS n FROM t GROUP BY region HAVING n > 1 ORDER BY n DESC, region",
    "SELECT x.region, COUNT(*) FROM main.t AS x WHERE x.month > 202401 GROUP BY x.region",
    "SELECT COUNT(*), COUNT(*) + 1 FROM t",
];

#[test]
fn the_residue_serves_expressions_around_the_core_exactly() {
    let mut p = Pair::new(SETUP, ATTACH);
    let mut bad = Vec::new();
    for sql in SERVED {
        let k = p.check(sql, &[]);
        if k == RouteKind::Engine {
            bad.push(format!("{sql}: {}", p.pl.last_route().reason));
        }
    }
    assert!(bad.is_empty(), "declined:\n{}", bad.join("\n"));
}
