//! A bad row makes `pleroma import` fail with the line named, and nothing is
//! loaded: not the good rows before it, not the table it would have created.

mod common;

use common::{pleroma, shell, sql_ok};

#[test]
fn a_value_of_the_wrong_type_names_the_line_and_loads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (db, csv) = (dir.path().join("t.db"), dir.path().join("bad.csv"));
    sql_ok(
        &db,
        &[
            "CREATE TABLE inv(region TEXT, amount_cents INTEGER)",
            "INSERT INTO inv VALUES ('west', 5)",
            "PRAGMA pleroma_attach('inv', 'region', 'amount_cents')",
        ],
    );
    std::fs::write(
        &csv,
        "region,amount_cents\nnorth,10\nsouth,20\nnorth,12.50\neast,1\n",
    )
    .unwrap();
    let r = pleroma(
        &["import", db.to_str().unwrap(), "inv", csv.to_str().unwrap()],
        "",
    );
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr
            .contains("line 4, column amount_cents: '12.50' is not an integer"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("nothing was loaded"), "{}", r.stderr);
    assert_eq!(
        sql_ok(
            &db,
            &["SELECT COUNT(*), SUM(amount_cents) FROM inv WHERE region <> 'x'"]
        ),
        "1|5\n"
    );
}

#[test]
fn a_short_row_names_the_line_and_the_new_table_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let (db, csv) = (dir.path().join("t.db"), dir.path().join("short.csv"));
    std::fs::write(&csv, "a,b\n1,2\n3\n").unwrap();
    let r = pleroma(
        &[
            "import",
            db.to_str().unwrap(),
            "fresh",
            csv.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("line 3"), "{}", r.stderr);
    assert_eq!(
        sql_ok(
            &db,
            &["SELECT COUNT(*) FROM sqlite_schema WHERE name = 'fresh'"]
        ),
        "0\n"
    );
}

#[test]
fn a_constraint_failure_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let (db, csv) = (dir.path().join("t.db"), dir.path().join("dup.csv"));
    sql_ok(&db, &["CREATE TABLE k(id INTEGER PRIMARY KEY, v TEXT)"]);
    std::fs::write(&csv, "id,v\n1,a\n2,b\n1,c\n").unwrap();
    let r = pleroma(
        &["import", db.to_str().unwrap(), "k", csv.to_str().unwrap()],
        "",
    );
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains("line 4: UNIQUE constraint failed: k.id"),
        "{}",
        r.stderr
    );
    assert_eq!(sql_ok(&db, &["SELECT COUNT(*) FROM k"]), "0\n");
}

/// `.import` inside the shell's open transaction loads into a savepoint of
/// it: the transaction's ROLLBACK takes the rows back with everything else,
/// and a failed import takes back only its own rows.
#[test]
fn dot_import_inside_a_transaction_is_part_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, good, bad) = (
        dir.path().join("t.db"),
        dir.path().join("good.csv"),
        dir.path().join("bad.csv"),
    );
    sql_ok(
        &db,
        &[
            "CREATE TABLE inv(region TEXT, amount_cents INTEGER UNIQUE)",
            "PRAGMA pleroma_attach('inv', 'region', 'amount_cents')",
        ],
    );
    std::fs::write(&good, "region,amount_cents\nnorth,10\nsouth,20\n").unwrap();
    std::fs::write(&bad, "region,amount_cents\neast,30\neast,10\n").unwrap();
    let script = format!(
        "BEGIN;\nINSERT INTO inv VALUES ('west', 5);\n.import {} inv\n.import {} inv\n\
         SELECT region, SUM(amount_cents) FROM inv GROUP BY region ORDER BY region;\nCOMMIT;\n",
        good.display(),
        bad.display()
    );
    let r = shell(&db, &script);
    assert!(
        r.stderr.contains("UNIQUE constraint failed"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.contains("north|10\nsouth|20\nwest|5"),
        "{}",
        r.stdout
    );
    assert_eq!(
        sql_ok(&db, &["SELECT COUNT(*), SUM(amount_cents) FROM inv"]).trim(),
        "3|35"
    );
    let script = format!("BEGIN;\n.import {} inv\nROLLBACK;\n", good.display());
    shell(&db, &script);
    assert_eq!(
        sql_ok(&db, &["SELECT COUNT(*), SUM(amount_cents) FROM inv"]).trim(),
        "3|35"
    );
}
