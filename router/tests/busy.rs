//! A write that meets another connection's write lock waits for it as in
//! plain SQLite: SQLite calls the busy handler when the connection holds no
//! snapshot of the file, so nothing Pleroma reads before a transaction's
//! first write may open one (`txn_guards::lock_main`).
//!
//! The schedule is one thread and repeatable: another connection holds the
//! write lock, and the busy handler of the connection under test, when
//! SQLite calls it, commits that connection and lets SQLite try again. The
//! same script runs on plain SQLite and through Pleroma (with a persisted
//! plane), and both must give the same outcome, call the handler as often,
//! and leave the same rows.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pleroma::Connection;

type Holder = Arc<Mutex<Option<rusqlite::Connection>>>;

/// A file with `t` (planed when `plane`), `u`, the holder's `h`, and
/// whatever `extra` makes.
fn file(dir: &tempfile::TempDir, name: &str, extra: &str, plane: bool) -> std::path::PathBuf {
    let path = dir.path().join(name);
    let mut c = Connection::open(&path).unwrap();
    c.execute_batch(&format!(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, m INT);
         INSERT INTO t(g, m) VALUES (1, 2), (2, 3), (1, 4);
         CREATE TABLE u(x);
         CREATE TABLE h(x);
         {extra}"
    ))
    .unwrap();
    if plane {
        c.execute_batch("PRAGMA pleroma_attach('t', 'g', 'm')")
            .unwrap();
    }
    path
}

/// Another connection takes the write lock (`hold`); the returned
/// connection's busy handler commits it when SQLite calls the handler
/// (counted in `calls`).
fn contended(path: &std::path::Path, calls: &Arc<AtomicUsize>) -> rusqlite::Connection {
    contended_by(path, calls, &hold(path))
}

fn hold(path: &std::path::Path) -> Holder {
    let holder = rusqlite::Connection::open(path).unwrap();
    holder.busy_timeout(std::time::Duration::ZERO).unwrap();
    holder
        .execute_batch("BEGIN IMMEDIATE; INSERT INTO h VALUES (1)")
        .unwrap();
    Arc::new(Mutex::new(Some(holder)))
}

fn contended_by(
    path: &std::path::Path,
    calls: &Arc<AtomicUsize>,
    holder: &Holder,
) -> rusqlite::Connection {
    let mut db = rusqlite::Connection::open(path).unwrap();
    let calls = calls.clone();
    let holder = holder.clone();
    db.busy_handler(Some(move |_n: i32| {
        calls.fetch_add(1, Ordering::Relaxed);
        match holder.lock().unwrap().take() {
            Some(h) => {
                h.execute_batch("COMMIT").unwrap();
                true
            }
            None => false,
        }
    }))
    .unwrap();
    db
}

/// What a script did: each statement's outcome, the handler's calls, and
/// the rows of `t` and `u` after.
#[derive(Debug, PartialEq)]
struct Outcome {
    results: Vec<Result<(), String>>,
    calls: usize,
    rows: Vec<Vec<i64>>,
}

fn rows(db: &rusqlite::Connection) -> Vec<Vec<i64>> {
    let mut out = Vec::new();
    for q in [
        "SELECT id, g, m FROM t ORDER BY id",
        "SELECT x, 0, 0 FROM u ORDER BY rowid",
    ] {
        let mut s = db.prepare(q).unwrap();
        let r = s
            .query_map([], |r| Ok(vec![r.get(0)?, r.get(1)?, r.get(2)?]))
            .unwrap();
        out.extend(r.map(Result::unwrap));
    }
    out
}

fn plain(path: &std::path::Path, script: &[&str]) -> Outcome {
    let calls = Arc::new(AtomicUsize::new(0));
    let db = contended(path, &calls);
    let results = script
        .iter()
        .map(|s| db.execute_batch(s).map_err(|e| e.to_string()))
        .collect();
    Outcome {
        results,
        calls: calls.load(Ordering::Relaxed),
        rows: rows(&db),
    }
}

