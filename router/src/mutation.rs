//! Deliberate bugs for the parity suite's mutation runs.
//!
//! Each is a variant of [`Mutation`]; the code that a mutation breaks asks
//! `mutation::active(Mutation::X)`. With the `mutations` feature that is one
//! relaxed atomic load and a compare; without it (every build the README
//! names: the workspace's default members leave out `parity`, which turns
//! the feature on) `active` is a constant `false` and `set` does not exist.
//! The parity suite switches them on by name, one at a time.

/// Declares the enum and its names in one list, so that a name in the
/// sweeps below and a variant in the code cannot drift apart.
macro_rules! mutations {
    ($($variant:ident = $name:literal,)*) => {
        /// One deliberate bug of the router's (the plane's are in
        /// `pleroma_plane::mutation`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub enum Mutation {
            $($variant,)*
        }

        impl Mutation {
            /// Every mutation, in declaration order.
            pub const ALL: &[Mutation] = &[$(Mutation::$variant,)*];

            /// The name the parity suite uses for it.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Mutation::$variant => $name,)*
                }
            }

            /// The mutation of that name, if it is the router's.
            pub fn from_name(name: &str) -> Option<Mutation> {
                Mutation::ALL.iter().copied().find(|m| m.name() == name)
            }
        }
    };
}

mutations! {
    MissedDelete = "missed_delete",
    IgnoreRollbackTo = "ignore_rollback_to",
    IgnoreFailedStatement = "ignore_failed_statement",
    ExternalWriteMissed = "external_write_missed",
    WrongAffinity = "wrong_affinity",
    NullOrder = "null_order",
    AvgAsIntegerDivision = "avg_as_integer_division",
    IgnoreRollback = "ignore_rollback",
    StrictAnyNumeric = "strict_any_numeric",
    SchemaNotRestored = "schema_not_restored",
    CollationIgnored = "collation_ignored",
    CountersMoved = "counters_moved",
    ResidueWrongGroups = "residue_wrong_groups",
    ResidueNullDim = "residue_null_dim",
    ResidueEmptyGroup = "residue_empty_group",
    ResidueAliasBeforeColumn = "residue_alias_before_column",
    ResidueLimitParamIgnored = "residue_limit_param_ignored",
    CommaLimitParamsSwapped = "comma_limit_params_swapped",
    JoinLimitIgnored = "join_limit_ignored",
    HavingAliasBeforeColumn = "having_alias_before_column",
    ResidueRaisingWhere = "residue_raising_where",
    ResidueSumPerMeasure = "residue_sum_per_measure",
    ResidueWindowFilter = "residue_window_filter",
    ResidueDistinctOrder = "residue_distinct_order",
    ResidueNaturalJoin = "residue_natural_join",
    ResidueOuterBareColumn = "residue_outer_bare_column",
    ResidueScalarFirstRow = "residue_scalar_first_row",
    ColumnNamesCached = "column_names_cached",
    EngineRouteServes = "engine_route_serves",
    TrustStaleCheckpoint = "trust_stale_checkpoint",
    SkipLogEntry = "skip_log_entry",
    PersistRolledBack = "persist_rolled_back",
    FailedKeptRolledBack = "failed_kept_rolled_back",
    VacuumKeepsGuards = "vacuum_keeps_guards",
    VacuumCountsOwnRows = "vacuum_counts_own_rows",
    GuardsKeptInTxn = "guards_kept_in_txn",
    GuardsLateWithVtabs = "guards_late_with_vtabs",
    InnerReleaseRow = "inner_release_row",
    ReleaseRowKept = "release_row_kept",
    GuardIndexUnchecked = "guard_index_unchecked",
    ColumnsBeforeStep = "columns_before_step",
    TransferWithGuards = "transfer_with_guards",
    GuardPassesAnyFile = "guard_passes_any_file",
    FollowWithoutContinuity = "follow_without_continuity",
    PlainWriteIgnored = "plain_write_ignored",
    StaleLimb = "stale_limb",
    MemoNotInvalidated = "memo_not_invalidated",
    PublishBeforeCommit = "publish_before_commit",
    PublishUncommitted = "publish_uncommitted",
    ReadTxnMoves = "read_txn_moves",
    PublishRollback = "publish_rollback",
    BusyHandlerSkipped = "busy_handler_skipped",
    UnguardedWritePasses = "unguarded_write_passes",
    CatchUpSkipsLog = "catch_up_skips_log",
    AppenderSkipsAffinity = "appender_skips_affinity",
    ExprAffinityLost = "expr_affinity_lost",
    LookupCountPerKey = "lookup_count_per_key",
    ResidueBlobAffinityLost = "residue_blob_affinity_lost",
    BucketEdgeUnchecked = "bucket_edge_unchecked",
    WrongPlane = "wrong_plane",
}

#[cfg(feature = "mutations")]
mod imp {
    use super::Mutation;
    use std::sync::atomic::{AtomicU8, Ordering};

    /// The active mutation's discriminant plus one; 0 is none.
    static ACTIVE: AtomicU8 = AtomicU8::new(0);

