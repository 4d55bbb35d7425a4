//! `PRAGMA pleroma_advise`: each proposal, attached, serves the statements
//! it claims, with SQLite's answers.

mod common;
use common::*;
use pleroma::{Connection, RouteKind, Value};

const SETUP: &str =
    "CREATE TABLE events(id INTEGER PRIMARY KEY, country TEXT, plan TEXT, ts INTEGER, \
     cents INTEGER, price REAL, note TEXT);
     WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 2999)
     INSERT INTO events(country, plan, ts, cents, price, note)
     SELECT char(65 + i % 20), CASE i % 3 WHEN 0 THEN 'free' WHEN 1 THEN 'pro' ELSE NULL END,
            1767225600 + i * 3600, i % 1000 - 100, i * 0.5, 'n' || i FROM s;
     CREATE TABLE countries(code TEXT PRIMARY KEY, region TEXT);
     WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 19)
     INSERT INTO countries SELECT char(65 + i), CASE WHEN i < 10 THEN 'eu' ELSE 'us' END FROM s;";

/// A dashboard, as its author runs it once.
const DASHBOARD: &[&str] = &[
    "SELECT country, SUM(cents) FROM events GROUP BY country ORDER BY 2 DESC, 1 LIMIT 3",
    "SELECT date(ts, 'unixepoch') AS day, COUNT(*) FROM events GROUP BY day ORDER BY day",
    "SELECT plan, AVG(cents), MAX(cents) FROM events WHERE country = 'B' GROUP BY plan",
    "SELECT c.region, SUM(e.cents) FROM events e JOIN countries c ON c.code = e.country GROUP BY c.region",
    "SELECT country, SUM(CASE WHEN plan = 'pro' THEN cents ELSE 0 END) FROM events GROUP BY country",
    // Nothing small serves these.
    "SELECT SUM(price) FROM events",
    "SELECT note FROM events WHERE id = 5",
    "SELECT COUNT(DISTINCT id) FROM events",
];

fn text_of(v: &Value) -> &str {
    match v {
        Value::Text(s) => s,
        other => panic!("{other:?}"),
    }
}

