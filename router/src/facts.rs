//! What a statement's text says before SQLite compiles it, read once per
//! text. Every statement passes a dozen questions on its way (is it a
//! PRAGMA, a transaction's end, a VACUUM of which schema, a transfer, one
//! that sets `changes()` …), each a walk of its first tokens; a batch
//! INSERT of a million rows asked them a million times (issue 21's
//! profile: a third of the `engine` arm's cost over plain SQLite). The
//! answers depend on the text alone, never on the schema, so a text keeps
//! them as long as the connection remembers it.

use std::sync::Arc;

use ahash::AHashMap;

use crate::tokenize;
use crate::txn::{self, StmtKind};

/// The answers for one text.
#[derive(Debug)]
pub(crate) struct Facts {
    /// Its effect on the transaction state.
    pub kind: StmtKind,
    /// `PRAGMA …`.
    pub pragma: bool,
    /// `PRAGMA pleroma_…`: one of Pleroma's own.
    pub pleroma_pragma: bool,
    /// A PRAGMA or an EXPLAIN: SQLite sets `count_changes` when it compiles
    /// one.
    pub may_set_flags: bool,
    /// `PRAGMA [schema.]full_column_names` or `short_column_names`.
    pub names_columns: bool,
    /// The schema a `VACUUM` compacts (`VACUUM INTO` compacts none).
    pub vacuum_of: Option<String>,
    /// `ALTER TABLE …`.
    pub alter: bool,
    /// `INSERT INTO … SELECT * FROM …`, which SQLite may run as a transfer.
    pub may_transfer: bool,
    /// An INSERT, REPLACE, UPDATE or DELETE (also after WITH): its end sets
    /// `changes()` when it writes.
    pub sets_changes: bool,
    /// VACUUM, ATTACH, DETACH or a PRAGMA: never wrapped in Pleroma's own
    /// transaction (SQLite refuses some of them in one).
    pub not_wrapped: bool,
}

impl Facts {
    pub(crate) fn of(sql: &str) -> Facts {
        let first = tokenize::first(sql);
        let is = |w: &str| first.is_some_and(|t| t.is(w));
        let pragma = is("PRAGMA");
        Facts {
            kind: txn::kind_of(sql),
            pragma,
            pleroma_pragma: pragma && crate::pragma::parse(sql).is_some(),
            may_set_flags: pragma || is("EXPLAIN"),
            names_columns: pragma && names_columns(sql),
            vacuum_of: txn::vacuum_schema(sql),
            alter: is("ALTER"),
            may_transfer: crate::txn_guards::may_transfer(sql),
            sets_changes: ["INSERT", "REPLACE", "UPDATE", "DELETE", "WITH"]
                .iter()
                .any(|w| is(w)),
            not_wrapped: ["VACUUM", "ATTACH", "DETACH", "PRAGMA"]
                .iter()
                .any(|w| is(w)),
        }
    }
}

/// `PRAGMA [schema.]full_column_names` or `short_column_names`, which
/// change the names SQLite gives result columns at prepare.
fn names_columns(sql: &str) -> bool {
    let mut words = tokenize::code(sql);
    words.next().is_some_and(|t| t.is("PRAGMA"))
        && words.take(3).any(|t| {
            let v = t.value();
            v.eq_ignore_ascii_case("full_column_names")
                || v.eq_ignore_ascii_case("short_column_names")
        })
}

/// Texts whose facts a connection keeps (all of them go when it is full).
const CAPACITY: usize = 4096;

/// A connection's facts, by text.
#[derive(Default)]
pub(crate) struct FactsCache(AHashMap<Box<str>, Arc<Facts>>);

impl FactsCache {
    pub(crate) fn get(&mut self, sql: &str) -> Arc<Facts> {
        if let Some(f) = self.0.get(sql) {
            return f.clone();
        }
        if self.0.len() >= CAPACITY {
            self.0.clear();
        }
        let f = Arc::new(Facts::of(sql));
        self.0.insert(sql.into(), f.clone());
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_words_as_sqlite_does() {
        let f = Facts::of("/* x */ PRAGMA main.full_column_names = 1");
        assert!(f.pragma && f.may_set_flags && f.names_columns && f.not_wrapped);
        assert!(!f.pleroma_pragma && !f.sets_changes);
        let f = Facts::of("PRAGMA pleroma_planes");
        assert!(f.pleroma_pragma && !f.names_columns);
        let f = Facts::of("-- c\n explain query plan select 1");
        assert!(f.may_set_flags && !f.pragma);
        let f = Facts::of("vacuum \"aux\"");
        assert_eq!(f.vacuum_of.as_deref(), Some("aux"));
        assert_eq!(f.kind, StmtKind::Schema);
        assert!(f.not_wrapped);
        assert_eq!(Facts::of("VACUUM INTO 'x.db'").vacuum_of, None);
        let f = Facts::of("WITH a AS (SELECT 1) INSERT INTO t SELECT * FROM a");
        assert!(f.sets_changes && !f.alter);
        let f = Facts::of("INSERT INTO b SELECT * FROM a");
        assert!(f.may_transfer && f.sets_changes && f.kind == StmtKind::Other);
        assert!(Facts::of(" Alter TABLE t ADD c").alter);
        // A keyword inside a string or a comment is no keyword.
        let f = Facts::of("SELECT 'PRAGMA' /* INSERT */");
        assert!(!f.pragma && !f.sets_changes && !f.may_set_flags);
        assert_eq!(
            Facts::of("release \"s 1\"").kind,
            StmtKind::Release("s 1".into())
        );
    }

    #[test]
    fn a_text_is_read_once() {
        let mut c = FactsCache::default();
        let a = c.get("INSERT INTO t VALUES (1)");
        let b = c.get("INSERT INTO t VALUES (1)");
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c.get("INSERT INTO t VALUES (2)")));
    }
}
