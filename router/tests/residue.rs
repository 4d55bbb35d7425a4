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
    "SELECT region, SUM(amount) FROM t GROUP BY region ORDER BY SUM(amount) * -1, region LIMIT 2",
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

/// The query on both sides: same column names, same rows with the same
/// storage classes (in order when it has an ORDER BY), or the same error.
/// Returns Pleroma's route (of its first run: the second is a memo hit).
fn same(p: &mut Pair, sql: &str, params: &[Value]) -> pleroma::Route {
    let names: Vec<String> = match p.sq.prepare(sql) {
        Ok(st) => st.column_names().map(str::to_owned).collect(),
        Err(_) => Vec::new(),
    };
    if let Ok(rows) = p.pl.query(sql, params) {
        assert_eq!(rows.columns, names, "{sql}: column names");
    }
    let route = p.pl.last_route().clone();
    p.check(sql, params);
    route
}

fn served(p: &mut Pair, sql: &str, params: &[Value]) {
    let r = same(p, sql, params);
    assert_ne!(r.kind, RouteKind::Engine, "{sql}: declined: {}", r.reason);
}

fn declined(p: &mut Pair, sql: &str, reason: &str) {
    let r = same(p, sql, &[]);
    assert_eq!(r.kind, RouteKind::Engine, "{sql} must be declined");
    assert!(
        r.reason.contains(reason),
        "{sql}: reason {:?}, expected {reason:?}",
        r.reason
    );
}

#[test]
fn the_residue_serves_expressions_around_the_core_exactly() {
    let mut p = Pair::new(SETUP, ATTACH);
    for sql in SERVED {
        // A few (a literal against an INTEGER column) the cells answer
        // directly; the rest with a residue.
        served(&mut p, sql, &[]);
    }
}

#[test]
fn the_residue_follows_writes_transactions_and_parameters() {
    let mut p = Pair::new(SETUP, ATTACH);
    let q = "SELECT upper(region) AS r, SUM(amount) * 1.0 / COUNT(*), MAX(qty) FROM t GROUP BY r ORDER BY r";
    served(&mut p, q, &[]);
    p.exec("INSERT INTO t(region, status, month, day, amount, qty) VALUES ('EU', 'paid', 202404, '2024-04-01', 7, 9), (NULL, NULL, NULL, NULL, NULL, NULL)");
    served(&mut p, q, &[]);
    p.exec("UPDATE t SET amount = amount + 1000 WHERE region = 'us'");
    served(&mut p, q, &[]);
    p.exec("DELETE FROM t WHERE qty = 7");
    served(&mut p, q, &[]);
    p.exec("BEGIN; DELETE FROM t WHERE region = 'eu';");
    served(&mut p, q, &[]);
    p.exec("ROLLBACK");
    served(&mut p, q, &[]);
    let with_params =
        "SELECT region, SUM(amount) * ? AS x FROM t WHERE month >= ? GROUP BY region ORDER BY x, region";
    served(&mut p, with_params, &[int(3), int(202402)]);
    served(&mut p, with_params, &[Value::Real(0.5), text("202401")]);
}

#[test]
fn types_follow_sqlite_integer_sums_real_totals_and_averages() {
    let mut p = Pair::new(SETUP, ATTACH);
    for sql in [
        "SELECT typeof(SUM(amount)), typeof(TOTAL(amount)), typeof(AVG(qty)), typeof(COUNT(*)) FROM t",
        "SELECT SUM(amount) / 7, TOTAL(amount) / 7, AVG(amount) * 3, COUNT(*) / 3 FROM t",
        "SELECT region, typeof(MIN(amount)), typeof(SUM(amount)) FROM t GROUP BY region",
        "SELECT SUM(amount), TOTAL(qty), AVG(qty), MIN(amount) FROM t WHERE upper(region) = 'NONE'",
        "SELECT COUNT(*) = 0, SUM(amount) IS NULL, TOTAL(amount) FROM t WHERE upper(region) = 'NONE'",
    ] {
        served(&mut p, sql, &[]);
    }
}

