//! `PRAGMA pleroma_advise`: from the SELECTs a connection ran on SQLite,
//! the `pleroma_attach` that would serve most of them.
//!
//! Each SELECT that no plane answered is noted by its text ([`Declined`],
//! one entry per distinct text, at most [`Declined::MAX`]). At the PRAGMA,
//! per table that such statements read:
//!
//! 1. the statements still declined now, and the table's columns each uses:
//!    inside an aggregate's parentheses as a measure (not where it is
//!    compared, nor after `DISTINCT`), anywhere else as a dimension, and
//!    each `GROUP BY` item that is an expression over the table's columns
//!    (or an output's alias for one) as an expression dimension;
//! 2. each column and expression read once over a sample of the table (16
//!    rowid ranges, 100,000 rows in all): a dimension holds at most 65,536
//!    distinct INTEGER, TEXT or NULL values, and fewer than half as many as
//!    the sampled rows (else its plane is as large as the table); a measure
//!    only INTEGER or NULL;
//!    what fails is `unused`, with why;
//! 3. the proposals: every statement's own plane (its usable dimensions and
//!    measures) and their union (the most used dimensions, at most 6), each
//!    checked by `pleroma_attach`'s own validation, then built from the
//!    sample and asked, statement by statement, whether the classifier
//!    serves it from that plane (the cells, bytes and `serves` come from
//!    there);
//! 4. before a proposal is shown, its columns are checked over the whole
//!    table in one scan (distinct values and storage classes), as the
//!    attach will find them: the advice is what `pleroma_attach` accepts.

use ahash::AHashMap;
use rusqlite::types::Value;

use crate::catalog::{self, PlaneDef, PlaneEntry};
use crate::classify::{self, Classified};
use crate::planes::Planes;
use crate::rows::Rows;
use crate::tokenize::{self, Kind, Token};

/// The distinct texts of the SELECTs no plane answered, in the order first
/// seen.
#[derive(Default)]
pub(crate) struct Declined {
    index: AHashMap<String, ()>,
    texts: Vec<String>,
    bytes: usize,
}

impl Declined {
    /// Most texts kept, and most bytes of them; later ones are not noted.
    pub const MAX: usize = 1000;
    pub const MAX_BYTES: usize = 4 << 20;

    /// Note a statement that SQLite ran instead of a plane.
    pub fn note(&mut self, sql: &str) {
        if self.texts.len() >= Self::MAX
            || self.bytes + sql.len() > Self::MAX_BYTES
            || self.index.contains_key(sql)
        {
            return;
        }
        self.bytes += sql.len();
        self.index.insert(sql.to_owned(), ());
        self.texts.push(sql.to_owned());
    }
}

/// Rows sampled per table, over this many rowid ranges.
const SAMPLE_ROWS: i64 = 100_000;
const SAMPLE_RANGES: i64 = 16;
/// Most distinct values of a dimension (`pleroma_attach`'s cap).
const CAP: i64 = catalog::DIM_CAP as i64;
/// Most proposals per table.
const MOST: usize = 4;

/// A dimension a statement groups or filters by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Dim {
    Column(String),
    /// An expression over the table's columns, as SQL without qualifiers.
    Expr(String),
}

/// What one statement reads of one table.
#[derive(Debug, Default)]
struct Usage {
    dims: Vec<Dim>,
    measures: Vec<String>,
}

fn push_new<T: PartialEq>(v: &mut Vec<T>, x: T) {
    if !v.contains(&x) {
        v.push(x);
    }
}

const AGGREGATES: &[&str] = &["count", "sum", "total", "avg", "min", "max"];
const COMPARED: &[&str] = &[
    "=", "==", "<>", "!=", "<", ">", "<=", ">=", "in", "between", "is", "like", "glob", "not",
    "isnull", "notnull", "when",
];

fn compared(t: Option<&Token<'_>>) -> bool {
    t.is_some_and(|t| COMPARED.iter().any(|c| t.text.eq_ignore_ascii_case(c)))
}

