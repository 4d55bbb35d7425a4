//! `.parameter` (`.param`) in `pleroma shell` as in `sqlite3`: init, set,
//! unset, list and clear print what `sqlite3` prints, statements bind the
//! parameters by name in SQLite's numbering (NULL when not set), and a
//! plane still serves a statement with bound parameters.

mod common;

use common::{assert_same_run, require_sqlite3, run, shell};

const SETUP: &str = "\
CREATE TABLE t(id INTEGER PRIMARY KEY, region TEXT, qty INTEGER);
INSERT INTO t VALUES (1, 'north', 3), (2, 'south', 4), (3, 'north', 7), (4, NULL, 2), (5, 'east', 1);
";

const SCRIPT: &str = "\
.param list
SELECT :x, @y, $z, ?1, ?;
.param init
.param list
.param set :x 5
.param set @y 'text'
.param set $z 1+2
.param set ?1 7
.param set :long_parameter_name x'41'
.param set :w hello
.param set :n NULL
.param set :r 2.5
.param set :s '(SELECT SUM(qty) FROM t)'
.param set :v abs(-9223372036854775808)
.param set :a (select
.param list
SELECT :x, @y, $z, ?1, :nope, typeof(:w), :w, :n IS NULL, :r, :s, :v IS NULL, :a;
SELECT ?1, ?2, @y;
SELECT ?, ?, :x;
SELECT ?3, :x, ?, ?1;
SELECT :x + :x, :x, $z * @y;
SELECT id FROM t WHERE qty > $z ORDER BY id;
.param set :x 6
SELECT :x;
.param unset :x
.param unset :nosuch
.parameter list
SELECT :x, ?1;
SELECT :x FROM nosuch;
.param
.param bogus
.param set :b
.param set :w hello world
.param clear extra
.par list
.param clear
.param list
SELECT @y, ?1;
.param set ?2 'second'
.mode csv
SELECT ?1, ?2;
.mode list
.changes on
.param set :c 1
SELECT 'changes';
.param unset :c
SELECT 'unset';
.changes off
";

#[test]
fn parameters_match_sqlite3() {
    require_sqlite3();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("sqlite3.db"), dir.path().join("pleroma.db"));
    let script = format!("{SETUP}{SCRIPT}");
    let want = run("sqlite3", &[a.to_str().unwrap()], &script);
    let got = shell(&b, &script);
    assert_same_run(&got, &want);
    // What the script checks did happen in sqlite3: bound by name, the
    // list aligned, the usage printed.
    assert!(
        want.stdout
            .contains("5|text|3|5||text|hello|1|2.5|17|1|(select\n"),
        "{}",
        want.stdout
    );
    assert!(
        want.stdout
            .contains(":long_parameter_name X'41'\n:n                   NULL\n"),
        "{}",
        want.stdout
    );
    assert!(
        want.stdout.contains(".parameter CMD ..."),
        "{}",
        want.stdout
    );
}

#[test]
fn a_plane_serves_statements_with_bound_parameters() {
    require_sqlite3();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("sqlite3.db"), dir.path().join("pleroma.db"));
    assert_eq!(run("sqlite3", &[a.to_str().unwrap()], SETUP).code, Some(0));
    // The plane on the pleroma side only: to sqlite3 an unknown PRAGMA is
    // nothing, to pleroma it prints nothing either.
    let attach = format!("{SETUP}PRAGMA pleroma_attach('t', 'region', 'qty');\n");
    let r = shell(&b, &attach);
    assert_eq!((r.stderr.as_str(), r.code), ("", Some(0)));
    let script = "\
.param set ?1 'north'
.param set ?2 'south'
SELECT COUNT(*), SUM(qty) FROM t WHERE region = ?1;
SELECT region, SUM(qty) FROM t WHERE region IN (?1, ?2) GROUP BY region ORDER BY region;
SELECT COUNT(*), SUM(qty) FROM t WHERE region = ?3;
.param set :r 'north'
SELECT COUNT(*), SUM(qty) FROM t WHERE region <> :r;
";
    let want = run("sqlite3", &[a.to_str().unwrap()], script);
    let got = shell(&b, script);
    assert_same_run(&got, &want);
    assert_eq!(want.stdout, "2|10\nnorth|10\nsouth|4\n0|\n2|5\n");
    // The plane answered them all, with the values bound.
    let r = shell(&b, &format!("{script}.stats\n"));
    assert!(r.stdout.contains("served by a plane: 4\n"), "{}", r.stdout);
}
