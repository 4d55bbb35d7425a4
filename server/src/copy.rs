//! `COPY … TO STDOUT` and `COPY … FROM STDIN`, in PostgreSQL's text and CSV
//! formats, so psql's `\copy` works both ways.
//!
//! - **Out**: `COPY (query) TO STDOUT` and `COPY table [(cols)] TO STDOUT` run
//!   the query as a simple-protocol SELECT would (the same router, the same
//!   column types) and send each value's text exactly as that SELECT sends
//!   it; only the format's escaping is added. A value a SELECT would decline
//!   (a BLOB in a column of mixed storage classes) is declined here too.
//! - **In**: `COPY table [(cols)] FROM STDIN` takes the session's turn to
//!   write, opens one transaction (a savepoint inside the client's), and
//!   inserts the rows through the router's appender as they arrive, each
//!   value bound as TEXT (as an untyped parameter, so the column's affinity
//!   applies as to a quoted literal), `NULL` as NULL. Any bad row (the wrong
//!   number of fields, invalid UTF-8, a constraint) rolls every row of the
//!   COPY back and answers an error whose CONTEXT names the line, as
//!   PostgreSQL's `COPY t, line N`.
//!
//! Declined with `0A000`: server-side files and programs (`TO 'file'`,
//! `FROM PROGRAM`; psql's `\copy` reads and writes the file on the client),
//! `FORMAT binary`, `FREEZE`, `DEFAULT`, `ON_ERROR`, `WHERE`, encodings other
//! than UTF-8, and a COPY in a query message with other statements.
//!
//! The text and CSV rules are PostgreSQL's (`copyfromparse.c`,
//! `copyto.c`): text escapes `\b \f \n \r \t \v \\`, octal `\NNN` and hex
//! `\xHH`, `\N` for NULL, `\.` alone on a line for the end; CSV quoting with
//! doubled quotes (or the ESCAPE character), an unquoted empty field is NULL
//! and a quoted one the empty string; one newline style per input (LF, CR or
//! CRLF).

use std::fmt::Debug;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use pgwire::api::portal::Format;
use pgwire::error::ErrorInfo;
use pgwire::messages::data::DataRow;
use pgwire::messages::response::TransactionStatus;
use pleroma::tokenize::{self, Kind, Token};
use pleroma::Value;

use crate::session::{Engine, Outcome, WRITE_WAIT};
use crate::sqlstate::{error, from_router};

/// The savepoint of a COPY FROM inside the client's transaction.
const SAVEPOINT: &str = "pleroma_copy";

fn unsupported(what: impl std::fmt::Display) -> ErrorInfo {
    error("0A000", format!("{what} is not supported by pleroma serve"))
}

/// `25P02`, as any statement but ROLLBACK gets in a failed transaction.
fn aborted() -> ErrorInfo {
    error(
        "25P02",
        "current transaction is aborted, commands ignored until end of transaction block",
    )
}

/// `22P04` (bad_copy_file_format).
fn bad_format(message: impl Into<String>) -> ErrorInfo {
    error("22P04", message)
}

// ---------------------------------------------------------------------------
// The statement

/// What is copied.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Source {
    /// A table of main (`public.t` and `main.t` name it too), with the
    /// columns the statement listed.
    Table {
        name: String,
        columns: Option<Vec<String>>,
    },
    /// `COPY (query) TO`.
    Query(String),
}

#[derive(Clone, Debug, PartialEq)]
enum Header {
    No,
    Yes,
    /// `HEADER MATCH` (COPY FROM): the header's names must be the columns'.
    Match,
}

/// `FORCE_QUOTE`, `FORCE_NOT_NULL`, `FORCE_NULL`: none, `*`, or a list.
#[derive(Clone, Debug, PartialEq)]
enum Cols {
    None,
    All,
    Some(Vec<String>),
}

/// The format options, checked as PostgreSQL checks them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Options {
    csv: bool,
    delimiter: u8,
    null: String,
    header: Header,
    quote: u8,
    escape: u8,
    force_quote: Cols,
    force_not_null: Cols,
    force_null: Cols,
}

/// A parsed COPY statement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Command {
    pub(crate) source: Source,
    /// `FROM STDIN` (else `TO STDOUT`).
    pub(crate) from: bool,
    opts: Options,
}

/// Whether `sql` (one statement) is a COPY.
pub(crate) fn is_copy(sql: &str) -> bool {
    tokenize::starts_with_keyword(sql, "COPY")
}

/// The COPY in a query message: `None` when it holds none (the fast path:
/// the word does not occur at all), else the parsed statement or why it is
/// declined. A COPY must be the only statement of its message.
pub(crate) fn in_query(query: &str) -> Option<Result<Command, ErrorInfo>> {
    if !query
        .as_bytes()
        .windows(4)
        .any(|w| w.eq_ignore_ascii_case(b"copy"))
    {
        return None;
    }
    let statements = pleroma::split::statements(query);
    if !statements.iter().any(|r| is_copy(&query[r.clone()])) {
        return None;
    }
    if statements.len() > 1 {
        return Some(Err(unsupported(
            "COPY together with other statements in one query message (send the COPY alone)",
        )));
    }
    Some(parse(&query[statements[0].clone()]))
}

/// One option as written: its name and its argument.
#[derive(Clone, Debug, PartialEq)]
enum Arg {
    None,
    Word(String),
    Str(String),
    Star,
    List(Vec<String>),
}

struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    i: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&Token<'a>> {
        self.tokens.get(self.i)
    }

    fn is(&self, kw: &str) -> bool {
        self.peek().is_some_and(|t| t.is(kw))
    }

    fn eat(&mut self, kw: &str) -> bool {
        let yes = self.is(kw);
        if yes {
            self.i += 1;
        }
        yes
    }

    fn is_punct(&self, p: &str) -> bool {
        self.peek()
            .is_some_and(|t| t.kind == Kind::Punct && t.text == p)
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        let yes = self.is_punct(p);
        if yes {
            self.i += 1;
        }
        yes
    }

    /// PostgreSQL's `42601` at the current token.
    fn syntax(&self) -> ErrorInfo {
        match self.peek() {
            Some(t) => error("42601", format!("syntax error at or near \"{}\"", t.text)),
            None => error("42601", "syntax error at end of input"),
        }
    }

    fn expect(&mut self, kw: &str) -> Result<(), ErrorInfo> {
        if self.eat(kw) {
            Ok(())
        } else {
            Err(self.syntax())
        }
    }

    fn expect_punct(&mut self, p: &str) -> Result<(), ErrorInfo> {
        if self.eat_punct(p) {
            Ok(())
        } else {
            Err(self.syntax())
        }
    }

    /// A name: a bare word or a quoted identifier.
    fn name(&mut self) -> Result<String, ErrorInfo> {
        match self.peek() {
            Some(t) if matches!(t.kind, Kind::Word | Kind::Quoted) => {
                let v = t.value().into_owned();
                self.i += 1;
                Ok(v)
            }
            _ => Err(self.syntax()),
        }
    }

    /// `'…'` (standard_conforming_strings: backslashes are themselves) or
    /// an escape string `E'…'`.
    fn string(&mut self) -> Option<String> {
        let t = *self.peek()?;
        if t.kind == Kind::String {
            self.i += 1;
            return Some(t.value().into_owned());
        }
        let next = self.tokens.get(self.i + 1)?;
        if t.kind == Kind::Word
            && t.text.eq_ignore_ascii_case("e")
            && next.kind == Kind::String
            && next.start == t.start + 1
        {
            self.i += 2;
            return Some(e_string(&next.value()));
        }
        None
    }

    fn expect_string(&mut self) -> Result<String, ErrorInfo> {
        self.string().ok_or_else(|| self.syntax())
    }

    /// `name [, name …]`, after its `(` when `parens`.
    fn names(&mut self, parens: bool) -> Result<Vec<String>, ErrorInfo> {
        let mut out = vec![self.name()?];
        while self.eat_punct(",") {
            out.push(self.name()?);
        }
        if parens {
            self.expect_punct(")")?;
        }
        Ok(out)
    }

    fn at_end(&self) -> bool {
        self.tokens[self.i..].iter().all(|t| t.kind == Kind::Semi)
    }
}

