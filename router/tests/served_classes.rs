//! Each served class (W, G, H, D, totals) answers exactly as SQLite does,
//! and is served by the plane.

mod common;
use common::*;

const SETUP: &str = "
CREATE TABLE t(id INTEGER PRIMARY KEY, region TEXT, status, month INTEGER, amount INTEGER, qty INTEGER, note TEXT);
INSERT INTO t(region, status, month, amount, qty, note) VALUES
 ('eu', 'paid', 202401, 100, 1, 'a'), ('eu', 'open', 202402, -50, NULL, 'b'),
 ('us', 'paid', 202401, 70, 3, 'c'), ('us', 5, 202403, NULL, 2, 'd'),
 (NULL, 'paid', NULL, 10, 1, 'e'), ('apac', '5', 202402, 9223372036854775000, 1, 'f'),
 ('eu', 'paid', 202403, 1, 1, 'g');
";
const ATTACH: &str = "PRAGMA pleroma_attach('t', 'region, status, month', 'amount, qty')";

#[test]
fn totals_and_scalar_filters_match_sqlite() {
    let mut p = Pair::new(SETUP, ATTACH);
    for sql in [
        "SELECT COUNT(*) FROM t",
        "SELECT COUNT(*), SUM(qty), MIN(amount), MAX(amount) FROM t",
        "SELECT COUNT(amount), TOTAL(qty), AVG(qty) FROM t",
        "SELECT SUM(amount) FROM t WHERE region = 'eu'",
        "SELECT COUNT(*) FROM t WHERE region <> 'eu' OR region IS NULL",
        "SELECT COUNT(*) FROM t WHERE month BETWEEN 202401 AND 202402",
        "SELECT COUNT(*) FROM t WHERE month IN (202401, '202403')",
        "SELECT COUNT(*) FROM t WHERE NOT (region = 'us')",
        "SELECT COUNT(*) FROM t WHERE status = 5",
        "SELECT COUNT(*) FROM t WHERE status = '5'",
        "SELECT COUNT(*) FROM t WHERE month > '202401'",
        "SELECT COUNT(*) FROM t WHERE region IS NOT NULL AND month IS NULL",
        "SELECT SUM(qty) FROM t WHERE region = 'nowhere'",
        "SELECT COUNT(*) AS n FROM main.t AS x WHERE x.region = 'eu'",
        "SELECT COUNT(*) FROM t WHERE status IS 'paid' OR region IS NOT 'eu'",
        "SELECT COUNT(*) FROM t WHERE month IS NULL OR NULL IS region",
        "SELECT COUNT(*) FROM t WHERE month > -9223372036854775808",
    ] {
        p.served(sql, &[]);
    }
    p.served(
        "SELECT SUM(qty) FROM t WHERE region = ? AND month >= ?",
        &[text("eu"), int(202402)],
    );
}

#[test]
fn group_by_having_and_order_match_sqlite() {
    let mut p = Pair::new(SETUP, ATTACH);
    for sql in [
        "SELECT region, COUNT(*) FROM t GROUP BY region",
        "SELECT region, status, SUM(qty) FROM t GROUP BY region, status ORDER BY region DESC, status",
        "SELECT month, COUNT(*) AS n FROM t WHERE region = 'eu' GROUP BY month ORDER BY n DESC, month",
        "SELECT region, SUM(qty) FROM t GROUP BY 1 HAVING COUNT(*) > 1",
        "SELECT region, AVG(qty) AS a FROM t GROUP BY region HAVING a >= 1.5 ORDER BY 1",
        "SELECT region, COUNT(*) FROM t GROUP BY region ORDER BY region NULLS LAST LIMIT 2 OFFSET 1",
        "SELECT status FROM t GROUP BY status",
    ] {
        p.served(sql, &[]);
    }
}

#[test]
fn distinct_and_extrema_match_sqlite() {
    let mut p = Pair::new(SETUP, ATTACH);
    for sql in [
        "SELECT COUNT(DISTINCT region) FROM t",
        "SELECT COUNT(DISTINCT status) FROM t WHERE month = 202401",
        "SELECT region, MIN(qty), MAX(qty) FROM t WHERE month > 0 GROUP BY region",
    ] {
        p.served(sql, &[]);
    }
}

#[test]
fn queries_outside_the_classes_are_declined_and_still_exact() {
    let mut p = Pair::new(SETUP, ATTACH);
    for sql in [
        "SELECT COUNT(*) FROM t WHERE note = 'a'",
        "SELECT COUNT(DISTINCT note) FROM t",
        "SELECT SUM(id) FROM t",
        "SELECT region FROM t",
        "SELECT COUNT(*) FROM t WHERE amount > 5",
        "SELECT region, COUNT(*) FROM t GROUP BY region LIMIT 1",
    ] {
        let k = p.check(sql, &[]);
        assert_eq!(k, pleroma::RouteKind::Engine, "{sql} should be declined");
    }
}

/// A memo hit hands out the memo's own answer (no copy): an answer the
/// caller changes is the caller's, and the next hit is still SQLite's.
#[test]
fn a_changed_answer_leaves_the_memo_as_it_was() {
    use pleroma::{RouteKind, Value};
    let mut c = pleroma::Connection::open_in_memory().unwrap();
    c.execute_batch(SETUP).unwrap();
    c.execute_batch(ATTACH).unwrap();
    let q = "SELECT region, SUM(amount) FROM t GROUP BY region ORDER BY region";
    let want = sqlite_rows(c.sqlite(), q, &[]).unwrap();
    let mut first = c.query(q, &[]).unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Plane);
    let mut hit = c.query(q, &[]).unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Memo);
    first.rows[0][1] = Value::Integer(-1);
    hit.rows.push(vec![Value::Null, Value::Null]);
    hit.columns[0] = "changed".into();
    let again = c.query(q, &[]).unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Memo);
    assert_eq!(again.rows, want);
    assert_eq!(again.columns, ["region", "SUM(amount)"]);
    assert_ne!(first.rows, want);
    assert_eq!(hit.rows.len(), want.len() + 1);
}
