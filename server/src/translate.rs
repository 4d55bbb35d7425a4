//! The PostgreSQL forms that dashboard tools generate most, rewritten into
//! SQLite's where the meaning is the same (the table is in `docs/server.md`,
//! "PostgreSQL forms"). The rest of the statement is passed on as written:
//! the dialect stays SQLite's.
//!
//! - `X::type` becomes `pleroma_pg_cast(X, 'type')`, a function of the
//!   session's connection that converts as PostgreSQL's cast does, or
//!   fails with PostgreSQL's error; a type it does not know is an error
//!   naming it.
//! - `date_trunc('unit', ts)`, `EXTRACT(field FROM ts)` and `ts ± INTERVAL
//!   '…'` become SQLite's own date functions over timestamps stored as
//!   ISO-8601 text (`YYYY-MM-DD HH:MM:SS`, what SQLite's `datetime()` and
//!   `CURRENT_TIMESTAMP` write), so a plane with the same expression
//!   dimension can serve them.
//! - `NOW()` becomes `datetime('now')` (UTC, the server's time zone).
//! - `X ILIKE P` becomes `X LIKE P ESCAPE '\'`: SQLite's LIKE ignores ASCII
//!   case, and PostgreSQL's patterns escape with a backslash.
//! - `LIMIT ALL` becomes `LIMIT -1`.
//!
//! `TRUE`, `FALSE`, `CURRENT_DATE`, `CURRENT_TIMESTAMP` and `COUNT(*)
//! FILTER (WHERE …)` are SQLite's own already, with the same meaning.
//!
//! The statement is read as SQLite's tokenizer reads it
//! (`pleroma::tokenize`): nothing inside a string, a quoted name or a
//! comment is touched.

use std::borrow::Cow;

use pgwire::error::ErrorInfo;
use pleroma::rusqlite::functions::{Context, FunctionFlags};
use pleroma::rusqlite::types::{Value as SqlValue, ValueRef};
use pleroma::rusqlite::{self, Error as SqlError};
use pleroma::tokenize::{self, Kind};
use pleroma::Value;

use crate::sqlstate::error;

/// Words that start a form this module rewrites (compared without case).
const TRIGGERS: [&str; 19] = [
    "public",
    "like",
    "some",
    "current_date",
    "current_timestamp",
    "serial",
    "bigserial",
    "smallserial",
    "serial2",
    "serial4",
    "serial8",
    "any",
    "ilike",
    "date_trunc",
    "extract",
    "now",
    "all",
    "interval",
    "pg_catalog",
];

thread_local! {
    /// While set ([`to_sqlite_bound`]), a cast of a numbered parameter
    /// (`$1::int8`) is left to the bind: recorded here, not written.
    static PARAM_CASTS: std::cell::RefCell<Option<Vec<(usize, &'static str)>>> =
        const { std::cell::RefCell::new(None) };
    /// Set while a catalog query is rewritten (`to_sqlite_catalog`).
    static CATALOG: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A catalog query rewritten for the emulated catalog (`catalog_db.rs`):
/// as [`to_sqlite`], and `pg_catalog.f(…)` calls any function without the
/// schema, whose name SQLite's functions do not take.
pub(crate) fn to_sqlite_catalog(sql: &str) -> Result<String, ErrorInfo> {
    CATALOG.with(|c| c.set(true));
    let r = rewrite(&lex(sql)).map(|p| text_of(&p));
    CATALOG.with(|c| c.set(false));
    r
}

/// `sql` with the PostgreSQL forms above rewritten; untouched (borrowed)
/// when it has none.
pub(crate) fn to_sqlite(sql: &str) -> Result<Cow<'_, str>, ErrorInfo> {
    if has_dollar_quote(sql) {
        return Err(not_translated(
            "dollar-quoted strings ($$…$$, $tag$…$tag$): write the string in single quotes",
        ));
    }
    let lower = sql.to_ascii_lowercase();
    if !lower.contains("::") && !TRIGGERS.iter().any(|w| lower.contains(w)) {
        return Ok(Cow::Borrowed(sql));
    }
    let toks = lex(sql);
    if !toks.iter().any(|t| t.is_cast() || t.starts_form()) {
        return Ok(Cow::Borrowed(sql));
    }
    let mut pieces = rewrite(&toks)?;
    name_columns(&mut pieces);
    Ok(Cow::Owned(pieces.iter().map(|p| p.text.as_str()).collect()))
}

/// As [`to_sqlite`], with each numbered parameter that the statement casts
/// wherever it uses it, always to the same type (`device = $1::text`, as
/// postgres_fdw sends a generic plan's parameters), left bare: and those
/// casts, (parameter number, type), for [`cast_params`] to apply to the
/// bound values. The value is the same; but a plane serves `device = ?1`,
/// not `device = pleroma_pg_cast(?1, 'text')`.
pub(crate) fn to_sqlite_bound(
    sql: &str,
) -> Result<(Cow<'_, str>, Vec<(usize, &'static str)>), ErrorInfo> {
    if !sql.contains('$') || !sql.contains("::") {
        return Ok((to_sqlite(sql)?, Vec::new()));
    }
    PARAM_CASTS.with(|p| *p.borrow_mut() = Some(Vec::new()));
    let r = to_sqlite(sql);
    let mut casts = PARAM_CASTS
        .with(|p| p.borrow_mut().take())
        .unwrap_or_default();
    let text = r?;
    let toks = lex(sql);
    let uses = |n: usize| {
        let name = format!("${n}");
        toks.iter()
            .filter(|t| t.kind == Kind::Variable && t.text == name)
            .count()
    };
    let each_cast_alike = casts.iter().all(|&(n, ty)| {
        let of_n = || casts.iter().filter(|c| c.0 == n);
        of_n().all(|c| c.1 == ty) && of_n().count() == uses(n)
    });
    if !each_cast_alike {
        return Ok((to_sqlite(sql)?, Vec::new()));
    }
    casts.sort_unstable();
    casts.dedup();
    Ok((text, casts))
}

