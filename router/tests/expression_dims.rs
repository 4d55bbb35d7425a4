//! Expression dimensions (issue 22, item 1): `EXPR AS name` in
//! `pleroma_attach`'s dimension list. Their values are SQLite's for every
//! input (NULLs, text in an INTEGER column, REAL, far-away timestamps,
//! every affinity), whether a scan built the plane or the hook fed it row
//! by row; a query that groups by or filters on the same expression is
//! served; what a plane cannot follow is refused at attach.

mod common;
use common::*;

use pleroma::{Connection, RouteKind, Value};

const SETUP: &str =
    "CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c, n NUMERIC, m INTEGER)";

/// Expressions over every affinity, with the edges each one has.
const EXPRS: &[&str] = &[
    "date(a, 'unixepoch')",
    "strftime('%Y-%m', a, 'unixepoch')",
    "datetime(a, 'unixepoch', 'start of month')",
    "a / 86400",
    "a % 7",
    "substr(b, 1, 2)",
    "CASE WHEN a > '50' THEN 'big' WHEN a IS NULL THEN 'none' ELSE 'small' END",
    "CASE n WHEN '1' THEN 'one' WHEN 2 THEN 'two' ELSE 'other' END",
    "length(b)",
    "coalesce(c, -1)",
    "b || '-' || a",
    "typeof(c)",
    "a = b",
    "upper(b) = 'X'",
    "iif(n >= '3', 1, 0)",
];

/// A small deterministic generator (xorshift), so a failure repeats.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// An INSERT of one row of odd values into `t`.
    fn insert(&mut self) -> String {
        format!(
            "INSERT INTO t(a, b, c, n, m) VALUES ({}, {}, {}, {}, {})",
            self.value(),
            self.value(),
            self.value(),
            self.value(),
            self.below(100)
        )
    }

    /// A literal of any storage class, with the edges that matter.
    fn value(&mut self) -> String {
        match self.below(14) {
            0 => "NULL".into(),
            1 => format!("{}", self.below(100)),
            2 => format!("{}", 1_769_904_000 + self.below(200) as i64 * 43_200),
            3 => format!("-{}", self.below(3_000_000_000)),
            4 => "253402300799".into(),
            5 => "253402300800".into(),
            6 => format!("'{}'", self.below(100)),
            7 => format!("'{}.5'", self.below(10)),
            8 => ["'x'", "'X'", "'xy'", "'é'", "''", "' 5'"][self.below(6) as usize].into(),
            9 => format!("{}.0", self.below(10)),
            10 => "'2026-03-04 10:00'".into(),
            11 => "1".into(),
            12 => "2".into(),
            _ => format!("{}", self.below(6)),
        }
    }
}

fn planes_row(pl: &mut Connection) -> Vec<Value> {
    pl.query("PRAGMA pleroma_planes", &[])
        .unwrap()
        .rows
        .into_inner()
        .remove(0)
}

/// Random writes, each followed by the grouped and filtered queries, on a
/// plane whose one dimension is `expr` (fed by the hook) and on plain
/// SQLite; then a rebuild (fed by the scan) and the same queries.
fn follow(expr: &str, seed: u64) {
    let mut rng = Rng(seed);
    let mut p = Pair::new(SETUP, "");
    let init: Vec<String> = (0..20).map(|_| rng.insert()).collect();
    for s in &init {
        p.exec(s);
    }
    let attach = format!(
        "PRAGMA pleroma_attach('t', '{} AS e', 'm')",
        expr.replace('\'', "''")
    );
    let attached = p.pl.execute_batch(&attach);
    let queries = [
        format!("SELECT {expr}, COUNT(*), SUM(m) FROM t GROUP BY {expr}"),
        format!("SELECT {expr} AS e2, COUNT(*), MAX(m) FROM t GROUP BY e2 ORDER BY e2"),
        format!("SELECT COUNT(*), SUM(m) FROM t WHERE {expr} IS NULL"),
        format!("SELECT COUNT(*), SUM(m) FROM t WHERE {expr} > 1"),
        format!("SELECT COUNT(*), SUM(m) FROM t WHERE {expr} = '2026-02'"),
        format!("SELECT COUNT(*) FROM t WHERE {expr} IN ('x', 1, 'big', 'one')"),
    ];
    let check = |p: &mut Pair| {
        let in_service = attached.is_ok()
            && matches!(&planes_row(&mut p.pl)[7], Value::Text(s) if s == "in service");
        for q in &queries {
            let route = p.check(q, &[]);
            if in_service && q.contains("GROUP BY") {
                assert_ne!(route, RouteKind::Engine, "{q}: {:?}", p.pl.last_route());
            }
        }
    };
    check(&mut p);
    for _ in 0..40 {
        let s = match rng.below(4) {
            0 | 1 => rng.insert(),
            2 => format!(
                "UPDATE t SET {} = {} WHERE id % 5 = {}",
                ["a", "b", "c", "n"][rng.below(4) as usize],
                rng.value(),
                rng.below(5)
            ),
            _ => format!("DELETE FROM t WHERE id % 7 = {}", rng.below(7)),
        };
        p.exec(&s);
        check(&mut p);
    }
    if attached.is_ok() {
        p.pl.execute_batch("PRAGMA pleroma_rebuild('t')").unwrap();
        check(&mut p);
    }
}