/// The value of an `E'…'` string: PostgreSQL's backslash escapes.
fn e_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some(d @ '0'..='7') => {
                let mut v = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(x) => {
                            v = v * 8 + x;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(v & 0xff).unwrap_or('\u{fffd}'));
            }
            Some('x') => {
                let mut v = 0;
                let mut n = 0;
                while n < 2 {
                    match chars.peek().and_then(|c| c.to_digit(16)) {
                        Some(x) => {
                            v = v * 16 + x;
                            chars.next();
                            n += 1;
                        }
                        None => break,
                    }
                }
                if n == 0 {
                    out.push('x');
                } else {
                    out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// Parses one COPY statement (PostgreSQL's grammar, the options list and
/// the older `CSV HEADER …` spelling).
pub(crate) fn parse(sql: &str) -> Result<Command, ErrorInfo> {
    let mut p = Parser {
        tokens: tokenize::code(sql).collect(),
        i: 0,
    };
    p.expect("COPY")?;
    let source = if p.eat_punct("(") {
        let open = p.i;
        let mut depth = 1usize;
        while let Some(t) = p.peek() {
            if t.kind == Kind::Punct && t.text == "(" {
                depth += 1;
            } else if t.kind == Kind::Punct && t.text == ")" {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            p.i += 1;
        }
        let Some(close) = p.peek().copied() else {
            return Err(p.syntax());
        };
        if p.i == open {
            return Err(p.syntax());
        }
        let start = p.tokens[open].start;
        p.i += 1;
        Source::Query(sql[start..close.start].trim().to_owned())
    } else {
        let first = p.name()?;
        let name = if p.eat_punct(".") {
            let name = p.name()?;
            if !first.eq_ignore_ascii_case("public") && !first.eq_ignore_ascii_case("main") {
                return Err(unsupported(format!(
                    "COPY of a table outside the main schema ({first}.{name})"
                )));
            }
            name
        } else {
            first
        };
        let columns = if p.eat_punct("(") {
            Some(p.names(true)?)
        } else {
            None
        };
        Source::Table { name, columns }
    };
    let from = if p.eat("FROM") {
        true
    } else if p.eat("TO") {
        false
    } else {
        return Err(p.syntax());
    };
    if from && matches!(source, Source::Query(_)) {
        p.i -= 1;
        return Err(p.syntax());
    }
    // PostgreSQL takes STDIN and STDOUT alike in either direction.
    if !(p.eat("STDIN") || p.eat("STDOUT")) {
        if p.is("PROGRAM") || p.peek().is_some_and(|t| t.kind == Kind::String) {
            return Err(error(
                "0A000",
                "COPY to or from a file or program on the server is not supported by pleroma \
                 serve: use STDIN/STDOUT (psql's \\copy reads and writes the file on the client)",
            ));
        }
        return Err(p.syntax());
    }
    let options = if p.eat("WITH") && p.is_punct("(") || p.is_punct("(") {
        generic_options(&mut p)?
    } else {
        old_options(&mut p)?
    };
    if p.is("WHERE") {
        return Err(unsupported("COPY FROM … WHERE"));
    }
    if !p.at_end() {
        return Err(p.syntax());
    }
    let opts = options_from(options, from)?;
    Ok(Command { source, from, opts })
}

/// `( name [arg] [, …] )`.
fn generic_options(p: &mut Parser<'_>) -> Result<Vec<(String, Arg)>, ErrorInfo> {
    p.expect_punct("(")?;
    let mut out = Vec::new();
    loop {
        let name = match p.peek() {
            Some(t) if t.kind == Kind::Word => t.text.to_ascii_lowercase(),
            _ => return Err(p.syntax()),
        };
        p.i += 1;
        let arg = if p.is_punct(",") || p.is_punct(")") {
            Arg::None
        } else if p.eat_punct("(") {
            Arg::List(p.names(true)?)
        } else if p.eat_punct("*") {
            Arg::Star
        } else if let Some(s) = p.string() {
            Arg::Str(s)
        } else {
            match p.peek() {
                Some(t) if matches!(t.kind, Kind::Word | Kind::Number) => {
                    let w = t.text.to_ascii_lowercase();
                    p.i += 1;
                    Arg::Word(w)
                }
                _ => return Err(p.syntax()),
            }
        };
        out.push((name, arg));
        if p.eat_punct(")") {
            return Ok(out);
        }
        p.expect_punct(",")?;
    }
}

/// The spelling from before PostgreSQL 9.0: `[WITH] [BINARY] [DELIMITER
/// [AS] 'c'] [NULL [AS] 's'] [CSV [HEADER] [QUOTE [AS] 'q'] [ESCAPE [AS]
/// 'e'] [FORCE QUOTE …] [FORCE NOT NULL …]]`, in any order.
fn old_options(p: &mut Parser<'_>) -> Result<Vec<(String, Arg)>, ErrorInfo> {
    let mut out = Vec::new();
    let string_after = |p: &mut Parser<'_>| {
        p.eat("AS");
        p.expect_string()
    };
    let cols = |p: &mut Parser<'_>| {
        if p.eat_punct("*") {
            Ok(Arg::Star)
        } else {
            p.names(false).map(Arg::List)
        }
    };
    while !p.at_end() && !p.is("WHERE") {
        let (name, arg) = if p.eat("BINARY") {
            ("format", Arg::Word("binary".into()))
        } else if p.eat("CSV") {
            ("format", Arg::Word("csv".into()))
        } else if p.eat("HEADER") {
            ("header", Arg::None)
        } else if p.eat("FREEZE") {
            ("freeze", Arg::None)
        } else if p.eat("DELIMITER") {
            ("delimiter", Arg::Str(string_after(p)?))
        } else if p.eat("NULL") {
            ("null", Arg::Str(string_after(p)?))
        } else if p.eat("QUOTE") {
            ("quote", Arg::Str(string_after(p)?))
        } else if p.eat("ESCAPE") {
            ("escape", Arg::Str(string_after(p)?))
        } else if p.eat("ENCODING") {
            ("encoding", Arg::Str(p.expect_string()?))
        } else if p.eat("FORCE") {
            if p.eat("QUOTE") {
                ("force_quote", cols(p)?)
            } else if p.eat("NOT") {
                p.expect("NULL")?;
                ("force_not_null", cols(p)?)
            } else if p.eat("NULL") {
                ("force_null", cols(p)?)
            } else {
                return Err(p.syntax());
            }
        } else {
            return Err(p.syntax());
        };
        out.push((name.to_owned(), arg));
    }
    Ok(out)
}

fn boolean(arg: &Arg) -> Option<bool> {
    match arg {
        Arg::None => Some(true),
        Arg::Word(w) | Arg::Str(w) => match w.to_ascii_lowercase().as_str() {
            "true" | "on" | "1" | "yes" => Some(true),
            "false" | "off" | "0" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// PostgreSQL's `ProcessCopyOptions`: defaults, and what it refuses.
fn options_from(options: Vec<(String, Arg)>, from: bool) -> Result<Options, ErrorInfo> {
    let mut seen: Vec<String> = Vec::new();
    let mut format: Option<String> = None;
    let mut delimiter: Option<String> = None;
    let mut null: Option<String> = None;
    let mut header = Header::No;
    let mut quote: Option<String> = None;
    let mut escape: Option<String> = None;
    let mut force_quote = Cols::None;
    let mut force_not_null = Cols::None;
    let mut force_null = Cols::None;
    let invalid = |m: String| error("22023", m);
    for (name, arg) in options {
        if seen.contains(&name) {
            return Err(error("42601", "conflicting or redundant options"));
        }
        seen.push(name.clone());
        let string = |arg: &Arg| match arg {
            Arg::Str(s) | Arg::Word(s) => Ok(s.clone()),
            _ => Err(error("22023", format!("{name} requires a string value"))),
        };
        let cols = |arg: &Arg| match arg {
            Arg::Star => Ok(Cols::All),
            Arg::List(l) => Ok(Cols::Some(l.clone())),
            _ => Err(error(
                "22023",
                format!("argument to option \"{name}\" must be a list of column names"),
            )),
        };
        match name.as_str() {
            "format" => {
                let f = string(&arg)?.to_ascii_lowercase();
                match f.as_str() {
                    "text" | "csv" => format = Some(f),
                    "binary" => return Err(unsupported("COPY in binary format (use text or csv)")),
                    _ => return Err(invalid(format!("COPY format \"{f}\" not recognized"))),
                }
            }
            "delimiter" => delimiter = Some(string(&arg)?),
            "null" => null = Some(string(&arg)?),
            "header" => {
                header = match &arg {
                    Arg::Word(w) | Arg::Str(w) if w.eq_ignore_ascii_case("match") => {
                        if !from {
                            return Err(error(
                                "0A000",
                                "cannot use \"match\" with HEADER in COPY TO",
                            ));
                        }
                        Header::Match
                    }
                    a => match boolean(a) {
                        Some(true) => Header::Yes,
                        Some(false) => Header::No,
                        None => {
                            return Err(invalid(
                                "header requires a Boolean value or \"match\"".into(),
                            ))
                        }
                    },
                }
            }
            "quote" => quote = Some(string(&arg)?),
            "escape" => escape = Some(string(&arg)?),
            "force_quote" => force_quote = cols(&arg)?,
            "force_not_null" => force_not_null = cols(&arg)?,
            "force_null" => force_null = cols(&arg)?,
            "encoding" => {
                let e = string(&arg)?;
                if !matches!(
                    e.to_ascii_lowercase().replace(['-', '_'], "").as_str(),
                    "utf8" | "unicode"
                ) {
                    return Err(unsupported(format!(
                        "COPY with ENCODING '{e}' (the server reads and writes UTF8)"
                    )));
                }
            }
            "freeze" | "default" | "on_error" | "log_verbosity" | "reject_limit" => {
                return Err(unsupported(format!("COPY option {}", name.to_uppercase())))
            }
            _ => return Err(error("42601", format!("option \"{name}\" not recognized"))),
        }
    }
    let csv = format.as_deref() == Some("csv");
    let one_byte = |what: &str, s: &str| {
        if s.len() == 1 {
            Ok(s.as_bytes()[0])
        } else {
            Err(error(
                "0A000",
                format!("COPY {what} must be a single one-byte character"),
            ))
        }
    };
    let delimiter = one_byte(
        "delimiter",
        delimiter.as_deref().unwrap_or(if csv { "," } else { "\t" }),
    )?;
    if delimiter == b'\n' || delimiter == b'\r' {
        return Err(invalid(
            "COPY delimiter cannot be newline or carriage return".into(),
        ));
    }
    let null = null.unwrap_or_else(|| if csv { "" } else { "\\N" }.to_owned());
    if null.contains(['\n', '\r']) {
        return Err(invalid(
            "COPY null representation cannot use newline or carriage return".into(),
        ));
    }
    if !csv && b"\\.abcdefghijklmnopqrstuvwxyz0123456789".contains(&delimiter) {
        return Err(invalid(format!(
            "COPY delimiter cannot be \"{}\"",
            delimiter as char
        )));
    }
    let only_csv = |what: &str, given: bool| {
        if given && !csv {
            Err(error(
                "0A000",
                format!("COPY {what} available only in CSV mode"),
            ))
        } else {
            Ok(())
        }
    };
    only_csv("quote", quote.is_some())?;
    only_csv("escape", escape.is_some())?;
    only_csv("force quote", force_quote != Cols::None)?;
    only_csv("force not null", force_not_null != Cols::None)?;
    only_csv("force null", force_null != Cols::None)?;
    if force_quote != Cols::None && from {
        return Err(error(
            "0A000",
            "COPY force quote only available using COPY TO",
        ));
    }
    if (force_not_null != Cols::None || force_null != Cols::None) && !from {
        return Err(error(
            "0A000",
            "COPY force not null and force null only available using COPY FROM",
        ));
    }
    let quote = one_byte("quote", quote.as_deref().unwrap_or("\""))?;
    let escape = match escape.as_deref() {
        Some(e) => one_byte("escape", e)?,
        None => quote,
    };
    if csv && delimiter == quote {
        return Err(invalid("COPY delimiter and quote must be different".into()));
    }
    if csv && null.as_bytes().contains(&delimiter) {
        return Err(invalid(
            "COPY delimiter must not appear in the NULL specification".into(),
        ));
    }
    if csv && null.as_bytes().contains(&quote) {
        return Err(invalid(
            "CSV quote character must not appear in the NULL specification".into(),
        ));
    }
    Ok(Options {
        csv,
        delimiter,
        null,
        header,
        quote,
        escape,
        force_quote,
        force_not_null,
        force_null,
    })
}

// ---------------------------------------------------------------------------
// Writing: COPY TO

/// A value in the text format (`CopyAttributeOutText`).
fn put_text(out: &mut Vec<u8>, v: &[u8], delimiter: u8) {
    for &c in v {
        let escaped = match c {
            0x08 => Some(b'b'),
            0x0c => Some(b'f'),
            b'\n' => Some(b'n'),
            b'\r' => Some(b'r'),
            b'\t' => Some(b't'),
            0x0b => Some(b'v'),
            b'\\' => Some(b'\\'),
            c if c == delimiter => Some(c),
            _ => None,
        };
        match escaped {
            Some(e) => out.extend_from_slice(&[b'\\', e]),
            None => out.push(c),
        }
    }
}

/// A value in CSV (`CopyAttributeOutCSV`): quoted when forced, when it is
/// the NULL string, when it holds the delimiter, the quote or a line end,
/// or when it is `\.` alone on its line.
fn put_csv(out: &mut Vec<u8>, v: &[u8], o: &Options, force: bool, single: bool) {
    let quote = force
        || v == o.null.as_bytes()
        || (single && v == b"\\.")
        || v.iter()
            .any(|&c| c == o.delimiter || c == o.quote || c == b'\n' || c == b'\r');
    if !quote {
        out.extend_from_slice(v);
        return;
    }
    out.push(o.quote);
    for &c in v {
        if c == o.quote || c == o.escape {
            out.push(o.escape);
        }
        out.push(c);
    }
    out.push(o.quote);
}

/// One line of COPY output.
fn put_line(out: &mut Vec<u8>, values: &[Option<&[u8]>], o: &Options, force: &[bool]) {
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(o.delimiter);
        }
        match v {
            None => out.extend_from_slice(o.null.as_bytes()),
            Some(v) if o.csv => put_csv(out, v, o, force[i], values.len() == 1),
            Some(v) => put_text(out, v, o.delimiter),
        }
    }
    out.push(b'\n');
}

/// The fields of a DataRow as the wire holds them (`None`: NULL).
fn fields_of(row: &DataRow) -> Vec<Option<&[u8]>> {
    let mut out = Vec::with_capacity(row.field_count.max(0) as usize);
    let mut rest: &[u8] = &row.data;
    for _ in 0..row.field_count {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            break;
        };
        let len = i32::from_be_bytes(*len);
        if len < 0 {
            out.push(None);
            rest = tail;
        } else {
            let (v, tail) = tail.split_at((len as usize).min(tail.len()));
            out.push(Some(v));
            rest = tail;
        }
    }
    out
}

/// What a COPY TO sends: one CopyData per line.
pub(crate) struct Out {
    pub(crate) columns: usize,
    pub(crate) lines: Vec<Bytes>,
    pub(crate) rows: usize,
}

fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The columns a COPY of `table` copies, as SQLite spells them: those
/// listed, or every column an INSERT can set (generated ones left out, as
/// PostgreSQL leaves them out).
fn table_columns(
    e: &Engine,
    table: &str,
    asked: Option<&[String]>,
) -> Result<Vec<String>, ErrorInfo> {
    let sqlite = |err: pleroma::rusqlite::Error| from_router(&pleroma::Error::Sqlite(err));
    let all: Vec<(String, i64)> = e
        .conn
        .sqlite()
        .prepare_cached("SELECT name, hidden FROM pragma_table_xinfo(?1, 'main')")
        .map_err(sqlite)?
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(sqlite)?
        .collect::<Result<_, _>>()
        .map_err(sqlite)?;
    if all.is_empty() {
        return Err(error("42P01", format!("no such table: {table}")));
    }
    let Some(asked) = asked else {
        return Ok(all.into_iter().filter(|c| c.1 == 0).map(|c| c.0).collect());
    };
    let mut out: Vec<String> = Vec::with_capacity(asked.len());
    for a in asked {
        let Some((name, hidden)) = all.iter().find(|c| c.0.eq_ignore_ascii_case(a)) else {
            return Err(error(
                "42703",
                format!("column \"{a}\" of relation \"{table}\" does not exist"),
            ));
        };
        if *hidden != 0 {
            let mut e = error("42P10", format!("column \"{a}\" is a generated column"));
            e.detail = Some("Generated columns cannot be used in COPY.".into());
            return Err(e);
        }
        if out.iter().any(|o| o.eq_ignore_ascii_case(name)) {
            return Err(error(
                "42701",
                format!("column \"{a}\" specified more than once"),
            ));
        }
        out.push(name.clone());
    }
    Ok(out)
}

/// The columns a FORCE_… option names, as flags over `names`.
fn flags(cols: &Cols, names: &[String], option: &str) -> Result<Vec<bool>, ErrorInfo> {
    match cols {
        Cols::None => Ok(vec![false; names.len()]),
        Cols::All => Ok(vec![true; names.len()]),
        Cols::Some(list) => {
            let mut out = vec![false; names.len()];
            for c in list {
                match names.iter().position(|n| n.eq_ignore_ascii_case(c)) {
                    Some(i) => out[i] = true,
                    None => {
                        return Err(error(
                            "42P10",
                            format!("{option} column \"{c}\" not referenced by COPY"),
                        ))
                    }
                }
            }
            Ok(out)
        }
    }
}

/// Runs a COPY TO on the session's thread: the query as a simple-protocol
/// SELECT runs, and its text values in the COPY format.
pub(crate) fn copy_to(
    e: &mut Engine,
    cmd: &Command,
    status: TransactionStatus,
) -> Result<Out, ErrorInfo> {
    if status == TransactionStatus::Error {
        return Err(aborted());
    }
    let sql = match &cmd.source {
        Source::Table { name, columns } => {
            let cols = table_columns(e, name, columns.as_deref())?;
            format!(
                "SELECT {} FROM main.{}",
                cols.iter().map(|c| ident(c)).collect::<Vec<_>>().join(", "),
                ident(name)
            )
        }
        Source::Query(q) => {
            if pleroma::split::statements(q).len() != 1 {
                return Err(error(
                    "42601",
                    "COPY (query) takes exactly one query between its parentheses",
                ));
            }
            // Refused before it runs: a statement that returns no rows
            // (it would have run for nothing), or one with parameters.
            if let Ok(stmt) = e.conn.sqlite().prepare(q) {
                if stmt.parameter_count() > 0 {
                    return Err(error("42P02", "COPY (query) cannot take parameters"));
                }
                if stmt.column_count() == 0 {
                    return Err(error(
                        "0A000",
                        "COPY (query) TO needs a query that returns rows (SELECT, VALUES, or a \
                         statement with RETURNING)",
                    ));
                }
            }
            q.clone()
        }
    };
    let outcome = e.statement(&sql, &[], status, &Format::UnifiedText, None)?;
    let Outcome::Rows { fields, rows, .. } = outcome else {
        return Err(error(
            "0A000",
            "COPY (query) TO needs a query that returns rows",
        ));
    };
    let o = &cmd.opts;
    let names: Vec<String> = fields.iter().map(|f| f.name().to_owned()).collect();
    let force = flags(&o.force_quote, &names, "FORCE_QUOTE")?;
    let mut lines = Vec::with_capacity(rows.len() + 1);
    let mut buf = Vec::new();
    if o.header != Header::No {
        let header: Vec<Option<&[u8]>> = names.iter().map(|n| Some(n.as_bytes())).collect();
        // The header is never force-quoted.
        put_line(&mut buf, &header, o, &vec![false; names.len()]);
        lines.push(Bytes::from(std::mem::take(&mut buf)));
    }
    for row in &rows {
        put_line(&mut buf, &fields_of(row), o, &force);
        lines.push(Bytes::from(std::mem::take(&mut buf)));
    }
    Ok(Out {
        columns: names.len(),
        lines,
        rows: rows.len(),
    })
}

// ---------------------------------------------------------------------------
// Reading: COPY FROM

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Eol {
    Nl,
    Cr,
    CrNl,
}

/// What the next line of the input is.
enum Scan {
    /// Not a whole line yet.
    More,
    /// A line: its end, and where the next one starts.
    Line { end: usize, next: usize },
    /// `\.`: the end of the data.
    Marker,
}

/// The input of a COPY FROM, read as PostgreSQL reads it.
struct Reader {
    opts: Options,
    names: Vec<String>,
    force_not_null: Vec<bool>,
    force_null: Vec<bool>,
    buf: Vec<u8>,
    /// Lines read so far.
    line: u64,
    eol: Option<Eol>,
    /// `\.` was read: the rest is ignored, as PostgreSQL ignores it.
    ended: bool,
    /// The header line is still to be read.
    header: Header,
}

/// A row read, with the line it came from.
type Row = (u64, Vec<Value>);

/// A CSV field (`None`: NULL) and whether it was quoted.
type CsvField = (Option<Vec<u8>>, bool);

impl Reader {
    fn line_end_error(&self, cr: bool) -> ErrorInfo {
        let (what, hint) = match (self.opts.csv, cr) {
            (false, true) => (
                "literal carriage return found in data",
                "Use \"\\r\" to represent carriage return.",
            ),
            (false, false) => (
                "literal newline found in data",
                "Use \"\\n\" to represent newline.",
            ),
            (true, true) => (
                "unquoted carriage return found in data",
                "Use quoted CSV field to represent carriage return.",
            ),
            (true, false) => (
                "unquoted newline found in data",
                "Use quoted CSV field to represent newline.",
            ),
        };
        let mut e = bad_format(what);
        e.hint = Some(hint.into());
        e
    }

    /// The line end at `i` (a CR or LF outside quotes), in the input's one
    /// newline style (set by its first line).
    fn eol_at(&mut self, i: usize, eof: bool) -> Result<Scan, ErrorInfo> {
        let b = &self.buf;
        if b[i] == b'\n' {
            match self.eol {
                None => self.eol = Some(Eol::Nl),
                Some(Eol::Nl) => {}
                Some(_) => return Err(self.line_end_error(false)),
            }
            return Ok(Scan::Line {
                end: i,
                next: i + 1,
            });
        }
        let lf_next = match b.get(i + 1) {
            Some(&c) => c == b'\n',
            None if eof => false,
            None => return Ok(Scan::More),
        };
        match self.eol {
            None => self.eol = Some(if lf_next { Eol::CrNl } else { Eol::Cr }),
            Some(Eol::CrNl) if !lf_next => return Err(self.line_end_error(true)),
            Some(Eol::Nl) => return Err(self.line_end_error(true)),
            _ => {}
        }
        let len = if self.eol == Some(Eol::CrNl) { 2 } else { 1 };
        Ok(Scan::Line {
            end: i,
            next: i + len,
        })
    }

    /// After `\.` at `j`: the end marker when a line end (or the end of the
    /// input) follows.
    fn marker(&self, j: usize, eof: bool) -> Result<Scan, ErrorInfo> {
        match self.buf.get(j) {
            None if eof => Ok(Scan::Marker),
            None => Ok(Scan::More),
            Some(b'\n' | b'\r') => Ok(Scan::Marker),
            Some(_) => Err(bad_format("end-of-copy marker corrupt")),
        }
    }

    /// The line starting at `start`.
    fn scan(&mut self, start: usize, eof: bool) -> Result<Scan, ErrorInfo> {
        let n = self.buf.len();
        let tail = |i: usize| {
            if eof && i > start {
                Scan::Line { end: n, next: n }
            } else {
                Scan::More
            }
        };
        if !self.opts.csv {
            let mut i = start;
            loop {
                if i >= n {
                    return Ok(tail(i));
                }
                match self.buf[i] {
                    b'\\' => {
                        let Some(&next) = self.buf.get(i + 1) else {
                            return Ok(tail(n));
                        };
                        if next == b'.' {
                            if i != start {
                                return Err(bad_format(
                                    "end-of-copy marker is not alone on its line",
                                ));
                            }
                            return self.marker(i + 2, eof);
                        }
                        // A backslash takes the next byte, a line end too.
                        i += 2;
                    }
                    b'\n' | b'\r' => return self.eol_at(i, eof),
                    _ => i += 1,
                }
            }
        }
        // CSV: `\.` only alone on a line; a line end inside quotes is data.
        if self.buf[start..].starts_with(b"\\.") {
            match self.marker(start + 2, eof) {
                Ok(Scan::Marker) => return Ok(Scan::Marker),
                Ok(Scan::More) => return Ok(Scan::More),
                _ => {}
            }
        } else if !eof && (self.buf[start..] == *b"\\" || self.buf.len() == start) {
            return Ok(Scan::More);
        }
        let (quote, escape) = (self.opts.quote, self.opts.escape);
        // As PostgreSQL: an escape that is the quote is just the quote.
        let escape = (escape != quote).then_some(escape);
        let (mut in_quote, mut last_was_esc) = (false, false);
        let mut i = start;
        loop {
            if i >= n {
                if eof && in_quote {
                    return Err(bad_format("unterminated CSV quoted field"));
                }
                return Ok(tail(i));
            }
            let c = self.buf[i];
            if in_quote && Some(c) == escape {
                last_was_esc = !last_was_esc;
            }
            if c == quote && !last_was_esc {
                in_quote = !in_quote;
            }
            if Some(c) != escape {
                last_was_esc = false;
            }
            if !in_quote && (c == b'\n' || c == b'\r') {
                return self.eol_at(i, eof);
            }
            i += 1;
        }
    }

    /// The fields of a text-format line (`CopyReadAttributesText`):
    /// `None` for the NULL string.
    fn text_fields(&self, raw: &[u8]) -> Vec<Option<Vec<u8>>> {
        let (delimiter, null) = (self.opts.delimiter, self.opts.null.as_bytes());
        let mut fields = Vec::new();
        let mut i = 0;
        loop {
            let start = i;
            let mut end;
            let mut out = Vec::new();
            let mut found_delimiter = false;
            loop {
                end = i;
                let Some(&c) = raw.get(i) else { break };
                i += 1;
                if c == delimiter {
                    found_delimiter = true;
                    break;
                }
                if c != b'\\' {
                    out.push(c);
                    continue;
                }
                let Some(&c) = raw.get(i) else { break };
                i += 1;
                let v = match c {
                    b'0'..=b'7' => {
                        let mut v = u32::from(c - b'0');
                        for _ in 0..2 {
                            match raw.get(i) {
                                Some(&d @ b'0'..=b'7') => {
                                    v = v * 8 + u32::from(d - b'0');
                                    i += 1;
                                }
                                _ => break,
                            }
                        }
                        (v & 0xff) as u8
                    }
                    b'x' => match raw.get(i).and_then(|&d| (d as char).to_digit(16)) {
                        Some(mut v) => {
                            i += 1;
                            if let Some(d) = raw.get(i).and_then(|&d| (d as char).to_digit(16)) {
                                v = v * 16 + d;
                                i += 1;
                            }
                            v as u8
                        }
                        None => b'x',
                    },
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'v' => 0x0b,
                    other => other,
                };
                out.push(v);
            }
            fields.push(if raw[start..end] == *null {
                None
            } else {
                Some(out)
            });
            if !found_delimiter {
                return fields;
            }
        }
    }

    /// The fields of a CSV line (`CopyReadAttributesCSV`), with whether each
    /// was quoted.
    fn csv_fields(&self, raw: &[u8]) -> Result<Vec<CsvField>, ErrorInfo> {
        let o = &self.opts;
        let null = o.null.as_bytes();
        let mut fields = Vec::new();
        let mut i = 0;
        loop {
            let start = i;
            let mut out = Vec::new();
            let (mut saw_quote, mut found_delimiter) = (false, false);
            let end;
            'field: loop {
                loop {
                    let Some(&c) = raw.get(i) else {
                        end = i;
                        break 'field;
                    };
                    i += 1;
                    if c == o.delimiter {
                        end = i - 1;
                        found_delimiter = true;
                        break 'field;
                    }
                    if c == o.quote {
                        saw_quote = true;
                        break;
                    }
                    out.push(c);
                }
                loop {
                    let Some(&c) = raw.get(i) else {
                        return Err(bad_format("unterminated CSV quoted field"));
                    };
                    i += 1;
                    if c == o.escape {
                        if let Some(&next) = raw.get(i) {
                            if next == o.escape || next == o.quote {
                                out.push(next);
                                i += 1;
                                continue;
                            }
                        }
                    }
                    if c == o.quote {
                        break;
                    }
                    out.push(c);
                }
            }
            let value = if !saw_quote && raw[start..end] == *null {
                None
            } else {
                Some(out)
            };
            fields.push((value, saw_quote));
            if !found_delimiter {
                return Ok(fields);
            }
        }
    }

    /// A field's bytes as text: UTF-8, no NUL (what PostgreSQL's encoding
    /// check refuses).
    fn text(bytes: Vec<u8>) -> Result<String, ErrorInfo> {
        let bad = |b: &[u8]| {
            error(
                "22021",
                format!(
                    "invalid byte sequence for encoding \"UTF8\": {}",
                    b.iter()
                        .map(|x| format!("0x{x:02x}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            )
        };
        if bytes.contains(&0) {
            return Err(bad(&[0]));
        }
        String::from_utf8(bytes).map_err(|e| {
            let b = e.as_bytes();
            let at = e.utf8_error().valid_up_to();
            let len = e.utf8_error().error_len().unwrap_or(b.len() - at);
            bad(&b[at..at + len])
        })
    }

    /// The values of one line, one per column.
    fn values(&self, raw: &[u8]) -> Result<Vec<Option<Vec<u8>>>, ErrorInfo> {
        let mut fields: Vec<Option<Vec<u8>>> = if self.opts.csv {
            let null = self.opts.null.as_bytes();
            self.csv_fields(raw)?
                .into_iter()
                .enumerate()
                .map(|(i, (v, quoted))| match v {
                    None if self.force_not_null.get(i) == Some(&true) => Some(null.to_vec()),
                    Some(v) if quoted && self.force_null.get(i) == Some(&true) && v == null => None,
                    v => v,
                })
                .collect()
        } else {
            self.text_fields(raw)
        };
        if fields.len() > self.names.len() {
            return Err(bad_format("extra data after last expected column"));
        }
        if let Some(missing) = self.names.get(fields.len()) {
            return Err(bad_format(format!("missing data for column \"{missing}\"")));
        }
        fields.truncate(self.names.len());
        Ok(fields)
    }

    /// `HEADER MATCH`: the header's fields must be the columns' names.
    fn check_header(&self, raw: &[u8]) -> Result<(), ErrorInfo> {
        let fields: Vec<Option<Vec<u8>>> = if self.opts.csv {
            self.csv_fields(raw)?.into_iter().map(|f| f.0).collect()
        } else {
            self.text_fields(raw)
        };
        if fields.len() != self.names.len() {
            return Err(bad_format(format!(
                "wrong number of fields in header line: got {}, expected {}",
                fields.len(),
                self.names.len()
            )));
        }
        for (i, (f, name)) in fields.into_iter().zip(&self.names).enumerate() {
            match f {
                None => {
                    return Err(bad_format(format!(
                        "column name mismatch in header line field {}: got null value (\"{}\"), \
                         expected \"{name}\"",
                        i + 1,
                        self.opts.null
                    )))
                }
                Some(f) if f != name.as_bytes() => {
                    return Err(bad_format(format!(
                        "column name mismatch in header line field {}: got \"{}\", expected \
                         \"{name}\"",
                        i + 1,
                        String::from_utf8_lossy(&f)
                    )))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// The rows of every whole line received (of the rest too at `eof`).
    /// An error carries the number of its line.
    fn rows(&mut self, data: &[u8], eof: bool) -> Result<Vec<Row>, (u64, ErrorInfo)> {
        if self.ended {
            return Ok(Vec::new());
        }
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        let mut start = 0;
        loop {
            let at = self.line + 1;
            match self.scan(start, eof).map_err(|e| (at, e))? {
                Scan::More => break,
                Scan::Marker => {
                    self.ended = true;
                    break;
                }
                Scan::Line { end, next } => {
                    self.line = at;
                    let raw = &self.buf[start..end];
                    match self.header {
                        Header::Yes => self.header = Header::No,
                        Header::Match => {
                            self.check_header(raw).map_err(|e| (at, e))?;
                            self.header = Header::No;
                        }
                        Header::No => {
                            let values = self
                                .values(raw)
                                .and_then(|vs| {
                                    vs.into_iter()
                                        .map(|v| match v {
                                            None => Ok(Value::Null),
                                            Some(b) => Self::text(b).map(Value::Text),
                                        })
                                        .collect::<Result<Vec<_>, _>>()
                                })
                                .map_err(|e| (at, e))?;
                            out.push((at, values));
                        }
                    }
                    start = next;
                }
            }
        }
        if self.ended {
            self.buf = Vec::new();
        } else {
            self.buf.drain(..start);
        }
        Ok(out)
    }
}

/// A COPY FROM in progress: its transaction is open on the session's
/// connection and its rows go in as their lines arrive.
pub(crate) struct Inbound {
    table: String,
    columns: Vec<String>,
    reader: Reader,
    /// Its own `BEGIN IMMEDIATE` (outside a transaction of the client's);
    /// else a savepoint of the client's transaction.
    own: bool,
    rows: usize,
}

/// Starts a COPY FROM on the session's thread: checks the table and the
/// columns, takes the session's turn to write and opens the transaction.
pub(crate) fn copy_from(
    e: &mut Engine,
    cmd: Command,
    status: TransactionStatus,
) -> Result<Inbound, ErrorInfo> {
    if status == TransactionStatus::Error {
        return Err(aborted());
    }
    let Source::Table { name, columns } = cmd.source else {
        return Err(error("42601", "syntax error at or near \"FROM\""));
    };
    let columns = table_columns(e, &name, columns.as_deref())?;
    let reader = Reader {
        force_not_null: flags(&cmd.opts.force_not_null, &columns, "FORCE_NOT_NULL")?,
        force_null: flags(&cmd.opts.force_null, &columns, "FORCE_NULL")?,
        header: cmd.opts.header.clone(),
        opts: cmd.opts,
        names: columns.clone(),
        buf: Vec::new(),
        line: 0,
        eol: None,
        ended: false,
    };
    if e.turn.is_none() {
        e.turn = Some(e.writers.wait(WRITE_WAIT).ok_or_else(|| {
            error(
                "55P03",
                "database is locked: other sessions held the write lock for 5 s",
            )
        })?);
    }
    let own = !e.in_transaction();
    let begin = if own {
        "BEGIN IMMEDIATE".to_owned()
    } else {
        format!("SAVEPOINT {SAVEPOINT}")
    };
    if let Err(err) = e.conn.execute(&begin, &[]) {
        if !e.in_transaction() {
            e.turn = None;
        }
        return Err(from_router(&err));
    }
    Ok(Inbound {
        table: name,
        columns,
        reader,
        own,
        rows: 0,
    })
}

impl Inbound {
    pub(crate) fn columns(&self) -> usize {
        self.columns.len()
    }

    /// PostgreSQL's CONTEXT of an error in a COPY FROM.
    fn context(&self, mut e: ErrorInfo, line: Option<u64>) -> ErrorInfo {
        e.where_context = Some(match line {
            Some(n) => format!("COPY {}, line {n}", self.table),
            None => format!("COPY {}", self.table),
        });
        e
    }

    fn append(&mut self, e: &mut Engine, rows: Vec<Row>) -> Result<(), ErrorInfo> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut appender = e
            .conn
            .appender_for(&self.table, &self.columns)
            .map_err(|err| self.context(from_router(&err), None))?;
        for (line, row) in &rows {
            if let Err(err) = appender.append_row(row) {
                return Err(self.context(from_router(&err), Some(*line)));
            }
        }
        appender
            .flush()
            .map_err(|err| self.context(from_router(&err), None))?;
        self.rows += rows.len();
        Ok(())
    }

    /// One CopyData message.
    pub(crate) fn feed(&mut self, e: &mut Engine, data: &[u8]) -> Result<(), ErrorInfo> {
        let rows = self
            .reader
            .rows(data, false)
            .map_err(|(line, err)| self.context(err, Some(line)))?;
        self.append(e, rows)
    }

    /// CopyDone: the last line, then the commit. Returns the rows copied.
    pub(crate) fn finish(&mut self, e: &mut Engine) -> Result<usize, ErrorInfo> {
        let rows = self
            .reader
            .rows(&[], true)
            .map_err(|(line, err)| self.context(err, Some(line)))?;
        self.append(e, rows)?;
        let end = if self.own {
            "COMMIT".to_owned()
        } else {
            format!("RELEASE {SAVEPOINT}")
        };
        e.conn
            .execute(&end, &[])
            .map_err(|err| self.context(from_router(&err), None))?;
        if !e.in_transaction() {
            e.turn = None;
        }
        Ok(self.rows)
    }

    /// Rolls every row of this COPY back (an error, CopyFail, or a client
    /// that went on without finishing it).
    pub(crate) fn abort(self, e: &mut Engine) {
        if e.in_transaction() {
            if self.own {
                let _ = e.conn.execute("ROLLBACK", &[]);
            } else {
                let _ = e.conn.execute(&format!("ROLLBACK TO {SAVEPOINT}"), &[]);
                let _ = e.conn.execute(&format!("RELEASE {SAVEPOINT}"), &[]);
            }
        }
        if !e.in_transaction() {
            e.turn = None;
        }
    }
}

// ---------------------------------------------------------------------------
// The protocol

/// The session's COPY FROM in progress, between its messages.
#[derive(Default)]
pub(crate) struct Pending(Mutex<Option<Inbound>>);

impl Pending {
    pub(crate) fn take(&self) -> Option<Inbound> {
        // Only moved in and out: a poisoned lock still holds valid data.
        self.lock().take()
    }

    pub(crate) fn put(&self, inbound: Inbound) {
        *self.lock() = Some(inbound);
    }

    fn lock(&self) -> MutexGuard<'_, Option<Inbound>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(sql: &str) -> Options {
        parse(sql).unwrap().opts
    }

    #[test]
    fn both_spellings_of_the_options_parse_alike() {
        let new = parse("COPY t (a, \"B\") FROM STDIN WITH (FORMAT csv, HEADER)").unwrap();
        let old = parse("copy t(a, \"B\") from stdin csv header").unwrap();
        assert_eq!(new, old);
        assert_eq!(
            new.source,
            Source::Table {
                name: "t".into(),
                columns: Some(vec!["a".into(), "B".into()])
            }
        );
        assert!(new.from && new.opts.csv && new.opts.header == Header::Yes);
        assert_eq!(new.opts.null, "");
        let q =
            parse("COPY ( SELECT (1), ')' FROM t ) TO STDOUT (DELIMITER '|', NULL 'x');").unwrap();
        assert_eq!(q.source, Source::Query("SELECT (1), ')' FROM t".into()));
        assert_eq!((q.opts.delimiter, q.opts.null.as_str()), (b'|', "x"));
        assert_eq!(
            opts("COPY t TO STDOUT DELIMITER AS E'\\t'").delimiter,
            b'\t'
        );
        assert_eq!(opts("COPY t TO STDOUT").null, "\\N");
        assert_eq!(
            opts("COPY t TO STDOUT CSV FORCE QUOTE a, b").force_quote,
            Cols::Some(vec!["a".into(), "b".into()])
        );
    }

    #[test]
    fn what_is_not_supported_is_declined_by_name() {
        let code = |sql: &str| parse(sql).unwrap_err().code;
        assert_eq!(code("COPY t TO '/tmp/x'"), "0A000");
        assert_eq!(code("COPY t FROM PROGRAM 'ls'"), "0A000");
        assert_eq!(code("COPY t TO STDOUT (FORMAT binary)"), "0A000");
        assert_eq!(code("COPY t TO STDOUT BINARY"), "0A000");
        assert_eq!(code("COPY t FROM STDIN (FREEZE)"), "0A000");
        assert_eq!(code("COPY t FROM STDIN WHERE a > 1"), "0A000");
        assert_eq!(code("COPY t TO STDOUT (FORMAT xml)"), "22023");
        assert_eq!(code("COPY t TO STDOUT (BOGUS)"), "42601");
        assert_eq!(code("COPY t TO STDOUT (HEADER, HEADER)"), "42601");
        assert_eq!(code("COPY (SELECT 1) FROM STDIN"), "42601");
        assert_eq!(code("COPY t TO STDOUT (QUOTE '''')"), "0A000");
        assert_eq!(code("COPY t TO STDOUT (DELIMITER 'ab')"), "0A000");
        assert_eq!(code("COPY t TO STDOUT (HEADER match)"), "0A000");
        assert_eq!(code("COPY t TO STDOUT CSV DELIMITER '\"'"), "22023");
        assert!(in_query("COPY t TO STDOUT; SELECT 1").unwrap().is_err());
        assert!(in_query("SELECT 'copy'").is_none());
    }

    fn out(values: &[Option<&str>], o: &Options) -> String {
        let v: Vec<Option<&[u8]>> = values.iter().map(|v| v.map(str::as_bytes)).collect();
        let mut buf = Vec::new();
        put_line(&mut buf, &v, o, &vec![false; v.len()]);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn values_go_out_with_postgres_escaping() {
        let text = opts("COPY t TO STDOUT");
        assert_eq!(
            out(
                &[Some("a\tb\\c\nd\re"), None, Some(""), Some("\u{1}")],
                &text
            ),
            "a\\tb\\\\c\\nd\\re\t\\N\t\t\u{1}\n"
        );
        let csv = opts("COPY t TO STDOUT CSV");
        assert_eq!(
            out(
                &[
                    Some("a,b"),
                    Some("say \"hi\""),
                    Some(""),
                    None,
                    Some("x\ny")
                ],
                &csv
            ),
            "\"a,b\",\"say \"\"hi\"\"\",\"\",,\"x\ny\"\n"
        );
        assert_eq!(out(&[Some("\\.")], &csv), "\"\\.\"\n");
        assert_eq!(out(&[Some("\\."), Some("b")], &csv), "\\.,b\n");
    }

    fn read(sql: &str, names: &[&str], chunks: &[&[u8]]) -> Result<Vec<Vec<Value>>, (u64, String)> {
        let cmd = parse(sql).unwrap();
        let n = names.len();
        let mut r = Reader {
            header: cmd.opts.header.clone(),
            opts: cmd.opts,
            names: names.iter().map(|s| s.to_string()).collect(),
            force_not_null: vec![false; n],
            force_null: vec![false; n],
            buf: Vec::new(),
            line: 0,
            eol: None,
            ended: false,
        };
        let mut rows = Vec::new();
        for (i, c) in chunks.iter().enumerate() {
            let got = r
                .rows(c, i + 1 == chunks.len())
                .map_err(|(l, e)| (l, e.message))?;
            rows.extend(got.into_iter().map(|r| r.1));
        }
        Ok(rows)
    }

    fn t(s: &str) -> Value {
        Value::Text(s.into())
    }

    #[test]
    fn text_input_follows_postgres_rules_across_chunks() {
        let sql = "COPY t FROM STDIN";
        let rows = read(
            sql,
            &["a", "b"],
            &[
                b"1\tx\\ty\n\\N\t\\101\\x42\\\\\n",
                b"3\tli",
                b"ne\\\nbreak\n\\.\nignored",
                b"",
            ],
        )
        .unwrap();
        assert_eq!(
            rows,
            vec![
                vec![t("1"), t("x\ty")],
                vec![Value::Null, t("AB\\")],
                vec![t("3"), t("line\nbreak")],
            ]
        );
        // The last line needs no newline; CRLF input.
        let rows = read(sql, &["a"], &[b"1\r\n2\r", b"\n3", b""]).unwrap();
        assert_eq!(rows, vec![vec![t("1")], vec![t("2")], vec![t("3")]]);
        let err = |chunks: &[&[u8]]| read(sql, &["a", "b"], chunks).unwrap_err();
        assert_eq!(
            err(&[b"1\t2\n3\n"]),
            (2, "missing data for column \"b\"".into())
        );
        assert_eq!(
            err(&[b"1\t2\t3\n"]),
            (1, "extra data after last expected column".into())
        );
        assert_eq!(
            err(&[b"1\t2\n1\t2\r\n"]).1,
            "literal carriage return found in data"
        );
        assert_eq!(
            err(&[b"1\t\\377\n"]).1,
            "invalid byte sequence for encoding \"UTF8\": 0xff"
        );
        assert_eq!(
            err(&[b"1\t2\\.\n"]).1,
            "end-of-copy marker is not alone on its line"
        );
    }

    #[test]
    fn csv_input_quotes_nulls_and_header() {
        let sql = "COPY t FROM STDIN (FORMAT csv, HEADER true)";
        let rows = read(
            sql,
            &["a", "b"],
            &[b"a,b\n,\"\"\n\"x,\"\"y\"\"\",\"multi\nline\"\n", b"\\.\n"],
        )
        .unwrap();
        assert_eq!(
            rows,
            vec![
                vec![Value::Null, t("")],
                vec![t("x,\"y\""), t("multi\nline")]
            ]
        );
        let err = read(sql, &["a", "b"], &[b"a,b\n1,\"open\n", b""]).unwrap_err();
        assert_eq!(err, (2, "unterminated CSV quoted field".into()));
        let err = read(
            "COPY t FROM STDIN (FORMAT csv, HEADER match)",
            &["a", "b"],
            &[b"a,c\n", b""],
        )
        .unwrap_err();
        assert_eq!(
            err,
            (
                1,
                "column name mismatch in header line field 2: got \"c\", expected \"b\"".into()
            )
        );
        let rows = read(
            "COPY t FROM STDIN CSV QUOTE '''' ESCAPE '\\'",
            &["a"],
            &[b"'it\\'s'\n", b""],
        )
        .unwrap();
        assert_eq!(rows, vec![vec![t("it's")]]);
    }
}