#[test]
fn what_is_not_provably_exact_is_declined_with_the_piece_named() {
    let mut p = Pair::new(SETUP, ATTACH);
    declined(
        &mut p,
        "SELECT COUNT(*) * 1 FROM t WHERE random() IS NOT NULL",
        "random()",
    );
    declined(
        &mut p,
        "SELECT region, month, COUNT(*) * 1 FROM t GROUP BY region",
        "bare column month",
    );
    declined(
        &mut p,
        "SELECT region, SUM(amount) FROM t GROUP BY region ORDER BY SUM(amount) * 1 DESC LIMIT 1",
        "LIMIT without an ORDER BY over every group term",
    );
    declined(
        &mut p,
        "SELECT SUM(amount) * 2 FROM t WHERE qty > 1",
        "measure qty",
    );
    declined(
        &mut p,
        "SELECT note, COUNT(*) * 1 FROM t GROUP BY note",
        "column note",
    );
    declined(&mut p, "SELECT upper(region) FROM t", "row list");
    declined(&mut p, "SELECT group_concat(region) FROM t", "group_concat");
    declined(
        &mut p,
        "SELECT SUM(amount + 1) FROM t",
        "expression of a measure",
    );
    declined(
        &mut p,
        "SELECT region, ROW_NUMBER() OVER (ORDER BY COUNT(*)) FROM t GROUP BY region",
        "row_number",
    );
    declined(
        &mut p,
        "SELECT \"COUNT(*)\" FROM (SELECT COUNT(*) FROM t)",
        "",
    );
    declined(
        &mut p,
        "SELECT n.label, (SELECT COUNT(*) FROM t WHERE t.region = n.code) FROM names n",
        "",
    );
    declined(
        &mut p,
        "SELECT COUNT(*) FROM t JOIN names ON names.code = t.region",
        "",
    );
    declined(
        &mut p,
        "SELECT COUNT(DISTINCT amount) * 1 FROM t",
        "DISTINCT",
    );
}

#[test]
fn a_text_in_a_numeric_dimension_declines_and_sqlite_answers() {
    let mut p = Pair::new(SETUP, ATTACH);
    p.exec("INSERT INTO t(region, month, amount) VALUES ('eu', 'soon', 5)");
    declined(
        &mut p,
        "SELECT month, COUNT(*) * 2 FROM t GROUP BY month",
        "a text value in numeric dimension month",
    );
    // A residue that does not read the dimension is still served.
    served(
        &mut p,
        "SELECT region, COUNT(*) * 2 FROM t GROUP BY region",
        &[],
    );
}

#[test]
fn sums_that_may_overflow_go_to_sqlite_which_raises_its_own_error() {
    let mut p = Pair::new(
        "CREATE TABLE big(g TEXT, m INTEGER);
         INSERT INTO big VALUES ('a', 9223372036854775807), ('a', 1), ('b', -5), ('b', 3);",
        "PRAGMA pleroma_attach('big', 'g', 'm')",
    );
    declined(&mut p, "SELECT SUM(m) * 1 FROM big", "overflow");
    declined(
        &mut p,
        "SELECT g, SUM(m) + 0 FROM big GROUP BY g",
        "overflow",
    );
    // MIN, MAX and COUNT do not add: served.
    served(
        &mut p,
        "SELECT g, MAX(m) - MIN(m), COUNT(m) * 2 FROM big WHERE g = 'b' GROUP BY g",
        &[],
    );
    let mut q = Pair::new(
        "CREATE TABLE big(g TEXT, m INTEGER);
         INSERT INTO big VALUES ('a', -9223372036854775807), ('a', -1), ('b', 4);",
        "PRAGMA pleroma_attach('big', 'g', 'm')",
    );
    // SQLite's own error from the residue's arithmetic: abs(i64::MIN).
    let sql = "SELECT g, abs(SUM(m)) FROM big GROUP BY g";
    same(&mut q, sql, &[]);
    q.pl.set_route_mode(pleroma::RouteMode::Plane);
    let e = q.pl.query(sql, &[]).unwrap_err().to_string();
    assert!(e.contains("integer overflow"), "{e}");
}

#[test]
fn explain_shows_the_split_and_the_blocking_piece() {
    let mut p = Pair::new(SETUP, ATTACH);
    let r = p
        .pl
        .query(
            "PRAGMA pleroma_explain('SELECT region, SUM(amount) * 1.0 / COUNT(*) FROM t GROUP BY region')",
            &[],
        )
        .unwrap();
    assert_eq!(r.rows[0][0], text("plane"));
    assert_eq!(
        r.rows[0][1],
        text("residue: cells: GROUP BY (region) with SUM(), COUNT(*); SQLite: the statement over the grouped rows")
    );
    let r =
        p.pl.query(
            "PRAGMA pleroma_explain('SELECT COUNT(*) * 1 FROM t WHERE random() IS NOT NULL')",
            &[],
        )
        .unwrap();
    assert_eq!(r.rows[0][0], text("engine"));
    assert_eq!(
        r.rows[0][1],
        text("function random() is not on the deterministic list")
    );
}