fn pleroma(path: &std::path::Path, script: &[&str]) -> Outcome {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut c = Connection::wrap(contended(path, &calls)).unwrap();
    let results = script
        .iter()
        .map(|s| c.execute_batch(s).map_err(|e| e.to_string()))
        .collect();
    let calls = calls.load(Ordering::Relaxed);
    // The plane agrees with the table after.
    for q in [
        "SELECT COUNT(*), SUM(m) FROM t",
        "SELECT g, COUNT(*), SUM(m) FROM t GROUP BY g ORDER BY g",
    ] {
        let got = c.query(q, &[]).unwrap().rows;
        let mut s = c.sqlite().prepare(q).unwrap();
        let n = s.column_count();
        let want: Vec<Vec<pleroma::Value>> = s
            .query_map([], |r| (0..n).map(|i| r.get(i)).collect())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(got, want, "{q}");
    }
    Outcome {
        results,
        calls,
        rows: rows(c.sqlite()),
    }
}

fn same(extra: &str, script: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let want = plain(&file(&dir, "plain.db", extra, false), script);
    let got = pleroma(&file(&dir, "pleroma.db", extra, true), script);
    assert_eq!(want.calls, 1, "plain SQLite waited once: {want:?}");
    assert_eq!(got, want, "{script:?} with {extra:?}");
}

#[test]
fn a_transactions_first_write_of_another_table_waits() {
    same("", &["BEGIN", "INSERT INTO u VALUES (5)", "COMMIT"]);
}

#[test]
fn a_transactions_first_write_of_the_planed_table_waits() {
    same(
        "",
        &["BEGIN", "INSERT INTO t(g, m) VALUES (3, 7)", "COMMIT"],
    );
    same(
        "",
        &[
            "SAVEPOINT a",
            "UPDATE t SET m = m + 1 WHERE g = 1",
            "RELEASE a",
        ],
    );
}

#[test]
fn it_waits_where_the_guards_must_leave_first() {
    // A STRICT table and a virtual table make the guards' check read the
    // schemas (and, with the virtual table, drop the guards).
    same(
        "CREATE TABLE s(a INT) STRICT;",
        &["BEGIN", "INSERT INTO t(g, m) VALUES (3, 7)", "COMMIT"],
    );
    same(
        "CREATE VIRTUAL TABLE f USING fts5(body);",
        &["BEGIN", "DELETE FROM t WHERE g = 2", "COMMIT"],
    );
}

#[test]
fn an_autocommit_write_waits() {
    same("", &["INSERT INTO t(g, m) VALUES (4, 4)"]);
}

#[test]
fn turning_persistence_off_waits() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "off.db", "", true);
    let calls = Arc::new(AtomicUsize::new(0));
    let mut c = Connection::wrap(contended(&path, &calls)).unwrap();
    c.execute_batch("PRAGMA pleroma_persist = off").unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    let on = c.query("PRAGMA pleroma_persist", &[]).unwrap().rows;
    assert_eq!(on, vec![vec![pleroma::Value::Text("off".into())]]);
}

#[test]
fn the_applications_busy_handler_stays() {
    // With no persisted state to open from, opening rebuilds the plane
    // and writes the state if it can take the lock; it must not replace
    // the application's busy handler to find out. (Persistence turned on
    // while another connection commits leaves no state: its state row
    // would describe the planes before that commit.)
    let dir = tempfile::tempdir().unwrap();
    let path = file(&dir, "handler.db", "", true);
    let mut c = Connection::open(&path).unwrap();
    c.execute_batch("PRAGMA pleroma_persist = off").unwrap();
    drop(c);
    let calls = Arc::new(AtomicUsize::new(0));
    let mut c = Connection::wrap(contended(&path, &calls)).unwrap();
    c.execute_batch("PRAGMA pleroma_persist = on").unwrap();
    drop(c);
    let calls = Arc::new(AtomicUsize::new(0));
    let holder = hold(&path);
    let mut c = Connection::wrap(contended_by(&path, &calls, &holder)).unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 1, "the open waited");
    // The lock again, and a write: the handler is still the application's.
    *holder.lock().unwrap() = hold(&path).lock().unwrap().take();
    c.execute_batch("INSERT INTO u VALUES (1)").unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

