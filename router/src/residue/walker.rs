//! What the walk's files share: the [`Walker`]'s state (the statement, its
//! tokens, the edits, what the core must compute, the cut), whose methods
//! `walk`, `core`, `cut` and `span` each add, and a SELECT's
//! [`projection`]. It uses none of them.

use std::collections::BTreeSet;
use std::ops::Range;

use sqlparser::ast::{Expr, SelectItem};

use super::{Cut, SumTerm};
use crate::planes::Planes;
use crate::tokenize::Token;

pub(super) struct Walker<'a> {
    pub(super) shared: &'a Planes,
    pub(super) sql: &'a str,
    pub(super) lines: Vec<usize>,
    /// The statement's tokens (no whitespace, no comments), and their
    /// normal forms (`span::normal_tokens`) for finding an expression's
    /// text.
    pub(super) toks: Vec<Token<'a>>,
    pub(super) normal: Vec<(String, usize)>,
    pub(super) edits: Vec<(Range<usize>, String)>,
    pub(super) table: Option<usize>,
    pub(super) dims: BTreeSet<usize>,
    pub(super) measures: BTreeSet<usize>,
    pub(super) sums: Vec<SumTerm>,
    pub(super) extrema: BTreeSet<usize>,
    pub(super) abs_dims: BTreeSet<usize>,
    /// A function that can raise an error sits in a per-group position.
    pub(super) raises: bool,
    /// Some query of the statement has a LIMIT.
    pub(super) limited: bool,
    /// Names of the user's CTEs in scope, and whether each reads the core.
    pub(super) ctes: Vec<(String, bool)>,
    /// Reads of the core so far: blocks over the planed table, and FROM
    /// references to CTEs that read it (so a query that reads the core at
    /// any depth is seen as one).
    pub(super) cores: usize,
    /// The aggregates the cells answer (for explain).
    pub(super) aggs: Vec<String>,
    /// What SQLite evaluates (for explain).
    pub(super) rest: Vec<String>,
    /// Nesting of queries (1: the statement itself).
    pub(super) depth: usize,
    /// The statement's ORDER BY as output columns, when its LIMIT cut is
    /// checked at run time instead of proven by the ORDER BY.
    pub(super) cut_keys: Option<Vec<usize>>,
    pub(super) cut: Option<Cut>,
    /// An ordinary table's columns, by schema (if given) and name; `None`
    /// for a view, a virtual table or no table: what a lookup join may join
    /// the core to.
    pub(super) lookup: &'a super::Lookup<'a>,
    /// The tables the core is joined to (their row counts bound how many
    /// times a partial sum is added).
    pub(super) joined: Vec<String>,
    /// Walking a compound SELECT's branches: their rows are consumed by
    /// the compound (as a subquery's or a CTE's by the outer query).
    pub(super) consumed: bool,
}

/// The other side of a lookup join.
pub(super) struct LookupJoin<'s> {
    pub(super) other_alias: String,
    pub(super) other_cols: Vec<super::OtherColumn>,
    pub(super) other_table: String,
    pub(super) on: Option<&'s Expr>,
    /// Whether the planed table is the join's first (left) table.
    pub(super) planed_first: bool,
}

/// A SELECT's output expressions and their aliases (lower case, empty when
/// none); a wildcard declines with `wildcard`.
pub(super) fn projection<'a>(
    list: &'a [SelectItem],
    wildcard: &str,
) -> Result<(Vec<&'a Expr>, Vec<String>), String> {
    let mut items = Vec::new();
    let mut aliases = Vec::new();
    for item in list {
        match item {
            SelectItem::UnnamedExpr(e) => {
                items.push(e);
                aliases.push(String::new());
            }
            SelectItem::ExprWithAlias { expr, alias } => {
                items.push(expr);
                aliases.push(alias.value.to_ascii_lowercase());
            }
            _ => return Err(wildcard.into()),
        }
    }
    Ok((items, aliases))
}
