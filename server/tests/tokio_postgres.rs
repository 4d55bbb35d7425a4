//! A Rust client (tokio-postgres, rustls) against `pleroma serve` with TLS
//! and SCRAM-SHA-256 passwords: the certificate is made here (rcgen), the
//! users file by `add_user`. Answers are compared with plain SQLite; bad
//! passwords and a TLS-only user in clear text are refused.

mod common;

use common::simple_rows;

use std::path::PathBuf;
use std::sync::Arc;

use common::{sqlite, Cell, QUERIES};
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls};
use tokio_rustls::rustls;

struct Tls {
    cert: PathBuf,
    key: PathBuf,
    pem: String,
}

fn make_cert(dir: &std::path::Path) -> Tls {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let pem = ck.cert.pem();
    let cert = dir.join("server.crt");
    let key = dir.join("server.key");
    std::fs::write(&cert, &pem).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    Tls { cert, key, pem }
}

fn connector(pem: &str) -> tokio_postgres_rustls::MakeRustlsConnect {
    let mut roots = rustls::RootCertStore::empty();
    use rustls_pki_types::pem::PemObject;
    let der = rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
    roots.add(der).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_postgres_rustls::MakeRustlsConnect::new(config)
}

fn conninfo(port: u16, user: &str, password: &str, sslmode: &str) -> String {
    let password = password.replace('\\', "\\\\").replace('\'', "\\'");
    format!(
        "host=localhost hostaddr=127.0.0.1 port={port} user={user} password='{password}' dbname=ledger sslmode={sslmode}"
    )
}

async fn connect_tls(
    port: u16,
    user: &str,
    password: &str,
    pem: &str,
) -> Result<Client, tokio_postgres::Error> {
    let (client, conn) =
        tokio_postgres::connect(&conninfo(port, user, password, "require"), connector(pem)).await?;
    tokio::spawn(conn);
    Ok(client)
}

struct Setup {
    f: common::Fixture,
    tls: Tls,
    server: pleroma_server::Running,
}

