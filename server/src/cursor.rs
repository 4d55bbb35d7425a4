//! PostgreSQL's cursors: `DECLARE name CURSOR FOR query`, `FETCH`, `MOVE`
//! and `CLOSE`, which `postgres_fdw` sends to read a remote table (a
//! coordinator over shards, `docs/scale-out.md`).
//!
//! A cursor's query runs whole when it is declared, through the router
//! like any statement (a plane may answer it), and its rows are kept in the
//! session; `FETCH` hands them out in order. The rows are those of the
//! moment of `DECLARE`, which is what PostgreSQL's cursors see too (the
//! snapshot of their transaction). Cursors read forward only: the scroll
//! directions are declined. A cursor without `WITH HOLD` ends with its
//! transaction, as in PostgreSQL.

use std::collections::HashMap;

use pgwire::error::ErrorInfo;
use pleroma::tokenize::{self, Kind, Token};
use pleroma::Value;

use crate::sqlstate::error;
use crate::wire::ColType;

/// One open cursor.
pub(crate) struct Cursor {
    pub columns: Vec<String>,
    pub types: Vec<ColType>,
    pub rows: Vec<Vec<Value>>,
    next: usize,
    hold: bool,
}

impl Cursor {
    pub(crate) fn new(
        columns: Vec<String>,
        types: Vec<ColType>,
        rows: Vec<Vec<Value>>,
        hold: bool,
    ) -> Cursor {
        Cursor {
            columns,
            types,
            rows,
            next: 0,
            hold,
        }
    }

    /// The next `count` rows (all that are left for `None`), moving on.
    pub(crate) fn take(&mut self, count: Option<usize>) -> std::ops::Range<usize> {
        let from = self.next;
        let to = count.map_or(self.rows.len(), |n| (from + n).min(self.rows.len()));
        self.next = to;
        from..to
    }
}

/// A session's cursors, by name.
#[derive(Default)]
pub(crate) struct Cursors(pub HashMap<String, Cursor>);

impl Cursors {
    /// Out of a transaction, the cursors declared in it are gone.
    pub(crate) fn transaction_ended(&mut self) {
        self.0.retain(|_, c| c.hold);
    }
}

/// A cursor statement.
#[derive(Debug, PartialEq)]
pub(crate) enum Command<'a> {
    Declare {
        name: String,
        hold: bool,
        /// The query, as written.
        query: &'a str,
    },
    /// FETCH (`rows`) or MOVE; `count` `None` is ALL.
    Fetch {
        name: String,
        count: Option<usize>,
        rows: bool,
    },
    /// CLOSE name, or CLOSE ALL (`None`).
    Close(Option<String>),
}

fn syntax(sql: &str) -> ErrorInfo {
    error(
        "42601",
        format!("syntax error in cursor statement: {}", sql.trim()),
    )
}

fn name_of(t: &Token<'_>) -> Option<String> {
    match t.kind {
        Kind::Word => Some(t.text.to_ascii_lowercase()),
        Kind::Quoted => Some(t.value().into_owned()),
        _ => None,
    }
}

/// The cursor statement `sql` is, if it is one.
pub(crate) fn parse(sql: &str) -> Option<Result<Command<'_>, ErrorInfo>> {
    let toks: Vec<Token<'_>> = tokenize::code(sql)
        .filter(|t| t.kind != Kind::Semi)
        .collect();
    let first = toks.first()?;
    if first.is("declare") {
        return Some(declare(sql, &toks));
    }
    if first.is("fetch") || first.is("move") {
        return Some(fetch(sql, &toks[1..], first.is("fetch")));
    }
    if first.is("close") {
        return Some(match &toks[1..] {
            [a] if a.is("all") => Ok(Command::Close(None)),
            [n] => name_of(n)
                .map(|n| Command::Close(Some(n)))
                .ok_or_else(|| syntax(sql)),
            _ => Err(syntax(sql)),
        });
    }
    None
}

