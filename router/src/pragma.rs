//! Pleroma's own PRAGMAs. SQLite (and sqlparser) cannot parse a PRAGMA with
//! several arguments, so this small grammar is ours:
//!
//! ```text
//! PRAGMA pleroma_attach('table', 'dim, dim, ...' [, 'measure, ...' [, 'plane']])
//! PRAGMA pleroma_limb('fact', 'fact_key', 'dim', 'dim_key')
//! PRAGMA pleroma_detach('table' [, 'plane'])
//! PRAGMA pleroma_rebuild('table' [, 'plane'])
//! PRAGMA pleroma_planes               PRAGMA pleroma_explain('<select>')
//! PRAGMA pleroma_advise [('table')]
//! PRAGMA pleroma_route [= auto | engine | plane]
//! PRAGMA pleroma_persist [= on | off]
//! ```

use crate::tokenize::{self, Kind};
use crate::RouteMode;

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pragma {
    Attach {
        table: String,
        dims: Vec<String>,
        measures: Vec<String>,
        /// The plane's name (`None`: the table's own plane, named after it).
        name: Option<String>,
    },
    /// `plane` `None`: every plane of the table (and its limbs).
    Detach {
        table: String,
        plane: Option<String>,
    },
    Limb {
        fact: String,
        fact_key: String,
        dim: String,
        dim_key: String,
    },
    Rebuild {
        table: String,
        plane: Option<String>,
    },
    Planes,
    /// `PRAGMA pleroma_advise [('table')]`.
    Advise(Option<String>),
    Explain {
        sql: String,
    },
    Route(Option<RouteMode>),
    /// Persisted planes on or off for the database (`None`: ask).
    Persist(Option<bool>),
}

impl Pragma {
    /// Whether it changes the set of planes or rebuilds one (and so has
    /// something to publish for the other connections).
    pub fn writes_catalog(&self) -> bool {
        matches!(
            self,
            Pragma::Attach { .. }
                | Pragma::Detach { .. }
                | Pragma::Limb { .. }
                | Pragma::Rebuild { .. }
                | Pragma::Persist(Some(_))
        )
    }
}

/// `None`: not a Pleroma PRAGMA (SQLite runs it). `Some(Err)`: a malformed
/// one, with a message that names the problem.
pub(crate) fn parse(sql: &str) -> Option<Result<Pragma, String>> {
    // Read as SQLite's tokenizer reads it: comments anywhere, a `;` at the end.
    let mut code = tokenize::code(sql).filter(|t| t.kind != Kind::Semi);
    if !code.next()?.is("pragma") {
        return None;
    }
    let word = code.next().filter(|t| t.kind == Kind::Word)?;
    let name = word.text.to_ascii_lowercase();
    if !name.starts_with("pleroma_") {
        return None;
    }
    let from = word.start + word.text.len();
    let to = code.last().map_or(from, |t| t.start + t.text.len());
    let tail = sql[from..to].trim();
    Some(parse_named(&name, tail))
}

