//! Running the `pleroma` program (and `sqlite3`) from the tests.

#![allow(dead_code)] // each test file uses its own part of this module

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// What a program printed and how it exited.
pub struct Ran {
    pub stdout: String,
    pub stderr: String,
    pub code: Option<i32>,
}

fn finish(out: Output) -> Ran {
    Ran {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    }
}

/// Run `program args` with `stdin` as its standard input.
pub fn run(program: &str, args: &[&str], stdin: &str) -> Ran {
    run_in(None, program, args, stdin)
}

/// `run`, in directory `dir` if given.
pub fn run_in(dir: Option<&Path>, program: &str, args: &[&str], stdin: &str) -> Ran {
    let mut command = Command::new(program);
    if let Some(d) = dir {
        command.current_dir(d);
    }
    let mut child = command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    finish(child.wait_with_output().expect("wait"))
}

/// Run the `pleroma` program built for these tests.
pub fn pleroma(args: &[&str], stdin: &str) -> Ran {
    run(env!("CARGO_BIN_EXE_pleroma"), args, stdin)
}

/// `pleroma shell DB` with `script` on standard input.
pub fn shell(db: &Path, script: &str) -> Ran {
    pleroma(&["shell", db.to_str().expect("utf-8 path")], script)
}

/// `pleroma sql DB ARGS...`, asserting success; returns standard output.
pub fn sql_ok(db: &Path, args: &[&str]) -> String {
    let mut all = vec!["sql", db.to_str().expect("utf-8 path")];
    all.extend_from_slice(args);
    let r = pleroma(&all, "");
    assert_eq!(r.code, Some(0), "pleroma sql {args:?} failed: {}", r.stderr);
    r.stdout
}

/// Whether the `sqlite3` program is on the PATH.
pub fn have_sqlite3() -> bool {
    Command::new("sqlite3")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Fail the test, saying what to install, unless the `sqlite3` program is
/// on the PATH: a test that diffs against it must not pass by doing nothing.
pub fn require_sqlite3() {
    assert!(
        have_sqlite3(),
        "the sqlite3 program is not on PATH: install it (Debian/Ubuntu: apt-get install sqlite3) \
         or run the README's test command, which does"
    );
}

/// `got` printed and exited exactly as `want` (the reference program).
pub fn assert_same_run(got: &Ran, want: &Ran) {
    assert_eq!(got.stdout, want.stdout, "standard output differs");
    assert_eq!(got.stderr, want.stderr, "standard error differs");
    assert_eq!(got.code, want.code, "exit code differs");
}
