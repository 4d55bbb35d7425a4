//! A connection plus the shell's settings: runs SQL text and dot-commands
//! and reports errors the way the `sqlite3` shell does. Shared by `shell`
//! and `sql`.

use std::io::{self, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use pleroma::rusqlite;
use pleroma::Connection;

use crate::format::{query_plan, Mode, Printer};
use pleroma::split::statements;

pub(crate) const HELP: &str = "\
.exit ?CODE?             Exit with return code CODE (default 0)
.explain SQL             Show how SQL would be routed: plane, memo or engine, and why
.headers on|off          Show column names in list and csv mode
.help                    Show this message
.import FILE TABLE       Load a CSV (header row) or Parquet file into TABLE, all or nothing
.mode MODE               Set the output mode: list (default), box, csv, json
.planes                  List the planes attached in this database
.quit                    Exit
.stats                   Queries served by a plane and declined (by reason) so far
.tables                  List the tables
.timer on|off            After each statement print `Run Time: real SECONDS route: ROUTE`

Pleroma's PRAGMAs run like any statement:
  PRAGMA pleroma_attach('table', 'dim1, dim2', 'measure1');
  PRAGMA pleroma_limb('fact', 'fact_key', 'dim', 'dim_key');
  PRAGMA pleroma_detach('table');     PRAGMA pleroma_rebuild('table');
  PRAGMA pleroma_planes;              PRAGMA pleroma_explain('SELECT ...');
  PRAGMA pleroma_route = auto|engine|plane;
";

/// What the caller does after a dot-command.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    Exit(u8),
}

pub(crate) struct Session {
    conn: Connection,
    printer: Printer,
    timer: bool,
    /// Errors reported so far (SQL and dot-commands).
    pub(crate) errors: usize,
}

impl Session {
    /// Open `path`, or a transient in-memory database.
    pub(crate) fn open(path: Option<&Path>) -> anyhow::Result<Session> {
        let conn = match path {
            Some(p) => {
                Connection::open(p).with_context(|| format!("cannot open {}", p.display()))?
            }
            None => Connection::open_in_memory()?,
        };
        Ok(Session {
            conn,
            printer: Printer::default(),
            timer: false,
            errors: 0,
        })
    }

    /// A handle that interrupts the statement running on this session.
    pub(crate) fn interrupt_handle(&self) -> rusqlite::InterruptHandle {
        self.conn.sqlite().get_interrupt_handle()
    }

    /// Run the statements of `chunk` in order, stopping at the first error,
    /// which goes to standard error worded as `sqlite3` words it for text
    /// from `source`. Returns whether every statement succeeded.
    pub(crate) fn run_sql(
        &mut self,
        chunk: &str,
        source: Source,
        out: &mut dyn Write,
    ) -> io::Result<bool> {
        for range in statements(chunk) {
            let stmt = &chunk[range.clone()];
            let start = Instant::now();
            let result = self.conn.query(stmt, &[]);
            let elapsed = start.elapsed();
            let ok = match &result {
                Ok(rows) if is_query_plan(stmt) => {
                    query_plan(out, rows)?;
                    true
                }
                Ok(rows) => {
                    self.printer.print(out, rows)?;
                    true
                }
                Err(_) => false,
            };
            if self.timer {
                writeln!(
                    out,
                    "Run Time: real {:.6} route: {}",
                    elapsed.as_secs_f64(),
                    self.conn.last_route().kind
                )?;
            }
            if let Err(e) = result {
                out.flush()?;
                let report = self.describe(&e, stmt, &chunk[range.start..]);
                eprintln!("{}", report.worded(source));
                self.errors += 1;
            }
            if !ok {
                return Ok(false);
            }
        }
        out.flush()?;
        Ok(true)
    }