#[test]
fn every_expression_follows_sqlite_through_writes_and_rebuilds() {
    for (i, e) in EXPRS.iter().enumerate() {
        for seed in [1u64, 2, 3] {
            follow(e, 0x9e37_79b9_7f4a_7c15 ^ (seed * 1_000 + i as u64));
        }
    }
}

#[test]
fn a_served_day_bucket_and_its_listing() {
    let mut p = Pair::new(
        "CREATE TABLE ev(id INTEGER PRIMARY KEY, country TEXT, ts INTEGER, cents INTEGER);
         INSERT INTO ev(country, ts, cents) VALUES ('DE', 1769904000, 10), ('FR', 1769990400, 20),
           ('DE', 1772323200, 30), (NULL, NULL, 5), ('US', '2026-03-04 10:00', 7);",
        "PRAGMA pleroma_attach('ev', 'country, date(ts, ''unixepoch'') AS day', 'cents')",
    );
    for q in [
        "SELECT date(ts, 'unixepoch') AS day, SUM(cents), COUNT(*) FROM ev GROUP BY day ORDER BY day",
        "SELECT DATE( \"TS\" ,'unixepoch'), SUM(cents) FROM ev GROUP BY 1 ORDER BY 1",
        "SELECT date(e.ts, 'unixepoch'), country, SUM(cents) FROM ev e GROUP BY 1, 2 ORDER BY 1, 2",
        "SELECT COUNT(*), SUM(cents) FROM ev WHERE date(ts, 'unixepoch') >= '2026-02-02'",
        "SELECT country, SUM(cents) FROM ev WHERE date(ts, 'unixepoch') BETWEEN '2026-02-01' AND '2026-02-28' GROUP BY country ORDER BY country",
    ] {
        p.served(q, &[]);
    }
    p.exec("INSERT INTO ev(country, ts, cents) VALUES ('DE', 1769904001, 100)");
    p.exec("UPDATE ev SET ts = ts + 86400 WHERE country = 'FR'");
    p.served(
        "SELECT date(ts, 'unixepoch') AS day, SUM(cents), COUNT(*) FROM ev GROUP BY day ORDER BY day",
        &[],
    );
    // Another expression over the same column is not the dimension.
    let k = p.check(
        "SELECT date(ts, 'unixepoch', 'start of month'), SUM(cents) FROM ev GROUP BY 1",
        &[],
    );
    assert_eq!(k, RouteKind::Engine);
    // The alias is no column: a query that names it fails as in SQLite.
    p.check("SELECT day, SUM(cents) FROM ev GROUP BY day", &[]);
    let row = planes_row(&mut p.pl);
    assert_eq!(
        row[1],
        Value::Text(
            "country(4 values, 2 bits), date(ts, 'unixepoch') AS day(5 values, 3 bits)".into()
        )
    );
}

