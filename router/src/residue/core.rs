//! The core and its rewrite: the block over the planed table becomes the
//! bound CTE `"pleroma$core"`, and each aggregate over the table's rows the
//! merge of the core's partials.
//!
//! Exact because a merge is only written for an aggregate whose partials
//! give its value over the table's rows (a count, a sum or an extremum of a
//! measure, or of a constant chosen per row by dimensions alone); every
//! other byte of the statement stays the user's.

use crate::mutation::Mutation;
use std::ops::Range;

use sqlparser::ast::{
    CaseWhen, DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    GroupByExpr, Select, TableFactor, Value as SqlValue,
};

use super::allow::{has_aggregate, has_window, visit, INT_OR_TEXT};
use super::walker::{projection, Walker};
use super::{SumTerm, CORE, R};
use crate::affinity::Affinity;
use crate::tokenize::{self, Kind};

/// The name of the core's `json_each` (its rows: one JSON array a group).
pub(super) const JSON_ROW: &str = "\"pleroma$j\"";

/// Why a representative of equal values is declined.
const UNSTABLE: &str =
    "whose values may compare equal and still differ (SQLite shows the first row's)";

/// A block that reads the planed table alone.
pub(super) struct Core<'b> {
    pub(super) alias: String,
    pub(super) entry: usize,
    /// Group terms in Display form.
    pub(super) groups: Vec<String>,
    /// Output aliases of the block.
    pub(super) aliases: Vec<String>,
    pub(super) items: Vec<&'b Expr>,
    /// In a lookup join: the other table's name in the block, and its
    /// columns.
    pub(super) other: Option<String>,
    pub(super) other_cols: Vec<super::OtherColumn>,
}

