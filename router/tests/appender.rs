//! `Connection::appender` (issue 21, item 5): rows stored exactly as plain
//! INSERTs with the same parameters store them, the planes fed from the
//! values with SQLite's affinity, errors SQLite's own with nothing of the
//! batch left, and the persisted state right for the next process.

mod common;
use common::*;

use pleroma::{Connection, Value};

const GROUPED: &str =
    "SELECT d1, d2, d3, COUNT(*), SUM(m), MIN(m), MAX(m) FROM t GROUP BY d1, d2, d3";
const TOTAL: &str = "SELECT COUNT(*), SUM(m), COUNT(m) FROM t";

struct Files {
    _dir: tempfile::TempDir,
    pl_path: std::path::PathBuf,
    pl: Connection,
    sq: rusqlite::Connection,
}

/// A Pleroma file (persisted planes, the default) and a plain one, both
/// with `setup`; the Pleroma one with a plane on `t(d1, d2, d3; m)`.
fn files(setup: &str) -> Files {
    let dir = tempfile::tempdir().unwrap();
    let pl_path = dir.path().join("pl.db");
    let mut pl = Connection::open(&pl_path).unwrap();
    let sq = rusqlite::Connection::open(dir.path().join("sq.db")).unwrap();
    pl.execute_batch(setup).unwrap();
    sq.execute_batch(setup).unwrap();
    pl.execute_batch("PRAGMA pleroma_attach('t', 'd1, d2, d3', 'm')")
        .unwrap();
    Files {
        _dir: dir,
        pl_path,
        pl,
        sq,
    }
}

