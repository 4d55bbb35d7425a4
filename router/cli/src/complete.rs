//! Where a statement ends. The `sqlite3` shell asks SQLite itself
//! (`sqlite3_complete`), which knows about quotes, comments and the `;`
//! inside CREATE TRIGGER bodies; so do we. This is the program's only FFI.

use std::ffi::CString;
use std::ops::Range;

use pleroma::rusqlite::ffi;

/// Whether `sql` ends with a complete statement (a `;` outside quotes,
/// comments and trigger bodies).
pub(crate) fn is_complete(sql: &str) -> bool {
    let Ok(c) = CString::new(sql) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call;
    // sqlite3_complete only reads it and needs no connection.
    unsafe { ffi::sqlite3_complete(c.as_ptr()) != 0 }
}

/// The byte ranges of the statements in `sql`, each without its `;`.
/// Pieces holding only whitespace and comments are skipped, as SQLite skips
/// them.
pub(crate) fn statements(sql: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in sql.match_indices(';') {
        if is_complete(&sql[start..=i]) {
            push(&mut out, sql, start..i);
            start = i + 1;
        }
    }
    push(&mut out, sql, start..sql.len());
    out
}

fn push(out: &mut Vec<Range<usize>>, sql: &str, r: Range<usize>) {
    let piece = &sql[r.clone()];
    if has_code(piece) {
        let lead = piece.len() - piece.trim_start().len();
        let trail = piece.len() - piece.trim_end().len();
        out.push(r.start + lead..r.end - trail);
    }
}

/// Whether `text` is only whitespace and finished comments: the shell drops
/// such lines instead of waiting for a `;` after them.
pub(crate) fn is_blank(text: &str) -> bool {
    // Inside an open `/* ...` the `;` is no terminator: not complete.
    !has_code(text) && is_complete(&format!("{text}\n;"))
}

/// Whether `piece` holds anything but whitespace and comments.
fn has_code(piece: &str) -> bool {
    let b = piece.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            c if c.is_ascii_whitespace() => i += 1,
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
            _ => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(sql: &str) -> Vec<&str> {
        statements(sql).into_iter().map(|r| &sql[r]).collect()
    }

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
        let sql = "SELECT 'x;y'; -- c;\nCREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM t; END;\n SELECT 2 ";
        let v = texts(sql);
        assert_eq!(v.len(), 3, "{v:?}");
        assert_eq!(v[0], "SELECT 'x;y'");
        assert!(v[1].starts_with("-- c;\nCREATE TRIGGER") && v[1].ends_with("END"));
        assert_eq!(v[2], "SELECT 2");
    }

    #[test]
    fn whitespace_and_closed_comments_are_blank() {
        assert!(is_blank("  -- note"));
        assert!(is_blank("/* a */ "));
        assert!(!is_blank("/* open"));
        assert!(!is_blank("SELECT"));
    }

    #[test]
    fn skips_pieces_of_only_comments() {
        assert!(texts(" ; -- x\n ;/* y */").is_empty());
    }
}