impl Walker<'_> {
    pub(super) fn core_select(
        &mut self,
        sel: &Select,
        order: &[&Expr],
        limited: bool,
        entry: usize,
        alias: String,
        join: Option<super::walker::LookupJoin<'_>>,
    ) -> R<()> {
        if self.table.is_some_and(|t| t != entry) {
            return Err("two planed tables".into());
        }
        self.table = Some(entry);
        self.cores += 1;
        // The table reference becomes the core, under the same name.
        let relation = match &join {
            Some(j) if !j.planed_first => &sel.from[0].joins[0].relation,
            _ => &sel.from[0].relation,
        };
        let TableFactor::Table { name, alias: a, .. } = relation else {
            unreachable!("checked by planed()");
        };
        let r = self.expr_range(name)?;
        if self.sql[r.clone()] != name.to_string() {
            return Err("a table name whose source text is not whole".into());
        }
        let text = match a {
            Some(_) => quote(CORE),
            None => format!("{} AS {}", quote(CORE), quote(&alias)),
        };
        self.edits.push((r, text));
        let distinct = match &sel.distinct {
            None => false,
            Some(sqlparser::ast::Distinct::Distinct) => true,
            Some(_) => return Err("DISTINCT ON".into()),
        };
        let (items, aliases) = projection(&sel.projection, "a wildcard over the planed table")?;
        let mut c = Core {
            alias,
            entry,
            groups: Vec::new(),
            aliases,
            items,
            other: join.as_ref().map(|j| j.other_alias.clone()),
            other_cols: join
                .as_ref()
                .map(|j| j.other_cols.clone())
                .unwrap_or_default(),
        };
        if let Some(j) = &join {
            // Each core row stands for its group's rows, and every one of
            // them meets the same rows of the other table: the join's
            // condition and every per-row expression read dimensions and
            // the other table only.
            if let Some(on) = j.on {
                self.row_expr(&c, on)?;
            }
            self.joined.push(j.other_table.clone());
            self.rest
                .push(format!("a lookup join to {}", j.other_table));
        }
        let GroupByExpr::Expressions(gexprs, mods) = &sel.group_by else {
            return Err("GROUP BY ALL".into());
        };
        if !mods.is_empty() {
            return Err("GROUP BY modifiers".into());
        }
        for g in gexprs {
            let term = self.resolve_term(&c, g, false)?;
            self.row_expr(&c, term)?;
            if !self.stable(&c, term) {
                return Err(format!("GROUP BY {term}, {UNSTABLE}"));
            }
            c.groups.push(term.to_string());
        }
        if let Some(w) = &sel.selection {
            self.row_expr(&c, w)?;
        }
        let has_agg = c.items.iter().any(|e| has_aggregate(e))
            || sel.having.as_ref().is_some_and(has_aggregate)
            || order.iter().any(|e| has_aggregate(e));
        let grouped = has_agg || !gexprs.is_empty() || sel.having.is_some();
        if self.depth > 1 || self.consumed {
            // The block's rows are read by an outer query, a compound or a
            // CTE, which may group them, take MIN/MAX, or keep one of two
            // equal rows: over the core the rows come in another order
            // (SQLite's may follow an index), so a per-row output must not
            // have values that compare equal and still differ.
            for e in &c.items {
                if !has_aggregate(e) && !self.stable(&c, e) {
                    return Err(format!("{e} read by an outer query, {UNSTABLE}"));
                }
            }
        }
        if grouped {
            if distinct && !order.is_empty() {
                // Which group's key orders a merged DISTINCT row is SQLite's
                // choice.
                return Err("DISTINCT with ORDER BY over aggregated rows".into());
            }
            for e in c.items.clone() {
                self.group_expr(&c, e)?;
            }
            if let Some(h) = &sel.having {
                self.group_expr(&c, h)?;
            }
            for e in order {
                let t = self.resolve_term(&c, e, true)?;
                if !std::ptr::eq(t, *e) {
                    continue;
                }
                self.group_expr(&c, e)?;
            }
            if limited && !c.groups.is_empty() {
                let keys: Vec<String> = order
                    .iter()
                    .map(|e| self.resolve_term(&c, e, true).map(|t| t.to_string()))
                    .collect::<R<_>>()?;
                if let Some(g) = c.groups.iter().find(|g| !keys.contains(g)) {
                    let why =
                        format!("LIMIT without an ORDER BY over every group term ({g} is not)");
                    // The statement's own ORDER BY over output columns: the
                    // cut is checked for ties when it runs.
                    if self.depth != 1 || distinct {
                        return Err(why);
                    }
                    let mut idx = Vec::new();
                    for e in order {
                        let t = self.resolve_term(&c, e, true)?.to_string();
                        match c.items.iter().position(|i| i.to_string() == t) {
                            Some(k) => idx.push(k),
                            None => return Err(why),
                        }
                    }
                    self.cut_keys = Some(idx);
                }
            }
        } else {
            if !distinct {
                return Err("a row list (no aggregate, no GROUP BY, no DISTINCT)".into());
            }
            for e in c.items.clone() {
                if has_window(e) {
                    return Err("a window function over the rows of the table".into());
                }
                self.row_expr(&c, e)?;
                if !self.stable(&c, e) {
                    return Err(format!("DISTINCT {e}, {UNSTABLE}"));
                }
            }
            for e in order {
                let t = self.resolve_term(&c, e, true)?;
                if std::ptr::eq(t, *e) {
                    self.row_expr(&c, e)?;
                }
                // Which row's value orders a merged DISTINCT row is the
                // first SQLite meets in its scan: over the core, another.
                let output = c.items.iter().any(|i| i.to_string() == t.to_string());
                if !output && !crate::mutation::active(Mutation::ResidueDistinctOrder) {
                    return Err("DISTINCT with an ORDER BY term that is not an output".into());
                }
            }
            if limited {
                let keys: Vec<String> = order
                    .iter()
                    .map(|e| self.resolve_term(&c, e, true).map(|t| t.to_string()))
                    .collect::<R<_>>()?;
                if c.items.iter().any(|i| !keys.contains(&i.to_string())) {
                    return Err("LIMIT without an ORDER BY over every DISTINCT output".into());
                }
            }
            self.rest.push("DISTINCT".into());
        }
        Ok(())
    }

    /// Whether no two values of a per-row expression can compare equal
    /// and still differ (1 and 1.0; 'a' and 'A' under NOCASE): of such
    /// values, a group, a DISTINCT row or a MIN/MAX shows the one SQLite
    /// meets first, which over the core is another row. Dimensions hold
    /// INTEGER, TEXT or NULL under BINARY; another table's column is stable
    /// when its affinity turns an integral REAL into an INTEGER or every
    /// number into TEXT or REAL (not BLOB) and its collation is BINARY; a
    /// truth value (a comparison, AND/OR/NOT, BETWEEN, IN, LIKE, IS NULL)
    /// and `||` always are; a CASE, COALESCE, IFNULL, IIF, NULLIF or scalar
    /// MIN/MAX when every value it may give is; arithmetic, `abs` and
    /// `sign` only over integers (dimensions of INTEGER or NUMERIC
    /// affinity, integer literals); a CAST to INTEGER or TEXT, an integer
    /// or string literal, and the functions whose values are INTEGER or
    /// TEXT (`INT_OR_TEXT`). Anything else (a REAL literal, `round`, a
    /// window, a subquery) is not.
    pub(super) fn stable(&self, c: &Core, e: &Expr) -> bool {
        use sqlparser::ast::{BinaryOperator as B, CastKind, DataType, UnaryOperator as U};
        let other_col = |x: &Expr| -> Option<&super::OtherColumn> {
            let other = c.other.as_ref()?;
            let name = match x {
                Expr::CompoundIdentifier(p) => match p.as_slice() {
                    [q, n] if q.value.eq_ignore_ascii_case(other) => &n.value,
                    _ => return None,
                },
                Expr::Identifier(i) => &i.value,
                _ => return None,
            };
            c.other_cols
                .iter()
                .find(|k| k.name.eq_ignore_ascii_case(name))
        };
        // An integer for every row (or NULL).
        fn integral(w: &Walker, c: &Core, x: &Expr) -> bool {
            match x {
                Expr::Nested(i) => integral(w, c, i),
                Expr::Value(v) => {
                    matches!(&v.value, SqlValue::Number(n, _) if n.bytes().all(|b| b.is_ascii_digit()))
                        || matches!(v.value, SqlValue::Null)
                }
                Expr::UnaryOp { expr, .. } => integral(w, c, expr),
                Expr::BinaryOp {
                    left,
                    op: B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo,
                    right,
                } => integral(w, c, left) && integral(w, c, right),
                _ => w.dim(c, x).is_some_and(|d| {
                    matches!(
                        w.shared.entry(c.entry).cols.dim_aff[d],
                        Affinity::Integer | Affinity::Numeric
                    )
                }),
            }
        }
        use crate::catalog::expr::unnamed_args as args;
        match e {
            Expr::Nested(x) => self.stable(c, x),
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => {
                self.dim(c, e).is_some()
                    || other_col(e).is_some_and(|k| {
                        k.aff != Affinity::Blob && k.coll.eq_ignore_ascii_case("BINARY")
                    })
            }
            Expr::Value(v) => match &v.value {
                SqlValue::Number(n, _) => n.bytes().all(|b| b.is_ascii_digit()),
                SqlValue::SingleQuotedString(_) | SqlValue::Null => true,
                _ => false,
            },
            // A truth value: 0, 1 or NULL, whatever it compares.
            Expr::BinaryOp {
                op:
                    B::Eq
                    | B::NotEq
                    | B::Lt
                    | B::LtEq
                    | B::Gt
                    | B::GtEq
                    | B::And
                    | B::Or
                    | B::Is
                    | B::IsNot,
                ..
            }
            | Expr::IsNull(_)
            | Expr::IsNotNull(_)
            | Expr::IsDistinctFrom(..)
            | Expr::IsNotDistinctFrom(..)
            | Expr::Between { .. }
            | Expr::In { .. }
            | Expr::Like { .. }
            | Expr::UnaryOp { op: U::Not, .. } => true,
            Expr::BinaryOp {
                left,
                op: B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo,
                right,
            } => integral(self, c, left) && integral(self, c, right),
            // Text, as `||` (sqlparser's own forms of substr and trim).
            Expr::BinaryOp {
                op: B::StringConcat,
                ..
            }
            | Expr::Substring { .. }
            | Expr::Trim { .. } => true,
            Expr::UnaryOp { expr, .. } => integral(self, c, expr),
            Expr::Cast {
                kind: CastKind::Cast,
                data_type,
                ..
            } => matches!(
                data_type,
                DataType::Integer(_) | DataType::Int(_) | DataType::Text
            ),
            // Its value is one of its results.
            Expr::Case {
                conditions,
                else_result,
                ..
            } => {
                conditions.iter().all(|w| self.stable(c, &w.result))
                    && else_result.as_ref().is_none_or(|x| self.stable(c, x))
            }
            Expr::Function(f) if f.over.is_none() => {
                let name = f.name.to_string().to_ascii_lowercase();
                let a = args(f);
                match name.as_str() {
                    // Their value is one of their arguments.
                    "coalesce" | "ifnull" | "nullif" | "min" | "max" => {
                        a.iter().all(|x| self.stable(c, x))
                    }
                    "iif" | "if" => a.iter().skip(1).all(|x| self.stable(c, x)),
                    "abs" | "sign" => a.iter().all(|x| integral(self, c, x)),
                    n => INT_OR_TEXT.contains(&n),
                }
            }
            _ => false,
        }
    }

    /// A GROUP BY or ORDER BY term: a position or an output alias stands for
    /// the output expression (for ORDER BY the alias wins, for GROUP BY the
    /// column: SQLite's order).
    pub(super) fn resolve_term<'b>(&self, c: &Core<'b>, e: &'b Expr, order: bool) -> R<&'b Expr> {
        if let Expr::Value(v) = e {
            if let SqlValue::Number(n, _) = &v.value {
                let p: usize = n.parse().map_err(|_| "a non-integer position")?;
                return c
                    .items
                    .get(p.wrapping_sub(1))
                    .copied()
                    .ok_or_else(|| "a position out of range".to_owned());
            }
        }
        if let Expr::Identifier(i) = e {
            let name = i.value.to_ascii_lowercase();
            if let Some(k) = c.aliases.iter().position(|a| *a == name) {
                if order || !self.column_first(c, e, &i.value) {
                    return Ok(c.items[k]);
                }
            }
        }
        Ok(e)
    }

    /// Whether a bare name in GROUP BY, HAVING or an ORDER BY expression
    /// names a column of the table before an output alias: SQLite's
    /// resolve.c looks a name up in the FROM tables first (every column,
    /// and rowid/oid/_rowid_), and in the result set's aliases only when no
    /// column matches. The core carries dimensions only, so over it the
    /// rewritten text would find the alias instead.
    pub(super) fn column_first(&self, c: &Core, e: &Expr, name: &str) -> bool {
        if c.other.is_some() {
            // The other table's columns are not known here: any name may
            // be one of them.
            return true;
        }
        if crate::mutation::active(Mutation::ResidueAliasBeforeColumn) {
            return self.dim(c, e).is_some();
        }
        crate::catalog::names_a_column(&self.shared.entry(c.entry).cols.columns, name)
    }

    /// The dimension a column reference names, if it names one.
    pub(super) fn dim(&self, c: &Core, e: &Expr) -> Option<usize> {
        let name = match e {
            Expr::Identifier(i) => &i.value,
            Expr::CompoundIdentifier(p) => match p.as_slice() {
                [q, col] if q.value.eq_ignore_ascii_case(&c.alias) => &col.value,
                _ => return None,
            },
            _ => return None,
        };
        // An expression dimension's name is no column: never matched here.
        let def = &self.shared.entry(c.entry).def;
        (0..def.dims.len()).find(|&k| !def.is_expr(k) && def.dims[k].eq_ignore_ascii_case(name))
    }

    pub(super) fn measure(&self, c: &Core, e: &Expr) -> Option<usize> {
        let name = match e {
            Expr::Identifier(i) => &i.value,
            Expr::CompoundIdentifier(p) => match p.as_slice() {
                [q, col] if q.value.eq_ignore_ascii_case(&c.alias) => &col.value,
                _ => return None,
            },
            Expr::Nested(x) => return self.measure(c, x),
            _ => return None,
        };
        let def = &self.shared.entry(c.entry).def;
        def.measures
            .iter()
            .position(|m| m.eq_ignore_ascii_case(name))
    }

    /// A column reference that is not a dimension: the reason it blocks.
    pub(super) fn not_a_dim(&self, c: &Core, e: &Expr) -> String {
        let def = &self.shared.entry(c.entry).def;
        if let Some(m) = self.measure(c, e) {
            return format!("measure {} outside an aggregate", def.measures[m]);
        }
        format!(
            "column {e} is not a dimension of the plane on {}",
            def.table
        )
    }

    /// An aggregate over the table's rows: the merge of the core's partials.
    pub(super) fn aggregate(
        &mut self,
        c: &Core,
        whole: &Expr,
        f: &sqlparser::ast::Function,
        name: &str,
    ) -> R<()> {
        if !f.within_group.is_empty()
            || f.null_treatment.is_some()
            || !matches!(f.parameters, FunctionArguments::None)
        {
            return Err(format!("{name}() with WITHIN GROUP or parameters"));
        }
        let FunctionArguments::List(list) = &f.args else {
            return Err(format!("{name}() without an argument list"));
        };
        if !list.clauses.is_empty() {
            return Err(format!("{name}() with clauses"));
        }
        let distinct = matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct));
        let filter = match &f.filter {
            Some(p) => {
                self.row_expr(c, p)?;
                format!(" FILTER (WHERE {})", self.text(p)?)
            }
            None => String::new(),
        };
        let r = self.expr_range(whole)?;
        let n = quote("pleroma$n");
        let arg = match list.args.as_slice() {
            [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] if name == "count" && !distinct => {
                if c.other.is_some() && crate::mutation::active(Mutation::LookupCountPerKey) {
                    // The mutation: a joined core row counted once.
                    self.aggs.push("COUNT(*)".into());
                    return Ok(());
                }
                self.edits
                    .push((r, format!("COALESCE(SUM({n}){filter}, 0)")));
                self.aggs.push("COUNT(*)".into());
                return Ok(());
            }
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] => x,
            _ => return Err(format!("{name}() with other than one argument")),
        };
        let v = match self.vform(c, arg) {
            Ok(v) => v,
            Err(e) if mentions_measure(self, c, arg) => return Err(e),
            Err(_) => {
                // Over dimensions only: the same set of values over the
                // core's rows as over the table's.
                self.row_expr(c, arg)?;
                if (distinct && name != "count" || matches!(name, "min" | "max"))
                    && !self.stable(c, arg)
                {
                    return Err(format!("{name}() of {arg}, {UNSTABLE}"));
                }
                if distinct || matches!(name, "min" | "max") {
                    self.aggs.push(format!("{name}() of dimensions"));
                    return Ok(());
                }
                if name == "count" {
                    let x = self.text(arg)?;
                    self.edits.push((
                        r,
                        format!(
                            "COALESCE(SUM(CASE WHEN ({x}) IS NULL THEN 0 ELSE {n} END){filter}, 0)"
                        ),
                    ));
                    self.aggs.push("COUNT() of dimensions".into());
                    return Ok(());
                }
                return Err(format!("{name}() of a dimension expression"));
            }
        };
        if distinct {
            return Err(format!("{name}(DISTINCT) over a measure"));
        }
        let sum = render(&v, &|m| quote(&format!("pleroma$s{m}")), "0", &n, "NULL");
        let cnt = render(&v, &|m| quote(&format!("pleroma$c{m}")), &n, &n, "0");
        let lo = render(&v, &|m| quote(&format!("pleroma$lo{m}")), "0", "1", "NULL");
        let hi = render(&v, &|m| quote(&format!("pleroma$hi{m}")), "0", "1", "NULL");
        let mut ms = Vec::new();
        v.measures(&mut ms);
        let summed = matches!(name, "sum" | "total" | "avg" | "pleromasumexact");
        if summed {
            // One accumulator adds whichever measure each row's CASE
            // picks: its bound is over all of them together.
            let mut measures = ms.clone();
            measures.sort_unstable();
            measures.dedup();
            self.sums.push(SumTerm {
                measures,
                ones: v.has_one(),
            });
        }
        if matches!(name, "min" | "max") {
            self.extrema.extend(ms.iter().copied());
        }
        self.measures.extend(ms.iter().copied());
        if name == "avg" && tokenize::code(self.text(whole)?).any(|t| t.kind == Kind::Variable) {
            return Err("AVG over a parameter".into());
        }
        let text = match name {
            "count" => format!("COALESCE(SUM({cnt}){filter}, 0)"),
            "sum" => format!("SUM({sum}){filter}"),
            "total" => format!("TOTAL({sum}){filter}"),
            "avg" => format!("(CAST(SUM({sum}){filter} AS REAL) / SUM({cnt}){filter})"),
            "min" => format!("MIN({lo}){filter}"),
            "max" => format!("MAX({hi}){filter}"),
            "pleromasumexact" => format!("PleromaSumExact({sum}){filter}"),
            _ => return Err(format!("aggregate {name}()")),
        };
        self.aggs.push(format!("{}()", name.to_ascii_uppercase()));
        self.edits.push((r, text));
        Ok(())
    }

    /// An aggregate argument whose per-row value is a measure or a constant
    /// chosen by dimensions alone.
    pub(super) fn vform(&mut self, c: &Core, e: &Expr) -> R<V> {
        match e {
            Expr::Nested(x) => self.vform(c, x),
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => self
                .measure(c, e)
                .map(V::M)
                .ok_or_else(|| "an aggregate of a column that is not a measure".to_owned()),
            Expr::Value(v) => match &v.value {
                SqlValue::Number(n, false) if n == "0" => Ok(V::Zero),
                SqlValue::Number(n, false) if n == "1" => Ok(V::One),
                SqlValue::Null => Ok(V::Null),
                _ => Err("an aggregate of a literal other than 0, 1 or NULL".into()),
            },
            Expr::Case {
                operand: None,
                conditions,
                else_result,
                ..
            } => {
                let mut arms = Vec::new();
                for CaseWhen { condition, result } in conditions {
                    self.row_expr(c, condition)?;
                    let t = self.text(condition)?.to_owned();
                    arms.push((t, self.vform(c, result)?));
                }
                let other = match else_result {
                    Some(x) => Some(Box::new(self.vform(c, x)?)),
                    None => None,
                };
                Ok(V::Case(arms, other))
            }
            _ => Err("an aggregate over an expression of a measure".into()),
        }
    }
}

