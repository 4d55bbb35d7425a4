//! The oracle: two databases built identically, one through Pleroma with a
//! plane attached and one with plain rusqlite (SQLite alone), fed the same
//! steps. Answers must match row for row, with the same storage classes, the
//! same order where ORDER BY fixes it, and the same errors; every query of a
//! served class must have been served by the plane.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;
use pleroma::{Decline, RouteKind, RouteMode, Value};
use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::types::ValueRef;

use crate::gen::{Class, Order, Query, Step, Tlp};

/// Runtime declines the router documents as correct: SQLite's SUM, TOTAL and
/// AVG past i64 depend on the order rows are added, and MIN/MAX of cells
/// whose extremum was deleted are recomputed only up to a limit.
pub fn allowed_decline(reason: &Decline) -> bool {
    match reason {
        Decline::SumOverflowHaving
        | Decline::SumOverflowUnderLimit
        | Decline::SumOverflowGrouped
        | Decline::SumOverflowPartWay
        | Decline::PastI64OrderDependent { .. } => true,
        // SQLite's own "integer overflow" from the residue's statement.
        Decline::ResidueFailed {
            integer_overflow, ..
        } => *integer_overflow,
        Decline::Plane(e) | Decline::Limb(e) => {
            matches!(e, pleroma::PlaneError::UnknownExtremum { .. })
        }
        // The residue binds a dimension under a CAST to its affinity, which
        // would change a text in a numeric column.
        Decline::TextInNumericDimension { .. } => true,
        // ORDER BY an aggregate with LIMIT: a cut between ties is SQLite's
        // choice.
        Decline::TieAtLimitCut => true,
        // `abs()` of a dimension per row, while a row holds -2^63 there
        // (SQLite may or may not reach it, by its plan).
        Decline::AbsOfMinInteger { .. } => true,
        _ => false,
    }
}

/// Counts of one class.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    pub checks: u64,
    pub served: u64,
    /// Declined for a documented runtime reason.
    pub allowed: u64,
    /// Declined although the class is served (a failure), or, for `Out`,
    /// declined as required.
    pub declined: u64,
}

/// What the checks of a run saw.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub passed: u64,
    pub failed: u64,
    pub classes: BTreeMap<Class, ClassStats>,
    /// Allowed declines by reason.
    pub allowed: BTreeMap<String, u64>,
    /// Checks by oracle.
    pub oracles: BTreeMap<&'static str, u64>,
}

impl Stats {
    pub fn merge(&mut self, o: &Stats) {
        self.passed += o.passed;
        self.failed += o.failed;
        for (c, s) in &o.classes {
            let e = self.classes.entry(*c).or_default();
            e.checks += s.checks;
            e.served += s.served;
            e.allowed += s.allowed;
            e.declined += s.declined;
        }
        for (r, n) in &o.allowed {
            *self.allowed.entry(r.clone()).or_default() += n;
        }
        for (k, n) in &o.oracles {
            *self.oracles.entry(k).or_default() += n;
        }
    }

    fn pass(&mut self, oracle: &'static str) {
        self.passed += 1;
        *self.oracles.entry(oracle).or_default() += 1;
    }
}

type Rows = (Vec<String>, Vec<Vec<Value>>);
type Answer = Result<Rows, String>;

/// Pleroma and plain SQLite side by side, each on its own file.
pub struct Pair {
    _dir: tempfile::TempDir,
    pl_path: PathBuf,
    sq_path: PathBuf,
    pub pl: pleroma::Connection,
    pub sq: rusqlite::Connection,
    /// A second Pleroma connection to the same file, opened at its first use.
    reader: Option<pleroma::Connection>,
    /// Program run as the second process (`--exec-sql FILE SQL`); without
    /// one, the write comes from a second connection instead.
    helper: Option<PathBuf>,
}

