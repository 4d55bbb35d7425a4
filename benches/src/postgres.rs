//! A private PostgreSQL server for `pleroma bench serve`'s postgres arm.
//!
//! The binaries are Debian's (`/usr/lib/postgresql/<version>/bin`, the
//! `postgresql` package), else the directory `pg_config --bindir` names.
//! When neither is there the benchmark installs the package with apt-get
//! (through sudo when not root), as `scripts/test.sh` installs what the
//! tests need; without apt-get it fails saying what to install.
//!
//! The cluster lives in a directory the caller gives (a temporary one):
//! `initdb` with trust authentication, listening on 127.0.0.1 only, on a
//! free port, its socket in that directory. PostgreSQL refuses to run as
//! root, so as root every PostgreSQL program runs as the `postgres` system
//! user (which the Debian package creates; created with useradd when
//! missing). Dropping the [`Postgres`] stops the server (`pg_ctl stop -m
//! fast`), also when the benchmark fails.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A running server; stopped when dropped.
pub struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    owner: Option<(u32, u32)>,
    started: bool,
    pub port: u16,
}

/// The directory of `postgres`, `initdb` and `pg_ctl`, installing
/// PostgreSQL when it is missing.
pub fn bindir() -> Result<PathBuf, String> {
    if let Some(b) = find_bindir() {
        return Ok(b);
    }
    install()?;
    find_bindir().ok_or_else(|| {
        "PostgreSQL was installed but no /usr/lib/postgresql/*/bin/postgres is there: \
         install Debian's `postgresql` package"
            .into()
    })
}

fn find_bindir() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            ["postgres", "initdb", "pg_ctl"]
                .iter()
                .all(|p| bin.join(p).is_file())
                .then_some((v, bin))
        })
        .collect();
    found.sort();
    if let Some((_, b)) = found.pop() {
        return Some(b);
    }
    let out = Command::new("pg_config").arg("--bindir").output().ok()?;
    let b = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && b.join("initdb").is_file() && b.join("postgres").is_file())
        .then_some(b)
}

fn install() -> Result<(), String> {
    let has = |p: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !has("apt-get") {
        return Err(
            "pleroma bench serve: the postgres arm needs PostgreSQL's server programs \
             (initdb, pg_ctl, postgres): install PostgreSQL with your package manager"
                .into(),
        );
    }
    eprintln!("pleroma bench serve: installing PostgreSQL (apt-get install postgresql) for the postgres arm");
    let sudo = if unsafe { libc::geteuid() } == 0 {
        ""
    } else {
        "sudo "
    };
    let script = format!(
        "export DEBIAN_FRONTEND=noninteractive; {sudo}apt-get update -qq && \
         {sudo}apt-get install -y -qq postgresql"
    );
    let st = Command::new("sh")
        .args(["-c", &script])
        .status()
        .map_err(|e| format!("running apt-get: {e}"))?;
    if !st.success() {
        return Err(format!(
            "`{script}` failed ({st}): install Debian's `postgresql` package, then run this again"
        ));
    }
    Ok(())
}

/// The uid and gid PostgreSQL's programs run as: none when we are not
/// root, else the `postgres` user's (created when missing).
fn owner() -> Result<Option<(u32, u32)>, String> {
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let lookup = || {
        let pw = unsafe { libc::getpwnam(c"postgres".as_ptr()) };
        (!pw.is_null()).then(|| unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
    };
    if let Some(ids) = lookup() {
        return Ok(Some(ids));
    }
    let st = Command::new("useradd")
        .args(["--system", "--user-group", "--no-create-home", "postgres"])
        .status()
        .map_err(|e| format!("useradd postgres: {e}"))?;
    match lookup() {
        Some(ids) if st.success() => Ok(Some(ids)),
        _ => Err(
            "PostgreSQL does not run as root and no `postgres` user could be created \
                  (useradd --system postgres)"
                .into(),
        ),
    }
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

impl Postgres {
    /// initdb in `dir/pg`, then start the server with `settings` (name,
    /// value as postgresql.conf spells it) added to the configuration.
    pub fn start(dir: &Path, settings: &[(&str, &str)]) -> Result<Postgres, String> {
        let bin = bindir()?;
        let owner = owner()?;
        let data = dir.join("pg");
        std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
        if let Some((u, g)) = owner {
            std::os::unix::fs::chown(&data, Some(u), Some(g))
                .map_err(|e| format!("chown {}: {e}", data.display()))?;
        }
        let mut pg = Postgres {
            bin,
            data,
            owner,
            started: false,
            port: 0,
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
                "bench",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        )?;
        pg.port = free_port()?;
        let mut conf = format!(
            "\n# pleroma bench serve\nport = {}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{d}'\n",
            pg.port
        );
        for (k, v) in settings {
            conf.push_str(&format!("{k} = {v}\n"));
        }
        let file = pg.data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
        text.push_str(&conf);
        std::fs::write(&file, text).map_err(|e| e.to_string())?;
        let log = pg.data.join("server.log").display().to_string();
        // From here on a drop stops the server (a start that timed out may
        // still have started it).
        pg.started = true;
        if let Err(e) = pg.run(
            "pg_ctl",
            &["-D", &d, "-l", &log, "-w", "-t", "120", "start"],
        ) {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(format!("{e}\nserver log:\n{}", tail.join("\n")));
        }
        Ok(pg)
    }

    /// The server's version (`postgres --version`).
    pub fn version(&self) -> String {
        Command::new(self.bin.join("postgres"))
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let mut cmd = Command::new(self.bin.join(program));
        cmd.args(args)
            .current_dir(self.data.parent().unwrap_or(Path::new("/")));
        if let Some((u, g)) = self.owner {
            cmd.uid(u).gid(g);
        }
        let out = cmd.output().map_err(|e| format!("{program}: {e}"))?;
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
            eprintln!("pleroma bench serve: stopping PostgreSQL: {e}");
        }
    }
}
