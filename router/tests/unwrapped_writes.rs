//! An autocommit write that cannot change a planed table runs as plain
//! SQLite runs it, without Pleroma's transaction or a state row (issue 21:
//! "a write that cannot touch a plane pays nothing"); one that can, through
//! a trigger, a foreign-key action or a schema another connection changed
//! meanwhile, still writes its state row, so a new process trusts the
//! persisted planes only when they are the table's.

use pleroma::{Connection, Value};

/// Every answer that matters, through Pleroma and straight from SQLite on
/// the same connection.
fn same(c: &mut Connection, what: &str) {
    for q in [
        "SELECT COUNT(*), SUM(m), MIN(m), MAX(m) FROM t",
        "SELECT g, COUNT(*), SUM(m) FROM t GROUP BY g ORDER BY g",
    ] {
        let got = c.query(q, &[]).unwrap().rows;
        let mut stmt = c.sqlite().prepare(q).unwrap();
        let n = stmt.column_count();
        let want: Vec<Vec<Value>> = stmt
            .query_map([], |r| (0..n).map(|i| r.get(i)).collect())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(got, want, "{what}: {q}");
    }
}

/// What a new process sees: the file opened again, from its persisted
/// state, with no rebuild.
fn reopened(path: &std::path::Path, what: &str) {
    let mut c = Connection::open(path).unwrap();
    same(&mut c, what);
    let p = c.query("PRAGMA pleroma_planes", &[]).unwrap();
    let i = p.columns.iter().position(|c| c == "rebuilds").unwrap();
    assert_eq!(p.rows[0][i], Value::Integer(0), "{what}: the open rebuilt");
}

fn state_rows(c: &mut Connection) -> i64 {
    match c
        .sqlite()
        .query_row("SELECT max(seq) FROM pleroma_state", [], |r| r.get(0))
    {
        Ok(Some(n)) => n,
        _ => 0,
    }
}

fn file(dir: &tempfile::TempDir) -> (std::path::PathBuf, Connection) {
    let path = dir.path().join("w.db");
    let mut c = Connection::open(&path).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON;
         CREATE TABLE t(id INTEGER PRIMARY KEY, g INT, m INT, p INT REFERENCES p(id) ON DELETE CASCADE);
         CREATE TABLE p(id INTEGER PRIMARY KEY, name TEXT);
         CREATE TABLE u(id INTEGER PRIMARY KEY, x INT);
         CREATE TABLE v(x INT);
         CREATE TRIGGER v_to_t AFTER INSERT ON v WHEN NEW.x > 10 BEGIN
           INSERT INTO t(g, m) VALUES (NEW.x % 3, NEW.x);
         END;
         INSERT INTO p(id, name) VALUES (1, 'a'), (2, 'b');
         INSERT INTO t(g, m, p) VALUES (1, 2, 1), (2, 3, 2), (1, 4, 2);
         PRAGMA pleroma_attach('t', 'g', 'm');",
    )
    .unwrap();
    (path, c)
}

#[test]
fn a_write_of_another_table_writes_no_state_row() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut c) = file(&dir);
    // The first write after the attach writes the checkpoint.
    c.execute("INSERT INTO t(g, m) VALUES (3, 5)", &[]).unwrap();
    let seq = state_rows(&mut c);
    for k in 0..5 {
        assert_eq!(
            c.execute("INSERT INTO u(x) VALUES (?1)", &[Value::Integer(k)])
                .unwrap(),
            1
        );
        assert_eq!(c.sqlite().last_insert_rowid(), k + 1);
    }
    c.execute("UPDATE p SET name = 'c' WHERE id = 1", &[])
        .unwrap();
    c.execute("INSERT INTO v(x) VALUES (4)", &[]).unwrap();
    assert_eq!(
        state_rows(&mut c),
        seq,
        "a write of u, p's name or v's low x wrote a state row"
    );
    let counted = c
        .query("SELECT changes(), total_changes()", &[])
        .unwrap()
        .rows;
    // 2 + 3 rows of the setup, 1 of t, 5 of u, 1 of p, 1 of v.
    assert_eq!(counted, vec![vec![Value::Integer(1), Value::Integer(13)]]);
    same(&mut c, "after writes of other tables");
    reopened(&path, "after writes of other tables");
}

