//! Every Pleroma connection a process opens on one file shares its planes:
//! a commit by one is taken over by the others without a rebuild, exactly
//! when SQLite shows it to them; uncommitted and rolled-back writes stay
//! invisible; a read transaction keeps one state (issue #12). The answers
//! are checked against SQLite itself on the same connection at the same
//! moment (`Connection::sqlite()`), which sees exactly what that connection
//! should see.

mod common;
use common::*;
use pleroma::{Connection, RouteKind, Value};

const QUERIES: [&str; 3] = [
    "SELECT COUNT(*), SUM(m) FROM t",
    "SELECT g, COUNT(*), SUM(m) FROM t GROUP BY g ORDER BY g",
    "SELECT COUNT(*) FROM t WHERE g = 'a'",
];

fn open(path: &std::path::Path) -> Connection {
    Connection::open(path).unwrap()
}

/// Every query served by the plane (or its memo) and equal to what SQLite
/// shows this connection now.
fn check(c: &mut Connection) {
    for q in QUERIES {
        let got = c.query(q, &[]).unwrap().rows;
        assert_ne!(
            c.last_route().kind,
            RouteKind::Engine,
            "{q}: {:?}",
            c.last_route()
        );
        assert_eq!(got, sqlite_rows(c.sqlite(), q, &[]).unwrap(), "{q}");
    }
}

fn rebuilds(c: &mut Connection) -> i64 {
    let p = c.query("PRAGMA pleroma_planes", &[]).unwrap();
    let i = p.columns.iter().position(|c| c == "rebuilds").unwrap();
    p.rows
        .iter()
        .map(|r| match r[i] {
            Value::Integer(n) => n,
            _ => panic!("rebuilds: {:?}", r[i]),
        })
        .sum()
}

/// A new WAL file, set up by `sql` on a connection that then closes.
fn wal_file(sql: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let mut c = open(&path);
    c.execute_batch("PRAGMA journal_mode = WAL").unwrap();
    c.execute_batch(sql).unwrap();
    (dir, path)
}

fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    wal_file(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT, m INTEGER);
         INSERT INTO t(g, m) VALUES ('a', 1), ('b', 2), ('a', 3);
         PRAGMA pleroma_attach('t', 'g', 'm');",
    )
}

#[test]
fn a_commit_on_one_connection_is_taken_over_by_another_without_a_rebuild() {
    let (dir, path) = setup();
    let mut a = open(&path);
    // Another spelling of the same file shares too.
    let mut b = open(&dir.path().join(".").join("db.sqlite"));
    check(&mut a);
    check(&mut b);
    for i in 0..20 {
        a.execute(
            "INSERT INTO t(g, m) VALUES (?1, ?2)",
            &[text(if i % 3 == 0 { "a" } else { "c" }), int(i)],
        )
        .unwrap();
        check(&mut b);
        b.execute("UPDATE t SET m = m + 1 WHERE id = ?1", &[int(i % 5 + 1)])
            .unwrap();
        check(&mut a);
    }
    assert_eq!(rebuilds(&mut a), 0);
    assert_eq!(rebuilds(&mut b), 0);
}

/// A write transaction begun IMMEDIATE (as `pleroma serve`'s sessions and
/// web apps begin theirs) after another connection's commit follows that
/// commit at its BEGIN, under the write lock, and its COMMIT rebuilds
/// nothing. Its ROLLBACK goes back to the followed state.
#[test]
fn a_transaction_begun_immediate_after_anothers_commit_does_not_rebuild() {
    let (_dir, path) = setup();
    let mut a = open(&path);
    let mut b = open(&path);
    check(&mut a);
    check(&mut b);
    for i in 0..10 {
        a.execute("INSERT INTO t(g, m) VALUES ('a', ?1)", &[int(i)])
            .unwrap();
        let (begin, end) = match i % 3 {
            0 => ("BEGIN IMMEDIATE", "COMMIT"),
            1 => ("BEGIN EXCLUSIVE", "COMMIT"),
            _ => ("BEGIN IMMEDIATE", "ROLLBACK"),
        };
        b.execute_batch(begin).unwrap();
        b.execute("INSERT INTO t(g, m) VALUES ('b', ?1)", &[int(100 + i)])
            .unwrap();
        check(&mut b);
        b.execute("UPDATE t SET m = m + 1 WHERE g = 'a'", &[])
            .unwrap();
        check(&mut b);
        b.execute_batch(end).unwrap();
        check(&mut b);
        check(&mut a);
    }
    assert_eq!(rebuilds(&mut a) + rebuilds(&mut b), 0);
    // A new connection opens the persisted state and agrees.
    let mut c = open(&path);
    check(&mut c);
    assert_eq!(rebuilds(&mut c), 0);
}