    /// Run a dot-command line (`.mode box`, ...). A bad one is reported and
    /// counted as an error.
    pub(crate) fn dot(&mut self, line: &str, out: &mut dyn Write) -> io::Result<Flow> {
        let body = line.trim().trim_start_matches('.');
        let (cmd, rest) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
        let rest = rest.trim();
        let args: Vec<&str> = rest.split_whitespace().collect();
        let outcome = match (cmd, args.as_slice()) {
            ("quit", []) | ("exit", []) => return Ok(Flow::Exit(0)),
            ("exit", [code]) => match code.parse() {
                Ok(code) => return Ok(Flow::Exit(code)),
                Err(_) => Err(format!(".exit: not an exit code (0 to 255): {code}")),
            },
            ("help", _) => Ok(out.write_all(HELP.as_bytes())?),
            ("timer", [v]) => set_flag(&mut self.timer, "timer", v),
            ("headers", [v]) => set_flag(&mut self.printer.headers, "headers", v),
            ("mode", []) => Ok(writeln!(
                out,
                "current output mode: {}",
                self.printer.mode.name()
            )?),
            ("mode", [m]) => match Mode::parse(m) {
                Some(mode) => {
                    self.printer.mode = mode;
                    Ok(())
                }
                None => Err("mode should be one of: box csv json list".to_owned()),
            },
            ("planes", []) => self.show("PRAGMA pleroma_planes", out)?,
            ("explain", _) if !rest.is_empty() => {
                let sql = rest.trim_end_matches(|c: char| c == ';' || c.is_whitespace());
                self.show(
                    &format!("PRAGMA pleroma_explain('{}')", sql.replace('\'', "''")),
                    out,
                )?
            }
            ("tables", []) => {
                let sql = "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') \
                           AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY 1";
                match self.conn.query(sql, &[]) {
                    Ok(rows) => Printer::default().print(out, &rows).map(Ok)?,
                    Err(e) => Err(e.to_string()),
                }
            }
            ("import", [file, table]) => {
                match crate::import::load(&mut self.conn, table, Path::new(file)) {
                    Ok(n) => Ok(writeln!(out, "imported {n} rows into {table}")?),
                    Err(e) => Err(crate::message(&e)),
                }
            }
            ("stats", []) => {
                let c = self.conn.counters();
                writeln!(out, "served by a plane: {}", c.served)?;
                writeln!(out, "served from a memo: {}", c.memo)?;
                writeln!(out, "declined: {}", c.declined_total())?;
                for (reason, n) in &c.declined {
                    writeln!(out, "  {n}  {reason}")?;
                }
                Ok(())
            }
            _ => Err(format!(
                "unknown command or invalid arguments:  \"{cmd}\". Enter \".help\" for help"
            )),
        };
        out.flush()?;
        if let Err(msg) = outcome {
            eprintln!("Error: {msg}");
            self.errors += 1;
        }
        Ok(Flow::Continue)
    }

    /// Run a Pleroma PRAGMA and draw its rows as a box with headers,
    /// whatever the output mode.
    fn show(&mut self, sql: &str, out: &mut dyn Write) -> io::Result<Result<(), String>> {
        match self.conn.query(sql, &[]) {
            Ok(rows) if rows.rows.is_empty() => writeln!(out, "(none)").map(Ok),
            Ok(rows) => Printer {
                mode: Mode::Box,
                headers: true,
            }
            .print(out, &rows)
            .map(Ok),
            Err(e) => Ok(Err(e.to_string())),
        }
    }

    /// How `sqlite3` would word this error: a statement SQLite cannot
    /// prepare is a "Parse error", one that fails while running a "Runtime
    /// error"; a code past SQLITE_ERROR is added in parentheses, and a
    /// position in the SQL is pointed at.
    fn describe(&self, e: &pleroma::Error, stmt: &str, from_stmt: &str) -> Report {
        match e {
            pleroma::Error::Sqlite(rusqlite::Error::SqlInputError {
                error, msg, offset, ..
            }) => Report {
                kind: Kind::Parse,
                message: format!(
                    "{msg}{}{}",
                    code_suffix(error),
                    error_context(from_stmt, *offset)
                ),
            },
            pleroma::Error::Sqlite(rusqlite::Error::SqliteFailure(error, msg)) => {
                let kind = if self.conn.sqlite().prepare(stmt).is_err() {
                    Kind::Parse
                } else {
                    Kind::Runtime
                };
                let msg = msg.clone().unwrap_or_else(|| error.to_string());
                Report {
                    kind,
                    message: format!("{msg}{}", code_suffix(error)),
                }
            }
            other => Report {
                kind: Kind::Other,
                message: other.to_string(),
            },
        }
    }
}