fn int_of(v: &Value) -> i64 {
    match v {
        Value::Integer(i) => *i,
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_proposal_serves_what_it_claims() {
    let mut c = Connection::open_in_memory().unwrap();
    c.execute_batch(SETUP).unwrap();
    for q in DASHBOARD {
        c.query(q, &[]).unwrap();
    }
    let advice = c.query("PRAGMA pleroma_advise", &[]).unwrap();
    assert_eq!(
        advice.columns.to_vec(),
        [
            "table",
            "statement",
            "serves",
            "declined",
            "cells",
            "bytes",
            "unused",
            "which"
        ]
    );
    assert!(!advice.rows.is_empty(), "no proposal");
    let best = &advice.rows[0];
    assert_eq!(text_of(&best[0]), "events");
    assert_eq!(int_of(&best[3]), DASHBOARD.len() as i64);
    assert_eq!(int_of(&best[2]), 5, "{advice:?}");
    assert!(
        text_of(&best[1]).contains("date(ts, ''unixepoch'') AS"),
        "the time bucket as an expression dimension: {advice:?}"
    );
    assert!(text_of(&best[6]).contains("price"), "{advice:?}");
    let mut serves_before = i64::MAX;
    for row in advice.rows.iter() {
        let serves = int_of(&row[2]);
        assert!(serves <= serves_before, "best first: {advice:?}");
        serves_before = serves;
        assert!(int_of(&row[4]) > 0 && int_of(&row[5]) > 0);
        // Attached on a fresh copy, it serves each statement it names.
        let mut p = Pair::new(SETUP, text_of(&row[1]));
        let which: Vec<String> = serde_json::from_str(text_of(&row[7])).unwrap();
        assert_eq!(which.len() as i64, serves);
        for q in &which {
            p.served(q, &[]);
        }
        // And keeps doing so after writes.
        p.exec("INSERT INTO events(country, plan, ts, cents) VALUES ('Z', 'pro', 1767225600, 7)");
        p.exec("DELETE FROM events WHERE id % 7 = 0");
        for q in &which {
            p.served(q, &[]);
        }
    }
}

#[test]
fn advice_for_one_table_and_after_attaching() {
    let mut c = Connection::open_in_memory().unwrap();
    c.execute_batch(SETUP).unwrap();
    for q in DASHBOARD {
        c.query(q, &[]).unwrap();
    }
    assert!(c
        .query("PRAGMA pleroma_advise('countries')", &[])
        .unwrap()
        .rows
        .is_empty());
    let e = c
        .query("PRAGMA pleroma_advise('nope')", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("no such table: nope"), "{e}");
    let advice = c.query("PRAGMA pleroma_advise('EVENTS')", &[]).unwrap();
    let stmt = text_of(&advice.rows[0][1]).to_owned();
    c.execute_batch(&stmt).unwrap();
    for q in DASHBOARD.iter().take(5) {
        c.query(q, &[]).unwrap();
        assert_ne!(c.last_route().kind, RouteKind::Engine, "{q}");
    }
    // What the plane serves now is no reason for another; the rest is
    // proposed as a named plane, since the table has its own.
    let again = c.query("PRAGMA pleroma_advise", &[]).unwrap();
    for row in again.rows.iter() {
        assert!(text_of(&row[1]).ends_with("'advised')"), "{again:?}");
        assert!(!text_of(&row[7]).contains("date(ts"), "{again:?}");
    }
}

/// Found from outside: proposals whose attach failed, or that named
/// statements the router then left to SQLite.
#[test]
fn what_the_outside_attack_found_is_advised_right() {
    let setup = "CREATE TABLE e(k INTEGER, cents INTEGER, g TEXT, \"a,b\" INTEGER, big INTEGER);
         INSERT INTO e VALUES (1, 5, 'x', 1, 5000000000000000000), (2, 'abc', 'y', 2, -5000000000000000000),
                              ('zz', 7, 'x', 3, -4000000000000000000), (4, 8, 'y', 1, 1),
                              (5, 1, 'z', 2, -9223372036854775808), (6, 1, 'z', 2, 9223372036854775807);
         CREATE TABLE advised(a TEXT, m INTEGER); INSERT INTO advised VALUES ('p', 1), ('q', 2);";
    let own = "PRAGMA pleroma_attach('advised', 'a', '')";
    let dashboard = [
        // TEXT in INTEGER columns (`k`, `cents`): no dimension of them.
        "SELECT k, MAX(cents) FROM e GROUP BY k",
        // A column whose name holds a comma; a sum that may pass 64 bits.
        "SELECT \"a,b\", COUNT(*) FROM e GROUP BY \"a,b\"",
        "SELECT g, SUM(big) FROM e GROUP BY g",
        // A qualified GROUP BY column.
        "SELECT x.g, COUNT(*) FROM e x GROUP BY x.g",
        // The table `advised` has its own plane: another name.
        "SELECT a, SUM(m) FROM advised GROUP BY a",
    ];
    let mut c = Connection::open_in_memory().unwrap();
    c.execute_batch(setup).unwrap();
    c.execute_batch(own).unwrap();
    for q in dashboard {
        c.query(q, &[]).unwrap();
    }
    let advice = c.query("PRAGMA pleroma_advise", &[]).unwrap();
    assert!(!advice.rows.is_empty());
    let mut all_unused = String::new();
    for row in advice.rows.iter() {
        let mut p = Pair::new(setup, own);
        p.pl.execute_batch(text_of(&row[1])).unwrap();
        let which: Vec<String> = serde_json::from_str(text_of(&row[7])).unwrap();
        for q in &which {
            p.served(q, &[]);
        }
        all_unused.push_str(text_of(&row[6]));
    }
    for why in [
        "k: holds TEXT",
        "a,b: its name holds a comma",
        "big: its values add past 64 bits",
    ] {
        assert!(all_unused.contains(why), "{why}: {advice:?}");
    }
    let named: Vec<&str> = advice.rows.iter().map(|r| text_of(&r[1])).collect();
    assert!(
        named
            .iter()
            .any(|s| s.starts_with("PRAGMA pleroma_attach('advised', 'a', 'm', 'advised_2')")),
        "{named:?}"
    );
    assert!(
        named
            .iter()
            .any(|s| s.starts_with("PRAGMA pleroma_attach('e', 'g'")),
        "the qualified column is a dimension: {named:?}"
    );
}
