//! The `pleroma` program: `demo`, `shell`, `sql`, `import`, `bench` and
//! `serve`, over the `pleroma` crate (the README's example runs as a doctest
//! of that crate).

mod demo;
mod dump;
mod format;
mod gather;
mod import;
mod param;
mod session;
mod shell;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::format::message;
use crate::gather::{Flow, Source};
use crate::session::Session;

/// Pleroma: an exact, live OLAP cube for SQLite.
#[derive(Parser)]
#[command(name = "pleroma", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the ledger, attach a plane, and run its 16 queries on plain
    /// SQLite and through Pleroma, side by side.
    Demo {
        /// Invoices to generate.
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
        /// Keep the ledger in this file (reused if it already holds one);
        /// without it a temporary file is used and removed.
        #[arg(long)]
        db: Option<PathBuf>,
    },
    /// An interactive SQL shell, like `sqlite3`; reads standard input as a
    /// script when it is not a terminal.
    Shell {
        /// The database file (created if missing); in memory if omitted.
        path: Option<PathBuf>,
    },
    /// Run SQL (and dot-commands such as `.mode csv`) and print the results
    /// in list mode; stops at the first error.
    Sql {
        /// The database file (created if missing).
        path: PathBuf,
        /// Each argument holds one or more statements, or one dot-command.
        #[arg(required = true)]
        sql: Vec<String>,
    },
    /// Load a CSV (with a header row) or Parquet file into a table, in one
    /// transaction: on any bad row nothing is loaded.
    ///
    /// The table is created if missing, with the file's columns and
    /// inferred types (INTEGER, REAL or TEXT). In CSV an empty field is NULL.
    Import {
        /// The database file (created if missing).
        path: PathBuf,
        /// The table to load into.
        table: String,
        /// A `.csv` or `.parquet` file.
        file: PathBuf,
    },
    /// Serve a database over the PostgreSQL wire protocol, for psql, drivers
    /// and dashboards (docs/server.md); the SQL dialect stays SQLite's.
    ///
    /// `pleroma serve --add-user USERS NAME` writes NAME's SCRAM-SHA-256
    /// verifier into the users file instead (the password comes from
    /// PLEROMA_PASSWORD, or else the first line of standard input).
    Serve {
        /// The database file (created if missing).
        #[arg(required_unless_present = "add_user")]
        file: Option<PathBuf>,
        /// The address to listen on; without --users it must be loopback.
        #[arg(long, default_value = "127.0.0.1:5433")]
        listen: std::net::SocketAddr,
        /// The server's certificate chain (PEM): clients may use TLS.
        #[arg(long, requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The certificate's private key (PEM).
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// The users file: every client then authenticates with SCRAM-SHA-256.
        #[arg(long)]
        users: Option<PathBuf>,
        /// Add or replace a user in a users file, then exit.
        #[arg(long, num_args = 2, value_names = ["USERS", "NAME"], conflicts_with_all = ["file", "users", "tls_cert"])]
        add_user: Option<Vec<PathBuf>>,
        /// With --add-user: the user may only connect over TLS.
        #[arg(long, requires = "add_user")]
        tls_required: bool,
    },
    /// The benchmark harness; `pleroma bench --help` lists its workloads.
    #[command(disable_help_flag = true)]
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// The `pleroma` program.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo { rows, db } => demo::run(rows, db),
        Command::Shell { path } => shell::run(path.as_deref()),
        Command::Sql { path, sql } => run_sql(path, &sql),
        Command::Import { path, table, file } => {
            import::run(&path, &table, &file).map(|()| ExitCode::SUCCESS)
        }
        Command::Serve {
            file,
            listen,
            tls_cert,
            tls_key,
            users,
            add_user,
            tls_required,
        } => match add_user {
            Some(args) => serve_add_user(&args[0], &args[1], tls_required),
            None => serve(pleroma_server::Config {
                database: file.expect("clap requires FILE without --add-user"),
                listen,
                tls: tls_cert.zip(tls_key),
                users,
            }),
        },
        Command::Bench { args } if args.first().map(String::as_str) == Some("serve") => {
            bench_serve(&args)
        }
        Command::Bench { args } => pleroma_benches::run_cli(args).map(|()| ExitCode::SUCCESS),
    };
    result.unwrap_or_else(|e| {
        // A reader that stops early (`| head`) is no error worth a word.
        let broken_pipe = e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        });
        if !broken_pipe {
            eprintln!("Error: {}", message(&e));
        }
        ExitCode::FAILURE
    })
}

