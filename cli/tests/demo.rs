//! `pleroma demo` at a small size: the ledger's 16 queries, each answered
//! identically through Pleroma and by plain SQLite, in a table with a route.

mod common;

use common::pleroma;

#[test]
fn demo_answers_every_query_as_sqlite_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ledger.db");
    let r = pleroma(
        &["demo", "--rows", "5000", "--db", db.to_str().unwrap()],
        "",
    );
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("every answer identical"), "{}", r.stdout);
    let rows: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.ends_with("  same") || l.ends_with("  DIFFERENT"))
        .collect();
    assert_eq!(rows.len(), 16, "{}", r.stdout);
    // The first call is the plane's; repeats may come from its memo.
    assert!(
        rows[0].starts_with("total_invoiced") && rows[0].contains(" plane"),
        "{}",
        rows[0]
    );
    assert!(
        rows[7].starts_with("pk_lookup") && rows[7].contains(" engine "),
        "{}",
        rows[7]
    );

    // A second run reuses the ledger and the plane kept in the file.
    let again = pleroma(&["demo", "--db", db.to_str().unwrap()], "");
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert!(
        again.stdout.contains("Using the ledger already in"),
        "{}",
        again.stdout
    );
    assert!(
        again.stdout.contains("already attached"),
        "{}",
        again.stdout
    );
}
