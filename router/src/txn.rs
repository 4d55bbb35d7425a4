//! Transaction bookkeeping: which plane snapshot to go back to when SQLite
//! undoes work without telling the hook.

use crate::planes::Snapshots;
use crate::tokenize;

/// What a statement does to the transaction state, read from its first words.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StmtKind {
    Begin,
    Commit,
    Rollback,
    Savepoint(String),
    Release(String),
    RollbackTo(String),
    /// CREATE, DROP, ALTER, VACUUM, ATTACH, DETACH, REINDEX.
    Schema,
    Other,
}

impl StmtKind {
    pub fn is_schema_change(&self) -> bool {
        matches!(self, StmtKind::Schema)
    }
}

/// The snapshots of an open transaction: at its start, and per savepoint.
#[derive(Default)]
pub(crate) struct TxnState {
    pub base: Option<Snapshots>,
    pub saves: Vec<(String, Snapshots)>,
    /// The planes were rebuilt inside this transaction (another connection
    /// had committed): the snapshots above predate that commit, so undoing
    /// to them means rebuilding instead.
    pub stale: bool,
    /// A schema statement ran inside this transaction: undoing it changes
    /// what statement texts mean, so cached classifications go.
    pub schema_changed: bool,
    /// The guards of main are out of the schema for the rest of this
    /// transaction (`txn_guards.rs`, or before an ALTER TABLE); its state
    /// row puts them back.
    pub guards_out: bool,
    /// Per statement text, whether the guards would change what it keeps
    /// (`txn_guards::guards_matter`); forgotten after a schema statement, a
    /// PRAGMA or a `ROLLBACK TO`.
    pub guards_matter: std::collections::HashMap<String, bool>,
    /// What can make a write fail part-way without a halt here
    /// (`txn_guards::Unhalted`); `None` until asked, and again when the
    /// verdicts above are forgotten.
    pub unhalted: Option<crate::txn_guards::Unhalted>,
    /// The transaction was opened by BEGIN, so no RELEASE ends it.
    pub by_begin: bool,
}

impl TxnState {
    pub fn clear(&mut self) {
        self.base = None;
        self.saves.clear();
        self.stale = false;
        self.schema_changed = false;
        self.guards_out = false;
        self.guards_matter.clear();
        self.unhalted = None;
        self.by_begin = false;
    }

    /// Whether `RELEASE name` may end the transaction: it was opened by
    /// SAVEPOINT and `name` is its first savepoint, or a savepoint this
    /// state does not know (then the answer must not be a wrong "no").
    pub fn release_may_end(&self, name: &str) -> bool {
        !self.by_begin
            && self
                .saves
                .iter()
                .rposition(|(n, _)| n.eq_ignore_ascii_case(name))
                .is_none_or(|i| i == 0)
    }

    /// RELEASE: drop the newest savepoint of that name and all above it.
    pub fn release(&mut self, name: &str) {
        if let Some(i) = self
            .saves
            .iter()
            .rposition(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            self.saves.truncate(i);
        }
    }

    /// ROLLBACK TO: the savepoint stays; those above it go.
    pub fn rollback_to(&mut self, name: &str) -> Option<Snapshots> {
        let i = self
            .saves
            .iter()
            .rposition(|(n, _)| n.eq_ignore_ascii_case(name))?;
        self.saves.truncate(i + 1);
        Some(self.saves[i].1.clone())
    }
}