impl Files {
    /// The same rows into the plain file, as INSERTs in one transaction;
    /// all or nothing, like the appender.
    fn plain_append(&mut self, cols: &[&str], rows: &[Vec<Value>]) -> Result<(), String> {
        let sql = format!(
            "INSERT INTO t({}) VALUES ({})",
            cols.join(", "),
            (1..=cols.len())
                .map(|i| format!("?{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let tx = self.sq.transaction().unwrap();
        for r in rows {
            if let Err(e) = tx.execute(&sql, rusqlite::params_from_iter(r.iter())) {
                return Err(e.to_string());
            }
        }
        tx.commit().map_err(|e| e.to_string())
    }

    fn append(&mut self, cols: &[&str], rows: &[Vec<Value>]) -> Result<u64, String> {
        let mut a = self.pl.appender_for("t", cols).unwrap();
        for r in rows {
            a.append_row(r).map_err(|e| e.to_string())?;
        }
        a.flush().map_err(|e| e.to_string())
    }

    /// Both sides get the rows; both must agree on success or the error.
    fn both(&mut self, cols: &[&str], rows: &[Vec<Value>]) -> bool {
        let a = self.append(cols, rows);
        let b = self.plain_append(cols, rows);
        match (&a, &b) {
            (Ok(n), Ok(())) => assert_eq!(*n as usize, rows.len()),
            (Err(x), Err(y)) => assert_eq!(x, y),
            _ => panic!("appender {a:?} vs plain inserts {b:?}"),
        }
        a.is_ok()
    }

    /// The stored tables, rowid for rowid, and the plane's answers.
    fn same(&mut self) {
        let all = "SELECT rowid, * FROM t ORDER BY rowid";
        let a = sqlite_rows(self.pl.sqlite(), all, &[]).unwrap();
        let b = sqlite_rows(&self.sq, all, &[]).unwrap();
        assert_eq!(a, b, "stored rows");
        for q in [GROUPED, TOTAL] {
            let mut x = self.pl.query(q, &[]).unwrap().rows.into_inner();
            assert_ne!(
                self.pl.last_route().kind,
                pleroma::RouteKind::Engine,
                "{q}: {:?}",
                self.pl.last_route()
            );
            let mut y = sqlite_rows(&self.sq, q, &[]).unwrap();
            x.sort_by_key(|r| format!("{r:?}"));
            y.sort_by_key(|r| format!("{r:?}"));
            assert_eq!(x, y, "{q}");
        }
    }

    /// Open the Pleroma file again (the persisted state) and compare.
    fn reopen(&mut self) {
        self.pl = Connection::open(&self.pl_path).unwrap();
        self.same();
    }
}

/// A small LCG: repeatable values without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[(self.next() as usize) % xs.len()].clone()
    }
}

fn t(s: &str) -> Value {
    Value::Text(s.into())
}

/// Values whose stored form depends on the column's affinity (`reals`:
/// also REALs, which a dimension holds only as INTEGER or TEXT).
fn mixed(rng: &mut Rng, reals: &[f64]) -> Value {
    if !reals.is_empty() && rng.next().is_multiple_of(8) {
        return Value::Real(rng.pick(reals));
    }
    rng.pick(&[
        Value::Null,
        int(1),
        int(-3),
        int(i64::MAX),
        t("1"),
        t("-3"),
        t(" 7"),
        t("007"),
        t("1e1"),
        t("+5"),
        t("-0"),
        t("x"),
        t("0x10"),
    ])
}

fn measure(rng: &mut Rng) -> Value {
    rng.pick(&[
        Value::Null,
        int(0),
        int(17),
        int(-40),
        int(1 << 40),
        t("12"),
        t(" 8 "),
        Value::Real(4.0),
    ])
}

const SETUP: &str =
    "CREATE TABLE t(id INTEGER PRIMARY KEY, d1 INTEGER, d2 TEXT, d3, m INTEGER, note TEXT);
     INSERT INTO t(d1, d2, d3, m) VALUES (1, 'a', 1, 5), (2, 'b', '1', 6);";

#[test]
fn appended_rows_are_stored_and_planed_as_inserts_would_be() {
    let mut f = files(SETUP);
    let mut rng = Rng(7);
    let cols = ["id", "d1", "d2", "d3", "m", "note"];
    for batch in 0..4 {
        // The fourth batch crosses a chunk (2,048 rows).
        let n = if batch == 3 { 3000 } else { 40 };
        let rows: Vec<Vec<Value>> = (0..n)
            .map(|i| {
                vec![
                    Value::Null,
                    mixed(&mut rng, &[3.0, -1.0]),
                    mixed(&mut rng, &[2.5, 3.0, 1e300]),
                    mixed(&mut rng, &[]),
                    measure(&mut rng),
                    t(&format!("n{i}")),
                ]
            })
            .collect();
        assert!(f.both(&cols, &rows));
        f.same();
    }
    f.reopen();
    // A subset of the columns: the others take their defaults.
    assert!(f.both(
        &["d1", "m"],
        &[vec![t("4"), int(9)], vec![int(4), Value::Null]]
    ));
    f.same();
    f.reopen();
}

#[test]
fn a_failed_batch_leaves_nothing_and_the_error_is_sqlites() {
    let mut f = files(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d1 INTEGER, d2 TEXT, d3, m INTEGER, u INTEGER UNIQUE, \
         CHECK (m IS NULL OR m < 1000));
         INSERT INTO t(d1, d2, d3, m, u) VALUES (1, 'a', 1, 5, -1);",
    );
    let cols = ["d1", "d2", "d3", "m", "u"];
    let good = |i: i64| vec![int(i % 3), t("x"), int(i % 2), int(i % 50), int(i)];
    // A duplicate key in the second chunk, a CHECK failure, a NOT NULL-free
    // datatype error does not exist here: all three end the batch.
    let mut dup: Vec<Vec<Value>> = (0..2500).map(good).collect();
    dup.push(good(7));
    assert!(!f.both(&cols, &dup));
    f.same();
    let check: Vec<Vec<Value>> = vec![good(1), vec![int(1), t("y"), int(0), int(5000), int(9999)]];
    assert!(!f.both(&cols, &check));
    f.same();
    // After a failure the appender goes on with a new batch.
    let ok: Vec<Vec<Value>> = (10_000..10_100).map(good).collect();
    assert!(f.both(&cols, &ok));
    f.same();
    f.reopen();
    // A row of the wrong length is refused before SQLite sees it.
    let mut a = f.pl.appender("t").unwrap();
    let e = a.append_row(&[int(1)]).unwrap_err();
    assert!(e.to_string().contains("1 values for 6 columns"), "{e}");
    drop(a);
    assert!(f.pl.appender("nope").is_err());
    assert!(f.pl.appender_for("t", &["zz"]).is_err());
}