/// The per-row value of an aggregate argument (see `Walker::vform`).
#[derive(Debug)]
pub(super) enum V {
    M(usize),
    Zero,
    One,
    Null,
    Case(Vec<(String, V)>, Option<Box<V>>),
}

impl V {
    pub(super) fn measures(&self, out: &mut Vec<usize>) {
        match self {
            V::M(m) => out.push(*m),
            V::Case(arms, other) => {
                arms.iter().for_each(|(_, v)| v.measures(out));
                if let Some(o) = other {
                    o.measures(out);
                }
            }
            _ => {}
        }
    }

    pub(super) fn has_one(&self) -> bool {
        match self {
            V::One => true,
            V::Case(arms, other) => {
                arms.iter().any(|(_, v)| v.has_one()) || other.as_ref().is_some_and(|o| o.has_one())
            }
            _ => false,
        }
    }
}

/// A per-core-row value: a measure's partial, or what 0, 1 and NULL
/// contribute for the row's whole group of table rows.
pub(super) fn render(
    v: &V,
    m: &dyn Fn(usize) -> String,
    zero: &str,
    one: &str,
    null: &str,
) -> String {
    match v {
        V::M(i) => m(*i),
        V::Zero => zero.to_owned(),
        V::One => one.to_owned(),
        V::Null => null.to_owned(),
        V::Case(arms, other) => {
            let mut s = "CASE".to_owned();
            for (cond, r) in arms {
                s.push_str(&format!(
                    " WHEN ({cond}) THEN {}",
                    render(r, m, zero, one, null)
                ));
            }
            match other {
                Some(o) => s.push_str(&format!(" ELSE {}", render(o, m, zero, one, null))),
                None => s.push_str(&format!(" ELSE {null}")),
            }
            s.push_str(" END");
            s
        }
    }
}

