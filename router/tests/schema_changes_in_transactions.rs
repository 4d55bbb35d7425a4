//! A plane's whole state, its column positions and its out-of-service state
//! included, is what ROLLBACK and ROLLBACK TO restore: a schema change that
//! SQLite undoes is undone for the plane too, and a plane that went out of
//! service never comes back with cells it did not keep. (Issue #10, items
//! 2 and 3: each script is a reproduction that answered wrong.)

mod common;
use common::*;
use pleroma::RouteKind;

#[test]
fn a_dropped_column_rolled_back_restores_the_column_positions() {
    let (routes, _) = twin(
        "CREATE TABLE t(x INTEGER, d INTEGER, m INTEGER);
         INSERT INTO t VALUES (100, 1, 10);
         PRAGMA pleroma_attach('t', 'd', 'm');
         BEGIN; ALTER TABLE t DROP COLUMN x; ROLLBACK;
         INSERT INTO t VALUES (100, 3, 30);
         SELECT d, COUNT(*), SUM(m) FROM t GROUP BY d ORDER BY d;",
    );
    assert_eq!(routes, [RouteKind::Plane]);
}

#[test]
fn a_dropped_column_rolled_back_to_a_savepoint_restores_the_positions() {
    let (routes, _) = twin(
        "CREATE TABLE t(x INTEGER, d INTEGER, m INTEGER);
         INSERT INTO t VALUES (100, 1, 10);
         PRAGMA pleroma_attach('t', 'd', 'm');
         BEGIN; SAVEPOINT a; ALTER TABLE t DROP COLUMN x;
         INSERT INTO t VALUES (2, 20);
         SELECT d, COUNT(*), SUM(m) FROM t GROUP BY d ORDER BY d;
         ROLLBACK TO a;
         INSERT INTO t VALUES (100, 3, 30);
         SELECT d, COUNT(*), SUM(m) FROM t GROUP BY d ORDER BY d;
         COMMIT;
         SELECT d, COUNT(*), SUM(m) FROM t GROUP BY d ORDER BY d;",
    );
    assert_ne!(routes.last(), Some(&RouteKind::Engine));
}

/// The failing transaction: its statement fails part-way (the second row
/// overflows), which makes the router rebuild, and then it rolls back.
const FAILING_TXN: &str = "
    BEGIN;
    INSERT INTO t VALUES (2, 20), (3, abs(-9223372036854775808));
    ROLLBACK;
    SELECT COUNT(*), SUM(m) FROM t;";

#[test]
fn a_table_dropped_and_created_again_stays_out_of_service_through_a_rollback() {
    twin(&format!(
        "CREATE TABLE t(d INTEGER, m INTEGER);
         PRAGMA pleroma_attach('t', 'd', 'm');
         DROP TABLE t;
         CREATE TABLE t(d INTEGER, m INTEGER);
         INSERT INTO t VALUES (1, 10);
         {FAILING_TXN}"
    ));
}

#[test]
fn a_table_renamed_away_and_back_stays_out_of_service_through_a_rollback() {
    twin(&format!(
        "CREATE TABLE t(d INTEGER, m INTEGER);
         PRAGMA pleroma_attach('t', 'd', 'm');
         ALTER TABLE t RENAME TO t2;
         INSERT INTO t2 VALUES (5, 50);
         ALTER TABLE t2 RENAME TO t;
         INSERT INTO t VALUES (1, 10);
         {FAILING_TXN}"
    ));
}

#[test]
fn a_column_renamed_away_and_back_stays_out_of_service_through_a_rollback() {
    twin(&format!(
        "CREATE TABLE t(d INTEGER, m INTEGER);
         PRAGMA pleroma_attach('t', 'd', 'm');
         ALTER TABLE t RENAME COLUMN m TO n;
         INSERT INTO t VALUES (1, 10);
         ALTER TABLE t RENAME COLUMN n TO m;
         {FAILING_TXN}"
    ));
}

#[test]
fn a_temp_table_that_shadowed_the_table_leaves_no_stale_cells() {
    twin(&format!(
        "CREATE TABLE t(d INTEGER, m INTEGER);
         PRAGMA pleroma_attach('t', 'd', 'm');
         CREATE TEMP TABLE t(d INTEGER, m INTEGER);
         INSERT INTO main.t VALUES (1, 10);
         DROP TABLE temp.t;
         {FAILING_TXN}"
    ));
}

#[test]
fn a_drop_rolled_back_to_a_savepoint_keeps_the_plane_in_service() {
    let (routes, _) = twin(&format!(
        "CREATE TABLE t(d INTEGER, m INTEGER);
         PRAGMA pleroma_attach('t', 'd', 'm');
         INSERT INTO t VALUES (1, 10);
         SAVEPOINT a; DROP TABLE t; ROLLBACK TO a; RELEASE a;
         UPDATE t SET m = 20;
         SELECT COUNT(*), SUM(m) FROM t;
         {FAILING_TXN}"
    ));
    assert_eq!(routes[0], RouteKind::Plane);
}