/// The bound values with [`to_sqlite_bound`]'s casts applied, as
/// PostgreSQL applies them; its error where one fails.
pub(crate) fn cast_params(
    params: &[Value],
    casts: &[(usize, &'static str)],
) -> Result<Vec<Value>, ErrorInfo> {
    let mut out = params.to_vec();
    for &(n, ty) in casts {
        let Some(v) = n.checked_sub(1).and_then(|i| out.get_mut(i)) else {
            continue;
        };
        let raw = match &*v {
            Value::Null => ValueRef::Null,
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(t) => ValueRef::Text(t.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        };
        let cast = pg_cast(raw, ty).map_err(|m| error(crate::sqlstate::from_message(&m), m))?;
        *v = match cast {
            SqlValue::Null => Value::Null,
            SqlValue::Integer(i) => Value::Integer(i),
            SqlValue::Real(f) => Value::Real(f),
            SqlValue::Text(t) => Value::Text(t),
            SqlValue::Blob(b) => Value::Blob(b),
        };
    }
    Ok(out)
}

/// Whether `sql` has a PostgreSQL dollar quote (`$$` or `$tag$`) outside
/// SQLite's strings, quoted names and comments. SQLite would read one as a
/// parameter named `$$x$$`, and bind it by position: a silent wrong value.
fn has_dollar_quote(sql: &str) -> bool {
    if !sql.contains('$') {
        return false;
    }
    tokenize::code(sql).any(|t| {
        let b = t.text.as_bytes();
        if t.kind != Kind::Variable && t.kind != Kind::Illegal || b.first() != Some(&b'$') {
            return false;
        }
        // `$$…`, or `$tag$…`: an identifier closed by a second `$`.
        b.get(1) == Some(&b'$')
            || b.get(1)
                .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
                && b[1..].iter().position(|c| *c == b'$').is_some()
    })
}

/// A token, with PostgreSQL's `::` as a token of its own (SQLite's
/// tokenizer reads `::` as illegal bytes or inside a `$name::x` variable).
#[derive(Clone, Debug, PartialEq)]
struct Tok {
    kind: Kind,
    text: String,
    /// `::`.
    cast: bool,
}

impl Tok {
    fn new(kind: Kind, text: &str) -> Tok {
        Tok {
            kind,
            text: text.to_owned(),
            cast: false,
        }
    }

    fn is(&self, word: &str) -> bool {
        self.kind == Kind::Word && self.text.eq_ignore_ascii_case(word)
    }

    fn is_punct(&self, p: &str) -> bool {
        self.kind == Kind::Punct && self.text == p
    }

    fn is_blank(&self) -> bool {
        matches!(self.kind, Kind::Space | Kind::Comment)
    }

    fn is_cast(&self) -> bool {
        self.cast
    }

    fn starts_form(&self) -> bool {
        TRIGGERS.iter().any(|w| self.is(w))
    }
}

fn lex(sql: &str) -> Vec<Tok> {
    let mut out: Vec<Tok> = Vec::new();
    for t in tokenize::tokens(sql) {
        match t.kind {
            // `$1::int` is one Tcl-style variable to SQLite; `::int` is an
            // illegal `:` and the variable `:int`; `::text::int` the same
            // with `:text::int`.
            Kind::Variable
                if t.text.contains("::") || t.text.starts_with(':') && last_is_colon(&out) =>
            {
                let name_end = t.text.find("::").unwrap_or(t.text.len());
                if t.text.starts_with(':') && last_is_colon(&out) {
                    out.pop();
                    out.push(cast_tok());
                    retokenize(&t.text[1..name_end], &mut out);
                } else {
                    out.push(Tok::new(Kind::Variable, &t.text[..name_end]));
                }
                for p in t.text[1..].split("::").skip(1) {
                    out.push(cast_tok());
                    retokenize(p, &mut out);
                }
            }
            Kind::Illegal if t.text == ":" && last_is_colon(&out) => {
                out.pop();
                out.push(cast_tok());
            }
            _ => out.push(Tok::new(t.kind, t.text)),
        }
    }
    out
}

/// A type name split out of a variable token (`varchar(3)` of
/// `:varchar(3)`), as the tokens it is on its own.
fn retokenize(text: &str, out: &mut Vec<Tok>) {
    out.extend(tokenize::tokens(text).map(|t| Tok::new(t.kind, t.text)));
}

fn cast_tok() -> Tok {
    Tok {
        kind: Kind::Punct,
        text: "::".into(),
        cast: true,
    }
}

fn last_is_colon(out: &[Tok]) -> bool {
    out.last()
        .is_some_and(|t| t.kind == Kind::Illegal && t.text == ":")
}

/// A piece of the rewritten statement. `unit` marks a rewritten form,
/// which is one operand to what surrounds it.
#[derive(Clone, Debug)]
struct Piece {
    text: String,
    kind: Kind,
    unit: bool,
    /// The column name PostgreSQL gives a rewritten form standing alone
    /// in the select list (`n::int` is `n`, `date_trunc(…)` `date_trunc`).
    name: Option<String>,
}

impl Piece {
    fn of(t: &Tok) -> Piece {
        Piece {
            text: t.text.clone(),
            kind: t.kind,
            unit: false,
            name: None,
        }
    }

    fn unit(text: String) -> Piece {
        Piece {
            text,
            kind: Kind::Word,
            unit: true,
            name: None,
        }
    }

    fn is_punct(&self, p: &str) -> bool {
        !self.unit && self.kind == Kind::Punct && self.text == p
    }

    fn named(mut self, name: &str) -> Piece {
        self.name = Some(name.to_owned());
        self
    }
}

fn not_translated(what: impl std::fmt::Display) -> ErrorInfo {
    error(
        "0A000",
        format!(
            "pleroma serve does not translate {what} (see docs/server.md, \"PostgreSQL forms\")"
        ),
    )
}

/// The index of the next token after `i` that is not blank.
fn next_code(toks: &[Tok], i: usize) -> Option<usize> {
    (i + 1..toks.len()).find(|&j| !toks[j].is_blank())
}

/// The index of the `)` that closes the `(` at `open`.
fn closing(toks: &[Tok], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(open) {
        if t.is_punct("(") {
            depth += 1;
        } else if t.is_punct(")") {
            depth -= 1;
            if depth == 0 {
                return Some(j);
            }
        }
    }
    None
}

fn text_of(pieces: &[Piece]) -> String {
    pieces.iter().map(|p| p.text.as_str()).collect::<String>()
}

fn rewrite(toks: &[Tok]) -> Result<Vec<Piece>, ErrorInfo> {
    let mut out: Vec<Piece> = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        let call = next_code(toks, i).filter(|&j| toks[j].is_punct("("));
        if t.is_cast() {
            let operand = pop_operand(&mut out)
                .ok_or_else(|| not_translated("a `::` cast without an operand"))?;
            let (ty, end) = cast_type(toks, i)?;
            if let Some(n) = operand
                .strip_prefix('$')
                .and_then(|d| d.parse::<usize>().ok())
            {
                let left = PARAM_CASTS.with(|p| {
                    p.borrow_mut()
                        .as_mut()
                        .map(|casts| casts.push((n, ty)))
                        .is_some()
                });
                if left {
                    let name = cast_name(&operand, ty);
                    out.push(Piece::unit(operand).named(&name));
                    i = end;
                    continue;
                }
            }
            // The operand's PostgreSQL type where the statement shows it:
            // a cast's (`x::float8::int`).
            let from = ["float8", "numeric"].into_iter().find(|f| {
                operand.starts_with("pleroma_pg_cast(") && operand.ends_with(&format!(", '{f}')"))
            });
            let call = match from {
                Some(f) => format!("pleroma_pg_cast({operand}, '{ty}', '{f}')"),
                None => format!("pleroma_pg_cast({operand}, '{ty}')"),
            };
            let cast = match numeric_literal(&operand) {
                // PostgreSQL reads `2.5` as numeric, SQLite as REAL: the cast
                // of such a literal is done here, as PostgreSQL does it.
                Some(n) => numeric_cast(&n, ty)?.unwrap_or(call),
                None => call,
            };
            let name = cast_name(&operand, ty);
            out.push(Piece::unit(cast).named(&name));
            i = end;
            continue;
        }
        // `public.t`: PostgreSQL's default schema is SQLite's `main`.
        if (t.is("public") || t.kind == Kind::Quoted && t.text == "\"public\"")
            && next_code(toks, i).is_some_and(|d| toks[d].is_punct("."))
            && !last_code(&out).is_some_and(|p| p.is_punct("."))
        {
            out.push(Piece::unit("main".into()));
            i += 1;
            continue;
        }
        // `pg_catalog.version()`: the session's own function, unqualified
        // (SQLite has no schema for functions).
        if t.is("pg_catalog") {
            let dot = next_code(toks, i).filter(|&j| toks[j].is_punct("."));
            let f = dot.and_then(|d| next_code(toks, d)).filter(|&f| {
                (CATALOG.with(|c| c.get()) || FUNCTIONS.iter().any(|n| toks[f].is(n)))
                    && next_code(toks, f).is_some_and(|p| toks[p].is_punct("("))
            });
            if let Some(f) = f {
                i = f;
                continue;
            }
        }
        // Calls rewritten whole, named as PostgreSQL names their column.
        type Form = fn(&[Tok]) -> Result<String, ErrorInfo>;
        let forms: [(&str, Form); 2] = [("date_trunc", date_trunc), ("extract", extract)];
        if let (Some(open), Some(&(name, form))) = (call, forms.iter().find(|f| t.is(f.0))) {
            let close = closing(toks, open)
                .ok_or_else(|| not_translated(format!("an unclosed {}(", name.to_uppercase())))?;
            out.push(Piece::unit(form(&toks[open + 1..close])?).named(name));
            i = close + 1;
            continue;
        }
        if t.is("now") && call.is_some() {
            let open = call.unwrap_or_default();
            let close = closing(toks, open).ok_or_else(|| not_translated("an unclosed now("))?;
            if toks[open + 1..close].iter().any(|t| !t.is_blank()) {
                return Err(not_translated("now() with arguments"));
            }
            out.push(Piece::unit("datetime('now')".into()).named("now"));
            i = close + 1;
            continue;
        }
        if t.is("all")
            && last_code(&out).is_some_and(|p| {
                !p.unit && p.kind == Kind::Word && p.text.eq_ignore_ascii_case("limit")
            })
        {
            out.push(Piece {
                text: "-1".into(),
                kind: Kind::Number,
                unit: false,
                name: None,
            });
            i += 1;
            continue;
        }
        // `X = ANY (ARRAY[a, b])` and `X = ANY ('{a,b}'::text[])` are `X
        // IN (a, b)` (SQLite reads the `[…]` as a quoted name); `X <> ALL
        // (…)` is `X NOT IN (…)`. A NULL in the list makes both NULL where
        // nothing matches, as in PostgreSQL, and an empty list is false
        // (SQLite's `IN ()`) for a NULL X too.
        let op = last_code(&out).map(|p| p.text.clone()).unwrap_or_default();
        let negated = match op.as_str() {
            "=" if t.is("any") || t.is("some") => Some(false),
            "<>" | "!=" if t.is("all") => Some(true),
            _ => None,
        };
        if let Some(negated) = negated {
            if let Some(list) = any_array(toks, i)? {
                let at = out.iter().rposition(|p| p.text == op).unwrap_or_default();
                // A string literal compared with an integer array is read
                // as an integer, as PostgreSQL reads an untyped literal
                // (`'01' = ANY ('{1}'::int[])` is true).
                if let Some(ty) = list.2 {
                    let left = (0..at).rev().find(|&j| {
                        out[j].unit || !matches!(out[j].kind, Kind::Space | Kind::Comment)
                    });
                    if let Some(j) = left.filter(|&j| !out[j].unit && out[j].kind == Kind::String) {
                        let v = literal(&out[j].text).unwrap_or_default();
                        match pg_cast(ValueRef::Text(v.as_bytes()), ty) {
                            Ok(SqlValue::Integer(n)) => out[j] = Piece::unit(n.to_string()),
                            Err(m) if m.contains("out of range") => return Err(error("22003", m)),
                            Err(m) => return Err(error("22P02", m)),
                            Ok(_) => {}
                        }
                    }
                }
                out[at] = Piece::unit(if negated { "NOT IN" } else { "IN" }.into());
                out.push(Piece::unit(list.0));
                i = list.1;
                continue;
            }
        }
        // A column typed `SERIAL` in CREATE TABLE: SQLite's INTEGER, which
        // is the rowid when it is the primary key, numbered as SERIAL is.
        if [
            "serial",
            "bigserial",
            "smallserial",
            "serial2",
            "serial4",
            "serial8",
        ]
        .iter()
        .any(|w| t.is(w))
            && column_type_position(&out)
        {
            let first = toks.iter().find(|t| !t.is_blank());
            let column = last_code(&out).map(|p| p.text.clone()).unwrap_or_default();
            if !first.is_some_and(|f| f.is("create")) || !serial_is_key(toks, i, &column) {
                return Err(not_translated(
                    "SERIAL other than as the type of a table's one-column primary key in \
                     CREATE TABLE (there it is SQLite's INTEGER PRIMARY KEY, the rowid)",
                ));
            }
            out.push(Piece::unit("INTEGER".into()));
            i += 1;
            continue;
        }
        // Date arithmetic other than `± INTERVAL`: PostgreSQL's `date +
        // integer` is a date; SQLite would add numbers.
        if (t.is_punct("+") || t.is_punct("-")) && last_code(&out).is_some_and(is_temporal) {
            let next = next_code(toks, i);
            if !next.is_some_and(|n| toks[n].is("interval")) {
                let date = last_code(&out).is_some_and(|p| {
                    p.text.eq_ignore_ascii_case("current_date") || p.text.ends_with(", 'date')")
                });
                let days = next
                    .filter(|&n| toks[n].kind == Kind::Number)
                    .and_then(|n| toks[n].text.parse::<i64>().ok());
                match (date, days) {
                    (true, Some(n)) => {
                        let operand = pop_operand(&mut out).unwrap_or_default();
                        let n = if t.is_punct("-") { -n } else { n };
                        out.push(
                            Piece::unit(format!("date({operand}, '{n:+} days')")).named("?column?"),
                        );
                        i = next.unwrap_or(i) + 1;
                        continue;
                    }
                    _ => {
                        return Err(not_translated(
                            "date and timestamp arithmetic other than `date ± integer` and \
                             `± INTERVAL '…'`",
                        ))
                    }
                }
            }
        }
        if t.is("like") {
            i = like(toks, i, &mut out)?;
            continue;
        }
        if t.is("ilike") {
            i = ilike(toks, i, &mut out)?;
            continue;
        }
        if t.is("interval") {
            let Some(lit) = next_code(toks, i).filter(|&j| toks[j].kind == Kind::String) else {
                out.push(Piece::of(t));
                i += 1;
                continue;
            };
            interval(toks, lit, &mut out)?;
            i = lit + 1;
            continue;
        }
        out.push(Piece::of(t));
        i += 1;
    }
    // `n + date`: PostgreSQL's date (or an error), SQLite's number.
    let code = |p: &Piece| p.unit || !matches!(p.kind, Kind::Space | Kind::Comment);
    for k in 0..out.len() {
        if !is_temporal(&out[k]) {
            continue;
        }
        if let Some(j) = (0..k).rev().find(|&j| code(&out[j])) {
            if out[j].is_punct("+") || out[j].is_punct("-") {
                return Err(not_translated(
                    "a date or timestamp on the right of + or - (write the date first: `date + n`)",
                ));
            }
        }
    }
    Ok(out)
}

/// `ANY (ARRAY[…])` at `at`: the list rewritten as `(…)`, the index after
/// the closing `)`, and the elements' integer type where the statement
/// shows one. `None` when it is not that form.
fn any_array(
    toks: &[Tok],
    at: usize,
) -> Result<Option<(String, usize, Option<&'static str>)>, ErrorInfo> {
    let Some(open) = next_code(toks, at).filter(|&j| toks[j].is_punct("(")) else {
        return Ok(None);
    };
    if let Some(lit) = next_code(toks, open).filter(|&j| toks[j].kind == Kind::String) {
        return array_literal(toks, lit);
    }
    let Some(array) = next_code(toks, open).filter(|&j| toks[j].is("array")) else {
        return Ok(None);
    };
    let Some(items) = next_code(toks, array)
        .filter(|&j| toks[j].kind == Kind::Quoted && toks[j].text.starts_with('['))
    else {
        return Ok(None);
    };
    let Some(close) = next_code(toks, items).filter(|&j| toks[j].is_punct(")")) else {
        return Ok(None);
    };
    let inner = &toks[items].text[1..toks[items].text.len() - 1];
    if inner.contains(['[', ']']) {
        return Err(not_translated("ANY of a nested ARRAY"));
    }
    let list = text_of(&rewrite(&lex(inner))?);
    Ok(Some((format!("({list})"), close + 1, None)))
}

/// `'{a,b}'::text[])` at `lit` (after `ANY (`): the elements as a SQL
/// list `('a', 'b')` of the array's element type, and the index after the
/// closing `)`. `None` when it is not that form; an error for an element
/// type other than text and the integers, or a malformed array.
fn array_literal(
    toks: &[Tok],
    lit: usize,
) -> Result<Option<(String, usize, Option<&'static str>)>, ErrorInfo> {
    let Some(cast) = next_code(toks, lit).filter(|&j| toks[j].is_cast()) else {
        return Err(not_translated(
            "ANY ('{…}') without a cast to the array's type (write '{…}'::text[])",
        ));
    };
    let word = |i: usize| next_code(toks, i).filter(|&k| toks[k].kind == Kind::Word);
    let mut name = word(cast).ok_or_else(|| not_translated("a `::` cast without a type name"))?;
    if toks[name].is("pg_catalog") {
        name = next_code(toks, name)
            .filter(|&d| toks[d].is_punct("."))
            .and_then(word)
            .ok_or_else(|| not_translated("a `::` cast without a type name"))?;
    }
    let Some(brackets) = next_code(toks, name).filter(|&j| toks[j].text == "[]") else {
        return Ok(None);
    };
    let Some(close) = next_code(toks, brackets).filter(|&j| toks[j].is_punct(")")) else {
        return Ok(None);
    };
    let ty = match toks[name].text.to_ascii_lowercase().as_str() {
        "text" | "varchar" | "name" => "text",
        "int2" | "smallint" => "int2",
        "int4" | "int" | "integer" => "int4",
        "int8" | "bigint" => "int8",
        other => {
            return Err(not_translated(format!(
                "ANY of an array of {other} (text and integer arrays are)"
            )))
        }
    };
    let text = literal(&toks[lit].text).unwrap_or_default();
    let elements = array_elements(&text)
        .ok_or_else(|| error("22P02", format!("malformed array literal: \"{text}\"")))?;
    let mut list = Vec::with_capacity(elements.len());
    for e in elements {
        list.push(match e {
            None => "NULL".to_owned(),
            Some(s) if ty == "text" => format!("'{}'", s.replace('\'', "''")),
            Some(s) => match pg_cast(ValueRef::Text(s.as_bytes()), ty) {
                Ok(SqlValue::Integer(n)) => n.to_string(),
                Ok(_) => unreachable!("an integer cast gives an integer or an error"),
                Err(m) if m.contains("out of range") => return Err(error("22003", m)),
                Err(m) => return Err(error("22P02", m)),
            },
        });
    }
    let int = (ty != "text").then_some(ty);
    Ok(Some((format!("({})", list.join(", ")), close + 1, int)))
}

/// The elements of a one-dimensional PostgreSQL array literal (`{a,"b
/// c",NULL}`): `None` for an unquoted NULL. `None` when malformed or of
/// more than one dimension.
fn array_elements(text: &str) -> Option<Vec<Option<String>>> {
    let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    if inner.trim().is_empty() {
        return Some(out);
    }
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        let mut item = String::new();
        let mut quoted = false;
        if chars.peek() == Some(&'"') {
            quoted = true;
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => item.push(chars.next()?),
                    c => item.push(c),
                }
            }
            while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                chars.next();
            }
        } else {
            // Trailing blanks are dropped, but not escaped ones; an element
            // with an escape is never the NULL keyword (`\NULL` is text).
            let mut kept = 0;
            while let Some(&c) = chars.peek() {
                match c {
                    ',' => break,
                    '{' | '}' | '"' => return None,
                    '\\' => {
                        chars.next();
                        item.push(chars.next()?);
                        quoted = true;
                        kept = item.len();
                    }
                    c => {
                        item.push(c);
                        chars.next();
                        if !c.is_ascii_whitespace() {
                            kept = item.len();
                        }
                    }
                }
            }
            item.truncate(kept);
            if item.is_empty() && !quoted {
                return None;
            }
        }
        out.push(if !quoted && item.eq_ignore_ascii_case("null") {
            None
        } else {
            Some(item)
        });
        match chars.next() {
            None => return Some(out),
            Some(',') => {}
            Some(_) => return None,
        }
    }
}