#[test]
fn uncommitted_and_rolled_back_writes_stay_on_their_connection() {
    let (_dir, path) = setup();
    let mut a = open(&path);
    let mut b = open(&path);
    check(&mut b);
    a.execute_batch(
        "BEGIN; INSERT INTO t(g, m) VALUES ('a', 100); SAVEPOINT s; DELETE FROM t WHERE g = 'b';",
    )
    .unwrap();
    check(&mut a);
    check(&mut b);
    a.execute_batch("ROLLBACK TO s").unwrap();
    check(&mut a);
    check(&mut b);
    a.execute_batch("ROLLBACK").unwrap();
    check(&mut a);
    check(&mut b);
    // A failed autocommit statement leaves nothing behind either.
    assert!(a
        .execute_batch("INSERT INTO t(g, m) VALUES ('z', 1), ('z', abs(-9223372036854775808))")
        .is_err());
    check(&mut b);
    a.execute_batch("BEGIN; INSERT INTO t(g, m) VALUES ('d', 7); COMMIT;")
        .unwrap();
    check(&mut b);
    check(&mut a);
    assert_eq!(rebuilds(&mut a) + rebuilds(&mut b), 0);
}

#[test]
fn a_read_transaction_keeps_its_state_while_commits_go_on() {
    let (_dir, path) = setup();
    let mut w = open(&path);
    let mut r = open(&path);
    r.execute_batch("BEGIN").unwrap();
    check(&mut r);
    let pinned = r.query(QUERIES[0], &[]).unwrap().rows;
    for i in 0..5 {
        w.execute("INSERT INTO t(g, m) VALUES ('a', ?1)", &[int(10 + i)])
            .unwrap();
        check(&mut r);
        assert_eq!(r.query(QUERIES[0], &[]).unwrap().rows, pinned);
    }
    r.execute_batch("COMMIT").unwrap();
    check(&mut r);
    assert_ne!(r.query(QUERIES[0], &[]).unwrap().rows, pinned);
    assert_eq!(rebuilds(&mut r), 0);
}

#[test]
fn a_plane_attached_on_one_connection_reaches_the_others() {
    let (_dir, path) = wal_file(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT, m INTEGER);
         INSERT INTO t(g, m) VALUES ('a', 1);",
    );
    let mut a = open(&path);
    let mut b = open(&path);
    a.execute_batch("PRAGMA pleroma_attach('t', 'g', 'm')")
        .unwrap();
    check(&mut b);
    b.execute_batch("INSERT INTO t(g, m) VALUES ('b', 5)")
        .unwrap();
    check(&mut a);
    a.execute_batch("PRAGMA pleroma_detach('t')").unwrap();
    b.query(QUERIES[0], &[]).unwrap();
    assert_eq!(b.last_route().kind, RouteKind::Engine);
}

#[test]
fn an_outside_writer_is_still_caught_and_counted() {
    let (_dir, path) = setup();
    let mut a = open(&path);
    let mut b = open(&path);
    check(&mut a);
    check(&mut b);
    // A plain SQLite writer: refused by a persisted plane's guard; with
    // persistence off it writes, and the planes rebuild.
    let plain = rusqlite::Connection::open(&path).unwrap();
    let e = plain
        .execute_batch("INSERT INTO t(g, m) VALUES ('a', 1000)")
        .unwrap_err();
    assert!(e.to_string().contains("pleroma_guard"), "{e}");
    a.execute_batch("PRAGMA pleroma_persist = off").unwrap();
    check(&mut a);
    check(&mut b);
    let base = rebuilds(&mut a) + rebuilds(&mut b);
    // A connection reads a changed schema at its next statement that runs
    // (a prepare that fails does not): one read first.
    plain.execute_batch("SELECT count(*) FROM t").unwrap();
    plain
        .execute_batch("INSERT INTO t(g, m) VALUES ('a', 1000)")
        .unwrap();
    check(&mut a);
    check(&mut b);
    // The first to look rebuilt and published; the other took that over.
    assert_eq!(rebuilds(&mut a) + rebuilds(&mut b), base + 1);
}

