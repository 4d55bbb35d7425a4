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
use crate::gather::{Flow, Runner, Source};
use pleroma::split::statements;

pub(crate) const HELP: &str = "\
.bail on|off             Stop a script at the first error (exit code 1)
.changes on|off          After each statement print the rows it changed
.databases               List the attached databases and their files
.dump ?TABLE?            Write the database (or tables matching the LIKE pattern
                           TABLE) as SQL text, planes' catalog included
.exit ?CODE?             Exit with return code CODE (default 0)
.explain SQL             Show how SQL would be routed: plane, memo or engine, and why
.headers on|off          Show column names in list and csv mode
.help                    Show this message
.import FILE TABLE       Load a CSV (header row) or Parquet file into TABLE, all or nothing
.indexes ?TABLE?         List the indexes (of tables matching the LIKE pattern TABLE)
.mode MODE               Set the output mode: list (default), box, csv, json
.nullvalue TEXT          Print TEXT in place of NULL
.once FILE               Send the next command's output to FILE
.output ?FILE?           Send output to FILE, or back to standard output
.parameter CMD ...       Manage SQL parameter bindings: init, set NAME VALUE,
                           unset NAME, list, clear
.planes                  List the planes attached in this database
.print TEXT...           Print TEXT
.quit                    Exit (from a .read file: stop reading it)
.read FILE               Run the SQL and dot-commands in FILE
.schema ?PATTERN?        Show the CREATE statements (of tables matching PATTERN)
.separator COL ?ROW?     Set the column (and row) separator of list and csv mode
.show                    Show the current settings
.stats                   Queries served by a plane and declined (by reason) so far
.tables                  List the tables
.timer on|off            After each statement print `Run Time: real SECONDS route: ROUTE`
                           (plane, memo, residue: the cells' core and SQLite
                           over it, or engine)

Pleroma's PRAGMAs run like any statement:
  PRAGMA pleroma_attach('table', 'dim1, dim2', 'measure1' [, 'name']);
  PRAGMA pleroma_limb('fact', 'fact_key', 'dim', 'dim_key');
  PRAGMA pleroma_detach('table' [, 'name']);
  PRAGMA pleroma_rebuild('table' [, 'name']);
  PRAGMA pleroma_planes;              PRAGMA pleroma_explain('SELECT ...');
  PRAGMA pleroma_advise;              (after the dashboard ran: what to attach)
  PRAGMA pleroma_route = auto|engine|plane;
";

/// Where output goes after `.output FILE` or `.once FILE`.
struct Redirect {
    file: io::BufWriter<std::fs::File>,
    name: String,
    /// `.once`: only for the next command.
    once: bool,
}

pub(crate) struct Session {
    conn: Connection,
    printer: Printer,
    timer: bool,
    /// `.bail on`: a script stops at its first error.
    pub(crate) bail: bool,
    /// `.changes on`: print the rows changed after each statement.
    changes: bool,
    redirect: Option<Redirect>,
    /// Bumped by each `.output` and `.once`, to tell whether a command
    /// changed where output goes.
    redirects: u64,
    /// The file name as given (`.show` prints it).
    filename: String,
    /// How deep `.read` files nest.
    pub(crate) depth: usize,
    /// Errors reported so far (SQL and dot-commands).
    pub(crate) errors: usize,
}