/// The column of `columns` a name token names, in the table's spelling.
fn column_of<'c>(t: &Token<'_>, columns: &'c [String]) -> Option<&'c String> {
    if !matches!(t.kind, Kind::Word | Kind::Quoted) {
        return None;
    }
    let v = t.value();
    columns.iter().find(|c| c.eq_ignore_ascii_case(&v))
}

/// What statement `sql` reads of `table` (whose columns are `columns`);
/// `None` when it is no SELECT or does not name the table.
fn usage(sql: &str, table: &str, columns: &[String]) -> Option<Usage> {
    let toks: Vec<Token<'_>> = tokenize::code(sql)
        .filter(|t| t.kind != Kind::Semi)
        .collect();
    let first = toks.first()?;
    if !(first.is("select") || first.is("with")) {
        return None;
    }
    let names_table = toks.iter().enumerate().any(|(i, t)| {
        matches!(t.kind, Kind::Word | Kind::Quoted)
            && t.value().eq_ignore_ascii_case(table)
            && toks.get(i + 1).is_none_or(|n| n.text != "(")
    });
    if !names_table {
        return None;
    }
    let mut u = Usage::default();
    // Per open parenthesis: whether it holds an aggregate's arguments.
    let mut agg: Vec<bool> = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| &toks[p]);
        let next = toks.get(i + 1);
        match t.text {
            "(" => {
                let opens = prev.is_some_and(|p| {
                    p.kind == Kind::Word
                        && AGGREGATES.iter().any(|a| p.text.eq_ignore_ascii_case(a))
                });
                agg.push(opens || agg.last() == Some(&true));
                continue;
            }
            ")" => {
                agg.pop();
                continue;
            }
            _ => {}
        }
        let Some(c) = column_of(t, columns) else {
            continue;
        };
        // A qualifier (`e.` of `e.amount`) or a function's name is no column.
        if next.is_some_and(|n| n.text == "." || n.text == "(") {
            continue;
        }
        let in_agg = agg.last() == Some(&true);
        let distinct = prev.is_some_and(|p| p.is("distinct"));
        if in_agg && !distinct && !compared(prev) && !compared(next) {
            push_new(&mut u.measures, c.clone());
        } else {
            push_new(&mut u.dims, Dim::Column(c.clone()));
        }
    }
    for item in group_by_items(&toks) {
        if let Some(d) = group_dim(&toks, item, columns) {
            push_new(&mut u.dims, d);
        }
    }
    // A column both aggregated and grouped is a dimension.
    u.measures
        .retain(|m| !u.dims.contains(&Dim::Column(m.clone())));
    Some(u)
}

/// The token ranges of every `GROUP BY` item of the statement.
fn group_by_items(toks: &[Token<'_>]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < toks.len() {
        if !(toks[i].is("group") && toks[i + 1].is("by")) {
            i += 1;
            continue;
        }
        let (mut depth, mut start) = (0i32, i + 2);
        let mut j = start;
        while j < toks.len() {
            let t = &toks[j];
            match t.text {
                "(" => depth += 1,
                ")" if depth == 0 => break,
                ")" => depth -= 1,
                "," if depth == 0 => {
                    out.push(start..j);
                    start = j + 1;
                }
                _ if depth == 0
                    && [
                        "having",
                        "order",
                        "limit",
                        "window",
                        "union",
                        "except",
                        "intersect",
                    ]
                    .iter()
                    .any(|k| t.is(k)) =>
                {
                    break
                }
                _ => {}
            }
            j += 1;
        }
        out.push(start..j);
        i = j;
    }
    out
}