/// Readers on their own threads and connections while a writer commits
/// batches: every answer is one of the committed states, in commit order,
/// and no reader rebuilds.
#[test]
fn readers_on_other_threads_see_only_committed_states() {
    let (_dir, path) = setup();
    const BATCHES: i64 = 60;
    const ROWS: i64 = 20;
    // After batch k: 3 + k·ROWS rows; every inserted m is 1.
    let mut w = open(&path);
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut r = open(&path);
                let mut last = 0;
                let mut served = 0;
                loop {
                    let rows = r.query("SELECT COUNT(*), SUM(m) FROM t", &[]).unwrap().rows;
                    let (Value::Integer(n), Value::Integer(s)) = (&rows[0][0], &rows[0][1]) else {
                        panic!("{rows:?}")
                    };
                    let k = (n - 3) / ROWS;
                    assert_eq!((n - 3) % ROWS, 0, "a torn batch: {n} rows");
                    assert_eq!(*s, 6 + k * ROWS, "sum of state {k}");
                    assert!(k >= last, "went back from state {last} to {k}");
                    last = k;
                    served += (r.last_route().kind != RouteKind::Engine) as usize;
                    if k == BATCHES {
                        return (served, rebuilds(&mut r));
                    }
                }
            })
        })
        .collect();
    for _ in 0..BATCHES {
        w.execute_batch("BEGIN").unwrap();
        for _ in 0..ROWS {
            w.execute("INSERT INTO t(g, m) VALUES ('x', 1)", &[])
                .unwrap();
        }
        w.execute_batch("COMMIT").unwrap();
    }
    for h in readers {
        let (served, rebuilt) = h.join().unwrap();
        assert!(served > 0);
        assert_eq!(rebuilt, 0);
    }
}

#[test]
fn a_commit_that_changes_no_plane_keeps_the_memo() {
    let (_dir, path) = setup();
    let mut a = open(&path);
    let mut b = open(&path);
    a.execute_batch("CREATE TABLE other(x INTEGER)").unwrap();
    check(&mut b);
    let q = QUERIES[1];
    b.query(q, &[]).unwrap();
    assert_eq!(b.last_route().kind, RouteKind::Memo);
    a.execute_batch("INSERT INTO other VALUES (1)").unwrap();
    assert_eq!(
        b.query(q, &[]).unwrap().rows,
        sqlite_rows(b.sqlite(), q, &[]).unwrap()
    );
    assert_eq!(b.last_route().kind, RouteKind::Memo, "{:?}", b.last_route());
    a.execute_batch("INSERT INTO t(g, m) VALUES ('a', 5)")
        .unwrap();
    assert_eq!(
        b.query(q, &[]).unwrap().rows,
        sqlite_rows(b.sqlite(), q, &[]).unwrap()
    );
    assert_eq!(b.last_route().kind, RouteKind::Plane);
}

#[test]
fn a_connection_moves_between_threads_and_what_they_share_is_sync() {
    fn send<T: Send>() {}
    send::<Connection>();
    let (_dir, path) = setup();
    let mut c = open(&path);
    c.query(QUERIES[0], &[]).unwrap();
    let mut c = std::thread::spawn(move || {
        check(&mut c);
        c
    })
    .join()
    .unwrap();
    check(&mut c);
}

#[test]
fn a_plane_redefined_elsewhere_is_classified_again_before_it_answers() {
    let (_dir, path) = setup();
    let mut a = open(&path);
    let mut b = open(&path);
    a.execute_batch("ALTER TABLE t ADD COLUMN h INTEGER; UPDATE t SET h = id % 2;")
        .unwrap();
    let q = "SELECT COUNT(*), SUM(m) FROM t WHERE g = 'a'";
    check(&mut b);
    b.query(q, &[]).unwrap();
    b.execute_batch("BEGIN").unwrap();
    // Between b's BEGIN and its first read, the plane is defined anew with
    // other dimensions.
    a.execute_batch("PRAGMA pleroma_detach('t'); PRAGMA pleroma_attach('t', 'h, g', 'm');")
        .unwrap();
    assert_eq!(
        b.query(q, &[]).unwrap().rows,
        sqlite_rows(b.sqlite(), q, &[]).unwrap()
    );
    assert_ne!(
        b.last_route().kind,
        RouteKind::Engine,
        "{:?}",
        b.last_route()
    );
    b.execute_batch("COMMIT").unwrap();
    check(&mut b);
}