/// The name PostgreSQL gives `operand::ty` as a result column: the
/// column's or the function's name, else the type's.
fn cast_name(operand: &str, ty: &str) -> String {
    let code: Vec<_> = tokenize::code(operand).collect();
    let last_name = |t: &tokenize::Token<'_>| match t.kind {
        Kind::Quoted => Some(t.value().into_owned()),
        Kind::Word => Some(t.text.to_ascii_lowercase()),
        _ => None,
    };
    // A (qualified) column: `n`, `t.n`.
    let is_name = code.iter().enumerate().all(|(i, t)| {
        if i % 2 == 1 {
            t.kind == Kind::Punct && t.text == "."
        } else {
            matches!(t.kind, Kind::Word | Kind::Quoted)
        }
    });
    if is_name && code.len() % 2 == 1 {
        if let Some(n) = code.last().and_then(last_name) {
            return n;
        }
    }
    // A call: `sum(x)`, or one of ours, named for what it stands for.
    if let [f, open, ..] = &code[..] {
        if f.kind == Kind::Word && open.text == "(" && code.last().is_some_and(|c| c.text == ")") {
            let f = f.text.to_ascii_lowercase();
            if f != "pleroma_pg_cast" && f != "pleroma_pg_interval" {
                return f;
            }
        }
    }
    match ty {
        "timestamp" => "timestamp",
        "regclass" | "regtype" | "oid" => ty,
        "bool" => "bool",
        other => other,
    }
    .to_owned()
}

/// Gives each rewritten form that stands alone, without an alias, in the
/// statement's top-level select list the name PostgreSQL gives it
/// (`AS "n"`), where SQLite would name it by its rewritten text.
fn name_columns(pieces: &mut Vec<Piece>) {
    let code = |p: &Piece| p.unit || !matches!(p.kind, Kind::Space | Kind::Comment);
    let Some(select) = pieces.iter().position(code) else {
        return;
    };
    if pieces[select].unit || !pieces[select].text.eq_ignore_ascii_case("select") {
        return;
    }
    let ends_list = |p: &Piece| {
        p.kind == Kind::Semi
            || !p.unit
                && p.kind == Kind::Word
                && [
                    "from",
                    "where",
                    "group",
                    "having",
                    "order",
                    "limit",
                    "union",
                    "except",
                    "intersect",
                    "window",
                ]
                .iter()
                .any(|w| p.text.eq_ignore_ascii_case(w))
    };
    let mut depth = 0i32;
    let mut item: Vec<usize> = Vec::new();
    let mut aliases: Vec<(usize, String)> = Vec::new();
    let close = |item: &mut Vec<usize>, aliases: &mut Vec<(usize, String)>| {
        if let [only] = item[..] {
            if let Some(n) = &pieces[only].name {
                aliases.push((only, n.clone()));
            }
        }
        item.clear();
    };
    for i in select + 1..pieces.len() {
        let p = &pieces[i];
        if !code(p) {
            continue;
        }
        if p.is_punct("(") {
            depth += 1;
        } else if p.is_punct(")") {
            depth -= 1;
        }
        if depth == 0 && (p.is_punct(",") || ends_list(p)) {
            close(&mut item, &mut aliases);
            if ends_list(p) {
                break;
            }
            continue;
        }
        let distinct = !p.unit
            && item.is_empty()
            && (p.text.eq_ignore_ascii_case("distinct") || p.text.eq_ignore_ascii_case("all"));
        if !distinct {
            item.push(i);
        }
        if i + 1 == pieces.len() {
            close(&mut item, &mut aliases);
        }
    }
    for (at, name) in aliases {
        pieces[at].text = format!("{} AS \"{}\"", pieces[at].text, name.replace('"', "\"\""));
    }
}

/// Whether a piece is a date or timestamp to PostgreSQL: `CURRENT_DATE`,
/// `CURRENT_TIMESTAMP`, or a cast, interval sum or `date_trunc` made here.
fn is_temporal(p: &Piece) -> bool {
    let t = &p.text;
    if !p.unit {
        return p.kind == Kind::Word
            && (t.eq_ignore_ascii_case("current_date")
                || t.eq_ignore_ascii_case("current_timestamp"));
    }
    t.starts_with("pleroma_pg_interval(")
        || t.starts_with("pleroma_pg_cast(")
            && (t.ends_with(", 'date')") || t.ends_with(", 'timestamp')"))
        // date_trunc's forms and now()'s.
        || t.starts_with("strftime('%Y-")
        || t.starts_with("datetime(")
}

/// Whether the SERIAL column at `at` (named `column`) is the table's
/// primary key: `PRIMARY KEY` in its own definition, or a table constraint
/// `PRIMARY KEY (column)` of that one column.
fn serial_is_key(toks: &[Tok], at: usize, column: &str) -> bool {
    let code: Vec<&Tok> = toks[at..].iter().filter(|t| !t.is_blank()).collect();
    let mut depth = 0i32;
    for w in code.windows(2) {
        if w[0].is_punct("(") {
            depth += 1;
        } else if w[0].is_punct(")") {
            depth -= 1;
            if depth < 0 {
                break;
            }
        } else if depth == 0 && w[0].is_punct(",") {
            break;
        } else if depth == 0 && w[0].is("primary") && w[1].is("key") {
            // `PRIMARY KEY DESC` is no rowid in SQLite.
            let after = code.iter().position(|t| std::ptr::eq(*t, w[1]));
            return !after
                .and_then(|k| code.get(k + 1))
                .is_some_and(|t| t.is("desc"));
        }
    }
    // A table constraint.
    let all: Vec<&Tok> = toks.iter().filter(|t| !t.is_blank()).collect();
    let name = |t: &Tok| match t.kind {
        Kind::Word => Some(t.text.to_ascii_lowercase()),
        Kind::Quoted => Some(
            tokenize::code(&t.text)
                .next()
                .map(|t| t.value().to_ascii_lowercase())
                .unwrap_or_default(),
        ),
        _ => None,
    };
    let column = tokenize::code(column)
        .next()
        .map(|t| match t.kind {
            Kind::Quoted => t.value().to_ascii_lowercase(),
            _ => t.text.to_ascii_lowercase(),
        })
        .unwrap_or_default();
    all.windows(5).any(|w| {
        w[0].is("primary")
            && w[1].is("key")
            && w[2].is_punct("(")
            && name(w[3]).is_some_and(|n| n == column)
            && w[4].is_punct(")")
    })
}

/// Whether `out` ends with a column's name right after `(` or `,`: where a
/// column definition's type stands.
fn column_type_position(out: &[Piece]) -> bool {
    let code: Vec<&Piece> = out
        .iter()
        .rev()
        .filter(|p| p.unit || !matches!(p.kind, Kind::Space | Kind::Comment))
        .take(2)
        .collect();
    matches!(&code[..], [name, before]
        if !name.unit && matches!(name.kind, Kind::Word | Kind::Quoted)
            && (before.is_punct("(") || before.is_punct(",")
                || !before.unit && before.kind == Kind::Word
                    && (before.text.eq_ignore_ascii_case("column") || before.text.eq_ignore_ascii_case("add"))))
}

fn last_code(out: &[Piece]) -> Option<&Piece> {
    out.iter()
        .rev()
        .find(|p| p.unit || !matches!(p.kind, Kind::Space | Kind::Comment))
}

/// Words that end a clause or join terms, never an operand.
const KEYWORDS: [&str; 24] = [
    "select",
    "distinct",
    "all",
    "from",
    "where",
    "and",
    "or",
    "not",
    "on",
    "by",
    "having",
    "limit",
    "offset",
    "as",
    "in",
    "is",
    "like",
    "between",
    "case",
    "when",
    "then",
    "else",
    "values",
    "returning",
];

