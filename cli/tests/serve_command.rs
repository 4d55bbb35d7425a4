//! `pleroma serve` as a program: `--add-user` writes a verifier (never the
//! password), `serve FILE --users ... --listen 127.0.0.1:0` announces its
//! address and answers psql with the password, as plain SQLite answers.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn pleroma() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pleroma"))
}

#[test]
fn serve_with_users_answers_psql_with_a_password() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let users = dir.path().join("users");
    {
        let c = pleroma::rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(
            "CREATE TABLE sales(country TEXT, year INTEGER, amount INTEGER);
             INSERT INTO sales VALUES ('DE', 2024, 10), ('FR', 2024, 7), ('DE', 2025, 5);",
        )
        .unwrap();
    }
    // The password from the environment, and from standard input.
    let out = pleroma()
        .args(["serve", "--add-user"])
        .arg(&users)
        .arg("ann")
        .env("PLEROMA_PASSWORD", "pw-from-env")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut add = pleroma()
        .args(["serve", "--add-user"])
        .arg(&users)
        .arg("bob")
        .env_remove("PLEROMA_PASSWORD")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    add.stdin
        .take()
        .unwrap()
        .write_all(b"pw-from-stdin\n")
        .unwrap();
    assert!(add.wait().unwrap().success());
    let text = std::fs::read_to_string(&users).unwrap();
    assert!(
        !text.contains("pw-from"),
        "no password in the users file: {text}"
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("SCRAM-SHA-256$"))
            .count(),
        2
    );

    let mut child = pleroma()
        .arg("serve")
        .arg(&db)
        .args(["--listen", "127.0.0.1:0", "--users"])
        .arg(&users)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _server = Server(child);
    let mut log = BufReader::new(stderr);
    let mut line = String::new();
    log.read_line(&mut line).unwrap();
    let port = line
        .split("listening on 127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address announced: {line}"));

    let psql = |user: &str, password: &str| {
        Command::new("psql")
            .args([
                "-X",
                "-A",
                "-t",
                "-h",
                "127.0.0.1",
                "-p",
                port,
                "-U",
                user,
                "-d",
                "s",
            ])
            .args([
                "-c",
                "SELECT country, SUM(amount) FROM sales GROUP BY country ORDER BY country",
            ])
            .env("PGPASSWORD", password)
            .output()
            .unwrap_or_else(|e| {
                panic!("psql: {e}: apt-get install postgresql-client (or bash scripts/test.sh)")
            })
    };
    let out = psql("bob", "pw-from-stdin");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = pleroma::rusqlite::Connection::open(&db).unwrap();
    let want: Vec<String> = c
        .prepare(
            "SELECT country || '|' || SUM(amount) FROM sales GROUP BY country ORDER BY country",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .collect::<Vec<_>>(),
        want
    );

    let out = psql("ann", "wrong");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("password authentication failed for user \"ann\""),
        "{stderr}"
    );
    let out = psql("ann", "pw-from-env");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The refusal is on the server's log.
    let mut line = String::new();
    log.read_line(&mut line).unwrap();
    assert!(
        line.contains("authentication of \"ann\"") && line.contains("failed"),
        "{line}"
    );
}