impl Pair {
    pub fn new(helper: Option<PathBuf>) -> anyhow::Result<Pair> {
        let dir = tempfile::tempdir().context("temp dir")?;
        let pl_path = dir.path().join("pleroma.db");
        let pl = pleroma::Connection::open(&pl_path)?;
        let sq_path = dir.path().join("sqlite.db");
        let sq = rusqlite::Connection::open(&sq_path)?;
        register_sum_exact(&sq)?;
        let mut pair = Pair {
            _dir: dir,
            pl_path,
            sq_path,
            pl,
            sq,
            reader: None,
            helper,
        };
        pair.connection_settings()?;
        Ok(pair)
    }

    fn connection_settings(&mut self) -> anyhow::Result<()> {
        self.pl.execute_batch("PRAGMA synchronous = OFF")?;
        self.sq.execute_batch("PRAGMA synchronous = OFF")?;
        Ok(())
    }

    /// Run one step. `Err` is a failure, with what differed; a panic in
    /// the router is a failure too (so that it is shrunk like any other).
    pub fn step(&mut self, step: &Step, st: &mut Stats) -> Result<(), String> {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run_step(step, st)));
        r.unwrap_or_else(|e| {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {msg}"))
        })
    }

    fn run_step(&mut self, step: &Step, st: &mut Stats) -> Result<(), String> {
        match step {
            Step::Exec(sql) => {
                let a = pl_exec(&mut self.pl, sql);
                let b = sq_exec(&self.sq, sql);
                // What SQLite keeps after a failed statement, and how VACUUM
                // numbers rows, must not depend on Pleroma: compare the
                // tables themselves, rows and rowids.
                let stored = (a.is_err() && b.is_err() && is_write(sql)) || is_vacuum(sql);
                self.agree(sql, a, b, st)?;
                if stored {
                    self.same_tables(sql)?;
                    st.pass("stored tables");
                }
                Ok(())
            }
            Step::Pleroma(sql) => {
                self.pl
                    .execute_batch(sql)
                    .map_err(|e| format!("{sql}: {e}"))?;
                Ok(())
            }
            Step::PleromaRefused(sql) => match self.pl.execute_batch(sql) {
                Ok(()) => Err(format!("{sql}: accepted, but it must be refused")),
                Err(_) => {
                    st.pass("refused pragmas");
                    Ok(())
                }
            },
            Step::Plain(sql) => {
                // Foreign keys off (SQLite's default), so that `DELETE FROM
                // t` takes the truncate shortcut where SQLite allows it.
                let plain = |p: &Path| {
                    rusqlite::Connection::open(p)
                        .map_err(|e| e.to_string())
                        .and_then(|db| sq_exec(&db, sql))
                };
                let a = plain(&self.pl_path);
                if matches!(&a, Err(e) if e.contains("pleroma_guard")) {
                    // Refused by the guard before it wrote anything (the
                    // truncate shortcut does not apply here, for instance
                    // with foreign keys): nothing happened on either side.
                    st.pass("writes");
                    return Ok(());
                }
                let b = plain(&self.sq_path);
                self.agree(sql, a, b, st)
            }
            Step::CopyRefused(sql) => {
                // The copy holds everything committed: WAL frames first
                // into the file (a checkpoint changes no row).
                self.pl
                    .sqlite()
                    .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                    .map_err(|e| e.to_string())?;
                let copy = self.pl_path.with_extension("copy.db");
                std::fs::copy(&self.pl_path, &copy).map_err(|e| e.to_string())?;
                let attach = format!("ATTACH '{}' AS k", copy.display());
                self.pl
                    .execute_batch(&attach)
                    .map_err(|e| format!("{attach}: {e}"))?;
                let r = self.pl.execute_batch(sql);
                self.pl
                    .execute_batch("DETACH k")
                    .map_err(|e| format!("DETACH k: {e}"))?;
                let _ = std::fs::remove_file(&copy);
                if r.is_ok() {
                    return Err(format!(
                        "{sql}: a write into a copy of the file passed the guard (nothing persists it)"
                    ));
                }
                // The refused write set `changes()` to 0 on Pleroma's side
                // only (plain SQLite has no such refusal): a write of no
                // row on both sides puts the counters level again.
                let level = "UPDATE t SET rowid = rowid WHERE 0";
                let (a, b) = (pl_exec(&mut self.pl, level), sq_exec(&self.sq, level));
                self.agree(level, a, b, st)?;
                st.pass("refused writes");
                Ok(())
            }
            Step::Append(sql) => {
                let (head, values) = sql
                    .split_once(" VALUES ")
                    .ok_or_else(|| format!("@append without VALUES: {sql}"))?;
                let cols: Vec<&str> = head
                    .trim()
                    .trim_start_matches("INSERT INTO t(")
                    .trim_end_matches(')')
                    .split(", ")
                    .collect();
                // The literals' own values, as a program would bind them.
                let mut stmt = self
                    .sq
                    .prepare(&format!("VALUES {values}"))
                    .map_err(|e| format!("{sql}: {e}"))?;
                let n = stmt.column_count();
                let rows: Vec<Vec<Value>> = stmt
                    .query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
                    .and_then(|it| it.collect())
                    .map_err(|e| format!("{sql}: {e}"))?;
                drop(stmt);
                let a = (|| -> pleroma::Result<u64> {
                    let mut ap = self.pl.appender_for("t", &cols)?;
                    for r in &rows {
                        ap.append_row(r)?;
                    }
                    ap.flush()
                })()
                .map(|_| 0)
                .map_err(|e| e.to_string());
                let b = plain_append(&self.sq, &cols, &rows);
                let failed = a.is_err() && b.is_err();
                self.agree(sql, a, b, st)?;
                if failed {
                    self.same_tables(sql)?;
                    st.pass("stored tables");
                }
                Ok(())
            }
            Step::StandIn(sql) => {
                let stand_in = |p: &Path| {
                    let db = rusqlite::Connection::open(p).map_err(|e| e.to_string())?;
                    db.create_scalar_function(
                        "pleroma_guard",
                        -1,
                        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
                        |_| Ok(1),
                    )
                    .map_err(|e| e.to_string())?;
                    sq_exec(&db, sql)
                };
                let a = stand_in(&self.pl_path);
                let b = stand_in(&self.sq_path);
                self.agree(sql, a, b, st)
            }
            Step::Second(sql) => {
                let a = pl_second_exec(&self.pl_path, sql);
                // The plain side's write comes from a second connection too,
                // so that neither side's own connection counters move.
                let b = second_exec(&self.sq_path, sql);
                self.agree(sql, a, b, st)
            }
            Step::Process(sql) => {
                let a = match &self.helper {
                    Some(h) => run_process(h, &self.pl_path, sql),
                    None => pl_second_exec(&self.pl_path, sql),
                };
                let b = second_exec(&self.sq_path, sql);
                let (a, b) = (a.map(|_| 0), b.map(|_| 0));
                self.agree(sql, a, b, st)
            }
            Step::Backup | Step::Restore => {
                for path in [&self.pl_path, &self.sq_path] {
                    let snap = path.with_extension("snap.db");
                    let (from, to) = if matches!(step, Step::Backup) {
                        (path.as_path(), snap.as_path())
                    } else {
                        (snap.as_path(), path.as_path())
                    };
                    let copy = || -> rusqlite::Result<()> {
                        let src = rusqlite::Connection::open(from)?;
                        let mut dst = rusqlite::Connection::open(to)?;
                        let backup = rusqlite::backup::Backup::new(&src, &mut dst)?;
                        backup.run_to_completion(64, std::time::Duration::ZERO, None)?;
                        Ok(())
                    };
                    copy().map_err(|e| format!("{step:?} {}: {e}", path.display()))?;
                }
                Ok(())
            }
            Step::Reopen => {
                // Assigning drops the old connection after the new one opens.
                self.pl =
                    pleroma::Connection::open(&self.pl_path).map_err(|e| format!("reopen: {e}"))?;
                self.pl
                    .execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = OFF")
                    .map_err(|e| e.to_string())?;
                // The plain side reopens too: both connections start with
                // fresh counters (`total_changes()`, `last_insert_rowid()`)
                // and without TEMP tables.
                self.sq = rusqlite::Connection::open(&self.sq_path)
                    .map_err(|e| format!("reopen the plain side: {e}"))?;
                register_sum_exact(&self.sq).map_err(|e| e.to_string())?;
                self.sq
                    .execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = OFF")
                    .map_err(|e| e.to_string())?;
                Ok(())
            }
            Step::Check(q) => self.check(q, st),
            Step::Tlp(t) => self.tlp(t, st),
            Step::NoRec(p) => self.norec(p, st),
            Step::Reader(q) => {
                let reader = match self.reader.take() {
                    Some(r) => r,
                    None => pleroma::Connection::open(&self.pl_path)
                        .map_err(|e| format!("open the reader: {e}"))?,
                };
                // The checks run on `pl`: lend it the reader's place.
                let writer = std::mem::replace(&mut self.pl, reader);
                let r = self.check(q, st);
                self.reader = Some(std::mem::replace(&mut self.pl, writer));
                r.map_err(|e| format!("on the second Pleroma connection: {e}"))
            }
        }
    }

    fn agree(
        &mut self,
        sql: &str,
        a: Result<usize, String>,
        b: Result<usize, String>,
        st: &mut Stats,
    ) -> Result<(), String> {
        let dml = {
            let head = sql.trim_start().get(..7).unwrap_or("").to_ascii_uppercase();
            ["INSERT", "UPDATE", "DELETE", "REPLACE"]
                .iter()
                .any(|k| head.starts_with(k))
        };
        let same = match (&a, &b) {
            (Ok(x), Ok(y)) => !dml || x == y,
            (Err(x), Err(y)) => x == y,
            _ => false,
        };
        if !same {
            return Err(format!(
                "write differs: {sql}\n  pleroma: {a:?}\n  sqlite:  {b:?}"
            ));
        }
        st.pass("writes");
        Ok(())
    }

    /// Every user table holds the same rows under the same rowids on both
    /// sides (Pleroma's own tables aside).
    fn same_tables(&mut self, after: &str) -> Result<(), String> {
        let list = "SELECT name FROM sqlite_schema WHERE type = 'table' AND rootpage > 0 \
                    AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
                    AND name NOT LIKE 'pleroma\\_%' ESCAPE '\\' ORDER BY name";
        let names = |db: &rusqlite::Connection| -> Result<Vec<String>, String> {
            let (_, rows) = sq_query(db, list, &[])?;
            Ok(rows
                .into_iter()
                .filter_map(|r| match r.into_iter().next() {
                    Some(Value::Text(t)) => Some(t),
                    _ => None,
                })
                .collect())
        };
        let ours = names(self.pl.sqlite())?;
        let theirs = names(&self.sq)?;
        if ours != theirs {
            return Err(format!(
                "after {after}: the tables differ\n  pleroma: {ours:?}\n  sqlite:  {theirs:?}"
            ));
        }
        for t in &theirs {
            let q = format!("\"{}\"", t.replace('"', "\"\""));
            let read = |db: &rusqlite::Connection| -> Answer {
                // A WITHOUT ROWID table has no rowid: its rows as a multiset.
                sq_query(db, &format!("SELECT rowid, * FROM {q} ORDER BY rowid"), &[]).or_else(
                    |_| {
                        let (c, mut rows) = sq_query(db, &format!("SELECT * FROM {q}"), &[])?;
                        rows.sort_by_key(|r| format!("{r:?}"));
                        Ok((c, rows))
                    },
                )
            };
            let want = read(&self.sq);
            let got = read(self.pl.sqlite());
            if want != got {
                let show = |a: &Answer| match a {
                    Ok((_, rows)) => format!(
                        "{} rows: {:?}",
                        rows.len(),
                        rows.iter().take(8).collect::<Vec<_>>()
                    ),
                    Err(e) => e.clone(),
                };
                return Err(format!(
                    "after {after}: table {t} differs (rows or rowids)\n  pleroma: {}\n  sqlite:  {}",
                    show(&got),
                    show(&want)
                ));
            }
        }
        Ok(())
    }

    /// A query on the Pleroma side: served queries under
    /// `pleroma_route = plane`. Returns the answer and the route.
    fn pl_query(&mut self, q: &Query, st: &mut Stats) -> Result<(Answer, RouteKind), String> {
        let class = st.classes.entry(q.class).or_default();
        class.checks += 1;
        if q.class.served() {
            self.pl.set_route_mode(RouteMode::Plane);
            let r = self.pl.query(&q.sql, &q.params);
            self.pl.set_route_mode(RouteMode::Auto);
            match r {
                Err(pleroma::Error::NotServed(reason)) => {
                    if !allowed_decline(&reason) {
                        class.declined += 1;
                        return Err(format!(
                            "class {} declined: {reason}\n  {}{}",
                            q.class,
                            q.sql,
                            params_note(&q.params)
                        ));
                    }
                    class.allowed += 1;
                    // Counted by kind: the numbers in a reason vary.
                    let mut kind = String::new();
                    let mut word = false;
                    for c in reason.to_string().chars() {
                        let c = if c.is_ascii_digit() && !word { '#' } else { c };
                        word = c.is_ascii_alphanumeric() && c != '#';
                        if !(c == '#' && kind.ends_with('#')) {
                            kind.push(c);
                        }
                    }
                    *st.allowed.entry(kind).or_default() += 1;
                    let r = self.pl.query(&q.sql, &q.params);
                    Ok((answer(r), self.pl.last_route().kind))
                }
                r => {
                    class.served += 1;
                    Ok((answer(r), RouteKind::Plane))
                }
            }
        } else {
            let r = self.pl.query(&q.sql, &q.params);
            let kind = self.pl.last_route().kind;
            if kind == RouteKind::Engine {
                class.declined += 1;
            } else {
                class.served += 1;
            }
            // Outside the classes the cells answer directly; the residue
            // may serve it (and must match).
            let residue = self
                .pl
                .last_route()
                .reason
                .starts_with("served with a residue")
                || kind == RouteKind::Memo;
            if q.class == Class::Out && r.is_ok() && kind != RouteKind::Engine && !residue {
                return Err(format!(
                    "outside the served classes but routed to {kind}: {}{}",
                    q.sql,
                    params_note(&q.params)
                ));
            }
            Ok((answer(r), kind))
        }
    }

    fn check(&mut self, q: &Query, st: &mut Stats) -> Result<(), String> {
        let want = sq_query(&self.sq, &q.sql, &q.params);
        let (got, kind) = self.pl_query(q, st)?;
        compare(&want, &got, &q.order).map_err(|e| {
            format!(
                "{e}\n  class {} route {kind}: {}{}\n  pleroma: {got:?}\n  sqlite:  {want:?}",
                q.class,
                q.sql,
                params_note(&q.params)
            )
        })?;
        st.pass(if want.is_err() {
            "differential (same error)"
        } else {
            "differential"
        });
        Ok(())
    }

    /// TLP: the answer equals the combination of the answers under `p`,
    /// `NOT p` and `p IS NULL`.
    fn tlp(&mut self, t: &Tlp, st: &mut Stats) -> Result<(), String> {
        let class = if t.base.is_some() {
            Class::D
        } else if !t.group.is_empty() {
            Class::G
        } else {
            Class::T
        };
        let whole = Query {
            sql: t.query(None),
            params: Vec::new(),
            class,
            order: Order::Unordered,
        };
        self.check(&whole, st)?;
        let all = answer(self.pl.query(&whole.sql, &[]));
        let g = t.group.len();
        let mut parts = BTreeMap::new();
        let mut routes = Vec::new();
        for f in [t.p.clone(), format!("NOT ({})", t.p), t.pnull.clone()] {
            let sql = t.query(Some(&f));
            let rows = answer(self.pl.query(&sql, &[]))
                .map_err(|e| format!("TLP part failed: {sql}: {e}"))?;
            routes.push(self.pl.last_route().kind);
            tlp_fold(&mut parts, &rows.1, g).map_err(|e| format!("TLP part {sql}: {e}"))?;
        }
        let all = all.map_err(|e| format!("TLP whole failed: {e}"))?;
        let mut whole_map = BTreeMap::new();
        tlp_fold(&mut whole_map, &all.1, g)?;
        // Groups that exist only as empty partitions of a scalar query.
        if whole_map != parts {
            return Err(format!(
                "TLP differs: {}\n  p = {}  (routes of the parts: {routes:?})\n  whole: {whole_map:?}\n  parts: {parts:?}",
                whole.sql, t.p
            ));
        }
        st.pass("tlp");
        Ok(())
    }

    /// NoREC: the plane's `COUNT(*) WHERE p` equals the engine's count of
    /// the rows for which `p` is true.
    fn norec(&mut self, p: &str, st: &mut Stats) -> Result<(), String> {
        let served = Query {
            sql: format!("SELECT COUNT(*) FROM t WHERE {p}"),
            params: Vec::new(),
            class: Class::W,
            order: Order::Total,
        };
        self.check(&served, st)?;
        self.pl.set_route_mode(RouteMode::Plane);
        let a = answer(self.pl.query(&served.sql, &[]));
        self.pl.set_route_mode(RouteMode::Auto);
        let sql = format!("SELECT COUNT(CASE WHEN {p} THEN 1 END) FROM t");
        // The residue would serve it: the count is SQLite's own scan.
        self.pl.set_route_mode(RouteMode::Engine);
        let b = answer(self.pl.query(&sql, &[]));
        self.pl.set_route_mode(RouteMode::Auto);
        let kind = self.pl.last_route().kind;
        if kind != RouteKind::Engine {
            return Err(format!(
                "NoREC: the engine-side count was routed to {kind}: {sql}"
            ));
        }
        let (a, b) = (a.map(|r| r.1), b.map(|r| r.1));
        if a != b {
            return Err(format!(
                "NoREC differs: WHERE {p}\n  plane:  {a:?}\n  engine: {b:?}"
            ));
        }
        st.pass("norec");
        Ok(())
    }
}