#[test]
fn a_row_that_names_the_clock_takes_the_plane_out_of_service() {
    let mut p = Pair::new(
        "CREATE TABLE ev(ts, cents INTEGER); INSERT INTO ev VALUES (1769904000, 1);",
        "PRAGMA pleroma_attach('ev', 'date(ts) AS day', 'cents')",
    );
    p.served("SELECT date(ts), SUM(cents) FROM ev GROUP BY 1", &[]);
    p.exec("INSERT INTO ev VALUES ('now', 2)");
    let k = p.check("SELECT date(ts), SUM(cents) FROM ev GROUP BY 1", &[]);
    assert_eq!(k, RouteKind::Engine);
    let row = planes_row(&mut p.pl);
    assert_eq!(row[7], Value::Text("out of service".into()));
    // 'subsec' as a time value is the clock too.
    p.exec("DELETE FROM ev WHERE ts = 'now'");
    p.pl.execute_batch("PRAGMA pleroma_rebuild('ev')").unwrap();
    p.served("SELECT date(ts), SUM(cents) FROM ev GROUP BY 1", &[]);
    // A BLOB that spells 'now' is read as text (found from outside).
    p.exec("INSERT INTO ev VALUES (x'6e6f77', 3)");
    let k = p.check("SELECT date(ts), SUM(cents) FROM ev GROUP BY 1", &[]);
    assert_eq!(k, RouteKind::Engine);
    p.exec("DELETE FROM ev WHERE typeof(ts) = 'blob'");
    p.pl.execute_batch("PRAGMA pleroma_rebuild('ev')").unwrap();
    p.served("SELECT date(ts), SUM(cents) FROM ev GROUP BY 1", &[]);
    p.exec("INSERT INTO ev VALUES ('SubSecond', 4)");
    let k = p.check("SELECT COUNT(*) FROM ev WHERE date(ts) IS NULL", &[]);
    assert_eq!(k, RouteKind::Engine);
    // A scan sees it too.
    let mut q = Pair::new(
        "CREATE TABLE ev(ts, cents INTEGER); INSERT INTO ev VALUES ('NOW', 1);",
        "SELECT 1",
    );
    let e =
        q.pl.execute_batch("PRAGMA pleroma_attach('ev', 'date(ts) AS day', 'cents')")
            .unwrap_err();
    assert!(e.to_string().contains("clock"), "{e}");
}

