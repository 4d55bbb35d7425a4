//! `psql` (Debian's postgresql-client) against `pleroma serve`: a script of
//! the ledger queries, a rolled-back and a committed write, then `\dt` and
//! `\d invoices`, each compared with plain SQLite on the same file.

mod common;

use std::process::Command;

use common::{require, sqlite, Cell, QUERIES};

const NULL: &str = "<null>";

fn psql(port: u16, args: &[&str]) -> String {
    let psql = require("psql", "apt-get install postgresql-client");
    let out = Command::new(psql)
        .args([
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
            "-U",
            "tester",
            "-d",
            "ledger",
        ])
        .args(["-p", &port.to_string(), "-P", &format!("null={NULL}")])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "psql failed: {stderr}\n{stdout}");
    assert!(stderr.is_empty(), "psql wrote to stderr: {stderr}");
    stdout
}

fn cells(line: &str) -> Vec<Cell> {
    line.split('|')
        .map(|c| {
            if c == NULL {
                Cell::Null
            } else {
                Cell::parse(c)
            }
        })
        .collect()
}

#[test]
fn a_psql_script_answers_what_sqlite_answers() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let port = server.addr().port();

    let mut script = String::new();
    for q in QUERIES {
        script.push_str(q);
        script.push_str(";\n\\echo ---\n");
    }
    // A write that rolls back leaves nothing; one in autocommit stays.
    script.push_str(
        "BEGIN;\nINSERT INTO invoices(region, status, month, amount_cents) VALUES ('north', 'paid', 202401, 1);\n\
         ROLLBACK;\nUPDATE invoices SET status = 'paid' WHERE id <= 10;\n",
    );
    script.push_str(QUERIES[1]);
    script.push_str(";\n\\echo ---\n");
    let path = f.dir.path().join("script.sql");
    std::fs::write(&path, &script).unwrap();
    // The queries before the write see the file as it is now.
    let undo = f.dir.path().join("before.db");
    common::copy_db(&f.db, &undo);
    let out = psql(port, &["-A", "-t", "-F", "|", "-f", path.to_str().unwrap()]);

    let blocks: Vec<&str> = out.split("---\n").collect();
    assert_eq!(blocks.len(), QUERIES.len() + 2, "{out}");
    for (q, block) in QUERIES.iter().zip(&blocks) {
        let got: Vec<Vec<Cell>> = block.lines().map(cells).collect();
        assert_eq!(got, sqlite(&undo, q), "{q}");
    }
    let got: Vec<Vec<Cell>> = blocks[QUERIES.len()].lines().map(cells).collect();
    assert_eq!(got, sqlite(&f.db, QUERIES[1]), "after the update");
    assert_eq!(
        sqlite(
            &f.db,
            "SELECT COUNT(*) FROM invoices WHERE amount_cents = 1"
        ),
        sqlite(
            &undo,
            "SELECT COUNT(*) FROM invoices WHERE amount_cents = 1"
        ),
        "the rolled-back insert left nothing"
    );
}

#[test]
fn psql_describes_tables_from_sqlites_schema() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let port = server.addr().port();

    let out = psql(port, &["-A", "-F", "|", "-c", "\\dt"]);
    let names: Vec<String> = out
        .lines()
        .filter(|l| l.starts_with("public|"))
        .map(|l| l.split('|').nth(1).unwrap().to_owned())
        .collect();
    let want: Vec<String> = sqlite(
        &f.db,
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    )
    .into_iter()
    .map(|r| match &r[0] {
        Cell::Text(s) => s.clone(),
        c => panic!("{c:?}"),
    })
    .collect();
    assert!(want.contains(&"invoices".to_owned()));
    assert_eq!(names, want, "{out}");

    let out = psql(port, &["-A", "-F", "|", "-c", "\\d invoices"]);
    assert!(out.contains("Table \"public.invoices\""), "{out}");
    // The columns, up to the index list.
    let lines: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Column|"))
        .skip(1)
        .take_while(|l| !l.is_empty() && !l.starts_with("Indexes:"))
        .collect();
    let want = sqlite(
        &f.db,
        "SELECT name, type, CASE WHEN \"notnull\" OR (pk = 1 AND upper(type) = 'INTEGER') \
                THEN 'not null' ELSE '' END, COALESCE(dflt_value, '') \
         FROM pragma_table_info('invoices') ORDER BY cid",
    );
    assert_eq!(lines.len(), want.len(), "{out}");
    for (line, w) in lines.iter().zip(&want) {
        let c: Vec<&str> = line.split('|').collect();
        // Column | Type | Collation | Nullable | Default
        let got = vec![
            Cell::parse(c[0]),
            Cell::parse(c[1]),
            Cell::parse(c[3]),
            Cell::parse(c[4]),
        ];
        assert_eq!(&got, w, "{out}");
    }
}

