//! Bad PRAGMA input gets an error that names the problem and leaves the
//! database untouched.

use pleroma::Connection;

fn db() -> Connection {
    let mut c = Connection::open_in_memory().unwrap();
    c.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT, r REAL, n TEXT COLLATE NOCASE, m INTEGER, f);
         INSERT INTO t(g, r, n, m, f) VALUES ('a', 1.5, 'x', 1, 2.5);",
    )
    .unwrap();
    c
}

fn err(c: &mut Connection, sql: &str) -> String {
    c.execute_batch(sql).unwrap_err().to_string()
}

#[test]
fn each_bad_input_is_named_and_nothing_changes() {
    let mut c = db();
    let cases = [
        (
            "PRAGMA pleroma_attach('nope', 'g', 'm')",
            "no such table: nope",
        ),
        (
            "PRAGMA pleroma_attach('t', 'zz', 'm')",
            "no such column: t.zz",
        ),
        ("PRAGMA pleroma_attach('t', 'g, g', 'm')", "given twice"),
        ("PRAGMA pleroma_attach('t', 'g', 'g')", "given twice"),
        (
            "PRAGMA pleroma_attach('t', 'g', 'f')",
            "measure f holds REAL values",
        ),
        (
            "PRAGMA pleroma_attach('t', 'g', 'n')",
            "measure n holds TEXT values",
        ),
        ("PRAGMA pleroma_attach('t', 'r', 'm')", "REAL affinity"),
        ("PRAGMA pleroma_attach('t', 'n', 'm')", "collation NOCASE"),
        ("PRAGMA pleroma_attach('t', 'f', 'm')", "REAL value"),
        ("PRAGMA pleroma_attach('t', 'g')", "expected 3 arguments"),
        ("PRAGMA pleroma_attach(t, 'g', 'm')", "single-quoted"),
        ("PRAGMA pleroma_attach('t', 'g', 'm'", "parentheses"),
        ("PRAGMA pleroma_detach('t')", "has no plane"),
        ("PRAGMA pleroma_route = sometimes", "unknown mode"),
        (
            "PRAGMA pleroma_atach('t', 'g', 'm')",
            "unknown Pleroma PRAGMA",
        ),
    ];
    for (sql, want) in cases {
        let e = err(&mut c, sql);
        assert!(e.contains(want), "{sql}: got {e:?}, want {want:?}");
    }
    let catalog: i64 = c
        .sqlite()
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'pleroma_catalog'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(catalog, 0, "a failed attach must not write the catalog");
    assert!(c
        .query("PRAGMA pleroma_planes", &[])
        .unwrap()
        .rows
        .is_empty());
}

#[test]
fn a_dimension_over_its_cap_refuses_the_attach() {
    let mut c = Connection::open_in_memory().unwrap();
    c.execute_batch("CREATE TABLE t(k INTEGER, m INTEGER); WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i < 1100) INSERT INTO t SELECT i, i FROM s;").unwrap();
    let e = err(&mut c, "PRAGMA pleroma_attach('t', 'k', 'm')");
    assert!(e.contains("more than 1024 distinct values"), "{e}");
}

#[test]
fn crossing_the_cap_later_puts_the_plane_out_of_service_with_a_reason() {
    let mut c = Connection::open_in_memory().unwrap();
    c.execute_batch("CREATE TABLE t(k INTEGER, m INTEGER); INSERT INTO t VALUES (1, 1); PRAGMA pleroma_attach('t', 'k', 'm');")
        .unwrap();
    c.execute_batch("WITH RECURSIVE s(i) AS (SELECT 2 UNION ALL SELECT i+1 FROM s WHERE i < 1100) INSERT INTO t SELECT i, i FROM s;")
        .unwrap();
    let r = c.query("SELECT COUNT(*) FROM t WHERE k = 5", &[]).unwrap();
    assert_eq!(r.rows[0][0], pleroma::Value::Integer(1));
    assert_eq!(c.last_route().kind, pleroma::RouteKind::Engine);
    assert!(
        c.last_route().reason.contains("out of service"),
        "{:?}",
        c.last_route()
    );
    let planes = c.query("PRAGMA pleroma_planes", &[]).unwrap();
    assert_eq!(
        planes.rows[0][7],
        pleroma::Value::Text("out of service".into())
    );
}

#[test]
fn attach_inside_a_transaction_is_refused() {
    let mut c = db();
    c.execute_batch("BEGIN").unwrap();
    let e = err(&mut c, "PRAGMA pleroma_attach('t', 'g', 'm')");
    assert!(e.contains("inside a transaction"), "{e}");
}