/// A `GROUP BY` item as an expression dimension: an expression that reads
/// the table's columns, or a bare name that is an output's alias for one.
fn group_dim(toks: &[Token<'_>], item: std::ops::Range<usize>, columns: &[String]) -> Option<Dim> {
    let slice = &toks[item];
    let expr = match slice {
        [] => return None,
        [one] if column_of(one, columns).is_some() => return None,
        // `e.cc`: the column itself.
        [q, dot, one]
            if dot.text == "."
                && matches!(q.kind, Kind::Word | Kind::Quoted)
                && column_of(one, columns).is_some() =>
        {
            return None
        }
        [one] if matches!(one.kind, Kind::Word | Kind::Quoted) => aliased(toks, &one.value())?,
        _ => slice,
    };
    if !expr.iter().any(|t| column_of(t, columns).is_some()) || expr.len() < 3 {
        return None;
    }
    // Without qualifiers: `e.ts` is the table's `ts`.
    let mut text = String::new();
    let mut k = 0;
    while k < expr.len() {
        let t = &expr[k];
        if matches!(t.kind, Kind::Word | Kind::Quoted)
            && expr.get(k + 1).is_some_and(|n| n.text == ".")
        {
            k += 2;
            continue;
        }
        if !text.is_empty() && needs_space(&text, t.text) {
            text.push(' ');
        }
        text.push_str(t.text);
        k += 1;
    }
    Some(Dim::Expr(text))
}

fn needs_space(before: &str, next: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '\'' || c == '"';
    let (a, b) = (before.chars().last(), next.chars().next());
    matches!((a, b), (Some(a), Some(b)) if word(a) && word(b))
        || next == "||"
        || before.ends_with(',')
}

/// The expression of the output `... expr AS alias ...` (before FROM).
fn aliased<'t, 'a>(toks: &'t [Token<'a>], alias: &str) -> Option<&'t [Token<'a>]> {
    let mut depth = 0i32;
    let mut start = 1;
    for (i, t) in toks.iter().enumerate() {
        match t.text {
            "(" => depth += 1,
            ")" => depth -= 1,
            "," if depth == 0 => start = i + 1,
            _ => {}
        }
        if depth == 0 && t.is("from") {
            return None;
        }
        if depth == 0
            && t.is("as")
            && toks.get(i + 1).is_some_and(|a| {
                matches!(a.kind, Kind::Word | Kind::Quoted) && a.value().eq_ignore_ascii_case(alias)
            })
        {
            let s = &toks[start..i];
            return Some(match s.first() {
                Some(f) if f.is("select") || f.is("distinct") || f.is("all") => &s[1..],
                _ => s,
            });
        }
    }
    None
}

/// What the sample and the table say of one column or expression.
#[derive(Clone, Debug, Default)]
struct Facts {
    distinct: i64,
    /// Rows read.
    rows: i64,
    /// A TEXT value in a column of INTEGER or NUMERIC affinity (the router
    /// declines what such a dimension groups or filters).
    text_in_numeric: bool,
    /// A measure whose absolute values add past 2^63: its sums may pass
    /// 64 bits, which the router leaves to SQLite.
    may_overflow: bool,
    /// Holds a REAL or BLOB value (a dimension cannot), or anything but
    /// INTEGER and NULL (a measure cannot).
    not_dim: bool,
    not_measure: bool,
}

/// The table's user-visible columns (no hidden ones), and those of them
/// with INTEGER or NUMERIC affinity.
fn table_columns(
    db: &rusqlite::Connection,
    table: &str,
) -> rusqlite::Result<(Vec<String>, Vec<String>)> {
    let strict = catalog::is_strict(db, table);
    let cols: Vec<(String, String)> = db
        .prepare("SELECT name, type FROM pragma_table_info(?1, 'main')")?
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let numeric = cols
        .iter()
        .filter(|(_, decl)| {
            matches!(
                crate::affinity::Affinity::of_column(decl, strict),
                crate::affinity::Affinity::Integer | crate::affinity::Affinity::Numeric
            )
        })
        .map(|(n, _)| n.clone())
        .collect();
    Ok((cols.into_iter().map(|(n, _)| n).collect(), numeric))
}

/// Why `pleroma_attach`'s comma-separated list cannot name a column.
fn unnameable(c: &str) -> Option<&'static str> {
    if c.contains(',') {
        Some("its name holds a comma, which pleroma_attach's list cannot give")
    } else if c.trim() != c || c.is_empty() {
        Some("its name begins or ends with a space, which pleroma_attach's list cannot give")
    } else {
        None
    }
}