/// `pleroma serve FILE`: serves until the process is stopped.
fn serve(config: pleroma_server::Config) -> anyhow::Result<ExitCode> {
    let running = pleroma_server::start(&config)?;
    eprintln!(
        "pleroma serve: listening on {} for {} ({}{})",
        running.addr(),
        config.database.display(),
        if config.users.is_some() {
            "SCRAM-SHA-256 passwords"
        } else {
            "loopback, trusted"
        },
        if config.tls.is_some() { ", TLS" } else { "" }
    );
    running.wait();
    Ok(ExitCode::SUCCESS)
}

/// `pleroma bench serve`: the server under load, side by side with
/// PostgreSQL (see `benches/src/serve.rs` for what it runs and checks).
#[derive(Parser)]
#[command(name = "pleroma bench serve")]
struct BenchServe {
    /// Invoices in the ledger.
    #[arg(long, default_value_t = 100_000)]
    rows: i64,
    /// Concurrent clients of the load phase.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Length of the load phase.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Calls of the round-trip phase.
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Also write the report as JSON (the harness's shape) to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

fn bench_serve(args: &[String]) -> anyhow::Result<ExitCode> {
    let a = BenchServe::try_parse_from(args)?;
    let start = |path: &std::path::Path| -> Result<(u16, Box<dyn std::any::Any>), String> {
        let server = pleroma_server::start(&pleroma_server::Config {
            database: path.to_owned(),
            listen: "127.0.0.1:0".parse().unwrap(),
            tls: None,
            users: None,
        })
        .map_err(|e| e.to_string())?;
        Ok((server.addr().port(), Box::new(server)))
    };
    pleroma_benches::serve::run(
        &pleroma_benches::serve::BenchOptions {
            rows: a.rows,
            clients: a.clients,
            seconds: a.seconds,
            calls: a.calls,
            json: a.json,
        },
        &start,
    )
    .map_err(anyhow::Error::msg)?;
    Ok(ExitCode::SUCCESS)
}

/// `pleroma serve --add-user USERS NAME`.
fn serve_add_user(
    users: &std::path::Path,
    name: &std::path::Path,
    tls: bool,
) -> anyhow::Result<ExitCode> {
    let name = name
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("the user name is not UTF-8"))?;
    let password = match std::env::var("PLEROMA_PASSWORD") {
        Ok(p) => p,
        Err(_) => {
            use std::io::IsTerminal;
            if std::io::stdin().is_terminal() {
                eprint!("password for {name} (echoed; or set PLEROMA_PASSWORD): ");
            }
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            line.trim_end_matches(['\n', '\r']).to_owned()
        }
    };
    pleroma_server::add_user(users, name, &password, tls).map_err(anyhow::Error::msg)?;
    eprintln!(
        "pleroma serve: wrote the SCRAM-SHA-256 verifier of {name} to {}",
        users.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `pleroma sql`: like `sqlite3 DB 'SQL' ...`, stopping at the first error.
fn run_sql(path: PathBuf, args: &[String]) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let mut s = Session::open(Some(&path))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for arg in args {
        if arg.trim_start().starts_with('.') {
            match s.dot(arg, &mut out)? {
                Flow::Continue => {}
                Flow::Quit => break,
                Flow::Exit(code) => {
                    out.flush()?;
                    return Ok(ExitCode::from(code));
                }
            }
        } else {
            s.run_sql(arg, Source::Argument, &mut out)?;
        }
        if s.errors > 0 {
            out.flush()?;
            return Ok(ExitCode::FAILURE);
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
