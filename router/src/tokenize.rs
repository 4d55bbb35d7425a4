//! SQL text as SQLite's tokenizer reads it (`tokenize.c`,
//! `sqlite3GetToken`, of the bundled SQLite pinned in `docs/COMPAT.md`).
//!
//! Every place in Pleroma that looks at the words of a statement (its first
//! keyword, a savepoint name, whether a piece holds any code at all) reads
//! them through [`tokens`], so a comment, a quoted name or a string literal
//! means there what it means to SQLite. The parser (`sqlparser`) reads the
//! statements the router answers; this is for the words it reads before
//! deciding how to run one.
//!
//! The rules, as in `tokenize.c`:
//! - whitespace is `' '`, `\t`, `\n`, `\v`, `\f`, `\r`;
//! - `--` runs to the end of the line, `/*` to `*/` or the end of the text;
//! - `'…'` is a string, `"…"`, `` `…` `` and `[…]` are identifiers, a
//!   doubled quote stands for itself (not in `[…]`); an unterminated one is
//!   illegal to the end of the text;
//! - `x'…'` is a blob literal (an even number of hex digits);
//! - numbers: decimal or `0x` hex, `_` between digits, a fraction, an
//!   exponent; identifier characters right after a number make it illegal;
//! - `?NNN`, `:name`, `@name`, `#name`, `$name` (with Tcl's `::` and `(…)`)
//!   are variables;
//! - identifiers start with a letter, `_` or any byte ≥ 0x80, and go on with
//!   those, digits and `$`;
//! - operators of one to three characters; anything else is one illegal byte.

use std::borrow::Cow;

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Whitespace.
    Space,
    /// `-- …` or `/* … */`.
    Comment,
    /// A bare identifier or keyword (SQLite decides which by context).
    Word,
    /// `"…"`, `` `…` `` or `[…]`.
    Quoted,
    /// `'…'`.
    String,
    /// `x'…'`.
    Blob,
    /// An integer or real literal.
    Number,
    /// `?`, `?NNN`, `:a`, `@a`, `#a`, `$a`.
    Variable,
    /// `;`.
    Semi,
    /// An operator or punctuation: `(`, `)`, `,`, `.`, `||`, `->>`, …
    Punct,
    /// What SQLite's tokenizer calls `TK_ILLEGAL`.
    Illegal,
}

/// One token: its kind and its text in the statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token<'a> {
    pub kind: Kind,
    pub text: &'a str,
    /// Byte offset of the token in the text.
    pub start: usize,
}

impl<'a> Token<'a> {
    /// Whether this is the bare word `kw` (keywords compare without case).
    pub fn is(&self, kw: &str) -> bool {
        self.kind == Kind::Word && self.text.eq_ignore_ascii_case(kw)
    }

    /// Whitespace or a comment: what SQLite skips.
    pub fn is_blank(&self) -> bool {
        matches!(self.kind, Kind::Space | Kind::Comment)
    }

    /// A name's value: a bare word as written, a quoted identifier or a
    /// string without its quotes (a doubled quote as one). Other tokens:
    /// their text.
    pub fn value(&self) -> Cow<'a, str> {
        let t = self.text;
        match self.kind {
            Kind::Quoted if t.starts_with('[') => Cow::Borrowed(&t[1..t.len() - 1]),
            Kind::Quoted | Kind::String => {
                let q = &t[..1];
                let inner = &t[1..t.len() - 1];
                let doubled = format!("{q}{q}");
                if inner.contains(&doubled) {
                    Cow::Owned(inner.replace(&doubled, q))
                } else {
                    Cow::Borrowed(inner)
                }
            }
            _ => Cow::Borrowed(t),
        }
    }
}

/// Every token of `sql`, whitespace and comments included; concatenated,
/// their texts give `sql` back.
pub fn tokens(sql: &str) -> Tokens<'_> {
    Tokens { sql, i: 0 }
}

/// The tokens of `sql` that SQLite does not skip (no whitespace, no
/// comments).
pub fn code(sql: &str) -> impl Iterator<Item = Token<'_>> {
    tokens(sql).filter(|t| !t.is_blank())
}

/// The statement's first token that is not whitespace, a comment or a `;`.
pub fn first(sql: &str) -> Option<Token<'_>> {
    code(sql).find(|t| t.kind != Kind::Semi)
}

