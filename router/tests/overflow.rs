//! SUM past i64 raises SQLite's own "integer overflow" on the plane path as
//! on the engine path; a SUM whose partial sums could overflow in some row
//! order is declined; PleromaSumExact gives the exact total on both paths.

mod common;
use common::*;
use pleroma::{RouteKind, Value};

const SETUP: &str = "CREATE TABLE t(g TEXT, m INTEGER);
INSERT INTO t VALUES ('a', 9223372036854775807), ('a', 10), ('b', -9223372036854775808), ('b', -1),
                     ('c', 9223372036854775807), ('c', -5);";
const ATTACH: &str = "PRAGMA pleroma_attach('t', 'g', 'm')";

#[test]
fn sum_past_i64_raises_integer_overflow_like_sqlite() {
    let mut p = Pair::new(SETUP, ATTACH);
    p.pl.execute_batch("PRAGMA pleroma_route = plane").unwrap();
    let err =
        p.pl.query("SELECT SUM(m) FROM t WHERE g = 'a'", &[])
            .unwrap_err();
    assert_eq!(err.to_string(), "integer overflow");
    let plain = sqlite_rows(&p.sq, "SELECT SUM(m) FROM t WHERE g = 'a'", &[]).unwrap_err();
    assert_eq!(plain, "integer overflow");
    p.check("SELECT SUM(m) FROM t WHERE g = 'b'", &[]);
}

/// Found from outside: SQLite outputs the groups it finalized before the
/// one whose SUM overflows, then the error (the shell prints them). The
/// plane cannot know which, in SQLite's order: it declines, and the rows
/// before the error are SQLite's own.
#[test]
fn overflow_in_one_group_of_several_leaves_the_groups_before_it_to_sqlite() {
    let mut p = Pair::new(
        "CREATE TABLE t(a INTEGER, m INTEGER);
         INSERT INTO t VALUES (0, 1), (1, 2), (2, 9223372036854775807), (2, 1);",
        "PRAGMA pleroma_attach('t', 'a', 'm')",
    );
    for sql in [
        "SELECT a, SUM(m) FROM t GROUP BY a ORDER BY a",
        "SELECT a, SUM(m) FROM t GROUP BY a",
    ] {
        let err = p.pl.query(sql, &[]).unwrap_err();
        assert_eq!(err.to_string(), "integer overflow");
        let route = p.pl.last_route();
        assert_eq!(route.kind, RouteKind::Engine, "{route:?}");
        assert!(
            route.reason.contains("SUM overflow in a group"),
            "{route:?}"
        );
        let before =
            p.pl.rows_before_error()
                .expect("the groups before the error");
        let mut st = p.sq.prepare(sql).unwrap();
        let mut rows = st.query([]).unwrap();
        let mut plain = Vec::new();
        let e = loop {
            match rows.next() {
                Ok(Some(r)) => plain.push(
                    (0..2)
                        .map(|i| r.get::<_, Value>(i).unwrap())
                        .collect::<Vec<_>>(),
                ),
                Ok(None) => panic!("SQLite gave no error"),
                Err(e) => break e,
            }
        };
        assert_eq!(e.to_string(), "integer overflow");
        assert_eq!(before.rows, plain, "{sql}");
        assert_eq!(before.rows.len(), 2, "{sql}");
    }
    // Without a GROUP BY nothing comes before the error: the plane raises
    // it (a group's own sum past i64, whatever the order: 'a' = 2 here).
    let err =
        p.pl.query("SELECT SUM(m) FROM t WHERE a = 2", &[])
            .unwrap_err();
    assert_eq!(err.to_string(), "integer overflow");
    assert!(p.pl.rows_before_error().is_none());
    // And the route says the plane raised it (the shell's `.timer` line).
    let route = p.pl.last_route();
    assert_eq!(route.kind, RouteKind::Plane, "{route:?}");
    assert_eq!(route.reason, "the plane raised SQLite's error");
}

#[test]
fn order_dependent_sum_is_declined() {
    // 'c' sums to MAX-5, but adding MAX first and -5 later never overflows,
    // while other orders could: the plane proves neither, so it declines.
    let mut p = Pair::new(SETUP, ATTACH);
    p.pl.execute("INSERT INTO t VALUES ('c', 3)", &[]).unwrap();
    p.sq.execute("INSERT INTO t VALUES ('c', 3)", []).unwrap();
    assert_eq!(
        p.check("SELECT SUM(m) FROM t WHERE g = 'c'", &[]),
        RouteKind::Engine
    );
    assert!(
        p.pl.last_route().reason.contains("overflow"),
        "{:?}",
        p.pl.last_route()
    );
}

#[test]
fn sum_exact_agrees_on_both_paths() {
    let mut p = Pair::new(SETUP, ATTACH);
    let served =
        p.pl.query("SELECT PleromaSumExact(m) FROM t WHERE g = 'a'", &[])
            .unwrap();
    assert_eq!(p.pl.last_route().kind, RouteKind::Plane);
    p.pl.execute_batch("PRAGMA pleroma_route = engine").unwrap();
    let engine =
        p.pl.query("SELECT PleromaSumExact(m) FROM t WHERE g = 'a'", &[])
            .unwrap();
    assert_eq!(p.pl.last_route().kind, RouteKind::Engine);
    assert_eq!(served.rows, engine.rows);
    assert_eq!(served.rows[0][0], text("9223372036854775817"));
}

#[test]
fn overflow_in_a_group_having_drops_on_group_columns_is_not_raised() {
    let mut p = Pair::new(SETUP, ATTACH);
    // SQLite moves `g <> 'a'` into WHERE: group 'a' never finalizes its SUM.
    let k = p.check("SELECT g, SUM(m) FROM t GROUP BY g HAVING g <> 'a'", &[]);
    assert_eq!(k, RouteKind::Engine, "{:?}", p.pl.last_route());
    p.check("SELECT g, SUM(m) FROM t GROUP BY g HAVING g = 'a'", &[]);
}

#[test]
fn rows_stepped_before_a_runtime_error_are_kept_until_the_next_statement() {
    let mut p = Pair::new(SETUP, ATTACH);
    let sql = "SELECT g, m FROM t WHERE g = 'a' UNION ALL SELECT 'x', abs(-9223372036854775808)";
    let err = p.pl.query(sql, &[]).unwrap_err();
    assert_eq!(err.to_string(), "integer overflow");
    assert_eq!(p.pl.last_route().kind, RouteKind::Engine);
    let rows = p.pl.rows_before_error().expect("the rows SQLite stepped");
    assert_eq!(*rows.columns, ["g", "m"]);
    assert_eq!(rows.rows.len(), 2);
    // A success, an error before any step, a plane's error: none.
    p.pl.query("SELECT 1", &[]).unwrap();
    assert!(p.pl.rows_before_error().is_none());
    p.pl.query(sql, &[]).unwrap_err();
    p.pl.query("SELECT nope FROM t", &[]).unwrap_err();
    assert!(p.pl.rows_before_error().is_none());
    p.pl.query(sql, &[]).unwrap_err();
    p.pl.execute_batch("PRAGMA pleroma_route = plane").unwrap();
    p.pl.query("SELECT SUM(m) FROM t WHERE g = 'a'", &[])
        .unwrap_err();
    assert!(p.pl.rows_before_error().is_none());
}