#[test]
fn a_plane_without_its_columns_declines_instead_of_panicking() {
    let (routes, _) = twin(
        "CREATE TABLE parent(pid INTEGER PRIMARY KEY, w INTEGER);
         INSERT INTO parent VALUES (1, 5);
         CREATE TABLE t(id INTEGER PRIMARY KEY, d INTEGER, p INTEGER, m INTEGER);
         INSERT INTO t(d, p, m) VALUES (1, 1, 10), (2, 1, 20);
         PRAGMA pleroma_attach('t', 'd', 'm');
         PRAGMA pleroma_limb('t', 'p', 'parent', 'pid');
         ALTER TABLE t RENAME COLUMN d TO d_r;
         PRAGMA pleroma_rebuild('t');
         SELECT SUM(parent.w) FROM parent JOIN t ON t.p = parent.pid;
         SELECT d_r, COUNT(*) FROM t GROUP BY d_r HAVING COUNT(*) > 0;
         ALTER TABLE t RENAME COLUMN d_r TO d;
         PRAGMA pleroma_rebuild('t');
         SELECT d, COUNT(*) FROM t GROUP BY d HAVING COUNT(*) > 0 ORDER BY d;",
    );
    assert_eq!(
        routes,
        [RouteKind::Engine, RouteKind::Engine, RouteKind::Plane]
    );
}

/// A schema statement that fails changes nothing, so Pleroma does no work
/// after it either: SQLite's own schema state stays exactly as without
/// Pleroma (issue #10, item 6).
#[test]
fn a_failing_alter_inside_a_transaction_ends_as_in_sqlite() {
    twin(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT, note INTEGER);
         INSERT INTO t VALUES (1, 'a', 5);
         CREATE VIEW v AS SELECT id, g FROM t;
         CREATE TRIGGER v_ins INSTEAD OF INSERT ON v BEGIN
           INSERT INTO t(id, g, note) VALUES (new.id, new.g, new.note);
         END;
         PRAGMA pleroma_attach('t', 'g', 'note');
         BEGIN;
         ALTER TABLE t DROP COLUMN note;
         SELECT * FROM t;
         COMMIT;
         SELECT * FROM t;
         SELECT g, COUNT(*) FROM t GROUP BY g;",
    );
}

/// The same through `query` (as the shell runs every statement), and the
/// statement prepared again after its error (as the shell does to word it).
#[test]
fn a_failing_alter_run_as_a_query_leaves_sqlites_schema_alone() {
    let script = [
        "CREATE TABLE t(id INTEGER PRIMARY KEY, g TEXT, note INTEGER)",
        "INSERT INTO t VALUES (1, 'a', 5)",
        "CREATE VIEW v AS SELECT id, g FROM t",
        "CREATE TRIGGER v_ins INSTEAD OF INSERT ON v BEGIN INSERT INTO t(id, g, note) VALUES (new.id, new.g, new.note); END",
    ];
    let mut pl = pleroma::Connection::open_in_memory().unwrap();
    let sq = rusqlite::Connection::open_in_memory().unwrap();
    for s in script {
        pl.execute_batch(s).unwrap();
        sq.execute_batch(s).unwrap();
    }
    pl.execute_batch("PRAGMA pleroma_attach('t', 'g', 'note')")
        .unwrap();
    pl.query("BEGIN", &[]).unwrap();
    sq.execute_batch("BEGIN").unwrap();
    let alter = "ALTER TABLE t DROP COLUMN note";
    let a = pl.query(alter, &[]).map(|_| ()).map_err(|e| e.to_string());
    let b = sq.execute_batch(alter).map_err(|e| e.to_string());
    assert_eq!(a, b);
    assert_eq!(
        pl.sqlite().prepare(alter).is_err(),
        sq.prepare(alter).is_err(),
        "prepared again after the error"
    );
    let q = "SELECT * FROM t";
    assert_eq!(
        pl.query(q, &[]).unwrap().rows,
        sqlite_rows(&sq, q, &[]).unwrap()
    );
}

/// A statement text run again after its table changed shape has SQLite's
/// new columns, names and values (found from outside: the cached statement
/// gave the columns of its first compile, and as many values).
#[test]
fn a_statement_run_again_after_its_table_changed_has_the_new_columns() {
    for change in [
        "ALTER TABLE t ADD COLUMN n DEFAULT 7",
        "ALTER TABLE t DROP COLUMN d",
        "DROP TABLE t; CREATE TABLE t(x, y, z, w); INSERT INTO t VALUES (1, 2, 3, 4)",
        "ALTER TABLE t RENAME COLUMN d TO e",
    ] {
        let mut pl = pleroma::Connection::open_in_memory().unwrap();
        let sq = rusqlite::Connection::open_in_memory().unwrap();
        let make = "CREATE TABLE t(id INTEGER PRIMARY KEY, d TEXT, m INT); INSERT INTO t VALUES (1, 'a', 5)";
        sq.execute_batch(make).unwrap();
        pl.execute_batch(make).unwrap();
        let first = pl.query("SELECT * FROM t", &[]).unwrap();
        assert_eq!(first.columns, ["id", "d", "m"]);
        pl.execute_batch(change).unwrap();
        sq.execute_batch(change).unwrap();
        let again = pl.query("SELECT * FROM t", &[]).unwrap();
        let stmt = sq.prepare("SELECT * FROM t").unwrap();
        let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
        assert_eq!(again.columns, names, "{change}");
        assert_eq!(
            again.rows,
            sqlite_rows(&sq, "SELECT * FROM t", &[]).unwrap(),
            "{change}"
        );
    }
}