/// Whether the statement's first word is the keyword `kw`.
pub fn starts_with_keyword(sql: &str, kw: &str) -> bool {
    first(sql).is_some_and(|t| t.is(kw))
}

/// Whether `sql` holds anything but whitespace and comments.
pub fn has_code(sql: &str) -> bool {
    code(sql).next().is_some()
}

/// Whether `sql` has `ORDER BY` outside all parentheses: the words as
/// SQLite reads them (not inside a comment, a string or a quoted name, and
/// not a subquery's or a window's `ORDER BY`), so the rows of its answer
/// come in a fixed order.
pub fn orders_rows(sql: &str) -> bool {
    let mut depth = 0usize;
    let mut after_order = false;
    for t in code(sql) {
        let order = depth == 0 && t.is("ORDER");
        if after_order && depth == 0 && t.is("BY") {
            return true;
        }
        match t.text {
            "(" if t.kind == Kind::Punct => depth += 1,
            ")" if t.kind == Kind::Punct => depth = depth.saturating_sub(1),
            _ => {}
        }
        after_order = order;
    }
    false
}

/// The byte offsets just after each `;` that ends a statement in `sql`, as
/// `sqlite3_complete` (`complete.c`) decides: the `;` is outside quotes and
/// comments, and a statement that begins `CREATE [TEMP] TRIGGER` (after an
/// optional `EXPLAIN …`) ends only at a `;` after `END` after a `;`, so the
/// `;`s of its body do not end it. Each text up to and including an end is
/// complete; a text with an unterminated quote or comment has no end after
/// its start. A NUL byte ends the text, as it does for SQLite's C API.
///
/// `complete.c` splits a text a little differently from `tokenize.c`: its
/// words are every run of identifier characters (so `1.end` holds the word
/// `end` and `$a(b;c)` a `;`), `\v` is no whitespace, and a variable or an
/// operator is one character at a time. The quotes, comments, whitespace
/// and operators are read by [`tokens`]' rules; only the words and the
/// single characters are cut as `complete.c` cuts them.
pub fn statement_ends(sql: &str) -> Vec<usize> {
    let z = sql.as_bytes();
    let z = &z[..z.iter().position(|&c| c == 0).unwrap_or(z.len())];
    let mut ends = Vec::new();
    let mut state = 0;
    let mut i = 0;
    while i < z.len() {
        let Some((class, len)) = complete_token(&z[i..]) else {
            break;
        };
        i += len;
        state = COMPLETE_STEP[state][class as usize];
        if class == Complete::Semi && state == 1 {
            ends.push(i);
        }
    }
    ends
}

/// The tokens `sqlite3_complete` tells apart.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Complete {
    Semi,
    Space,
    Other,
    Explain,
    Create,
    Temp,
    Trigger,
    End,
}

/// `complete.c`'s `trans`: the next state by the state (0 nothing yet,
/// 1 at a statement's start, 2 in a statement, 3 after EXPLAIN, 4 after
/// CREATE, 5 in a trigger, 6 after a `;` in a trigger, 7 after its `;END`)
/// and the token (the order of [`Complete`]).
const COMPLETE_STEP: [[usize; 8]; 8] = [
    [1, 0, 2, 3, 4, 2, 2, 2],
    [1, 1, 2, 3, 4, 2, 2, 2],
    [1, 2, 2, 2, 2, 2, 2, 2],
    [1, 3, 3, 2, 4, 2, 2, 2],
    [1, 4, 2, 2, 2, 4, 5, 2],
    [6, 5, 5, 5, 5, 5, 5, 5],
    [6, 6, 5, 5, 5, 5, 5, 7],
    [1, 7, 5, 5, 5, 5, 5, 5],
];