#[test]
fn attach_refuses_what_a_plane_cannot_follow() {
    let mut pl = Connection::open_in_memory().unwrap();
    pl.execute_batch(
        "CREATE TABLE t(a INTEGER, b TEXT COLLATE NOCASE, day TEXT, m INTEGER);
         CREATE TABLE u(x);",
    )
    .unwrap();
    for (dims, why) in [
        ("random() AS r", "deterministic"),
        ("a + random() AS r", "deterministic"),
        ("date(''now'') AS d", "clock"),
        ("date(a, ''unixepoch'', ''localtime'') AS d", "clock"),
        ("(SELECT max(x) FROM u) AS s", "deterministic"),
        ("zz + 1 AS s", "deterministic"),
        ("b COLLATE BINARY AS s", "COLLATE"),
        ("a AS s", "bare column"),
        ("CAST(a AS TEXT) AS s", "CAST"),
        ("+a AS s", "CAST"),
        ("a + ? AS s", "parameter"),
        ("a / 7 AS day", "named like a column"),
        ("a / 7 AS rowid", "named like a column"),
        ("a / 7 AS s, a % 7 AS S", "twice"),
        ("pleromasumexact(a) AS s", "deterministic"),
        ("a / 7 AS", "no such column"),
        // What an index accepts and only a row would reveal: the clock
        // with no time value, or a time value or modifier computed as
        // text that may spell 'now', 'utc' or 'localtime' (found from
        // outside).
        ("unixepoch() AS e", "clock"),
        ("date() AS e", "clock"),
        ("julianday() > 0 AS e", "clock"),
        ("strftime(''%Y'') AS e", "clock"),
        ("datetime(''subsec'') AS e", "clock"),
        ("datetime(char(110, 111, 119)) AS e", "spell"),
        ("datetime(printf(''%s%s'', ''no'', ''w'')) AS e", "spell"),
        ("datetime(a || b) AS e", "spell"),
        (
            "datetime(0, ''unixepoch'', char(117, 116, 99)) AS e",
            "modifier",
        ),
        ("strftime(b, a) AS e", "format"),
        ("current_timestamp AS e", "clock"),
        ("coalesce(current_date, a) AS e", "clock"),
        // LIKE follows the connection's case_sensitive_like.
        ("b LIKE ''F%'' AS e", "case_sensitive_like"),
    ] {
        let e = pl
            .execute_batch(&format!("PRAGMA pleroma_attach('t', '{dims}', 'm')"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{dims}: {e}");
    }
    // Nothing was attached.
    assert!(pl
        .query("PRAGMA pleroma_planes", &[])
        .unwrap()
        .rows
        .into_inner()
        .is_empty());
    // A column with a built-in collation is an input like any other.
    pl.execute_batch("PRAGMA pleroma_attach('t', 'upper(b) AS ub, a', 'm')")
        .unwrap();
}

#[test]
fn a_persisted_expression_plane_reopens_and_follows_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    let sq_path = dir.path().join("s.db");
    let setup = "CREATE TABLE ev(id INTEGER PRIMARY KEY, ts INTEGER, cents INTEGER);
                 INSERT INTO ev(ts, cents) VALUES (1769904000, 1), (1772323200, 2), (NULL, 4);";
    let sq = rusqlite::Connection::open(&sq_path).unwrap();
    sq.execute_batch(setup).unwrap();
    {
        let mut pl = Connection::open(&path).unwrap();
        pl.execute_batch(setup).unwrap();
        pl.execute_batch(
            "PRAGMA pleroma_attach('ev', 'strftime(''%Y-%m'', ts, ''unixepoch'') AS month', 'cents')",
        )
        .unwrap();
        pl.execute_batch("INSERT INTO ev(ts, cents) VALUES (1772323201, 8)")
            .unwrap();
    }
    sq.execute_batch("INSERT INTO ev(ts, cents) VALUES (1772323201, 8)")
        .unwrap();
    let q = "SELECT strftime('%Y-%m', ts, 'unixepoch'), SUM(cents) FROM ev GROUP BY 1 ORDER BY 1";
    let mut a = Connection::open(&path).unwrap();
    let mut b = Connection::open(&path).unwrap();
    let rows = |c: &mut Connection| c.query(q, &[]).unwrap().rows.into_inner();
    assert_eq!(rows(&mut a), sqlite_rows(&sq, q, &[]).unwrap());
    assert_eq!(a.last_route().kind, RouteKind::Plane);
    // Opened from the persisted state: no rebuild.
    assert_eq!(planes_row(&mut a)[11], Value::Integer(0));
    // Another connection's write is followed.
    b.execute_batch(
        "INSERT INTO ev(ts, cents) VALUES (1, 16); UPDATE ev SET ts = ts + 2678400 WHERE cents = 1",
    )
    .unwrap();
    sq.execute_batch(
        "INSERT INTO ev(ts, cents) VALUES (1, 16); UPDATE ev SET ts = ts + 2678400 WHERE cents = 1",
    )
    .unwrap();
    assert_eq!(rows(&mut a), sqlite_rows(&sq, q, &[]).unwrap());
    assert_eq!(a.last_route().kind, RouteKind::Plane);
}

#[test]
fn a_quoted_name_reads_back_on_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let q = "SELECT upper(country), COUNT(*) FROM ev GROUP BY 1 ORDER BY 1";
    {
        let mut pl = Connection::open(&path).unwrap();
        pl.execute_batch(
            "CREATE TABLE ev(country TEXT, n INTEGER); INSERT INTO ev VALUES ('de', 1), ('fr', 2);
             PRAGMA pleroma_attach('ev', 'upper(country) AS \"my \"\"col\"', 'n')",
        )
        .unwrap();
    }
    let mut pl = Connection::open(&path).unwrap();
    let row = planes_row(&mut pl);
    assert_eq!(row[7], Value::Text("in service".into()), "{row:?}");
    assert_eq!(
        row[1],
        Value::Text("upper(country) AS \"my \"\"col\"(2 values, 1 bits)".into())
    );
    pl.query(q, &[]).unwrap();
    assert_eq!(pl.last_route().kind, RouteKind::Plane);
}

