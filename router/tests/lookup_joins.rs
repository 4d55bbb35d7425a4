//! Lookup joins through the residue (issue 22, item 2): the planed table
//! joined on a dimension to an ordinary table. The cells answer the core
//! grouped by the dimensions the statement names, SQLite joins the other
//! table to the grouped rows; COUNT(*) and SUM merge the partials of each
//! joined core row, so a key that matches k rows counts k times, as in
//! SQLite.

mod common;
use common::*;
use pleroma::RouteKind;

const SETUP: &str = "
    CREATE TABLE events(id INTEGER PRIMARY KEY, country TEXT, device TEXT, revenue INTEGER, note TEXT);
    CREATE TABLE countries(code TEXT, region TEXT, pop INTEGER);
    INSERT INTO countries VALUES ('DE', 'EU', 83), ('FR', 'EU', 68), ('US', 'NA', 330),
        ('US', 'NA2', 1), (NULL, 'NULLR', 0), ('JP', 'AS', 125);
    INSERT INTO events(country, device, revenue, note) VALUES ('DE', 'ios', 10, 'a'),
        ('DE', 'web', 20, 'b'), ('FR', 'ios', 5, 'c'), ('US', 'web', 7, 'd'), ('US', 'ios', NULL, 'e'),
        (NULL, 'web', 3, 'f'), ('BR', 'web', 100, 'g');";

const ATTACH: &str = "PRAGMA pleroma_attach('events', 'country, device', 'revenue')";

const SERVED: &[&str] = &[
    "SELECT c.region, SUM(e.revenue), COUNT(*), COUNT(e.revenue), AVG(e.revenue), MIN(e.revenue), MAX(e.revenue) \
     FROM events e JOIN countries c ON c.code = e.country GROUP BY c.region ORDER BY c.region",
    "SELECT c.region, e.device, SUM(e.revenue), COUNT(*) FROM events e LEFT JOIN countries c ON c.code = e.country \
     WHERE e.device <> 'x' GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT c.region, COUNT(c.pop), MAX(c.pop), COUNT(DISTINCT c.pop) FROM countries c JOIN events e \
     ON c.code = e.country GROUP BY c.region ORDER BY 2 DESC, 1 LIMIT 2",
    "SELECT region, SUM(revenue) FROM events JOIN countries ON code = country GROUP BY region ORDER BY 1",
    "SELECT c.region, SUM(CASE WHEN c.pop > 80 THEN e.revenue END) FROM events e CROSS JOIN countries c \
     WHERE c.code = e.country GROUP BY c.region ORDER BY 1",
    "SELECT DISTINCT c.region FROM events e JOIN countries c ON c.code = e.country ORDER BY 1",
    "SELECT COUNT(*), SUM(e.revenue) FROM events e JOIN countries c ON c.code = e.country WHERE c.region LIKE 'N%'",
    "SELECT c.region, COUNT(*) AS n FROM events e JOIN main.countries c ON c.code = e.country \
     GROUP BY c.region HAVING COUNT(*) > 1 ORDER BY n DESC, c.region",
];

/// Declined: what would count the other table's rows once per core row, a
/// planed table whose unmatched rows would be the other side's, a view.
const DECLINED: &[&str] = &[
    "SELECT c.region, SUM(c.pop) FROM events e JOIN countries c ON c.code = e.country GROUP BY c.region",
    "SELECT c.region, TOTAL(c.pop) FROM events e JOIN countries c ON c.code = e.country GROUP BY c.region",
    "SELECT c.region, COUNT(*) FROM countries c LEFT JOIN events e ON c.code = e.country GROUP BY c.region",
    "SELECT c.region, COUNT(*) FROM events e JOIN v c ON c.code = e.country GROUP BY c.region",
    "SELECT c.region, SUM(e.revenue * c.pop) FROM events e JOIN countries c ON c.code = e.country GROUP BY 1",
    "SELECT c.region, COUNT(*) FROM events e JOIN countries c ON c.code = e.note GROUP BY c.region",
    "SELECT c.region, c.pop, COUNT(*) FROM events e JOIN countries c ON c.code = e.country GROUP BY c.region",
    "SELECT c.region, group_concat(c.code) FROM events e JOIN countries c ON c.code = e.country GROUP BY 1",
    // A bare name in HAVING may be the other table's column before the
    // alias (SQLite looks in the tables first), which the walk cannot see.
    "SELECT c.region, COUNT(*) AS n FROM events e JOIN countries c ON c.code = e.country \
     GROUP BY c.region HAVING n > 1",
];

#[test]
fn lookup_joins_are_served_and_match_sqlite_through_writes() {
    let mut p = Pair::new(
        &format!("{SETUP} CREATE VIEW v AS SELECT * FROM countries;"),
        ATTACH,
    );
    for round in 0..3 {
        for q in SERVED {
            p.served(q, &[]);
            let r = p.pl.last_route();
            assert!(
                r.kind == RouteKind::Residue && r.reason.contains("lookup join"),
                "{q}: {r:?}"
            );
        }
        for q in DECLINED {
            let k = p.check(q, &[]);
            assert_eq!(k, RouteKind::Engine, "{q}: {:?}", p.pl.last_route());
        }
        // Writes to either table between rounds.
        match round {
            0 => {
                p.exec("INSERT INTO events(country, device, revenue) VALUES ('JP', 'web', 9), ('US', 'web', 1)");
                p.exec("INSERT INTO countries VALUES ('DE', 'EU2', 1)");
            }
            _ => {
                p.exec("DELETE FROM events WHERE country = 'DE' AND device = 'ios'");
                p.exec("UPDATE countries SET region = 'X' WHERE code IS NULL OR code = 'FR'");
            }
        }
    }
}

#[test]
fn a_sum_that_the_join_could_multiply_past_i64_goes_to_sqlite() {
    let mut p = Pair::new(
        "CREATE TABLE t(k INTEGER, m INTEGER); CREATE TABLE l(k INTEGER, g TEXT);
         INSERT INTO t VALUES (1, 4611686018427387904), (2, 1);
         INSERT INTO l VALUES (1, 'a'), (1, 'b'), (2, 'a');",
        "PRAGMA pleroma_attach('t', 'k', 'm')",
    );
    // Alone the sums fit; joined, key 1 is added twice: the bound is
    // multiplied by l's row count, so SQLite answers (and its own
    // "integer overflow" error is the answer).
    let q = "SELECT SUM(t.m) FROM t JOIN l ON l.k = t.k";
    let k = p.check(q, &[]);
    assert_eq!(k, RouteKind::Engine, "{:?}", p.pl.last_route());
    p.served(
        "SELECT l.g, COUNT(*) FROM t JOIN l ON l.k = t.k GROUP BY l.g",
        &[],
    );
}
