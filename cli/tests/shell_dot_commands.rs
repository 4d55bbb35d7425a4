//! The dot-commands `sqlite3` users type and scripts contain print what
//! `sqlite3` prints: each case runs the same script through both programs
//! and diffs standard output, standard error and the exit code.
//!
//! The cases avoid what differs between SQLite versions (the system's
//! `sqlite3` may be older than the bundled library): REALs in `.dump` are
//! ones whose 20 digits every version prints the same, and `.schema` gets no
//! pattern that matches the eponymous virtual tables some builds of
//! `sqlite3` list (`sqlite_dbdata`, ...).

mod common;

use std::path::Path;

use common::{pleroma, require_sqlite3, run, run_in, shell, sql_ok, Ran};

/// Run `script` through `sqlite3 t.db` and `pleroma shell t.db`, each in a
/// directory of its own holding `files`, and return both runs with each
/// directory's path written as `DIR`.
fn both(setup: &str, script: &str, files: &[(&str, &str)]) -> (Ran, Ran, [tempfile::TempDir; 2]) {
    require_sqlite3();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for d in &dirs {
        for (name, text) in files {
            std::fs::write(d.path().join(name), text).unwrap();
        }
        if !setup.is_empty() {
            let r = run_in(Some(d.path()), "sqlite3", &["t.db"], setup);
            assert_eq!(r.code, Some(0), "setup: {}", r.stderr);
        }
    }
    let clean = |r: Ran, d: &Path| Ran {
        stdout: r.stdout.replace(d.to_str().unwrap(), "DIR"),
        stderr: r.stderr.replace(d.to_str().unwrap(), "DIR"),
        code: r.code,
    };
    let got = run_in(
        Some(dirs[1].path()),
        env!("CARGO_BIN_EXE_pleroma"),
        &["shell", "t.db"],
        script,
    );
    let want = run_in(Some(dirs[0].path()), "sqlite3", &["t.db"], script);
    let (got, want) = (clean(got, dirs[1].path()), clean(want, dirs[0].path()));
    (want, got, dirs)
}

fn assert_same(want: &Ran, got: &Ran, what: &str) {
    assert_eq!(got.stdout, want.stdout, "{what}: standard output differs");
    assert_eq!(got.stderr, want.stderr, "{what}: standard error differs");
    assert_eq!(got.code, want.code, "{what}: exit code differs");
}

const SCHEMA: &str = "\
CREATE TABLE t(id INTEGER PRIMARY KEY, region TEXT, qty INTEGER, price REAL, note);
INSERT INTO t VALUES
  (1, 'north', 3, 1.5, NULL),
  (2, 'it''s', NULL, 0.5, 'two
lines'),
  (3, 'x', 7, 1e20, x'00ff10'),
  (4, NULL, 2, 100.0, ''),
  (5, 'cr', -1, -2.25, 'a' || char(13) || char(10) || 'b\\n'),
  (6, 's', 9223372036854775807, 123456789012345678.0, 1e999),
  (7, 'neg', -9223372036854775808, -1e999, x'');
CREATE TABLE \"select\"(\"group\" TEXT, \"a b\" INTEGER);
INSERT INTO \"select\" VALUES ('g', 1);
CREATE INDEX t_region ON t(region);
CREATE UNIQUE INDEX t_qty ON t(qty, price);
CREATE VIEW v AS SELECT region, SUM(qty) AS total FROM t GROUP BY region;
CREATE TRIGGER tr AFTER INSERT ON t BEGIN
  UPDATE t SET note = 'new' WHERE id = new.id; -- a comment
END;
CREATE TABLE au(id INTEGER PRIMARY KEY AUTOINCREMENT, x UNIQUE);
INSERT INTO au(x) VALUES ('one'), ('two');
CREATE TABLE kv(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
INSERT INTO kv VALUES ('k', 2.5);
CREATE TABLE plain(a, b /* a comment */);
INSERT INTO plain VALUES (1, 2), (1, 2);
CREATE TABLE g(a INTEGER, b INTEGER GENERATED ALWAYS AS (a * 2));
INSERT INTO g(a) VALUES (21);
";

#[test]
fn schema_and_indexes_match_sqlite3() {
    let script = "\
.schema
.print --
.schema t
.print --
.schema T*
.print --
.schema se%
.print --
.schema nomatch
.schema sqlite_schema
.indexes
.indexes t
.indexes nomatch
.indices au
.schema a b
.indexes a b
";
    let (want, got, _d) = both(SCHEMA, script, &[]);
    assert_same(&want, &got, ".schema and .indexes");
}

#[test]
fn dump_matches_sqlite3() {
    let script = "\
.dump
.dump t
.dump s% plain
.dump --newlines t
.dump --data-only kv
.dump nomatch
";
    let (want, got, _d) = both(SCHEMA, script, &[]);
    assert_same(&want, &got, ".dump");
}

#[test]
fn the_dump_rebuilds_the_database_in_sqlite3() {
    require_sqlite3();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    assert_eq!(shell(&a, SCHEMA).code, Some(0));
    let dump = shell(&a, ".dump\n");
    assert_eq!(dump.code, Some(0), "{}", dump.stderr);
    let r = run("sqlite3", &[b.to_str().unwrap()], &dump.stdout);
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""));
    let again = run("sqlite3", &[b.to_str().unwrap(), ".dump"], "");
    assert_eq!(again.stdout, dump.stdout, "the copy dumps the same");
}

