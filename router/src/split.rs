//! Split a batch into statements, so that each one takes the router's path
//! (Pleroma's PRAGMAs, which SQLite cannot parse, included).

use crate::ffi::is_complete;

/// The statements of `sql`, each without its trailing `;`. Blank pieces and
/// pieces made only of comments are skipped by SQLite and by us.
pub(crate) fn split_statements(sql: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in sql.match_indices(';') {
        let piece = &sql[start..=i];
        if is_complete(piece) {
            push(&mut out, &sql[start..i]);
            start = i + 1;
        }
    }
    push(&mut out, &sql[start..]);
    out
}

fn push<'a>(out: &mut Vec<&'a str>, piece: &'a str) {
    if has_code(piece) {
        out.push(piece.trim());
    }
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

    #[test]
    fn splits_on_semicolons_outside_quotes_and_triggers() {
        let sql = "CREATE TABLE t(a); INSERT INTO t VALUES ('x;y'); -- c;\n\
                   CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM t; UPDATE t SET a=1; END; SELECT 1";
        let v = split_statements(sql);
        assert_eq!(v.len(), 4, "{v:?}");
        assert_eq!(v[1], "INSERT INTO t VALUES ('x;y')");
        assert!(v[2].starts_with("-- c;\nCREATE TRIGGER") && v[2].ends_with("END"));
        assert_eq!(v[3], "SELECT 1");
    }

    #[test]
    fn skips_empty_and_comment_only_pieces() {
        assert_eq!(split_statements(" ; -- x\n ;/* y */"), Vec::<&str>::new());
    }
}
