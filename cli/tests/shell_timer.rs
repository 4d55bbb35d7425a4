//! `.timer on` prints `Run Time: real SECONDS route: ROUTE` after each
//! statement: SECONDS with six decimals, ROUTE plane, memo or engine.

mod common;

use common::shell;

/// The route of a well-formed `Run Time:` line, or a panic naming the line.
fn route_of(line: &str) -> &str {
    let rest = line
        .strip_prefix("Run Time: real ")
        .unwrap_or_else(|| panic!("not a timer line: {line:?}"));
    let (secs, route) = rest
        .split_once(" route: ")
        .unwrap_or_else(|| panic!("no route in {line:?}"));
    let (whole, frac) = secs
        .split_once('.')
        .unwrap_or_else(|| panic!("no decimals in {line:?}"));
    assert!(
        !whole.is_empty() && whole.bytes().all(|b| b.is_ascii_digit()),
        "{line:?}"
    );
    assert!(
        frac.len() == 6 && frac.bytes().all(|b| b.is_ascii_digit()),
        "{line:?}"
    );
    assert!(["plane", "memo", "engine"].contains(&route), "{line:?}");
    route
}

#[test]
fn timer_line_names_the_route_of_each_statement() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let script = "\
CREATE TABLE s(region TEXT, amount INTEGER);
INSERT INTO s VALUES ('eu', 5), ('us', 7), ('eu', 1);
PRAGMA pleroma_attach('s', 'region', 'amount');
.timer on
SELECT SUM(amount) FROM s WHERE region = 'eu';
SELECT amount FROM s WHERE amount > 5;
.timer off
SELECT 1;
";
    let r = shell(&db, script);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert_eq!(lines[0], "6");
    assert_eq!(route_of(lines[1]), "plane");
    assert_eq!(lines[2], "7");
    assert_eq!(route_of(lines[3]), "engine");
    assert_eq!(lines[4], "1");
}
