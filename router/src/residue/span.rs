//! Spans: byte positions of the statement's text, and the source text of
//! the expressions the rewrite replaces.
//!
//! Exact because every range it gives back is checked against the parse:
//! the tokens of an expression's text (as `crate::tokenize` reads them,
//! SQLite's way) must be the tokens of the expression as sqlparser prints
//! it, and a position the parser does not give declines the statement
//! instead of being guessed.

use std::fmt::Display;
use std::ops::Range;

use sqlparser::ast::{Expr, Spanned};
use sqlparser::tokenizer::Location;

use super::walker::Walker;
use super::R;
use crate::tokenize::{self, Kind, Token};

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

    /// The source range of an expression (or a name), found by the
    /// tokenizer: the run of the statement's tokens that are the tokens of
    /// the expression as sqlparser prints it. sqlparser's spans are not
    /// whole (they stop short of a call's closing parenthesis, of `(*)`,
    /// FILTER, OVER and `IS NOT NULL`, and may start after a NOT, a minus or
    /// `CAST(`), so the span only anchors the search: the run must cover the
    /// span's first token and reach its end, and may start up to four tokens
    /// before it, nearest first. The same tokens parse to the same
    /// expression, so the range's text is the expression's.
    pub(super) fn expr_range<T: Spanned + Display>(&self, e: &T) -> R<Range<usize>> {
        let s = e.span();
        let (a, b) = (self.offset(s.start)?, self.offset(s.end)?);
        if a >= b {
            return Err("an expression without a source position".into());
        }
        let printed = e.to_string();
        let want = normal(&printed);
        let toks = &self.normal;
        let first = toks.partition_point(|(_, t)| self.toks[*t].start < a);
        let n = want.len();
        for back in 0..5 {
            let Some(i) = first.checked_sub(back) else {
                break;
            };
            let Some(run) = toks.get(i..i + n) else {
                continue;
            };
            // Whole source tokens only (ISNULL is two words when printed).
            let (t0, t1) = (run[0].1, run[n - 1].1);
            let whole =
                (i == 0 || toks[i - 1].1 != t0) && toks.get(i + n).is_none_or(|(_, t)| *t != t1);
            let last = &self.toks[t1];
            if whole
                && i + n > first
                && last.start + last.text.len() >= b
                && run.iter().map(|(w, _)| w).eq(want.iter())
            {
                return Ok(self.toks[t0].start..last.start + last.text.len());
            }
        }
        Err("an expression whose source text is not whole".into())
    }

    pub(super) fn text(&self, e: &Expr) -> R<&'a str> {
        let r = self.expr_range(e)?;
        Ok(&self.sql[r])
    }
}

/// Whether every quoted identifier (`"…"`, `[…]`, `` `…` ``) of `sql` is a
/// plain word (and no quote is left open).
pub(super) fn quoted_names_are_words(sql: &str) -> bool {
    tokenize::tokens(sql).all(|t| match t.kind {
        Kind::Quoted => {
            let inner = &t.text[1..t.text.len() - 1];
            !inner.is_empty()
                && inner
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_')
        }
        Kind::Illegal => false,
        _ => true,
    })
}

/// Whether a name of `sql` spells Pleroma's own (`pleroma$…`, which the
/// rewrite binds), or `sql` has a COLLATE (the exactness argument holds for
/// BINARY comparisons only: `docs/design.md`, "The residue").
pub(super) fn names_pleroma_or_collate(sql: &str) -> bool {
    tokenize::code(sql).any(|t| match t.kind {
        Kind::Word | Kind::Quoted | Kind::Variable => {
            t.is("collate") || t.text.to_ascii_lowercase().contains("pleroma$")
        }
        _ => false,
    })
}

/// The statement's code tokens as compared with the text sqlparser prints,
/// each with the index of the token it comes from: words and blobs without
/// case, `==` as `=`, `!=` as `<>`, `ISNULL` and `NOTNULL` as the words
/// sqlparser prints for them.
pub(super) fn normal_tokens(toks: &[Token]) -> Vec<(String, usize)> {
    let mut out = Vec::with_capacity(toks.len());
    for (i, t) in toks.iter().enumerate() {
        for w in normal_token(t) {
            out.push((w, i));
        }
    }
    out
}

/// The normal form of a printed text's tokens.
fn normal(text: &str) -> Vec<String> {
    tokenize::code(text)
        .flat_map(|t| normal_token(&t))
        .collect()
}

fn normal_token(t: &Token) -> Vec<String> {
    match t.kind {
        Kind::Word if t.is("isnull") => vec!["IS".into(), "NULL".into()],
        Kind::Word if t.is("notnull") => vec!["IS".into(), "NOT".into(), "NULL".into()],
        Kind::Word | Kind::Blob => vec![t.text.to_ascii_uppercase()],
        Kind::Punct if t.text == "==" => vec!["=".into()],
        Kind::Punct if t.text == "!=" => vec!["<>".into()],
        _ => vec![t.text.to_owned()],
    }
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