/// `FROM` text of a sample of `table`: 16 rowid ranges across it, or its
/// first rows when it has no rowid.
fn sample_from(db: &rusqlite::Connection, table: &str) -> String {
    let q = catalog::quote(table);
    let span = db.query_row(
        &format!("SELECT min(rowid), max(rowid) FROM main.{q}"),
        [],
        |r| Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?)),
    );
    match span {
        Ok((Some(lo), Some(hi))) if (hi as i128 - lo as i128) > SAMPLE_ROWS as i128 => {
            let per = SAMPLE_ROWS / SAMPLE_RANGES;
            let step = ((hi as i128 - lo as i128) / SAMPLE_RANGES as i128) as i64;
            let ranges: Vec<String> = (0..SAMPLE_RANGES)
                .map(|k| {
                    let a = lo + k * step;
                    format!("rowid BETWEEN {a} AND {}", a.saturating_add(per - 1))
                })
                .collect();
            format!("(SELECT * FROM main.{q} WHERE {})", ranges.join(" OR "))
        }
        Ok(_) => format!("main.{q}"),
        Err(_) => format!("(SELECT * FROM main.{q} LIMIT {SAMPLE_ROWS})"),
    }
}

/// SQL for a dimension over the table's rows.
fn dim_sql(d: &Dim) -> String {
    match d {
        Dim::Column(c) => catalog::quote(c),
        Dim::Expr(e) => format!("({e})"),
    }
}

/// Facts of each dimension and measure over `from`, in one scan
/// (`numeric`: the columns of INTEGER or NUMERIC affinity).
fn facts(
    db: &rusqlite::Connection,
    from: &str,
    dims: &[Dim],
    numeric: &[String],
    measures: &[String],
) -> rusqlite::Result<(Vec<Facts>, Vec<Facts>)> {
    let mut list = Vec::new();
    for d in dims {
        let s = dim_sql(d);
        list.push(format!(
            "(SELECT count(*) FROM (SELECT DISTINCT {s} FROM {from} LIMIT {}))",
            CAP + 1
        ));
        list.push(format!("coalesce(max(typeof({s}) IN ('real', 'blob')), 0)"));
        let num = matches!(d, Dim::Column(c) if numeric.contains(c));
        list.push(if num {
            format!("coalesce(max(typeof({s}) = 'text'), 0)")
        } else {
            "0".into()
        });
    }
    for m in measures {
        let s = catalog::quote(m);
        list.push(format!(
            "coalesce(max(typeof({s}) NOT IN ('integer', 'null')), 0)"
        ));
        // As REAL: `abs` of -2^63 as an integer raises "integer overflow".
        list.push(format!(
            "coalesce(total(abs(CAST({s} AS REAL))) >= 9.2e18, 0)"
        ));
    }
    if list.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let sql = format!("SELECT {}, count(*) FROM {from}", list.join(", "));
    db.query_row(&sql, [], |r| {
        let rows: i64 = r.get(list.len())?;
        let flag = |i: usize| -> rusqlite::Result<bool> { Ok(r.get::<_, i64>(i)? != 0) };
        let mut ds = Vec::new();
        for k in 0..dims.len() {
            ds.push(Facts {
                rows,
                distinct: r.get(3 * k)?,
                not_dim: flag(3 * k + 1)?,
                text_in_numeric: flag(3 * k + 2)?,
                ..Facts::default()
            });
        }
        let mut ms = Vec::new();
        for k in 0..measures.len() {
            let at = 3 * dims.len() + 2 * k;
            ms.push(Facts {
                not_measure: flag(at)?,
                may_overflow: flag(at + 1)?,
                ..Facts::default()
            });
        }
        Ok((ds, ms))
    })
}

/// One proposal.
struct Proposal {
    dims: Vec<Dim>,
    measures: Vec<String>,
    def: PlaneDef,
    /// Indexes of the table's statements it serves.
    serves: Vec<usize>,
    cells: i64,
    bytes: i64,
}

