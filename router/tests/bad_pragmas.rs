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
        ("PRAGMA pleroma_attach('t')", "expected 2 to 4 arguments"),
        (
            "PRAGMA pleroma_attach('t', 'g', 'm', 'p', 'q')",
            "expected 2 to 4 arguments",
        ),
        (
            "PRAGMA pleroma_detach('t', 'p', 'q')",
            "expected 1 or 2 arguments",
        ),
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
    c.execute_batch("CREATE TABLE t(k INTEGER, m INTEGER); WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i < 65537) INSERT INTO t SELECT i, i FROM s;").unwrap();
    let e = err(&mut c, "PRAGMA pleroma_attach('t', 'k', 'm')");
    assert!(e.contains("more than 65536 distinct values"), "{e}");
    // Under the cap each, but not together in a 64-bit key: five
    // dimensions of 4,100 values take 13 bits each.
    c.execute_batch("CREATE TABLE w(a, b, c, d, e, m INTEGER); WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i < 4100) INSERT INTO w SELECT i, i, i, i, i, i FROM s;").unwrap();
    let e = err(&mut c, "PRAGMA pleroma_attach('w', 'a, b, c, d, e', 'm')");
    assert!(e.contains("64"), "{e}");
}

#[test]
fn a_dimension_past_1024_values_is_served() {
    let mut c = Connection::open_in_memory().unwrap();
    c.execute_batch("CREATE TABLE t(k INTEGER, g TEXT, m INTEGER); WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i < 3000) INSERT INTO t SELECT i % 2500, char(65 + i % 3), i FROM s; PRAGMA pleroma_attach('t', 'k, g', 'm');").unwrap();
    // It grows past 4,096 later: re-packed, still served.
    c.execute_batch("WITH RECURSIVE s(i) AS (SELECT 3000 UNION ALL SELECT i+1 FROM s WHERE i < 6000) INSERT INTO t SELECT i, 'Z', i FROM s;").unwrap();
    let plain = c.sqlite();
    let want: Vec<(i64, i64)> = plain
        .prepare(
            "SELECT k % 7, SUM(m) FROM t WHERE k BETWEEN 1000 AND 5000 GROUP BY k % 7 ORDER BY 1",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let got = c
        .query(
            "SELECT k % 7, SUM(m) FROM t WHERE k BETWEEN 1000 AND 5000 GROUP BY k % 7 ORDER BY 1",
            &[],
        )
        .unwrap();
    assert_ne!(
        c.last_route().kind,
        pleroma::RouteKind::Engine,
        "{:?}",
        c.last_route()
    );
    let got: Vec<(i64, i64)> = got
        .rows
        .iter()
        .map(|r| match (&r[0], &r[1]) {
            (pleroma::Value::Integer(a), pleroma::Value::Integer(b)) => (*a, *b),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, want);
    let planes = c.query("PRAGMA pleroma_planes", &[]).unwrap();
    let cap = planes.columns.iter().position(|c| c == "cap").unwrap();
    assert_eq!(planes.rows[0][cap], pleroma::Value::Integer(65536));
    assert!(
        matches!(&planes.rows[0][1], pleroma::Value::Text(d) if d.starts_with("k(5501 values, 13 bits)")),
        "{planes:?}"
    );
}

#[test]
fn crossing_the_cap_later_puts_the_plane_out_of_service_with_a_reason() {
    let mut c = Connection::open_in_memory().unwrap();
    c.execute_batch("CREATE TABLE t(k INTEGER, m INTEGER); INSERT INTO t VALUES (1, 1); PRAGMA pleroma_attach('t', 'k', 'm');")
        .unwrap();
    c.execute_batch("WITH RECURSIVE s(i) AS (SELECT 2 UNION ALL SELECT i+1 FROM s WHERE i < 65537) INSERT INTO t SELECT i, i FROM s;")
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

/// Litestream's own tables are left out of the persisted state's schema
/// fingerprint, so no plane may stand on one.
#[test]
fn a_plane_on_litestreams_tables_is_refused() {
    let mut c = pleroma::Connection::open_in_memory().unwrap();
    c.execute_batch("CREATE TABLE _litestream_seq(id INTEGER PRIMARY KEY, seq INTEGER);")
        .unwrap();
    let e = c
        .execute("PRAGMA pleroma_attach('_litestream_seq', 'seq')", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("a table of Litestream's"), "{e}");
}

/// Found from outside: a user table holding a name Pleroma's persisted
/// state needs made the file unopenable after an attach (`pleroma_state`),
/// or failed every later INSERT (`pleroma_guard_t`). The attach is refused
/// instead, and nothing changes.
#[test]
fn a_user_object_with_a_name_pleroma_needs_refuses_the_attach() {
    for (own, want) in [
        (
            "CREATE TABLE pleroma_state(x)",
            "pleroma_state is not Pleroma's",
        ),
        (
            "CREATE TABLE pleroma_guard_t(x)",
            "pleroma_guard_t is not Pleroma's",
        ),
        (
            "CREATE VIEW Pleroma_Guard_T AS SELECT 1",
            "is not Pleroma's",
        ),
        // An index of the table itself under the guard's name, and a table
        // under the state table's guard's name.
        (
            "CREATE INDEX pleroma_guard_t ON t(g)",
            "pleroma_guard_t is not Pleroma's",
        ),
        (
            "CREATE TABLE pleroma_guard_pleroma_state(x)",
            "pleroma_guard_pleroma_state is not Pleroma's",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let mut c = Connection::open(&path).unwrap();
        c.execute_batch(&format!(
            "CREATE TABLE t(g TEXT, m INTEGER); INSERT INTO t VALUES ('a', 1); {own};"
        ))
        .unwrap();
        let e = err(&mut c, "PRAGMA pleroma_attach('t', 'g', 'm')");
        assert!(e.contains(want), "{own}: {e}");
        c.execute("INSERT INTO t VALUES ('b', 2)", &[]).unwrap();
        drop(c);
        let mut c = Connection::open(&path).unwrap();
        assert!(c
            .query("PRAGMA pleroma_planes", &[])
            .unwrap()
            .rows
            .is_empty());
        // With persistence off, the plane needs neither name.
        c.execute_batch("PRAGMA pleroma_persist = off; PRAGMA pleroma_attach('t', 'g', 'm')")
            .unwrap();
        c.query("SELECT g, SUM(m) FROM t GROUP BY g", &[]).unwrap();
        assert_eq!(c.last_route().kind, pleroma::RouteKind::Plane);
        // And persistence cannot be turned on over it; turning it off left
        // the user's object alone.
        let e = err(&mut c, "PRAGMA pleroma_persist = on");
        assert!(e.contains(want), "{own}: {e}");
        c.execute("INSERT INTO t VALUES ('c', 3)", &[]).unwrap();
        let kept: i64 = c
            .sqlite()
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name = ?1 COLLATE NOCASE AND sql = ?2",
                [
                    own.split_whitespace()
                        .nth(2)
                        .unwrap()
                        .split('(')
                        .next()
                        .unwrap(),
                    own,
                ],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(kept, 1, "the user's object, as it was: {own}");
    }
}
