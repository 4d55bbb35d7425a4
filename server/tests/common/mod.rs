//! What the server tests share: a database file with a planed ledger, a
//! server on it (127.0.0.1, an ephemeral port), and the same file read by
//! plain SQLite (rusqlite, no Pleroma) as the oracle.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use pleroma::rusqlite;
use pleroma::rusqlite::types::ValueRef;

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
}

/// The ledger: 2,000 invoices over 4 regions x 3 statuses x 12 months, a
/// plane on it, and a table whose column changes storage class.
pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ledger.db");
    let mut conn = pleroma::Connection::open(&db).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE invoices(id INTEGER PRIMARY KEY, region TEXT NOT NULL, status TEXT,
                               month INTEGER, amount_cents INTEGER DEFAULT 0);
         CREATE TABLE mixed(k INTEGER, v);
         INSERT INTO mixed VALUES (1, 10), (2, 2.5), (3, 'three'), (4, NULL);
         CREATE TABLE kinds(i INTEGER, r REAL, t TEXT, b BLOB);
         INSERT INTO kinds VALUES (7, 2.5, 'x', x'00ff10'), (NULL, NULL, NULL, NULL);",
    )
    .unwrap();
    conn.begin().unwrap();
    let regions = ["north", "south", "east", "west"];
    let statuses = ["paid", "open", "void"];
    for i in 0..2000i64 {
        conn.execute(
            "INSERT INTO invoices(region, status, month, amount_cents) VALUES (?, ?, ?, ?)",
            &[
                pleroma::Value::Text(regions[(i % 4) as usize].into()),
                pleroma::Value::Text(statuses[(i * 7 % 3) as usize].into()),
                pleroma::Value::Integer(202401 + i % 12),
                pleroma::Value::Integer((i * 7919) % 100_000),
            ],
        )
        .unwrap();
    }
    conn.commit().unwrap();
    conn.execute(
        "PRAGMA pleroma_attach('invoices', 'region, status, month', 'amount_cents')",
        &[],
    )
    .unwrap();
    Fixture { dir, db }
}

pub fn serve(db: &Path) -> pleroma_server::Running {
    serve_with(db, None, None)
}

pub fn serve_with(
    db: &Path,
    users: Option<PathBuf>,
    tls: Option<(PathBuf, PathBuf)>,
) -> pleroma_server::Running {
    pleroma_server::start(&pleroma_server::Config {
        database: db.to_owned(),
        listen: "127.0.0.1:0".parse().unwrap(),
        tls,
        users,
    })
    .unwrap()
}

/// One value as text the way a PostgreSQL client shows it, so answers can
/// be compared cell by cell: numbers are compared as numbers.
#[derive(Debug, Clone)]
pub enum Cell {
    Null,
    Num(f64),
    Text(String),
}

impl PartialEq for Cell {
    fn eq(&self, other: &Cell) -> bool {
        match (self, other) {
            (Cell::Null, Cell::Null) => true,
            (Cell::Num(a), Cell::Num(b)) => a == b || (a.is_nan() && b.is_nan()),
            (Cell::Text(a), Cell::Text(b)) => a == b,
            _ => false,
        }
    }
}

impl Cell {
    /// A cell read back from a client's text output.
    pub fn parse(s: &str) -> Cell {
        match s.parse::<f64>() {
            Ok(x) if !s.trim().is_empty() => Cell::Num(x),
            _ => Cell::Text(s.to_owned()),
        }
    }
}

/// The oracle: `sql` on the file through plain SQLite.
pub fn sqlite(db: &Path, sql: &str) -> Vec<Vec<Cell>> {
    let conn = rusqlite::Connection::open(db).unwrap();
    // PleromaSumExact is Pleroma's; plain SQLite has exact 64-bit SUM.
    cells_of(&conn, &sql.replace("PleromaSumExact(", "SUM("))
}

/// `sql`'s rows on a plain SQLite connection, as cells.
pub fn cells_of(conn: &rusqlite::Connection, sql: &str) -> Vec<Vec<Cell>> {
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    let mut rows = stmt.query([]).unwrap();
    let mut out = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        out.push(
            (0..n)
                .map(|i| match r.get_ref(i).unwrap() {
                    ValueRef::Null => Cell::Null,
                    ValueRef::Integer(v) => Cell::Num(v as f64),
                    ValueRef::Real(v) => Cell::Num(v),
                    ValueRef::Text(t) => Cell::parse(std::str::from_utf8(t).unwrap()),
                    ValueRef::Blob(b) => Cell::Text(
                        std::iter::once("\\x".to_owned())
                            .chain(b.iter().map(|x| format!("{x:02x}")))
                            .collect(),
                    ),
                })
                .collect(),
        );
    }
    out
}

/// A program the tests run; missing, the test fails and says what to install.
pub fn require(program: &str, install: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("{program} is not installed: {install} (or run bash scripts/test.sh, which installs it)")
    })
}

/// The ledger queries the tests send through every client: plane-served
/// slices, engine queries, an exact sum, and a column of changing class.
pub const QUERIES: &[&str] = &[
    "SELECT COUNT(*) FROM invoices",
    "SELECT region, SUM(amount_cents) FROM invoices WHERE status = 'paid' GROUP BY region ORDER BY region",
    "SELECT month, COUNT(*), MIN(amount_cents), MAX(amount_cents) FROM invoices WHERE region IN ('north', 'east') GROUP BY month ORDER BY month",
    "SELECT status, AVG(amount_cents) FROM invoices GROUP BY status ORDER BY status",
    "SELECT COUNT(*) FROM invoices WHERE amount_cents > 50000",
    "SELECT id, region, amount_cents FROM invoices WHERE id % 397 = 0 ORDER BY id",
    "SELECT PleromaSumExact(amount_cents) FROM invoices WHERE month BETWEEN 202403 AND 202406",
    "SELECT k, v FROM mixed ORDER BY k",
    "SELECT 1.5, -0.25, 1e300, 'it''s', NULL",
];

/// A consistent copy of the database as it is now (through Pleroma: a
/// file with persisted planes has triggers that call its functions).
pub fn copy_db(db: &Path, copy: &Path) {
    let mut conn = pleroma::Connection::open(db).unwrap();
    conn.execute(
        "VACUUM INTO ?1",
        &[pleroma::Value::Text(copy.to_str().unwrap().to_owned())],
    )
    .unwrap();
}

/// A tokio-postgres client of the server at `port` on loopback (user `t`,
/// database `ledger`), its connection driven by a task of its own.
pub async fn connect(port: u16) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=t dbname=ledger"),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e:?}"));
    tokio::spawn(conn);
    client
}

/// The rows of a simple-protocol query as cells; a failed query panics
/// with the statement and the error.
pub async fn simple_rows(client: &tokio_postgres::Client, sql: &str) -> Vec<Vec<Cell>> {
    client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => Some(
                (0..r.len())
                    .map(|i| r.get(i).map_or(Cell::Null, Cell::parse))
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}