/// A dimension as `pleroma_attach` takes it (an expression with a name).
fn dim_text(d: &Dim, taken: &mut Vec<String>, columns: &[String]) -> String {
    match d {
        Dim::Column(c) => c.clone(),
        Dim::Expr(e) => {
            let base: String = {
                let mut toks = tokenize::code(e);
                let f = toks
                    .next()
                    .map(|t| t.text.to_ascii_lowercase())
                    .unwrap_or_default();
                let c = tokenize::code(e)
                    .find(|t| column_of(t, columns).is_some())
                    .map(|t| t.value().to_ascii_lowercase())
                    .unwrap_or_default();
                let f: String = f
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let c: String = c
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                match (f.is_empty(), c.is_empty()) {
                    (false, false) => format!("{f}_{c}"),
                    (false, true) => f,
                    _ => "expr".into(),
                }
            };
            let mut name = base.clone();
            let mut n = 2;
            while taken.iter().any(|t| t.eq_ignore_ascii_case(&name))
                || catalog::names_a_column(columns, &name)
            {
                name = format!("{base}_{n}");
                n += 1;
            }
            taken.push(name.clone());
            format!("{e} AS {name}")
        }
    }
}

/// The `PRAGMA pleroma_attach` text of a proposal.
fn statement(table: &str, dims: &[String], measures: &[String], name: Option<&str>) -> String {
    let lit = |s: &str| format!("'{}'", s.replace('\'', "''"));
    let mut args = vec![lit(table), lit(&dims.join(", ")), lit(&measures.join(", "))];
    if let Some(n) = name {
        args.push(lit(n));
    }
    format!("PRAGMA pleroma_attach({})", args.join(", "))
}

