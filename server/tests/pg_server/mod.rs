//! A private PostgreSQL server for the tests that need a real one (the
//! coordinator of `shards.rs`): Debian's server programs
//! (`/usr/lib/postgresql/<version>/bin`, the `postgresql` package, which
//! `scripts/test.sh` installs), else the directory in `PLEROMA_PG_BINDIR`,
//! else `pg_config --bindir`. Missing, the test fails and says what to
//! install; it never skips.
//!
//! The cluster lives in a temporary directory of its own: `initdb` with
//! trust authentication, listening on 127.0.0.1 only, its socket in that
//! directory. PostgreSQL refuses to run as root, so as root its programs
//! run as the `postgres` system user (`runuser -u postgres --`; the Debian
//! package creates the user) and the directory is given to that user.
//! Dropping the [`Postgres`] stops the server (`pg_ctl stop -m fast`), also
//! when the test fails.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

const INSTALL: &str = "install PostgreSQL's server (`apt-get install postgresql`: initdb, pg_ctl, \
                       postgres and the postgres_fdw extension), or run bash scripts/test.sh, \
                       which installs it";

/// A running server; stopped when dropped.
pub struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    as_postgres: bool,
    started: bool,
    pub port: u16,
    /// `postgres --version`.
    pub version: String,
    // Last: removed after the server is stopped.
    _dir: tempfile::TempDir,
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The directory of `postgres`, `initdb` and `pg_ctl`.
pub fn bindir() -> PathBuf {
    let has_all = |b: &Path| {
        ["postgres", "initdb", "pg_ctl"]
            .iter()
            .all(|p| b.join(p).is_file())
    };
    if let Some(b) = std::env::var_os("PLEROMA_PG_BINDIR").map(PathBuf::from) {
        assert!(
            has_all(&b),
            "PLEROMA_PG_BINDIR={} has no initdb, pg_ctl and postgres: {INSTALL}",
            b.display()
        );
        return b;
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            has_all(&bin).then_some((v, bin))
        })
        .collect();
    found.sort();
    if let Some((_, b)) = found.pop() {
        return b;
    }
    Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|b| has_all(b))
        .unwrap_or_else(|| panic!("PostgreSQL's server programs are not installed: {INSTALL}"))
}

/// A free loopback port, the first of `ports` that is, else any.
pub fn free_port(ports: std::ops::RangeInclusive<u16>) -> u16 {
    ports
        .into_iter()
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .unwrap_or_else(|| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        })
}

impl Postgres {
    /// initdb, then start the server on `port` with `settings` (name,
    /// value as postgresql.conf spells it) added to its configuration.
    pub fn start(port: u16, settings: &[(&str, &str)]) -> Postgres {
        let bin = bindir();
        let as_postgres = is_root();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        if as_postgres {
            let st = Command::new("chown")
                .args(["-R", "postgres:", dir.path().to_str().unwrap()])
                .status()
                .unwrap();
            assert!(
                st.success(),
                "PostgreSQL does not run as root and there is no `postgres` user to run it: {INSTALL}"
            );
        }
        let version = Command::new(bin.join("postgres"))
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        let mut pg = Postgres {
            bin,
            data,
            as_postgres,
            started: false,
            port,
            version,
            _dir: dir,
        };
        let d = pg.data.display().to_string();
        pg.run(
            "initdb",
            &[
                "-D",
                &d,
                "-A",
                "trust",
                "-U",
                "coord",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        )
        .unwrap();
        let mut conf = format!(
            "\n# pleroma's tests\nport = {port}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{d}'\nfsync = off\n"
        );
        for (k, v) in settings {
            conf.push_str(&format!("{k} = {v}\n"));
        }
        let file = pg.data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&file).unwrap();
        text.push_str(&conf);
        std::fs::write(&file, text).unwrap();
        let log = pg.data.join("server.log").display().to_string();
        // From here on a drop stops the server (a start that timed out may
        // still have started it).
        pg.started = true;
        if let Err(e) = pg.run("pg_ctl", &["-D", &d, "-l", &log, "-w", "-t", "60", "start"]) {
            panic!("{e}\nserver log:\n{}", pg.log_tail(30));
        }
        pg
    }

    /// The last `n` lines of the server's log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(self.data.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// The connection string of a client of database `postgres`.
    pub fn conninfo(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=coord dbname=postgres",
            self.port
        )
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let prog = self.bin.join(program);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&prog);
            c
        } else {
            Command::new(&prog)
        };
        cmd.args(args).current_dir(self.data.parent().unwrap());
        let out = cmd
            .output()
            .map_err(|e| format!("{}: {e}", prog.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{program} {} failed ({}): {}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if !self.started {
            return;
        }
        let d = self.data.display().to_string();
        if let Err(e) = self.run("pg_ctl", &["-D", &d, "-m", "fast", "-w", "stop"]) {
            eprintln!("stopping the test's PostgreSQL: {e}");
        }
    }
}
