//! `pleroma shell DB < script` prints what `sqlite3 DB < script` prints:
//! the same list output (NULL as empty, REALs as SQLite renders them), the
//! same error lines on standard error, and the same exit code.

mod common;

use common::{assert_same_run, pleroma, require_sqlite3, run, shell};

const SETUP: &str = "\
CREATE TABLE t(id INTEGER PRIMARY KEY, region TEXT, qty INTEGER, price REAL, note);
INSERT INTO t VALUES
  (1, 'north', 3, 1.5, NULL),
  (2, 'south', NULL, 0.1, 'a|b'),
  (3, 'north', 7, 1e20, 'x'),
  (4, NULL, 2, 100.0, ''),
  (5, 'east', -1, -2.25, x'41'),
  (6, 'south', 9223372036854775807, 123456789012345678.0, 1e-5);
";

/// Statements whose output both programs must print the same way.
const QUERIES: &str = "\
SELECT * FROM t;
SELECT region, COUNT(*), SUM(qty), AVG(price), TOTAL(price) FROM t GROUP BY region ORDER BY region;
  SELECT 1.0 / 3, 2.0 * 3, 1e-7, 0.1 + 0.2, -0.0, 'two
lines';
-- a comment line, then two statements on one line
SELECT COUNT(*) FROM t; SELECT typeof(price) FROM t WHERE id = 1;
SELECT * FROM missing;
SELEC 1;
# a hash comment line
CREATE TRIGGER tr AFTER INSERT ON t BEGIN
  UPDATE t SET note = 'by trigger' WHERE id = new.id;
END;
/* a block
   comment */
INSERT INTO t(id, region) VALUES (7, 'west');
SELECT id, note FROM t WHERE id = 7;
SELECT id,

  region FROM t WHERE nosuch = 1;
SELECT zeroblob(2), x'610062', 'tail' -- a trailing comment
;
SELECT 1e308 * 10, 5e-324, 1e15, 1e14, 123456789012345.6, round(2.5), 7 / 2;
SELECT 'after errors', 1;
INSERT INTO t(id) VALUES (1);
UPDATE t SET qty = qty + 1 WHERE region = 'north';
SELECT id, qty FROM t WHERE region = 'north' ORDER BY id;
SELECT 'one'; SELECT nope FROM t; SELECT 'skipped';
EXPLAIN QUERY PLAN SELECT region, COUNT(*) FROM t WHERE id IN (SELECT id FROM t WHERE qty > 1) GROUP BY region ORDER BY 2;
.mode csv
SELECT * FROM t ORDER BY id;
.headers on
.mode list
SELECT region, qty FROM t ORDER BY id LIMIT 2;
SELECT region FROM t WHERE 0;
SELECT 'no semicolon at the end'
";

#[test]
fn shell_output_matches_sqlite3() {
    require_sqlite3();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("sqlite3.db"), dir.path().join("pleroma.db"));
    let script = format!("{SETUP}{QUERIES}");
    let want = run("sqlite3", &[a.to_str().unwrap()], &script);
    let got = shell(&b, &script);
    assert_same_run(&got, &want);
    assert_eq!(got.code, Some(1), "errors in a script make the exit code 1");
}

#[test]
fn shell_output_with_a_plane_matches_sqlite3() {
    require_sqlite3();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("sqlite3.db"), dir.path().join("pleroma.db"));
    let setup = SETUP.replace("9223372036854775807", "40");
    assert_eq!(run("sqlite3", &[a.to_str().unwrap()], &setup).code, Some(0));
    let attach = format!("{setup}PRAGMA pleroma_attach('t', 'region', 'qty');\n");
    let r = shell(&b, &attach);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let queries = "\
SELECT COUNT(*), SUM(qty), MIN(qty), MAX(qty), AVG(qty), TOTAL(qty) FROM t;
SELECT region, COUNT(*), SUM(qty), AVG(qty) FROM t GROUP BY region ORDER BY region;
SELECT COUNT(qty) FROM t WHERE region IN ('north', 'east') OR region IS NULL;
SELECT region, SUM(qty) FROM t GROUP BY region HAVING SUM(qty) > 5 ORDER BY 2 DESC;
SELECT COUNT(DISTINCT region) FROM t WHERE qty IS NOT NULL;
INSERT INTO t(id, region, qty) VALUES (10, 'west', 5);
SELECT region, SUM(qty) FROM t GROUP BY region ORDER BY region;
";
    let want = run("sqlite3", &[a.to_str().unwrap()], queries);
    let got = shell(&b, queries);
    assert_same_run(&got, &want);
    // And the plane did answer: the first query again, then the counters.
    let first = queries.lines().next().unwrap();
    let r = shell(&b, &format!("{first}\n.stats\n"));
    assert!(r.stdout.contains("served by a plane: 1\n"), "{}", r.stdout);
}