#[test]
fn strict_tables_and_conflict_clauses_in_the_schema() {
    // STRICT: '12' is coerced, 'x' is an error; REPLACE in the schema
    // deletes the rows a new one conflicts with (the hook still sees those).
    let mut f = files(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d1 INTEGER, d2 TEXT, d3 ANY, m INTEGER, \
         u INTEGER UNIQUE ON CONFLICT REPLACE) STRICT;
         INSERT INTO t(d1, d2, d3, m, u) VALUES (1, 'a', 1, 5, 1), (2, 'b', '1', 6, 2);",
    );
    let cols = ["d1", "d2", "d3", "m", "u"];
    let rows = vec![
        vec![t("12"), t("a"), t("1"), t("7"), int(1)],
        vec![int(3), int(4), int(1), int(8), int(2)],
        vec![int(3), t("c"), Value::Null, Value::Real(9.0), int(3)],
    ];
    assert!(f.both(&cols, &rows));
    f.same();
    let bad = vec![
        vec![int(1), t("a"), int(1), int(1), int(5)],
        vec![t("x"), t("a"), int(1), int(1), int(6)],
    ];
    assert!(!f.both(&cols, &bad));
    f.same();
    f.reopen();
}

#[test]
fn a_conflict_that_rolls_back_the_transaction_puts_the_planes_back() {
    let mut f = files(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d1 INTEGER, d2 TEXT, d3, m INTEGER, \
         u INTEGER UNIQUE ON CONFLICT ROLLBACK);
         INSERT INTO t(d1, d2, d3, m, u) VALUES (1, 'a', 1, 5, 1);",
    );
    let cols = ["d1", "d2", "d3", "m", "u"];
    let rows = vec![
        vec![int(2), t("b"), int(2), int(6), int(2)],
        vec![int(3), t("c"), int(3), int(7), int(1)],
    ];
    assert!(!f.both(&cols, &rows));
    f.same();
    assert!(f.both(&cols, &rows[..1]));
    f.same();
    f.reopen();
}

#[test]
fn triggers_and_an_open_transaction() {
    let mut f = files(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d1 INTEGER, d2 TEXT, d3, m INTEGER, u INTEGER UNIQUE);
         CREATE TABLE log(x);
         CREATE TRIGGER tr AFTER INSERT ON t WHEN new.m > 10 BEGIN
           UPDATE t SET m = m - 10 WHERE id = new.id; INSERT INTO log VALUES (new.id);
         END;",
    );
    let cols = ["d1", "d2", "d3", "m", "u"];
    let rows: Vec<Vec<Value>> = (0..50)
        .map(|i| vec![int(i % 4), t("z"), t("1"), int(i), int(i)])
        .collect();
    assert!(f.both(&cols, &rows));
    f.same();
    f.sq.execute_batch("DROP TRIGGER tr").unwrap();
    f.pl.execute_batch("DROP TRIGGER tr").unwrap();
    // Inside the user's transaction: a savepoint of it. A failed batch
    // takes back only its own rows.
    for db in [0, 1] {
        let first = "INSERT INTO t(d1, d2, d3, m, u) VALUES (9, 'q', 9, 9, 1000)";
        if db == 0 {
            f.pl.execute_batch("BEGIN").unwrap();
            f.pl.execute(first, &[]).unwrap();
        } else {
            f.sq.execute_batch("BEGIN").unwrap();
            f.sq.execute(first, []).unwrap();
        }
    }
    let good: Vec<Vec<Value>> = (100..110)
        .map(|i| vec![int(1), t("s"), int(1), int(i), int(i)])
        .collect();
    let mut bad = good.clone();
    bad.push(vec![int(1), t("s"), int(1), int(1), int(1000)]);
    let a = f.append(&cols, &bad);
    assert!(a.is_err(), "{a:?}");
    assert_eq!(f.append(&cols, &good), Ok(10));
    f.pl.execute_batch("COMMIT").unwrap();
    let sql = "INSERT INTO t(d1, d2, d3, m, u) VALUES (?1, ?2, ?3, ?4, ?5)";
    for r in &good {
        f.sq.execute(sql, rusqlite::params_from_iter(r.iter()))
            .unwrap();
    }
    f.sq.execute_batch("COMMIT").unwrap();
    f.same();
    f.reopen();
}