pub(super) fn mentions_measure(w: &Walker, c: &Core, e: &Expr) -> bool {
    let mut found = false;
    visit(e, &mut |x| {
        if w.measure(c, x).is_some() {
            found = true;
        }
        !found
    });
    found
}

/// The head of the core's CTE, up to the JSON text of its rows: its columns
/// (the dimensions under the casts of their affinities, the row count, four
/// partials per measure) and the select over `json_each`.
pub(super) fn cte_head(
    dim_names: &[String],
    dims: &[usize],
    dim_aff: &[Affinity],
    measures: &[usize],
) -> String {
    // The core: CTE columns, then the select over the JSON rows.
    let mut names = Vec::new();
    let mut sel = Vec::new();
    let mut k = 0;
    let mut col = |names: &mut Vec<String>, name: String, cast: Option<&str>, blob: bool| {
        let v = format!("value->>{k}");
        sel.push(match cast {
            // No affinity (an untyped, BLOB or STRICT ANY column) is BLOB
            // affinity, which a comparison with a TEXT operand keeps (5 is
            // not '5'); `value->>k` has none at all, which takes the TEXT.
            // A column of `json_each` (declared without a type) has BLOB
            // affinity, and a scalar subquery has its column's.
            _ if blob => format!(
                "(SELECT \"pleroma$e\".value FROM json_each({JSON_ROW}.value, '$[{k}]') AS \"pleroma$e\")"
            ),
            Some(c) => format!("CAST({v} AS {c})"),
            None => v,
        });
        names.push(quote(&name));
        k += 1;
    };
    for (&d, a) in dims.iter().zip(dim_aff) {
        let cast = match a {
            Affinity::Integer => Some("INTEGER"),
            Affinity::Text => Some("TEXT"),
            Affinity::Numeric => Some("NUMERIC"),
            _ => None,
        };
        let blob =
            *a == Affinity::Blob && !crate::mutation::active(Mutation::ResidueBlobAffinityLost);
        col(&mut names, dim_names[d].clone(), cast, blob);
    }
    col(&mut names, "pleroma$n".into(), None, false);
    for &m in measures {
        for p in ["c", "s", "lo", "hi"] {
            col(&mut names, format!("pleroma${p}{m}"), None, false);
        }
    }
    format!(
        "{}({}) AS (SELECT {} FROM json_each('",
        quote(CORE),
        names.join(", "),
        sel.join(", ")
    )
}

/// `sql` with every edit applied (sorted; overlapping edits decline).
pub(super) fn rewrite(sql: &str, edits: &mut [(Range<usize>, String)]) -> R<String> {
    edits.sort_by_key(|(r, _)| (r.start, r.end));
    for pair in edits.windows(2) {
        if pair[0].0.end > pair[1].0.start {
            return Err("overlapping rewrites".into());
        }
    }
    let mut rewritten = String::with_capacity(sql.len() + 64);
    let mut pos = 0;
    for (r, text) in edits.iter() {
        rewritten.push_str(&sql[pos..r.start]);
        rewritten.push_str(text);
        pos = r.end;
    }
    rewritten.push_str(&sql[pos..]);
    Ok(rewritten)
}

pub(super) use crate::tokenize::quote;
