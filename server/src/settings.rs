//! `SET`, `RESET` and `SHOW` of PostgreSQL's session settings, answered by
//! the server: they are remembered per session and shown back, and change
//! nothing in SQLite (which has no such settings).

use std::collections::BTreeMap;

use pgwire::error::ErrorInfo;

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

/// Parses SET/RESET/SHOW; `None` for any other statement.
pub(crate) fn parse(sql: &str) -> Option<Result<Command, ErrorInfo>> {
    let s = sql.trim().trim_end_matches(';').trim();
    let mut words = s.split_whitespace();
    let first = words.next()?.to_ascii_uppercase();
    let rest_of = |n: usize| -> &str {
        let mut r = s;
        for _ in 0..n {
            r = r.trim_start();
            r = &r[r.find(char::is_whitespace).unwrap_or(r.len())..];
        }
        r.trim()
    };
    match first.as_str() {
        "SHOW" => {
            let name = rest_of(1).to_ascii_lowercase();
            Some(Ok(Command::Show(if name == "all" {
                None
            } else {
                Some(unquote(&name))
            })))
        }
        "RESET" => {
            let name = rest_of(1).to_ascii_lowercase();
            Some(Ok(Command::Reset(if name == "all" {
                None
            } else {
                Some(unquote(&name))
            })))
        }
        "SET" => {
            let mut body = rest_of(1);
            let second = body
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_ascii_uppercase();
            if second == "SESSION" || second == "LOCAL" {
                body = rest_of(2);
                if body.to_ascii_uppercase().starts_with("CHARACTERISTICS") {
                    return Some(Ok(Command::SetTransaction));
                }
                if second == "SESSION" && body.to_ascii_uppercase().starts_with("AUTHORIZATION") {
                    return Some(Err(error(
                        "0A000",
                        "SET SESSION AUTHORIZATION is not supported by pleroma serve",
                    )));
                }
            }
            if second == "TRANSACTION" {
                return Some(Ok(Command::SetTransaction));
            }
            let upper = body.to_ascii_uppercase();
            if upper.starts_with("TIME ZONE") {
                let v = body[9..].trim();
                return Some(Ok(Command::Set("timezone".into(), unquote(v))));
            }
            if upper.starts_with("NAMES") {
                let v = body[5..].trim();
                return Some(Ok(Command::Set("client_encoding".into(), unquote(v))));
            }
            let (name, value) = match body.find(['=']) {
                Some(i) => (&body[..i], &body[i + 1..]),
                None => {
                    let mut it = body.splitn(2, char::is_whitespace);
                    let n = it.next().unwrap_or("");
                    let rest = it.next().unwrap_or("").trim_start();
                    let v = if rest.len() >= 2 && rest[..2].eq_ignore_ascii_case("TO") {
                        &rest[2..]
                    } else {
                        return Some(Err(error(
                            "42601",
                            format!("syntax error in SET statement: {sql}"),
                        )));
                    };
                    (n, v)
                }
            };
            let name = unquote(name.trim()).to_ascii_lowercase();
            let value = value.trim();
            let quoted = value.len() >= 2
                && value.starts_with('\'')
                && value.ends_with('\'')
                && !value[1..value.len() - 1].replace("''", "").contains('\'');
            let value = if quoted {
                unquote(value)
            } else {
                value
                    .split(',')
                    .map(|v| unquote(v.trim()))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if name.is_empty() {
                return Some(Err(error("42601", format!("syntax error in SET: {sql}"))));
            }
            Some(Ok(Command::Set(name, value)))
        }
        _ => None,
    }
}

fn unquote(s: &str) -> String {
    let s = s.trim();
    if s.len() >= 2
        && ((s.starts_with('\'') && s.ends_with('\'')) || (s.starts_with('"') && s.ends_with('"')))
    {
        s[1..s.len() - 1].replace("''", "'")
    } else {
        s.to_owned()
    }
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
}