impl Session {
    /// Open `path`, or a transient in-memory database.
    pub(crate) fn open(path: Option<&Path>) -> anyhow::Result<Session> {
        let conn = match path {
            Some(p) => {
                // As in the `sqlite3` program, no busy timeout until the
                // script sets one (rusqlite's connections start with 5 s).
                let db = rusqlite::Connection::open(p)
                    .with_context(|| format!("cannot open {}", p.display()))?;
                db.busy_timeout(std::time::Duration::ZERO)?;
                Connection::wrap(db).with_context(|| format!("cannot open {}", p.display()))?
            }
            None => Connection::open_in_memory()?,
        };
        Ok(Session {
            conn,
            printer: Printer::default(),
            timer: false,
            bail: false,
            changes: false,
            redirect: None,
            redirects: 0,
            filename: path.map_or_else(|| ":memory:".to_owned(), |p| p.display().to_string()),
            depth: 0,
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
        self.redirected(out, |s, out| {
            let ok = s.run_chunk(chunk, source, out)?;
            // As in sqlite3: after each chunk of a shell's input, not after
            // each command-line argument.
            if ok && s.changes && !matches!(source, Source::Argument) {
                // The user's counts, not Pleroma's own state rows.
                writeln!(
                    out,
                    "changes: {}   total_changes: {}",
                    s.conn.changes(),
                    s.conn.total_changes()
                )?;
                out.flush()?;
            }
            Ok(ok)
        })
    }

    /// Run `f` with output going where `.output` or `.once` sent it; a
    /// `.once` redirection ends after it.
    fn redirected<R>(
        &mut self,
        out: &mut dyn Write,
        f: impl FnOnce(&mut Session, &mut dyn Write) -> io::Result<R>,
    ) -> io::Result<R> {
        let mut taken = self.redirect.take();
        let before = self.redirects;
        let result = match &mut taken {
            Some(r) => f(self, &mut r.file),
            None => f(self, out),
        };
        if let Some(r) = &mut taken {
            r.file.flush()?;
        }
        if self.redirects == before && !taken.as_ref().is_some_and(|r| r.once) {
            self.redirect = taken;
        }
        result
    }

    fn run_chunk(&mut self, chunk: &str, source: Source, out: &mut dyn Write) -> io::Result<bool> {
        for range in statements(chunk) {
            let stmt = &chunk[range.clone()];
            let start = Instant::now();
            let params = crate::param::bindings(&self.conn, stmt);
            let result = self.conn.query(stmt, &params);
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
                // As sqlite3: the rows SQLite stepped before a runtime
                // error are printed, then the error.
                Err(_) => {
                    if let Some(rows) = self.conn.rows_before_error() {
                        if is_query_plan(stmt) {
                            query_plan(out, rows)?;
                        } else {
                            self.printer.print(out, rows)?;
                        }
                    }
                    false
                }
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
        let words = dot_words(line.trim_start().trim_start_matches('.'));
        let Some(first) = words.first() else {
            return Ok(Flow::Continue);
        };
        let cmd = command(first);
        // Where output goes is changed here, before output is routed.
        if let Some(once) = match cmd {
            "output" => Some(false),
            "once" => Some(true),
            _ => None,
        } {
            let outcome = self.set_output(&words[1..], once, cmd);
            return self.report(outcome, out).map(|()| Flow::Continue);
        }
        let rest = line
            .trim()
            .trim_start_matches('.')
            .split_once(char::is_whitespace)
            .map_or("", |(_, r)| r.trim());
        self.redirected(out, |s, out| {
            let (flow, outcome) = s.dot_command(cmd, first, &words[1..], rest, out)?;
            s.report(outcome, out)?;
            Ok(flow)
        })
    }

    /// Report a failed dot-command on standard error (the line is worded in
    /// full: `Error: ...` or `Usage: ...`) and count it.
    fn report(&mut self, outcome: Result<(), String>, out: &mut dyn Write) -> io::Result<()> {
        out.flush()?;
        if let Err(line) = outcome {
            eprintln!("{line}");
            self.errors += 1;
        }
        Ok(())
    }

    fn set_output(&mut self, args: &[String], once: bool, cmd: &str) -> Result<(), String> {
        self.redirects += 1;
        if let Some(mut old) = self.redirect.take() {
            old.file.flush().map_err(|e| format!("Error: {e}"))?;
        }
        let file = match args {
            [] => return Ok(()),
            [f] => f,
            _ => return Err(format!("Usage: .{cmd} FILE")),
        };
        if file == "stdout" || file == "-" {
            return Ok(());
        }
        match std::fs::File::create(file) {
            Ok(f) => {
                self.redirect = Some(Redirect {
                    file: io::BufWriter::new(f),
                    name: file.clone(),
                    once,
                });
                Ok(())
            }
            // sqlite3 words this failure twice.
            Err(_) => Err(format!(
                "Error: cannot open \"{file}\"\nError: cannot write to \"{file}\""
            )),
        }
    }

    fn dot_command(
        &mut self,
        cmd: &str,
        typed: &str,
        args: &[String],
        rest: &str,
        out: &mut dyn Write,
    ) -> io::Result<(Flow, Result<(), String>)> {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let error = |msg: String| Err(format!("Error: {msg}"));
        let outcome = match (cmd, args.as_slice()) {
            ("quit", _) => return Ok((Flow::Quit, Ok(()))),
            ("exit", []) => return Ok((Flow::Exit(0), Ok(()))),
            ("exit", [code]) => match code.parse() {
                Ok(code) => return Ok((Flow::Exit(code), Ok(()))),
                Err(_) => error(format!(".exit: not an exit code (0 to 255): {code}")),
            },
            ("help", _) => Ok(out.write_all(HELP.as_bytes())?),
            ("timer", [v]) => set_flag(&mut self.timer, "timer", v).or_else(error),
            ("headers", [v]) => set_flag(&mut self.printer.headers, "headers", v).or_else(error),
            ("bail", [v]) => {
                self.bail = boolean_value(v);
                Ok(())
            }
            ("bail", _) => Err("Usage: .bail on|off".to_owned()),
            ("changes", [v]) => {
                self.changes = boolean_value(v);
                Ok(())
            }
            ("changes", _) => Err("Usage: .changes on|off".to_owned()),
            ("nullvalue", [v]) => {
                self.printer.null_value = (*v).to_owned();
                Ok(())
            }
            ("nullvalue", _) => Err("Usage: .nullvalue STRING".to_owned()),
            ("separator", [col]) | ("separator", [col, _]) => {
                self.printer.col_sep = (*col).to_owned();
                if let [_, row] = args.as_slice() {
                    self.printer.row_sep = (*row).to_owned();
                }
                Ok(())
            }
            ("separator", _) => Err("Usage: .separator COL ?ROW?".to_owned()),
            ("print", words) => Ok(writeln!(out, "{}", words.join(" "))?),
            ("show", []) => Ok(self.show_settings(out)?),
            ("databases", []) => {
                crate::dump::list_databases(self.conn.sqlite(), out)?.or_else(error)
            }
            ("indexes", []) | ("indexes", [_]) => {
                crate::dump::indexes(self.conn.sqlite(), args.first().copied(), out)?.or_else(error)
            }
            ("indexes", _) => Err("Usage: .indexes ?LIKE-PATTERN?".to_owned()),
            ("schema", []) | ("schema", [_]) => {
                crate::dump::schema(self.conn.sqlite(), args.first().copied(), out)?.or_else(error)
            }
            ("schema", _) => Err("Usage: .schema ?--indent? ?--nosys? ?LIKE-PATTERN?".to_owned()),
            ("dump", words) => {
                let mut opts = crate::dump::DumpOptions::default();
                let mut bad = None;
                for w in words {
                    match w.trim_start_matches('-') {
                        _ if !w.starts_with('-') => opts.patterns.push((*w).to_owned()),
                        "newlines" => opts.newlines = true,
                        "data-only" => opts.data_only = true,
                        "nosys" => opts.no_sys = true,
                        _ => bad = Some(*w),
                    }
                }
                match bad {
                    Some(w) => Err(format!(
                        "Unknown option \"{w}\" on \".dump\"\nUse \".help dump\" for more information."
                    )),
                    None => crate::dump::dump(self.conn.sqlite(), &opts, out)?.or_else(error),
                }
            }
            ("read", [file]) => return self.read(file, out),
            ("read", _) => Err("Usage: .read FILE".to_owned()),
            ("mode", []) => Ok(writeln!(
                out,
                "current output mode: {}",
                self.printer.mode.name()
            )?),
            ("mode", [m]) => match Mode::parse(m) {
                Some(mode) => {
                    self.printer.set_mode(mode);
                    Ok(())
                }
                None => error("mode should be one of: box csv json list".to_owned()),
            },
            ("planes", []) => self.show("PRAGMA pleroma_planes", out)?.or_else(error),
            ("explain", _) if !rest.is_empty() => {
                let sql = rest.trim_end_matches(|c: char| c == ';' || c.is_whitespace());
                self.show(
                    &format!("PRAGMA pleroma_explain('{}')", sql.replace('\'', "''")),
                    out,
                )?
                .or_else(error)
            }
            ("tables", []) => {
                let sql = "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') \
                           AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY 1";
                match self.conn.query(sql, &[]) {
                    Ok(rows) => Printer::default().print(out, &rows).map(Ok)?,
                    Err(e) => error(e.to_string()),
                }
            }
            ("import", [file, table]) => {
                match crate::import::load(&mut self.conn, table, Path::new(file)) {
                    Ok(n) => Ok(writeln!(out, "imported {n} rows into {table}")?),
                    Err(e) => error(crate::format::message(&e)),
                }
            }
            ("parameter", words) => match crate::param::command(&mut self.conn, words, out)? {
                // sqlite3 prints this error on its output.
                Some(line) => {
                    writeln!(out, "{line}")?;
                    self.errors += 1;
                    Ok(())
                }
                None => Ok(()),
            },
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
            _ => error(format!(
                "unknown command or invalid arguments:  \"{typed}\". Enter \".help\" for help"
            )),
        };
        Ok((Flow::Continue, outcome))
    }

    /// `.read FILE`: run the file as a script; `.quit` in it ends only it.
    fn read(&mut self, file: &str, out: &mut dyn Write) -> io::Result<(Flow, Result<(), String>)> {
        const MAX_DEPTH: usize = 25;
        if self.depth >= MAX_DEPTH {
            return Ok((
                Flow::Continue,
                Err(format!(
                    "Error: .read nests deeper than {MAX_DEPTH} files: {file}"
                )),
            ));
        }
        let Ok(f) = std::fs::File::open(file) else {
            return Ok((
                Flow::Continue,
                Err(format!("Error: cannot open \"{file}\"")),
            ));
        };
        self.depth += 1;
        let flow = crate::gather::run_script(self, io::BufReader::new(f), out);
        self.depth -= 1;
        Ok((
            match flow? {
                Flow::Exit(code) => Flow::Exit(code),
                Flow::Continue | Flow::Quit => Flow::Continue,
            },
            Ok(()),
        ))
    }

    /// `.show`: the settings, as `sqlite3` lists them.
    fn show_settings(&self, out: &mut dyn Write) -> io::Result<()> {
        let on = |b: bool| if b { "on" } else { "off" };
        let mode = match self.printer.mode {
            Mode::Box => "box --wrap 60 --wordwrap off --noquote",
            m => m.name(),
        };
        let output = self.redirect.as_ref().map_or("stdout", |r| r.name.as_str());
        let p = &self.printer;
        let lines = [
            ("echo", "off".to_owned()),
            ("eqp", "off".to_owned()),
            ("explain", "auto".to_owned()),
            ("headers", on(p.headers).to_owned()),
            ("mode", mode.to_owned()),
            ("nullvalue", c_string(&p.null_value)),
            ("output", output.to_owned()),
            ("colseparator", c_string(&p.col_sep)),
            ("rowseparator", c_string(&p.row_sep)),
            ("stats", "off".to_owned()),
            ("width", String::new()),
            ("filename", self.filename.clone()),
        ];
        for (name, value) in lines {
            writeln!(out, "{name:>12}: {value}")?;
        }
        Ok(())
    }

    /// Run a Pleroma PRAGMA and draw its rows as a box with headers,
    /// whatever the output mode.
    fn show(&mut self, sql: &str, out: &mut dyn Write) -> io::Result<Result<(), String>> {
        match self.conn.query(sql, &[]) {
            Ok(rows) if rows.rows.is_empty() => writeln!(out, "(none)").map(Ok),
            Ok(rows) => Printer {
                mode: Mode::Box,
                headers: true,
                ..Printer::default()
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

impl Runner for Session {
    fn dot(&mut self, line: &str, out: &mut dyn Write) -> io::Result<Flow> {
        Session::dot(self, line, out)
    }

    fn run_sql(&mut self, sql: &str, source: Source, out: &mut dyn Write) -> io::Result<bool> {
        Session::run_sql(self, sql, source, out)
    }

    fn errors(&self) -> usize {
        self.errors
    }

    fn bail(&self) -> bool {
        self.bail
    }
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
    // The words as SQLite reads them: comments before or between skipped.
    let mut words = pleroma::tokenize::code(stmt);
    ["EXPLAIN", "QUERY", "PLAN"]
        .iter()
        .all(|kw| words.next().is_some_and(|t| t.is(kw)))
}

fn set_flag(flag: &mut bool, name: &str, v: &str) -> Result<(), String> {
    match v {
        "on" | "1" | "yes" | "true" => *flag = true,
        "off" | "0" | "no" | "false" => *flag = false,
        _ => return Err(format!(".{name}: expected on or off, got {v}")),
    }
    Ok(())
}

/// `sqlite3`'s reading of a boolean argument: on/yes, off/no (any case)
/// or a decimal or 0x hex integer; anything else is a warning and off.
fn boolean_value(v: &str) -> bool {
    let (digits, radix) = match v.strip_prefix("0x") {
        Some(hex) => (hex, 16),
        None => (v, 10),
    };
    if (radix == 16 || !digits.is_empty()) && digits.chars().all(|c| c.is_digit(radix)) {
        // sqlite3 keeps the low 32 bits.
        return !digits.is_empty()
            && u64::from_str_radix(digits, radix).map_or(true, |n| n & 0xffff_ffff != 0);
    }
    if v.eq_ignore_ascii_case("on") || v.eq_ignore_ascii_case("yes") {
        return true;
    }
    if v.eq_ignore_ascii_case("off") || v.eq_ignore_ascii_case("no") {
        return false;
    }
    eprintln!("ERROR: Not a boolean value: \"{v}\". Assuming \"no\".");
    false
}

/// The arguments of a dot-command as `sqlite3` splits them: at blanks,
/// except inside '...' (taken as is) or "..." (where backslash escapes
/// count, as they do in a bare word).
fn dot_words(line: &str) -> Vec<String> {
    let b = line.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let start;
        let end;
        let escapes;
        if b[i] == b'\'' || b[i] == b'"' {
            let delim = b[i];
            i += 1;
            start = i;
            while i < b.len() && b[i] != delim {
                if b[i] == b'\\' && delim == b'"' && i + 1 < b.len() {
                    i += 1;
                }
                i += 1;
            }
            end = i;
            if i < b.len() {
                i += 1;
            }
            escapes = delim == b'"';
        } else {
            start = i;
            while i < b.len() && !b[i].is_ascii_whitespace() {
                i += 1;
            }
            end = i;
            escapes = true;
        }
        let word = &b[start..end];
        let word = if escapes {
            resolve_backslashes(word)
        } else {
            word.to_vec()
        };
        words.push(String::from_utf8_lossy(&word).into_owned());
    }
    words
}

/// `\t`, `\n`, `\\`, `\"`, octal `\NNN` and the rest, as `sqlite3` reads
/// them; before any other character the backslash is dropped.
fn resolve_backslashes(w: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(w.len());
    let mut i = 0;
    while i < w.len() {
        let mut c = w[i];
        if c == b'\\' && i + 1 < w.len() {
            i += 1;
            c = match w[i] {
                b'a' => 7,
                b'b' => 8,
                b't' => b'\t',
                b'n' => b'\n',
                b'v' => 11,
                b'f' => 12,
                b'r' => b'\r',
                d @ b'0'..=b'7' => {
                    let mut v = d - b'0';
                    for _ in 0..2 {
                        match w.get(i + 1) {
                            Some(&d @ b'0'..=b'7') => {
                                v = v.wrapping_shl(3).wrapping_add(d - b'0');
                                i += 1;
                            }
                            _ => break,
                        }
                    }
                    v
                }
                other => other,
            };
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The full name of a dot-command typed as `sqlite3` accepts it: whole, or
/// shortened to a prefix that `sqlite3` reads as the same command.
fn command(typed: &str) -> &str {
    // (name, shortest prefix sqlite3 accepts for it), in sqlite3's order of
    // matching.
    const NAMES: &[(&str, usize)] = &[
        ("bail", 3),
        ("changes", 3),
        ("databases", 2),
        ("dump", 1),
        ("exit", 4),
        ("explain", 7),
        ("headers", 1),
        ("header", 1),
        ("help", 3),
        ("import", 2),
        ("indexes", 3),
        ("indices", 3),
        ("mode", 1),
        ("nullvalue", 1),
        ("once", 2),
        ("output", 1),
        ("parameter", 3),
        ("planes", 6),
        ("print", 3),
        ("quit", 1),
        ("read", 3),
        ("schema", 2),
        ("separator", 3),
        ("show", 4),
        ("stats", 5),
        ("tables", 2),
        ("timer", 5),
    ];
    for &(name, min) in NAMES {
        if typed.len() >= min && name.starts_with(typed) {
            return match name {
                "header" => "headers",
                "indices" => "indexes",
                n => n,
            };
        }
    }
    typed
}

/// A setting as `sqlite3`'s `.show` quotes it: in double quotes, with C
/// escapes.
fn c_string(s: &str) -> String {
    let mut q = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\t' => q.push_str("\\t"),
            '\n' => q.push_str("\\n"),
            '\r' => q.push_str("\\r"),
            c if c < ' ' || c == '\x7f' => q.push_str(&format!("\\{:03o}", c as u32)),
            c => q.push(c),
        }
    }
    q.push('"');
    q
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
