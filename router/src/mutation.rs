//! Deliberate bugs for the parity suite's mutation runs. Compiled only with
//! the `mutations` feature; without it `active` is a constant `false`.

#[cfg(feature = "mutations")]
mod imp {
    use std::sync::RwLock;

    static ACTIVE: RwLock<Option<String>> = RwLock::new(None);

    /// Switch on one mutation by name (`None`: none).
    pub fn set(name: Option<&str>) {
        *ACTIVE.write().unwrap_or_else(|e| e.into_inner()) = name.map(str::to_owned);
        pleroma_plane::mutation::set(name);
    }

    pub fn active(name: &str) -> bool {
        ACTIVE.read().unwrap_or_else(|e| e.into_inner()).as_deref() == Some(name)
    }
}

#[cfg(feature = "mutations")]
pub use imp::{active, set};

#[cfg(not(feature = "mutations"))]
#[inline(always)]
pub(crate) fn active(_name: &str) -> bool {
    false
}

/// The router's mutations, by name (the plane's are in `pleroma_plane`).
pub const ROUTER_MUTATIONS: &[&str] = &[
    "missed_delete",
    "ignore_rollback_to",
    "ignore_failed_statement",
    "external_write_missed",
    "wrong_affinity",
    "null_order",
    "avg_as_integer_division",
    "ignore_rollback",
    "strict_any_numeric",
    "schema_not_restored",
    "collation_ignored",
    "counters_moved",
    // The residue (caught by class X and the Out queries it serves).
    "residue_wrong_groups",
    "residue_null_dim",
    // The residue's second round (issue 19).
    "residue_empty_group",
    "residue_alias_before_column",
    "having_alias_before_column",
    "residue_raising_where",
    "residue_sum_per_measure",
    "residue_window_filter",
    "residue_distinct_order",
    "residue_natural_join",
    "residue_outer_bare_column",
    // A scalar subquery over grouped or DISTINCT rows without an order
    // that fixes its first row (caught by probe `rq7`).
    "residue_scalar_first_row",
    "column_names_cached",
    "engine_route_serves",
    // Persisted planes (caught by reopening and by a second process's
    // writes in the same suite).
    "trust_stale_checkpoint",
    "skip_log_entry",
    "persist_rolled_back",
    // What SQLite stores: a failed statement's kept rows undone by the
    // wrap, a VACUUM that keeps rowids plain SQLite renumbers, and
    // `last_insert_rowid()` after VACUUM counting Pleroma's schema rows
    // (caught by the table comparison after every failed statement and
    // VACUUM, and by the counters).
    "failed_kept_rolled_back",
    "vacuum_keeps_guards",
    "vacuum_counts_own_rows",
    // Inside a transaction, the guards stay while a statement that can
    // fail without a halt compiles: SQLite gives it a statement journal
    // and rolls back rows plain SQLite keeps (`txn_guards.rs`).
    "guards_kept_in_txn",
    // With a virtual table in the file, the guards leave only before a
    // statement that writes a guarded table, after FTS took rows: the
    // `DROP INDEX` writes them out early (other segments, other counts).
    "guards_late_with_vtabs",
    // A RELEASE inside a transaction that goes on writes a state row (and
    // so puts the guards back, and FTS writes out its rows early).
    "inner_release_row",
    // Persisted planes' proofs (issue 19): a RELEASE-time state row kept
    // after the transaction gave its change back (a reopen trusts it), and
    // a stand-in guard's rows in the guard index not looked for (a follow
    // trusts the log).
    "release_row_kept",
    "guard_index_unchecked",
    // A cached statement's columns read before its first step: after its
    // table changed shape, the columns of its first compile.
    "columns_before_step",
    // `INSERT INTO b SELECT * FROM a` with the guards in the schema: the
    // transfer optimization is off where plain SQLite takes it, and the
    // copy's rows come in another order (or two alike guards keep rowids).
    "transfer_with_guards",
    // The guard passes writes of a connection without planes, into
    // another persisted file, or into a copy of the main file attached
    // (caught by `@copy-refused`).
    "guard_passes_any_file",
    // A follower goes on from its last row without checking that the row
    // is still there (caught by `@restore`: a backup restored under the
    // running connection).
    "follow_without_continuity",
];

/// Mutations of persisted planes that need a plain SQLite writer on a table
/// the suite's generator keeps triggers on (which turns SQLite's truncate
/// shortcut off): caught by `parity/tests/persist_mutations.rs`.
pub const PERSIST_MUTATIONS: &[&str] = &["plain_write_ignored"];

/// The join limb's and the memo's mutations.
pub const JOIN_MUTATIONS: &[&str] = &["stale_limb", "memo_not_invalidated"];

/// Mutations of shared planes, caught by the multi-connection
/// interleavings (`parity/src/shared.rs`), not by the single-connection
/// suite.
pub const SHARED_MUTATIONS: &[&str] = &[
    "publish_before_commit",
    "publish_uncommitted",
    "read_txn_moves",
    "publish_rollback",
];

/// Every mutation: the router's, then the plane's.
pub fn all() -> Vec<&'static str> {
    ROUTER_MUTATIONS
        .iter()
        .chain(pleroma_plane::mutation::PLANE_MUTATIONS)
        .copied()
        .collect()
}
