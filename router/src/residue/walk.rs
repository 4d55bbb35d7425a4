//! The walk: the `Walker` over the query tree, block by block and
//! expression by expression, deciding where each piece is evaluated.
//!
//! Exact because it is all-or-nothing: a block over the planed table alone
//! is checked per row (dimensions only) and per group (merged aggregates,
//! group terms), every other block must be blind to the order of the rows
//! it reads, and anything it does not recognise declines with a reason.

use crate::mutation::Mutation;
use std::collections::BTreeSet;

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, InTarget, LimitClause,
    ObjectNamePart, OrderByKind, Query, Select, SelectItem, SetExpr, SetOperator, TableFactor,
    Value as SqlValue, WindowType,
};

use super::allow::{
    children, expr_form_allowed, fn_name, function_allowed, has_aggregate, is_constant,
    is_scalar_minmax, raising_form, visit, AGGREGATES, FUNCTIONS, ORDERED_WINDOWS,
    OTHER_AGGREGATES, PEER_FREE_WINDOWS, RAISING,
};
use super::core::Core;
use super::cut::{first_row_fixed, outer_order_free};
use super::span::{line_starts, normal_tokens};
use super::walker::{LookupJoin, Walker};
use super::R;
use crate::planes::Planes;
use crate::tokenize::{self, Token};

/// Where an expression sits in a block that reads the core.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Level {
    /// Per row of the table (WHERE, GROUP BY terms, aggregate arguments):
    /// dimension columns only.
    Row,
    /// Per group (select list, HAVING, ORDER BY of an aggregate block).
    Group,
}

