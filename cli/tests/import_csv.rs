//! `pleroma import DB TABLE FILE.csv` creates the table from the header with
//! inferred types, or loads into an existing one, keeping its plane exact.

mod common;

use common::{pleroma, sql_ok};

const CSV: &str = "region,status,month,amount_cents,rate\n\
north,paid,202401,1250,0.5\n\
south,open,202401,990,1.25\n\
north,paid,202402,4100,\n\
east,,202402,700,2\n";

#[test]
fn creates_the_table_with_inferred_types() {
    let dir = tempfile::tempdir().unwrap();
    let (db, csv) = (dir.path().join("t.db"), dir.path().join("inv.csv"));
    // With the byte-order mark spreadsheet exports begin with.
    std::fs::write(&csv, format!("\u{feff}{CSV}")).unwrap();
    let r = pleroma(
        &["import", db.to_str().unwrap(), "inv", csv.to_str().unwrap()],
        "",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout.starts_with("imported 4 rows into inv"),
        "{}",
        r.stdout
    );
    let out = sql_ok(
        &db,
        &["SELECT typeof(region), typeof(month), typeof(amount_cents), typeof(rate), status IS NULL FROM inv LIMIT 1 OFFSET 3"],
    );
    assert_eq!(out, "text|integer|integer|real|1\n");
    assert_eq!(
        sql_ok(&db, &["SELECT SUM(amount_cents), TOTAL(rate) FROM inv"]),
        "7040|3.75\n"
    );
}

#[test]
fn loads_into_an_existing_table_with_a_plane() {
    let dir = tempfile::tempdir().unwrap();
    let (db, csv) = (dir.path().join("t.db"), dir.path().join("inv.csv"));
    std::fs::write(&csv, CSV).unwrap();
    sql_ok(
        &db,
        &[
            "CREATE TABLE inv(id INTEGER PRIMARY KEY, region TEXT, status TEXT, month INTEGER, amount_cents INTEGER, rate REAL)",
            "INSERT INTO inv(region, status, month, amount_cents) VALUES ('west', 'paid', 202401, 5)",
            "PRAGMA pleroma_attach('inv', 'region, status, month', 'amount_cents')",
        ],
    );
    let r = pleroma(
        &["import", db.to_str().unwrap(), "inv", csv.to_str().unwrap()],
        "",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let out = sql_ok(
        &db,
        &[".timer on", "SELECT region, SUM(amount_cents) FROM inv WHERE status = 'paid' GROUP BY region ORDER BY region"],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..2], ["north|5350", "west|5"]);
    assert!(lines[2].ends_with("route: plane"), "{out}");
}

#[test]
fn the_shell_imports_with_dot_import() {
    let dir = tempfile::tempdir().unwrap();
    let (db, csv, bad) = (
        dir.path().join("t.db"),
        dir.path().join("inv.csv"),
        dir.path().join("bad.csv"),
    );
    std::fs::write(&csv, CSV).unwrap();
    std::fs::write(&bad, "region,amount_cents\nnorth,x\n").unwrap();
    let script = format!(
        ".import {} inv\nSELECT COUNT(*) FROM inv;\n.import {} inv\nSELECT COUNT(*) FROM inv;\n",
        csv.display(),
        bad.display()
    );
    let r = common::shell(&db, &script);
    assert_eq!(r.stdout, "imported 4 rows into inv\n4\n4\n");
    assert!(
        r.stderr
            .contains("line 2, column amount_cents: 'x' is not an integer"),
        "{}",
        r.stderr
    );
    assert_eq!(r.code, Some(1));
}
