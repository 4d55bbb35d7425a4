//! Lines gathered into SQL text, as the `sqlite3` shell gathers them: until
//! they make a complete statement; a line starting with `.` (with nothing
//! gathered) is a dot-command. The shell's prompt and scripts, and the
//! session's `.read`, feed lines here; what runs them is a [`Runner`] (the
//! session), so this file uses no other of the program's.

use std::io::{self, BufRead, Write};

use pleroma::split::{is_blank, is_complete};

/// What the caller does after a dot-command.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    /// `.quit`: stop reading this input (a `.read` file, or the script).
    Quit,
    Exit(u8),
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

/// What runs gathered text and dot-commands (the session).
pub(crate) trait Runner {
    /// Run a dot-command line.
    fn dot(&mut self, line: &str, out: &mut dyn Write) -> io::Result<Flow>;
    /// Run SQL text; whether every statement succeeded.
    fn run_sql(&mut self, sql: &str, source: Source, out: &mut dyn Write) -> io::Result<bool>;
    /// The errors so far.
    fn errors(&self) -> usize;
    /// Whether `.bail on` is set.
    fn bail(&self) -> bool;
}

/// Gathers lines into SQL text and runs it once complete.
pub(crate) struct Gatherer {
    pub(crate) sql: String,
    /// Line number where the gathered text started, and of the last line.
    start: usize,
    line: usize,
    /// Whether errors say `near line N` (scripts), as `sqlite3` does.
    numbered: bool,
}

impl Gatherer {
    pub(crate) fn new(numbered: bool) -> Gatherer {
        Gatherer {
            sql: String::new(),
            start: 0,
            line: 0,
            numbered,
        }
    }

    pub(crate) fn pending(&self) -> bool {
        !self.sql.is_empty()
    }

    pub(crate) fn feed(
        &mut self,
        s: &mut impl Runner,
        line: &str,
        out: &mut dyn Write,
    ) -> io::Result<Flow> {
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
    fn flush(&mut self, s: &mut impl Runner, out: &mut dyn Write) -> io::Result<()> {
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

/// Run `input` as a script (standard input, or a `.read` file), its errors
/// worded with its own line numbers. It ends at the end of input or at
/// `.quit` (returning [`Flow::Continue`]), or at `.exit`, or, after
/// `.bail on`, at the first error (returning [`Flow::Exit`]).
pub(crate) fn run_script(
    s: &mut impl Runner,
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
        let errors = s.errors();
        match g.feed(s, line, out)? {
            Flow::Continue => {}
            Flow::Quit => return Ok(Flow::Continue),
            Flow::Exit(code) => return Ok(Flow::Exit(code)),
        }
        if s.bail() && s.errors() > errors {
            return Ok(Flow::Exit(1));
        }
    }
    if g.pending() {
        let errors = s.errors();
        g.flush(s, out)?;
        if s.bail() && s.errors() > errors {
            return Ok(Flow::Exit(1));
        }
    }
    Ok(Flow::Continue)
}