#[test]
fn a_table_recreated_elsewhere_with_another_affinity_is_classified_again() {
    let (_dir, path) = wal_file(
        "CREATE TABLE t(d TEXT, m INTEGER);
         INSERT INTO t VALUES ('5', 1), ('x', 2);
         PRAGMA pleroma_attach('t', 'd', 'm');",
    );
    let mut a = open(&path);
    let mut b = open(&path);
    let q = "SELECT d, COUNT(*), SUM(m) FROM t GROUP BY d HAVING d = 5";
    for _ in 0..2 {
        assert_eq!(
            b.query(q, &[]).unwrap().rows,
            sqlite_rows(b.sqlite(), q, &[]).unwrap()
        );
    }
    a.execute_batch(
        "DROP TABLE t; CREATE TABLE t(d BLOB, m INTEGER);
         INSERT INTO t VALUES ('5', 1), (5, 4);
         PRAGMA pleroma_rebuild('t');",
    )
    .unwrap();
    assert_eq!(
        b.query(q, &[]).unwrap().rows,
        sqlite_rows(b.sqlite(), q, &[]).unwrap()
    );
    assert_ne!(
        b.last_route().kind,
        RouteKind::Engine,
        "{:?}",
        b.last_route()
    );
}

/// Found from outside (the Python package's attack): a connection opened
/// before another attached a plane, which then read while the attaching
/// connection's transaction was open, was refused its next write by the
/// plane's guard once that transaction committed.
#[test]
fn a_connection_opened_before_the_attach_writes_after_anothers_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.db");
    let mut a = open(&path);
    let mut b = open(&path);
    a.execute_batch("CREATE TABLE f(id INTEGER PRIMARY KEY, g TEXT, m INTEGER)")
        .unwrap();
    a.execute_batch("PRAGMA pleroma_attach('f', 'g', 'm')")
        .unwrap();
    a.execute_batch("BEGIN; INSERT INTO f(g, m) VALUES ('x', 1)")
        .unwrap();
    let seen = b.query("SELECT g, SUM(m) FROM f GROUP BY g", &[]).unwrap();
    assert!(seen.rows.is_empty());
    a.execute_batch("COMMIT").unwrap();
    b.execute_batch("BEGIN; INSERT INTO f(g, m) VALUES ('y', 2); COMMIT")
        .unwrap();
    for c in [&mut a, &mut b] {
        let got = c
            .query("SELECT g, SUM(m) FROM f GROUP BY g ORDER BY g", &[])
            .unwrap();
        assert_eq!(
            got.rows,
            vec![vec![text("x"), int(1)], vec![text("y"), int(2)]]
        );
    }
    b.execute_batch("INSERT INTO f(g, m) VALUES ('y', 3)")
        .unwrap();
    drop((a, b));
    // What b's writes persisted is what a fresh opening finds.
    let mut c = open(&path);
    let got = c
        .query("SELECT g, SUM(m) FROM f GROUP BY g ORDER BY g", &[])
        .unwrap();
    assert_eq!(c.last_route().kind, RouteKind::Plane);
    assert_eq!(
        got.rows,
        vec![vec![text("x"), int(1)], vec![text("y"), int(5)]]
    );
    assert_eq!(rebuilds(&mut c), 0);
}

/// Found from outside: a connection opened before another attached a
/// plane opens it from the persisted state at its first read, as a new
/// connection would: no rebuild, and no state row written by a SELECT.
#[test]
fn a_read_after_anothers_attach_opens_the_persisted_state_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut a = open(&path);
    let mut b = open(&path);
    a.execute_batch(
        "CREATE TABLE f(g TEXT, m INTEGER); INSERT INTO f VALUES ('x', 1), ('y', 2);
         PRAGMA pleroma_attach('f', 'g', 'm')",
    )
    .unwrap();
    let seqs = |c: &mut Connection| {
        c.query("SELECT max(seq) FROM pleroma_state", &[])
            .unwrap()
            .rows
    };
    let before = seqs(&mut a);
    let got = b
        .query("SELECT g, SUM(m) FROM f GROUP BY g ORDER BY g", &[])
        .unwrap();
    assert_eq!(b.last_route().kind, RouteKind::Plane);
    assert_eq!(
        got.rows,
        vec![vec![text("x"), int(1)], vec![text("y"), int(2)]]
    );
    assert_eq!(rebuilds(&mut b), 0);
    assert_eq!(seqs(&mut a), before);
}