fn setup() -> Setup {
    let f = common::fixture();
    let tls = make_cert(f.dir.path());
    let users = f.dir.path().join("users");
    pleroma_server::add_user(&users, "ann", "ann's secret", false).unwrap();
    pleroma_server::add_user(&users, "bob", "bob's secret", true).unwrap();
    let text = std::fs::read_to_string(&users).unwrap();
    assert!(!text.contains("secret"), "no password in the users file");
    let server = common::serve_with(
        &f.db,
        Some(users),
        Some((tls.cert.clone(), tls.key.clone())),
    );
    Setup { f, tls, server }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_scram_answer_what_sqlite_answers() {
    let s = setup();
    let port = s.server.addr().port();
    let client = connect_tls(port, "ann", "ann's secret", &s.tls.pem)
        .await
        .unwrap();

    for q in QUERIES {
        assert_eq!(simple_rows(&client, q).await, sqlite(&s.f.db, q), "{q}");
    }

    // Extended protocol, prepared statement with typed parameters: column
    // types from SQLite's declared types (an expression's is text).
    let slice = "SELECT region, SUM(amount_cents) FROM invoices WHERE status = $1 AND month >= $2 GROUP BY region ORDER BY region";
    let want = sqlite(
        &s.f.db,
        "SELECT region, SUM(amount_cents) FROM invoices WHERE status = 'open' AND month >= 202407 GROUP BY region ORDER BY region",
    );
    let stmt = client
        .prepare_typed(slice, &[Type::TEXT, Type::INT8])
        .await
        .unwrap();
    assert_eq!(stmt.columns()[0].type_(), &Type::TEXT);
    for _ in 0..3 {
        let rows = client.query(&stmt, &[&"open", &202407i64]).await.unwrap();
        let got: Vec<Vec<Cell>> = rows
            .iter()
            .map(|r| {
                vec![
                    Cell::parse(r.get::<_, &str>(0)),
                    Cell::parse(r.get::<_, &str>(1)),
                ]
            })
            .collect();
        assert_eq!(got, want);
    }

    // Bind before Describe (query_typed), binary results: int8, float8,
    // text and bytea from the declared types; an untyped parameter is TEXT.
    let rows = client
        .query_typed(
            "SELECT i, r, t, b, typeof($2) FROM kinds WHERE i = $1",
            &[(&7i64, Type::INT8), (&"7", Type::UNKNOWN)],
        )
        .await
        .unwrap();
    let types: Vec<Type> = rows[0]
        .columns()
        .iter()
        .map(|c| c.type_().clone())
        .collect();
    assert_eq!(
        types,
        [
            Type::INT8,
            Type::FLOAT8,
            Type::TEXT,
            Type::BYTEA,
            Type::TEXT
        ]
    );
    let r = &rows[0];
    let got = vec![
        Cell::Num(r.get::<_, i64>(0) as f64),
        Cell::Num(r.get::<_, f64>(1)),
        Cell::parse(r.get::<_, &str>(2)),
        Cell::Text(format!(
            "\\x{}",
            r.get::<_, Vec<u8>>(3)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        )),
        Cell::parse(r.get::<_, &str>(4)),
    ];
    assert_eq!(
        vec![got],
        sqlite(
            &s.f.db,
            "SELECT i, r, t, b, typeof('7') FROM kinds WHERE i = 7"
        )
    );
    let nulls = client
        .query_typed("SELECT i, r, t, b FROM kinds WHERE i IS NULL", &[])
        .await
        .unwrap();
    assert_eq!(nulls.len(), 1);
    assert!(nulls[0].get::<_, Option<f64>>(1).is_none());

    // The TLS-only user, over TLS.
    let bob = connect_tls(port, "bob", "bob's secret", &s.tls.pem)
        .await
        .unwrap();
    assert_eq!(
        simple_rows(&bob, QUERIES[1]).await,
        sqlite(&s.f.db, QUERIES[1])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_passwords_and_tls_only_users_in_clear_are_refused() {
    let s = setup();
    let port = s.server.addr().port();

    let e = connect_tls(port, "ann", "wrong", &s.tls.pem)
        .await
        .map(|_| ())
        .expect_err("a wrong password is refused");
    assert_eq!(e.code().map(|c| c.code()), Some("28P01"), "{e}");
    let e = connect_tls(port, "nobody", "x", &s.tls.pem)
        .await
        .map(|_| ())
        .expect_err("an unknown user is refused");
    assert_eq!(e.code().map(|c| c.code()), Some("28P01"), "{e}");

    let e = tokio_postgres::connect(&conninfo(port, "bob", "bob's secret", "disable"), NoTls)
        .await
        .map(|_| ())
        .expect_err("a TLS-only user in clear text is refused");
    assert_eq!(e.code().map(|c| c.code()), Some("28000"), "{e}");
    let message = e
        .as_db_error()
        .map(|d| d.message().to_owned())
        .unwrap_or_default();
    assert!(message.contains("only connect over TLS"), "{e:?}");

    // Clear text is fine for a user without the flag; the server serves on.
    let (ann, conn) =
        tokio_postgres::connect(&conninfo(port, "ann", "ann's secret", "disable"), NoTls)
            .await
            .map_err(|e| format!("{e:?}"))
            .unwrap();
    tokio::spawn(conn);
    assert_eq!(
        simple_rows(&ann, QUERIES[0]).await,
        sqlite(&s.f.db, QUERIES[0])
    );
}

#[test]
fn without_users_the_server_only_listens_on_loopback() {
    let f = common::fixture();
    let e = pleroma_server::start(&pleroma_server::Config {
        database: f.db.clone(),
        listen: "0.0.0.0:0".parse().unwrap(),
        tls: None,
        users: None,
    })
    .map(|_| ())
    .expect_err("a trusted server on every interface is refused");
    assert!(e.to_string().contains("loopback"), "{e}");
}