#[test]
fn a_range_on_the_raw_timestamp_that_falls_on_bucket_edges_is_served() {
    // A STRICT table: its INTEGER column holds only INTEGER or NULL.
    let mut p = Pair::new(
        "CREATE TABLE ev(id INTEGER PRIMARY KEY, country TEXT, ts INTEGER, cents INTEGER) STRICT;
         INSERT INTO ev(country, ts, cents) VALUES ('DE', 1769904000, 10), ('FR', 1769990399, 20),
           ('DE', 1772323199, 30), (NULL, NULL, 5), ('US', 1772323199, 7),
           ('US', 1772323199, 3), ('FR', 1769903999, 100), ('DE', 1772323200, 1000),
           ('DE', 0, 2), ('FR', -86400, 4), ('FR', 253402300800, 8);",
        "PRAGMA pleroma_attach('ev', 'country, date(ts, ''unixepoch'') AS day, \
         strftime(''%Y-%m'', ts, ''unixepoch'') AS month', 'cents')",
    );
    // February 2026, by day and by month edges; with other conjuncts; a
    // parameter pair; the bounds written either way round.
    for (q, params) in [
        ("SELECT date(ts, 'unixepoch'), SUM(cents) FROM ev WHERE ts >= 1769904000 AND ts < 1772323200 GROUP BY 1 ORDER BY 1", vec![]),
        ("SELECT country, COUNT(*) FROM ev WHERE country IS NOT NULL AND ts < 1772323200 AND 1769904000 <= ts GROUP BY 1 ORDER BY 1", vec![]),
        ("SELECT SUM(cents) FROM ev WHERE ts >= ? AND ts < ?", vec![int(1769904000), int(1769990400)]),
        ("SELECT SUM(cents) FROM ev WHERE ts >= -86400 AND ts < 0", vec![]),
        ("SELECT SUM(cents) FROM ev WHERE ts >= 1772323200 AND ts < 1769904000", vec![]),
    ] {
        p.served(q, &params);
    }
    // Not on an edge, not half-open, not a conjunct, not an integer: SQLite.
    for (q, params) in [
        ("SELECT SUM(cents) FROM ev WHERE ts >= 1769904001 AND ts < 1772323200", vec![]),
        ("SELECT SUM(cents) FROM ev WHERE ts > 1769903999 AND ts < 1772323200", vec![]),
        ("SELECT SUM(cents) FROM ev WHERE ts >= 1769904000 AND ts <= 1772323199", vec![]),
        ("SELECT SUM(cents) FROM ev WHERE NOT (ts >= 1769904000 AND ts < 1772323200)", vec![]),
        ("SELECT SUM(cents) FROM ev WHERE ts >= 1769904000 AND ts < 1772323200 OR country = 'US'", vec![]),
        ("SELECT SUM(cents) FROM ev WHERE ts >= ? AND ts < ?", vec![int(1769904000), text("1772323200")]),
        ("SELECT SUM(cents) FROM ev WHERE ts >= 1769904000.0 AND ts < 1772323200", vec![]),
        ("SELECT SUM(cents) FROM ev WHERE ts >= 253402300800 AND ts < 253402387200", vec![]),
    ] {
        assert_eq!(p.check(q, &params), RouteKind::Engine, "{q}");
    }
    p.exec(
        "INSERT INTO ev(country, ts, cents) VALUES ('DE', 1769904000, 50), ('FR', 1772323199.0, 9)",
    );
    p.served(
        "SELECT strftime('%Y-%m', ts, 'unixepoch'), SUM(cents) FROM ev WHERE ts >= 1769904000 AND ts < 1772323200 GROUP BY 1",
        &[],
    );
}

/// Found from outside: outside a STRICT table an INTEGER column may hold a
/// REAL that SQLite's date functions round to the millisecond, across a
/// bucket edge (1769903999.9999 is 2026-02-01 but below its first second),
/// or a BLOB that has a date but sorts after every number. There the range
/// goes to SQLite.
#[test]
fn a_range_outside_a_strict_table_goes_to_sqlite() {
    let mut p = Pair::new(
        "CREATE TABLE ev(ts INTEGER, cents INTEGER);
         INSERT INTO ev VALUES (1769903999.9999, 1), (1772323199.9999, 2), (CAST('1770000000' AS BLOB), 4),
           (1769904000, 8);",
        "PRAGMA pleroma_attach('ev', 'date(ts, ''unixepoch'') AS day', 'cents')",
    );
    let q = "SELECT date(ts, 'unixepoch'), SUM(cents) FROM ev WHERE ts >= 1769904000 AND ts < 1772323200 GROUP BY 1";
    assert_eq!(p.check(q, &[]), RouteKind::Engine);
    p.served(
        "SELECT date(ts, 'unixepoch'), SUM(cents) FROM ev GROUP BY 1",
        &[],
    );
}
