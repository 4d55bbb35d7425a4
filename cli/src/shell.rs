//! `pleroma shell`: lines in, results out, as the `sqlite3` shell does it.
//! Lines gather until they make a complete statement; a line starting with
//! `.` (with nothing gathered) is a dot-command. From a terminal there is
//! line editing and history; otherwise standard input is read as a script,
//! without prompts, and any error makes the exit code 1.

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rustyline::error::ReadlineError;

use crate::session::{Flow, Session, Source};
use pleroma::split::{is_blank, is_complete};

pub(crate) fn run(path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut session = Session::open(path)?;
    if io::stdin().is_terminal() {
        interactive(&mut session, path)
    } else {
        script(&mut session, io::stdin().lock())
    }
}

/// Gathers lines into SQL text and runs it once complete.
struct Gatherer {
    sql: String,
    /// Line number where the gathered text started, and of the last line.
    start: usize,
    line: usize,
    /// Whether errors say `near line N` (scripts), as `sqlite3` does.
    numbered: bool,
}

impl Gatherer {
    fn new(numbered: bool) -> Gatherer {
        Gatherer {
            sql: String::new(),
            start: 0,
            line: 0,
            numbered,
        }
    }

    fn pending(&self) -> bool {
        !self.sql.is_empty()
    }

    fn feed(&mut self, s: &mut Session, line: &str, out: &mut dyn Write) -> io::Result<Flow> {
        self.line += 1;
        if self.sql.is_empty() {
            // As in sqlite3: only a `.` or `#` in the first column counts.
            if line.starts_with('.') {
                return s.dot(line, out);
            }
            let trimmed = line.trim_start();
            if trimmed.is_empty() || line.starts_with('#') {
                return Ok(Flow::Continue);
            }
            self.sql.push_str(trimmed);
            self.start = self.line;
        } else {
            self.sql.push('\n');
            self.sql.push_str(line);
        }
        if is_complete(&self.sql) {
            self.flush(s, out)?;
        } else if is_blank(&self.sql) {
            self.sql.clear();
        }
        Ok(Flow::Continue)
    }

    /// Run what is gathered, complete or not (at the end of input SQLite
    /// gets the last word: "incomplete input").
    fn flush(&mut self, s: &mut Session, out: &mut dyn Write) -> io::Result<()> {
        let sql = std::mem::take(&mut self.sql);
        let source = if self.numbered {
            Source::Line(self.start)
        } else {
            Source::Prompt
        };
        s.run_sql(&sql, source, out)?;
        Ok(())
    }
}

fn script(s: &mut Session, input: impl BufRead) -> anyhow::Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let flow = run_script(s, input, &mut out)?;
    out.flush()?;
    Ok(match flow {
        // `.exit N` exits with N at once.
        Flow::Exit(code) if code != 0 => ExitCode::from(code),
        // The end of input and `.quit` (and `.exit`): errors make it 1.
        _ if s.errors > 0 => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    })
}

/// Run `input` as a script (standard input, or a `.read` file), its errors
/// worded with its own line numbers. It ends at the end of input or at
/// `.quit` (returning [`Flow::Continue`]), or at `.exit`, or, after
/// `.bail on`, at the first error (returning [`Flow::Exit`]).
pub(crate) fn run_script(
    s: &mut Session,
    mut input: impl BufRead,
    out: &mut dyn Write,
) -> io::Result<Flow> {
    let mut g = Gatherer::new(true);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        let text = String::from_utf8_lossy(&buf);
        let line = text.trim_end_matches('\n').trim_end_matches('\r');
        let errors = s.errors;
        match g.feed(s, line, out)? {
            Flow::Continue => {}
            Flow::Quit => return Ok(Flow::Continue),
            Flow::Exit(code) => return Ok(Flow::Exit(code)),
        }
        if s.bail && s.errors > errors {
            return Ok(Flow::Exit(1));
        }
    }
    if g.pending() {
        let errors = s.errors;
        g.flush(s, out)?;
        if s.bail && s.errors > errors {
            return Ok(Flow::Exit(1));
        }
    }
    Ok(Flow::Continue)
}

fn interactive(s: &mut Session, path: Option<&Path>) -> anyhow::Result<ExitCode> {
    println!(
        "Pleroma {} (SQLite {})\nEnter \".help\" for usage hints.",
        env!("CARGO_PKG_VERSION"),
        pleroma::rusqlite::version()
    );
    if path.is_none() {
        println!("Connected to a transient in-memory database.");
    }
    // While a statement runs, Ctrl-C stops it (SQLite's interrupt) and the
    // shell goes on; at the prompt the line editor reads Ctrl-C itself.
    let interrupt = s.interrupt_handle();
    ctrlc::set_handler(move || interrupt.interrupt())?;
    let mut editor = rustyline::DefaultEditor::new()?;
    let history = history_file();
    if let Some(h) = &history {
        // No history yet is the normal first run.
        let _ = editor.load_history(h);
    }
    let mut out = io::stdout();
    let mut g = Gatherer::new(false);
    let code = loop {
        let prompt = if g.pending() { "   ...> " } else { "pleroma> " };
        match editor.readline(prompt) {
            Ok(line) => {
                if !line.trim().is_empty() {
                    editor.add_history_entry(line.as_str())?;
                }
                match g.feed(s, &line, &mut out)? {
                    Flow::Continue => {}
                    Flow::Quit => break 0,
                    Flow::Exit(code) => break code,
                }
            }
            // Ctrl-C drops the statement being typed, as in sqlite3.
            Err(ReadlineError::Interrupted) => g.sql.clear(),
            Err(ReadlineError::Eof) => break 0,
            Err(e) => return Err(e.into()),
        }
    };
    if let Some(h) = &history {
        if let Err(e) = editor.save_history(h) {
            eprintln!("warning: cannot save history to {}: {e}", h.display());
        }
    }
    Ok(ExitCode::from(code))
}

fn history_file() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pleroma_history"))
}