#[test]
fn a_dump_of_a_database_with_planes_brings_the_planes_back() {
    require_sqlite3();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    let setup = "\
CREATE TABLE sales(region TEXT, amount INTEGER);
INSERT INTO sales VALUES ('eu', 5), ('us', 7), ('eu', 1);
CREATE TABLE regions(name TEXT PRIMARY KEY, zone TEXT);
INSERT INTO regions VALUES ('eu', 'east'), ('us', 'west');
PRAGMA pleroma_attach('sales', 'region', 'amount');
";
    let r = shell(&a, setup);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let dump = shell(&a, ".dump\n");
    assert_eq!(dump.code, Some(0), "{}", dump.stderr);
    let native = run("sqlite3", &[a.to_str().unwrap(), ".dump"], "");
    // sqlite3's own dump, without the persisted state and its guards (which
    // plain SQLite could not load: the guard calls a function of Pleroma's).
    let own: String = native
        .stdout
        .lines()
        .filter(|l| !l.contains("pleroma_guard") && !l.contains("pleroma_state"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        native.stdout.contains("pleroma_guard_sales"),
        "{}",
        native.stdout
    );
    assert_eq!(dump.stdout, own, "the dump is sqlite3's own");
    for table in ["sales", "pleroma_catalog"] {
        assert!(
            dump.stdout.contains(&format!("CREATE TABLE {table}")),
            "{}",
            dump.stdout
        );
    }
    let r = run("sqlite3", &[b.to_str().unwrap()], &dump.stdout);
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""));
    let planes = sql_ok(&b, &["PRAGMA pleroma_planes"]);
    assert!(planes.contains("sales"), "the plane is back: {planes}");
    let r = shell(
        &b,
        "SELECT region, SUM(amount) FROM sales GROUP BY region ORDER BY 1;\n.stats\n",
    );
    assert!(r.stdout.starts_with("eu|6\nus|7\n"), "{}", r.stdout);
    assert!(r.stdout.contains("served by a plane: 1\n"), "{}", r.stdout);
}

#[test]
fn print_nullvalue_separator_changes_and_show_match_sqlite3() {
    let script = "\
.print hello   world \"two  spaces\" 'single\\tquoted' tab\\there \"esc\\\"aped\\101\"
.print
.changes on
CREATE TABLE x(a, b);
INSERT INTO x VALUES (1, NULL), (2, 'b c');
SELECT * FROM x; SELECT COUNT(*) FROM x;
UPDATE x SET a = a + 10;
SELECT nope FROM x;
.changes off
DELETE FROM x WHERE a = 12;
.nullvalue NIL
SELECT * FROM x;
.separator ,
SELECT * FROM x;
.separator \" - \" \"\\n--\\n\"
.headers on
SELECT * FROM x;
.show
.headers off
.mode csv
SELECT * FROM x, (SELECT 'a,b', 'c;d');
.separator ;
SELECT * FROM x, (SELECT 'a,b', 'c;d');
.show
.mode list
SELECT * FROM x;
.nullvalue
.separator
.changes
.changes maybe
.changes 0x1
INSERT INTO x VALUES (3, 3);
.changes no
.bail
.bogus
.bogus with arguments
.sep |
.nu ''
.show
.databases
";
    let (want, got, _d) = both("", script, &[]);
    assert_same(&want, &got, "settings");
}