fn parse_named(name: &str, tail: &str) -> Result<Pragma, String> {
    match name {
        "pleroma_attach" => {
            let args = args(name, tail)?;
            if !(2..=4).contains(&args.len()) {
                return Err(format!(
                    "{name}: expected 2 to 4 arguments ('table', 'dimensions', 'measures', 'plane name'), got {}",
                    args.len()
                ));
            }
            let table = nonempty(name, "table", &args[0])?;
            let measures = args.get(2).map(|m| list(m)).unwrap_or_default();
            let name = args.get(3).map(|n| nonempty(name, "plane name", n)).transpose()?;
            Ok(Pragma::Attach { table, dims: list(&args[1]), measures, name })
        }
        "pleroma_limb" => {
            let a = args(name, tail)?;
            if a.len() != 4 {
                return Err(format!(
                    "{name}: expected 4 arguments ('fact table', 'fact key', 'dimension table', 'dimension key'), got {}",
                    a.len()
                ));
            }
            Ok(Pragma::Limb {
                fact: nonempty(name, "fact table", &a[0])?,
                fact_key: nonempty(name, "fact key", &a[1])?,
                dim: nonempty(name, "dimension table", &a[2])?,
                dim_key: nonempty(name, "dimension key", &a[3])?,
            })
        }
        "pleroma_detach" | "pleroma_rebuild" => {
            let args = args(name, tail)?;
            if !(1..=2).contains(&args.len()) {
                return Err(format!(
                    "{name}: expected 1 or 2 arguments ('table', 'plane name'), got {}",
                    args.len()
                ));
            }
            let table = nonempty(name, "table", &args[0])?;
            let plane = args.get(1).map(|n| nonempty(name, "plane name", n)).transpose()?;
            Ok(if name == "pleroma_detach" {
                Pragma::Detach { table, plane }
            } else {
                Pragma::Rebuild { table, plane }
            })
        }
        "pleroma_advise" => {
            if tail.is_empty() {
                return Ok(Pragma::Advise(None));
            }
            let args = args(name, tail)?;
            if args.len() != 1 {
                return Err(format!("{name}: expected no argument or 1 ('table'), got {}", args.len()));
            }
            Ok(Pragma::Advise(Some(nonempty(name, "table", &args[0])?)))
        }
        "pleroma_planes" => {
            if !tail.is_empty() {
                return Err(format!("{name}: takes no arguments"));
            }
            Ok(Pragma::Planes)
        }
        "pleroma_explain" => {
            let args = args(name, tail)?;
            if args.len() != 1 {
                return Err(format!("{name}: expected 1 argument ('<select>'), got {}", args.len()));
            }
            Ok(Pragma::Explain { sql: nonempty(name, "statement", &args[0])? })
        }
        "pleroma_route" => {
            if tail.is_empty() {
                return Ok(Pragma::Route(None));
            }
            let v = if let Some(v) = tail.strip_prefix('=') {
                v.trim()
            } else {
                let a = args(name, tail)?;
                if a.len() != 1 {
                    return Err(format!("{name}: expected one of auto, engine, plane"));
                }
                return mode(name, &a[0]).map(|m| Pragma::Route(Some(m)));
            };
            mode(name, &eq_value(v)).map(|m| Pragma::Route(Some(m)))
        }
        "pleroma_persist" => {
            if tail.is_empty() {
                return Ok(Pragma::Persist(None));
            }
            let v = match tail.strip_prefix('=') {
                Some(v) => eq_value(v).into_owned(),
                None => {
                    let a = args(name, tail)?;
                    if a.len() != 1 {
                        return Err(format!("{name}: expected on or off"));
                    }
                    a[0].clone()
                }
            };
            match v.to_ascii_lowercase().as_str() {
                "on" => Ok(Pragma::Persist(Some(true))),
                "off" => Ok(Pragma::Persist(Some(false))),
                _ => Err(format!("{name}: expected on or off, got {v}")),
            }
        }
        _ => Err(format!(
            "unknown Pleroma PRAGMA {name} (known: pleroma_attach, pleroma_limb, pleroma_detach, pleroma_rebuild, \
             pleroma_planes, pleroma_explain, pleroma_route, pleroma_persist, pleroma_advise)"
        )),
    }
}

fn mode(name: &str, v: &str) -> Result<RouteMode, String> {
    match v.to_ascii_lowercase().as_str() {
        "auto" => Ok(RouteMode::Auto),
        "engine" => Ok(RouteMode::Engine),
        "plane" => Ok(RouteMode::Plane),
        other => Err(format!(
            "{name}: unknown mode '{other}' (expected auto, engine or plane)"
        )),
    }
}

fn nonempty(name: &str, what: &str, v: &str) -> Result<String, String> {
    let v = v.trim();
    if v.is_empty() {
        Err(format!("{name}: the {what} argument is empty"))
    } else {
        Ok(v.to_owned())
    }
}

/// A list's items, split at its top-level commas (an expression
/// dimension's own commas stay inside its parentheses).
fn list(v: &str) -> Vec<String> {
    crate::catalog::expr::split_list(v)
}

/// The value after `=` in `PRAGMA name = value`: one word, quoted name or
/// string, read by the tokenizer ([`tokenize::Token::value`]: without its quotes, a
/// doubled quote as one, comments around it skipped). Anything else (an
/// unterminated quote, more than one token) keeps the old reading: the
/// text with quote characters trimmed from both ends.
fn eq_value(v: &str) -> std::borrow::Cow<'_, str> {
    let mut code = tokenize::code(v);
    if let (Some(t), None) = (code.next(), code.next()) {
        if matches!(t.kind, Kind::Word | Kind::Quoted | Kind::String) {
            return t.value();
        }
    }
    std::borrow::Cow::Borrowed(v.trim().trim_matches(|c| c == '\'' || c == '"'))
}

