//! `pleroma serve`: one SQLite database, with its planes, behind the
//! PostgreSQL v3 wire protocol (simple and extended queries, SCRAM-SHA-256,
//! TLS), so `psql`, Postgres drivers and dashboards can query it. The SQL
//! dialect stays SQLite's; see `docs/server.md`.
//!
//! Every client session gets its own [`pleroma::Connection`] on the file,
//! on a thread of its own; the connections of this process share the
//! file's planes. The server keeps one more connection open for its whole
//! life, so the planes stay published between sessions.

// Errors travel as pgwire's `ErrorInfo`, the shape the wire sends; they are
// the cold path, so their size does not matter.
#![allow(clippy::result_large_err)]

/// A line on the server's log (standard error). A closed or full stderr
/// must not take a session down, so write errors are ignored.
macro_rules! log {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod cancel;
mod catalog_db;
mod copy;
mod cursor;
mod handler;
mod jobs;
mod pg_catalog;
mod session;
mod settings;
mod sqlstate;
mod translate;
mod users;
mod wire;
mod writers;

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pgwire::api::RandomPidSecretKeyGenerator;
use pgwire::tokio::process_socket;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

pub use settings::SERVER_VERSION;
pub use users::{add_user, User, Users};

/// What `pleroma serve` serves, and how.
#[derive(Clone, Debug)]
pub struct Config {
    pub database: PathBuf,
    pub listen: SocketAddr,
    /// PEM files of the certificate chain and its private key.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The users file; without it only loopback clients, all trusted.
    pub users: Option<PathBuf>,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        source: pleroma::Error,
    },
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: io::Error },
}

/// A server running on background threads; dropping it stops it.
pub struct Running {
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
    _keeper: std::sync::Mutex<pleroma::Connection>,
}

impl Running {
    /// The address it listens on (the real port when 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Blocks until the process ends.
    pub fn wait(mut self) {
        let rt = self
            .runtime
            .take()
            .expect("a running server has its runtime");
        rt.block_on(std::future::pending::<()>());
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

fn tls_acceptor(cert: &Path, key: &Path) -> Result<(TlsAcceptor, Vec<u8>), Error> {
    let bad = |what: &str, p: &Path, e: &dyn std::fmt::Display| {
        Error::Config(format!("{what} {}: {e}", p.display()))
    };
    let pem = std::fs::read(cert).map_err(|e| bad("cannot read the certificate", cert, &e))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad("no PEM certificate in", cert, &e))?;
    if certs.is_empty() {
        return Err(bad("no certificate in", cert, &"empty"));
    }
    let key_der =
        PrivateKeyDer::from_pem_file(key).map_err(|e| bad("no PEM private key in", key, &e))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| Error::Config(format!("the TLS certificate and key do not fit: {e}")))?;
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok((TlsAcceptor::from(Arc::new(config)), pem))
}

/// Starts serving `config.database` and returns once it listens.
pub fn start(config: &Config) -> Result<Running, Error> {
    let users = match &config.users {
        Some(p) => Some(Arc::new(Users::load(p).map_err(Error::Config)?)),
        None => {
            if !config.listen.ip().is_loopback() {
                return Err(Error::Config(format!(
                    "without --users every client is trusted, so the server listens on loopback \
                     only; {} is not a loopback address (add --users FILE)",
                    config.listen
                )));
            }
            None
        }
    };
    let tls = match &config.tls {
        Some((cert, key)) => Some(tls_acceptor(cert, key)?),
        None => None,
    };
    let auth = Arc::new(match users {
        None => handler::Auth::Trust,
        Some(u) => {
            let pem = tls.as_ref().map(|(_, pem)| pem.as_slice());
            let scram = handler::scram(u.clone(), pem)
                .map_err(|e| Error::Config(format!("the TLS certificate: {e}")))?;
            handler::Auth::Scram(u, scram)
        }
    });
    let open_err = |source| Error::Open {
        path: config.database.display().to_string(),
        source,
    };
    // WAL: readers in parallel with the one writer, and commits shared
    // between the sessions' connections without a rebuild.
    let keeper = pleroma::Connection::open(&config.database).map_err(open_err)?;
    keeper
        .sqlite()
        .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        .map_err(|e| open_err(e.into()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("pleroma-serve")
        .enable_all()
        .build()
        .map_err(|e| Error::Config(format!("cannot start the runtime: {e}")))?;
    let listen_err = |source| Error::Listen {
        addr: config.listen,
        source,
    };
    // Bound here, so a caller inside another runtime can start a server too.
    let std_listener = std::net::TcpListener::bind(config.listen).map_err(listen_err)?;
    std_listener.set_nonblocking(true).map_err(listen_err)?;
    let addr = std_listener.local_addr().map_err(listen_err)?;
    let path = config.database.clone();
    let pids = Arc::new(RandomPidSecretKeyGenerator::default());
    let writers = Arc::new(writers::Writers::default());
    let cancels = Arc::new(pgwire::api::ConnectionManager::new());
    let acceptor = tls.map(|(a, _)| a);
    runtime.spawn(async move {
        let listener = match TcpListener::from_std(std_listener) {
            Ok(l) => l,
            Err(e) => {
                log!("pleroma serve: cannot listen: {e}");
                return;
            }
        };
        loop {
            let (socket, peer) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    log!("pleroma serve: accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = socket.set_nodelay(true);
            let handlers = Arc::new(handler::Handlers::new(
                path.clone(),
                auth.clone(),
                pids.clone(),
                writers.clone(),
                cancels.clone(),
            ));
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Err(e) = process_socket(socket, acceptor, handlers).await {
                    log!("pleroma serve: connection from {peer} ended: {e}");
                }
            });
        }
    });
    Ok(Running {
        addr,
        runtime: Some(runtime),
        _keeper: std::sync::Mutex::new(keeper),
    })
}