/// With another file attached whose write lock is held, Pleroma's own
/// writes (the ATTACH's state row, the wrap of an autocommit write to main)
/// lock main alone: plain SQLite waits for nobody there, and neither may
/// Pleroma.
#[test]
fn an_attached_files_writer_is_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, plane: bool| {
        let path = file(&dir, &format!("{name}.db"), "", plane);
        let aux = dir.path().join(format!("{name}-aux.db"));
        rusqlite::Connection::open(&aux)
            .unwrap()
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE h(x)")
            .unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let holder = hold(&aux);
        let db = contended_by(&path, &calls, &holder);
        let script = [
            format!("ATTACH '{}' AS aux", aux.display()),
            "INSERT INTO t(g, m) VALUES (5, 5)".to_owned(),
            "BEGIN; SELECT COUNT(*) FROM aux.h; INSERT INTO u VALUES (1); COMMIT".to_owned(),
        ];
        let (results, db) = if plane {
            let mut c = Connection::wrap(db).unwrap();
            let r: Vec<Result<(), String>> = script
                .iter()
                .map(|s| c.execute_batch(s).map_err(|e| e.to_string()))
                .collect();
            (r, rows(c.sqlite()))
        } else {
            let r: Vec<Result<(), String>> = script
                .iter()
                .map(|s| db.execute_batch(s).map_err(|e| e.to_string()))
                .collect();
            (r, rows(&db))
        };
        Outcome {
            results,
            calls: calls.load(Ordering::Relaxed),
            rows: db,
        }
    };
    let want = run("plain", false);
    assert_eq!(want.calls, 0, "plain SQLite did not wait: {want:?}");
    assert_eq!(run("pleroma", true), want);
}

/// Found from outside (the Python package's attack), in rollback-journal
/// mode with no busy timeout: while another connection holds a read
/// transaction, an autocommit write that fails on a constraint reports the
/// constraint, as plain SQLite does, not "database is locked"; and COMMIT,
/// ROLLBACK or RELEASE with no transaction open, while another connection
/// holds the exclusive lock, report what plain SQLite reports.
#[test]
fn errors_under_another_connections_lock_are_sqlites() {
    let dir = tempfile::tempdir().unwrap();
    let mut outcomes: Vec<Vec<String>> = Vec::new();
    for side in 0..3 {
        let path = dir.path().join(format!("j{side}.db"));
        let setup = rusqlite::Connection::open(&path).unwrap();
        setup
            .execute_batch(
                "CREATE TABLE f(id INTEGER PRIMARY KEY, a TEXT NOT NULL, m INT);
                 CREATE TABLE other(x);",
            )
            .unwrap();
        drop(setup);
        let mut seen = Vec::new();
        let reader = rusqlite::Connection::open(&path).unwrap();
        // No busy timeout (rusqlite sets 5 s): a lock fails at once.
        let no_wait = "PRAGMA busy_timeout = 0";
        let mut record = |r: Result<(), String>| seen.push(format!("{r:?}"));
        let run: Box<dyn FnMut(&str) -> Result<(), String>> = if side == 0 {
            let db = rusqlite::Connection::open(&path).unwrap();
            db.execute_batch(no_wait).unwrap();
            Box::new(move |sql: &str| db.execute_batch(sql).map_err(|e| e.to_string()))
        } else {
            let mut db = Connection::open(&path).unwrap();
            // Another Pleroma connection of this process on the file: the
            // planes are shared, so statements look at others' commits.
            let other = Connection::open(&path).unwrap();
            db.execute_batch(no_wait).unwrap();
            if side == 2 {
                db.execute_batch("PRAGMA pleroma_attach('f', 'a', 'm')")
                    .unwrap();
            }
            Box::new(move |sql: &str| {
                let _ = &other;
                db.execute_batch(sql).map_err(|e| e.to_string())
            })
        };
        let mut run = run;
        reader
            .execute_batch("BEGIN; SELECT count(*) FROM f;")
            .unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM f", [], |r| r.get(0))
            .unwrap();
        record(run("INSERT INTO f(a, m) VALUES (NULL, 2)"));
        record(run("INSERT INTO f(a, m) VALUES ('x', 2)"));
        // A commit the connection under test has not seen yet.
        reader
            .execute_batch("COMMIT; INSERT INTO other VALUES (1); BEGIN EXCLUSIVE")
            .unwrap();
        for sql in [
            "SELECT count(*) FROM f",
            "COMMIT",
            "ROLLBACK",
            "RELEASE x",
            "ROLLBACK TO x",
            "SELECT 1",
            "SELECT count(*) FROM f",
        ] {
            record(run(sql));
        }
        reader.execute_batch("ROLLBACK").unwrap();
        outcomes.push(seen);
    }
    assert_eq!(
        outcomes[0], outcomes[1],
        "plain SQLite against Pleroma without a plane"
    );
    assert_eq!(
        outcomes[0], outcomes[2],
        "plain SQLite against Pleroma with a plane"
    );
}