/// Takes the operand that ends `out` (the primary a PostgreSQL cast or an
/// interval applies to): a literal, a variable, a rewritten form, a name
/// (`a`, `t.a`), a parenthesised expression, or a call (`f(…)`). Blanks
/// before it stay. `None` when `out` does not end with one.
fn pop_operand(out: &mut Vec<Piece>) -> Option<String> {
    let mut end = out.len();
    while end > 0 && !out[end - 1].unit && matches!(out[end - 1].kind, Kind::Space | Kind::Comment)
    {
        end -= 1;
    }
    let last = out.get(end.checked_sub(1)?)?;
    let mut start = end - 1;
    if last.unit {
        // One piece.
    } else if last.is_punct(")") {
        let mut depth = 0usize;
        loop {
            let p = &out[start];
            if p.is_punct(")") {
                depth += 1;
            } else if p.is_punct("(") {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            start = start.checked_sub(1)?;
        }
        // A call: the function's name before its `(`.
        if start > 0 && !out[start - 1].unit && out[start - 1].kind == Kind::Word {
            start -= 1;
        }
    } else if last.kind == Kind::Word && KEYWORDS.iter().any(|k| last.text.eq_ignore_ascii_case(k))
    {
        return None;
    } else if matches!(last.kind, Kind::Word | Kind::Quoted) {
        // A qualified name: `t.a`, `s.t.a`.
        while start >= 2
            && out[start - 1].is_punct(".")
            && matches!(out[start - 2].kind, Kind::Word | Kind::Quoted)
        {
            start -= 2;
        }
    } else if !matches!(
        last.kind,
        Kind::String | Kind::Number | Kind::Variable | Kind::Blob
    ) {
        return None;
    }
    let text = text_of(&out[start..end]);
    out.truncate(start);
    Some(text)
}

/// A decimal literal that PostgreSQL reads as `numeric` (it has a point or
/// an exponent), as its digits and their scale: `12.50` is `("1250", 2)`,
/// `1e3` is `("1", -3)`. `None` for anything else (an integer literal is an
/// integer to both).
fn numeric_literal(operand: &str) -> Option<(String, i64)> {
    // `(2.5)` is the literal too.
    let code: Vec<_> = tokenize::code(operand).collect();
    let inner = match &code[..] {
        [open, t, close] if open.text == "(" && close.text == ")" => t,
        [t] => t,
        _ => return None,
    };
    let t = *inner;
    if t.kind != Kind::Number || t.text.starts_with("0x") || t.text.starts_with("0X") {
        return None;
    }
    let text = t.text.replace('_', "").to_ascii_lowercase();
    // An integer is an integer to both, unless past 64 bits: then SQLite
    // reads a REAL and PostgreSQL a numeric.
    if !text.contains(['.', 'e']) && text.parse::<i64>().is_ok() {
        return None;
    }
    let (mantissa, exp) = match text.split_once('e') {
        Some((m, e)) => (m.to_owned(), e.parse::<i64>().ok()?),
        None => (text.clone(), 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((&mantissa, ""));
    Some((format!("{int}{frac}"), frac.len() as i64 - exp))
}

/// The cast of a numeric literal (digits, scale) to `ty` as a SQLite
/// literal, as PostgreSQL computes it: to an integer type rounded half away
/// from zero, to text in numeric's own form (`1.50`, `1000`). `None` where
/// SQLite's REAL is the value (float8, numeric).
fn numeric_cast((digits, scale): &(String, i64), ty: &str) -> Result<Option<String>, ErrorInfo> {
    let decimal = || -> String {
        // The digits with the point `scale` places from the right.
        let mut d = digits.trim_start_matches('0').to_owned();
        if *scale <= 0 {
            d.push_str(&"0".repeat((-scale) as usize));
            return if d.trim_start_matches('0').is_empty() {
                "0".into()
            } else {
                d
            };
        }
        let s = *scale as usize;
        if d.len() <= s {
            d = format!("{}{d}", "0".repeat(s + 1 - d.len()));
        }
        let (i, f) = d.split_at(d.len() - s);
        format!("{i}.{f}")
    };
    let refuse = |code: &str, m: String| Err(error(code, m));
    match ty {
        "int2" | "int4" | "int8" => {
            let text = decimal();
            let (i, f) = text.split_once('.').unwrap_or((&text, ""));
            let Ok(mut n) = i.parse::<i128>() else {
                return refuse("22003", format!("{} out of range", type_name(ty)));
            };
            if f.as_bytes().first().is_some_and(|&c| c >= b'5') {
                n += 1;
            }
            let (lo, hi) = match ty {
                "int2" => (i16::MIN as i128, i16::MAX as i128),
                "int4" => (i32::MIN as i128, i32::MAX as i128),
                _ => (i64::MIN as i128, i64::MAX as i128),
            };
            if n < lo || n > hi {
                return refuse("22003", format!("{} out of range", type_name(ty)));
            }
            Ok(Some(n.to_string()))
        }
        "text" => Ok(Some(format!("'{}'", decimal()))),
        // The literal itself, where a double holds it as written; a cast
        // of the cast (`1.50::numeric::text`) then reads it again.
        "numeric" => {
            let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
            if significant > 15 {
                return Err(not_translated(format!(
                    "numeric {}: past what a double holds exactly",
                    decimal()
                )));
            }
            Ok(Some(decimal()))
        }
        "bool" | "date" | "timestamp" => refuse(
            "42846",
            format!("cannot cast type numeric to {}", type_name(ty)),
        ),
        _ => Ok(None),
    }
}

/// The type after the `::` at `at`: its name as `pleroma_pg_cast` knows it,
/// and the index after it.
fn cast_type(toks: &[Tok], at: usize) -> Result<(&'static str, usize), ErrorInfo> {
    let word = |i: usize| next_code(toks, i).filter(|&k| toks[k].kind == Kind::Word);
    let Some(mut first) = word(at) else {
        return Err(not_translated("a `::` cast without a type name"));
    };
    // `::pg_catalog.text`, as postgres_fdw writes its casts.
    if toks[first].is("pg_catalog") {
        if let Some(t) = next_code(toks, first)
            .filter(|&d| toks[d].is_punct("."))
            .and_then(word)
        {
            first = t;
        }
    }
    let mut name = toks[first].text.to_ascii_lowercase();
    let mut last = first;
    // The type names of several words.
    let take = |last: &mut usize, name: &mut String, w: &str| -> bool {
        match word(*last) {
            Some(k) if toks[k].is(w) => {
                name.push(' ');
                name.push_str(w);
                *last = k;
                true
            }
            _ => false,
        }
    };
    match name.as_str() {
        "double" => {
            take(&mut last, &mut name, "precision");
        }
        "character" => {
            take(&mut last, &mut name, "varying");
        }
        "timestamp" | "time" => {
            if (take(&mut last, &mut name, "with") || take(&mut last, &mut name, "without"))
                && !(take(&mut last, &mut name, "time") && take(&mut last, &mut name, "zone"))
            {
                return Err(not_translated(format!("the cast ::{name}")));
            }
        }
        _ => {}
    }
    if let Some(k) = next_code(toks, last) {
        if toks[k].is_punct("(") {
            return Err(not_translated(format!(
                "the cast ::{name}(…) (a type modifier)"
            )));
        }
        if toks[k].text.starts_with('[') {
            return Err(not_translated(format!("the cast ::{name}[] (arrays)")));
        }
    }
    let ty = match name.as_str() {
        "smallint" | "int2" => "int2",
        "integer" | "int" | "int4" => "int4",
        "bigint" | "int8" => "int8",
        "double precision" | "float8" | "float" => "float8",
        "numeric" | "decimal" => "numeric",
        "text" | "varchar" | "character varying" => "text",
        "boolean" | "bool" => "bool",
        "date" => "date",
        "timestamp" | "timestamp without time zone" => "timestamp",
        "name" => "text",
        // The emulated catalog's (catalog_db.rs); elsewhere an error.
        "regclass" => "regclass",
        "regtype" => "regtype",
        "oid" => "oid",
        _ => return Err(not_translated(format!("the cast ::{name}"))),
    };
    Ok((ty, last + 1))
}

/// The arguments of a call, split at its top-level commas, each rewritten.
fn arguments(toks: &[Tok]) -> Result<Vec<String>, ErrorInfo> {
    let mut args = Vec::new();
    let mut depth = 0usize;
    let mut from = 0;
    for (j, t) in toks.iter().enumerate() {
        if t.is_punct("(") {
            depth += 1;
        } else if t.is_punct(")") {
            depth = depth.saturating_sub(1);
        } else if t.is_punct(",") && depth == 0 {
            args.push(&toks[from..j]);
            from = j + 1;
        }
    }
    args.push(&toks[from..]);
    args.into_iter()
        .map(|a| rewrite(a).map(|p| text_of(&p).trim().to_owned()))
        .collect()
}

/// A string literal's value (a doubled quote as one), when `a` is one.
fn literal(a: &str) -> Option<String> {
    let mut code = tokenize::code(a);
    let t = code.next()?;
    (t.kind == Kind::String && code.next().is_none()).then(|| t.value().into_owned())
}

fn date_trunc(inner: &[Tok]) -> Result<String, ErrorInfo> {
    let args = arguments(inner)?;
    let [unit, ts] = &args[..] else {
        return Err(not_translated("date_trunc with other than two arguments"));
    };
    let Some(u) = literal(unit) else {
        return Err(not_translated(
            "date_trunc with a unit that is not a string literal",
        ));
    };
    let fmt = |f: &str| format!("strftime('{f}', {ts})");
    Ok(match u.to_ascii_lowercase().as_str() {
        "year" => fmt("%Y-01-01 00:00:00"),
        // NULL when the timestamp is not one (the concatenation of NULL).
        "quarter" => format!(
            "strftime('%Y-', {ts}) || printf('%02d', (CAST(strftime('%m', {ts}) AS INTEGER) - 1) / 3 * 3 + 1) || '-01 00:00:00'"
        ),
        "month" => fmt("%Y-%m-01 00:00:00"),
        // ISO weeks start on Monday: the Monday on or before the day.
        "week" => format!("datetime({ts}, 'start of day', '-6 days', 'weekday 1')"),
        "day" => fmt("%Y-%m-%d 00:00:00"),
        "hour" => fmt("%Y-%m-%d %H:00:00"),
        "minute" => fmt("%Y-%m-%d %H:%M:00"),
        "second" => fmt("%Y-%m-%d %H:%M:%S"),
        other => return Err(not_translated(format!("date_trunc('{other}', …)"))),
    })
}

fn extract(inner: &[Tok]) -> Result<String, ErrorInfo> {
    let from = inner
        .iter()
        .position(|t| t.is("from"))
        .ok_or_else(|| not_translated("EXTRACT without FROM"))?;
    let field: Vec<&Tok> = inner[..from].iter().filter(|t| !t.is_blank()).collect();
    let field = match &field[..] {
        [t] if matches!(t.kind, Kind::Word | Kind::String) => tokenize::code(&t.text)
            .next()
            .map(|t| t.value().to_ascii_lowercase())
            .unwrap_or_default(),
        _ => return Err(not_translated("EXTRACT of that field")),
    };
    let ts = text_of(&rewrite(&inner[from + 1..])?).trim().to_owned();
    let int = |f: &str| format!("CAST(strftime('{f}', {ts}) AS INTEGER)");
    Ok(match field.as_str() {
        "year" => int("%Y"),
        "quarter" => format!("((CAST(strftime('%m', {ts}) AS INTEGER) + 2) / 3)"),
        "month" => int("%m"),
        "day" => int("%d"),
        "hour" => int("%H"),
        "minute" => int("%M"),
        "dow" => int("%w"),
        "isodow" => int("%u"),
        "doy" => int("%j"),
        "week" => int("%V"),
        "isoyear" => int("%G"),
        "epoch" => format!("unixepoch({ts})"),
        other => return Err(not_translated(format!("EXTRACT({other} FROM …)"))),
    })
}

/// `ILIKE` at `at` becomes `LIKE`; a backslash escape is added after its
/// pattern unless the statement gives its own `ESCAPE`. Returns the index to
/// go on from.
fn ilike(toks: &[Tok], at: usize, out: &mut Vec<Piece>) -> Result<usize, ErrorInfo> {
    // PostgreSQL's ILIKE binds tighter than `=`, `<`, IS, IN; SQLite's
    // LIKE binds as loose as `=`: `a = b ILIKE c` would read `(a = b) LIKE
    // c`. Declined, to be put in parentheses.
    let mut depth = 0i32;
    let mut before: Vec<&Piece> = out.iter().rev().collect();
    // The NOT of `NOT ILIKE` is this operator's own.
    if let Some(i) = before
        .iter()
        .position(|p| p.unit || !matches!(p.kind, Kind::Space | Kind::Comment))
    {
        if !before[i].unit
            && before[i].kind == Kind::Word
            && before[i].text.eq_ignore_ascii_case("not")
        {
            before.drain(..=i);
        }
    }
    for p in before {
        if p.unit || matches!(p.kind, Kind::Space | Kind::Comment) {
            continue;
        }
        if p.is_punct(")") {
            depth += 1;
            continue;
        }
        if p.is_punct("(") {
            if depth == 0 {
                break;
            }
            depth -= 1;
            continue;
        }
        if depth > 0 {
            continue;
        }
        let word = |w: &str| p.kind == Kind::Word && p.text.eq_ignore_ascii_case(w);
        if [
            "and",
            "or",
            "not",
            "select",
            "where",
            "on",
            "when",
            "then",
            "else",
            "having",
            "set",
            "returning",
            "by",
        ]
        .iter()
        .any(|w| word(w))
            || p.is_punct(",")
            || p.kind == Kind::Semi
        {
            break;
        }
        if ["=", "==", "!=", "<>", "<", ">", "<=", ">="]
            .iter()
            .any(|o| p.is_punct(o))
            || ["is", "in", "between", "like", "glob"]
                .iter()
                .any(|w| word(w))
        {
            return Err(not_translated(
                "ILIKE on the right of a comparison (SQLite's LIKE binds as loose as `=`): \
                 put the ILIKE in parentheses",
            ));
        }
    }
    out.push(Piece {
        text: "LIKE".into(),
        kind: Kind::Word,
        unit: false,
        name: None,
    });
    let end = pattern_end(toks, at).ok_or_else(|| {
        not_translated("ILIKE with that pattern (use a literal, a parameter or ||)")
    })?;
    let pattern = rewrite(&toks[at + 1..end])?;
    let escaped = next_code(toks, end - 1).is_some_and(|k| toks[k].is("escape"));
    // A literal pattern that ends in a lone backslash escapes nothing.
    if let [lit] = &pattern
        .iter()
        .filter(|p| p.unit || !matches!(p.kind, Kind::Space | Kind::Comment))
        .collect::<Vec<_>>()[..]
    {
        if !escaped && lit.kind == Kind::String && !lit.unit {
            let v = tokenize::code(&lit.text)
                .next()
                .map(|t| t.value().into_owned())
                .unwrap_or_default();
            let trailing = v.len() - v.trim_end_matches('\\').len();
            if trailing % 2 == 1 {
                return Err(error(
                    "22025",
                    "LIKE pattern must not end with escape character",
                ));
            }
        }
    }
    out.extend(pattern);
    if !escaped {
        out.push(Piece {
            text: " ESCAPE '\\'".into(),
            kind: Kind::Word,
            unit: false,
            name: None,
        });
    }
    Ok(end)
}

/// `X LIKE P` at `at`: PostgreSQL's LIKE is case-sensitive and escapes
/// with a backslash, SQLite's is neither; SQLite's GLOB is case-sensitive,
/// so `X GLOB G`, with `G` the same pattern as a GLOB (`%` is `*`, `_` is
/// `?`, a `*`, `?` or `[` to be matched as itself is `[*]`, `[?]`, `[[]`):
/// made here from a literal pattern, else by `pleroma_pg_like_glob(P[,
/// E])` on the session's connection. `ESCAPE 'c'` gives the escape
/// character (`''`: none). Returns the index after the pattern (and its
/// ESCAPE clause).
fn like(toks: &[Tok], at: usize, out: &mut Vec<Piece>) -> Result<usize, ErrorInfo> {
    out.push(Piece::unit("GLOB".into()));
    let end = pattern_end(toks, at).ok_or_else(|| {
        not_translated("LIKE with that pattern (use a literal, a parameter or ||)")
    })?;
    let (escape, after) = match next_code(toks, end - 1).filter(|&k| toks[k].is("escape")) {
        Some(k) => match next_code(toks, k).filter(|&e| toks[e].kind == Kind::String) {
            Some(e) => (literal(&toks[e].text), e + 1),
            None => return Err(not_translated("LIKE … ESCAPE other than a literal")),
        },
        None => (Some("\\".to_owned()), end),
    };
    let escape: Option<char> = match escape.as_deref() {
        Some("") => None,
        Some(e) if e.chars().count() == 1 => e.chars().next(),
        _ => {
            return Err(error(
                "22025",
                "invalid escape string: escape string must be empty or one character",
            ))
        }
    };
    let pattern = rewrite(&toks[at + 1..end])?;
    let text = text_of(&pattern);
    let code: Vec<_> = pattern
        .iter()
        .filter(|p| p.unit || !matches!(p.kind, Kind::Space | Kind::Comment))
        .collect();
    if let [lit] = &code[..] {
        if lit.kind == Kind::String && !lit.unit {
            let v = literal(&lit.text).unwrap_or_default();
            let glob = like_glob(&v, escape).map_err(|m| error("22025", m))?;
            out.push(Piece::unit(format!(" '{}'", glob.replace('\'', "''"))));
            return Ok(after);
        }
    }
    let call = match escape {
        Some(e) => format!(
            " pleroma_pg_like_glob({}, '{}')",
            text.trim(),
            e.to_string().replace('\'', "''")
        ),
        None => format!(" pleroma_pg_like_glob({}, '')", text.trim()),
    };
    out.push(Piece::unit(call));
    Ok(after)
}

/// A PostgreSQL LIKE pattern as the SQLite GLOB pattern that matches the
/// same texts; PostgreSQL's error for a pattern ending in a lone escape.
pub(crate) fn like_glob(pattern: &str, escape: Option<char>) -> Result<String, String> {
    let mut out = String::with_capacity(pattern.len() + 8);
    let literal = |out: &mut String, c: char| match c {
        '*' => out.push_str("[*]"),
        '?' => out.push_str("[?]"),
        '[' => out.push_str("[[]"),
        c => out.push(c),
    };
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            match chars.next() {
                Some(n) => literal(&mut out, n),
                None => return Err("LIKE pattern must not end with escape character".into()),
            }
        } else if c == '%' {
            out.push('*');
        } else if c == '_' {
            out.push('?');
        } else {
            literal(&mut out, c);
        }
    }
    Ok(out)
}

/// The end (exclusive) of the pattern after `ILIKE` at `at`: operands
/// joined by operators that bind tighter than `ILIKE` in PostgreSQL (`||`,
/// `+`, `-`, `*`, `/`, `%`, `::`).
fn pattern_end(toks: &[Tok], at: usize) -> Option<usize> {
    let mut j = next_code(toks, at)?;
    loop {
        // One operand.
        let t = &toks[j];
        let mut end = match t.kind {
            Kind::String | Kind::Number | Kind::Variable | Kind::Quoted | Kind::Blob => j + 1,
            Kind::Word => {
                let mut k = j + 1;
                if let Some(n) = next_code(toks, j).filter(|&n| toks[n].is_punct("(")) {
                    k = closing(toks, n)? + 1;
                }
                k
            }
            Kind::Punct if t.text == "(" => closing(toks, j)? + 1,
            _ => return None,
        };
        // Qualified names.
        while let Some(n) = next_code(toks, end - 1).filter(|&n| toks[n].is_punct(".")) {
            let m = next_code(toks, n)?;
            end = m + 1;
        }
        match next_code(toks, end - 1) {
            Some(n) if toks[n].is_cast() => {
                // `::type`: its words.
                let mut m = n;
                while let Some(w) = next_code(toks, m).filter(|&w| toks[w].kind == Kind::Word) {
                    m = w;
                    if !matches!(
                        toks[w].text.to_ascii_lowercase().as_str(),
                        "double" | "character"
                    ) {
                        break;
                    }
                }
                end = m + 1;
                match next_code(toks, end - 1) {
                    Some(o)
                        if ["||", "+", "-", "*", "/", "%"]
                            .iter()
                            .any(|p| toks[o].is_punct(p)) =>
                    {
                        j = next_code(toks, o)?;
                    }
                    _ => return Some(end),
                }
            }
            Some(n)
                if ["||", "+", "-", "*", "/", "%"]
                    .iter()
                    .any(|p| toks[n].is_punct(p)) =>
            {
                j = next_code(toks, n)?;
            }
            _ => return Some(end),
        }
    }
}

/// `X ± INTERVAL 'n unit …'` with the literal at `lit`: `out` ends with
/// `X ±` and the `INTERVAL` word is not in it yet. Becomes `datetime(X,
/// '±n units', …)`.
fn interval(toks: &[Tok], lit: usize, out: &mut Vec<Piece>) -> Result<(), ErrorInfo> {
    let shape = || {
        not_translated(
            "INTERVAL other than in `timestamp + INTERVAL '…'` or `timestamp - INTERVAL '…'`",
        )
    };
    // What binds tighter than `+`/`-` after it would take the interval.
    if let Some(n) = next_code(toks, lit) {
        if ["*", "/", "%", "||"].iter().any(|p| toks[n].is_punct(p)) || toks[n].is_cast() {
            return Err(shape());
        }
    }
    let mut end = out.len();
    while end > 0 && matches!(out[end - 1].kind, Kind::Space | Kind::Comment) && !out[end - 1].unit
    {
        end -= 1;
    }
    let sign = match out.get(end.wrapping_sub(1)) {
        Some(p) if p.is_punct("+") => 1,
        Some(p) if p.is_punct("-") => -1,
        _ => return Err(shape()),
    };
    out.truncate(end - 1);
    let operand = pop_operand(out).ok_or_else(shape)?;
    // The operand must not be the right side of an operator that binds as
    // tight as `+`/`-` or tighter: `a - b + INTERVAL …` is `(a - b) + …`.
    if let Some(p) = last_code(out) {
        if !p.unit
            && p.kind == Kind::Punct
            && ["+", "-", "*", "/", "%", "||", "."].contains(&p.text.as_str())
        {
            return Err(shape());
        }
    }
    // `INTERVAL '…' DAY`: a field qualifier, which this does not read.
    if let Some(n) = next_code(toks, lit) {
        if ["year", "month", "day", "hour", "minute", "second"]
            .iter()
            .any(|w| toks[n].is(w))
        {
            return Err(not_translated("INTERVAL '…' with a field qualifier"));
        }
    }
    let spec = tokenize::code(&toks[lit].text)
        .next()
        .map(|t| t.value().into_owned())
        .unwrap_or_default();
    let (months, days, micros) = interval_spec(&spec)?;
    let (months, days, micros) = (sign * months, sign * days, sign as i128 * micros as i128);
    let micros = i64::try_from(micros).map_err(|_| error("22015", "interval out of range"))?;
    out.push(
        Piece::unit(format!(
            "pleroma_pg_interval({operand}, {months}, {days}, {micros})"
        ))
        .named("?column?"),
    );
    Ok(())
}

/// What `version()` answers: PostgreSQL-shaped (clients read the number
/// after `PostgreSQL `), naming Pleroma and the SQLite under it.
pub(crate) fn version() -> String {
    format!(
        "PostgreSQL {} on {}-{}, served by Pleroma over SQLite {}",
        crate::settings::SERVER_VERSION,
        std::env::consts::ARCH,
        std::env::consts::OS,
        rusqlite::version()
    )
}

/// An interval literal's months, days and microseconds, as PostgreSQL
/// reads `'n unit [n unit …]'`: years are 12 months, weeks 7 days; hours,
/// minutes and seconds may have a fraction (to the microsecond).
fn interval_spec(spec: &str) -> Result<(i64, i64, i64), ErrorInfo> {
    let syntax = || {
        error(
            "22007",
            format!("invalid input syntax for type interval: \"{spec}\""),
        )
    };
    let range = || error("22015", "interval out of range");
    let words: Vec<&str> = spec.split_whitespace().collect();
    if words.is_empty() || words.len() % 2 != 0 {
        return Err(syntax());
    }
    let (mut months, mut days, mut micros) = (0i64, 0i64, 0i64);
    let mut seen = Vec::new();
    for pair in words.chunks(2) {
        let unit = pair[1].to_ascii_lowercase();
        let unit = match unit.as_str() {
            "year" | "years" | "y" | "yr" | "yrs" => "year",
            "mon" | "mons" | "month" | "months" => "month",
            "week" | "weeks" | "w" => "week",
            "day" | "days" | "d" => "day",
            "hour" | "hours" | "h" | "hr" | "hrs" => "hour",
            "min" | "mins" | "minute" | "minutes" | "m" => "minute",
            "sec" | "secs" | "second" | "seconds" | "s" => "second",
            "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => "ms",
            "us" | "usec" | "usecs" | "microsecond" | "microseconds" => "us",
            _ => return Err(syntax()),
        };
        // PostgreSQL refuses a unit twice.
        if seen.contains(&unit) {
            return Err(syntax());
        }
        seen.push(unit);
        let n = pair[0];
        let whole = |n: &str| -> Result<i64, ErrorInfo> {
            let digits = n.trim_start_matches(['+', '-']);
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return Err(syntax());
            }
            n.parse::<i64>().map_err(|_| range())
        };
        let add = |acc: i64, by: i64| acc.checked_add(by).ok_or_else(range);
        match unit {
            "year" => months = add(months, whole(n)?.checked_mul(12).ok_or_else(range)?)?,
            "month" => months = add(months, whole(n)?)?,
            "week" => days = add(days, whole(n)?.checked_mul(7).ok_or_else(range)?)?,
            "day" => days = add(days, whole(n)?)?,
            _ => {
                // A decimal number of hours, minutes, seconds, ms or µs.
                let per: i128 = match unit {
                    "hour" => 3_600_000_000,
                    "minute" => 60_000_000,
                    "second" => 1_000_000,
                    "ms" => 1_000,
                    _ => 1,
                };
                let (neg, body) = match n.strip_prefix('-') {
                    Some(b) => (true, b),
                    None => (false, n.strip_prefix('+').unwrap_or(n)),
                };
                let (int, frac) = body.split_once('.').unwrap_or((body, ""));
                if int.is_empty() && frac.is_empty()
                    || !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit())
                {
                    return Err(syntax());
                }
                let scale = 10i128.pow(frac.len().min(30) as u32);
                let num: i128 = format!("{int}{frac}").parse().map_err(|_| range())?;
                let us = num.checked_mul(per).ok_or_else(range)?;
                if us % scale != 0 {
                    return Err(not_translated(format!(
                        "INTERVAL '{spec}': a fraction of a microsecond"
                    )));
                }
                let us = i64::try_from(us / scale).map_err(|_| range())?;
                micros = add(micros, if neg { -us } else { us })?;
            }
        }
    }
    Ok((months, days, micros))
}