/// Per group key: COUNT(*), COUNT(m), SUM(m), MIN(m), MAX(m), combined.
type TlpMap = BTreeMap<String, (i64, i64, Option<i128>, Option<i64>, Option<i64>)>;

fn tlp_fold(map: &mut TlpMap, rows: &[Vec<Value>], g: usize) -> Result<(), String> {
    let int = |v: &Value| match v {
        Value::Integer(i) => Ok(Some(*i)),
        Value::Null => Ok(None),
        other => Err(format!("unexpected {other:?}")),
    };
    for r in rows {
        let key = format!("{:?}", &r[..g]);
        let (n, nn, sum, min, max) = (
            int(&r[g])?,
            int(&r[g + 1])?,
            int(&r[g + 2])?,
            int(&r[g + 3])?,
            int(&r[g + 4])?,
        );
        let (n, nn) = (n.unwrap_or(0), nn.unwrap_or(0));
        if g > 0 && n == 0 {
            continue;
        }
        let e = map.entry(key).or_insert((0, 0, None, None, None));
        e.0 += n;
        e.1 += nn;
        if let Some(s) = sum {
            e.2 = Some(e.2.unwrap_or(0) + s as i128);
        }
        e.3 = match (e.3, min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        e.4 = match (e.4, max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    Ok(())
}

fn params_note(params: &[Value]) -> String {
    if params.is_empty() {
        String::new()
    } else {
        format!(
            "  -- params: {}",
            params
                .iter()
                .map(crate::schema::value_sql)
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

fn answer(r: pleroma::Result<pleroma::Rows>) -> Answer {
    r.map(|r| (r.columns.into_inner(), r.rows.into_inner()))
        .map_err(|e| e.to_string())
}

/// Compare two answers as `order` says.
pub fn compare(want: &Answer, got: &Answer, order: &Order) -> Result<(), String> {
    let (want, got) = match (want, got) {
        (Err(a), Err(b)) if a == b => return Ok(()),
        (Ok(a), Ok(b)) => (a, b),
        _ => return Err("answers differ".into()),
    };
    if want.0 != got.0 {
        return Err("column names differ".into());
    }
    let sorted = |rows: &[Vec<Value>]| {
        let mut v: Vec<String> = rows.iter().map(|r| format!("{r:?}")).collect();
        v.sort();
        v
    };
    match order {
        Order::Total => {
            if want.1 != got.1 {
                return Err("rows differ (in order)".into());
            }
        }
        Order::Unordered => {
            if sorted(&want.1) != sorted(&got.1) {
                return Err("rows differ (as multisets)".into());
            }
        }
        Order::Keys(keys) => {
            let proj = |rows: &[Vec<Value>]| {
                rows.iter()
                    .map(|r| keys.iter().map(|&k| r[k].clone()).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            };
            if proj(&want.1) != proj(&got.1) {
                return Err("ORDER BY keys differ (in order)".into());
            }
            if sorted(&want.1) != sorted(&got.1) {
                return Err("rows differ (as multisets)".into());
            }
        }
        Order::CountOnly => {
            if want.1.len() != got.1.len() {
                return Err("row counts differ".into());
            }
        }
    }
    Ok(())
}

/// INSERT, UPDATE, DELETE or REPLACE (a failed one may keep rows).
fn is_write(sql: &str) -> bool {
    let head = sql.trim_start().get(..7).unwrap_or("").to_ascii_uppercase();
    ["INSERT", "UPDATE", "DELETE", "REPLACE"]
        .iter()
        .any(|k| head.starts_with(k))
}

/// `VACUUM` of the main file (it renumbers rowids).
fn is_vacuum(sql: &str) -> bool {
    sql.trim_start()
        .get(..6)
        .is_some_and(|w| w.eq_ignore_ascii_case("VACUUM"))
}

fn pl_exec(pl: &mut pleroma::Connection, sql: &str) -> Result<usize, String> {
    // `query` runs any statement and returns its rows (RETURNING, PRAGMAs).
    pl.query(sql, &[]).map_err(|e| e.to_string())?;
    // Pleroma's count: the raw handle's also counts the planes' state rows.
    Ok(pl.changes() as usize)
}

/// Run a statement on a second Pleroma connection to the file `path` (a
/// writer of the same process: its commit reaches the first connection as
/// a published state or through the persisted log).
fn pl_second_exec(path: &Path, sql: &str) -> Result<usize, String> {
    let mut db = pleroma::Connection::open(path).map_err(|e| e.to_string())?;
    db.execute_batch("PRAGMA foreign_keys = ON")
        .map_err(|e| e.to_string())?;
    pl_exec(&mut db, sql)
}

/// Run a statement on a second plain connection to the file `path`.
fn second_exec(path: &Path, sql: &str) -> Result<usize, String> {
    let db = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
    db.execute_batch("PRAGMA foreign_keys = ON")
        .map_err(|e| e.to_string())?;
    sq_exec(&db, sql)
}

/// Run a statement on plain SQLite, as Pleroma runs it.
/// What the appender does, as plain SQLite statements: each row its own
/// INSERT with bound values, all inside a savepoint that an error rolls
/// back (a transaction of its own in autocommit).
fn plain_append(
    db: &rusqlite::Connection,
    cols: &[&str],
    rows: &[Vec<Value>],
) -> Result<usize, String> {
    let auto = db.is_autocommit();
    let undo = |db: &rusqlite::Connection| {
        if !db.is_autocommit() {
            let _ = db.execute_batch(if auto {
                "ROLLBACK"
            } else {
                "ROLLBACK TO pleroma_appender; RELEASE pleroma_appender"
            });
        }
    };
    db.execute_batch("SAVEPOINT pleroma_appender")
        .map_err(|e| e.to_string())?;
    let sql = format!(
        "INSERT INTO t({}) VALUES ({})",
        cols.join(", "),
        (1..=cols.len())
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for r in rows {
        if let Err(e) = db.execute(&sql, rusqlite::params_from_iter(r.iter())) {
            undo(db);
            return Err(e.to_string());
        }
    }
    db.execute_batch("RELEASE pleroma_appender").map_err(|e| {
        undo(db);
        e.to_string()
    })?;
    Ok(0)
}

pub fn sq_exec(db: &rusqlite::Connection, sql: &str) -> Result<usize, String> {
    let mut stmt = db.prepare(sql).map_err(|e| e.to_string())?;
    if stmt.column_count() == 0 {
        return stmt.execute([]).map_err(|e| e.to_string());
    }
    let mut rows = stmt.query([]).map_err(|e| e.to_string())?;
    while rows.next().map_err(|e| e.to_string())?.is_some() {}
    drop(rows);
    Ok(db.changes() as usize)
}

pub fn sq_query(db: &rusqlite::Connection, sql: &str, params: &[Value]) -> Answer {
    let mut stmt = db.prepare(sql).map_err(|e| e.to_string())?;
    let columns: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let n = columns.len();
    let mut rows = stmt
        .query(rusqlite::params_from_iter(params.iter()))
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(|e| e.to_string())? {
        out.push(
            (0..n)
                .map(|i| r.get::<_, Value>(i))
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(|e| e.to_string())?,
        );
    }
    Ok((columns, out))
}

/// A write from another process: the helper program opens the file with
/// plain SQLite and runs the statement.
fn run_process(helper: &Path, db: &Path, sql: &str) -> Result<usize, String> {
    let out = Command::new(helper)
        .arg("--exec-sql")
        .arg(db)
        .arg(sql)
        .output()
        .map_err(|e| format!("spawn {}: {e}", helper.display()))?;
    if out.status.success() {
        Ok(0)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// The helper's side of [`Step::Process`]: run `sql` on `db` through a
/// Pleroma connection. The error, if any, goes to stderr exactly as SQLite
/// words it.
pub fn exec_sql_main(db: &str, sql: &str) -> i32 {
    // Another Pleroma process: its commit reaches the first by the
    // persisted log (or, with persistence off, by a rebuild).
    let r = pl_second_exec(Path::new(db), sql);
    match r {
        Ok(_) => 0,
        Err(e) => {
            eprint!("{e}");
            1
        }
    }
}

/// `PleromaSumExact` for the plain-SQLite side, written here independently
/// of the router's: the exact sum as TEXT, NULL when no value was summed.
struct SumExact;

impl Aggregate<Option<i128>, Option<String>> for SumExact {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Option<i128>> {
        Ok(None)
    }

    fn step(&self, ctx: &mut Context<'_>, acc: &mut Option<i128>) -> rusqlite::Result<()> {
        match ctx.get_raw(0) {
            ValueRef::Null => Ok(()),
            ValueRef::Integer(i) => {
                *acc = Some(acc.unwrap_or(0) + i as i128);
                Ok(())
            }
            _ => Err(rusqlite::Error::UserFunctionError(
                "PleromaSumExact: a non-INTEGER value".into(),
            )),
        }
    }

    fn finalize(
        &self,
        _: &mut Context<'_>,
        acc: Option<Option<i128>>,
    ) -> rusqlite::Result<Option<String>> {
        Ok(acc.flatten().map(|s| s.to_string()))
    }
}

fn register_sum_exact(db: &rusqlite::Connection) -> rusqlite::Result<()> {
    db.create_aggregate_function(
        "PleromaSumExact",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        SumExact,
    )
}