/// `PRAGMA pleroma_advise` (`only`: one table).
///
/// Cost: each noted text classified once against the planes there are;
/// per table with statements, one scan of the sample and, per proposal, a
/// plane built from it and one scan of the whole table.
pub(crate) fn advise(
    db: &rusqlite::Connection,
    planes: &Planes,
    declined: &Declined,
    only: Option<&str>,
) -> Result<Rows, String> {
    let sql_err = |e: rusqlite::Error| format!("pleroma_advise: {e}");
    let mut tables: Vec<String> = db
        .prepare(
            "SELECT name FROM main.sqlite_schema WHERE type = 'table' \
             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE 'pleroma\\_%' ESCAPE '\\' \
             AND coalesce(sql, '') NOT LIKE 'CREATE VIRTUAL%' ORDER BY name",
        )
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(sql_err)?;
    if let Some(t) = only {
        tables.retain(|x| x.eq_ignore_ascii_case(t));
        if tables.is_empty() {
            return Err(format!("pleroma_advise: no such table: {t}"));
        }
    }
    // Still declined now: a statement some plane serves since is no
    // reason to attach another.
    let still: Vec<&str> = declined
        .texts
        .iter()
        .map(String::as_str)
        .filter(|s| {
            matches!(
                classify::classify(db, planes, s, false),
                Classified::Declined(_)
            )
        })
        .collect();
    let mut rows = Vec::new();
    for table in &tables {
        let (columns, numeric) = table_columns(db, table).map_err(sql_err)?;
        let stmts: Vec<(&str, Usage)> = still
            .iter()
            .filter_map(|s| usage(s, table, &columns).map(|u| (*s, u)))
            .collect();
        if stmts.is_empty() {
            continue;
        }
        for p in propose(db, planes, table, &columns, &numeric, &stmts)? {
            rows.push(p);
        }
    }
    Ok(Rows {
        columns: [
            "table",
            "statement",
            "serves",
            "declined",
            "cells",
            "bytes",
            "unused",
            "which",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows: rows.into(),
    })
}

/// The rows of one table's proposals, best first.
fn propose(
    db: &rusqlite::Connection,
    planes: &Planes,
    table: &str,
    columns: &[String],
    numeric: &[String],
    stmts: &[(&str, Usage)],
) -> Result<Vec<Vec<Value>>, String> {
    let sql_err = |e: rusqlite::Error| format!("pleroma_advise: {e}");
    // Every dimension and measure any statement uses, most used first.
    let mut dim_use: Vec<(Dim, usize)> = Vec::new();
    let mut meas_use: Vec<(String, usize)> = Vec::new();
    for (_, u) in stmts {
        for d in &u.dims {
            match dim_use.iter_mut().find(|(x, _)| x == d) {
                Some((_, n)) => *n += 1,
                None => dim_use.push((d.clone(), 1)),
            }
        }
        for m in &u.measures {
            match meas_use.iter_mut().find(|(x, _)| x == m) {
                Some((_, n)) => *n += 1,
                None => meas_use.push((m.clone(), 1)),
            }
        }
    }
    dim_use.sort_by(|a, b| b.1.cmp(&a.1));
    meas_use.sort_by(|a, b| b.1.cmp(&a.1));
    // A measure that is no INTEGER column may still be a dimension
    // (`MIN(day)`, `SUM(CASE WHEN plan …)`).
    let all_dims: Vec<Dim> = dim_use.iter().map(|d| d.0.clone()).collect();
    let all_meas: Vec<String> = meas_use.iter().map(|m| m.0.clone()).collect();
    let from = sample_from(db, table);
    let as_dims: Vec<Dim> = all_dims
        .iter()
        .cloned()
        .chain(all_meas.iter().map(|m| Dim::Column(m.clone())))
        .collect();
    // An expression SQLite cannot evaluate over the table fails the scan:
    // each is tried alone first.
    let mut unused: Vec<(String, String)> = Vec::new();
    let mut dims_ok: Vec<Dim> = Vec::new();
    for d in &as_dims {
        if let Dim::Expr(e) = d {
            if let Err(e2) = facts(db, &from, std::slice::from_ref(d), numeric, &[]) {
                unused.push((
                    e.clone(),
                    format!("SQLite cannot evaluate it over the table: {e2}"),
                ));
                continue;
            }
        }
        dims_ok.push(d.clone());
    }
    let (dfacts, mfacts) = facts(db, &from, &dims_ok, numeric, &all_meas).map_err(sql_err)?;
    let dim_fact = |d: &Dim| {
        if matches!(d, Dim::Column(c) if unnameable(c).is_some()) {
            return None;
        }
        dims_ok
            .iter()
            .position(|x| x == d)
            .map(|i| dfacts[i].clone())
    };
    let good_measure = |m: &String| {
        let k = all_meas.iter().position(|x| x == m).expect("a measure");
        !mfacts[k].not_measure && !mfacts[k].may_overflow && unnameable(m).is_none()
    };
    let why_not_dim = |f: &Facts| -> Option<String> {
        if f.not_dim {
            Some("holds REAL or BLOB values".into())
        } else if f.text_in_numeric {
            Some("holds TEXT values in a column of numeric affinity, which the router leaves to SQLite".into())
        } else if f.distinct > CAP {
            Some(format!("more than {CAP} distinct values"))
        } else if f.rows >= 100 && f.distinct * 2 > f.rows {
            Some(format!(
                "{} distinct values in {} sampled rows: a plane over it is as large as the table",
                f.distinct, f.rows
            ))
        } else {
            None
        }
    };
    // Each statement's own plane, and the union.
    let mut cands: Vec<(Vec<Dim>, Vec<String>)> = Vec::new();
    let usable = |u: &Usage| -> (Vec<Dim>, Vec<String>) {
        let mut ds: Vec<Dim> = u
            .dims
            .iter()
            .filter(|d| dim_fact(d).is_some_and(|f| why_not_dim(&f).is_none()))
            .cloned()
            .collect();
        let mut ms = Vec::new();
        for m in &u.measures {
            if good_measure(m) {
                ms.push(m.clone());
            } else if let Some(f) = dim_fact(&Dim::Column(m.clone())) {
                if why_not_dim(&f).is_none() {
                    push_new(&mut ds, Dim::Column(m.clone()));
                }
            }
        }
        (ds, ms)
    };
    let mut union_d: Vec<Dim> = Vec::new();
    let mut union_m: Vec<String> = Vec::new();
    for (_, u) in stmts {
        let (ds, ms) = usable(u);
        for d in &ds {
            push_new(&mut union_d, d.clone());
        }
        for m in &ms {
            push_new(&mut union_m, m.clone());
        }
        if ds.len() <= 6 {
            push_new(&mut cands, (ds, ms));
        }
    }
    union_d
        .sort_by_key(|d| std::cmp::Reverse(dim_use.iter().find(|x| &x.0 == d).map_or(0, |x| x.1)));
    union_d.truncate(6);
    cands.insert(0, (union_d, union_m));
    for d in &all_dims {
        let name = match d {
            Dim::Column(c) => c.clone(),
            Dim::Expr(e) => e.clone(),
        };
        if let Some(why) = dim_fact(d).as_ref().and_then(why_not_dim) {
            push_new(&mut unused, (name, why));
        }
    }
    for c in columns.iter().filter_map(|c| unnameable(c).map(|w| (c, w))) {
        if all_dims.contains(&Dim::Column(c.0.clone())) || all_meas.contains(c.0) {
            push_new(&mut unused, (c.0.clone(), c.1.to_owned()));
        }
    }
    for (k, m) in all_meas.iter().enumerate() {
        if mfacts[k].may_overflow && !mfacts[k].not_measure {
            push_new(
                &mut unused,
                (
                    m.clone(),
                    "its values add past 64 bits: its sums may be left to SQLite".into(),
                ),
            );
        }
    }
    for m in &all_meas {
        if !good_measure(m)
            && dim_fact(&Dim::Column(m.clone()))
                .as_ref()
                .and_then(why_not_dim)
                .is_some()
        {
            push_new(&mut unused, (m.clone(), "holds values other than INTEGER and NULL (a measure), and cannot be a dimension either".into()));
        }
    }
    // The plane's name: the table's own when it has none.
    let name = planes.find_named(table, None).map(|_| {
        let mut n = "advised".to_owned();
        let mut k = 2;
        while planes.find_named(table, Some(&n)).is_some() || n.eq_ignore_ascii_case(table) {
            n = format!("advised_{k}");
            k += 1;
        }
        n
    });
    let mut proposals: Vec<Proposal> = Vec::new();
    for (ds, ms) in cands {
        if proposals
            .iter()
            .any(|p| same_set(&p.dims, &ds) && same_set(&p.measures, &ms))
        {
            continue;
        }
        let mut taken = Vec::new();
        let dtexts: Vec<String> = ds
            .iter()
            .map(|d| dim_text(d, &mut taken, columns))
            .collect();
        let Ok(mut def) = catalog::validate_def(db, table, &dtexts, &ms) else {
            continue;
        };
        def.name = name.clone();
        let entry = catalog::sample_entry(db, def.clone(), &from);
        if entry.out_of_service().is_some() {
            continue;
        }
        let (cells, bytes) = (entry.plane.cells() as i64, entry.plane.bytes() as i64);
        let serves = served_by(db, entry, stmts);
        if serves.is_empty() {
            continue;
        }
        proposals.push(Proposal {
            cells,
            bytes,
            dims: ds,
            measures: ms,
            def,
            serves,
        });
    }
    // Most statements served first, then the smallest.
    proposals.sort_by(|a, b| {
        b.serves
            .len()
            .cmp(&a.serves.len())
            .then(a.bytes.cmp(&b.bytes))
    });
    // A proposal is kept only if it serves a statement that none before it
    // serves, or is smaller than each before it.
    let mut kept: Vec<Proposal> = Vec::new();
    for p in proposals {
        let new = p
            .serves
            .iter()
            .any(|s| kept.iter().all(|k| !k.serves.contains(s)));
        let smaller = kept.iter().all(|k| p.bytes < k.bytes);
        if kept.len() < MOST && (kept.is_empty() || new || smaller) {
            kept.push(p);
        }
    }
    // The whole table, as the attach will read it.
    let mut out = Vec::new();
    for p in kept {
        if !whole_table_ok(db, table, numeric, &p).map_err(sql_err)? {
            continue;
        }
        let dims: Vec<String> = (0..p.def.dims.len()).map(|k| p.def.dim_text(k)).collect();
        // A column read by one of the plane's expressions is used there.
        let read_by_expr = |c: &str| {
            p.dims.iter().any(|d| match d {
                Dim::Expr(e) => tokenize::code(e).any(|t| {
                    matches!(t.kind, Kind::Word | Kind::Quoted) && t.value().eq_ignore_ascii_case(c)
                }),
                Dim::Column(_) => false,
            })
        };
        let mut unused_here: Vec<String> = unused
            .iter()
            .filter(|(c, _)| !read_by_expr(c))
            .map(|(c, w)| format!("{c}: {w}"))
            .collect();
        for d in &all_dims {
            if !p.dims.contains(d) && !unused.iter().any(|(c, _)| *c == dim_name(d)) {
                unused_here.push(format!("{}: left out of this plane", dim_name(d)));
            }
        }
        out.push(vec![
            Value::Text(table.to_owned()),
            Value::Text(statement(
                table,
                &dims,
                &p.def.measures,
                p.def.name.as_deref(),
            )),
            Value::Integer(p.serves.len() as i64),
            Value::Integer(stmts.len() as i64),
            Value::Integer(p.cells),
            Value::Integer(p.bytes),
            Value::Text(unused_here.join("; ")),
            // A JSON array of the texts (a text may span lines).
            Value::Text(
                serde_json::to_string(
                    &p.serves
                        .iter()
                        .map(|&i| stmts[i].0.trim())
                        .collect::<Vec<_>>(),
                )
                .expect("strings serialize"),
            ),
        ]);
    }
    Ok(out)
}

fn dim_name(d: &Dim) -> String {
    match d {
        Dim::Column(c) => c.clone(),
        Dim::Expr(e) => e.clone(),
    }
}

fn same_set<T: PartialEq>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

/// The statements (indexes into `stmts`) the classifier serves from
/// `entry` alone.
fn served_by(db: &rusqlite::Connection, entry: PlaneEntry, stmts: &[(&str, Usage)]) -> Vec<usize> {
    let mut planes = Planes::default();
    planes.add(entry);
    stmts
        .iter()
        .enumerate()
        .filter(|(_, (s, _))| {
            !matches!(
                classify::classify(db, &planes, s, false),
                Classified::Declined(_)
            )
        })
        .map(|(i, _)| i)
        .collect()
}

/// Whether the proposal's columns hold, over the whole table, what
/// `pleroma_attach` accepts and the router serves: each column in one
/// scan, and the occupied cells of all the dimensions together under the
/// plane's bound.
fn whole_table_ok(
    db: &rusqlite::Connection,
    table: &str,
    numeric: &[String],
    p: &Proposal,
) -> rusqlite::Result<bool> {
    let from = format!("main.{}", catalog::quote(table));
    let (ds, ms) = facts(db, &from, &p.dims, numeric, &p.measures)?;
    let columns_ok = ds
        .iter()
        .all(|f| !f.not_dim && !f.text_in_numeric && f.distinct <= CAP)
        && ms.iter().all(|f| !f.not_measure && !f.may_overflow);
    if !columns_ok || p.dims.is_empty() {
        return Ok(columns_ok);
    }
    let list: Vec<String> = p.dims.iter().map(dim_sql).collect();
    let cells: i64 = db.query_row(
        &format!(
            "SELECT count(*) FROM (SELECT DISTINCT {} FROM {from} LIMIT {})",
            list.join(", "),
            catalog::MAX_CELLS + 1
        ),
        [],
        |r| r.get(0),
    )?;
    Ok(cells as usize <= catalog::MAX_CELLS)
}