/// The `sqlite3_complete` token at the start of `z` (non-empty) and its
/// length; `None` for an unterminated quote or comment, after which
/// `complete.c` reads no further.
fn complete_token(z: &[u8]) -> Option<(Complete, usize)> {
    if id_char(z[0]) {
        let n = z.iter().take_while(|&&c| id_char(c)).count();
        let word = &z[..n];
        let class = [
            ("create", Complete::Create),
            ("trigger", Complete::Trigger),
            ("temp", Complete::Temp),
            ("temporary", Complete::Temp),
            ("end", Complete::End),
            ("explain", Complete::Explain),
        ]
        .into_iter()
        .find(|(kw, _)| word.eq_ignore_ascii_case(kw.as_bytes()))
        .map_or(Complete::Other, |(_, class)| class);
        return Some((class, n));
    }
    let (kind, len) = token(z);
    let text = &z[..len];
    Some(match kind {
        // `\v` is whitespace to `tokenize.c`, not to `complete.c`.
        Kind::Space if z[0] == 0x0b => (Complete::Other, 1),
        Kind::Space => (
            Complete::Space,
            text.iter().position(|&c| c == 0x0b).unwrap_or(len),
        ),
        // A `--` comment ends before its newline; one that runs to the end
        // of the text is unterminated to `complete.c`.
        Kind::Comment if text.starts_with(b"--") && len < z.len() => (Complete::Space, len),
        Kind::Comment if len >= 4 && text.ends_with(b"*/") && text.starts_with(b"/*") => {
            (Complete::Space, len)
        }
        Kind::Comment => return None,
        // Unterminated `'…`, `"…`, `` `… `` or `[…`.
        Kind::Illegal if matches!(z[0], b'\'' | b'"' | b'`' | b'[') => return None,
        Kind::Semi => (Complete::Semi, 1),
        Kind::String | Kind::Quoted | Kind::Punct => (Complete::Other, len),
        // A variable's sigil, a number's leading `.`, an illegal byte: one
        // character (what follows is read on its own).
        _ => (Complete::Other, 1),
    })
}

/// The iterator of [`tokens`].
pub struct Tokens<'a> {
    sql: &'a str,
    i: usize,
}

impl<'a> Iterator for Tokens<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        let rest = &self.sql.as_bytes()[self.i..];
        if rest.is_empty() {
            return None;
        }
        let (kind, len) = token(rest);
        // Every token ends before an ASCII byte or at the end of the text
        // (bytes ≥ 0x80 only occur inside identifiers, quotes and
        // comments), so the slice is on a character boundary.
        let start = self.i;
        self.i += len;
        Some(Token {
            kind,
            text: &self.sql[start..self.i],
            start,
        })
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// SQLite's `IdChar`: what an identifier goes on with.
fn id_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

