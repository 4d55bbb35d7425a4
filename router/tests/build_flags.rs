//! The bundled SQLite is the one the `sqlite3` program is (docs/COMPAT.md,
//! "Build flags"): found from outside, a Pleroma connection started with
//! foreign keys on and had no math functions.

use pleroma::{Connection, Value};

#[test]
fn a_connection_starts_as_sqlite3_does() {
    let mut db = Connection::open_in_memory().unwrap();
    let fk = db.query("PRAGMA foreign_keys", &[]).unwrap();
    assert_eq!(fk.rows, vec![vec![Value::Integer(0)]]);
    // Keys are not enforced until the connection turns them on.
    db.execute_batch(
        "CREATE TABLE p(id INTEGER PRIMARY KEY);
         CREATE TABLE c(pid INT REFERENCES p(id));
         INSERT INTO c VALUES (7);",
    )
    .unwrap();
    db.execute_batch("PRAGMA foreign_keys = ON").unwrap();
    let err = db.execute_batch("INSERT INTO c VALUES (8)").unwrap_err();
    assert!(
        err.to_string().contains("FOREIGN KEY constraint failed"),
        "{err}"
    );
    let math = db
        .query(
            "SELECT pow(2, 10), round(sin(pi() / 2), 6), log10(1000)",
            &[],
        )
        .unwrap();
    assert_eq!(
        math.rows,
        vec![vec![
            Value::Real(1024.0),
            Value::Real(1.0),
            Value::Real(3.0)
        ]]
    );
}