/// A timestamp's parts: date, time of day, microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stamp {
    y: i64,
    m: u32,
    d: u32,
    /// Microseconds since midnight.
    us: i64,
}

fn days_in_month(y: i64, m: u32) -> u32 {
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ][m as usize - 1]
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

impl Stamp {
    /// PostgreSQL's `timestamp + interval`: the months first (a day past
    /// the new month's end becomes its last day), then the days, then the
    /// time.
    fn plus(self, months: i64, days: i64, micros: i64) -> Option<Stamp> {
        let total = (self.y * 12 + self.m as i64 - 1).checked_add(months)?;
        let (y, m) = (total.div_euclid(12), total.rem_euclid(12) as u32 + 1);
        let d = self.d.min(days_in_month(y, m));
        let day = days_from_civil(y, m, d).checked_add(days)?;
        let us = (self.us as i128) + micros as i128;
        const DAY: i128 = 86_400_000_000;
        let day = day.checked_add(i64::try_from(us.div_euclid(DAY)).ok()?)?;
        let (y, m, d) = civil_from_days(day);
        Some(Stamp {
            y,
            m,
            d,
            us: us.rem_euclid(DAY) as i64,
        })
    }

    /// As SQLite's date functions write it (so it compares with what they
    /// stored): `YYYY-MM-DD HH:MM:SS`, then `.SSS` when there are
    /// milliseconds, or six digits for microseconds.
    fn text(self, date_only: bool) -> Result<String, String> {
        if !(1..=9999).contains(&self.y) {
            return Err("timestamp out of range".into());
        }
        let date = format!("{:04}-{:02}-{:02}", self.y, self.m, self.d);
        if date_only {
            return Ok(date);
        }
        let secs = self.us / 1_000_000;
        let frac = self.us % 1_000_000;
        let mut out = format!(
            "{date} {:02}:{:02}:{:02}",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        );
        if frac % 1000 == 0 && frac != 0 {
            out.push_str(&format!(".{:03}", frac / 1000));
        } else if frac != 0 {
            out.push_str(&format!(".{frac:06}"));
        }
        Ok(out)
    }
}