#[test]
fn extreme_integers_and_odd_texts_keep_their_values_through_the_core() {
    let mut p = Pair::new(
        "CREATE TABLE e(k INTEGER, s TEXT, u, m INTEGER);
         INSERT INTO e VALUES
           (-9223372036854775808, 'quote''s \"dq\" \\ back', 1, -9223372036854775808),
           (9223372036854775807, 'tab\tnew\nline', '1', 9223372036854775807),
           (0, 'é ü 漢字', NULL, 0), (NULL, NULL, x'00', NULL);",
        "PRAGMA pleroma_attach('e', 'k, s', 'm')",
    );
    for sql in [
        "SELECT k, s, MIN(m) * 1, MAX(m) + 0, COUNT(*) * 1 FROM e GROUP BY k, s",
        "SELECT typeof(k), length(s), COUNT(*) FROM e GROUP BY 1, 2",
        "SELECT DISTINCT s FROM e WHERE s LIKE '%e%'",
        "SELECT MIN(k), MAX(k), MIN(s), MAX(s) FROM e",
        "SELECT k + 0 FROM e GROUP BY k",
    ] {
        served(&mut p, sql, &[]);
    }
}

#[test]
fn order_dependent_windows_and_aggregates_outside_the_core_are_declined() {
    let mut p = Pair::new(SETUP, ATTACH);
    declined(
        &mut p,
        "SELECT ROW_NUMBER() OVER (), r FROM (SELECT region AS r, COUNT(*) FROM t GROUP BY region)",
        "row_number",
    );
    declined(
        &mut p,
        "SELECT group_concat(r) FROM (SELECT region AS r, COUNT(*) FROM t GROUP BY region)",
        "group_concat",
    );
    declined(
        &mut p,
        "SELECT r FROM (SELECT region AS r, COUNT(*) FROM t GROUP BY region) LIMIT 1",
        "",
    );
    declined(
        &mut p,
        "SELECT r, SUM(n) OVER () FROM (SELECT region AS r, COUNT(*) AS n FROM t GROUP BY region)",
        "sum",
    );
    declined(
        &mut p,
        "SELECT TOTAL(a) FROM (SELECT AVG(amount) AS a FROM t GROUP BY region)",
        "total",
    );
    served(
        &mut p,
        "SELECT r, MAX(n) OVER (), RANK() OVER (ORDER BY n) FROM (SELECT region AS r, COUNT(*) AS n FROM t GROUP BY region)",
        &[],
    );
}

#[test]
fn order_by_an_aggregate_with_limit_is_served_when_the_cut_falls_between_distinct_keys() {
    let mut p = Pair::new(SETUP, ATTACH);
    // Sums by region: apac 900, us 103, eu 51, NULL 10: no tie anywhere.
    for sql in [
        "SELECT region, SUM(amount) FROM t GROUP BY region ORDER BY SUM(amount) DESC LIMIT 2",
        "SELECT region, SUM(amount) AS s FROM t GROUP BY region ORDER BY s LIMIT 2 OFFSET 1",
        "SELECT region, SUM(amount) FROM t GROUP BY region ORDER BY 2 DESC LIMIT 1, 2",
        "SELECT region, SUM(amount) FROM t GROUP BY region ORDER BY 2 DESC LIMIT 10",
        "SELECT region, SUM(amount) FROM t GROUP BY region ORDER BY 2 DESC LIMIT 0",
        "SELECT region, SUM(amount) FROM t GROUP BY region ORDER BY 2 DESC LIMIT -1 OFFSET 2",
    ] {
        served(&mut p, sql, &[]);
    }
    // Counts by status: paid 4, open 2, 5 → 1, '5' → 1.
    served(
        &mut p,
        "SELECT status, COUNT(*) FROM t GROUP BY status ORDER BY COUNT(*) DESC LIMIT 2",
        &[],
    );
    declined(
        &mut p,
        "SELECT status, COUNT(*) FROM t GROUP BY status ORDER BY COUNT(*) DESC LIMIT 3",
        "a tie at the LIMIT cut",
    );
    declined(
        &mut p,
        "SELECT status, COUNT(*) FROM t GROUP BY status ORDER BY COUNT(*) DESC LIMIT 1 OFFSET 3",
        "a tie at the LIMIT cut",
    );
    // A parameter as the bound: declined (its value is not known when planned).
    let k = same(
        &mut p,
        "SELECT status, COUNT(*) FROM t GROUP BY status ORDER BY COUNT(*) DESC LIMIT ?",
        &[int(2)],
    );
    assert_eq!(k.kind, RouteKind::Engine);
}

#[test]
fn a_residue_that_reads_another_table_follows_its_writes() {
    let mut p = Pair::new(SETUP, ATTACH);
    let sql = "SELECT l.label, x.s FROM (SELECT region, SUM(amount) AS s FROM t GROUP BY region) AS x JOIN names AS l ON l.code = x.region ORDER BY l.label";
    served(&mut p, sql, &[]);
    // Only `names` changes: no plane moves, and the answer must.
    p.exec("UPDATE names SET label = 'Amerika' WHERE label = 'USA'");
    served(&mut p, sql, &[]);
    p.exec("INSERT INTO names VALUES ('apac', 'Asia')");
    served(&mut p, sql, &[]);
}