    /// Switch on one mutation by name (`None`, or a name that is neither
    /// the router's nor the plane's: none).
    pub fn set(name: Option<&str>) {
        let m = name.and_then(Mutation::from_name);
        ACTIVE.store(m.map_or(0, |m| m as u8 + 1), Ordering::Relaxed);
        pleroma_plane::mutation::set(name);
    }

    #[inline]
    pub fn active(m: Mutation) -> bool {
        ACTIVE.load(Ordering::Relaxed) == m as u8 + 1
    }
}

#[cfg(feature = "mutations")]
pub use imp::{active, set};

#[cfg(not(feature = "mutations"))]
#[inline(always)]
pub(crate) fn active(_m: Mutation) -> bool {
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
    // A LIMIT/OFFSET parameter of a residue cut read as no cut at all.
    "residue_limit_param_ignored",
    // `LIMIT ?, ?` on the direct path: the parameters numbered limit
    // first, the bug found by the generator's comma form with parameters.
    "comma_limit_params_swapped",
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
    // Persisted planes' proofs (issue 19): a state row written before a
    // COMMIT that a deferred foreign key failed, kept after the
    // transaction gave its change back (a reopen trusts it), and a
    // stand-in guard's rows in the guard index not looked for (a follow
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
    // An autocommit write that Pleroma runs without its wrap (it was to
    // change no planed table) passes the guard, and every write is
    // thought to change none: planed writes commit without a state row
    // (caught by reopening, which trusts the older state).
    "unguarded_write_passes",
    // The appender feeds a plane the values it was given, not what SQLite
    // stored for them ('7' into an INTEGER column is 7) (caught by the
    // suite's `@append` step).
    "appender_skips_affinity",
    // An expression dimension evaluated over columns without their
    // affinity: `CASE WHEN m > '50' …` compares an INTEGER with TEXT where
    // SQLite compares two integers (caught by the suite's expression
    // planes, fed row by row through the hook).
    "expr_affinity_lost",
    // A lookup join's COUNT(*) left as SQLite's count of the joined core
    // rows: a key counted once per match instead of once per row of its
    // group (caught by class L).
    "lookup_count_per_key",
    // A dimension without affinity bound into the residue's core as a
    // value without any (`value->>k`), where the column has BLOB affinity:
    // compared with a TEXT operand, 5 becomes '5' (caught by class L's
    // untyped keys).
    "residue_blob_affinity_lost",
    // A range on a time bucket's raw column served without checking that
    // its bounds start buckets: `a >= month start + 1` counts the bucket's
    // first second (caught by class E's off-edge ranges, class Any).
    "bucket_edge_unchecked",
    // A plan made for one plane of a table answered from another: its
    // first, whichever the classifier chose (caught by the suite's second,
    // smaller plane on `t`, whose dimensions come in another order).
    "wrong_plane",
];

/// Mutations of persisted planes that need a plain SQLite writer on a table
/// the suite's generator keeps triggers on (which turns SQLite's truncate
/// shortcut off): caught by `parity/tests/persist_mutations.rs`.
pub const PERSIST_MUTATIONS: &[&str] = &["plain_write_ignored"];

/// The join limb's and the memo's mutations.
pub const JOIN_MUTATIONS: &[&str] = &["stale_limb", "memo_not_invalidated", "join_limit_ignored"];

/// Mutations of shared planes, caught by the multi-connection
/// interleavings (`parity/src/shared.rs`), not by the single-connection
/// suite.
pub const SHARED_MUTATIONS: &[&str] = &[
    "publish_before_commit",
    "publish_uncommitted",
    "read_txn_moves",
    "publish_rollback",
    // The guards' reads open a snapshot before a transaction's first
    // write, so SQLite does not call the busy handler for it (caught by
    // the interleavings' busy handler check).
    "busy_handler_skipped",
    // A transaction's first write, after another connection's commit,
    // takes that commit as followed without applying its state rows
    // (caught by the plane answers after a plain `BEGIN`).
    "catch_up_skips_log",
];

/// Every mutation: the router's, then the plane's.
pub fn all() -> Vec<&'static str> {
    ROUTER_MUTATIONS
        .iter()
        .chain(pleroma_plane::mutation::PLANE_MUTATIONS)
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant is in exactly one of the sweep's lists, and every
    /// listed name is a variant (the plane's are the plane's).
    #[test]
    fn every_mutation_is_swept_once() {
        let lists = [
            ROUTER_MUTATIONS,
            PERSIST_MUTATIONS,
            JOIN_MUTATIONS,
            SHARED_MUTATIONS,
        ];
        for m in Mutation::ALL {
            let n = lists
                .iter()
                .flat_map(|l| l.iter())
                .filter(|x| **x == m.name())
                .count();
            assert_eq!(n, 1, "{}", m.name());
        }
        for name in lists.iter().flat_map(|l| l.iter()) {
            assert!(Mutation::from_name(name).is_some(), "{name}");
        }
    }
}
