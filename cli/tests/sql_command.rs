//! `pleroma sql DB 'SQL' ...` runs each argument and prints results in list
//! mode; the first error stops it with a non-zero exit code.

mod common;

use common::{pleroma, sql_ok};

#[test]
fn runs_each_argument_and_prints_list_output() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let out = sql_ok(
        &db,
        &[
            "CREATE TABLE t(a INTEGER, b TEXT, c REAL); INSERT INTO t VALUES (1, 'x', 2.0), (2, NULL, 0.5)",
            "SELECT * FROM t ORDER BY a",
            ".mode csv",
            "SELECT b, c FROM t WHERE a = 1",
        ],
    );
    assert_eq!(out, "1|x|2.0\n2||0.5\nx,2.0\r\n");
}

#[test]
fn the_first_error_stops_it_with_a_non_zero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let r = pleroma(
        &[
            "sql",
            db.to_str().unwrap(),
            "SELECT 1",
            "SELECT * FROM nope",
            "SELECT 2",
        ],
        "",
    );
    assert_eq!(r.code, Some(1));
    assert_eq!(r.stdout, "1\n");
    assert_eq!(r.stderr, "Error: in prepare, no such table: nope\n");
}

#[test]
fn a_bad_pragma_argument_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    sql_ok(&db, &["CREATE TABLE t(region TEXT, amount INTEGER)"]);
    let r = pleroma(
        &[
            "sql",
            db.to_str().unwrap(),
            "PRAGMA pleroma_attach('t', 'region, nosuch', 'amount')",
        ],
        "",
    );
    assert_ne!(r.code, Some(0));
    assert!(
        r.stderr.contains("nosuch"),
        "the message names the column: {}",
        r.stderr
    );
    let r = pleroma(
        &["sql", db.to_str().unwrap(), "PRAGMA pleroma_attach('t')"],
        "",
    );
    assert_ne!(r.code, Some(0));
    assert!(
        r.stderr.contains("expected 2 to 4 arguments"),
        "{}",
        r.stderr
    );
}
