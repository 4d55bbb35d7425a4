//! `SET`, `RESET` and `SHOW` of PostgreSQL's session settings, answered by
//! the server: they are remembered per session and shown back, and change
//! nothing in SQLite (which has no such settings).

use std::collections::BTreeMap;

use pgwire::error::ErrorInfo;
use pleroma::tokenize::{self, Kind, Token};

use crate::sqlstate::error;

/// The `server_version` clients read: libpq and psycopg parse its leading
/// `MAJOR.MINOR`, so Pleroma's own name follows in parentheses.
pub const SERVER_VERSION: &str = concat!("16.0 (Pleroma ", env!("CARGO_PKG_VERSION"), ")");

/// The settings a session starts with, as PostgreSQL names them.
fn defaults() -> BTreeMap<String, String> {
    [
        ("application_name", ""),
        ("client_encoding", "UTF8"),
        ("client_min_messages", "notice"),
        ("datestyle", "ISO, MDY"),
        ("default_transaction_isolation", "serializable"),
        ("default_transaction_read_only", "off"),
        ("extra_float_digits", "1"),
        ("integer_datetimes", "on"),
        ("intervalstyle", "postgres"),
        ("is_superuser", "on"),
        ("lock_timeout", "0"),
        ("max_identifier_length", "63"),
        ("search_path", "public"),
        ("server_encoding", "UTF8"),
        ("server_version", SERVER_VERSION),
        ("server_version_num", "160000"),
        ("standard_conforming_strings", "on"),
        ("statement_timeout", "0"),
        ("timezone", "UTC"),
        ("transaction_isolation", "serializable"),
        ("transaction_read_only", "off"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Settings a client may not change: they describe the server.
const READ_ONLY: &[&str] = &[
    "integer_datetimes",
    "is_superuser",
    "max_identifier_length",
    "server_encoding",
    "server_version",
    "server_version_num",
];

pub(crate) struct Settings {
    values: BTreeMap<String, String>,
}

/// What a SET/RESET/SHOW statement asks.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Command {
    Set(String, String),
    Reset(Option<String>),
    Show(Option<String>),
    /// `SET TRANSACTION ...` / `SET SESSION CHARACTERISTICS ...`: SQLite's
    /// transactions are serializable, at least what any level asks.
    SetTransaction,
}

impl Settings {
    pub(crate) fn new(startup: &std::collections::HashMap<String, String>) -> Settings {
        let mut values = defaults();
        for (k, v) in startup {
            let k = k.to_ascii_lowercase();
            if values.contains_key(&k) && !READ_ONLY.contains(&k.as_str()) {
                values.insert(k, v.clone());
            }
        }
        Settings { values }
    }

    /// The rows of `SHOW` (one column, named after the setting), or the
    /// command tag of SET/RESET.
    pub(crate) fn run(&mut self, cmd: Command) -> Result<Answer, ErrorInfo> {
        match cmd {
            Command::Show(Some(name)) => {
                let v = self.get(&name)?;
                Ok(Answer::Rows(vec![name], vec![vec![v]]))
            }
            Command::Show(None) => Ok(Answer::Rows(
                vec!["name".into(), "setting".into()],
                self.values
                    .iter()
                    .map(|(k, v)| vec![k.clone(), v.clone()])
                    .collect(),
            )),
            Command::Set(name, value) => {
                self.check_writable(&name)?;
                let v = if value.eq_ignore_ascii_case("default") {
                    defaults().get(&name).cloned().unwrap_or_default()
                } else {
                    value
                };
                self.values.insert(name, v);
                Ok(Answer::Tag("SET"))
            }
            Command::Reset(Some(name)) => {
                self.check_writable(&name)?;
                let d = defaults().get(&name).cloned().unwrap_or_default();
                self.values.insert(name, d);
                Ok(Answer::Tag("RESET"))
            }
            Command::Reset(None) => {
                let keep: Vec<_> = self
                    .values
                    .keys()
                    .filter(|k| k.contains('.'))
                    .cloned()
                    .collect();
                let mut fresh = defaults();
                for k in keep {
                    fresh.remove(&k);
                }
                self.values = fresh;
                Ok(Answer::Tag("RESET"))
            }
            Command::SetTransaction => Ok(Answer::Tag("SET")),
        }
    }

    fn get(&self, name: &str) -> Result<String, ErrorInfo> {
        self.values.get(name).cloned().ok_or_else(|| {
            error(
                "42704",
                format!("unrecognized configuration parameter \"{name}\""),
            )
        })
    }

    fn check_writable(&self, name: &str) -> Result<(), ErrorInfo> {
        if READ_ONLY.contains(&name) {
            return Err(error(
                "55P02",
                format!("parameter \"{name}\" cannot be changed"),
            ));
        }
        // Custom settings ("app.user_id") are PostgreSQL's too.
        if !self.values.contains_key(name) && !name.contains('.') {
            return Err(error(
                "42704",
                format!("unrecognized configuration parameter \"{name}\""),
            ));
        }
        Ok(())
    }
}

pub(crate) enum Answer {
    Rows(Vec<String>, Vec<Vec<String>>),
    Tag(&'static str),
}

/// Parses SET/RESET/SHOW; `None` for any other statement. The words are
/// read by SQLite's tokenizer (`pleroma::tokenize`): comments anywhere are
/// skipped, strings and quoted names are whole tokens; the grammar is
/// PostgreSQL's (`VariableSetStmt`, `VariableShowStmt`,
/// `VariableResetStmt`).
pub(crate) fn parse(sql: &str) -> Option<Result<Command, ErrorInfo>> {
    let mut toks: Vec<Token<'_>> = tokenize::code(sql).collect();
    while toks.last().is_some_and(|t| t.kind == Kind::Semi) {
        toks.pop();
    }
    let (first, rest) = toks.split_first()?;
    let keyword = ["SET", "SHOW", "RESET"].into_iter().find(|k| first.is(k))?;
    let syntax = || {
        error(
            "42601",
            format!("syntax error in {keyword} statement: {sql}"),
        )
    };
    Some(match keyword {
        "SHOW" => target(rest).map(Command::Show).ok_or_else(syntax),
        "RESET" => target(rest).map(Command::Reset).ok_or_else(syntax),
        _ => set(rest, sql)
            .unwrap_or_else(|| Err(syntax()))
            .and_then(refuse_read_only),
    })
}

/// A read-only transaction asked by SET (`SET TRANSACTION READ ONLY`, the
/// session's characteristics, `default_transaction_read_only = on`): SQLite
/// has none, and writes would go through; refused, as `BEGIN READ ONLY` is.
fn refuse_read_only(cmd: Command) -> Result<Command, ErrorInfo> {
    let on = |v: &str| {
        let v = v.trim_matches('\'').to_ascii_lowercase();
        !matches!(v.as_str(), "off" | "false" | "no" | "0" | "f" | "n" | "of")
    };
    match &cmd {
        Command::Set(name, value)
            if (name == "default_transaction_read_only" || name == "transaction_read_only")
                && on(value) =>
        {
            Err(read_only())
        }
        _ => Ok(cmd),
    }
}

pub(crate) fn read_only() -> ErrorInfo {
    error(
        "0A000",
        "READ ONLY transactions are not supported by pleroma serve",
    )
}

/// What SET asks after its keyword; `None` for a syntax error.
fn set(mut t: &[Token<'_>], sql: &str) -> Option<Result<Command, ErrorInfo>> {
    if let Some(scope) = t.first().filter(|w| w.is("SESSION") || w.is("LOCAL")) {
        let session = scope.is("SESSION");
        t = &t[1..];
        match t.first() {
            Some(w) if w.is("CHARACTERISTICS") => return Some(set_transaction(t)),
            Some(w) if session && w.is("AUTHORIZATION") => {
                return Some(Err(error(
                    "0A000",
                    "SET SESSION AUTHORIZATION is not supported by pleroma serve",
                )))
            }
            _ => {}
        }
    }
    let to = |name: &str, value: String| Some(Ok(Command::Set(name.to_owned(), value)));
    match t {
        [w, ..] if w.is("TRANSACTION") => Some(set_transaction(t)),
        [time, zone, v @ ..] if time.is("TIME") && zone.is("ZONE") => {
            to("timezone", zone_value(v, sql)?)
        }
        // `SET NAMES` alone asks the default encoding.
        [names] if names.is("NAMES") => to("client_encoding", "default".into()),
        [names, v] if names.is("NAMES") => to("client_encoding", var_value(&[*v])?),
        _ => {
            let at = t.iter().position(|x| is_punct(x, "=") || x.is("TO"))?;
            let name = var_name(&t[..at])?;
            Some(Ok(Command::Set(name, var_list(&t[at + 1..])?)))
        }
    }
}

/// `SET [SESSION CHARACTERISTICS AS] TRANSACTION …`: refused when it asks
/// READ ONLY.
fn set_transaction(t: &[Token<'_>]) -> Result<Command, ErrorInfo> {
    if t.windows(2).any(|w| w[0].is("READ") && w[1].is("ONLY")) {
        return Err(read_only());
    }
    Ok(Command::SetTransaction)
}

/// The setting SHOW and RESET name (`None` for ALL); `None` for a syntax
/// error.
fn target(t: &[Token<'_>]) -> Option<Option<String>> {
    let name = |n: &str| Some(Some(n.to_owned()));
    match t {
        [all] if all.is("ALL") => Some(None),
        [a, b] if a.is("TIME") && b.is("ZONE") => name("timezone"),
        [a, b, c] if a.is("TRANSACTION") && b.is("ISOLATION") && c.is("LEVEL") => {
            name("transaction_isolation")
        }
        [a, b] if a.is("SESSION") && b.is("AUTHORIZATION") => name("session_authorization"),
        _ => var_name(t).map(Some),
    }
}

/// A setting's name, lowercased: a word or a quoted name, or several
/// joined by dots (`app.user_id`).
fn var_name(t: &[Token<'_>]) -> Option<String> {
    if t.len().is_multiple_of(2) {
        return None;
    }
    let mut name = String::new();
    for (i, tok) in t.iter().enumerate() {
        if i % 2 == 1 {
            if !is_punct(tok, ".") {
                return None;
            }
            name.push('.');
        } else if matches!(tok.kind, Kind::Word | Kind::Quoted | Kind::String) {
            name.push_str(&tok.value());
        } else {
            return None;
        }
    }
    Some(name.to_ascii_lowercase())
}

/// `v1, v2, ...`: each value unquoted, joined by `", "`.
fn var_list(t: &[Token<'_>]) -> Option<String> {
    let values = t
        .split(|x| is_punct(x, ","))
        .map(var_value)
        .collect::<Option<Vec<_>>>()?;
    Some(values.join(", "))
}

/// One value: a word, a string or a quoted name (unquoted), a number
/// with its sign.
fn var_value(t: &[Token<'_>]) -> Option<String> {
    match t {
        [v] if matches!(
            v.kind,
            Kind::Word | Kind::Quoted | Kind::String | Kind::Number
        ) =>
        {
            Some(v.value().into_owned())
        }
        [sign, n] if (is_punct(sign, "-") || is_punct(sign, "+")) && n.kind == Kind::Number => {
            Some(format!("{}{}", sign.text, n.text))
        }
        _ => None,
    }
}

/// What `SET TIME ZONE` takes: a value, `LOCAL` or `DEFAULT` (the default
/// zone), or `INTERVAL ...` (kept as written).
fn zone_value(t: &[Token<'_>], sql: &str) -> Option<String> {
    match t {
        [w] if w.is("LOCAL") || w.is("DEFAULT") => Some("default".into()),
        [i, .., last] if i.is("INTERVAL") => {
            Some(sql[i.start..last.start + last.text.len()].to_owned())
        }
        _ => var_value(t),
    }
}

fn is_punct(t: &Token<'_>, p: &str) -> bool {
    t.kind == Kind::Punct && t.text == p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(s: &mut Settings, name: &str) -> String {
        match s.run(Command::Show(Some(name.into()))).unwrap() {
            Answer::Rows(_, rows) => rows[0][0].clone(),
            Answer::Tag(_) => unreachable!(),
        }
    }

    #[test]
    fn set_is_remembered_and_reset_restores_the_default() {
        let mut s = Settings::new(&Default::default());
        for sql in [
            "SET DateStyle = 'ISO, DMY'",
            "set extra_float_digits to 3",
            "SET SESSION TIME ZONE 'Europe/Paris'",
            "SET app.user = 'x'",
        ] {
            let Some(Ok(cmd)) = parse(sql) else {
                panic!("{sql}")
            };
            s.run(cmd).unwrap();
        }
        assert_eq!(show(&mut s, "datestyle"), "ISO, DMY");
        assert_eq!(show(&mut s, "extra_float_digits"), "3");
        assert_eq!(show(&mut s, "timezone"), "Europe/Paris");
        assert_eq!(show(&mut s, "app.user"), "x");
        let Some(Ok(cmd)) = parse("RESET datestyle") else {
            panic!()
        };
        s.run(cmd).unwrap();
        assert_eq!(show(&mut s, "datestyle"), "ISO, MDY");
        assert!(s.run(Command::Show(Some("nope".into()))).is_err());
        let Some(Ok(cmd)) = parse("SET server_version = '1'") else {
            panic!()
        };
        assert_eq!(s.run(cmd).err().unwrap().code, "55P02");
        assert!(parse("SELECT 1").is_none());
    }

    /// What `parse` makes of a statement: a command, an error's SQLSTATE,
    /// or not a settings statement at all.
    #[derive(Debug, PartialEq)]
    enum Parsed {
        Is(Command),
        Error(&'static str),
        Other,
    }

    fn set(name: &str, value: &str) -> Parsed {
        Parsed::Is(Command::Set(name.into(), value.into()))
    }

    #[test]
    fn statements_parse_as_postgresql_reads_them() {
        use Parsed::{Error, Is, Other};
        let show = |n: &str| Is(Command::Show(Some(n.into())));
        let reset = |n: &str| Is(Command::Reset(Some(n.into())));
        let cases: Vec<(&str, Parsed)> = vec![
            // What the hand scanner read, read the same way.
            ("SET DateStyle = 'ISO, DMY'", set("datestyle", "ISO, DMY")),
            (
                "set extra_float_digits to 3",
                set("extra_float_digits", "3"),
            ),
            ("SET x TO v", set("x", "v")),
            ("SET x = v;", set("x", "v")),
            ("  SET x=v ; ;", set("x", "v")),
            ("SET x='v'", set("x", "v")),
            ("SET statement_timeout = -1", set("statement_timeout", "-1")),
            ("SET x = +1.5", set("x", "+1.5")),
            ("SET x TO DEFAULT", set("x", "DEFAULT")),
            (
                "SET application_name = 'it''s'",
                set("application_name", "it's"),
            ),
            ("SET search_path TO a, b", set("search_path", "a, b")),
            (
                "SET search_path TO \"$user\", public",
                set("search_path", "$user, public"),
            ),
            ("SET search_path = 'a', 'b'", set("search_path", "a, b")),
            ("SET \"DateStyle\" TO iso", set("datestyle", "iso")),
            ("SET app.user = 'x'", set("app.user", "x")),
            ("SET SESSION search_path TO x", set("search_path", "x")),
            ("SET LOCAL search_path = x", set("search_path", "x")),
            (
                "SET TIME ZONE 'Europe/Paris'",
                set("timezone", "Europe/Paris"),
            ),
            (
                "SET SESSION TIME ZONE 'Europe/Paris'",
                set("timezone", "Europe/Paris"),
            ),
            ("SET TIME ZONE UTC", set("timezone", "UTC")),
            ("SET TIME ZONE -8", set("timezone", "-8")),
            ("SET NAMES 'UTF8'", set("client_encoding", "UTF8")),
            ("SET NAMES utf8", set("client_encoding", "utf8")),
            (
                "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
                Is(Command::SetTransaction),
            ),
            (
                "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED",
                Is(Command::SetTransaction),
            ),
            ("SET SESSION AUTHORIZATION bob", Error("0A000")),
            ("SHOW ALL", Is(Command::Show(None))),
            ("show all;", Is(Command::Show(None))),
            ("SHOW DateStyle", show("datestyle")),
            ("SHOW \"DateStyle\"", show("datestyle")),
            ("SHOW \"all\"", show("all")),
            ("SHOW app.user", show("app.user")),
            ("RESET ALL", Is(Command::Reset(None))),
            ("RESET datestyle", reset("datestyle")),
            ("RESET \"TimeZone\"", reset("timezone")),
            ("SET x", Error("42601")),
            ("SET x y", Error("42601")),
            ("SET = 1", Error("42601")),
            ("SELECT 1", Other),
            ("UPDATE t SET a = 1", Other),
            ("", Other),
            ("\"SET\" x = 1", Other),
            // Where the hand scanner was wrong.
            ("SET /* c */ search_path TO x", set("search_path", "x")),
            ("SET search_path /* c */ = x -- c", set("search_path", "x")),
            ("/* first */ SET x = 1", set("x", "1")),
            ("SHOW -- c\n work_mem", show("work_mem")),
            ("SHOW /* c */ ALL", Is(Command::Show(None))),
            ("RESET -- c\n ALL", Is(Command::Reset(None))),
            ("SET TIME ZONE'UTC'", set("timezone", "UTC")),
            ("SET TIME\n  ZONE 'UTC'", set("timezone", "UTC")),
            ("SET TIME ZONE LOCAL", set("timezone", "default")),
            ("SET TIME ZONE DEFAULT", set("timezone", "default")),
            (
                "SET TIME ZONE INTERVAL '+05:30' HOUR TO MINUTE",
                set("timezone", "INTERVAL '+05:30' HOUR TO MINUTE"),
            ),
            ("SET x TO 'a=b'", set("x", "a=b")),
            ("SET x = 'a=b'", set("x", "a=b")),
            ("SET \"a=b\" = 1", set("a=b", "1")),
            ("SET x TO'v'", set("x", "v")),
            ("SET x = 'a,b', c", set("x", "a,b, c")),
            ("SET x = 'it''s, here'", set("x", "it's, here")),
            ("SET NAMES", set("client_encoding", "default")),
            ("SET NAMESPACE = x", set("namespace", "x")),
            ("SET x TOP", Error("42601")),
            ("SET x TO", Error("42601")),
            ("SET x = a b", Error("42601")),
            ("SET x = a,, b", Error("42601")),
            ("SET x = 1; SELECT 2", Error("42601")),
            (
                "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE",
                Is(Command::SetTransaction),
            ),
            ("SHOW TIME ZONE", show("timezone")),
            (
                "SHOW TRANSACTION ISOLATION LEVEL",
                show("transaction_isolation"),
            ),
            ("SHOW", Error("42601")),
            ("SHOW a b", Error("42601")),
            ("RESET", Error("42601")),
        ];
        for (sql, want) in cases {
            let got = match parse(sql) {
                None => Other,
                Some(Ok(cmd)) => Is(cmd),
                Some(Err(e)) => Error(match e.code.as_str() {
                    "42601" => "42601",
                    "0A000" => "0A000",
                    other => panic!("{sql}: unexpected code {other}"),
                }),
            };
            assert_eq!(got, want, "{sql:?}");
        }
    }
}