/// `pleroma_pg_interval(ts, months, days, micros)`: `ts + interval` as
/// PostgreSQL computes it, over ISO-8601 text.
fn pg_interval(v: ValueRef<'_>, months: i64, days: i64, micros: i64) -> Result<SqlValue, String> {
    match v {
        ValueRef::Null => Ok(SqlValue::Null),
        ValueRef::Text(b) => {
            let s = String::from_utf8_lossy(b);
            let t = parse_stamp(&s, "timestamp")?;
            t.plus(months, days, micros)
                .ok_or_else(|| "timestamp out of range".to_owned())?
                .text(false)
                .map(SqlValue::Text)
        }
        _ => Err(format!(
            "pleroma serve adds an interval to ISO-8601 text only, not to {}",
            value_type(v)
        )),
    }
}

/// The functions of `pg_catalog` that each session's connection has
/// ([`register`]), which are called without the schema.
pub(crate) const FUNCTIONS: [&str; 3] = ["version", "current_schema", "current_database"];

/// The name of the served database: the file's stem (`main` in memory).
pub(crate) fn database_name(db: &rusqlite::Connection) -> String {
    db.path()
        .filter(|p| !p.is_empty())
        .and_then(|p| {
            std::path::Path::new(p)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "main".to_owned())
}

/// Registers, on a session's connection, `pleroma_pg_cast(value, type)`
/// and PostgreSQL's `version()`, `current_schema()` (`public`, SQLite's
/// one schema as the server shows it) and `current_database()` (the
/// file's stem).
pub(crate) fn register(db: &rusqlite::Connection) -> rusqlite::Result<()> {
    let deterministic = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    let v = version();
    db.create_scalar_function("version", 0, deterministic, move |_| Ok(v.clone()))?;
    db.create_scalar_function("current_schema", 0, deterministic, |_| Ok("public"))?;
    let name = database_name(db);
    db.create_scalar_function("current_database", 0, deterministic, move |_| {
        Ok(name.clone())
    })?;
    db.create_scalar_function("pleroma_pg_like_glob", 2, deterministic, |ctx| {
        let pattern: Option<String> = ctx.get(0)?;
        let escape: String = ctx.get(1)?;
        let Some(p) = pattern else {
            return Ok(None);
        };
        like_glob(&p, escape.chars().next())
            .map(Some)
            .map_err(|m| SqlError::UserFunctionError(m.into()))
    })?;
    for arity in [2, 3] {
        db.create_scalar_function(
            "pleroma_pg_cast",
            arity,
            deterministic,
            |ctx: &mut Context<'_>| {
                let ty: String = ctx.get(1)?;
                let from: Option<String> = if ctx.len() > 2 { ctx.get(2)? } else { None };
                pg_cast_from(ctx.get_raw(0), &ty, from.as_deref())
                    .map_err(|m| SqlError::UserFunctionError(m.into()))
            },
        )?;
    }
    db.create_scalar_function(
        "pleroma_pg_interval",
        4,
        deterministic,
        |ctx: &mut Context<'_>| {
            pg_interval(ctx.get_raw(0), ctx.get(1)?, ctx.get(2)?, ctx.get(3)?)
                .map_err(|m| SqlError::UserFunctionError(m.into()))
        },
    )
}

/// PostgreSQL's name of a type, for its messages.
fn type_name(ty: &str) -> &str {
    match ty {
        "int2" => "smallint",
        "int4" => "integer",
        "int8" => "bigint",
        "float8" => "double precision",
        "timestamp" => "timestamp without time zone",
        "bool" => "boolean",
        other => other,
    }
}

