//! Where statements end in a text: SQLite's own test (`sqlite3_complete`,
//! the one the `sqlite3` shell uses, read by
//! [`statement_ends`](crate::tokenize::statement_ends)), which knows about
//! quotes, comments and the `;` inside CREATE TRIGGER bodies. Batches are split here so that each
//! statement takes the router's path (Pleroma's PRAGMAs included, which
//! SQLite cannot parse); the `pleroma` shell uses the same functions.

use std::ops::Range;

pub use crate::ffi::is_complete;

/// The byte ranges of the statements in `sql`, each without its `;` and
/// trimmed. Pieces holding only whitespace and comments are skipped, as
/// SQLite skips them.
pub fn statements(sql: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for end in crate::tokenize::statement_ends(sql) {
        push(&mut out, sql, start..end - 1);
        start = end;
    }
    push(&mut out, sql, start..sql.len());
    out
}

/// The statements of `sql` as text (see [`statements`]).
pub(crate) fn split_statements(sql: &str) -> Vec<&str> {
    statements(sql).into_iter().map(|r| &sql[r]).collect()
}

/// Whether `text` is only whitespace and finished comments (a shell drops
/// such lines instead of waiting for a `;` after them).
pub fn is_blank(text: &str) -> bool {
    // Inside an open `/* ...` a `;` is no terminator: not complete.
    !crate::tokenize::has_code(text) && is_complete(format!("{text}\n;"))
}

fn push(out: &mut Vec<Range<usize>>, sql: &str, r: Range<usize>) {
    let piece = &sql[r.clone()];
    if crate::tokenize::has_code(piece) {
        let lead = piece.len() - piece.trim_start().len();
        let trail = piece.len() - piece.trim_end().len();
        out.push(r.start + lead..r.end - trail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_is_complete_only_at_a_semicolon_outside_quotes() {
        assert!(is_complete("SELECT 1;"));
        assert!(!is_complete("SELECT 1"));
        assert!(!is_complete("SELECT ';"));
        assert!(!is_complete(
            "CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM t;"
        ));
    }

    #[test]
    fn splits_on_semicolons_outside_quotes_and_triggers() {
        let sql = "CREATE TABLE t(a); INSERT INTO t VALUES ('x;y'); -- c;\n\
                   CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM t; UPDATE t SET a=1; END; SELECT 1 ";
        let v = split_statements(sql);
        assert_eq!(v.len(), 4, "{v:?}");
        assert_eq!(v[1], "INSERT INTO t VALUES ('x;y')");
        assert!(v[2].starts_with("-- c;\nCREATE TRIGGER") && v[2].ends_with("END"));
        assert_eq!(v[3], "SELECT 1");
    }

    #[test]
    fn semicolons_end_statements_where_sqlite3_complete_says() {
        let sql = "SELECT 1 /* a; */, [b;], `c;`, \"d;\", $e(f;g) -- h;\n; SELECT 2";
        assert_eq!(
            split_statements(sql),
            [
                "SELECT 1 /* a; */, [b;], `c;`, \"d;\", $e(f",
                "g) -- h;",
                "SELECT 2"
            ]
        );
    }

    #[test]
    fn skips_empty_and_comment_only_pieces() {
        assert_eq!(split_statements(" ; -- x\n ;/* y */"), Vec::<&str>::new());
    }

    #[test]
    fn whitespace_and_closed_comments_are_blank() {
        assert!(is_blank("  -- note"));
        assert!(is_blank("/* a */ "));
        assert!(!is_blank("/* open"));
        assert!(!is_blank("SELECT"));
    }
}