/// Where SQL text came from; `sqlite3` words its errors after it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Source {
    /// A script on standard input, this chunk starting at this line.
    Line(usize),
    /// A line typed at the prompt.
    Prompt,
    /// A command-line argument.
    Argument,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// SQLite could not prepare the statement.
    Parse,
    /// It failed while running.
    Runtime,
    /// Not SQLite's: a Pleroma PRAGMA, the plane.
    Other,
}

struct Report {
    kind: Kind,
    message: String,
}

impl Report {
    fn worded(&self, source: Source) -> String {
        let m = &self.message;
        let kind = match self.kind {
            Kind::Parse => "Parse error",
            Kind::Runtime => "Runtime error",
            Kind::Other => "Error",
        };
        match (source, self.kind) {
            (Source::Line(n), _) => format!("{kind} near line {n}: {m}"),
            (Source::Prompt, _) => format!("{kind}: {m}"),
            (Source::Argument, Kind::Parse) => format!("Error: in prepare, {m}"),
            (Source::Argument, Kind::Runtime) => format!("Error: stepping, {m}"),
            (Source::Argument, Kind::Other) => format!("Error: {m}"),
        }
    }
}

/// `sqlite3` draws the answer of EXPLAIN QUERY PLAN as a tree.
fn is_query_plan(stmt: &str) -> bool {
    let words: Vec<String> = stmt
        .split_whitespace()
        .take(3)
        .map(str::to_ascii_uppercase)
        .collect();
    words == ["EXPLAIN", "QUERY", "PLAN"]
}

fn set_flag(flag: &mut bool, name: &str, v: &str) -> Result<(), String> {
    match v {
        "on" | "1" | "yes" | "true" => *flag = true,
        "off" | "0" | "no" | "false" => *flag = false,
        _ => return Err(format!(".{name}: expected on or off, got {v}")),
    }
    Ok(())
}

/// `sqlite3` adds the primary result code when it is not plain SQLITE_ERROR.
fn code_suffix(e: &rusqlite::ffi::Error) -> String {
    let primary = e.extended_code & 0xff;
    if primary > 1 {
        format!(" ({primary})")
    } else {
        String::new()
    }
}

/// The line `sqlite3` adds under a parse error: the SQL from the statement
/// on (at most 78 bytes, around the error), and a marker at the offset.
fn error_context(sql: &str, offset: i32) -> String {
    let Ok(mut offset) = usize::try_from(offset) else {
        return String::new();
    };
    let mut start = 0;
    while offset > 50 {
        offset -= 1;
        start += 1;
        while start < sql.len() && !sql.is_char_boundary(start) {
            start += 1;
            offset = offset.saturating_sub(1);
        }
    }
    let rest = &sql[start.min(sql.len())..];
    let mut len = rest.len().min(78);
    while !rest.is_char_boundary(len) {
        len -= 1;
    }
    let code: String = rest[..len]
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect();
    if offset < 25 {
        format!("\n  {code}\n  {}^--- error here", " ".repeat(offset))
    } else {
        format!("\n  {code}\n  {}error here ---^", " ".repeat(offset - 14))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_marker_points_at_the_offset() {
        assert_eq!(
            error_context("SELEC 1;", 0),
            "\n  SELEC 1;\n  ^--- error here"
        );
        assert_eq!(
            error_context("SELECT\n x FROM u;", 8),
            "\n  SELECT  x FROM u;\n          ^--- error here"
        );
        assert_eq!(error_context("SELECT 1", -1), "");
    }
}
