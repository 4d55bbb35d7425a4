//! `pleroma shell`: lines in, results out, as the `sqlite3` shell does it.
//! Lines gather until they make a complete statement; a line starting with
//! `.` (with nothing gathered) is a dot-command. From a terminal there is
//! line editing and history; otherwise standard input is read as a script,
//! without prompts, and any error makes the exit code 1.

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rustyline::error::ReadlineError;

use crate::gather::{run_script, Flow, Gatherer};
use crate::session::Session;

pub(crate) fn run(path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let mut session = Session::open(path)?;
    if io::stdin().is_terminal() {
        interactive(&mut session, path)
    } else {
        script(&mut session, io::stdin().lock())
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