/// `('a', 'b', ...)`: single-quoted strings ('' escapes a quote) separated
/// by commas, read by the tokenizer (comments between them are skipped).
fn args(name: &str, tail: &str) -> Result<Vec<String>, String> {
    let inner = tail
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format!("{name}: expected arguments in parentheses, like {name}('...')"))?;
    let mut out = Vec::new();
    let mut code = tokenize::code(inner);
    loop {
        match code.next() {
            Some(t) if t.kind == Kind::String => out.push(t.value().into_owned()),
            Some(t) if t.kind == Kind::Illegal && t.text.starts_with('\'') => {
                return Err(format!("{name}: unterminated string argument"))
            }
            _ => {
                return Err(format!(
                    "{name}: each argument must be a single-quoted string"
                ))
            }
        }
        match code.next() {
            None => return Ok(out),
            Some(t) if t.text == "," => continue,
            Some(t) => {
                let c = t.text.chars().next().unwrap_or_default();
                return Err(format!(
                    "{name}: unexpected '{c}' after argument {}",
                    out.len()
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq_value_reads_the_token() {
        assert_eq!(eq_value(" engine"), "engine");
        assert_eq!(eq_value("'plane'"), "plane");
        assert_eq!(eq_value("\"auto\""), "auto");
        // As before: an unterminated or mismatched quote is trimmed.
        assert_eq!(eq_value("'on\""), "on");
        assert_eq!(eq_value("'off"), "off");
        // As SQLite reads it: a comment is no part of the value, `[x]` is a
        // quoted name, a doubled quote is one.
        assert_eq!(eq_value("/* c */ engine"), "engine");
        assert_eq!(eq_value("[plane]"), "plane");
        assert_eq!(eq_value("'it''s'"), "it's");
        assert!(matches!(
            parse("PRAGMA pleroma_route = /* c */ engine"),
            Some(Ok(Pragma::Route(Some(_))))
        ));
    }

    #[test]
    fn parses_attach_with_lists() {
        let p = parse("PRAGMA pleroma_attach('t', 'a, b ,c', 'm');")
            .unwrap()
            .unwrap();
        assert_eq!(
            p,
            Pragma::Attach {
                table: "t".into(),
                dims: vec!["a".into(), "b".into(), "c".into()],
                measures: vec!["m".into()],
                name: None,
            }
        );
        // The two-argument form (no measures) and the named form.
        let p = parse("PRAGMA pleroma_attach('t', 'a')").unwrap().unwrap();
        assert!(matches!(p, Pragma::Attach { measures, name: None, .. } if measures.is_empty()));
        let p = parse("PRAGMA pleroma_attach('t', 'a, b', 'm', ' by_ab ')")
            .unwrap()
            .unwrap();
        assert!(matches!(p, Pragma::Attach { name: Some(n), .. } if n == "by_ab"));
        let p = parse("PRAGMA pleroma_detach('t', 'by_ab')")
            .unwrap()
            .unwrap();
        assert_eq!(
            p,
            Pragma::Detach {
                table: "t".into(),
                plane: Some("by_ab".into())
            }
        );
    }

    #[test]
    fn comments_between_arguments_are_skipped() {
        assert_eq!(
            parse("PRAGMA pleroma_detach(/* which */ 't' -- ,'u'\n)")
                .unwrap()
                .unwrap(),
            Pragma::Detach {
                table: "t".into(),
                plane: None
            }
        );
        let e = parse("PRAGMA pleroma_detach('t' 'u')")
            .unwrap()
            .unwrap_err();
        assert!(e.contains("unexpected ''' after argument 1"), "{e}");
        let e = parse("PRAGMA pleroma_detach('t)").unwrap().unwrap_err();
        assert!(e.contains("unterminated string argument"), "{e}");
    }

    #[test]
    fn zero_dimensions_is_allowed() {
        let p = parse("pragma PLEROMA_ATTACH('t', '', 'm')")
            .unwrap()
            .unwrap();
        assert!(matches!(p, Pragma::Attach { dims, .. } if dims.is_empty()));
    }

    #[test]
    fn other_pragmas_are_not_ours() {
        assert!(parse("PRAGMA journal_mode = wal").is_none());
        assert!(parse("SELECT 1").is_none());
    }

    #[test]
    fn malformed_arguments_name_the_problem() {
        let e = parse("PRAGMA pleroma_attach('t')").unwrap().unwrap_err();
        assert!(e.contains("expected 2 to 4 arguments"), "{e}");
        let e = parse("PRAGMA pleroma_attach('t', 'a', 'm', '')")
            .unwrap()
            .unwrap_err();
        assert!(e.contains("plane name argument is empty"), "{e}");
        let e = parse("PRAGMA pleroma_attach(t, 'a', 'b')")
            .unwrap()
            .unwrap_err();
        assert!(e.contains("single-quoted"), "{e}");
        let e = parse("PRAGMA pleroma_route = fast").unwrap().unwrap_err();
        assert!(e.contains("unknown mode"), "{e}");
        let e = parse("PRAGMA pleroma_nope").unwrap().unwrap_err();
        assert!(e.contains("unknown Pleroma PRAGMA"), "{e}");
    }

    #[test]
    fn route_takes_both_forms() {
        assert_eq!(
            parse("PRAGMA pleroma_route='plane'").unwrap().unwrap(),
            Pragma::Route(Some(RouteMode::Plane))
        );
        assert_eq!(
            parse("PRAGMA pleroma_route(engine)").map(|r| r.is_err()),
            Some(true)
        );
        assert_eq!(
            parse("PRAGMA pleroma_route").unwrap().unwrap(),
            Pragma::Route(None)
        );
    }
}