#[test]
fn quit_and_exit_end_the_script_as_in_sqlite3() {
    require_sqlite3();
    let dir = tempfile::tempdir().unwrap();
    for script in [
        "SELECT * FROM nope;\n.quit\nSELECT 'not reached';\n",
        "SELECT 1;\n.exit\nSELECT 'not reached';\n",
        "SELECT 1;\n.exit 3\nSELECT 'not reached';\n",
    ] {
        let want = run(
            "sqlite3",
            &[dir.path().join("a.db").to_str().unwrap()],
            script,
        );
        let got = shell(&dir.path().join("b.db"), script);
        assert_eq!(
            (&got.stdout, &got.stderr, got.code),
            (&want.stdout, &want.stderr, want.code),
            "{script}"
        );
    }
}

/// A statement that fails while SQLite steps it: `sqlite3` prints the rows
/// stepped before the error (none, one, three), then the error, in every
/// output mode.
#[test]
fn rows_before_a_runtime_error_are_printed_as_in_sqlite3() {
    require_sqlite3();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("sqlite3.db"), dir.path().join("pleroma.db"));
    let statements = "\
SELECT abs(-9223372036854775808) AS a;
SELECT 1 AS a UNION ALL SELECT abs(-9223372036854775808);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3)
  SELECT x, 'row ' || x AS label FROM c UNION ALL SELECT abs(-9223372036854775808), 'no';
SELECT id, CASE WHEN id = 3 THEN json('{') ELSE region END AS r FROM t ORDER BY id;
SELECT 'after the errors';
";
    let mut script = String::from(SETUP);
    for mode in [
        ".mode list",
        ".headers on",
        ".mode csv",
        ".mode box",
        ".mode json",
    ] {
        script.push_str(mode);
        script.push('\n');
        script.push_str(statements);
    }
    let want = run("sqlite3", &[a.to_str().unwrap()], &script);
    let got = shell(&b, &script);
    assert_same_run(&got, &want);
    // The rows were printed, each error after them.
    assert!(
        want.stdout.contains("1|row 1\n2|row 2\n3|row 3\n"),
        "{}",
        want.stdout
    );
    assert_eq!(want.stderr.matches("Runtime error near line").count(), 20);

    // With a plane on t: statements it declines to SQLite, one in a
    // transaction.
    let planed = dir.path().join("planed.db");
    let r = shell(
        &planed,
        &format!("{SETUP}PRAGMA pleroma_attach('t', 'region', 'qty');\n"),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let declined = "\
SELECT id, CASE WHEN id = 3 THEN json('{') ELSE region END FROM t ORDER BY id;
SELECT region, COUNT(*) FROM t GROUP BY region UNION ALL SELECT abs(-9223372036854775808), 1;
BEGIN;
SELECT 1 UNION ALL SELECT abs(-9223372036854775808);
COMMIT;
";
    let want = run("sqlite3", &[a.to_str().unwrap()], declined);
    let got = shell(&planed, declined);
    assert_eq!(
        (&got.stdout, &got.stderr, got.code),
        (&want.stdout, &want.stderr, want.code)
    );
    assert!(want.stdout.ends_with("south|2\n1\n"), "{}", want.stdout);

    // `pleroma sql DB SQL` as `sqlite3 DB SQL`: the rows, then "stepping".
    for sql in statements.split_inclusive(";\n").take(4) {
        let want = run("sqlite3", &[a.to_str().unwrap(), sql], "");
        let got = pleroma(&["sql", b.to_str().unwrap(), sql], "");
        assert_eq!(
            (&got.stdout, &got.stderr, got.code),
            (&want.stdout, &want.stderr, want.code),
            "{sql}"
        );
    }
}
