//! Spans: byte positions of the statement's text, and the source text of
//! the expressions the rewrite replaces.
//!
//! Exact because every range it gives back is checked against the parse:
//! an expression's text must parse back to the same expression, and a
//! position the parser does not give declines the statement instead of
//! being guessed.

use std::ops::Range;

use sqlparser::ast::{Expr, Spanned};
use sqlparser::dialect::SQLiteDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Location;

use super::walk::Walker;
use super::R;

impl<'a> Walker<'a> {
    pub(super) fn offset(&self, l: Location) -> R<usize> {
        if l.line == 0 || l.column == 0 {
            return Err("an expression without a source position".into());
        }
        let start = *self
            .lines
            .get(l.line as usize - 1)
            .ok_or("a source position past the text")?;
        let line = &self.sql[start..];
        let mut chars = line.char_indices();
        let mut at = line.len();
        for _ in 1..l.column {
            chars.next();
        }
        if let Some((i, _)) = chars.next() {
            at = i;
        }
        Ok(start + at)
    }

    /// The source text of `e`. sqlparser's spans stop short of a call's
    /// closing parenthesis (and of `(*)`, FILTER and OVER): the range is
    /// extended to the parentheses it opens, then over what follows a call.
    pub(super) fn range(&self, e: &impl Spanned) -> R<Range<usize>> {
        let s = e.span();
        let (a, b) = (self.offset(s.start)?, self.offset(s.end)?);
        if a >= b {
            return Err("an expression without a source position".into());
        }
        self.extend(a, b)
    }

    pub(super) fn extend(&self, a: usize, mut b: usize) -> R<Range<usize>> {
        let bytes = self.sql.as_bytes();
        let mut open = 0usize;
        let mut i = a;
        while i < b {
            i = match bytes[i] {
                b'(' => {
                    open += 1;
                    i + 1
                }
                b')' => {
                    open = open.checked_sub(1).ok_or("unbalanced parentheses")?;
                    i + 1
                }
                q @ (b'\'' | b'"' | b'`') => skip_quoted(bytes, i, q)?,
                b'[' => skip_quoted(bytes, i, b']')?,
                _ => i + 1,
            };
        }
        b = i;
        while open > 0 {
            let c = *bytes.get(b).ok_or("unbalanced parentheses")?;
            b = match c {
                b'(' => {
                    open += 1;
                    b + 1
                }
                b')' => {
                    open -= 1;
                    b + 1
                }
                q @ (b'\'' | b'"' | b'`') => skip_quoted(bytes, b, q)?,
                b'[' => skip_quoted(bytes, b, b']')?,
                _ => b + 1,
            };
        }
        // A call: `(*)` or `()` after the name, then FILTER (...), OVER (...).
        loop {
            let rest = &self.sql[b..];
            let ws = rest.len() - rest.trim_start().len();
            let after = &rest[ws..];
            let word = |w: &str| {
                after.len() > w.len()
                    && after[..w.len()].eq_ignore_ascii_case(w)
                    && after[w.len()..].trim_start().starts_with('(')
            };
            let skip = if after.starts_with('(') && self.is_call_name(&self.sql[a..b]) {
                ws
            } else if word("filter") {
                ws + 6
            } else if word("over") {
                ws + 4
            } else {
                break;
            };
            let from = b + skip;
            let from = from + (self.sql[from..].len() - self.sql[from..].trim_start().len());
            b = balanced(bytes, from)?;
        }
        Ok(a..b)
    }

    /// Whether `text` ends in a bare word (so `(` after it is a call).
    pub(super) fn is_call_name(&self, text: &str) -> bool {
        text.bytes()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
    }

    /// The source range of an expression, checked: its text parses back to
    /// the same expression (sqlparser's spans are not always whole).
    /// A span may also start late (after a NOT, a minus or `CAST(`): up to
    /// four tokens before it are tried, nearest first.
    pub(super) fn expr_range(&self, e: &Expr) -> R<Range<usize>> {
        let s = e.span();
        let (mut a, b) = (self.offset(s.start)?, self.offset(s.end)?);
        if a >= b {
            return Err("an expression without a source position".into());
        }
        let want = e.to_string();
        let bytes = self.sql.as_bytes();
        let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        // Ends: the span's, then up to three words after it (`IS NOT NULL`).
        let mut ends = vec![b];
        let mut j = b;
        for _ in 0..3 {
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            if j >= bytes.len() || !word(bytes[j]) {
                break;
            }
            while j < bytes.len() && word(bytes[j]) {
                j += 1;
            }
            ends.push(j);
        }
        for _ in 0..5 {
            for &b in &ends {
                if let Ok(r) = self.extend(a, b) {
                    let back = Parser::new(&SQLiteDialect {})
                        .try_with_sql(&self.sql[r.clone()])
                        .and_then(|mut p| p.parse_expr());
                    if back.is_ok_and(|x| x.to_string() == want) {
                        return Ok(r);
                    }
                }
            }
            // One token back.
            let mut i = a;
            while i > 0 && bytes[i - 1].is_ascii_whitespace() {
                i -= 1;
            }
            if i == 0 {
                break;
            }
            if word(bytes[i - 1]) {
                while i > 0 && word(bytes[i - 1]) {
                    i -= 1;
                }
            } else {
                i -= 1;
            }
            a = i;
        }
        Err("an expression whose source text is not whole".into())
    }

    pub(super) fn text(&self, e: &Expr) -> R<&'a str> {
        let r = self.expr_range(e)?;
        Ok(&self.sql[r])
    }
}

/// Whether every quoted identifier (`"…"`, `[…]`, `` `…` ``) of `sql` is a
/// plain word.
pub(super) fn quoted_names_are_words(sql: &str) -> bool {
    let b = sql.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\'' => match skip_quoted(b, i, b'\'') {
                Ok(j) => i = j,
                Err(_) => return false,
            },
            q @ (b'"' | b'`' | b'[') => {
                let close = if q == b'[' { b']' } else { q };
                let Ok(j) = skip_quoted(b, i, close) else {
                    return false;
                };
                let inner = &b[i + 1..j - 1];
                if inner.is_empty()
                    || !inner
                        .iter()
                        .all(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    return false;
                }
                i = j;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            _ => i += 1,
        }
    }
    true
}

/// The byte after the quoted text that starts at `i` (quote `q`; `[` ends at
/// `]`); a doubled quote stays inside.
pub(super) fn skip_quoted(b: &[u8], i: usize, q: u8) -> R<usize> {
    let mut j = i + 1;
    while j < b.len() {
        if b[j] == q {
            if q != b']' && b.get(j + 1) == Some(&q) {
                j += 2;
                continue;
            }
            return Ok(j + 1);
        }
        j += 1;
    }
    Err("an unterminated quote".into())
}

/// The byte after the parenthesised group that starts at `i`.
pub(super) fn balanced(b: &[u8], i: usize) -> R<usize> {
    let mut open = 0usize;
    let mut j = i;
    while j < b.len() {
        j = match b[j] {
            b'(' => {
                open += 1;
                j + 1
            }
            b')' => {
                open -= 1;
                if open == 0 {
                    return Ok(j + 1);
                }
                j + 1
            }
            q @ (b'\'' | b'"' | b'`') => skip_quoted(b, j, q)?,
            b'[' => skip_quoted(b, j, b']')?,
            _ => j + 1,
        };
    }
    Err("unbalanced parentheses".into())
}

pub(super) fn line_starts(sql: &str) -> Vec<usize> {
    let mut v = vec![0];
    for (i, b) in sql.bytes().enumerate() {
        if b == b'\n' {
            v.push(i + 1);
        }
    }
    v
}