#[test]
fn read_output_once_and_bail_match_sqlite3() {
    let files = [
        (
            "inner.sql",
            "SELECT 'inner';\nSELEC 1;\n.print in inner\n.read deeper.sql\n.quit\nSELECT 'not reached';\n",
        ),
        ("deeper.sql", "SELECT 'deeper';\nSELECT * FROM nope;\n"),
        ("bail.sql", ".bail on\nSELECT 'before';\nSELECT * FROM nope;\nSELECT 'after';\n"),
    ];
    let script = "\
.read inner.sql
SELECT 'after inner';
.read missing.sql
.read
.output out.txt
SELECT 1;
.print to the file
SELECT nope;
.output
SELECT 2;
.once once.txt
SELECT 3;
SELECT 4;
.output /no/such/dir/x
.read out.txt
.read once.txt
.read bail.sql
SELECT 'not reached';
";
    let (want, got, dirs) = both("", script, &files);
    assert_same(&want, &got, ".read, .output, .once, .bail");
    for f in ["out.txt", "once.txt"] {
        let read = |d: &tempfile::TempDir| std::fs::read_to_string(d.path().join(f)).unwrap();
        assert_eq!(read(&dirs[1]), read(&dirs[0]), "{f}");
    }
    // Without .bail the script goes on, and still exits 1.
    let (want, got, _d) = both("", "SELECT * FROM nope;\nSELECT 'on';\n", &[]);
    assert_same(&want, &got, "no bail");
    let (want, got, _d) = both("", ".bail on\n.bogus\nSELECT 'off';\n", &[]);
    assert_same(&want, &got, "bail at a bad dot-command");
    assert_eq!(got.code, Some(1));
}

#[test]
fn pleroma_sql_runs_the_dot_commands_as_sqlite3_does() {
    require_sqlite3();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    assert_eq!(
        run("sqlite3", &[db.to_str().unwrap()], SCHEMA).code,
        Some(0)
    );
    let args = [
        ".schema t",
        ".indexes",
        ".nullvalue -",
        "SELECT note FROM t WHERE id = 1",
        ".dump plain",
    ];
    let want = run(
        "sqlite3",
        &[&[db.to_str().unwrap()][..], &args[..]].concat(),
        "",
    );
    let mut all = vec!["sql", db.to_str().unwrap()];
    all.extend_from_slice(&args);
    let got = pleroma(&all, "");
    assert_same(&want, &got, "pleroma sql");
}

/// On a file with a persisted plane, `.changes on` counts the user's rows
/// (not Pleroma's state rows), and a comment before `VACUUM` or `PRAGMA
/// journal_mode` changes nothing: both as `sqlite3` on the same script and
/// the same file without the plane.
#[test]
fn changes_and_leading_comments_on_a_persisted_plane_match_sqlite3() {
    require_sqlite3();
    let setup = "\
CREATE TABLE t(id INTEGER PRIMARY KEY, region TEXT, qty INTEGER);
INSERT INTO t(region, qty) VALUES ('n', 1), ('s', 2), ('n', 3);
";
    let script = "\
.changes on
INSERT INTO t(region, qty) VALUES ('e', 4), ('w', 5);
UPDATE t SET qty = qty + 1 WHERE region = 'n';
DELETE FROM t WHERE id > 4;
UPDATE t SET qty = 0 WHERE id < 0;
/* nightly */ VACUUM;
-- switch to WAL
PRAGMA journal_mode = WAL;
/* which mode */ PRAGMA journal_mode;
SELECT region, SUM(qty) FROM t GROUP BY region ORDER BY region;
";
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for d in &dirs {
        let r = run_in(Some(d.path()), "sqlite3", &["t.db"], setup);
        assert_eq!(r.code, Some(0), "setup: {}", r.stderr);
    }
    let db = dirs[1].path().join("t.db");
    let attached = pleroma(
        &[
            "sql",
            db.to_str().unwrap(),
            "PRAGMA pleroma_attach('t', 'region', 'qty')",
        ],
        "",
    );
    assert_eq!(attached.code, Some(0), "attach: {}", attached.stderr);
    let want = run_in(Some(dirs[0].path()), "sqlite3", &["t.db"], script);
    let got = run_in(
        Some(dirs[1].path()),
        env!("CARGO_BIN_EXE_pleroma"),
        &["shell", "t.db"],
        script,
    );
    assert!(want.stdout.contains("changes: 2"), "{}", want.stdout);
    assert_same(&want, &got, "persisted plane");
}