#[test]
fn an_error_in_psql_carries_sqlites_message_and_sqlstate() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let psql = require("psql", "apt-get install postgresql-client");
    let out = Command::new(psql)
        .args([
            "-X",
            "-h",
            "127.0.0.1",
            "-U",
            "t",
            "-d",
            "ledger",
            "-v",
            "VERBOSITY=verbose",
        ])
        .args(["-p", &server.addr().port().to_string()])
        .args([
            "-c",
            "\\set VERBOSITY verbose",
            "-c",
            "SELECT * FROM no_such",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success());
    assert!(
        stderr.contains("42P01") && stderr.contains("no such table: no_such"),
        "{stderr}"
    );

    // A catalog query it does not emulate is declined, not answered empty.
    let out = Command::new(require("psql", "apt-get install postgresql-client"))
        .args(["-X", "-h", "127.0.0.1", "-U", "t", "-d", "ledger"])
        .args(["-p", &server.addr().port().to_string(), "-c", "\\df"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success());
    assert!(
        stderr.contains("does not emulate this catalog query"),
        "{stderr}"
    );
}

/// `\\l`, `\\dn`, `\\di` and the index list of `\\d TABLE`, from SQLite's
/// schema; `version()` and `current_schema()`.
#[test]
fn psql_lists_the_database_its_schema_and_indexes() {
    let f = common::fixture();
    {
        let mut c = pleroma::Connection::open(&f.db).unwrap();
        c.execute_batch(
            "CREATE INDEX inv_month ON invoices(month DESC) WHERE month > 0;
             CREATE TABLE codes(code TEXT PRIMARY KEY, label TEXT UNIQUE) WITHOUT ROWID;
             CREATE TABLE \"Mixed_Case\"(x);",
        )
        .unwrap();
    }
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let rows = |cmd: &str| -> Vec<String> {
        psql(port, &["-A", "-t", "-F", "|", "-c", cmd])
            .lines()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(rows("\\l"), ["ledger|pleroma|UTF8|C|C||libc|"]);
    assert_eq!(rows("\\dn"), ["public|pleroma"]);
    // psql's headers, in their case.
    let l = psql(port, &["-A", "-c", "\\l"]);
    assert!(
        l.starts_with("List of databases\nName|Owner|Encoding"),
        "{l}"
    );
    // Name patterns are PostgreSQL's: case-sensitive, psql folding an
    // unquoted one to lower case.
    assert_eq!(rows("\\dt Codes"), ["public|codes|table|pleroma"]);
    assert_eq!(
        rows("\\dt \"Mixed_Case\""),
        ["public|Mixed_Case|table|pleroma"]
    );
    assert!(rows("\\dt Mixed_Case").is_empty());
    // Every index SQLite has, with its table: the user's, those of
    // constraints, and Pleroma's guard.
    let want: Vec<String> = sqlite(
        &f.db,
        "SELECT name, tbl_name FROM sqlite_schema WHERE type = 'index' ORDER BY name",
    )
    .into_iter()
    .map(|r| match (&r[0], &r[1]) {
        (Cell::Text(n), Cell::Text(t)) => format!("public|{n}|index|pleroma|{t}"),
        c => panic!("{c:?}"),
    })
    .collect();
    assert!(want.len() >= 3, "{want:?}");
    assert_eq!(rows("\\di"), want);
    assert_eq!(
        rows("\\di inv*"),
        ["public|inv_month|index|pleroma|invoices"]
    );
    let d = psql(port, &["-c", "\\d invoices"]);
    assert!(
        d.contains("Indexes:\n    \"inv_month\" btree (month DESC) WHERE month > 0"),
        "{d}"
    );
    let d = psql(port, &["-c", "\\d codes"]);
    assert!(
        d.contains("\"sqlite_autoindex_codes_1\" PRIMARY KEY, btree (code)")
            && d.contains("\"sqlite_autoindex_codes_2\" UNIQUE CONSTRAINT, btree (label)"),
        "{d}"
    );
    let v = rows(
        "SELECT version(), pg_catalog.version() = version(), current_schema(), current_database()",
    );
    assert!(v[0].starts_with("PostgreSQL 16.0 (Pleroma "), "{v:?}");
    assert!(
        v[0].contains(&format!("SQLite {}", pleroma::rusqlite::version())),
        "{v:?}"
    );
    assert!(v[0].ends_with("|1|public|ledger"), "{v:?}");
}

/// psql's command tags (what a driver's `rowcount` reads) count the user's
/// rows, as plain SQLite's `changes()` does: not the state row Pleroma
/// writes with each write on a file with persisted planes.
#[test]
fn command_tags_count_the_users_rows_not_the_state_row() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let psql = require("psql", "apt-get install postgresql-client");
    let count = |filter: &str| match &sqlite(
        &f.db,
        &format!("SELECT COUNT(*) FROM invoices WHERE {filter}"),
    )[0][0]
    {
        Cell::Num(n) => *n as u64,
        other => panic!("count: {other:?}"),
    };
    let writes = [
        ("INSERT INTO invoices(region, status, month, amount_cents) VALUES ('north', 'paid', 202401, 5), ('south', 'paid', 202401, 6)", None),
        ("UPDATE invoices SET amount_cents = amount_cents + 1 WHERE region = 'north'", Some("region = 'north'")),
        ("DELETE FROM invoices WHERE id > 1990", Some("id > 1990")),
        ("/* a comment first */ UPDATE invoices SET status = 'x' WHERE id < 5", Some("id < 5")),
        ("UPDATE invoices SET status = 'y' WHERE id < 0", Some("id < 0")),
    ];
    for (sql, filter) in writes {
        let want = filter.map_or(2, count);
        let out = Command::new(&psql)
            .args([
                "-X",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-U",
                "t",
                "-d",
                "ledger",
            ])
            .args(["-p", &server.addr().port().to_string(), "-c", sql])
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tag = stdout.trim();
        let n: u64 = tag
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap_or_else(|_| panic!("tag {tag}"));
        assert_eq!(n, want, "{sql}: psql printed {tag}");
    }
}