#[test]
fn rows_sqlite_does_not_store_are_not_planed() {
    // An IGNORE conflict clause and a trigger's RAISE(IGNORE): the INSERT
    // succeeds and stores nothing.
    let mut f = files(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d1 INTEGER, d2 TEXT, d3, m INTEGER, \
         u INTEGER UNIQUE ON CONFLICT IGNORE);
         CREATE TRIGGER skip BEFORE INSERT ON t WHEN new.d2 = 'skip' BEGIN SELECT RAISE(IGNORE); END;
         INSERT INTO t(d1, d2, d3, m, u) VALUES (1, 'a', 1, 5, 1);",
    );
    let cols = ["d1", "d2", "d3", "m", "u"];
    let rows: Vec<Vec<Value>> = (0..60)
        .map(|i| {
            let d2 = if i % 7 == 0 { "skip" } else { "k" };
            vec![int(i % 3), t(d2), int(1), int(i), int(i % 20)]
        })
        .collect();
    assert!(f.both(&cols, &rows));
    f.same();
    f.reopen();
}

/// Found from outside: a NULL into a `NOT NULL ON CONFLICT REPLACE` column
/// with a DEFAULT is stored as the default; the plane must hold the default
/// too (dimension and measure).
#[test]
fn a_null_that_sqlite_replaces_by_the_default_is_planed_as_the_default() {
    let mut f = files(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, d1 INTEGER NOT NULL ON CONFLICT REPLACE DEFAULT 7, \
         d2 TEXT NOT NULL ON CONFLICT REPLACE DEFAULT 'dflt', d3, \
         m INTEGER NOT NULL ON CONFLICT REPLACE DEFAULT 42);",
    );
    let cols = ["d1", "d2", "d3", "m"];
    let rows = vec![
        vec![Value::Null, t("a"), int(1), int(1)],
        vec![int(2), Value::Null, int(1), Value::Null],
        vec![int(2), t("b"), Value::Null, int(3)],
    ];
    assert!(f.both(&cols, &rows));
    f.same();
    f.reopen();
}

/// In memory (no persisted planes) and with persistence turned off.
#[test]
fn without_persisted_planes() {
    for setup in ["", "PRAGMA pleroma_persist = off;"] {
        let mut p = Pair::new(
            &format!(
                "{setup} CREATE TABLE t(id INTEGER PRIMARY KEY, d1 INTEGER, d2 TEXT, m INTEGER);"
            ),
            "PRAGMA pleroma_attach('t', 'd1, d2', 'm')",
        );
        let rows: Vec<Vec<Value>> = (0..500)
            .map(|i| vec![Value::Null, t(&(i % 5).to_string()), int(i % 3), int(i)])
            .collect();
        let mut a = p.pl.appender("t").unwrap();
        for r in &rows {
            a.append_row(r).unwrap();
        }
        assert_eq!(a.flush().unwrap(), 500);
        drop(a);
        let tx = p.sq.transaction().unwrap();
        for r in &rows {
            tx.execute(
                "INSERT INTO t VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params_from_iter(r.iter()),
            )
            .unwrap();
        }
        tx.commit().unwrap();
        p.served(
            "SELECT d1, d2, COUNT(*), SUM(m), MIN(m), MAX(m) FROM t GROUP BY d1, d2",
            &[],
        );
    }
}
