//! Affinity and collation follow SQLite's rules for every declared type and
//! on both sides of a join (issue #10, items 1 and 4).

mod common;
use common::*;
use pleroma::RouteKind;

#[test]
fn a_strict_any_column_has_no_affinity() {
    let (routes, _) = twin(
        "CREATE TABLE t(d ANY, m INTEGER) STRICT;
         INSERT INTO t VALUES (5, 1), ('5', 2), (5.0, 4), ('x', 8);
         SELECT COUNT(*), SUM(m) FROM t WHERE d = '5';
         PRAGMA pleroma_attach('t', 'd', 'm');
         SELECT COUNT(*), SUM(m) FROM t WHERE d = '5';
         SELECT COUNT(*), SUM(m) FROM t WHERE d = 5;
         SELECT COUNT(*), SUM(m) FROM t WHERE d IN ('5', 'x');
         SELECT d, COUNT(*) FROM t GROUP BY d ORDER BY d;",
    );
    assert_eq!(routes.len(), 5);
}

#[test]
fn a_strict_integer_column_keeps_integer_affinity() {
    let (routes, _) = twin(
        "CREATE TABLE t(d INTEGER, m INT) STRICT;
         INSERT INTO t VALUES (5, 1), ('6', 2);
         PRAGMA pleroma_attach('t', 'd', 'm');
         SELECT COUNT(*), SUM(m) FROM t WHERE d = '5';
         SELECT COUNT(*), SUM(m) FROM t WHERE d = 6;",
    );
    assert_eq!(routes, [RouteKind::Plane, RouteKind::Plane]);
}

#[test]
fn a_nocase_key_on_the_dimension_side_is_no_limb() {
    let (routes, errors) = twin(
        "CREATE TABLE parent(pk TEXT COLLATE NOCASE PRIMARY KEY, w INTEGER);
         INSERT INTO parent VALUES ('a', 1);
         CREATE TABLE t(d INTEGER, p TEXT, m INTEGER);
         INSERT INTO t VALUES (1, 'a', 10), (1, 'A', 20);
         PRAGMA pleroma_attach('t', 'd', 'm');
         PRAGMA pleroma_limb('t', 'p', 'parent', 'pk');
         SELECT COUNT(*), SUM(t.m), SUM(parent.w) FROM t JOIN parent ON parent.pk = t.p;",
    );
    assert_eq!(routes, [RouteKind::Engine]);
    assert!(errors[0].contains("collation NOCASE"), "{errors:?}");
}

#[test]
fn a_nocase_key_on_the_fact_side_is_no_limb() {
    let (routes, errors) = twin(
        "CREATE TABLE parent(pk TEXT PRIMARY KEY, w INTEGER);
         INSERT INTO parent VALUES ('a', 1), ('A', 3);
         CREATE TABLE t(d INTEGER, p TEXT COLLATE NOCASE, m INTEGER);
         INSERT INTO t VALUES (1, 'a', 10), (1, 'A', 20);
         PRAGMA pleroma_attach('t', 'd', 'm');
         PRAGMA pleroma_limb('t', 'p', 'parent', 'pk');
         SELECT COUNT(*), SUM(t.m), SUM(parent.w) FROM t JOIN parent ON t.p = parent.pk;",
    );
    assert_eq!(routes, [RouteKind::Engine]);
    assert!(errors[0].contains("collation NOCASE"), "{errors:?}");
}

#[test]
fn a_key_recreated_with_a_collation_takes_the_limb_out_of_service() {
    let (routes, errors) = twin(
        "CREATE TABLE parent(pk TEXT PRIMARY KEY, w INTEGER);
         INSERT INTO parent VALUES ('a', 1);
         CREATE TABLE t(d INTEGER, p TEXT, m INTEGER);
         INSERT INTO t VALUES (1, 'a', 10), (1, 'A', 20);
         PRAGMA pleroma_attach('t', 'd', 'm');
         PRAGMA pleroma_limb('t', 'p', 'parent', 'pk');
         SELECT COUNT(*), SUM(t.m), SUM(parent.w) FROM t JOIN parent ON parent.pk = t.p;
         DROP TABLE parent;
         CREATE TABLE parent(pk TEXT COLLATE NOCASE PRIMARY KEY, w INTEGER);
         INSERT INTO parent VALUES ('a', 1);
         SELECT COUNT(*), SUM(t.m), SUM(parent.w) FROM t JOIN parent ON parent.pk = t.p;",
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(routes, [RouteKind::Plane, RouteKind::Engine]);
}

/// A UTF-16 database compares text in UTF-16 (found from outside: the
/// plane's UTF-8 order answered `d > 'a'` and `ORDER BY d` differently):
/// no plane attaches there, and SQLite answers.
#[test]
fn a_utf16_database_takes_no_plane() {
    for enc in ["UTF-16le", "UTF-16be"] {
        let mut pl = pleroma::Connection::open_in_memory().unwrap();
        pl.execute_batch(&format!(
            "PRAGMA encoding = '{enc}';
             CREATE TABLE t(d TEXT, m INT);
             INSERT INTO t VALUES ('a', 1), ('b', 2), ('\u{100}', 3), ('\u{20ac}', 4);"
        ))
        .unwrap();
        let err = pl
            .execute_batch("PRAGMA pleroma_attach('t', 'd', 'm')")
            .unwrap_err()
            .to_string();
        assert!(err.contains("text encoding"), "{enc}: {err}");
        let rows = pl
            .query("SELECT COUNT(*), SUM(m) FROM t WHERE d > 'a'", &[])
            .unwrap()
            .rows;
        assert_eq!(pl.last_route().kind, pleroma::RouteKind::Engine);
        let sq = rusqlite::Connection::open_in_memory().unwrap();
        sq.execute_batch(&format!(
            "PRAGMA encoding = '{enc}';
             CREATE TABLE t(d TEXT, m INT);
             INSERT INTO t VALUES ('a', 1), ('b', 2), ('\u{100}', 3), ('\u{20ac}', 4);"
        ))
        .unwrap();
        assert_eq!(
            rows,
            sqlite_rows(&sq, "SELECT COUNT(*), SUM(m) FROM t WHERE d > 'a'", &[]).unwrap()
        );
    }
}