#[test]
fn a_trigger_or_a_cascade_into_the_planed_table_writes_its_state_row() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut c) = file(&dir);
    c.execute("INSERT INTO t(g, m) VALUES (3, 5)", &[]).unwrap();
    let seq = state_rows(&mut c);
    // The trigger's WHEN decides at run time; the statement can reach t.
    c.execute("INSERT INTO v(x) VALUES (13)", &[]).unwrap();
    assert_eq!(state_rows(&mut c), seq + 1);
    same(&mut c, "after the trigger");
    reopened(&path, "after the trigger");
    // ON DELETE CASCADE from p into t.
    c.execute("DELETE FROM p WHERE id = 2", &[]).unwrap();
    assert_eq!(state_rows(&mut c), seq + 2);
    same(&mut c, "after the cascade");
    reopened(&path, "after the cascade");
    // With foreign keys off, the same text deletes no row of t.
    c.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    c.execute("DELETE FROM p WHERE id = 1", &[]).unwrap();
    same(&mut c, "a delete of p without foreign keys");
    reopened(&path, "a delete of p without foreign keys");
}

/// A text this connection ran unwrapped gains a trigger into `t` from
/// another connection: the guard refuses its next run, which SQLite undoes
/// whole, and it runs once more with its state row, counted once.
#[test]
fn a_trigger_made_by_another_connection_is_caught_by_the_guard() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut c) = file(&dir);
    c.execute("INSERT INTO t(g, m) VALUES (3, 5)", &[]).unwrap();
    let insert = "INSERT INTO u(x) VALUES (?1)";
    c.execute(insert, &[Value::Integer(1)]).unwrap();
    let seq = state_rows(&mut c);
    {
        let mut other = Connection::open(&path).unwrap();
        other
            .execute_batch(
                "CREATE TABLE log(x);
                 CREATE TRIGGER u_to_t AFTER INSERT ON u BEGIN
                   INSERT INTO log VALUES (NEW.x);
                   INSERT INTO t(g, m) VALUES (NEW.x % 2, NEW.x * 10);
                 END;",
            )
            .unwrap();
    }
    let before = c.query("SELECT total_changes()", &[]).unwrap().rows;
    assert_eq!(c.execute(insert, &[Value::Integer(7)]).unwrap(), 1);
    let after = c
        .query("SELECT total_changes(), changes()", &[])
        .unwrap()
        .rows;
    let Value::Integer(b) = before[0][0] else {
        panic!("{before:?}")
    };
    // The row of u and the trigger's two, once.
    assert_eq!(after, vec![vec![Value::Integer(b + 3), Value::Integer(1)]]);
    assert_eq!(c.sqlite().last_insert_rowid(), 2);
    assert!(
        state_rows(&mut c) > seq,
        "the trigger's write persisted no state row"
    );
    let logged: i64 = c
        .sqlite()
        .query_row("SELECT COUNT(*) FROM log", [], |r| r.get(0))
        .unwrap();
    assert_eq!(logged, 1);
    same(&mut c, "after the other connection's trigger");
    reopened(&path, "after the other connection's trigger");
}

/// A failed write of another table fails as in plain SQLite, and keeps
/// what plain SQLite keeps.
#[test]
fn a_failed_write_of_another_table_keeps_what_sqlite_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut c) = file(&dir);
    let plain_path = dir.path().join("plain.db");
    let plain = rusqlite::Connection::open(&plain_path).unwrap();
    let setup = "CREATE TABLE w(id INTEGER PRIMARY KEY, x INT UNIQUE);
                 INSERT INTO w(x) VALUES (1), (2);";
    c.execute_batch(setup).unwrap();
    plain.execute_batch(setup).unwrap();
    for sql in [
        "INSERT OR FAIL INTO w(x) VALUES (3), (4), (2), (5)",
        "INSERT INTO w(x) VALUES (6), (1)",
        "UPDATE OR FAIL w SET x = x + 1",
    ] {
        let ours = c.execute(sql, &[]).map_err(|e| e.to_string());
        let theirs = plain.execute(sql, []).map_err(|e| e.to_string());
        assert_eq!(
            ours.is_ok(),
            theirs.is_ok(),
            "{sql}: {ours:?} vs {theirs:?}"
        );
        let rows = |db: &rusqlite::Connection| -> Vec<(i64, i64)> {
            db.prepare("SELECT id, x FROM w ORDER BY id")
                .unwrap()
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(rows(c.sqlite()), rows(&plain), "{sql}");
        let counts = |db: &rusqlite::Connection| -> (i64, i64) {
            db.query_row("SELECT changes(), total_changes()", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap()
        };
        let ours = c
            .query("SELECT changes(), total_changes()", &[])
            .unwrap()
            .rows;
        let (ch, total) = counts(&plain);
        // The plain file's setup counted 2 rows; Pleroma's 2 + 3 more.
        assert_eq!(
            ours,
            vec![vec![Value::Integer(ch), Value::Integer(total + 5)]],
            "{sql}"
        );
    }
    same(&mut c, "after failed writes of another table");
    reopened(&path, "after failed writes of another table");
}