/// The kind and byte length of the token at the start of `z` (non-empty).
fn token(z: &[u8]) -> (Kind, usize) {
    let at = |i: usize| z.get(i).copied().unwrap_or(0);
    let c = z[0];
    match c {
        _ if is_space(c) => {
            let n = z.iter().take_while(|&&c| is_space(c)).count();
            (Kind::Space, n)
        }
        b'-' if at(1) == b'-' => {
            let n = z.iter().position(|&c| c == b'\n').unwrap_or(z.len());
            (Kind::Comment, n)
        }
        b'-' if at(1) == b'>' => (Kind::Punct, if at(2) == b'>' { 3 } else { 2 }),
        b'/' if at(1) == b'*' => {
            let n = z[2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(z.len(), |p| p + 4);
            (Kind::Comment, n)
        }
        b';' => (Kind::Semi, 1),
        b'(' | b')' | b'+' | b'*' | b'%' | b',' | b'&' | b'~' | b'-' | b'/' => (Kind::Punct, 1),
        b'=' => (Kind::Punct, if at(1) == b'=' { 2 } else { 1 }),
        b'<' => (
            Kind::Punct,
            if matches!(at(1), b'=' | b'>' | b'<') {
                2
            } else {
                1
            },
        ),
        b'>' => (
            Kind::Punct,
            if matches!(at(1), b'=' | b'>') { 2 } else { 1 },
        ),
        b'!' if at(1) == b'=' => (Kind::Punct, 2),
        b'!' => (Kind::Illegal, 1),
        b'|' => (Kind::Punct, if at(1) == b'|' { 2 } else { 1 }),
        b'\'' | b'"' | b'`' => {
            let mut i = 1;
            while i < z.len() {
                if z[i] == c {
                    if at(i + 1) == c {
                        i += 2;
                        continue;
                    }
                    let kind = if c == b'\'' {
                        Kind::String
                    } else {
                        Kind::Quoted
                    };
                    return (kind, i + 1);
                }
                i += 1;
            }
            (Kind::Illegal, z.len())
        }
        b'[' => match z.iter().position(|&c| c == b']') {
            Some(p) => (Kind::Quoted, p + 1),
            None => (Kind::Illegal, z.len()),
        },
        b'.' if !at(1).is_ascii_digit() => (Kind::Punct, 1),
        b'.' | b'0'..=b'9' => number(z),
        b'?' => (
            Kind::Variable,
            1 + z[1..].iter().take_while(|c| c.is_ascii_digit()).count(),
        ),
        b'$' | b'@' | b':' | b'#' => variable(z),
        b'x' | b'X' if at(1) == b'\'' => {
            let digits = z[2..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
            if at(2 + digits) == b'\'' && digits % 2 == 0 {
                (Kind::Blob, digits + 3)
            } else {
                // As SQLite: illegal up to the closing quote, or to the end.
                let n = z[2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map_or(z.len(), |p| p + 3);
                (Kind::Illegal, n)
            }
        }
        _ if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 => {
            (Kind::Word, z.iter().take_while(|&&c| id_char(c)).count())
        }
        _ => (Kind::Illegal, 1),
    }
}

/// A numeric literal (SQLite's `CC_DIGIT` case, reached with a digit or a
/// `.` before a digit).
fn number(z: &[u8]) -> (Kind, usize) {
    let at = |i: usize| z.get(i).copied().unwrap_or(0);
    let run = |mut i: usize, digit: fn(&u8) -> bool| {
        while digit(&at(i)) || at(i) == b'_' {
            i += 1;
        }
        i
    };
    let mut i;
    if z[0] == b'0' && matches!(at(1), b'x' | b'X') && at(2).is_ascii_hexdigit() {
        i = run(3, u8::is_ascii_hexdigit);
    } else {
        i = run(0, u8::is_ascii_digit);
        if at(i) == b'.' {
            i = run(i + 1, u8::is_ascii_digit);
        }
        if matches!(at(i), b'e' | b'E')
            && (at(i + 1).is_ascii_digit()
                || (matches!(at(i + 1), b'+' | b'-') && at(i + 2).is_ascii_digit()))
        {
            i = run(i + 2, u8::is_ascii_digit);
        }
    }
    if id_char(at(i)) {
        while id_char(at(i)) {
            i += 1;
        }
        return (Kind::Illegal, i);
    }
    (Kind::Number, i)
}

/// `:name`, `@name`, `#name`, `$name`, with Tcl's `::` and a `(…)` suffix.
fn variable(z: &[u8]) -> (Kind, usize) {
    let mut n = 0;
    let mut i = 1;
    while i < z.len() {
        let c = z[i];
        if id_char(c) {
            n += 1;
        } else if c == b'(' && n > 0 {
            // `$a(…)`: to the `)`, which must come before any whitespace.
            i += 1;
            while i < z.len() && z[i] != b')' && !is_space(z[i]) {
                i += 1;
            }
            if i < z.len() && z[i] == b')' {
                return (Kind::Variable, i + 1);
            }
            return (Kind::Illegal, i);
        } else if c == b':' && z.get(i + 1) == Some(&b':') {
            i += 1;
        } else {
            break;
        }
        i += 1;
    }
    if n == 0 {
        (Kind::Illegal, i)
    } else {
        (Kind::Variable, i)
    }
}

/// `ident` as a quoted SQL identifier: `"a""b"` for `a"b`.
pub(crate) fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(sql: &str) -> Vec<(Kind, &str)> {
        code(sql).map(|t| (t.kind, t.text)).collect()
    }

    #[test]
    fn orders_rows_reads_order_by_outside_parentheses() {
        assert!(orders_rows("select a from t order  by a"));
        assert!(orders_rows("SELECT a FROM t ORDER\n/* c */ BY 1"));
        assert!(orders_rows("select a from (select a from t) order by a"));
        assert!(!orders_rows("select a from t"));
        // A subquery's or a window's ORDER BY does not order the answer.
        assert!(!orders_rows("select a from (select a from t order by a)"));
        assert!(!orders_rows("select sum(a) over (order by b) from t"));
        // Not words: a comment, a string, a quoted name.
        assert!(!orders_rows("select a from t -- order by a"));
        assert!(!orders_rows("select 'order by' from t"));
        assert!(!orders_rows("select \"order\" by from t"));
        assert!(!orders_rows("select a from t /* order by a */"));
    }

    #[test]
    fn texts_give_the_statement_back() {
        let sql = "/* a */ SELECT x'00', \"q\"\"\", [b c], 'it''s', 1_000.5e-3, ?7, :n, $a::b(c) -- end\n;";
        let joined: String = tokens(sql).map(|t| t.text).collect();
        assert_eq!(joined, sql);
    }

    #[test]
    fn comments_and_quotes_are_what_sqlite_skips_and_reads() {
        assert_eq!(
            first("/* nightly */ VACUUM").map(|t| t.text),
            Some("VACUUM")
        );
        assert_eq!(
            first("-- x\n  ;; pragma journal_mode").map(|t| t.text),
            Some("pragma")
        );
        assert!(starts_with_keyword(
            "\n/**/--\nAlter table t add c",
            "ALTER"
        ));
        assert!(!starts_with_keyword("\"ALTER\"", "ALTER"));
        assert!(!has_code(" -- only\n /* comments */ "));
        assert!(!has_code("/* unterminated ; SELECT 1"));
        assert!(has_code("/**/ 1"));
        let v: Vec<_> = code("SAVEPOINT \"a\"\"b\"; RELEASE [x y]; 'it''s'")
            .map(|t| t.value().into_owned())
            .collect();
        assert_eq!(v, ["SAVEPOINT", "a\"b", ";", "RELEASE", "x y", ";", "it's"]);
    }

    #[test]
    fn numbers_operators_and_illegal_bytes() {
        assert_eq!(
            kinds("a->>'$.x' <> .5 0x1F 1e 3abc !"),
            [
                (Kind::Word, "a"),
                (Kind::Punct, "->>"),
                (Kind::String, "'$.x'"),
                (Kind::Punct, "<>"),
                (Kind::Number, ".5"),
                (Kind::Number, "0x1F"),
                (Kind::Illegal, "1e"),
                (Kind::Illegal, "3abc"),
                (Kind::Illegal, "!"),
            ]
        );
        assert_eq!(
            kinds("x'0A' X'1' 'open"),
            [
                (Kind::Blob, "x'0A'"),
                (Kind::Illegal, "X'1'"),
                (Kind::Illegal, "'open"),
            ]
        );
        assert_eq!(
            kinds("ünï_$1 @ ?"),
            [
                (Kind::Word, "ünï_$1"),
                (Kind::Illegal, "@"),
                (Kind::Variable, "?"),
            ]
        );
    }
    #[test]
    fn statement_ends_are_where_sqlite3_complete_says() {
        use proptest::prelude::Rng;
        use proptest::test_runner::{RngAlgorithm, TestRng};
        const FRAGMENTS: &[&str] = &[
            ";",
            ";",
            ";",
            " ",
            "\n",
            "\t",
            "\x0b",
            "'a;b'",
            "\"x;\"",
            "[y;]",
            "`z;`",
            "-- c;\n",
            "--",
            "/* d; */",
            "/*",
            "*/",
            "x'0A'",
            "x'",
            "?1",
            ":p",
            "$a(b;c)",
            "1.end",
            ":create",
            "@end",
            "é",
            "'",
            "\"",
            "[",
            "`",
            "(",
            ")",
            "-",
            "/",
            "CREATE TRIGGER tr AFTER INSERT ON t BEGIN",
            "CREATE",
            "TEMP",
            "temporary",
            "trigger",
            "EXPLAIN",
            "END",
            "end",
            "SELECT 1",
            "x",
            "\0",
        ];
        let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
        let mut ends_seen = 0;
        for _ in 0..100_000 {
            let n = rng.next_u64() % 16;
            let sql: String = (0..n)
                .map(|_| FRAGMENTS[(rng.next_u64() % FRAGMENTS.len() as u64) as usize])
                .collect();
            let ends = statement_ends(&sql);
            for &e in &ends {
                assert_eq!(sql.as_bytes()[e - 1], b';', "{sql:?} {ends:?}");
            }
            for (i, _) in sql.match_indices(';') {
                assert_eq!(
                    crate::ffi::is_complete(&sql[..=i]),
                    ends.contains(&(i + 1)),
                    "{sql:?} up to {i}: {ends:?}"
                );
            }
            ends_seen += ends.len();
        }
        // The texts do end statements, and not at every `;`.
        assert!(ends_seen > 10_000, "{ends_seen}");
    }
}