/// PostgreSQL's type of a SQLite value, for its messages.
fn value_type(v: ValueRef<'_>) -> &'static str {
    match v {
        ValueRef::Null | ValueRef::Text(_) => "text",
        ValueRef::Integer(_) => "bigint",
        ValueRef::Real(_) => "double precision",
        ValueRef::Blob(_) => "bytea",
    }
}

/// The cast of `v` to the PostgreSQL type `ty`, as PostgreSQL computes it,
/// or PostgreSQL's error message.
pub(crate) fn pg_cast(v: ValueRef<'_>, ty: &str) -> Result<SqlValue, String> {
    pg_cast_from(v, ty, None)
}

/// As [`pg_cast`], with the PostgreSQL type of `v` when the statement
/// shows it (`x::float8::int`: `float8`).
pub(crate) fn pg_cast_from(
    v: ValueRef<'_>,
    ty: &str,
    from: Option<&str>,
) -> Result<SqlValue, String> {
    let cannot = || format!("cannot cast type {} to {}", value_type(v), type_name(ty));
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let syntax = |s: &str| format!("invalid input syntax for type {}: \"{s}\"", type_name(ty));
    if let ValueRef::Null = v {
        return Ok(SqlValue::Null);
    }
    match ty {
        "int2" | "int4" | "int8" => {
            let (lo, hi) = match ty {
                "int2" => (i16::MIN as i64, i16::MAX as i64),
                "int4" => (i32::MIN as i64, i32::MAX as i64),
                _ => (i64::MIN, i64::MAX),
            };
            let range = || format!("{} out of range", type_name(ty));
            let n = match v {
                ValueRef::Integer(n) => n,
                ValueRef::Real(f) => {
                    // float8 to an integer type rounds half to even (rint),
                    // numeric half away from zero; a REAL is either to
                    // PostgreSQL, so a half is declined unless the cast's
                    // source type is known.
                    let r = match from {
                        Some("float8") => f.round_ties_even(),
                        Some("numeric") => f.round(),
                        _ if f.fract().abs() == 0.5 => {
                            return Err(format!(
                                "pleroma serve cannot tell whether {f} is numeric (rounded half \
                                 away from zero) or double precision (half to even) in its cast to \
                                 {}: round() it first, or cast it to numeric or float8",
                                type_name(ty)
                            ))
                        }
                        _ => f.round(),
                    };
                    if !r.is_finite() || r < lo as f64 || r >= -(lo as f64) {
                        return Err(range());
                    }
                    r as i64
                }
                ValueRef::Text(b) => {
                    let s = text(b);
                    match pg_integer(&s) {
                        Some(Some(n)) => n,
                        Some(None) => {
                            return Err(format!(
                                "value \"{s}\" is out of range for type {}",
                                type_name(ty)
                            ))
                        }
                        None => return Err(syntax(&s)),
                    }
                }
                _ => return Err(cannot()),
            };
            if n < lo || n > hi {
                return Err(range());
            }
            Ok(SqlValue::Integer(n))
        }
        "float8" => match v {
            ValueRef::Integer(n) => Ok(SqlValue::Real(n as f64)),
            ValueRef::Real(f) => Ok(SqlValue::Real(f)),
            ValueRef::Text(b) => {
                let s = text(b);
                let f = pg_float(&s).ok_or_else(|| syntax(&s))?;
                let lower = s.to_ascii_lowercase();
                if f.is_nan() {
                    return Err(format!(
                        "pleroma serve does not translate NaN: SQLite stores it as NULL (\"{s}\")"
                    ));
                }
                let named_infinity = lower.contains("inf");
                let nonzero = lower
                    .split('e')
                    .next()
                    .is_some_and(|m| m.bytes().any(|c| (b'1'..=b'9').contains(&c)));
                if f.is_infinite() && !named_infinity || f == 0.0 && nonzero {
                    return Err(format!("\"{s}\" is out of range for type double precision"));
                }
                Ok(SqlValue::Real(f))
            }
            _ => Err(cannot()),
        },
        // PostgreSQL's numeric is exact decimal; here it is SQLite's REAL,
        // so that `x::numeric / n` divides as PostgreSQL's does (an
        // INTEGER would divide as integers). A value a double does not hold
        // exactly as written is declined.
        "numeric" => {
            let exact = |f: f64| f.is_finite() && f.abs() <= (1u64 << 53) as f64;
            match v {
                ValueRef::Integer(n) if exact(n as f64) => Ok(SqlValue::Real(n as f64)),
                ValueRef::Real(f) if f.is_finite() => Ok(SqlValue::Real(f)),
                ValueRef::Text(b) => {
                    let s = text(b);
                    let digits = pg_trim(&s)
                        .split(['e', 'E'])
                        .next()
                        .unwrap_or_default()
                        .trim_start_matches(['+', '-', '0', '.'])
                        .bytes()
                        .filter(u8::is_ascii_digit)
                        .count();
                    match pg_float(&s) {
                        Some(f) if f.is_finite() && digits <= 15 => Ok(SqlValue::Real(f)),
                        Some(_) => Err(format!(
                            "pleroma serve does not translate numeric \"{s}\": past what a double \
                             holds exactly, or NaN or Infinity"
                        )),
                        None => Err(syntax(&s)),
                    }
                }
                ValueRef::Integer(n) => Err(format!(
                    "pleroma serve does not translate numeric {n}: past 2^53, where a double \
                     holds integers exactly"
                )),
                _ => Err(cannot()),
            }
        }
        "text" => Ok(SqlValue::Text(match v {
            ValueRef::Integer(n) => n.to_string(),
            ValueRef::Real(f) => crate::wire::float_text(f),
            ValueRef::Text(b) => text(b),
            ValueRef::Blob(b) => crate::wire::bytea_text(b),
            ValueRef::Null => unreachable!("NULL returned above"),
        })),
        "bool" => match v {
            ValueRef::Integer(n) => Ok(SqlValue::Integer((n != 0) as i64)),
            ValueRef::Text(b) => {
                let s = text(b);
                pg_bool(&s)
                    .map(|b| SqlValue::Integer(b as i64))
                    .ok_or_else(|| syntax(&s))
            }
            _ => Err(cannot()),
        },
        "date" | "timestamp" => match v {
            ValueRef::Text(b) => {
                let s = text(b);
                pg_timestamp(&s, ty).map(SqlValue::Text)
            }
            _ => Err(cannot()),
        },
        other => Err(format!(
            "pleroma serve does not translate the cast ::{other}"
        )),
    }
}

/// PostgreSQL's whitespace around an input value.
fn pg_trim(s: &str) -> &str {
    s.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c'))
}

/// PostgreSQL 16's integer input: a sign, then decimal digits (or `0x`,
/// `0o`, `0b` and their digits), `_` allowed between digits. `None`: not an
/// integer; `Some(None)`: past 64 bits.
fn pg_integer(s: &str) -> Option<Option<i64>> {
    let t = pg_trim(s);
    let (neg, body) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
    {
        return None;
    }
    let mut n: i128 = 0;
    for c in digits.chars().filter(|&c| c != '_') {
        n = n * radix as i128 + c.to_digit(radix)? as i128;
        if n > i64::MAX as i128 + 1 {
            return Some(None);
        }
    }
    let n = if neg { -n } else { n };
    Some(i64::try_from(n).ok())
}

/// PostgreSQL's float8 input: a decimal number, `NaN`, `Infinity`, `inf`
/// (without case), with blanks around.
fn pg_float(s: &str) -> Option<f64> {
    let t = pg_trim(s);
    let lower = t.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if matches!(unsigned, "nan" | "infinity" | "inf") {
        return lower.parse().ok();
    }
    // Rust's parser takes what PostgreSQL's strtod takes, but for these.
    if t.is_empty() || unsigned.starts_with(|c: char| !(c.is_ascii_digit() || c == '.')) {
        return None;
    }
    t.parse().ok()
}

/// PostgreSQL's boolean input: a unique prefix of `true`, `false`, `yes`,
/// `no`, or `on`, `off`, `1`, `0`, without case, blanks around.
fn pg_bool(s: &str) -> Option<bool> {
    let t = pg_trim(s).to_ascii_lowercase();
    match t.as_str() {
        "" | "o" => None,
        "1" | "on" => Some(true),
        "0" | "of" | "off" => Some(false),
        _ if "true".starts_with(&t) || "yes".starts_with(&t) => Some(true),
        _ if "false".starts_with(&t) || "no".starts_with(&t) => Some(false),
        _ => None,
    }
}

/// An ISO-8601 date or timestamp (`YYYY-MM-DD`, then ` ` or `T` and
/// `HH:MM[:SS[.fff]]`, then an optional zone, which a timestamp without
/// time zone ignores as PostgreSQL does), written back as SQLite's date
/// functions write it (`Stamp::text`). Else PostgreSQL's error, or ours for
/// what PostgreSQL reads and this does not (its other date styles).
fn pg_timestamp(s: &str, ty: &str) -> Result<String, String> {
    parse_stamp(s, ty)?.text(ty == "date")
}

fn parse_stamp(s: &str, ty: &str) -> Result<Stamp, String> {
    let syntax = || format!("invalid input syntax for type {}: \"{s}\"", type_name(ty));
    let range = || format!("date/time field value out of range: \"{s}\"");
    let other = || {
        format!(
            "pleroma serve translates ::{ty} of ISO-8601 text only (YYYY-MM-DD[ HH:MM[:SS[.f]]]), not \"{s}\""
        )
    };
    let t = pg_trim(s);
    // Text with no digit at all is no date in any style.
    if !t.bytes().any(|c| c.is_ascii_digit()) {
        return Err(syntax());
    }
    let num = |part: Option<&str>| -> Option<u32> {
        let part = part?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let b = t.as_bytes();
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return Err(other());
    }
    let (Some(y), Some(m), Some(d)) = (num(t.get(0..4)), num(t.get(5..7)), num(t.get(8..10)))
    else {
        return Err(other());
    };
    if y == 0 || !(1..=12).contains(&m) || d == 0 || d > days_in_month(y as i64, m) {
        return Err(range());
    }
    let date = Stamp {
        y: y as i64,
        m,
        d,
        us: 0,
    };
    let rest = &t[10..];
    if rest.is_empty() {
        return Ok(date);
    }
    let rest = rest.strip_prefix([' ', 'T', 't']).ok_or_else(other)?;
    let rb = rest.as_bytes();
    if rb.len() < 5 || rb[2] != b':' {
        return Err(other());
    }
    let (Some(hh), Some(mm)) = (num(rest.get(0..2)), num(rest.get(3..5))) else {
        return Err(other());
    };
    let mut i = 5;
    let mut ss = 0;
    let mut frac = "";
    if rb.get(5) == Some(&b':') {
        ss = num(rest.get(6..8)).ok_or_else(other)?;
        i = 8;
        if rb.get(8) == Some(&b'.') {
            let n = rb[9..].iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 {
                return Err(other());
            }
            frac = &rest[9..9 + n];
            i = 9 + n;
        }
    }
    let zone = &rest[i..];
    let zone_ok = zone.is_empty()
        || zone.eq_ignore_ascii_case("z")
        || (zone.starts_with(['+', '-'])
            && zone[1..].bytes().all(|c| c.is_ascii_digit() || c == b':')
            && (2..=5).contains(&(zone.len() - 1)));
    if !zone_ok {
        return Err(other());
    }
    // PostgreSQL takes 24:00:00 (the next midnight) and a leap second
    // (the next minute); nothing past them.
    if hh > 24
        || mm > 59
        || ss > 60
        || hh == 24 && (mm, ss) != (0, 0)
        || hh == 24 && !frac.trim_end_matches('0').is_empty()
    {
        return Err(range());
    }
    // Microseconds, the seventh digit rounding on.
    let mut micros: i64 = format!("{frac:0<6}")[..6].parse().map_err(|_| syntax())?;
    if frac.len() > 6 && frac.as_bytes()[6] >= b'5' {
        micros += 1;
    }
    let us = ((hh as i64 * 60 + mm as i64) * 60 + ss as i64) * 1_000_000 + micros;
    date.plus(0, 0, us).ok_or_else(range)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rewriting alone (the result names are `name_columns`'s, tested
    /// on their own below).
    fn tr(sql: &str) -> String {
        let toks = lex(sql);
        text_of(&rewrite(&toks).unwrap())
    }

    fn refused(sql: &str) -> String {
        to_sqlite(sql).unwrap_err().message
    }

    #[test]
    fn a_parameter_cast_alike_wherever_it_is_used_is_left_to_the_bind() {
        let bound = |sql: &str| {
            let (text, casts) = to_sqlite_bound(sql).unwrap();
            (text.into_owned(), casts)
        };
        assert_eq!(
            bound(
                "SELECT a FROM public.ev WHERE ((d = $1::text)) AND n > $2::int8 OR m = $1::text"
            ),
            (
                "SELECT a FROM main.ev WHERE ((d = $1)) AND n > $2 OR m = $1".into(),
                vec![(1, "text"), (2, "int8")]
            )
        );
        // Used bare too, or cast to two types: the cast stays in the SQL.
        assert_eq!(
            bound("SELECT $1::text, $1").0,
            "SELECT pleroma_pg_cast($1, 'text') AS \"text\", $1"
        );
        assert_eq!(
            bound("SELECT $1::text, $1::int").1,
            Vec::<(usize, &str)>::new()
        );
        assert_eq!(bound("SELECT $1::text::int").1, Vec::<(usize, &str)>::new());
        let v = cast_params(
            &[Value::Text(" 21 ".into()), Value::Integer(5)],
            &[(1, "int8"), (2, "text")],
        )
        .unwrap();
        assert_eq!(v, [Value::Integer(21), Value::Text("5".into())]);
        let e = cast_params(&[Value::Text("x".into())], &[(1, "int4")]).unwrap_err();
        assert_eq!(e.code, "22P02");
    }

    #[test]
    fn like_is_postgresqls_case_sensitive_like_as_a_glob() {
        assert_eq!(
            tr(r"SELECT 1 WHERE a LIKE 'x%_*?[' AND b NOT LIKE 'a\%'"),
            r"SELECT 1 WHERE a GLOB 'x*?[*][?][[]' AND b NOT GLOB 'a%'"
        );
        assert_eq!(
            tr("SELECT 1 WHERE a LIKE 'a!%' ESCAPE '!' OR a LIKE 'it''s%'"),
            "SELECT 1 WHERE a GLOB 'a%' OR a GLOB 'it''s*'"
        );
        assert_eq!(
            tr("SELECT 1 WHERE a LIKE $1 || '%'"),
            r"SELECT 1 WHERE a GLOB pleroma_pg_like_glob($1 || '%', '\')"
        );
        assert_eq!(
            refused(r"SELECT 1 WHERE a LIKE 'a\'"),
            "LIKE pattern must not end with escape character"
        );
        assert_eq!(like_glob("50%_off", None).unwrap(), "50*?off");
    }

    #[test]
    fn statements_without_the_forms_are_untouched() {
        for sql in [
            "SELECT 1",
            "SELECT 'a::int', \"x::y\" FROM t -- ::int now()",
            "SELECT * FROM t WHERE a = TRUE LIMIT 5",
            "SELECT count(*) FILTER (WHERE a > 1) FROM t",
            "SELECT allx, nowhere, $all FROM t",
        ] {
            assert!(matches!(to_sqlite(sql).unwrap(), Cow::Borrowed(_)), "{sql}");
        }
    }

    #[test]
    fn casts_become_the_cast_function_on_their_operand() {
        assert_eq!(
            tr("SELECT a::int FROM t"),
            "SELECT pleroma_pg_cast(a, 'int4') FROM t"
        );
        assert_eq!(
            tr("SELECT t.a :: bigint"),
            "SELECT pleroma_pg_cast(t.a, 'int8')"
        );
        assert_eq!(
            tr("SELECT '1'::text::int"),
            "SELECT pleroma_pg_cast(pleroma_pg_cast('1', 'text'), 'int4')"
        );
        assert_eq!(
            tr("SELECT $1::int8, $2"),
            "SELECT pleroma_pg_cast($1, 'int8'), $2"
        );
        assert_eq!(
            tr("SELECT sum(x)::double precision"),
            "SELECT pleroma_pg_cast(sum(x), 'float8')"
        );
        assert_eq!(
            tr("SELECT (a + b)::numeric"),
            "SELECT pleroma_pg_cast((a + b), 'numeric')"
        );
        assert_eq!(tr("SELECT -1::int"), "SELECT -pleroma_pg_cast(1, 'int4')");
        assert_eq!(
            tr("SELECT x::timestamp without time zone"),
            "SELECT pleroma_pg_cast(x, 'timestamp')"
        );
        // A numeric literal is cast here, as PostgreSQL casts numeric.
        assert_eq!(
            tr("SELECT 2.5::int, 3.49::int2, -2.5::int8"),
            "SELECT 3, 3, -3"
        );
        assert_eq!(
            tr("SELECT 1.0::text, 1.50::text, 1e3::text, .5::text, 0.0::text"),
            "SELECT '1.0', '1.50', '1000', '0.5', '0.0'"
        );
        assert_eq!(
            tr("SELECT 2.5::float8"),
            "SELECT pleroma_pg_cast(2.5, 'float8')"
        );
        assert!(refused("SELECT 1.5::bool").contains("cannot cast type numeric to boolean"));
        assert!(refused("SELECT 40000.0::int2").contains("smallint out of range"));
        // Known to the emulated catalog only: its cast function fails elsewhere.
        assert_eq!(
            tr("SELECT x::regclass"),
            "SELECT pleroma_pg_cast(x, 'regclass')"
        );
        assert!(pg_cast(ValueRef::Text(b"t"), "regclass")
            .unwrap_err()
            .contains("::regclass"));
        assert!(refused("SELECT x::jsonb").contains("::jsonb"));
        assert!(refused("SELECT x::varchar(3)").contains("type modifier"));
        assert!(refused("SELECT x::timestamptz").contains("::timestamptz"));
        assert!(refused("SELECT ::int").contains("without an operand"));
    }

    #[test]
    fn date_forms_become_sqlites_date_functions() {
        assert_eq!(
            tr("SELECT date_trunc('month', ts) FROM t"),
            "SELECT strftime('%Y-%m-01 00:00:00', ts) FROM t"
        );
        assert_eq!(
            tr("SELECT DATE_TRUNC('day', ts::timestamp)"),
            "SELECT strftime('%Y-%m-%d 00:00:00', pleroma_pg_cast(ts, 'timestamp'))"
        );
        assert_eq!(
            tr("SELECT EXTRACT(year FROM ts)"),
            "SELECT CAST(strftime('%Y', ts) AS INTEGER)"
        );
        assert_eq!(
            tr("SELECT extract('dow' from t.ts)"),
            "SELECT CAST(strftime('%w', t.ts) AS INTEGER)"
        );
        assert_eq!(tr("SELECT now()"), "SELECT datetime('now')");
        assert_eq!(
            tr("SELECT * FROM t WHERE ts > now() - INTERVAL '7 days'"),
            "SELECT * FROM t WHERE ts > pleroma_pg_interval(datetime('now'), 0, -7, 0)"
        );
        assert_eq!(
            tr("SELECT ts + interval '1 week 2 hours 1.5 seconds' AS x"),
            "SELECT pleroma_pg_interval(ts, 0, 7, 7201500000) AS x"
        );
        assert_eq!(
            tr("SELECT ts - interval '1 year -2 mons'"),
            "SELECT pleroma_pg_interval(ts, -10, 0, 0)"
        );
        assert!(refused("SELECT ts + INTERVAL '1 day' DAY").contains("field qualifier"));
        assert_eq!(
            to_sqlite("SELECT ts + INTERVAL '1 day 1 day'")
                .unwrap_err()
                .code,
            "22007"
        );
        assert_eq!(
            to_sqlite("SELECT ts + INTERVAL '99999999999999999999 days'")
                .unwrap_err()
                .code,
            "22015"
        );
        // date ± integer is a date; other date arithmetic is declined.
        assert_eq!(
            tr("SELECT CURRENT_DATE - 7, '2024-01-31'::date + 1"),
            "SELECT date(CURRENT_DATE, '-7 days'), date(pleroma_pg_cast('2024-01-31', 'date'), '+1 days')"
        );
        assert!(refused("SELECT d::date - e::date").contains("arithmetic"));
        assert!(refused("SELECT now() + 1").contains("arithmetic"));
        assert!(refused("SELECT date_trunc('decade', ts)").contains("decade"));
        assert!(refused("SELECT date_trunc($1, ts)").contains("not a string literal"));
        assert!(refused("SELECT a - b + INTERVAL '1 day'").contains("INTERVAL"));
        assert!(refused("SELECT ts + INTERVAL '1 day' * 2").contains("INTERVAL"));
        assert!(refused("SELECT ts + INTERVAL '1 fortnight'").contains("fortnight"));
        assert!(refused("SELECT EXTRACT(century FROM ts)").contains("century"));
    }

    #[test]
    fn intervals_add_as_postgresql_adds_them() {
        let add = |ts: &str, m, d, us| {
            pg_interval(ValueRef::Text(ts.as_bytes()), m, d, us).map(|v| match v {
                SqlValue::Text(t) => t,
                other => panic!("{other:?}"),
            })
        };
        // Read off PostgreSQL 15: the months first, clamped to the month's end.
        assert_eq!(
            add("2024-01-31 00:00:00", 1, 0, 0).unwrap(),
            "2024-02-29 00:00:00"
        );
        assert_eq!(
            add("2024-02-29 10:00:00", 12, 0, 0).unwrap(),
            "2025-02-28 10:00:00"
        );
        assert_eq!(add("2023-03-31", -1, 0, 0).unwrap(), "2023-02-28 00:00:00");
        assert_eq!(
            add("2024-01-30 12:00", 1, 1, 0).unwrap(),
            "2024-03-01 12:00:00"
        );
        assert_eq!(
            add("2024-12-31 23:59:59.999", 0, 0, 1_000_000).unwrap(),
            "2025-01-01 00:00:00.999"
        );
        assert_eq!(
            add("2024-03-01", 0, -1, -1).unwrap(),
            "2024-02-28 23:59:59.999999"
        );
        assert!(add("9999-12-31 23:59:59", 0, 0, 1_000_000)
            .unwrap_err()
            .contains("out of range"));
        assert_eq!(
            pg_interval(ValueRef::Null, 1, 0, 0).unwrap(),
            SqlValue::Null
        );
        for z in [-800_000, -1, 0, 1, 59, 60, 365, 738_000, 2_900_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }

    #[test]
    fn what_would_read_differently_is_declined() {
        // A dollar quote would be a parameter to SQLite.
        assert!(refused("SELECT $$x$$, $1::text").contains("dollar-quoted"));
        assert!(refused("SELECT $a$x$a$").contains("dollar-quoted"));
        assert!(matches!(
            to_sqlite("SELECT $1, $name").unwrap(),
            Cow::Borrowed(_)
        ));
        // ILIKE binds tighter than `=` in PostgreSQL, not in SQLite.
        assert!(refused("SELECT false = s ILIKE 'a%' FROM t").contains("parentheses"));
        assert!(refused("SELECT x = s NOT ILIKE 'a%' FROM t").contains("parentheses"));
        assert_eq!(
            tr("SELECT false = (s ILIKE 'a%') FROM t WHERE a = 1 AND s ILIKE 'b'"),
            "SELECT false = (s LIKE 'a%' ESCAPE '\\') FROM t WHERE a = 1 AND s LIKE 'b' ESCAPE '\\'"
        );
        assert_eq!(
            to_sqlite("SELECT 'a' ILIKE 'a\\'").unwrap_err().code,
            "22025"
        );
        // SERIAL only as the one-column primary key.
        assert_eq!(
            tr("CREATE TABLE s(c bigserial PRIMARY KEY, v text)"),
            "CREATE TABLE s(c INTEGER PRIMARY KEY, v text)"
        );
        assert!(refused("CREATE TABLE s(a serial, b int PRIMARY KEY)").contains("SERIAL"));
        assert!(refused("ALTER TABLE s ADD COLUMN d serial").contains("SERIAL"));
        assert_eq!(
            tr("SELECT x FROM t WHERE k = ANY (ARRAY[1, 2])"),
            "SELECT x FROM t WHERE k IN (1, 2)"
        );
        // postgres_fdw's form of an IN list: an array literal.
        assert_eq!(
            tr("SELECT x FROM t WHERE ((k = ANY ('{de,\"u s\",NULL,it''s}'::text[])))"),
            "SELECT x FROM t WHERE ((k IN ('de', 'u s', NULL, 'it''s')))"
        );
        assert_eq!(
            tr("SELECT '01' = ANY ('{1}'::int[]), 'a' = ANY ('{a}'::text[])"),
            "SELECT 1 IN (1), 'a' IN ('a')"
        );
        assert!(refused("SELECT 'x' = ANY ('{1}'::int[])").contains("invalid input syntax"));
        assert!(refused("SELECT 1 + '2024-01-31'::date").contains("on the right of + or -"));
        assert_eq!(
            tr("CREATE TABLE s(c serial8 PRIMARY KEY)"),
            "CREATE TABLE s(c INTEGER PRIMARY KEY)"
        );
        assert!(refused("CREATE TABLE s(c serial PRIMARY KEY DESC)").contains("SERIAL"));
        assert_eq!(
            tr("SELECT x FROM t WHERE k <> ALL ('{ 1 , -2}'::pg_catalog.int8[])"),
            "SELECT x FROM t WHERE k NOT IN (1, -2)"
        );
        assert_eq!(
            tr("SELECT 1 WHERE k = SOME ('{}'::int[])"),
            "SELECT 1 WHERE k IN ()"
        );
        // Escapes, as PostgreSQL's array input reads them.
        assert_eq!(
            tr(r#"SELECT 1 WHERE k = ANY ('{\NULL, NU\LL,a\ , \ ,"NULL"}'::text[])"#),
            "SELECT 1 WHERE k IN ('NULL', 'NULL', 'a ', ' ', 'NULL')"
        );
        assert!(refused("SELECT 1 WHERE k = ANY ('{a}')").contains("without a cast"));
        assert!(refused("SELECT 1 WHERE k = ANY ('{1.5}'::numeric[])").contains("numeric"));
        assert!(refused("SELECT 1 WHERE k = ANY ('{{1}}'::int[])").contains("malformed"));
        assert!(refused("SELECT 1 WHERE k = ANY ('{x}'::int[])").contains("invalid input syntax"));
        assert!(refused("SELECT 1 WHERE k = ANY ($1::text[])").contains("arrays"));
        assert_eq!(
            tr("SELECT 'public.ev'::pg_catalog.regclass, x::pg_catalog.text"),
            "SELECT pleroma_pg_cast('public.ev', 'regclass'), pleroma_pg_cast(x, 'text')"
        );
        // Past 64 bits an integer literal is numeric.
        assert_eq!(
            tr("SELECT 9223372036854775808::text"),
            "SELECT '9223372036854775808'"
        );
        assert_eq!(
            tr("SELECT 1.50::numeric::text, (2.5)::int"),
            "SELECT '1.50', 3"
        );
        assert_eq!(
            tr("SELECT '2.5'::numeric::int, x::float8::int"),
            "SELECT pleroma_pg_cast(pleroma_pg_cast('2.5', 'numeric'), 'int4', 'numeric'), \
             pleroma_pg_cast(pleroma_pg_cast(x, 'float8'), 'int4', 'float8')"
        );
    }

    #[test]
    fn rewritten_columns_get_postgresqls_names() {
        let named = |sql: &str| to_sqlite(sql).unwrap().into_owned();
        assert_eq!(
            named("SELECT n::int, t.m::text, sum(x)::bigint, 'a'::text, (a + b)::float8 FROM t"),
            "SELECT pleroma_pg_cast(n, 'int4') AS \"n\", pleroma_pg_cast(t.m, 'text') AS \"m\", \
             pleroma_pg_cast(sum(x), 'int8') AS \"sum\", pleroma_pg_cast('a', 'text') AS \"text\", \
             pleroma_pg_cast((a + b), 'float8') AS \"float8\" FROM t"
        );
        assert_eq!(
            named("SELECT DISTINCT date_trunc('day', ts), EXTRACT(year FROM ts) y, now() AS n FROM t GROUP BY 1"),
            "SELECT DISTINCT strftime('%Y-%m-%d 00:00:00', ts) AS \"date_trunc\", \
             CAST(strftime('%Y', ts) AS INTEGER) y, datetime('now') AS n FROM t GROUP BY 1"
        );
        // Only the top-level select list, and only a form standing alone.
        assert_eq!(
            named("SELECT x FROM (SELECT n::int FROM t) WHERE n::int > 1"),
            "SELECT x FROM (SELECT pleroma_pg_cast(n, 'int4') FROM t) WHERE pleroma_pg_cast(n, 'int4') > 1"
        );
        assert_eq!(
            named("SELECT n::int + 1 FROM t"),
            "SELECT pleroma_pg_cast(n, 'int4') + 1 FROM t"
        );
        assert_eq!(named("SELECT 2.5::int"), "SELECT 3 AS \"int4\"");
    }

    #[test]
    fn ilike_and_limit_all() {
        assert_eq!(
            tr("SELECT * FROM t WHERE name ILIKE 'a\\_%' AND x = 1"),
            "SELECT * FROM t WHERE name LIKE 'a\\_%' ESCAPE '\\' AND x = 1"
        );
        assert_eq!(
            tr("SELECT * FROM t WHERE name NOT ILIKE '%' || $1 || '%'"),
            "SELECT * FROM t WHERE name NOT LIKE '%' || $1 || '%' ESCAPE '\\'"
        );
        assert_eq!(
            tr("SELECT * FROM t WHERE name ILIKE p ESCAPE '!'"),
            "SELECT * FROM t WHERE name LIKE p ESCAPE '!'"
        );
        assert_eq!(
            tr("SELECT * FROM t LIMIT ALL OFFSET 2"),
            "SELECT * FROM t LIMIT -1 OFFSET 2"
        );
        assert!(refused("SELECT a ILIKE").contains("ILIKE"));
    }

    #[test]
    fn casts_convert_as_postgresql_does() {
        use ValueRef::*;
        let ok = |v: ValueRef<'_>, ty: &str| pg_cast(v, ty).unwrap();
        // A half: numeric rounds away from zero, float8 to even; a REAL of
        // no known type is declined.
        let from = |v, ty, f| pg_cast_from(v, ty, Some(f)).unwrap();
        assert_eq!(from(Real(2.5), "int4", "float8"), SqlValue::Integer(2));
        assert_eq!(from(Real(2.5), "int4", "numeric"), SqlValue::Integer(3));
        assert_eq!(from(Real(-2.5), "int8", "numeric"), SqlValue::Integer(-3));
        assert!(pg_cast(Real(2.5), "int4")
            .unwrap_err()
            .contains("cannot tell"));
        assert_eq!(ok(Real(2.4), "int4"), SqlValue::Integer(2));
        assert_eq!(ok(Real(-3.6), "int8"), SqlValue::Integer(-4));
        assert_eq!(ok(Text(b" 42 "), "int4"), SqlValue::Integer(42));
        assert_eq!(ok(Text(b"0x1F"), "int8"), SqlValue::Integer(31));
        assert_eq!(ok(Text(b"1_000"), "int8"), SqlValue::Integer(1000));
        assert_eq!(
            pg_cast(Text(b"3.7"), "int4").unwrap_err(),
            "invalid input syntax for type integer: \"3.7\""
        );
        assert_eq!(
            pg_cast(Integer(40000), "int2").unwrap_err(),
            "smallint out of range"
        );
        assert_eq!(
            pg_cast(Text(b"99999999999"), "int4").unwrap_err(),
            "integer out of range"
        );
        assert_eq!(ok(Real(1.0), "text"), SqlValue::Text("1".into()));
        assert_eq!(ok(Blob(b"hi"), "text"), SqlValue::Text("\\x6869".into()));
        assert_eq!(ok(Text(b"1e3"), "float8"), SqlValue::Real(1000.0));
        assert_eq!(
            ok(Text(b"-Infinity"), "float8"),
            SqlValue::Real(f64::NEG_INFINITY)
        );
        assert!(pg_cast(Text(b"abc"), "float8").is_err());
        assert!(pg_cast(Text(b"NaN"), "float8").unwrap_err().contains("NaN"));
        assert!(pg_cast(Text(b"1e400"), "float8")
            .unwrap_err()
            .contains("out of range"));
        assert!(pg_cast(Text(b"1e-400"), "float8")
            .unwrap_err()
            .contains("out of range"));
        // numeric is a REAL, so that it divides as numeric does.
        assert_eq!(ok(Text(b"12"), "numeric"), SqlValue::Real(12.0));
        assert_eq!(ok(Integer(10), "numeric"), SqlValue::Real(10.0));
        assert_eq!(ok(Text(b"1.5"), "numeric"), SqlValue::Real(1.5));
        assert!(pg_cast(Text(b"12345678901234567890"), "numeric").is_err());
        assert!(pg_cast(Integer(i64::MAX), "numeric").is_err());
        assert_eq!(ok(Text(b"yes"), "bool"), SqlValue::Integer(1));
        assert_eq!(ok(Text(b" f "), "bool"), SqlValue::Integer(0));
        assert_eq!(ok(Text(b"off"), "bool"), SqlValue::Integer(0));
        assert!(pg_cast(Text(b"o"), "bool").is_err());
        assert!(pg_cast(Real(1.0), "bool").is_err());
        assert_eq!(
            ok(Text(b"2024-02-29 10:00"), "date"),
            SqlValue::Text("2024-02-29".into())
        );
        // As SQLite's date functions write it: milliseconds in three digits.
        assert_eq!(
            ok(Text(b"2024-02-29T10:00:01.25+02"), "timestamp"),
            SqlValue::Text("2024-02-29 10:00:01.250".into())
        );
        assert_eq!(
            ok(Text(b"2024-12-31 24:00"), "timestamp"),
            SqlValue::Text("2025-01-01 00:00:00".into())
        );
        assert_eq!(
            ok(Text(b"2024-01-01 10:00:00.0000015"), "timestamp"),
            SqlValue::Text("2024-01-01 10:00:00.000002".into())
        );
        assert!(pg_cast(Text(b"abc"), "date")
            .unwrap_err()
            .contains("invalid input syntax"));
        assert!(pg_cast(Text(b"0000-01-01"), "date")
            .unwrap_err()
            .contains("out of range"));
        assert!(pg_cast(Text(b"2023-02-29"), "date").is_err());
        assert!(pg_cast(Integer(2460000), "date").is_err());
        assert_eq!(ok(Null, "int4"), SqlValue::Null);
    }
}