fn declare<'a>(sql: &'a str, toks: &[Token<'a>]) -> Result<Command<'a>, ErrorInfo> {
    let name = toks.get(1).and_then(name_of).ok_or_else(|| syntax(sql))?;
    let mut i = 2;
    let mut hold = false;
    while let Some(t) = toks.get(i) {
        if t.is("for") {
            let query = toks
                .get(i + 1)
                .map(|q| &sql[q.start..])
                .ok_or_else(|| syntax(sql))?;
            let query = query.trim_end().trim_end_matches(';').trim_end();
            return Ok(Command::Declare { name, hold, query });
        }
        if t.is("binary") {
            return Err(error(
                "0A000",
                "pleroma serve does not support BINARY cursors: declare it without BINARY",
            ));
        }
        if t.is("with") && toks.get(i + 1).is_some_and(|h| h.is("hold")) {
            hold = true;
            i += 1;
        } else if t.is("without") && toks.get(i + 1).is_some_and(|h| h.is("hold")) {
            i += 1;
        } else if !(t.is("cursor")
            || t.is("no")
            || t.is("scroll")
            || t.is("insensitive")
            || t.is("asensitive"))
        {
            return Err(syntax(sql));
        }
        i += 1;
    }
    Err(syntax(sql))
}

fn fetch<'a>(sql: &str, toks: &[Token<'a>], rows: bool) -> Result<Command<'a>, ErrorInfo> {
    let backward = || {
        error(
            "0A000",
            "pleroma serve's cursors read forward only (FETCH NEXT, FORWARD n, n, ALL)",
        )
    };
    let count = |t: &Token<'_>| -> Result<usize, ErrorInfo> {
        match t.text.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(n as usize),
            Ok(_) => Err(backward()),
            Err(_) => Err(syntax(sql)),
        }
    };
    // [direction] [FROM | IN] name
    let (name, direction) = toks.split_last().ok_or_else(|| syntax(sql))?;
    let name = name_of(name).ok_or_else(|| syntax(sql))?;
    let direction = match direction {
        [d @ .., f] if f.is("from") || f.is("in") => d,
        d => d,
    };
    let count = match direction {
        [] => Some(1),
        [n] if n.is("next") => Some(1),
        [a] if a.is("all") => None,
        [f] if f.is("forward") => Some(1),
        [f, a] if f.is("forward") && a.is("all") => None,
        [f, n] if f.is("forward") && n.kind == Kind::Number => Some(count(n)?),
        [n] if n.kind == Kind::Number => Some(count(n)?),
        [d, ..]
            if ["prior", "first", "last", "absolute", "relative", "backward"]
                .iter()
                .any(|w| d.is(w))
                || (d.kind == Kind::Punct && d.text == "-") =>
        {
            return Err(backward())
        }
        _ => return Err(syntax(sql)),
    };
    Ok(Command::Fetch { name, count, rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_statements_parse_as_postgresql_reads_them() {
        assert_eq!(
            parse("DECLARE c1 CURSOR FOR\nSELECT a FROM public.t GROUP BY 1;")
                .unwrap()
                .unwrap(),
            Command::Declare {
                name: "c1".into(),
                hold: false,
                query: "SELECT a FROM public.t GROUP BY 1"
            }
        );
        assert_eq!(
            parse("declare \"C\" no scroll cursor with hold for select 1")
                .unwrap()
                .unwrap(),
            Command::Declare {
                name: "C".into(),
                hold: true,
                query: "select 1"
            }
        );
        let f = |sql| parse(sql).unwrap().unwrap();
        let fetch = |name: &str, count, rows| Command::Fetch {
            name: name.into(),
            count,
            rows,
        };
        assert_eq!(f("FETCH 100 FROM c1"), fetch("c1", Some(100), true));
        assert_eq!(f("fetch c1"), fetch("c1", Some(1), true));
        assert_eq!(f("FETCH ALL IN c1"), fetch("c1", None, true));
        assert_eq!(f("FETCH FORWARD 5 c1"), fetch("c1", Some(5), true));
        assert_eq!(f("MOVE NEXT FROM c1"), fetch("c1", Some(1), false));
        assert_eq!(f("CLOSE c1"), Command::Close(Some("c1".into())));
        assert_eq!(f("CLOSE ALL"), Command::Close(None));
        for bad in [
            "FETCH PRIOR FROM c1",
            "FETCH -1 FROM c1",
            "FETCH BACKWARD 2 FROM c1",
        ] {
            assert_eq!(parse(bad).unwrap().unwrap_err().code, "0A000", "{bad}");
        }
        assert_eq!(
            parse("DECLARE c BINARY CURSOR FOR SELECT 1")
                .unwrap()
                .unwrap_err()
                .code,
            "0A000"
        );
        assert_eq!(
            parse("DECLARE c CURSOR").unwrap().unwrap_err().code,
            "42601"
        );
        assert!(parse("SELECT 1").is_none());
    }
}