pub(crate) fn kind_of(sql: &str) -> StmtKind {
    // Keywords are bare words; a name may be a word, quoted or a string.
    let mut words = tokenize::code(sql).filter(|t| t.kind != tokenize::Kind::Semi);
    let Some(first) = words.next() else {
        return StmtKind::Other;
    };
    let is = |w: &str| first.is(w);
    // A token after an optional filler word (TRANSACTION, SAVEPOINT).
    let mut after = |filler: &str| {
        let mut n = words.next();
        if n.is_some_and(|t| t.is(filler)) {
            n = words.next();
        }
        n
    };
    let name =
        |t: Option<tokenize::Token<'_>>| t.map(|t| t.value().into_owned()).unwrap_or_default();
    if is("BEGIN") {
        StmtKind::Begin
    } else if is("COMMIT") || is("END") {
        StmtKind::Commit
    } else if is("ROLLBACK") {
        match after("TRANSACTION") {
            Some(t) if t.is("TO") => StmtKind::RollbackTo(name(after("SAVEPOINT"))),
            _ => StmtKind::Rollback,
        }
    } else if is("SAVEPOINT") {
        StmtKind::Savepoint(name(words.next()))
    } else if is("RELEASE") {
        StmtKind::Release(name(after("SAVEPOINT")))
    } else if [
        "CREATE", "DROP", "ALTER", "VACUUM", "ATTACH", "DETACH", "REINDEX",
    ]
    .iter()
    .any(|w| is(w))
    {
        StmtKind::Schema
    } else {
        StmtKind::Other
    }
}

/// The schema a `VACUUM` rebuilds in place: `main` for a bare `VACUUM`,
/// the name it gives otherwise; `None` for `VACUUM … INTO` (which keeps
/// every rowid) and for any other statement.
pub(crate) fn vacuum_schema(sql: &str) -> Option<String> {
    let mut words = tokenize::code(sql).filter(|t| t.kind != tokenize::Kind::Semi);
    if !words.next().is_some_and(|t| t.is("VACUUM")) {
        return None;
    }
    match words.next() {
        None => Some("main".into()),
        Some(t) if t.is("INTO") => None,
        Some(t) => words.next().is_none().then(|| t.value().into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_transaction_control() {
        assert_eq!(kind_of(" begin immediate"), StmtKind::Begin);
        assert_eq!(kind_of("END TRANSACTION"), StmtKind::Commit);
        assert_eq!(kind_of("rollback"), StmtKind::Rollback);
        assert_eq!(
            kind_of("ROLLBACK TRANSACTION TO SAVEPOINT \"a b\""),
            StmtKind::RollbackTo("a b".into())
        );
        assert_eq!(kind_of("rollback to s1"), StmtKind::RollbackTo("s1".into()));
        assert_eq!(
            kind_of("/* x */ SAVEPOINT s2;"),
            StmtKind::Savepoint("s2".into())
        );
        assert_eq!(kind_of("RELEASE s2"), StmtKind::Release("s2".into()));
        assert_eq!(kind_of("drop table t"), StmtKind::Schema);
        assert_eq!(kind_of("INSERT INTO t VALUES(1)"), StmtKind::Other);
    }

    #[test]
    fn tells_what_a_vacuum_rebuilds() {
        let main = Some("main".to_owned());
        assert_eq!(vacuum_schema("VACUUM"), main);
        assert_eq!(vacuum_schema(" vacuum main;"), main);
        assert_eq!(vacuum_schema("VACUUM INTO 'x.db'"), None);
        assert_eq!(vacuum_schema("VACUUM main INTO 'x.db'"), None);
        assert_eq!(vacuum_schema("VACUUM aux").as_deref(), Some("aux"));
        assert_eq!(vacuum_schema("VACUUM \"aux\";").as_deref(), Some("aux"));
        assert_eq!(vacuum_schema("VACUUM aux INTO 'x.db'"), None);
        assert_eq!(vacuum_schema("SELECT 1"), None);
    }

    #[test]
    fn savepoints_nest_and_release() {
        let mut t = TxnState::default();
        t.saves.push(("a".into(), vec![]));
        t.saves.push(("b".into(), vec![]));
        t.saves.push(("a".into(), vec![]));
        assert!(t.rollback_to("B").is_some());
        assert_eq!(t.saves.len(), 2);
        t.release("a");
        assert!(t.saves.is_empty());
    }
}