impl<'a> Walker<'a> {
    pub(super) fn new(
        shared: &'a Planes,
        sql: &'a str,
        lookup: &'a super::Lookup<'a>,
    ) -> Walker<'a> {
        let toks: Vec<Token<'a>> = tokenize::code(sql).collect();
        Walker {
            shared,
            sql,
            lines: line_starts(sql),
            normal: normal_tokens(&toks),
            toks,
            edits: Vec::new(),
            table: None,
            dims: BTreeSet::new(),
            measures: BTreeSet::new(),
            sums: Vec::new(),
            extrema: BTreeSet::new(),
            abs_dims: BTreeSet::new(),
            raises: false,
            limited: false,
            ctes: Vec::new(),
            cores: 0,
            depth: 0,
            cut_keys: None,
            cut: None,
            aggs: Vec::new(),
            rest: Vec::new(),
            lookup,
            joined: Vec::new(),
            consumed: false,
        }
    }

    pub(super) fn query(&mut self, q: &Query, inside_core: bool) -> R<()> {
        self.depth += 1;
        let r = self.query_at(q, inside_core);
        self.depth -= 1;
        r
    }

    pub(super) fn query_at(&mut self, q: &Query, inside_core: bool) -> R<()> {
        if q.fetch.is_some() || !q.locks.is_empty() || q.for_clause.is_some() {
            return Err("FETCH or locking clauses".into());
        }
        if q.settings.is_some() || q.format_clause.is_some() || !q.pipe_operators.is_empty() {
            return Err("clauses outside SQLite".into());
        }
        let depth = self.ctes.len();
        if let Some(with) = &q.with {
            if with.recursive {
                return Err("WITH RECURSIVE".into());
            }
            for cte in &with.cte_tables {
                let name = cte.alias.name.value.clone();
                if self.shared.find(&name).is_some() {
                    return Err(format!("a CTE named like the planed table {name}"));
                }
                if cte.from.is_some() {
                    return Err("a CTE with FROM".into());
                }
                let before = self.cores;
                self.query(&cte.query, inside_core)?;
                self.ctes.push((name, self.cores > before));
            }
        }
        let limited = q.limit_clause.is_some();
        let order: Vec<&sqlparser::ast::OrderByExpr> = match &q.order_by {
            None => Vec::new(),
            Some(ob) => match &ob.kind {
                OrderByKind::Expressions(v) => v.iter().collect(),
                OrderByKind::All(_) => return Err("ORDER BY ALL".into()),
            },
        };
        if order.iter().any(|o| o.with_fill.is_some()) {
            return Err("ORDER BY WITH FILL".into());
        }
        let order_exprs: Vec<&Expr> = order.iter().map(|o| &o.expr).collect();
        match q.body.as_ref() {
            SetExpr::Select(sel) => self.select(sel, &order_exprs, limited, inside_core)?,
            other => {
                if limited {
                    return Err("LIMIT over a compound or nested SELECT".into());
                }
                self.set_expr(other, inside_core)?;
                for e in order_exprs {
                    self.wrapper_expr(e, inside_core)?;
                }
            }
        }
        if let Some(l) = &q.limit_clause {
            self.limited = true;
            let exprs: Vec<&Expr> = match l {
                LimitClause::LimitOffset {
                    limit,
                    offset,
                    limit_by,
                } => {
                    if !limit_by.is_empty() {
                        return Err("LIMIT BY".into());
                    }
                    limit
                        .iter()
                        .chain(offset.iter().map(|o| &o.value))
                        .collect()
                }
                LimitClause::OffsetCommaLimit { offset, limit } => vec![offset, limit],
            };
            for e in &exprs {
                if !is_constant(e) {
                    return Err("LIMIT/OFFSET that is not a literal or parameter".into());
                }
            }
            if let Some(keys) = self.cut_keys.take() {
                self.cut = Some(self.limit_cut(q, l, keys)?);
            }
        }
        self.ctes.truncate(depth);
        Ok(())
    }

    pub(super) fn set_expr(&mut self, s: &SetExpr, inside_core: bool) -> R<()> {
        match s {
            SetExpr::Select(sel) => self.select(sel, &[], false, inside_core),
            SetExpr::Query(q) => self.query(q, inside_core),
            SetExpr::SetOperation {
                op, left, right, ..
            } => {
                if !matches!(
                    op,
                    SetOperator::Union | SetOperator::Except | SetOperator::Intersect
                ) {
                    return Err(format!("set operation {op}"));
                }
                // A compound's rows meet the other branch's (UNION keeps
                // one of two equal rows): its blocks' outputs are consumed.
                let was = self.consumed;
                self.consumed = true;
                let r = self
                    .set_expr(left, inside_core)
                    .and_then(|()| self.set_expr(right, inside_core));
                self.consumed = was;
                r
            }
            SetExpr::Values(v) => {
                for row in &v.rows {
                    for e in &row.content {
                        self.wrapper_expr(e, inside_core)?;
                    }
                }
                Ok(())
            }
            _ => Err("a statement form outside SELECT".into()),
        }
    }

    /// The planed table a FROM item names, if it is one (not a CTE).
    pub(super) fn planed(&self, f: &TableFactor) -> R<Option<(usize, String)>> {
        let TableFactor::Table { name, alias, .. } = f else {
            return Ok(None);
        };
        let parts = name_parts(name);
        let (schema, table) = match parts.as_slice() {
            [t] => (None, *t),
            [s, t] => (Some(*s), *t),
            _ => return Err("a computed or three-part table name".into()),
        };
        if schema.is_none() && self.ctes.iter().any(|(c, _)| c.eq_ignore_ascii_case(table)) {
            return Ok(None);
        }
        let Some(i) = self.shared.find(table) else {
            return Ok(None);
        };
        if schema.is_some_and(|s| !s.eq_ignore_ascii_case("main")) {
            return Err("a planed table outside the main schema".into());
        }
        let alias = match alias {
            Some(a) if !a.columns.is_empty() => {
                return Err("a table alias with column names".into())
            }
            Some(a) => a.name.value.clone(),
            None => table.to_owned(),
        };
        Ok(Some((i, alias)))
    }

    pub(super) fn select(
        &mut self,
        sel: &Select,
        order: &[&Expr],
        limited: bool,
        inside_core: bool,
    ) -> R<()> {
        if sel.top.is_some() || sel.into.is_some() || sel.exclude.is_some() {
            return Err("TOP or INTO".into());
        }
        if !sel.lateral_views.is_empty() || sel.prewhere.is_some() || !sel.connect_by.is_empty() {
            return Err("clauses outside SQLite".into());
        }
        if !sel.cluster_by.is_empty() || !sel.distribute_by.is_empty() || !sel.sort_by.is_empty() {
            return Err("clauses outside SQLite".into());
        }
        if !sel.named_window.is_empty() || sel.qualify.is_some() {
            return Err("named windows".into());
        }
        let (core, join) = match sel.from.as_slice() {
            [twj] if twj.joins.is_empty() => (self.planed(&twj.relation)?, None),
            [twj] if twj.joins.len() == 1 => match self.lookup_join(twj)? {
                Some((entry, alias, join)) => (Some((entry, alias)), Some(join)),
                None => (None, None),
            },
            _ => (None, None),
        };
        match core {
            Some((entry, alias)) => {
                if inside_core && self.table.is_some_and(|t| t != entry) {
                    return Err("two planed tables".into());
                }
                self.core_select(sel, order, limited, entry, alias, join)
            }
            None => {
                if inside_core {
                    return Err("a subquery over other tables inside a served block".into());
                }
                if limited {
                    return Err("LIMIT outside a block over the planed table".into());
                }
                for twj in &sel.from {
                    for f in
                        std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation))
                    {
                        if self.planed(f)?.is_some() {
                            return Err("the planed table in a join".into());
                        }
                        if self.names_core_cte(f) {
                            self.cores += 1;
                        }
                        self.table_factor(f)?;
                    }
                    for j in &twj.joins {
                        use sqlparser::ast::{JoinConstraint, JoinOperator as J};
                        let c = match &j.join_operator {
                            J::Join(c) | J::Inner(c) | J::Left(c) | J::LeftOuter(c) => c,
                            J::CrossJoin(c) => c,
                            _ => return Err("a join form outside SQLite".into()),
                        };
                        match c {
                            JoinConstraint::On(e) => self.wrapper_expr(e, false)?,
                            // Matched by names, which the rewrite changes
                            // (an aggregate column is named by its text).
                            JoinConstraint::Natural | JoinConstraint::Using(_)
                                if !crate::mutation::active(Mutation::ResidueNaturalJoin) =>
                            {
                                return Err("NATURAL JOIN or USING in an outer query".into())
                            }
                            _ => {}
                        }
                    }
                }
                for item in &sel.projection {
                    match item {
                        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                            self.wrapper_expr(e, false)?
                        }
                        _ => {}
                    }
                }
                let rest = [&sel.selection, &sel.having];
                for e in rest.into_iter().flatten() {
                    self.wrapper_expr(e, false)?;
                }
                if let GroupByExpr::Expressions(g, m) = &sel.group_by {
                    if !m.is_empty() {
                        return Err("GROUP BY modifiers".into());
                    }
                    for e in g {
                        self.wrapper_expr(e, false)?;
                    }
                } else {
                    return Err("GROUP BY ALL".into());
                }
                for e in order {
                    self.wrapper_expr(e, false)?;
                }
                outer_order_free(sel, order)?;
                self.rest.push("an outer query".into());
                Ok(())
            }
        }
    }

    /// A lookup join: the planed table joined to one ordinary table
    /// (`docs/design.md`, "The residue", lookup joins). `None` when neither
    /// side is planed; an error for a join of the planed table that is not
    /// of this shape.
    pub(super) fn lookup_join<'s>(
        &self,
        twj: &'s sqlparser::ast::TableWithJoins,
    ) -> R<Option<(usize, String, LookupJoin<'s>)>> {
        use sqlparser::ast::{JoinConstraint, JoinOperator as J};
        let j = &twj.joins[0];
        let (left, right) = (self.planed(&twj.relation)?, self.planed(&j.relation)?);
        let (planed, other, planed_first) = match (left, right) {
            (None, None) => return Ok(None),
            (Some(p), None) => (p, &j.relation, true),
            (None, Some(p)) => (p, &twj.relation, false),
            (Some(_), Some(_)) => return Err("the planed table joined to a planed table".into()),
        };
        let (constraint, outer) = match &j.join_operator {
            J::Join(c) | J::Inner(c) => (c, false),
            J::Left(c) | J::LeftOuter(c) => (c, true),
            J::CrossJoin(c) => (c, false),
            _ => return Err("the planed table in a join that is not INNER, LEFT or CROSS".into()),
        };
        if outer && !planed_first {
            // The rows of the other table without a match would count once
            // each, where the core has no row for them.
            return Err("the planed table on the optional side of a LEFT JOIN".into());
        }
        let on = match constraint {
            JoinConstraint::On(e) => Some(e),
            JoinConstraint::None => None,
            _ => return Err("NATURAL JOIN or USING with the planed table".into()),
        };
        // (INDEXED BY and the like choose SQLite's plan, not its rows.)
        let TableFactor::Table {
            name,
            alias,
            args: None,
            ..
        } = other
        else {
            return Err("the planed table joined to something other than a table".into());
        };
        let parts = name_parts(name);
        let (schema, table) = match parts.as_slice() {
            [t] => (None, *t),
            [s, t] => (Some(*s), *t),
            _ => return Err("a joined table outside main and temp".into()),
        };
        if schema.is_none() && self.ctes.iter().any(|(c, _)| c.eq_ignore_ascii_case(table)) {
            return Err("the planed table joined to a CTE".into());
        }
        // A view or a virtual table may give another value per read.
        let Some(other_cols) = (self.lookup)(schema, table) else {
            return Err(format!(
                "the planed table joined to {table}, which is no ordinary table of main or temp"
            ));
        };
        let other_alias = match alias {
            Some(a) if !a.columns.is_empty() => {
                return Err("a table alias with column names".into())
            }
            Some(a) => a.name.value.clone(),
            None => table.to_owned(),
        };
        if other_alias.eq_ignore_ascii_case(&planed.1) {
            return Err("the joined table under the planed table's name".into());
        }
        Ok(Some((
            planed.0,
            planed.1,
            LookupJoin {
                other_alias,
                other_cols,
                // As written (`main.x`, `"x"`): the count reads the same table.
                other_table: name.to_string(),
                on,
                planed_first,
            },
        )))
    }

    /// Whether a FROM item names a CTE in scope (the innermost of that
    /// name) that reads the core.
    pub(super) fn names_core_cte(&self, f: &TableFactor) -> bool {
        let TableFactor::Table { name, .. } = f else {
            return false;
        };
        let [ObjectNamePart::Identifier(i)] = name.0.as_slice() else {
            return false;
        };
        self.ctes
            .iter()
            .rev()
            .find(|(c, _)| c.eq_ignore_ascii_case(&i.value))
            .is_some_and(|(_, core)| *core)
    }

    /// A scalar subquery (`(SELECT …)` as a value): walked like any query,
    /// then, if it reads the core, its first row must not depend on the
    /// order rows come in (`first_row_fixed`).
    pub(super) fn scalar_subquery(&mut self, q: &Query, inside_core: bool) -> R<()> {
        let before = self.cores;
        self.query(q, inside_core)?;
        if self.cores > before {
            first_row_fixed(q)?;
        }
        Ok(())
    }

    pub(super) fn table_factor(&mut self, f: &TableFactor) -> R<()> {
        match f {
            TableFactor::Table { args: None, .. } => Ok(()),
            TableFactor::Derived {
                lateral: false,
                subquery,
                ..
            } => self.query(subquery, false),
            _ => Err("a FROM item other than a table or a subquery".into()),
        }
    }

    /// An expression outside the blocks that read the core: SQLite
    /// evaluates it over rows that are the same as without the plane.
    pub(super) fn wrapper_expr(&mut self, e: &Expr, inside_core: bool) -> R<()> {
        let mut err = None;
        visit(e, &mut |x| {
            if err.is_some() {
                return false;
            }
            match x {
                Expr::Function(f) => {
                    if let Err(r) = function_allowed(f) {
                        err = Some(r);
                    }
                    // An outer WHERE may be pushed down into a block over
                    // the core, and evaluated there per row.
                    let name = fn_name(f).unwrap_or_default();
                    if RAISING.contains(&name.as_str())
                        && !crate::mutation::active(Mutation::ResidueRaisingWhere)
                    {
                        err = Some(format!(
                            "{name}() in an outer query (it can raise an error)"
                        ));
                    }
                    true
                }
                Expr::Subquery(q) => {
                    if let Err(r) = self.scalar_subquery(q, inside_core) {
                        err = Some(r);
                    }
                    false
                }
                // EXISTS (and IN, below) ask whether a row is there, not
                // which one comes first.
                Expr::Exists { subquery: q, .. } => {
                    if let Err(r) = self.query(q, inside_core) {
                        err = Some(r);
                    }
                    false
                }
                Expr::In {
                    expr,
                    target: InTarget::Subquery(subquery),
                    ..
                } => {
                    if let Err(r) = self
                        .wrapper_expr(expr, inside_core)
                        .and_then(|_| self.query(subquery, inside_core))
                    {
                        err = Some(r);
                    }
                    false
                }
                other => {
                    if let Err(r) = expr_form_allowed(other) {
                        err = Some(r);
                    }
                    if let Some(what) = raising_form(other) {
                        if !crate::mutation::active(Mutation::ResidueRaisingWhere) {
                            err = Some(format!("{what} in an outer query (it can raise an error)"));
                        }
                    }
                    true
                }
            }
        });
        err.map_or(Ok(()), Err)
    }

    /// A per-row expression of a block over the core: dimension columns,
    /// literals, parameters, deterministic functions; subqueries that are
    /// blocks over the core themselves.
    pub(super) fn row_expr(&mut self, c: &Core, e: &Expr) -> R<()> {
        self.level_expr(c, e, Level::Row)
    }

    pub(super) fn group_expr(&mut self, c: &Core, e: &Expr) -> R<()> {
        self.level_expr(c, e, Level::Group)
    }

    pub(super) fn level_expr(&mut self, c: &Core, e: &Expr, level: Level) -> R<()> {
        if level == Level::Group && c.groups.contains(&e.to_string()) {
            // A group term's value: checked as a row expression already.
            return Ok(());
        }
        match e {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                if let Some(d) = self.dim(c, e) {
                    if level == Level::Group {
                        return Err(format!(
                            "bare column {} outside GROUP BY",
                            self.shared.entry(c.entry).def.dims[d]
                        ));
                    }
                    self.dims.insert(d);
                    return Ok(());
                }
                if let Expr::Identifier(i) = e {
                    let name = i.value.to_ascii_lowercase();
                    if level == Level::Group
                        && c.aliases.contains(&name)
                        && !self.column_first(c, e, &i.value)
                    {
                        return Ok(());
                    }
                }
                if let Some(other) = &c.other {
                    // In a lookup join: the other table's column (or a name
                    // SQLite resolves the same way over the core, which
                    // lacks only the planed table's other columns).
                    let theirs = match e {
                        Expr::CompoundIdentifier(p) => {
                            matches!(p.as_slice(), [q, _] if q.value.eq_ignore_ascii_case(other))
                        }
                        Expr::Identifier(i) => !crate::catalog::names_a_column(
                            &self.shared.entry(c.entry).cols.columns,
                            &i.value,
                        ),
                        _ => false,
                    };
                    if theirs {
                        if level == Level::Group {
                            return Err(format!(
                                "{e} outside GROUP BY in a lookup join (a bare column, or an alias)"
                            ));
                        }
                        return Ok(());
                    }
                }
                Err(self.not_a_dim(c, e))
            }
            Expr::Function(f) => {
                let name = fn_name(f)?;
                if let Some(w) = &f.over {
                    if level == Level::Row {
                        return Err(format!("window function {name}() over the table's rows"));
                    }
                    let WindowType::WindowSpec(spec) = w else {
                        return Err("a named window".into());
                    };
                    if !PEER_FREE_WINDOWS.contains(&name.as_str())
                        && !ORDERED_WINDOWS.contains(&name.as_str())
                    {
                        return Err(format!("window function {name}()"));
                    }
                    if spec.window_frame.is_some() && !ORDERED_WINDOWS.contains(&name.as_str()) {
                        return Err(format!("{name}() OVER with a frame"));
                    }
                    if ORDERED_WINDOWS.contains(&name.as_str()) || spec.window_frame.is_some() {
                        let keys: Vec<String> =
                            spec.order_by.iter().map(|o| o.expr.to_string()).collect();
                        let parts: Vec<String> =
                            spec.partition_by.iter().map(|p| p.to_string()).collect();
                        if c.groups.is_empty()
                            || c.groups
                                .iter()
                                .any(|g| !keys.contains(g) && !parts.contains(g))
                        {
                            return Err(format!(
                                "{name}() OVER an order that is not total over the groups"
                            ));
                        }
                    }
                    if matches!(name.as_str(), "min" | "max") {
                        if let FunctionArguments::List(l) = &f.args {
                            for a in &l.args {
                                if let FunctionArg::Unnamed(FunctionArgExpr::Expr(a)) = a {
                                    if !has_aggregate(a) && !self.stable(c, a) {
                                        return Err(format!(
                                            "{name}() OVER {a}, whose values may compare equal and still differ"
                                        ));
                                    }
                                }
                            }
                        }
                    }
                    for p in &spec.partition_by {
                        self.group_expr(c, p)?;
                    }
                    for o in &spec.order_by {
                        self.group_expr(c, &o.expr)?;
                    }
                    // A window's FILTER is evaluated per group, like its
                    // arguments (and its aggregates are the core's merges).
                    if let Some(p) = &f.filter {
                        if !crate::mutation::active(Mutation::ResidueWindowFilter) {
                            self.group_expr(c, p)?;
                        }
                    }
                    self.args_at(c, f, Level::Group)?;
                    self.rest.push(format!("{name}() OVER"));
                    return Ok(());
                }
                if OTHER_AGGREGATES.contains(&name.as_str()) {
                    return Err(format!("aggregate {name}() does not merge from the cells"));
                }
                if AGGREGATES.contains(&name.as_str()) && !is_scalar_minmax(f) {
                    if level == Level::Row {
                        return Err(format!("aggregate {name}() in a per-row position"));
                    }
                    return self.aggregate(c, e, f, &name);
                }
                if !FUNCTIONS.contains(&name.as_str()) {
                    return Err(format!(
                        "function {name}() is not on the deterministic list"
                    ));
                }
                if f.filter.is_some() || !f.within_group.is_empty() {
                    return Err(format!("{name}() with FILTER or WITHIN GROUP"));
                }
                if RAISING.contains(&name.as_str()) {
                    self.may_raise(c, f, &name, level)?;
                }
                self.args_at(c, f, level)
            }
            Expr::Subquery(q) => {
                self.scalar_subquery(q, true)?;
                self.rest.push("a subquery".into());
                Ok(())
            }
            Expr::Exists { subquery: q, .. } => {
                self.query(q, true)?;
                self.rest.push("a subquery".into());
                Ok(())
            }
            Expr::In {
                expr,
                target: InTarget::Subquery(subquery),
                ..
            } => {
                self.level_expr(c, expr, level)?;
                self.query(subquery, true)
            }
            other => {
                expr_form_allowed(other)?;
                if let Some(what) = raising_form(other) {
                    if level == Level::Row
                        && !crate::mutation::active(Mutation::ResidueRaisingWhere)
                    {
                        return Err(format!("{what} per row (it can raise an error)"));
                    }
                    self.raises = true;
                }
                let mut kids = Vec::new();
                children(other, &mut kids);
                for k in kids {
                    self.level_expr(c, k, level)?;
                }
                Ok(())
            }
        }
    }

    /// A function that can raise an error: per row, only `abs` of a
    /// dimension, whose values the core shows (checked when it is built).
    pub(super) fn may_raise(
        &mut self,
        c: &Core,
        f: &sqlparser::ast::Function,
        name: &str,
        level: Level,
    ) -> R<()> {
        if level == Level::Group {
            self.raises = true;
            return Ok(());
        }
        if crate::mutation::active(Mutation::ResidueRaisingWhere) {
            return Ok(());
        }
        let first = match &f.args {
            FunctionArguments::List(l) => match l.args.first() {
                Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) => {
                    match &v.value {
                        SqlValue::SingleQuotedString(p) => Some(p.len()),
                        _ => None,
                    }
                }
                _ => None,
            },
            _ => None,
        };
        // A literal pattern of LIKE/GLOB, or a literal strftime format,
        // bounds what the call can do.
        match (name, first) {
            ("like" | "glob", Some(n)) if n <= 50_000 => return Ok(()),
            ("strftime", Some(_)) => return Ok(()),
            _ => {}
        }
        if name == "abs" {
            if let FunctionArguments::List(l) = &f.args {
                if let [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] = l.args.as_slice() {
                    if let Some(d) = self.dim(c, x) {
                        self.abs_dims.insert(d);
                        return Ok(());
                    }
                }
            }
        }
        Err(format!("{name}() per row (it can raise an error)"))
    }

    pub(super) fn args_at(
        &mut self,
        c: &Core,
        f: &sqlparser::ast::Function,
        level: Level,
    ) -> R<()> {
        match &f.args {
            FunctionArguments::None => Ok(()),
            FunctionArguments::List(l) => {
                if !l.clauses.is_empty() {
                    return Err("function argument clauses".into());
                }
                for a in &l.args {
                    match a {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => {
                            self.level_expr(c, x, level)?
                        }
                        _ => return Err("a function argument form".into()),
                    }
                }
                Ok(())
            }
            FunctionArguments::Subquery(_) => Err("a subquery as function arguments".into()),
        }
    }
}

/// The parts of a table name (`main.t` → `["main", "t"]`).
fn name_parts(name: &sqlparser::ast::ObjectName) -> Vec<&str> {
    name.0
        .iter()
        .filter_map(|p| match p {
            ObjectNamePart::Identifier(i) => Some(i.value.as_str()),
            _ => None,
        })
        .collect()
}
