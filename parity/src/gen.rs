//! The workload: a case is a list of [`Step`]s — the schema, the data, then
//! blocks of writes, transactions, savepoints, outside writes, reopens and
//! checks — all drawn from one seed.

use std::fmt;

use pleroma::Value;

use crate::rng::Rng;
use crate::schema::{Decl, Lit, Profile, Schema, HOT_KEYS, PARENTS};

/// The query classes the plane serves (as the router names them), and two
/// of ours: queries just outside the classes, which must be declined, and
/// queries with literals whose conversion the router may or may not trust,
/// which may take either route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    T,
    W,
    G,
    H,
    D,
    /// Joins of `t` to `parent` (from the limb, or the memo).
    J,
    /// Served with a residue: the cells answer the aggregate core, SQLite
    /// evaluates the rest over the grouped rows.
    X,
    /// A plane over expression dimensions, queried by its expressions.
    E,
    /// A lookup join through the residue: `t` joined on a dimension to
    /// `lk`, an ordinary table (non-unique keys, NULL keys, keys missing
    /// on either side), grouped and filtered on either table.
    L,
    Out,
    Any,
}

impl Class {
    pub const ALL: [Class; 11] = [
        Class::T,
        Class::W,
        Class::G,
        Class::H,
        Class::D,
        Class::J,
        Class::X,
        Class::E,
        Class::L,
        Class::Out,
        Class::Any,
    ];

    /// A class the plane must serve.
    pub fn served(self) -> bool {
        !matches!(self, Class::Out | Class::Any)
    }

    pub fn parse(s: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.to_string() == s)
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// How two answers are compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Order {
    /// As multisets.
    Unordered,
    /// Row for row: ORDER BY fixes the order of every row.
    Total,
    /// ORDER BY fixes these output columns only: their values in sequence,
    /// and the rows as multisets.
    Keys(Vec<usize>),
    /// LIMIT over an order SQLite is free to choose: only the row count.
    CountOnly,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub sql: String,
    pub params: Vec<Value>,
    pub class: Class,
    pub order: Order,
}

/// Ternary logic partitioning: `SELECT group, aggs FROM t WHERE base AND p`,
/// `... AND NOT (p)` and `... AND pnull` (where `p` is NULL) combine into the
/// answer without `p`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tlp {
    pub group: Vec<String>,
    pub measure: String,
    pub base: Option<String>,
    pub p: String,
    pub pnull: String,
}

impl Tlp {
    pub fn query(&self, filter: Option<&str>) -> String {
        let m = &self.measure;
        let mut sel: Vec<String> = self.group.clone();
        sel.extend([
            "COUNT(*)".into(),
            format!("COUNT({m})"),
            format!("SUM({m})"),
            format!("MIN({m})"),
            format!("MAX({m})"),
        ]);
        let conds: Vec<String> = self
            .base
            .iter()
            .map(|b| format!("({b})"))
            .chain(filter.map(|f| format!("({f})")))
            .collect();
        let mut sql = format!("SELECT {} FROM t", sel.join(", "));
        if !conds.is_empty() {
            sql += &format!(" WHERE {}", conds.join(" AND "));
        }
        if !self.group.is_empty() {
            sql += &format!(" GROUP BY {}", self.group.join(", "));
        }
        sql
    }
}

/// One step of a case.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// A statement run on both databases; both must agree (success, or the
    /// same error).
    Exec(String),
    /// A Pleroma PRAGMA, run on the Pleroma side only.
    Pleroma(String),
    /// A Pleroma PRAGMA that Pleroma must refuse (a limb on a key with a
    /// collation other than BINARY), run on the Pleroma side only.
    PleromaRefused(String),
    /// A write from a second connection to Pleroma's file (the oracle runs it
    /// on its own connection).
    Second(String),
    /// A write from another process to Pleroma's file.
    Process(String),
    /// A write by a plain SQLite connection (no Pleroma) to Pleroma's file:
    /// on a persisted plane only `DELETE FROM t` gets through the guard.
    Plain(String),
    /// An INSERT by a plain SQLite connection that registers a stand-in
    /// `pleroma_guard` returning 1 (as a program that stubs missing
    /// functions would): it passes the guard and leaves its rows in the
    /// guard index, which Pleroma must see at its next follow or open.
    StandIn(String),
    /// A copy of Pleroma's file attached to the Pleroma connection as `k`,
    /// and a write into it that Pleroma must refuse (the guard would pass
    /// it, with the main file's keys, and no state row of the copy's
    /// follows it); then `DETACH k`. Pleroma's side only.
    CopyRefused(String),
    /// Rows appended through `Connection::appender` on Pleroma's side (the
    /// rows of this `INSERT INTO t(cols) VALUES …`, as bound values of the
    /// literals' types), and on SQLite's the INSERT inside a savepoint:
    /// all of it or, on an error, none.
    Append(String),
    /// A snapshot of both files by SQLite's online backup API (kept beside
    /// them for a later `Restore`).
    Backup,
    /// Both files restored from their snapshot by the online backup API,
    /// under the running connections (as `sqlite3 .restore` does): the
    /// Pleroma connection must see that its state is gone, not follow it.
    Restore,
    /// Close the Pleroma connection and open the file again.
    Reopen,
    /// A query compared with SQLite (and its route checked).
    Check(Query),
    /// The same on a second Pleroma connection to the file, which sees the
    /// first one's commits as outside writes (only outside transactions).
    Reader(Query),
    /// The TLP oracle.
    Tlp(Tlp),
    /// The NoREC oracle: a served `COUNT(*) WHERE p` against the engine's
    /// count of rows where `p` is true.
    NoRec(String),
}

impl Step {
    pub fn is_check(&self) -> bool {
        matches!(
            self,
            Step::Check(_) | Step::Reader(_) | Step::Tlp(_) | Step::NoRec(_)
        )
    }
}

/// How large a case is.
#[derive(Clone, Copy, Debug)]
pub struct Size {
    pub rows: usize,
    /// Blocks of writes and checks after the load.
    pub blocks: usize,
}

/// The steps of one case.
pub fn case(seed: u64, size: Size) -> (Schema, Vec<Step>) {
    let mut rng = Rng::new(seed);
    let schema = Schema::generate(&mut rng);
    let mut g = Gen {
        s: &schema,
        rng: rng.fork(),
        planes_rng: planes_rng(seed),
        has_p2: None,
        rows: size.rows.max(1),
        steps: Vec::new(),
    };
    g.setup();
    // Once in every case, whatever the blocks draw, and first, with `t`'s
    // planes out of the way (a plane whose image is never an empty delta,
    // out of service or limbed, writes a state row at every commit, which
    // replaces the given-back one; later steps can make the next open
    // rebuild): a state row given back before the COMMIT, then a reopen
    // that must not trust it.
    g.push(Step::Pleroma("PRAGMA pleroma_detach('t')".into()));
    g.release_then_undo();
    g.attach_t();
    g.limbs();
    for _ in 0..size.blocks {
        g.block();
    }
    g.residue_probes();
    g.settle();
    // And a write into an attached copy of the file, which must be refused.
    let cols = g.s.insert_columns();
    let row = g.s.row(&mut g.rng, None);
    g.push(Step::CopyRefused(format!(
        "INSERT INTO k.t({cols}) VALUES {row}"
    )));
    // And a row past the guard by a stand-in of its function (which the
    // next follow must see in the guard index), whatever the blocks drew.
    let row = g.s.row(&mut g.rng, None);
    g.push(Step::StandIn(format!("INSERT INTO t({cols}) VALUES {row}")));
    g.push(Step::Check(Query {
        sql: "SELECT COUNT(*) FROM t".into(),
        params: Vec::new(),
        class: Class::T,
        order: Order::Total,
    }));
    let steps = g.steps;
    (schema, steps)
}

/// The steps of one block, for property tests that build a case from
/// independently drawn blocks (so that removing one leaves the others alone).
pub fn block(schema: &Schema, rows: usize, seed: u64) -> Vec<Step> {
    let mut g = Gen {
        s: schema,
        rng: Rng::new(seed),
        planes_rng: planes_rng(seed),
        has_p2: None,
        rows: rows.max(1),
        steps: Vec::new(),
    };
    g.block();
    g.steps
}

/// The schema, data and plane of a case.
pub fn setup(schema: &Schema, rows: usize, seed: u64) -> Vec<Step> {
    let mut g = Gen {
        s: schema,
        rng: Rng::new(seed),
        planes_rng: planes_rng(seed),
        has_p2: None,
        rows: rows.max(1),
        steps: Vec::new(),
    };
    g.setup();
    g.steps
}

/// The stream that draws `t`'s second plane, apart from the case's own.
fn planes_rng(seed: u64) -> Rng {
    Rng::new(seed.rotate_left(17) ^ 0x9A9E_5EC0)
}

struct Gen<'a> {
    s: &'a Schema,
    rng: Rng,
    /// Whether and how `t` gets its second plane: a stream of its own, so
    /// that the other draws of a seed stay as they were.
    planes_rng: Rng,
    /// Whether `t` has the plane `p2` now (`None`: not known, in a block
    /// drawn alone).
    has_p2: Option<bool>,
    rows: usize,
    steps: Vec<Step>,
}

/// Literals the router converts with certainty (see the router's affinity
/// rules): anything else may be declined, which only class `Any` allows.
fn certain(decl: Decl, v: &Value) -> bool {
    match v {
        Value::Null | Value::Integer(_) => true,
        Value::Real(r) => decl != Decl::Text && r.is_finite(),
        Value::Blob(_) => false,
        Value::Text(t) => {
            decl != Decl::Integer || plain_integer(t) || !t.bytes().any(|b| b.is_ascii_digit())
        }
    }
}

fn plain_integer(t: &str) -> bool {
    let d = t.strip_prefix('-').unwrap_or(t);
    !d.is_empty()
        && d.bytes().all(|b| b.is_ascii_digit())
        && (d == "0" || !d.starts_with('0'))
        && !(t.starts_with('-') && d == "0")
        && t.parse::<i64>().is_ok()
}

/// A query under construction: its parameters and how it names `t`.
struct Q {
    params: Vec<Value>,
    /// Prefix of column references ("", "t.", "x.").
    prefix: String,
    from: String,
    /// Literals may be uncertain (class `Any`).
    loose: bool,
    /// `?` parameters allowed.
    use_params: bool,
}

impl Gen<'_> {
    fn push(&mut self, s: Step) {
        self.steps.push(s);
    }

    fn exec(&mut self, sql: String) {
        self.steps.push(Step::Exec(sql));
    }

    /// `t`'s own plane, and in most cases a second, smaller one (`p2`).
    fn attach_t(&mut self) {
        self.push(Step::Pleroma(self.s.attach()));
        let p2 = self.planes_rng.chance(0.7);
        self.has_p2 = Some(p2);
        if p2 {
            let sql = self.s.attach_second(&mut self.planes_rng);
            self.push(Step::Pleroma(sql));
        }
    }

    fn setup(&mut self) {
        for sql in self.s.ddl() {
            self.exec(sql);
        }
        // File databases in WAL mode: other connections and processes write.
        self.exec("PRAGMA journal_mode = WAL".into());
        let attach_first = self.rng.chance(0.4);
        if attach_first {
            self.attach_t();
        }
        let cols = self.s.insert_columns();
        let mut i = 0;
        while i < self.rows {
            let n = (self.rows - i).min(500);
            let vals: Vec<String> = (i..i + n)
                .map(|k| {
                    let u = (k as i64) < HOT_KEYS;
                    self.s.row(&mut self.rng, u.then_some(k as i64 + 1))
                })
                .collect();
            self.exec(format!("INSERT INTO t({cols}) VALUES {}", vals.join(", ")));
            i += n;
        }
        if !attach_first {
            self.attach_t();
        }
        self.push(Step::Check(counters()));
        self.limbs();
        self.push(Step::Check(counters()));
    }

    /// The join limbs: `t.p` to `parent.pid`, and `t.c` to `cat.ck`, which
    /// must be refused when either key declares a collation other than
    /// BINARY.
    fn limbs(&mut self) {
        self.push(Step::Pleroma(self.s.limb()));
        if let Some((sql, accepted)) = self.s.cat_limb() {
            self.push(if accepted {
                Step::Pleroma(sql)
            } else {
                Step::PleromaRefused(sql)
            });
        }
    }

    fn checks(&mut self, n: usize) {
        for _ in 0..n {
            let s = self.check();
            self.push(s);
        }
    }

    fn block(&mut self) {
        match self.rng.weighted(&[
            30, 22, 12, 10, 5, 4, 3, 2, 3, 3, 6, 5, 2, 6, 4, 4, 2, 4, 5, 6, 6,
        ]) {
            20 => {
                // Lookup joins, around a write to either table.
                for _ in 0..self.rng.range(1, 3) {
                    let q = self.lookup();
                    self.push(q);
                }
                let w = if self.rng.chance(0.4) {
                    self.lookup_write()
                } else {
                    self.write()
                };
                self.exec(w);
                for _ in 0..self.rng.range(1, 3) {
                    let q = self.lookup();
                    self.push(q);
                }
            }
            19 => self.expr_plane(),
            18 => self.batch_in_txn(),
            17 => self.append(),
            16 => self.fts_in_txn(),
            15 => self.stored_in_txn(),
            14 => self.stored_rows(),
            0 => {
                let n = self.rng.range(4, 10) as usize;
                self.checks(n);
            }
            1 => {
                let w = self.write();
                self.exec(w);
                if self.rng.chance(0.25) {
                    self.push(Step::Check(counters()));
                }
                let n = self.rng.range(1, 3) as usize;
                self.checks(n);
            }
            13 => self.schema_change_in_transaction(),
            2 => self.transaction(),
            3 => self.savepoints(),
            4 => {
                self.settle();
                if self.rng.chance(0.2) {
                    self.push(Step::Plain("DELETE FROM t".into()));
                } else if self.rng.chance(0.25) {
                    let cols = self.s.insert_columns();
                    let row = self.s.row(&mut self.rng, None);
                    self.push(Step::StandIn(format!("INSERT INTO t({cols}) VALUES {row}")));
                } else if self.rng.chance(0.2) {
                    let cols = self.s.insert_columns();
                    let row = self.s.row(&mut self.rng, None);
                    self.push(Step::CopyRefused(format!(
                        "INSERT INTO k.t({cols}) VALUES {row}"
                    )));
                } else {
                    let w = self.simple_write();
                    self.push(Step::Second(w));
                }
                self.checks(2);
            }
            5 => {
                self.settle();
                let w = self.simple_write();
                self.push(Step::Process(w));
                self.checks(2);
            }
            6 => {
                self.settle();
                if self.rng.chance(0.5) {
                    self.release_then_undo();
                }
                if self.rng.chance(0.5) {
                    // Writes after a snapshot, then the snapshot restored
                    // under the running connection.
                    self.push(Step::Backup);
                    for _ in 0..self.rng.range(1, 3) {
                        let w = self.simple_write();
                        self.exec(w);
                    }
                    self.push(Step::Check(any_total("SELECT COUNT(*) FROM t")));
                    self.push(Step::Restore);
                    self.checks(2);
                }
                self.push(Step::Reopen);
                self.checks(2);
            }
            7 => {
                self.settle();
                if self.rng.chance(0.5) {
                    self.push(Step::Pleroma("PRAGMA pleroma_rebuild('t')".into()));
                } else if self.has_p2.is_some() && self.planes_rng.chance(0.3) {
                    // One plane of several: the other answers alone.
                    if self.has_p2 == Some(true) {
                        self.push(Step::Pleroma("PRAGMA pleroma_detach('t', 'p2')".into()));
                        self.push(Step::Check(counters()));
                        self.checks(1);
                    }
                    let sql = self.s.attach_second(&mut self.planes_rng);
                    self.push(Step::Pleroma(sql));
                    self.has_p2 = Some(true);
                } else {
                    self.push(Step::Pleroma("PRAGMA pleroma_detach('t')".into()));
                    self.push(Step::Check(counters()));
                    self.checks(1);
                    self.attach_t();
                    self.limbs();
                }
                // Pleroma's catalog writes move none of the counters.
                self.push(Step::Check(counters()));
                self.checks(2);
            }
            8 => {
                // Statements failing after they changed rows, in autocommit
                // and inside a transaction that goes on.
                let inside = self.rng.chance(0.5);
                if inside {
                    self.exec("BEGIN".into());
                    let w = self.write();
                    self.exec(w);
                }
                let f = self.failing_write();
                self.exec(f);
                self.checks(2);
                if inside {
                    let end = if self.rng.chance(0.6) {
                        "COMMIT"
                    } else {
                        "ROLLBACK"
                    };
                    self.exec(end.into());
                    self.checks(1);
                }
            }
            12 => {
                // Schema changes: the router re-reads column positions.
                self.settle();
                let d = self.s.dims[self.rng.below(self.s.dims.len())].name.clone();
                let sql = match self.rng.below(6) {
                    0 => format!("CREATE INDEX IF NOT EXISTS i_{d} ON t({d})"),
                    1 => format!("DROP INDEX IF EXISTS i_{d}"),
                    2 => format!(
                        "ALTER TABLE t ADD COLUMN extra{} INTEGER DEFAULT 7",
                        self.rng.below(4)
                    ),
                    3 => "VACUUM".to_owned(),
                    4 => "ANALYZE".to_owned(),
                    _ => format!(
                        "CREATE INDEX IF NOT EXISTS i_{d}_m ON t({d}, {})",
                        self.s.measures[0].name
                    ),
                };
                let vacuum = sql == "VACUUM";
                self.exec(sql);
                if vacuum && !COUNTERS_AFTER_VACUUM {
                    let cols = self.s.insert_columns();
                    let row = self.s.row(&mut self.rng, None);
                    self.exec(format!("INSERT INTO t({cols}) VALUES {row}"));
                } else if vacuum {
                    self.push(Step::Check(counters()));
                }
                self.checks(3);
            }
            11 => {
                // Another Pleroma connection reads what this one commits.
                self.settle();
                for _ in 0..self.rng.range(1, 3) {
                    let w = self.write();
                    self.exec(w);
                    let q = self.check();
                    self.push(match q {
                        Step::Check(q) => Step::Reader(q),
                        other => other,
                    });
                }
            }
            10 => {
                // A repeated join (the memo) across writes to either table.
                // It sums the dimension table's column, so that a write to
                // either table changes the answer.
                let q = self.join(true);
                self.push(q.clone());
                self.push(q.clone());
                let w = match self.rng.below(4) {
                    0 => self.parent_write(),
                    1 => self.write(),
                    // Writes that change the answer.
                    2 => format!("UPDATE parent SET w = w + {}", self.rng.range(1, 9)),
                    _ => {
                        let cols = self.s.insert_columns();
                        let sel: Vec<&str> = self
                            .s
                            .columns
                            .iter()
                            .map(|c| if c == "u" { "NULL" } else { c.as_str() })
                            .collect();
                        format!(
                            "INSERT INTO t({cols}) SELECT {} FROM t WHERE p IS NOT NULL ORDER BY id LIMIT {}",
                            sel.join(", "),
                            self.rng.range(1, 20)
                        )
                    }
                };
                self.exec(w);
                self.push(q.clone());
                if self.rng.chance(0.3) {
                    self.exec("BEGIN".into());
                    let w = self.parent_write();
                    self.exec(w);
                    self.push(q.clone());
                    self.exec("ROLLBACK".into());
                }
                self.push(q);
            }
            _ => {
                if self.rng.chance(0.15) {
                    self.exec("DELETE FROM t".into());
                    self.checks(2);
                    self.refill(self.rows.min(300));
                } else {
                    let w = self.trigger_or_fk_write();
                    self.exec(w);
                }
                self.checks(2);
            }
        }
    }

    /// End any transaction a savepoint left open (after `INSERT OR ROLLBACK`
    /// ended the one a block began, `SAVEPOINT b` starts a new one): another
    /// connection could not write, and a reopen would drop it on one side
    /// only. Without a transaction both sides fail the same way.
    /// Rows through the appender: in autocommit or inside a transaction,
    /// now and then with a row that fails (a duplicate key, a trigger's
    /// RAISE), now and then with the file opened again after.
    fn append(&mut self) {
        let inside = self.rng.chance(0.3);
        if inside {
            self.exec("BEGIN".into());
            let w = self.simple_write();
            self.exec(w);
        }
        let n = if self.rng.chance(0.1) {
            self.rng.range(200, 2600) as usize
        } else {
            self.rng.range(1, 12) as usize
        };
        let mut sql = self.insert_rows(n, None, None);
        if self.rng.chance(0.2) {
            let bad = self.s.row_with_note(&mut self.rng, None, "boom");
            sql = format!("{sql}, {bad}");
        }
        self.push(Step::Append(sql));
        // Every dimension's groups, with each group's value as SQLite
        // stores it: the appender must feed the value after the column's
        // affinity (an integer into a TEXT column is a text), not the one
        // it was given.
        let dims: Vec<String> = self.s.dims.iter().map(|d| d.name.clone()).collect();
        self.push(Step::Check(Query {
            sql: format!("SELECT {0}, COUNT(*) FROM t GROUP BY {0}", dims.join(", ")),
            params: Vec::new(),
            class: Class::G,
            order: Order::Unordered,
        }));
        self.checks(2);
        if inside {
            let end = if self.rng.chance(0.7) {
                "COMMIT"
            } else {
                "ROLLBACK"
            };
            self.exec(end.into());
            self.checks(1);
        }
        if self.rng.chance(0.3) {
            self.settle();
            self.push(Step::Reopen);
            self.checks(1);
        }
    }

    /// A load inside a transaction, as a loader writes it: INSERTs mixed
    /// with writes to the rows just inserted (a value, a dimension, the
    /// rowid, DELETE, REPLACE), failing writes, a savepoint rolled back or
    /// released, and reads between them: the shapes a feed that defers
    /// the rows it was given must keep exact (issue 21, item 4).
    fn batch_in_txn(&mut self) {
        let open = self.rng.below(3);
        if open != 1 {
            self.exec("BEGIN".into());
        }
        if open != 0 {
            self.exec("SAVEPOINT s".into());
        }
        let recent = "(SELECT max(id) FROM t)";
        let mut inner = false;
        for _ in 0..self.rng.range(3, 14) {
            let w = match self.rng.weighted(&[12, 3, 3, 3, 2, 2, 2, 3, 3]) {
                0 => self.insert_rows(1, None, None),
                1 => {
                    let (m, v) = self.measure_lit();
                    let back = self.rng.range(0, 3);
                    format!("UPDATE t SET {m} = {v} WHERE id >= {recent} - {back}")
                }
                2 => {
                    let (d, v) = self.dim_lit();
                    format!("UPDATE t SET {d} = {v} WHERE id = {recent}")
                }
                3 => {
                    let back = self.rng.range(0, 2);
                    format!("DELETE FROM t WHERE id >= {recent} - {back}")
                }
                4 => {
                    let by = *self.rng.pick(&[1_000_000i64, -1_000_000, 1]);
                    format!("UPDATE t SET id = id + {by} WHERE id = {recent}")
                }
                5 => {
                    let cols = self.s.insert_columns();
                    let row = self.s.row(&mut self.rng, None);
                    let key = if self.rng.chance(0.5) {
                        recent.to_string()
                    } else {
                        format!("{recent} - 1")
                    };
                    format!("REPLACE INTO t(id, {cols}) VALUES ({key}, {}", &row[1..])
                }
                6 => self.failing_write(),
                7 => {
                    inner = !inner;
                    if inner {
                        "SAVEPOINT d".into()
                    } else if self.rng.chance(0.5) {
                        "ROLLBACK TO d".into()
                    } else {
                        "RELEASE d".into()
                    }
                }
                _ => {
                    let n = if self.rng.chance(0.1) {
                        self.rng.range(100, 600)
                    } else {
                        self.rng.range(2, 40)
                    } as usize;
                    self.insert_rows(n, None, None)
                }
            };
            self.exec(w);
            if self.rng.chance(0.25) {
                self.checks(1);
            }
        }
        let end = match (open, self.rng.chance(0.65)) {
            (1, true) => "RELEASE s",
            (_, true) => "COMMIT",
            (2, false) if self.rng.chance(0.5) => "ROLLBACK TO s",
            (_, false) => "ROLLBACK",
        };
        self.exec(end.into());
        self.checks(2);
        // A ROLLBACK TO, or a RELEASE under BEGIN, leaves the transaction
        // open: end it here (with none open, both sides fail alike).
        self.settle();
    }

    /// A literal of any storage class for the expression plane's table,
    /// with the edges its expressions have: NULL, small and far-away
    /// timestamps (past year 9999 a date is NULL), negative ones, numbers
    /// as TEXT, REAL, and text that is no number.
    fn odd_value(&mut self) -> String {
        match self.rng.below(14) {
            0 => "NULL".into(),
            1 => format!("{}", self.rng.below(100)),
            2 => format!("{}", 1_769_904_000 + self.rng.range(0, 200) * 43_200),
            3 => format!("-{}", self.rng.range(0, 3_000_000_000)),
            4 => (*self.rng.pick(&[
                "253402300799",
                "253402300800",
                "-210866760000",
                "-210866760001",
            ]))
            .into(),
            5 => format!("'{}'", self.rng.below(100)),
            6 => format!("'{}.5'", self.rng.below(10)),
            7 => (*self
                .rng
                .pick(&["'x'", "'X'", "'xy'", "'é'", "''", "' 5'", "'5 '"]))
            .into(),
            8 => format!("{}.0", self.rng.below(10)),
            9 => format!("{}.25", self.rng.below(100)),
            10 => (*self
                .rng
                .pick(&["'2026-03-04 10:00'", "'2026-02-30'", "'1769904000'"]))
            .into(),
            11 => "1".into(),
            12 => "2".into(),
            _ => format!("{}", self.rng.below(6)),
        }
    }

    /// An integer or NULL for the expression plane's STRICT table: around
    /// the month edges, negative, far away.
    fn int_value(&mut self) -> String {
        match self.rng.below(6) {
            0 => "NULL".into(),
            1 => format!("{}", self.rng.below(100)),
            2 => format!("-{}", self.rng.range(0, 3_000_000_000)),
            // Month starts and the seconds around them.
            3 => (*self.rng.pick(&[
                "253402300799",
                "253402300800",
                "1769903999",
                "1769904000",
                "1772323200",
                "1775001600",
            ]))
            .into(),
            _ => format!(
                "{}",
                1_769_904_000 + self.rng.range(0, 200) * 43_200 + self.rng.range(-1, 1)
            ),
        }
    }

    /// A table with a plane over expression dimensions (issue 22, item 1),
    /// written row by row (the hook's evaluator), rebuilt and reopened (the
    /// scan and the persisted state), and queried by the same expressions
    /// as the plane's, spelled with other spacing, case, quotes and
    /// qualifiers.
    fn expr_plane(&mut self) {
        // Every expression gives INTEGER, TEXT or NULL for any input, so
        // the plane stays in service and each query must be served.
        const EXPRS: &[&str] = &[
            "date(a, 'unixepoch')",
            "strftime('%Y-%m', a, 'unixepoch')",
            "datetime(a, 'unixepoch', 'start of month')",
            "date(b)",
            "CAST(a AS INTEGER) / 86400",
            "CAST(a AS INTEGER) % 7",
            "substr(b, 1, 2)",
            "CASE WHEN a > '50' THEN 'big' WHEN a IS NULL THEN 'none' ELSE 'small' END",
            "CASE n WHEN '1' THEN 'one' WHEN 2 THEN 'two' ELSE 'other' END",
            "iif(n >= '3', 1, 0)",
            "length(b)",
            "typeof(c)",
            "a = b",
            "c < '5'",
            "upper(b) = 'X'",
            "b || '-' || a",
            "instr(b, 'x')",
            "hex(c)",
        ];
        const LITS: &[&str] = &[
            "'2026-02-01'",
            "'2026-02'",
            "'2026-02-01 00:00:00'",
            "1",
            "0",
            "20500",
            "'big'",
            "'small'",
            "'one'",
            "'other'",
            "'integer'",
            "'text'",
            "'x'",
            "'5'",
            "2",
        ];
        self.settle();
        let x = format!("xe{}", self.rng.below(1 << 30));
        // A STRICT table holds only integers (or NULL) in `a`: there a
        // range on `a` may be served from a time bucket of it.
        let strict = self.rng.chance(0.5);
        self.exec(if strict {
            format!("CREATE TABLE {x}(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c ANY, n ANY, m INTEGER) STRICT")
        } else {
            format!("CREATE TABLE {x}(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c, n NUMERIC, m INTEGER)")
        });
        let row = move |g: &mut Self| {
            let a = if strict { g.int_value() } else { g.odd_value() };
            format!(
                "({}, {}, {}, {}, {})",
                a,
                g.odd_value(),
                g.odd_value(),
                g.odd_value(),
                *g.rng.pick(&["NULL", "1", "7", "-3", "100"])
            )
        };
        let rows: Vec<String> = (0..self.rng.range(3, 30)).map(|_| row(self)).collect();
        self.exec(format!(
            "INSERT INTO {x}(a, b, c, n, m) VALUES {}",
            rows.join(", ")
        ));
        let k = pick_distinct(&mut self.rng, EXPRS.len(), 2);
        let (mut e1, e2) = (EXPRS[k[0]], EXPRS[k[1]]);
        if self.rng.chance(0.35) {
            // A comparison whose answer follows the column's affinity: the
            // evaluator must declare `a` INTEGER and `n` NUMERIC as the
            // table does, or a text literal compares as text.
            e1 = *self.rng.pick(&[
                "CASE WHEN a > '50' THEN 'big' WHEN a IS NULL THEN 'none' ELSE 'small' END",
                "iif(n >= '3', 1, 0)",
                "CASE n WHEN '1' THEN 'one' WHEN 2 THEN 'two' ELSE 'other' END",
            ]);
        }
        if strict && self.rng.chance(0.7) {
            // A time bucket of `a`, so that ranges on `a` may be served.
            e1 = "date(a, 'unixepoch')";
        }
        let mut dims = vec![format!("{e1} AS e1")];
        if self.rng.chance(0.5) {
            dims.push(format!("{e2} AS e2"));
        }
        if self.rng.chance(0.5) {
            dims.insert(self.rng.below(dims.len() + 1), "b".into());
        }
        self.push(Step::Pleroma(format!(
            "PRAGMA pleroma_attach('{x}', '{}', 'm')",
            dims.join(", ").replace('\'', "''")
        )));
        let grouped = dims.iter().any(|d| d == "b");
        if strict && e1 == "date(a, 'unixepoch')" {
            // A row on February's first second, and ranges that start on
            // it and one second after it: the first is served, the second
            // must leave that row out (SQLite answers it).
            self.exec(format!("INSERT INTO {x}(a, m) VALUES (1769904000, 5)"));
            for (lo, class) in [(1769904000, Class::E), (1769904001, Class::Any)] {
                self.push(Step::Check(Query {
                    sql: format!(
                        "SELECT COUNT(*), SUM(m) FROM {x} WHERE a >= {lo} AND a < 1772323200"
                    ),
                    params: Vec::new(),
                    class,
                    order: Order::Unordered,
                }));
            }
        }
        // The same expression as the query writes it: other spacing, the
        // function names in capitals, the column quoted or qualified.
        let respell = |g: &mut Self, e: &str| -> String {
            match g.rng.below(4) {
                0 => e.replace(", ", " ,  "),
                1 => e
                    .replacen("date(", "DATE(", 1)
                    .replacen("substr(", "SUBSTR(", 1),
                2 => e.replacen("(a", "(\"a\"", 1),
                _ => e.replacen("(a", &format!("({x}.a"), 1),
            }
        };
        for _ in 0..self.rng.range(3, 9) {
            let inside = self.rng.chance(0.3);
            if inside {
                self.exec("BEGIN".into());
            }
            for _ in 0..self.rng.range(1, 3) {
                let w = match self.rng.below(5) {
                    0 | 1 => {
                        let rows: Vec<String> =
                            (0..self.rng.range(1, 4)).map(|_| row(self)).collect();
                        format!("INSERT INTO {x}(a, b, c, n, m) VALUES {}", rows.join(", "))
                    }
                    2 | 3 => {
                        let col = *self.rng.pick(&["a", "b", "c", "n", "m"]);
                        // The measure holds integers only.
                        let v = if col == "m" {
                            (*self.rng.pick(&["NULL", "m + 1", "-5"])).to_owned()
                        } else if col == "a" && strict {
                            self.int_value()
                        } else {
                            self.odd_value()
                        };
                        format!(
                            "UPDATE {x} SET {col} = {v} WHERE id % {} = {}",
                            self.rng.range(2, 5),
                            self.rng.range(0, 2)
                        )
                    }
                    _ => format!(
                        "DELETE FROM {x} WHERE id % {} = {}",
                        self.rng.range(3, 7),
                        self.rng.range(0, 3)
                    ),
                };
                self.exec(w);
            }
            if inside {
                let end = if self.rng.chance(0.6) {
                    "COMMIT"
                } else {
                    "ROLLBACK"
                };
                self.exec(end.into());
            }
            match self.rng.below(12) {
                0 => self.push(Step::Reopen),
                1 => self.push(Step::Pleroma(format!("PRAGMA pleroma_rebuild('{x}')"))),
                _ => {}
            }
            for _ in 0..self.rng.range(1, 4) {
                let e = if dims.len() > 1 && dims[1].ends_with(" AS e2") && self.rng.chance(0.4) {
                    e2
                } else {
                    e1
                };
                // A range of whole months on the raw column: served when a
                // dimension is a time bucket of `a` (month starts are
                // edges of every bucket here); off an edge, either route.
                const BUCKETS: &[&str] = &[
                    "date(a, 'unixepoch')",
                    "strftime('%Y-%m', a, 'unixepoch')",
                    "datetime(a, 'unixepoch', 'start of month')",
                ];
                if self.rng.chance(0.25) {
                    const MONTHS: &[i64] = &[
                        1767225600, 1769904000, 1772323200, 1775001600, 1777593600, 1780272000,
                    ];
                    let i = self.rng.below(MONTHS.len() - 1);
                    let j = self.rng.range(i as i64 + 1, MONTHS.len() as i64 - 1) as usize;
                    let (mut lo, hi) = (MONTHS[i], MONTHS[j]);
                    let bucketed = dims
                        .iter()
                        .any(|d| BUCKETS.iter().any(|b| d.starts_with(b)));
                    let on_edge = !self.rng.chance(0.4);
                    if !on_edge {
                        lo += 1;
                    }
                    let group = if self.rng.chance(0.5) {
                        format!("{e}, ")
                    } else {
                        String::new()
                    };
                    let by = if group.is_empty() { "" } else { " GROUP BY 1" };
                    self.push(Step::Check(Query {
                        sql: format!(
                            "SELECT {group}COUNT(*), SUM(m) FROM {x} WHERE a >= {lo} AND {hi} > a{by}"
                        ),
                        params: Vec::new(),
                        // Served only over a STRICT table's INTEGER
                        // column; elsewhere either route, the same rows.
                        class: if strict && bucketed && on_edge {
                            Class::E
                        } else {
                            Class::Any
                        },
                        order: Order::Unordered,
                    }));
                    continue;
                }
                let spelled = respell(self, e);
                let lit = *self.rng.pick(LITS);
                let (sql, order) = match self.rng.below(6) {
                    0 => (
                        format!("SELECT {spelled}, COUNT(*), SUM(m), MIN(m), MAX(m) FROM {x} GROUP BY {e}"),
                        Order::Unordered,
                    ),
                    1 => (
                        format!("SELECT {spelled} AS k, COUNT(*), TOTAL(m) FROM {x} GROUP BY k ORDER BY k DESC"),
                        Order::Total,
                    ),
                    2 if grouped => (
                        format!("SELECT b, {spelled}, SUM(m) FROM {x} GROUP BY 1, 2"),
                        Order::Unordered,
                    ),
                    3 => (
                        format!("SELECT COUNT(*), SUM(m) FROM {x} WHERE ({spelled}) = {lit}"),
                        Order::Unordered,
                    ),
                    4 => (
                        format!("SELECT COUNT(*), COUNT(m) FROM {x} WHERE ({spelled}) IS NULL OR ({e}) < {lit}"),
                        Order::Unordered,
                    ),
                    _ => (
                        format!(
                            "SELECT {e}, COUNT(*) FROM {x} WHERE ({spelled}) > {lit} GROUP BY 1 ORDER BY 1 LIMIT 3"
                        ),
                        Order::Total,
                    ),
                };
                self.push(Step::Check(Query {
                    sql,
                    params: Vec::new(),
                    class: Class::E,
                    order,
                }));
            }
        }
        // Out of the way of later blocks, as the other tables' planes.
        self.push(Step::Pleroma(format!("PRAGMA pleroma_detach('{x}')")));
    }

    /// A write to the lookup table `lk`.
    fn lookup_write(&mut self) -> String {
        let d = self.rng.below(self.s.dims.len());
        let v = self.s.dim_value(&mut self.rng, d).sql();
        match self.rng.below(3) {
            0 => format!(
                "INSERT INTO lk(k, kt, grp, w) VALUES ({v}, {v}, '{}', {})",
                *self.rng.pick(&["a", "b", "c", "z"]),
                self.rng.range(-3, 9)
            ),
            1 => format!("UPDATE lk SET grp = 'u', w = w + 1, kt = k WHERE k IS {v}"),
            _ => format!("DELETE FROM lk WHERE rowid = (SELECT min(rowid) FROM lk WHERE k IS {v})"),
        }
    }

    /// A lookup join (class L): `t` joined to `lk` on a dimension, served by
    /// the cells grouped by that dimension with SQLite joining the rest.
    fn lookup(&mut self) -> Step {
        let nd = self.s.dims.len();
        let d = self.s.dims[self.rng.below(nd)].name.clone();
        let other = self.s.dims[self.rng.below(nd)].name.clone();
        let m = self.measure();
        let (t, l) = *self.rng.pick(&[("t", "l"), ("e", "lk"), ("t", "x")]);
        let tdecl = if t == "t" {
            "t".to_owned()
        } else {
            format!("t {t}")
        };
        let ldecl = if l == "lk" {
            "lk".to_owned()
        } else {
            format!("lk AS {l}")
        };
        let key = *self.rng.pick(&["k", "k", "kt"]);
        let on = if self.rng.chance(0.5) {
            format!("{l}.{key} = {t}.{d}")
        } else {
            format!("{t}.{d} = {l}.{key}")
        };
        let from = match self.rng.below(5) {
            0 | 1 => format!("{tdecl} JOIN {ldecl} ON {on}"),
            2 => format!("{ldecl} INNER JOIN {tdecl} ON {on}"),
            3 => format!("{tdecl} LEFT JOIN {ldecl} ON {on}"),
            _ => format!("{tdecl} CROSS JOIN {ldecl}"),
        };
        let mut conds = Vec::new();
        if from.contains("CROSS JOIN") {
            conds.push(on.clone());
        }
        if self.rng.chance(0.3) {
            let di = self.rng.below(nd);
            let v = self.s.dim_value(&mut self.rng, di).sql();
            conds.push(format!("{t}.{} IS NOT {v}", self.s.dims[di].name));
        }
        if self.rng.chance(0.3) {
            conds.push(format!("{l}.w > {}", self.rng.range(-2, 5)));
        }
        let mut group = vec![format!("{l}.grp")];
        if self.rng.chance(0.4) {
            group.push(format!("{t}.{other}"));
        }
        if self.rng.chance(0.15) {
            group = vec![format!("{t}.{other}")];
        }
        let aggs = [
            "COUNT(*)".to_owned(),
            format!("SUM({t}.{m})"),
            format!("MIN({t}.{m})"),
            format!("MAX({t}.{m})"),
            format!("COUNT({t}.{m})"),
            format!("TOTAL({t}.{m})"),
            format!("MAX({l}.w)"),
            format!("COUNT(DISTINCT {t}.{d})"),
            format!("COUNT({l}.w)"),
            format!("SUM(CASE WHEN {l}.w > 0 THEN {t}.{m} END)"),
        ];
        let mut items = group.clone();
        for _ in 0..self.rng.range(1, 4) {
            items.push(self.rng.pick(&aggs).clone());
        }
        let mut sql = format!("SELECT {} FROM {from}", items.join(", "));
        if !conds.is_empty() {
            sql += &format!(" WHERE {}", conds.join(" AND "));
        }
        sql += &format!(" GROUP BY {}", group.join(", "));
        let order = if self.rng.chance(0.4) {
            // Over every group term: a total order, and a LIMIT may cut it.
            sql += &format!(" ORDER BY {}", group.join(", "));
            if self.rng.chance(0.5) {
                sql += &format!(" LIMIT {}", self.rng.range(1, 4));
            }
            Order::Total
        } else {
            Order::Unordered
        };
        Step::Check(Query {
            sql,
            params: Vec::new(),
            class: Class::L,
            order,
        })
    }

    fn settle(&mut self) {
        self.exec("ROLLBACK".into());
    }

    fn refill(&mut self, n: usize) {
        let cols = self.s.insert_columns();
        let vals: Vec<String> = (0..n.max(1))
            .map(|_| self.s.row(&mut self.rng, None))
            .collect();
        self.exec(format!("INSERT INTO t({cols}) VALUES {}", vals.join(", ")));
    }

    fn transaction(&mut self) {
        let begin = *self.rng.pick(&[
            "BEGIN",
            "BEGIN IMMEDIATE",
            "BEGIN DEFERRED",
            "BEGIN TRANSACTION",
        ]);
        self.exec(begin.into());
        for _ in 0..self.rng.range(1, 5) {
            let w = if self.rng.chance(0.15) {
                self.failing_write()
            } else {
                self.write()
            };
            self.exec(w);
            let n = self.rng.range(0, 2) as usize;
            self.checks(n);
        }
        let end = *self
            .rng
            .pick(&["COMMIT", "COMMIT", "END", "ROLLBACK", "ROLLBACK"]);
        self.exec(end.into());
        self.checks(2);
    }

    fn savepoints(&mut self) {
        let outer = self.rng.chance(0.4);
        if outer {
            self.exec("BEGIN".into());
        }
        self.exec("SAVEPOINT a".into());
        let w = self.write();
        self.exec(w);
        self.checks(1);
        self.exec("SAVEPOINT b".into());
        let w = self.write();
        self.exec(w);
        if self.rng.chance(0.5) {
            self.exec("SAVEPOINT c".into());
            let w = self.write();
            self.exec(w);
            self.checks(1);
            let e = if self.rng.chance(0.5) {
                "ROLLBACK TO c"
            } else {
                "RELEASE c"
            };
            self.exec(e.into());
        }
        self.checks(1);
        let e = *self.rng.pick(&[
            "ROLLBACK TO b",
            "ROLLBACK TO SAVEPOINT b",
            "RELEASE b",
            "RELEASE SAVEPOINT b",
        ]);
        self.exec(e.into());
        self.checks(1);
        let w = self.write();
        self.exec(w);
        if self.rng.chance(0.4) {
            self.exec("ROLLBACK TO a".into());
            self.checks(1);
        }
        self.exec("RELEASE a".into());
        self.checks(1);
        if outer {
            let end = if self.rng.chance(0.6) {
                "COMMIT"
            } else {
                "ROLLBACK"
            };
            self.exec(end.into());
            self.checks(1);
        }
    }

    fn id_range(&mut self) -> (i64, i64) {
        let a = self.rng.range(1, self.rows as i64);
        let w = (self.rows as i64 / 200).max(1) * self.rng.range(1, 3);
        (a, a + w)
    }

    fn dim_lit(&mut self) -> (String, String) {
        let d = self.rng.below(self.s.dims.len());
        let name = self.s.dims[d].name.clone();
        // Now and then a value the dimension has not seen: its dictionary
        // grows past its bits and the joint key re-packs. (Not for `p`, a
        // foreign key; at most 600 new values, so it stays under the cap.)
        if name != "p" && self.rng.chance(0.1) {
            let strict_int = self.s.strict && self.s.dims[d].decl == Decl::Integer;
            let v = if strict_int || self.rng.chance(0.5) {
                Lit::Int(self.rng.range(1_000, 1_300))
            } else {
                Lit::Text(format!("f{}", self.rng.below(300)))
            };
            return (name, v.sql());
        }
        let v = self.s.dim_value(&mut self.rng, d);
        (name, v.sql())
    }

    fn measure_lit(&mut self) -> (String, String) {
        let m = self.rng.below(self.s.measures.len());
        let v = self.s.measure_value(&mut self.rng, m);
        (self.s.measures[m].name.clone(), v.sql())
    }

    /// A WHERE clause picking a few rows.
    fn few_rows(&mut self) -> String {
        match self.rng.below(4) {
            0 | 1 => {
                let (a, b) = self.id_range();
                format!("id BETWEEN {a} AND {b}")
            }
            2 => {
                let mut q = self.q(false);
                q.use_params = false;
                q.prefix.clear();
                let p = self.atom(&mut q);
                format!(
                    "{p} AND id % {} = {}",
                    self.rng.range(5, 13),
                    self.rng.range(0, 4)
                )
            }
            _ => format!(
                "id IN ({}, {}, {})",
                self.rng.range(1, self.rows as i64),
                self.rng.range(1, self.rows as i64),
                self.rng.range(1, self.rows as i64)
            ),
        }
    }

    /// A write that keeps dimension and measure values within their kinds.
    fn write(&mut self) -> String {
        let cols = self.s.insert_columns();
        match self.rng.weighted(&[10, 6, 4, 10, 8, 3, 8, 4, 4, 5, 4]) {
            0 => format!(
                "INSERT INTO t({cols}) VALUES {}",
                self.s.row(&mut self.rng, None)
            ),
            1 => {
                let rows: Vec<String> = (0..self.rng.range(2, 6))
                    .map(|_| self.s.row(&mut self.rng, None))
                    .collect();
                format!("INSERT INTO t({cols}) VALUES {}", rows.join(", "))
            }
            2 => {
                let (d, v) = self.dim_lit();
                let sel: Vec<String> = self
                    .s
                    .columns
                    .iter()
                    .map(|c| match c.as_str() {
                        "u" => "NULL".into(),
                        c if c == d => v.clone(),
                        c => c.to_owned(),
                    })
                    .collect();
                format!(
                    "INSERT INTO t({cols}) SELECT {} FROM t WHERE id % {} = {} LIMIT {}",
                    sel.join(", "),
                    self.rng.range(7, 50),
                    self.rng.range(0, 6),
                    self.rng.range(1, 40)
                )
            }
            3 => {
                let (d, v) = self.dim_lit();
                let w = self.few_rows();
                if self.rng.chance(0.3) {
                    let (d2, v2) = self.dim_lit();
                    format!("UPDATE t SET {d} = {v}, {d2} = {v2} WHERE {w}")
                } else {
                    format!("UPDATE t SET {d} = {v} WHERE {w}")
                }
            }
            4 => {
                let (m, v) = self.measure_lit();
                let w = self.few_rows();
                match self.rng.below(4) {
                    0 => format!("UPDATE t SET {m} = {m} / 2 WHERE {w}"),
                    1 => format!("UPDATE t SET {m} = NULL WHERE {w}"),
                    _ => format!("UPDATE t SET {m} = {v} WHERE {w}"),
                }
            }
            5 => {
                let (a, b) = self.id_range();
                let k = self.rng.range(1, 9) * 1_000_000;
                if self.rng.chance(0.5) {
                    format!("UPDATE t SET id = id + {k} WHERE id BETWEEN {a} AND {b}")
                } else {
                    format!("UPDATE t SET rowid = -rowid WHERE rowid BETWEEN {a} AND {b}")
                }
            }
            6 => {
                let w = self.few_rows();
                if self.rng.chance(0.2) {
                    format!("DELETE FROM t WHERE {w} RETURNING id")
                } else {
                    format!("DELETE FROM t WHERE {w}")
                }
            }
            7 => {
                let u = self.rng.range(1, HOT_KEYS + 5);
                let verb = *self.rng.pick(&["REPLACE", "INSERT OR REPLACE"]);
                format!(
                    "{verb} INTO t({cols}) VALUES {}",
                    self.s.row(&mut self.rng, Some(u))
                )
            }
            8 => {
                let u = self.rng.range(1, HOT_KEYS + 5);
                let row = self.s.row(&mut self.rng, Some(u));
                let d = &self.s.dims[self.rng.below(self.s.dims.len())].name;
                let m = &self.s.measures[self.rng.below(self.s.measures.len())].name;
                match self.rng.below(3) {
                    0 => format!("INSERT INTO t({cols}) VALUES {row} ON CONFLICT(u) DO NOTHING"),
                    1 => format!("INSERT INTO t({cols}) VALUES {row} ON CONFLICT(u) DO UPDATE SET {d} = excluded.{d}, {m} = excluded.{m}"),
                    _ => format!("INSERT INTO t({cols}) VALUES {row} ON CONFLICT(u) DO UPDATE SET {m} = NULL WHERE excluded.x > 50"),
                }
            }
            9 => {
                // Real conflicts in the middle of a multi-row INSERT.
                let mode = *self.rng.pick(&[
                    "OR IGNORE",
                    "OR FAIL",
                    "OR ABORT",
                    "OR ROLLBACK",
                    "",
                    "OR REPLACE",
                ]);
                let fresh = self.rng.range(1_000_000, 1_000_000_000);
                let hot = self.rng.range(1, HOT_KEYS);
                let rows = [
                    self.s.row(&mut self.rng, Some(fresh)),
                    self.s.row(&mut self.rng, Some(hot)),
                    self.s.row(&mut self.rng, None),
                ];
                format!("INSERT {mode} INTO t({cols}) VALUES {}", rows.join(", "))
            }
            _ => self.trigger_or_fk_write(),
        }
    }

    /// A statement that fails after it changed rows.
    fn failing_write(&mut self) -> String {
        let cols = self.s.insert_columns();
        let (a, b) = self.id_range();
        let (d, v) = self.dim_lit();
        match self.rng.below(7) {
            6 => self.overflow_write(),
            0 => {
                let rows = [self.s.row(&mut self.rng, None), self.s.row(&mut self.rng, None), self.s.row_with_note(&mut self.rng, None, "boom")];
                format!("INSERT INTO t({cols}) VALUES {}", rows.join(", "))
            }
            1 => format!("UPDATE t SET {d} = {v}, note = CASE WHEN id = {b} THEN 'boom-fail' ELSE note END WHERE id BETWEEN {a} AND {b}"),
            2 => format!("UPDATE t SET {d} = {v}, note = CASE WHEN id = {b} THEN 'boom-rollback' ELSE note END WHERE id BETWEEN {a} AND {b}"),
            3 => {
                let mode = *self.rng.pick(&["", "OR FAIL", "OR ABORT", "OR ROLLBACK", "OR IGNORE"]);
                let hot = self.rng.range(1, HOT_KEYS);
                format!("UPDATE {mode} t SET {d} = {v}, u = {hot} WHERE id BETWEEN {a} AND {b}")
            }
            4 => {
                // A foreign key to a parent that does not exist, on the last row.
                let rows = [self.s.row(&mut self.rng, None), self.s.row(&mut self.rng, None)];
                let bad: Vec<String> = self
                    .s
                    .columns
                    .iter()
                    .map(|c| if c == "p" { "999".into() } else { self.s.column_value(&mut self.rng, c, None).sql() })
                    .collect();
                format!("INSERT INTO t({cols}) VALUES {}, {}, ({})", rows[0], rows[1], bad.join(", "))
            }
            _ => {
                let (m, _) = self.measure_lit();
                format!("UPDATE OR FAIL t SET {m} = 7, u = CASE WHEN id = {b} THEN {} ELSE u END WHERE id BETWEEN {a} AND {b}", self.rng.range(1, HOT_KEYS))
            }
        }
    }

    /// What SQLite stores, with a plane on a table without an INTEGER
    /// PRIMARY KEY whose only index is the plane's guard: statements that
    /// fail after they changed rows (every conflict mode; STRICT type, CHECK
    /// and NOT NULL errors; a trigger's RAISE after its own writes), in
    /// autocommit and inside transactions, and VACUUMs that renumber the
    /// rowids a negated rowid and deletes left. The oracle compares the
    /// tables after each failure and each VACUUM.
    fn stored_rows(&mut self) {
        self.settle();
        // A name of its own: blocks are also drawn independently
        // (`parity/tests/blocks.rs`), so counting this block's earlier
        // tables could name one another block made.
        let v = format!("v{}", self.rng.below(1 << 30));
        let conf = *self.rng.pick(&["ABORT", "FAIL", "ROLLBACK", "IGNORE"]);
        let strict = if self.rng.chance(0.5) { " STRICT" } else { "" };
        let columns = format!(
            "(a TEXT, m INT, k INT NOT NULL ON CONFLICT {conf}, CHECK (m IS NOT 13)){strict}"
        );
        self.exec(format!("CREATE TABLE {v}{columns}"));
        self.exec(format!("CREATE TABLE {v}_log(x INT)"));
        let raise = *self.rng.pick(&["FAIL", "ABORT", "ROLLBACK", "IGNORE"]);
        self.exec(format!(
            "CREATE TRIGGER {v}_boom BEFORE INSERT ON {v} WHEN NEW.a = 'boom' \
             BEGIN INSERT INTO {v}_log VALUES (NEW.m); SELECT RAISE({raise}, 'boom'); END"
        ));
        let rows: Vec<String> = (0..self.rng.range(3, 8))
            .map(|i| {
                format!(
                    "('{}', {}, {i})",
                    ["x", "y", "z"][self.rng.below(3)],
                    self.rng.range(-5, 5)
                )
            })
            .collect();
        self.exec(format!("INSERT INTO {v} VALUES {}", rows.join(", ")));
        self.exec(format!("INSERT INTO {v}_log VALUES (1), (2), (3)"));
        self.exec(format!("UPDATE {v} SET rowid = -rowid WHERE a = 'y'"));
        self.exec(format!("DELETE FROM {v}_log WHERE x = 2"));
        let attach_first = self.rng.chance(0.5);
        let attach = format!("PRAGMA pleroma_attach('{v}', 'a', 'm')");
        if attach_first {
            self.push(Step::Pleroma(attach.clone()));
        }
        let probe = |v: &str| {
            any_total(format!(
                "SELECT a, COUNT(*), SUM(m), COUNT(m) FROM {v} GROUP BY a ORDER BY a"
            ))
        };
        for _ in 0..self.rng.range(1, 4) {
            let inside = self.rng.chance(0.5);
            if inside {
                let begin = *self.rng.pick(&["BEGIN", "BEGIN IMMEDIATE", "SAVEPOINT s"]);
                self.exec(begin.into());
                self.exec(format!("INSERT INTO {v} VALUES ('z', 4, 40)"));
            }
            let mode = *self.rng.pick(&[
                "",
                "OR FAIL",
                "OR ABORT",
                "OR ROLLBACK",
                "OR IGNORE",
                "OR REPLACE",
            ]);
            let f = match self.rng.below(6) {
                5 if !strict.is_empty() => format!(
                    "INSERT OR REPLACE INTO {v}(rowid, a, m, k) VALUES (NULL, 'p', 1, 1), (NULL, 'q', 'bad', 2)"
                ),
                // A STRICT type error; without STRICT the text would be
                // stored (and refuse the attach), so a NOT NULL error.
                0 | 5 if strict.is_empty() => {
                    format!("INSERT {mode} INTO {v} VALUES ('p', 1, 1), ('q', 1, NULL), ('r', 3, 3)")
                }
                0 => format!("INSERT {mode} INTO {v} VALUES ('p', 1, 1), ('q', 'bad', 2), ('r', 3, 3)"),
                1 => format!("INSERT {mode} INTO {v} VALUES ('p', 1, 1), ('q', 13, 2)"),
                2 => format!("INSERT {mode} INTO {v} VALUES ('p', 1, 1), ('q', 2, NULL), ('r', 3, 3)"),
                3 => format!(
                    "UPDATE {mode} {v} SET m = CASE WHEN rowid = (SELECT max(rowid) FROM {v}) THEN 13 ELSE m + 1 END"
                ),
                _ => format!("INSERT {mode} INTO {v} VALUES ('p', 1, 1), ('boom', 2, 2)"),
            };
            self.exec(f);
            self.push(Step::Check(probe(&v)));
            if inside {
                let end = *self.rng.pick(&["COMMIT", "ROLLBACK", "RELEASE s"]);
                self.exec(end.into());
                self.settle();
            }
            self.push(Step::Check(probe(&v)));
        }
        if !attach_first {
            self.push(Step::Pleroma(attach));
        }
        // A copy of the table with a plane of its own, by SQLite's transfer
        // optimization (`INSERT INTO c SELECT * FROM v`), which plain SQLite
        // takes (the copy has no index): it gives the copy new rowids, where
        // two alike guards would keep the gaps. From a source without a
        // plane, the copy's guard alone would turn the optimization off, and
        // the rows would come in the SELECT's order, which
        // `reverse_unordered_selects` reverses.
        if self.rng.chance(0.5) {
            self.exec(format!("CREATE TABLE {v}_c{columns}"));
            self.push(Step::Pleroma(format!(
                "PRAGMA pleroma_attach('{v}_c', 'a', 'm')"
            )));
            let source = if self.rng.chance(0.5) {
                v.clone()
            } else {
                self.exec(format!("CREATE TABLE {v}_s{columns}"));
                self.exec(format!("INSERT INTO {v}_s SELECT * FROM {v}"));
                format!("{v}_s")
            };
            let reverse = self.rng.chance(0.5);
            if reverse {
                self.exec("PRAGMA reverse_unordered_selects = ON".into());
            }
            let inside = self.rng.chance(0.3);
            if inside {
                self.exec("BEGIN".into());
            }
            self.exec(format!("INSERT INTO {v}_c SELECT * FROM {source}"));
            if inside {
                self.exec("COMMIT".into());
            }
            if reverse {
                self.exec("PRAGMA reverse_unordered_selects = OFF".into());
            }
            self.push(Step::Check(any_total(format!(
                "SELECT rowid, * FROM {v}_c ORDER BY rowid"
            ))));
            self.push(Step::Pleroma(format!("PRAGMA pleroma_detach('{v}_c')")));
        }
        self.exec("VACUUM".into());
        self.push(Step::Check(counters()));
        self.push(Step::Check(probe(&v)));
        // After VACUUM, a write whose rowid follows the renumbered ones.
        self.exec(format!("INSERT INTO {v} VALUES ('x', 9, 9)"));
        self.push(Step::Check(counters()));
        self.exec(format!("UPDATE OR REPLACE {v} SET m = m + 1 WHERE a = 'x'"));
        self.push(Step::Check(counters()));
        self.push(Step::Check(probe(&v)));
        // The rest of the suite reasons about `t`'s planes alone.
        self.push(Step::Pleroma(format!("PRAGMA pleroma_detach('{v}')")));
    }

    /// A transaction whose RELEASE wrote a state row (a RELEASE while it
    /// has written persists, in case it commits), then gave its change back
    /// and committed: the committed state is the one before it, so the row
    /// written at the RELEASE must go (a reopen trusts the newest row).
    /// On a table of its own that is not STRICT (a write that makes the
    /// guards leave the schema writes a state row of its own anyway). The
    /// row goes into an existing cell with its measure NULL, so its delete
    /// gives back the cells exactly (no extremum made unknown), and the
    /// commit's delta is empty.
    fn release_then_undo(&mut self) {
        let r = format!("r{}", self.rng.below(1 << 30));
        self.exec(format!("CREATE TABLE {r}(g TEXT, m INT)"));
        self.exec(format!(
            "INSERT INTO {r} VALUES ('a', 1), ('a', 5), ('b', 2)"
        ));
        self.push(Step::Pleroma(format!(
            "PRAGMA pleroma_attach('{r}', 'g', 'm')"
        )));
        let count = any_total(format!(
            "SELECT g, COUNT(*), SUM(m) FROM {r} GROUP BY g ORDER BY g"
        ));
        // The state row goes in before the end, and stays in the open
        // transaction when the end does not end it: a RELEASE (only an
        // outermost one writes it), or a COMMIT that a deferred foreign key
        // fails. The row taken out after it leaves the planes as they were.
        let failed_commit = self.rng.chance(0.5);
        if failed_commit {
            self.exec("PRAGMA foreign_keys = ON".into());
            self.exec(format!("CREATE TABLE {r}_p(k INTEGER PRIMARY KEY)"));
            self.exec(format!(
                "CREATE TABLE {r}_c(x INT REFERENCES {r}_p(k) DEFERRABLE INITIALLY DEFERRED)"
            ));
        }
        // A plane answer and an autocommit write first: they follow any
        // other commit and persist the connection's state (after a rebuild
        // it has none), so that the transaction writes deltas.
        self.push(Step::Check(count.clone()));
        self.exec(format!("UPDATE {r} SET m = m WHERE g = 'b'"));
        if failed_commit {
            self.exec("BEGIN".into());
            self.exec(format!("INSERT INTO {r}(g) VALUES ('a')"));
            self.exec(format!("INSERT INTO {r}_c VALUES (7)"));
            self.exec("COMMIT".into());
            self.exec(format!("DELETE FROM {r}_c"));
        } else {
            self.exec("SAVEPOINT r".into());
            self.exec(format!("INSERT INTO {r}(g) VALUES ('a')"));
            self.exec("RELEASE r".into());
            self.exec("BEGIN".into());
            self.exec(format!("INSERT INTO {r}(g) VALUES ('a')"));
            self.exec("SAVEPOINT r".into());
            self.exec("RELEASE r".into());
        }
        self.exec(format!(
            "DELETE FROM {r} WHERE rowid = (SELECT max(rowid) FROM {r})"
        ));
        self.exec("COMMIT".into());
        self.push(Step::Reopen);
        self.push(Step::Check(count));
        self.push(Step::Pleroma(format!("PRAGMA pleroma_detach('{r}')")));
    }

    /// What SQLite stores inside a transaction, on a STRICT table with a
    /// plane: statements that fail part-way with an error that is no halt
    /// (a STRICT type error, in the statement or in a trigger writing
    /// another STRICT table; too deep a trigger recursion), whose earlier
    /// rows plain SQLite keeps when the statement has no statement journal.
    /// The guard must not give it one (`router/src/txn_guards.rs`). The
    /// table's only index is the guard, or it has a UNIQUE column, or it is
    /// WITHOUT ROWID. The oracle compares the tables after each failure.
    fn stored_in_txn(&mut self) {
        self.settle();
        let w = format!("w{}", self.rng.below(1 << 30));
        let keyed = self.rng.below(3);
        let (extra, options) = match keyed {
            0 => ("", "STRICT"),
            1 => (", u INT UNIQUE", "STRICT"),
            _ => (", u INT PRIMARY KEY", "STRICT, WITHOUT ROWID"),
        };
        // An AUTOINCREMENT key near the largest rowid: its third new row
        // fails with "database or disk is full", which rolls back the
        // whole transaction when the statement has no statement journal.
        let autoinc = keyed == 0 && self.rng.chance(0.3);
        let key = if autoinc {
            "id INTEGER PRIMARY KEY AUTOINCREMENT, "
        } else {
            ""
        };
        // (Not STRICT, so that only the AUTOINCREMENT calls for the guards
        // to leave.)
        let options = if autoinc { "" } else { options };
        self.exec(format!(
            "CREATE TABLE {w}({key}a TEXT, m INT, k INT{extra}) {options}"
        ));
        if autoinc {
            self.exec(format!(
                "INSERT INTO {w}(id, a, m, k) VALUES (9223372036854775804, 'x', 0, 99)"
            ));
        }
        let cols = if keyed == 0 { "a, m, k" } else { "a, m, k, u" };
        let row = |a: &str, m: &str, k: i64| {
            if keyed == 0 {
                format!("('{a}', {m}, {k})")
            } else {
                format!("('{a}', {m}, {k}, {k})")
            }
        };
        let rows: Vec<String> = (0..self.rng.range(3, 8))
            .map(|i| {
                let m = self.rng.range(-3, 4).to_string();
                row(["x", "y", "z"][self.rng.below(3)], &m, i)
            })
            .collect();
        self.exec(format!(
            "INSERT INTO {w}({cols}) VALUES {}",
            rows.join(", ")
        ));
        // A trigger that writes another STRICT table, and fails on some rows.
        let trigger = self.rng.below(4);
        if trigger == 1 || trigger == 2 {
            self.exec(format!("CREATE TABLE {w}_s(x INT) STRICT"));
            let (event, value) = if trigger == 1 {
                ("UPDATE", "CASE WHEN NEW.m > 2 THEN 'bad' ELSE NEW.m END")
            } else {
                ("DELETE", "CASE WHEN OLD.m > 1 THEN 'bad' ELSE OLD.m END")
            };
            self.exec(format!(
                "CREATE TRIGGER {w}_t AFTER {event} ON {w} BEGIN INSERT INTO {w}_s VALUES ({value}); END"
            ));
        }
        let recursive = trigger == 3;
        if recursive {
            let next = if keyed == 0 { "" } else { ", NEW.u + 1" };
            self.exec("PRAGMA recursive_triggers = ON".into());
            self.exec(format!(
                "CREATE TRIGGER {w}_r AFTER INSERT ON {w} WHEN NEW.a = 'rec' \
                 BEGIN INSERT INTO {w}({cols}) VALUES ('rec', 1, NEW.k + 1{next}); END"
            ));
        }
        self.push(Step::Pleroma(format!(
            "PRAGMA pleroma_attach('{w}', 'a', 'm')"
        )));
        let probe = any_total(format!(
            "SELECT a, COUNT(*), SUM(m), COUNT(m) FROM {w} GROUP BY a ORDER BY a"
        ));
        for round in 0..self.rng.range(1, 4) {
            let begin = *self.rng.pick(&["BEGIN", "BEGIN IMMEDIATE", "SAVEPOINT s"]);
            self.exec(begin.into());
            if self.rng.chance(0.5) {
                let r = row("w", "2", 500 + round);
                self.exec(format!("INSERT INTO {w}({cols}) VALUES {r}"));
            }
            let mode = *self
                .rng
                .pick(&["", "OR FAIL", "OR ABORT", "OR IGNORE", "OR REPLACE"]);
            let base = 1000 * (round + 1);
            let f = match self.rng.below(if trigger == 0 { 5 } else { 6 }) {
                _ if autoinc && round == 0 => format!(
                    "INSERT {mode} INTO {w}({cols}) VALUES {}, {}, {}",
                    row("p", "1", base),
                    row("q", "2", base + 1),
                    row("r", "3", base + 2)
                ),
                0 => format!(
                    "INSERT {mode} INTO {w}({cols}) VALUES {}, {}, {}",
                    row("p", "1", base),
                    row("q", "'bad'", base + 1),
                    row("r", "3", base + 2)
                ),
                1 => format!("UPDATE {mode} {w} SET m = m + 9223372036854775806"),
                2 => format!(
                    "UPDATE {mode} {w} SET m = CASE WHEN k = (SELECT max(k) FROM {w}) THEN 'x' ELSE m + 1 END"
                ),
                3 => {
                    let u = if keyed == 0 { "" } else { ", k + {base}" };
                    format!(
                        "INSERT {mode} INTO {w}({cols}) SELECT a, CASE WHEN k = (SELECT max(k) FROM {w}) \
                         THEN 'bad' ELSE m END, k + {base}{} FROM {w} ORDER BY k",
                        u.replace("{base}", &base.to_string())
                    )
                }
                4 => format!(
                    "INSERT OR REPLACE INTO {w}({cols}) VALUES {}, {}",
                    row("p", "1", 1),
                    row("q", "'bad'", 2)
                ),
                _ if recursive => {
                    format!("INSERT {mode} INTO {w}({cols}) VALUES {}", row("rec", "1", base))
                }
                _ if trigger == 1 => format!("UPDATE {mode} {w} SET m = m + 1"),
                _ => format!("DELETE FROM {w} WHERE m >= -1"),
            };
            self.exec(f);
            self.push(Step::Check(probe.clone()));
            let end = *self.rng.pick(&["COMMIT", "ROLLBACK", "RELEASE s"]);
            self.exec(end.into());
            self.settle();
            self.push(Step::Check(probe.clone()));
        }
        if self.rng.chance(0.3) {
            self.push(Step::Reopen);
            self.push(Step::Check(probe.clone()));
        }
        if recursive {
            self.exec("PRAGMA recursive_triggers = OFF".into());
        }
        // The rest of the suite reasons about `t`'s planes alone.
        self.push(Step::Pleroma(format!("PRAGMA pleroma_detach('{w}')")));
    }

    /// FTS4 and FTS5 tables beside the planed table, in a file with
    /// persisted planes. They hold a transaction's rows in memory and
    /// write them out at a savepoint or at the commit; Pleroma's own schema
    /// statements (the guards leaving and coming back) must not make them
    /// write out anywhere else (`router/src/txn_guards.rs`): the counters
    /// after each step, and the shadow tables' segments at the end, are
    /// plain SQLite's. The tables go at the end of the block (a virtual
    /// table makes every later transaction's guards leave).
    fn fts_in_txn(&mut self) {
        self.settle();
        let w = format!("x{}", self.rng.below(1 << 30));
        self.exec(format!("CREATE VIRTUAL TABLE {w}_4 USING fts4(body)"));
        self.exec(format!("CREATE VIRTUAL TABLE {w}_5 USING fts5(body)"));
        // (0: no transaction, 1: opened by BEGIN, 2: by SAVEPOINT)
        let (mut open, mut depth) = (0, 0);
        if self.rng.chance(0.5) {
            // FTS rows, then a planed write in the transaction, then FTS
            // rows in a savepoint released while the transaction goes on.
            let w1 = self.write();
            self.exec("BEGIN".into());
            self.exec(format!("INSERT INTO {w}_4(body) VALUES ('beta')"));
            self.exec(format!("INSERT INTO {w}_5(body) VALUES ('beta')"));
            self.exec(w1);
            self.exec("SAVEPOINT f0".into());
            self.exec(format!("INSERT INTO {w}_4(body) VALUES ('alpha gamma')"));
            self.exec(format!("INSERT INTO {w}_5(body) VALUES ('alpha gamma')"));
            self.exec("RELEASE f0".into());
            self.push(Step::Check(counters()));
            open = 1;
        }
        for _ in 0..self.rng.range(8, 24) {
            let f = format!("{w}_{}", self.rng.pick(&["4", "5"]));
            let sql = match self.rng.below(11) {
                0..=2 => {
                    let words = ["alpha", "beta", "gamma"];
                    let (a, b) = (*self.rng.pick(&words), *self.rng.pick(&words));
                    format!("INSERT INTO {f}(body) VALUES ('{a} {b}')")
                }
                3 => format!("DELETE FROM {f} WHERE rowid = {}", self.rng.range(1, 6)),
                4 | 5 => self.write(),
                6 if open == 0 => {
                    open = 1;
                    "BEGIN".into()
                }
                7 if open != 0 => {
                    (open, depth) = (0, 0);
                    self.rng.pick(&["COMMIT", "ROLLBACK"]).to_string()
                }
                8 => {
                    if open == 0 {
                        open = 2;
                    }
                    depth += 1;
                    format!("SAVEPOINT f{}", depth - 1)
                }
                9 if depth > 0 => {
                    if self.rng.chance(0.5) {
                        format!("ROLLBACK TO f{}", depth - 1)
                    } else {
                        depth -= 1;
                        if open == 2 && depth == 0 {
                            open = 0;
                        }
                        format!("RELEASE f{depth}")
                    }
                }
                _ => {
                    self.push(Step::Check(counters()));
                    continue;
                }
            };
            self.exec(sql);
        }
        if open != 0 {
            self.exec("COMMIT".into());
        }
        self.push(Step::Check(counters()));
        self.push(Step::Check(any_total(format!(
            "SELECT level, idx, start_block, leaves_end_block, end_block, hex(root) \
             FROM {w}_4_segdir ORDER BY level, idx"
        ))));
        self.push(Step::Check(any_total(format!(
            "SELECT id, hex(block) FROM {w}_5_data ORDER BY id"
        ))));
        self.exec(format!("DROP TABLE {w}_4"));
        self.exec(format!("DROP TABLE {w}_5"));
    }

    fn trigger_or_fk_write(&mut self) -> String {
        let cols = self.s.insert_columns();
        match self.rng.below(6) {
            0 | 1 => {
                let k = self.s.dim_value(&mut self.rng, 0).sql();
                format!(
                    "INSERT INTO aux(k, v) VALUES ({k}, {})",
                    self.rng.range(-100, 100)
                )
            }
            2 => "DELETE FROM aux WHERE rowid IN (SELECT rowid FROM aux ORDER BY rowid LIMIT 2)"
                .into(),
            3 => format!(
                "DELETE FROM parent WHERE pid = {}",
                self.rng.range(1, PARENTS)
            ),
            4 => format!(
                "INSERT OR IGNORE INTO parent(pid) VALUES ({})",
                self.rng.range(1, PARENTS)
            ),
            _ => format!(
                "INSERT INTO t({cols}) VALUES {}",
                self.s.row_with_note(&mut self.rng, None, "echo")
            ),
        }
    }

    /// A write to the join's dimension table.
    fn parent_write(&mut self) -> String {
        let k = self.rng.range(1, PARENTS);
        match self.rng.below(5) {
            0 => format!(
                "UPDATE parent SET w = {} WHERE pid = {k}",
                self.rng.range(-100, 100)
            ),
            1 => format!("UPDATE parent SET w = NULL WHERE pid = {k}"),
            2 => format!(
                "INSERT OR IGNORE INTO parent(pid, w, tag) VALUES ({k}, {}, 'g9')",
                self.rng.range(-100, 100)
            ),
            3 => format!("DELETE FROM parent WHERE pid = {k}"),
            _ => format!(
                "UPDATE parent SET w = w + 1, tag = 'g{}'",
                self.rng.below(3)
            ),
        }
    }

    /// A join of `t` to `parent` in the served shape.
    fn join(&mut self, dim_sum: bool) -> Step {
        let mut q = self.q(false);
        let (e, d) = *self.rng.pick(&[("e", "d"), ("t", "parent"), ("f", "p2")]);
        let from = if e == "t" {
            "t JOIN parent ON t.p = parent.pid".to_owned()
        } else {
            match self.rng.below(4) {
                0 => format!("t {e} JOIN parent {d} ON {e}.p = {d}.pid"),
                1 => format!("parent AS {d} JOIN t AS {e} ON {e}.p = {d}.pid"),
                2 => format!("t {e} INNER JOIN parent {d} ON {d}.pid = {e}.p"),
                _ => format!("t AS {e} JOIN parent AS {d} ON {e}.p = {d}.pid"),
            }
        };
        q.prefix = format!("{e}.");
        let nd = self.s.dims.len();
        let n = self.rng.range(0, nd.min(2) as i64) as usize;
        let group: Vec<String> = pick_distinct(&mut self.rng, nd, n)
            .into_iter()
            .map(|i| format!("{e}.{}", self.s.dims[i].name))
            .collect();
        let mut items: Vec<String> = group.clone();
        for _ in 0..self.rng.range(1, 3) {
            let a = match self.rng.below(3) {
                0 => "COUNT(*)".to_owned(),
                1 => format!("SUM({e}.{})", self.measure()),
                _ => format!("SUM({d}.w)"),
            };
            let at = self.rng.below(items.len() + 1);
            items.insert(at, a);
        }
        if dim_sum {
            let at = self.rng.below(items.len() + 1);
            items.insert(at, format!("SUM({d}.w)"));
        }
        let mut sql = format!("SELECT {} FROM {from}", items.join(", "));
        if self.rng.chance(0.5) {
            let p = self.pred(&mut q, 1);
            sql += &format!(" WHERE {p}");
        }
        if !group.is_empty() {
            sql += &format!(" GROUP BY {}", group.join(", "));
        }
        let order = if group.is_empty() {
            Order::Total
        } else {
            Order::Unordered
        };
        Step::Check(Query {
            sql,
            params: q.params,
            class: Class::J,
            order,
        })
    }

    /// A write another connection or process makes.
    fn simple_write(&mut self) -> String {
        let cols = self.s.insert_columns();
        match self.rng.below(4) {
            0 => format!(
                "INSERT INTO t({cols}) VALUES {}, {}",
                self.s.row(&mut self.rng, None),
                self.s.row(&mut self.rng, None)
            ),
            1 => {
                let (d, v) = self.dim_lit();
                let w = self.few_rows();
                format!("UPDATE t SET {d} = {v} WHERE {w}")
            }
            2 => {
                let w = self.few_rows();
                format!("DELETE FROM t WHERE {w}")
            }
            _ => {
                let (m, v) = self.measure_lit();
                let w = self.few_rows();
                format!("UPDATE t SET {m} = {v} WHERE {w}")
            }
        }
    }

    // ---- queries ----

    fn q(&mut self, loose: bool) -> Q {
        let (from, prefix) = match self.rng.below(10) {
            0 => ("t AS x".to_owned(), "x.".to_owned()),
            1 => ("main.t".to_owned(), String::new()),
            2 => ("t".to_owned(), "t.".to_owned()),
            3 => ("t x".to_owned(), String::new()),
            _ => ("t".to_owned(), String::new()),
        };
        Q {
            params: Vec::new(),
            prefix,
            from,
            loose,
            use_params: self.rng.chance(0.25),
        }
    }

    fn col(&mut self, q: &Q, name: &str) -> String {
        let name = if self.rng.chance(0.05) {
            name.to_ascii_uppercase()
        } else {
            name.to_owned()
        };
        format!("{}{name}", q.prefix)
    }

    /// A literal to compare dimension `d` with.
    fn lit(&mut self, q: &Q, d: usize) -> Lit {
        let dim = &self.s.dims[d];
        let decl = dim.decl;
        if q.loose && self.rng.chance(0.5) {
            return match self.rng.below(8) {
                0 => Lit::Text("05".into()),
                1 => Lit::Text("5.0".into()),
                2 => Lit::Text(" 7".into()),
                3 => Lit::Text("1e1".into()),
                4 => Lit::Real(2.5),
                5 => Lit::Text("v12".into()),
                6 => Lit::Int(i64::MIN),
                _ => Lit::Real(7.0),
            };
        }
        for _ in 0..20 {
            let v = match self.rng.below(100) {
                0..=59 => {
                    let dom = &dim.domain;
                    dom[self.rng.below(dom.len())].clone()
                }
                // Literals of the "wrong" type.
                60..=74 => match decl {
                    Decl::Text => Lit::Int(self.rng.range(-3, 10)),
                    // 5 and '5' against a column holding both: a value's
                    // twin of the other storage class.
                    Decl::Any => match &dim.domain[self.rng.below(dim.domain.len())] {
                        Lit::Int(n) => Lit::Text(n.to_string()),
                        Lit::Text(t) => {
                            t.parse().map_or(Lit::Int(self.rng.range(-3, 10)), Lit::Int)
                        }
                        _ => Lit::Int(self.rng.range(-3, 10)),
                    },
                    _ => Lit::Text(self.rng.range(-3, 10).to_string()),
                },
                75..=82 => Lit::Real(self.rng.range(-3, 10) as f64 + 0.5),
                83..=92 => Lit::Int(self.rng.range(-5, 50)),
                _ => Lit::Text((*self.rng.pick(&["a", "b", "zz", "A", "", "7"])).into()),
            };
            if certain(decl, &v.value()) {
                return v;
            }
        }
        Lit::Null
    }

    /// A literal or a `?` parameter.
    fn operand(&mut self, q: &mut Q, d: usize) -> String {
        let v = self.lit(q, d);
        if q.use_params && self.rng.chance(0.5) {
            q.params.push(v.value());
            "?".into()
        } else {
            v.sql()
        }
    }

    fn atom(&mut self, q: &mut Q) -> String {
        let d = self.rng.below(self.s.dims.len());
        let name = self.s.dims[d].name.clone();
        let c = self.col(q, &name);
        match self.rng.weighted(&[30, 8, 12, 8, 6]) {
            0 => {
                let op = *self
                    .rng
                    .pick(&["=", "<>", "!=", "<", "<=", ">", ">=", "=="]);
                let v = self.operand(q, d);
                if self.rng.chance(0.2) {
                    format!("{v} {op} {c}")
                } else {
                    format!("{c} {op} {v}")
                }
            }
            1 => {
                let lo = self.operand(q, d);
                let hi = self.operand(q, d);
                let not = if self.rng.chance(0.3) { "NOT " } else { "" };
                format!("{c} {not}BETWEEN {lo} AND {hi}")
            }
            2 => {
                let n = self.rng.range(1, 4);
                let list: Vec<String> = (0..n).map(|_| self.operand(q, d)).collect();
                let not = if self.rng.chance(0.3) { "NOT " } else { "" };
                format!("{c} {not}IN ({})", list.join(", "))
            }
            3 => {
                if self.rng.chance(0.5) {
                    format!("{c} IS NULL")
                } else {
                    format!("{c} IS NOT NULL")
                }
            }
            _ => {
                let v = self.operand(q, d);
                let not = if self.rng.chance(0.5) { " NOT" } else { "" };
                format!("{c} IS{not} {v}")
            }
        }
    }

    fn pred(&mut self, q: &mut Q, depth: u32) -> String {
        if depth < 3 && self.rng.chance(0.4) {
            match self.rng.below(5) {
                0 | 1 => {
                    let a = self.pred(q, depth + 1);
                    let b = self.pred(q, depth + 1);
                    format!("({a} AND {b})")
                }
                2 | 3 => {
                    let a = self.pred(q, depth + 1);
                    let b = self.pred(q, depth + 1);
                    format!("({a} OR {b})")
                }
                _ => {
                    let a = self.pred(q, depth + 1);
                    format!("NOT ({a})")
                }
            }
        } else {
            self.atom(q)
        }
    }

    fn measure(&mut self) -> String {
        self.s.measures[self.rng.below(self.s.measures.len())]
            .name
            .clone()
    }

    /// An aggregate over a measure: (SQL, is MIN/MAX).
    fn agg(&mut self, q: &Q, minmax: bool) -> (String, bool) {
        let m = self.measure();
        let m = self.col(q, &m);
        let mut kinds = vec![
            "COUNT(*)",
            "count",
            "SUM",
            "sum",
            "TOTAL",
            "AVG",
            "PleromaSumExact",
        ];
        if minmax {
            kinds.extend(["MIN", "max", "MAX"]);
        }
        let k = *self.rng.pick(&kinds);
        if k == "COUNT(*)" {
            return ("COUNT(*)".into(), false);
        }
        (format!("{k}({m})"), matches!(k, "MIN" | "max" | "MAX"))
    }

    fn check(&mut self) -> Step {
        let cat = if self.s.cat.is_some() { 3 } else { 0 };
        match self
            .rng
            .weighted(&[6, 22, 24, 12, 12, 14, 6, 5, 5, 5, cat, 18])
        {
            11 => self.residue(),
            10 => self.cat_join(),
            0 => self.served(Class::T),
            1 => self.served(Class::W),
            2 => self.served(Class::G),
            3 => self.served(Class::H),
            4 => self.served(Class::D),
            5 => self.outside(),
            6 => self.any(),
            7 => self.tlp(),
            8 => self.join(false),
            9 => {
                let mut q = self.q(false);
                q.prefix.clear();
                q.use_params = false;
                let p = self.pred(&mut q, 0);
                Step::NoRec(p)
            }
            _ => unreachable!("weighted over 12"),
        }
    }

    /// A query of a served class.
    fn served(&mut self, class: Class) -> Step {
        let mut q = self.q(false);
        Step::Check(self.shaped(&mut q, class))
    }

    fn any(&mut self) -> Step {
        let mut q = self.q(true);
        let class = *self.rng.pick(&[Class::W, Class::G, Class::D]);
        let mut query = self.shaped(&mut q, class);
        query.class = Class::Any;
        Step::Check(query)
    }

    fn shaped(&mut self, q: &mut Q, class: Class) -> Query {
        let nd = self.s.dims.len();
        let filter = match class {
            Class::T => false,
            Class::W => true,
            _ => self.rng.chance(0.6),
        };
        let group: Vec<usize> = match class {
            Class::T | Class::W => Vec::new(),
            Class::G => {
                let n = self.rng.range(1, nd.min(3) as i64) as usize;
                pick_distinct(&mut self.rng, nd, n)
            }
            _ => {
                let n = self.rng.range(0, nd.min(3) as i64) as usize;
                pick_distinct(&mut self.rng, nd, n)
            }
        };
        // The select list: (SQL, alias, group index).
        let mut items: Vec<(String, Option<String>, Option<usize>)> = Vec::new();
        for (i, &d) in group.iter().enumerate() {
            if self.rng.chance(0.85) {
                let name = self.s.dims[d].name.clone();
                items.push((self.col(q, &name), None, Some(i)));
            }
        }
        let minmax_ok = match class {
            Class::W | Class::G => !filter,
            _ => true,
        };
        let bare = class == Class::G && self.rng.chance(0.08) && !items.is_empty();
        let mut has_minmax = false;
        let mut has_distinct = false;
        if !bare {
            for _ in 0..self.rng.range(1, 4) {
                let (a, mm) = self.agg(q, minmax_ok);
                has_minmax |= mm;
                let at = self.rng.below(items.len() + 1);
                items.insert(at, (a, None, None));
            }
        }
        if class == Class::D && (!(has_minmax && filter) || self.rng.chance(0.5)) {
            has_distinct = true;
            let d = self.rng.below(nd);
            let name = self.s.dims[d].name.clone();
            let c = self.col(q, &name);
            let at = self.rng.below(items.len() + 1);
            items.insert(at, (format!("COUNT(DISTINCT {c})"), None, None));
        }
        for (k, it) in items.iter_mut().enumerate() {
            if self.rng.chance(0.2) {
                it.1 = Some(format!("c{k}"));
            }
        }
        let select: Vec<String> = items
            .iter()
            .map(|(e, a, _)| {
                if let Some(a) = a {
                    format!("{e} AS {a}")
                } else {
                    e.clone()
                }
            })
            .collect();
        let mut sql = format!("SELECT {} FROM {}", select.join(", "), q.from);
        if filter {
            let p = self.pred(q, 0);
            sql += &format!(" WHERE {p}");
        }
        if !group.is_empty() {
            let gs: Vec<String> = group
                .iter()
                .enumerate()
                .map(|(i, &d)| {
                    // By position, when the column is in the select list.
                    match items.iter().position(|it| it.2 == Some(i)) {
                        Some(k) if self.rng.chance(0.2) => (k + 1).to_string(),
                        _ => {
                            let name = self.s.dims[d].name.clone();
                            self.col(q, &name)
                        }
                    }
                })
                .collect();
            sql += &format!(" GROUP BY {}", gs.join(", "));
        }
        if class == Class::H {
            let h = self.having(q, &group, &items, 0);
            sql += &format!(" HAVING {h}");
        }
        let mut order = if group.is_empty() {
            Order::Total
        } else {
            Order::Unordered
        };
        if self.rng.chance(0.6) && !items.is_empty() {
            let mut terms: Vec<String> = Vec::new();
            let mut keys: Vec<usize> = Vec::new();
            let cover = !group.is_empty() && self.rng.chance(0.6);
            let mut covered: Vec<usize> = Vec::new();
            // Some output terms first (aggregates or group columns).
            for _ in 0..self.rng.range(if cover { 0 } else { 1 }, 2) {
                let k = self.rng.below(items.len());
                terms.push(self.order_term(q, &items, k));
                keys.push(k);
                if let Some(g) = items[k].2 {
                    covered.push(g);
                }
            }
            if cover {
                for (i, &d) in group.iter().enumerate() {
                    if covered.contains(&i) {
                        continue;
                    }
                    match items.iter().position(|it| it.2 == Some(i)) {
                        Some(k) => {
                            terms.push(self.order_term(q, &items, k));
                            keys.push(k);
                        }
                        None => {
                            let name = self.s.dims[d].name.clone();
                            let c = self.col(q, &name);
                            terms.push(format!("{c}{}", self.direction()));
                        }
                    }
                }
            }
            sql += &format!(" ORDER BY {}", terms.join(", "));
            if group.is_empty() || cover {
                order = Order::Total;
            } else {
                order = Order::Keys(keys);
            }
        }
        if order == Order::Total && self.rng.chance(0.3) {
            sql += &self.limit(q);
        }
        // The class as the router names it.
        let served_class = if class == Class::H {
            Class::H
        } else if has_distinct || (has_minmax && filter) {
            Class::D
        } else if !group.is_empty() {
            Class::G
        } else if filter {
            Class::W
        } else {
            Class::T
        };
        Query {
            sql,
            params: std::mem::take(&mut q.params),
            class: served_class,
            order,
        }
    }

    fn direction(&mut self) -> String {
        let dir = *self.rng.pick(&["", " ASC", " DESC", " DESC"]);
        let nulls = *self.rng.pick(&["", "", "", " NULLS FIRST", " NULLS LAST"]);
        format!("{dir}{nulls}")
    }

    fn order_term(
        &mut self,
        _q: &Q,
        items: &[(String, Option<String>, Option<usize>)],
        k: usize,
    ) -> String {
        let base = match (self.rng.below(3), &items[k].1) {
            (0, _) => (k + 1).to_string(),
            (1, Some(a)) => a.clone(),
            _ => items[k].0.clone(),
        };
        format!("{base}{}", self.direction())
    }

    fn limit(&mut self, q: &mut Q) -> String {
        let n = self.rng.range(0, 6);
        let o = self.rng.range(0, 4);
        if q.use_params && self.rng.chance(0.5) {
            // Bound values SQLite takes as they are, and in a query that may
            // be declined (`loose`) now and then one it converts ('2', 2.0)
            // or refuses (2.5, NULL).
            let odd = if q.loose { 12 } else { 0 };
            let mut bound = |g: &mut Self, v: i64| {
                q.params.push(match g.rng.below(12) + 12 - odd {
                    0 => Value::Text(v.to_string()),
                    1 => Value::Real(v as f64),
                    2 => Value::Real(v as f64 + 0.5),
                    3 => Value::Null,
                    _ => Value::Integer(v),
                });
            };
            return match self.rng.below(3) {
                0 => {
                    bound(self, n);
                    " LIMIT ?".into()
                }
                1 => {
                    bound(self, n);
                    bound(self, o);
                    " LIMIT ? OFFSET ?".into()
                }
                _ => {
                    bound(self, o);
                    bound(self, n);
                    " LIMIT ?, ?".into()
                }
            };
        }
        match self.rng.below(4) {
            0 => format!(" LIMIT {n}"),
            1 => format!(" LIMIT {n} OFFSET {o}"),
            2 => format!(" LIMIT {o}, {n}"),
            _ => " LIMIT -1 OFFSET 1".into(),
        }
    }

    fn having(
        &mut self,
        q: &mut Q,
        group: &[usize],
        items: &[(String, Option<String>, Option<usize>)],
        depth: u32,
    ) -> String {
        if depth < 2 && self.rng.chance(0.3) {
            let k = self.rng.below(3);
            let a = self.having(q, group, items, depth + 1);
            if k == 2 {
                return format!("NOT ({a})");
            }
            let b = self.having(q, group, items, depth + 1);
            return if k == 0 {
                format!("({a} AND {b})")
            } else {
                format!("({a} OR {b})")
            };
        }
        if !group.is_empty() && self.rng.chance(0.2) {
            // A group column against a literal (which takes its affinity).
            let i = self.rng.below(group.len());
            let d = group[i];
            let name = self.s.dims[d].name.clone();
            let c = self.col(q, &name);
            let v = self.lit(q, d).sql();
            let op = *self.rng.pick(&["=", "<>", "<", ">="]);
            return format!("{c} {op} {v}");
        }
        // An aggregate: from the select list (maybe by alias) or a new one.
        let aggs: Vec<&(String, Option<String>, Option<usize>)> =
            items.iter().filter(|it| it.2.is_none()).collect();
        let a = if !aggs.is_empty() && self.rng.chance(0.5) {
            let it = aggs[self.rng.below(aggs.len())];
            match &it.1 {
                Some(al) if self.rng.chance(0.5) && !it.0.starts_with("COUNT(DISTINCT") => {
                    al.clone()
                }
                _ => it.0.clone(),
            }
        } else {
            let m = self.measure();
            let k = *self
                .rng
                .pick(&["COUNT(*)", "SUM", "MIN", "MAX", "AVG", "COUNT", "TOTAL"]);
            if k == "COUNT(*)" {
                k.into()
            } else {
                format!("{k}({m})")
            }
        };
        let v = match self.rng.below(6) {
            0 => Lit::Real(self.rng.range(-500, 500) as f64 + 0.5),
            1 => Lit::Int(self.rng.range(0, 20)),
            2 => Lit::Text("5".into()),
            _ => Lit::Int(self.rng.range(-1000, 1000)),
        };
        match self.rng.below(6) {
            0 => format!("{a} IS NULL"),
            1 => format!("{a} IS NOT NULL"),
            2 => format!(
                "{a} BETWEEN {} AND {}",
                self.rng.range(-500, 0),
                self.rng.range(0, 3000)
            ),
            _ => {
                let op = *self.rng.pick(&["=", "<>", "<", "<=", ">", ">="]);
                let v = if q.use_params && self.rng.chance(0.3) {
                    q.params.push(v.value());
                    "?".to_owned()
                } else {
                    v.sql()
                };
                format!("{a} {op} {v}")
            }
        }
    }

    /// A query just outside the served classes: it must be declined, and
    /// still answer as SQLite does.
    /// A residue shape (class X): expressions over aggregates, wrappers,
    /// windows, functions of dimensions in WHERE and GROUP BY, FILTER and
    /// CASE inside aggregates, DISTINCT, ORDER BY an aggregate with LIMIT.
    fn residue(&mut self) -> Step {
        let mut q = self.q(false);
        q.use_params = false;
        let nd = self.s.dims.len();
        let d = self.rng.below(nd);
        let e = self.rng.below(nd);
        let dn = self.col(&q, &self.s.dims[d].name.clone());
        let en = self.col(&q, &self.s.dims[e].name.clone());
        let m = self.measure();
        let m = self.col(&q, &m);
        let from = q.from.clone();
        let p = self.pred(&mut q, 1);
        let p2 = self.pred(&mut q, 2);
        // A function of a dimension, evaluated by SQLite per group.
        let f = match self.rng.below(7) {
            0 => format!("substr({dn}, 1, 1)"),
            1 => format!("upper({dn})"),
            2 => format!("IFNULL({dn}, '-')"),
            3 => format!("typeof({dn})"),
            4 => format!("CASE WHEN {p} THEN 'in' ELSE 'out' END"),
            5 => format!("({dn} IS NULL)"),
            _ => format!("length({dn})"),
        };
        let (sql, order) = match self.rng.below(19) {
            // A scalar subquery over grouped or DISTINCT rows whose ORDER BY
            // is total (every group term, every output) fixes its first row
            // under LIMIT/OFFSET; an aggregate without GROUP BY is one row.
            17 => (
                format!(
                    "SELECT (SELECT {dn} FROM {from} GROUP BY {dn}, {en} ORDER BY {en} DESC, {dn} LIMIT 1 OFFSET {}), (SELECT SUM({m}) FROM {from} WHERE {p})",
                    self.rng.range(0, 2)
                ),
                Order::Total,
            ),
            18 => (
                format!("SELECT COUNT(*), SUM({m}) FROM {from} WHERE {dn} IS (SELECT DISTINCT {dn} FROM {from} WHERE {p} ORDER BY {dn} DESC LIMIT 1)"),
                Order::Total,
            ),
            // The aggregated rows joined to `parent`, which writes change
            // without moving the plane.
            16 => (
                format!("SELECT x.g, x.n, p.tag, p.w FROM (SELECT {dn} AS g, COUNT(*) AS n FROM {from} WHERE {p} GROUP BY {dn}) AS x JOIN parent AS p ON p.pid = x.g"),
                Order::Unordered,
            ),
            0 => (
                format!("SELECT SUM({m}) * 1.0 / COUNT(*), MAX({m}) - MIN({m}) FROM {from} WHERE {p}"),
                Order::Total,
            ),
            1 => (
                format!("SELECT {dn}, ROUND(AVG({m}), 1), printf('%d', COUNT(*)) FROM {from} GROUP BY {dn}"),
                Order::Unordered,
            ),
            2 => (
                format!("SELECT {dn}, CASE WHEN COUNT({m}) > 1 THEN 'many' ELSE 'few' END, CAST(TOTAL({m}) AS TEXT) FROM {from} GROUP BY 1"),
                Order::Unordered,
            ),
            3 => (
                format!("SELECT {f} AS k, COUNT(*), SUM({m}) FROM {from} GROUP BY k"),
                Order::Unordered,
            ),
            4 => (
                format!("SELECT COUNT(*), MIN({m}) FROM {from} WHERE {f} = 'in' OR {dn} LIKE 'a%' OR abs({en}) > 2"),
                Order::Total,
            ),
            5 if self.rng.chance(0.5) => (
                format!("SELECT {dn}, SUM({m}) AS s FROM {from} GROUP BY {dn} ORDER BY s DESC, {dn} LIMIT 2"),
                Order::Total,
            ),
            // No group column among the sort keys: served when the cut does
            // not fall between ties.
            // The same with the bounds as parameters (read when it runs).
            5 if self.rng.chance(0.5) => {
                let (l, o) = (self.rng.range(-1, 4), self.rng.range(-1, 2));
                let sql = if self.rng.chance(0.5) {
                    q.params.extend([Value::Integer(l), Value::Integer(o)]);
                    format!("SELECT {dn}, COUNT(*) FROM {from} GROUP BY {dn} ORDER BY COUNT(*) DESC LIMIT ? OFFSET ?")
                } else {
                    q.params.extend([Value::Integer(o), Value::Integer(l)]);
                    format!("SELECT {dn}, COUNT(*) FROM {from} GROUP BY {dn} ORDER BY COUNT(*) DESC LIMIT ?, ?")
                };
                (sql, Order::Keys(vec![1]))
            }
            5 => (
                format!(
                    "SELECT {dn}, COUNT(*) FROM {from} GROUP BY {dn} ORDER BY COUNT(*) DESC LIMIT {} OFFSET {}",
                    self.rng.range(0, 4),
                    self.rng.range(0, 2)
                ),
                Order::Keys(vec![1]),
            ),
            6 => (
                format!("SELECT {dn}, COUNT(*) AS n, RANK() OVER (ORDER BY COUNT(*) DESC) FROM {from} GROUP BY {dn}"),
                Order::Unordered,
            ),
            7 => (
                format!("SELECT {dn}, SUM(COUNT(*)) OVER (ORDER BY {dn}) FROM {from} GROUP BY {dn} ORDER BY {dn}"),
                Order::Total,
            ),
            8 => (
                format!("SELECT * FROM (SELECT {dn} AS g, COUNT(*) AS n, SUM({m}) AS s FROM {from} WHERE {p} GROUP BY {dn}) WHERE n > 1"),
                Order::Unordered,
            ),
            9 => (
                format!("WITH w AS (SELECT {dn} AS g, {en} AS h, COUNT(*) AS n FROM {from} GROUP BY {dn}, {en}) SELECT COUNT(*), MIN(n), MAX(n) FROM w"),
                Order::Total,
            ),
            10 => (
                format!("SELECT (SELECT COUNT(*) FROM {from} WHERE {p}) * 100.0 / (SELECT COUNT(*) FROM {from})"),
                Order::Total,
            ),
            11 => (
                format!("SELECT COUNT(*) FILTER (WHERE {p}), SUM({m}) FILTER (WHERE {p2}), SUM(CASE WHEN {p2} THEN {m} ELSE 0 END), SUM(CASE WHEN {p} THEN 1 ELSE 0 END) FROM {from}"),
                Order::Total,
            ),
            12 => (
                format!("SELECT DISTINCT {dn}, {f} FROM {from} WHERE {p}"),
                Order::Unordered,
            ),
            13 => (
                format!("SELECT MIN({dn}), MAX({en}), COUNT(DISTINCT {f}) FROM {from} WHERE {p}"),
                Order::Total,
            ),
            14 => (
                format!("SELECT {dn}, COUNT(*) FROM {from} WHERE {p} GROUP BY {dn} UNION ALL SELECT NULL, COUNT(*) FROM {from} WHERE {p2}"),
                Order::Unordered,
            ),
            _ => (
                format!("SELECT {dn}, COUNT(*) FROM {from} GROUP BY {dn} HAVING SUM({m}) * 2 > COUNT(*) OR {dn} IS NULL"),
                Order::Unordered,
            ),
        };
        Step::Check(Query {
            sql,
            params: q.params,
            class: Class::X,
            order,
        })
    }

    /// The residue's classes of issue 19, each on a small table of its own
    /// whose rows make the wrong answer differ (class `Out`: declined, or
    /// served by the residue, and equal to SQLite either way). Run at the
    /// end of a case, so they move nothing the blocks check.
    fn residue_probes(&mut self) {
        const SIX: &str = "(id INTEGER PRIMARY KEY, region TEXT, status TEXT, amount INTEGER, qty INTEGER, note TEXT)";
        const SIX_ROWS: &str = "(region, status, amount, qty, note) VALUES ('east','open',10,1,'x'),('east','paid',10,2,'y'),('east','open',20,3,'x'),('west','open',10,4,'y'),('west','void',30,5,'x'),('north','paid',20,6,'x')";
        let probes: Vec<Probe> = vec![
            // An empty table: a statement naming no dimension sees no group.
            (
                vec!["CREATE TABLE rq1(id INTEGER PRIMARY KEY, region TEXT, amount INTEGER)".into()],
                "PRAGMA pleroma_attach('rq1', 'region', 'amount')".into(),
                vec![
                    ("SELECT SUM(1), MAX(1), count(DISTINCT 5), typeof(SUM(1)) FROM rq1", Order::Total),
                    ("SELECT DISTINCT 1 FROM rq1", Order::Unordered),
                    ("SELECT count(*) FROM rq1 GROUP BY 'a'", Order::Unordered),
                ],
            ),
            // A name in GROUP BY / HAVING is the table's column first.
            (
                vec![format!("CREATE TABLE rq2{SIX}"), format!("INSERT INTO rq2{SIX_ROWS}")],
                "PRAGMA pleroma_attach('rq2', 'region, status', 'amount, qty')".into(),
                vec![
                    ("SELECT 'k' AS amount, sum(qty) FROM rq2 GROUP BY amount", Order::Unordered),
                    ("SELECT 'k' AS rowid, count(*) FROM rq2 GROUP BY rowid", Order::Unordered),
                    ("SELECT 12 AS note, count(*) * 1 FROM rq2 GROUP BY note, region", Order::Unordered),
                    ("SELECT region, count(*) AS id FROM rq2 GROUP BY region HAVING id > 0", Order::Unordered),
                    ("SELECT region, count(*) AS rowid FROM rq2 GROUP BY region HAVING rowid > 0", Order::Unordered),
                ],
            ),
            // A WHERE term that raises on rows an index skips.
            (
                vec![
                    "CREATE TABLE rq3(id INTEGER PRIMARY KEY, k INTEGER, status TEXT, amount INTEGER)".into(),
                    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) INSERT INTO rq3 SELECT i, CASE WHEN i % 97 = 0 THEN 1 WHEN i % 10 = 0 THEN -9223372036854775808 ELSE i % 4 END, CASE WHEN i % 97 = 0 THEN 'x' ELSE 'a' END, i % 5 FROM n".into(),
                    "CREATE INDEX rq3_status ON rq3(status)".into(),
                    "ANALYZE rq3".into(),
                ],
                "PRAGMA pleroma_attach('rq3', 'k, status', 'amount')".into(),
                vec![("SELECT count(*) * 1 FROM rq3 WHERE abs(k) >= 0 AND status = 'x'", Order::Total)],
            ),
            // SUM/AVG of a CASE over two measures: one accumulator.
            (
                vec![
                    "CREATE TABLE rq4(id INTEGER PRIMARY KEY, g TEXT, a INTEGER, b INTEGER)".into(),
                    "INSERT INTO rq4 VALUES (1, 'x', 5000000000000000000, 0), (2, 'y', 0, 5000000000000000000), (3, 'y', 0, -5000000000000000000)".into(),
                ],
                "PRAGMA pleroma_attach('rq4', 'g', 'a, b')".into(),
                vec![
                    ("SELECT SUM(CASE WHEN g = 'x' THEN a ELSE b END) FROM rq4", Order::Total),
                    ("SELECT AVG(CASE WHEN g = 'x' THEN a ELSE b END) FROM rq4 WHERE id < 3", Order::Total),
                ],
            ),
            // A window's FILTER, analysed like its arguments.
            (
                vec![format!("CREATE TABLE rq5{SIX}"), format!("INSERT INTO rq5{SIX_ROWS}")],
                "PRAGMA pleroma_attach('rq5', 'region, status', 'amount, qty')".into(),
                vec![
                    ("SELECT region, count(*) AS n, SUM(count(*)) FILTER (WHERE count(*) > 1) OVER () AS big FROM rq5 GROUP BY region ORDER BY 1", Order::Total),
                    ("SELECT region, SUM(COUNT(*)) FILTER (WHERE status = 'open') OVER () AS w FROM rq5 WHERE status IS NOT NULL GROUP BY region ORDER BY 1", Order::Total),
                ],
            ),
            // DISTINCT ordered by a term it does not output; an outer query's
            // bare columns; NATURAL JOIN over the core's renamed columns.
            (
                vec![
                    "CREATE TABLE rq6(id INTEGER PRIMARY KEY, region TEXT, status TEXT, amount INTEGER)".into(),
                    "INSERT INTO rq6(region, status, amount) VALUES ('east','void',1),('west','paid',2),('west','void',3),('east','paid',4)".into(),
                ],
                "PRAGMA pleroma_attach('rq6', 'region, status', 'amount')".into(),
                vec![
                    ("SELECT DISTINCT region FROM rq6 ORDER BY status", Order::Total),
                    ("SELECT max(status), region FROM (SELECT DISTINCT region, status FROM rq6 WHERE status <> 'void')", Order::Total),
                    ("SELECT status, region, count(*) FROM (SELECT DISTINCT region, status FROM rq6) GROUP BY status ORDER BY 1", Order::Total),
                    ("SELECT a.region FROM (SELECT region, count(*) FROM rq6 GROUP BY region) AS a NATURAL JOIN (SELECT region, count(1) FROM rq6 WHERE status = 'paid' GROUP BY region) AS b ORDER BY 1", Order::Total),
                ],
            ),
        ];
        for (ddl, attach, queries) in probes {
            for sql in ddl {
                self.exec(sql);
            }
            self.push(Step::Pleroma(attach));
            for (sql, order) in queries {
                self.push(Step::Check(Query {
                    sql: sql.into(),
                    params: Vec::new(),
                    class: Class::Out,
                    order,
                }));
            }
        }
        // A scalar subquery's first row over grouped or DISTINCT rows: in
        // rq7 an index on (status, region) gives SQLite's GROUP BY its
        // order (first group ('b', 'x'), the core's ('a', 'y')); in rq8 the
        // row that first gave 'a' is deleted after the attach (SQLite's
        // first DISTINCT region is rowid 2's 'b', the core still meets 'a'
        // first). Declined (`Out`), or, with an order that fixes the first
        // row or at most one row, served (`X`).
        for sql in [
            "CREATE TABLE rq7(id INTEGER PRIMARY KEY, region TEXT, status TEXT, amount INTEGER)",
            "INSERT INTO rq7(region, status, amount) VALUES ('a','y',10),('b','x',2),('b','y',3)",
            "CREATE INDEX rq7_sr ON rq7(status, region)",
            "CREATE TABLE rq8(id INTEGER PRIMARY KEY, region TEXT, status TEXT, amount INTEGER)",
            "INSERT INTO rq8(region, status, amount) VALUES ('a','q',1),('b','q',2),('a','q',3),('c','p',4)",
        ] {
            self.exec(sql.into());
        }
        self.push(Step::Pleroma(
            "PRAGMA pleroma_attach('rq7', 'region, status', 'amount')".into(),
        ));
        self.push(Step::Pleroma(
            "PRAGMA pleroma_attach('rq8', 'region, status', 'amount')".into(),
        ));
        self.exec("DELETE FROM rq8 WHERE id = 1".into());
        for (sql, class) in [
            ("SELECT (SELECT region FROM rq7 GROUP BY region, status)", Class::Out),
            ("SELECT count(*) FROM rq7 WHERE region = (SELECT region FROM rq7 GROUP BY region, status)", Class::Out),
            ("SELECT region, sum(amount) FROM rq7 GROUP BY region HAVING sum(amount) > (SELECT sum(amount) FROM rq7 GROUP BY region, status) ORDER BY 1", Class::Out),
            ("SELECT (SELECT status FROM rq7 GROUP BY region, status ORDER BY region DESC LIMIT 1)", Class::Out),
            ("SELECT (SELECT DISTINCT region FROM rq8 WHERE status = 'q')", Class::Out),
            ("SELECT count(*), sum(amount) FROM rq8 WHERE region IN ((SELECT DISTINCT region FROM rq8 WHERE status = 'q'), 'z')", Class::Out),
            ("SELECT (SELECT region FROM rq7 GROUP BY region, status ORDER BY status, region LIMIT 1), (SELECT SUM(amount) FROM rq7)", Class::X),
            ("SELECT (SELECT DISTINCT region FROM rq8 WHERE status = 'q' ORDER BY region DESC LIMIT 1 OFFSET 1)", Class::X),
        ] {
            self.push(Step::Check(Query {
                sql: sql.into(),
                params: Vec::new(),
                class,
                order: Order::Total,
            }));
        }
        // Column names after `full_column_names`: a cached classification
        // or prepared statement keeps the names of before.
        // The residue's text and the cells' direct answer.
        let names = [
            (
                "SELECT rq2.region, count(*) * 1 FROM rq2 GROUP BY rq2.region",
                Class::X,
            ),
            (
                "SELECT rq2.region, count(*) FROM rq2 GROUP BY rq2.region",
                Class::G,
            ),
        ];
        for flip in [
            None,
            Some("PRAGMA short_column_names = 0"),
            Some("PRAGMA full_column_names = 1"),
            Some("PRAGMA full_column_names = 0"),
            Some("PRAGMA short_column_names = 1"),
        ] {
            if let Some(f) = flip {
                self.exec(f.into());
            }
            for (sql, class) in names {
                self.push(Step::Check(Query {
                    sql: sql.into(),
                    params: Vec::new(),
                    class,
                    order: Order::Unordered,
                }));
            }
        }
    }

    fn outside(&mut self) -> Step {
        let mut q = self.q(false);
        q.prefix.clear();
        q.from = "t".into();
        let d = self.rng.below(self.s.dims.len());
        let dn = self.s.dims[d].name.clone();
        let m = self.measure();
        let p = self.pred(&mut q, 1);
        let (sql, order) = match self.rng.below(24) {
            // A scalar subquery over grouped or DISTINCT rows without an
            // order that fixes its first row: SQLite's scan picks it (an
            // index for GROUP BY; for DISTINCT the rowids, which deletes,
            // inserts and rowid updates move away from the order the plane
            // first met the values in).
            20 => {
                let e = self.s.dims[self.rng.below(self.s.dims.len())].name.clone();
                let sub = format!("(SELECT {dn} FROM t GROUP BY {e}, {dn})");
                let sql = if self.rng.chance(0.5) {
                    format!("SELECT {sub}")
                } else {
                    format!("SELECT COUNT(*) FROM t WHERE {dn} = {sub}")
                };
                (sql, Order::Total)
            }
            21..=23 => {
                let e = self.s.dims[self.rng.below(self.s.dims.len())].name.clone();
                let filter = match self.rng.below(3) {
                    0 => String::new(),
                    1 => format!(" WHERE {e} IS NOT NULL"),
                    _ => format!(" WHERE {p}"),
                };
                let sub = format!("(SELECT DISTINCT {dn} FROM t{filter})");
                let sql = if self.rng.chance(0.5) {
                    format!("SELECT {sub}")
                } else {
                    format!("SELECT COUNT(*), SUM({m}) FROM t WHERE {dn} IS {sub}")
                };
                (sql, Order::Total)
            }
            // Issue 19: an alias spelled like a measure is the column in
            // GROUP BY; like a non-plane column in HAVING (the direct path
            // too); DISTINCT ordered by a non-output; NATURAL JOIN of cores.
            16 => (
                format!("SELECT 'k' AS {m}, COUNT(*) FROM t GROUP BY {m}"),
                Order::Unordered,
            ),
            17 => {
                let e = self.s.dims[self.rng.below(self.s.dims.len())].name.clone();
                (
                    format!("SELECT DISTINCT {dn} FROM t ORDER BY {e}"),
                    Order::Unordered,
                )
            }
            18 => (
                format!("SELECT {dn}, COUNT(*) AS x FROM t GROUP BY {dn} HAVING x IS NOT NULL OR x IS NULL"),
                Order::Unordered,
            ),
            19 => (
                format!("SELECT a.g FROM (SELECT {dn} AS g, COUNT(*) FROM t GROUP BY {dn}) AS a NATURAL JOIN (SELECT {dn} AS g, COUNT(1) FROM t WHERE {p} GROUP BY {dn}) AS b"),
                Order::Unordered,
            ),
            0 => (
                format!(
                    "SELECT COUNT(*) FROM t WHERE note = 'n{}'",
                    self.rng.below(10)
                ),
                Order::Total,
            ),
            1 => (
                format!(
                    "SELECT SUM({m}) FROM t WHERE x > {} AND {p}",
                    self.rng.range(0, 100)
                ),
                Order::Total,
            ),
            2 => ("SELECT COUNT(DISTINCT note) FROM t".into(), Order::Total),
            3 => ("SELECT SUM(x), COUNT(*) FROM t".into(), Order::Total),
            4 => (
                format!("SELECT {dn}, {m} FROM t WHERE {p} ORDER BY id LIMIT 20"),
                Order::Total,
            ),
            5 => (
                format!("SELECT COUNT(*) FROM t WHERE {dn} LIKE 'a%'"),
                Order::Total,
            ),
            6 => (
                format!("SELECT {dn}, COUNT(*) FROM t GROUP BY {dn} LIMIT 2"),
                Order::CountOnly,
            ),
            7 => (
                format!("SELECT COUNT(*) FROM t WHERE {m} > 0"),
                Order::Total,
            ),
            8 => (
                format!("SELECT SUM({m} + 1) FROM t WHERE {p}"),
                Order::Total,
            ),
            9 => (
                format!("SELECT COUNT(*) FROM t WHERE {dn} IN (SELECT k FROM aux)"),
                Order::Total,
            ),
            10 => match self.rng.below(4) {
                0 => ("SELECT COUNT(*), SUM(t.x) FROM t JOIN parent ON t.p = parent.pid".into(), Order::Total),
                1 => ("SELECT d.tag, COUNT(*) FROM t e JOIN parent d ON e.p = d.pid GROUP BY d.tag".into(), Order::Unordered),
                2 => ("SELECT COUNT(*) FROM t e LEFT JOIN parent d ON e.p = d.pid".into(), Order::Total),
                _ => ("SELECT COUNT(*), SUM(d.w) FROM t e JOIN parent d ON e.p = d.pid WHERE d.tag = 'g1'".into(), Order::Total),
            },
            11 => (format!("SELECT DISTINCT {dn} FROM t"), Order::Unordered),
            12 => (
                "SELECT note, COUNT(*) FROM t GROUP BY note".into(),
                Order::Unordered,
            ),
            13 => (format!("SELECT MIN({dn}), MAX({dn}) FROM t"), Order::Total),
            14 => (
                "SELECT COUNT(*) FROM t UNION ALL SELECT COUNT(*) FROM aux".into(),
                Order::Unordered,
            ),
            _ => (
                format!("SELECT COUNT(*) + 1 FROM t WHERE {p}"),
                Order::Total,
            ),
        };
        Step::Check(Query {
            sql,
            params: q.params,
            class: Class::Out,
            order,
        })
    }

    fn tlp(&mut self) -> Step {
        let mut q = self.q(false);
        q.prefix.clear();
        q.use_params = false;
        let nd = self.s.dims.len();
        let n = self.rng.range(0, nd.min(2) as i64) as usize;
        let group: Vec<String> = pick_distinct(&mut self.rng, nd, n)
            .into_iter()
            .map(|d| self.s.dims[d].name.clone())
            .collect();
        let measure = self
            .s
            .measures
            .iter()
            .find(|m| m.profile == Profile::Small)
            .map(|m| m.name.clone())
            .unwrap_or_else(|| self.s.measures[0].name.clone());
        let base = self.rng.chance(0.3).then(|| self.pred(&mut q, 1));
        let (p, pnull) = if self.rng.chance(0.3) {
            let p = self.pred(&mut q, 0);
            let pnull = format!("({p}) IS NULL");
            (p, pnull)
        } else {
            // One comparison with non-NULL operands is NULL exactly where
            // its column is.
            let d = self.rng.below(nd);
            let c = self.s.dims[d].name.clone();
            let mut v = self.lit(&q, d);
            while v == Lit::Null {
                v = self.lit(&q, d);
            }
            let op = *self.rng.pick(&["=", "<>", "<", "<=", ">", ">="]);
            match self.rng.below(4) {
                0 => (
                    format!(
                        "{c} IN ({}, {})",
                        v.sql(),
                        self.s.dims[d].domain[0].sql().replace("NULL", "0")
                    ),
                    format!("{c} IS NULL"),
                ),
                1 => (
                    format!("{c} IS {}", v.sql()),
                    format!("{c} IS NULL AND {c} IS NOT NULL"),
                ),
                _ => (format!("{c} {op} {}", v.sql()), format!("{c} IS NULL")),
            }
        };
        Step::Tlp(Tlp {
            group,
            measure,
            base,
            p,
            pnull,
        })
    }
}

/// After `VACUUM`, check `last_insert_rowid()` (fixed: VACUUM's last
/// insert is into the new `sqlite_schema`, and the router takes Pleroma's
/// own rows out of that count; see `router/src/vacuum.rs`).
pub const COUNTERS_AFTER_VACUUM: bool = true;

/// The connection's counters, which Pleroma's own catalog writes must not
/// move (the plain side never runs the Pleroma PRAGMAs, so they match
/// exactly).
pub const COUNTERS: &str = "SELECT last_insert_rowid(), changes(), total_changes()";

/// A residue probe: its table's statements, its plane, its queries.
type Probe = (Vec<String>, String, Vec<(&'static str, Order)>);

/// A query of class `Any` whose order is total.
fn any_total(sql: impl Into<String>) -> Query {
    Query {
        sql: sql.into(),
        params: Vec::new(),
        class: Class::Any,
        order: Order::Total,
    }
}

fn counters() -> Query {
    Query {
        sql: COUNTERS.into(),
        params: Vec::new(),
        class: Class::Out,
        order: Order::Total,
    }
}

/// `sql` with every identifier `from` (outside string literals) written
/// `to`: a write aimed at a renamed column or table.
fn subst(sql: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let b = sql.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'\'' {
            let start = i;
            i += 1;
            while i < b.len() {
                if b[i] == b'\'' {
                    if b.get(i + 1) == Some(&b'\'') {
                        i += 2;
                        continue;
                    }
                    break;
                }
                i += 1;
            }
            i = (i + 1).min(b.len());
            out.push_str(&sql[start..i]);
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let w = &sql[start..i];
            out.push_str(if w.eq_ignore_ascii_case(from) { to } else { w });
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
            out.push_str(&sql[start..i]);
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    out
}

/// A schema change made inside a transaction or savepoint (or in
/// autocommit), then kept or undone.
#[derive(Clone, Debug)]
enum Ddl {
    /// `ALTER TABLE t ADD COLUMN`.
    AddColumn,
    /// `ALTER TABLE t DROP COLUMN c`; whether `c` is a plane column.
    DropColumn(String, bool),
    /// `ALTER TABLE t RENAME COLUMN c TO c_r` (and back, within the change
    /// if the flag says so); whether `c` is a plane column.
    RenameColumn(String, bool, bool),
    /// `ALTER TABLE t RENAME TO t_away`, writes, and back.
    RenameTable,
    /// `DROP TABLE t` and `CREATE TABLE t` with the same columns (the
    /// given one declared with a collation), its triggers and new rows.
    DropTable(Option<(String, &'static str)>),
    /// `CREATE TEMP TABLE t` shadowing `t`, writes to both, and (if the flag
    /// says so) `DROP TABLE temp.t` within the change.
    TempShadow(bool),
}

impl Gen<'_> {
    /// A multi-row INSERT whose last row fails part-way: `abs()` of
    /// i64::MIN raises `integer overflow` after the first rows went in.
    fn overflow_write(&mut self) -> String {
        let m = self.measure();
        let cols = self.s.insert_columns();
        let rows: Vec<String> = (0..self.rng.range(1, 3))
            .map(|_| self.s.row(&mut self.rng, None))
            .collect();
        let bad: Vec<String> = self
            .s
            .columns
            .iter()
            .map(|c| {
                if *c == m {
                    "abs(-9223372036854775808)".into()
                } else {
                    self.s.column_value(&mut self.rng, c, None).sql()
                }
            })
            .collect();
        format!(
            "INSERT INTO t({cols}) VALUES {}, ({})",
            rows.join(", "),
            bad.join(", ")
        )
    }

    /// A served shape (or a join) as class `Any`: for the windows where the
    /// plane may be out of service (a schema change not yet undone or
    /// rebuilt), where either route is right but the answer must match.
    fn loose(&mut self) -> Step {
        let step = match self.rng.below(8) {
            0 => self.join(false),
            1 if self.s.cat.is_some() => self.cat_join(),
            _ => {
                let class = *self
                    .rng
                    .pick(&[Class::T, Class::W, Class::G, Class::D, Class::H]);
                self.served(class)
            }
        };
        match step {
            Step::Check(mut q) => {
                q.class = Class::Any;
                Step::Check(q)
            }
            other => other,
        }
    }

    fn loose_checks(&mut self, n: usize) {
        for _ in 0..n {
            let s = self.loose();
            self.push(s);
        }
    }

    /// A join of `t` to `cat` on the TEXT key `c`: served by the limb when
    /// both keys compare by BINARY (class J), else declined (the limb was
    /// refused) and answered by SQLite under the key's collation.
    fn cat_join(&mut self) -> Step {
        let binary = self.s.cat.as_ref().is_some_and(|c| c.binary());
        let mut q = self.q(false);
        q.use_params = false;
        let (e, d) = *self.rng.pick(&[("t", "cat"), ("e", "k")]);
        let from = match (e, self.rng.below(4)) {
            ("t", 0) => "t JOIN cat ON t.c = cat.ck".to_owned(),
            ("t", 1) => "cat JOIN t ON cat.ck = t.c".to_owned(),
            ("t", _) => "t JOIN cat ON cat.ck = t.c".to_owned(),
            (_, 0) => format!("t {e} JOIN cat {d} ON {e}.c = {d}.ck"),
            (_, 1) => format!("cat AS {d} JOIN t AS {e} ON {d}.ck = {e}.c"),
            _ => format!("t AS {e} INNER JOIN cat AS {d} ON {e}.c = {d}.ck"),
        };
        q.prefix = format!("{e}.");
        let nd = self.s.dims.len();
        let n = self.rng.range(0, nd.min(2) as i64) as usize;
        let group: Vec<String> = pick_distinct(&mut self.rng, nd, n)
            .into_iter()
            .map(|i| format!("{e}.{}", self.s.dims[i].name))
            .collect();
        let mut items: Vec<String> = group.clone();
        for _ in 0..self.rng.range(1, 3) {
            let a = match self.rng.below(3) {
                0 => "COUNT(*)".to_owned(),
                1 => format!("SUM({e}.{})", self.measure()),
                _ => format!("SUM({d}.w)"),
            };
            let at = self.rng.below(items.len() + 1);
            items.insert(at, a);
        }
        let mut sql = format!("SELECT {} FROM {from}", items.join(", "));
        if self.rng.chance(0.4) {
            let p = self.pred(&mut q, 1);
            sql += &format!(" WHERE {p}");
        }
        if !group.is_empty() {
            sql += &format!(" GROUP BY {}", group.join(", "));
        }
        let mut order = if group.is_empty() {
            Order::Total
        } else {
            Order::Unordered
        };
        // ORDER BY outputs (by position or as written), and a LIMIT when
        // the order is total (every group column among the keys).
        if self.rng.chance(0.4) {
            let n = self.rng.range(1, items.len() as i64 + 1) as usize;
            let mut keys: Vec<usize> = pick_distinct(&mut self.rng, items.len(), n);
            if self.rng.chance(0.5) {
                for (k, it) in items.iter().enumerate() {
                    if group.contains(it) && !keys.contains(&k) {
                        keys.push(k);
                    }
                }
            }
            let terms: Vec<String> = keys
                .iter()
                .map(|&k| {
                    let base = if self.rng.chance(0.5) {
                        (k + 1).to_string()
                    } else {
                        items[k].clone()
                    };
                    format!("{base}{}", self.direction())
                })
                .collect();
            sql += &format!(" ORDER BY {}", terms.join(", "));
            let total = items
                .iter()
                .enumerate()
                .filter(|(_, it)| group.contains(it))
                .all(|(k, _)| keys.contains(&k));
            if total {
                order = Order::Total;
                if self.rng.chance(0.6) {
                    let (n, o) = (self.rng.range(-1, 4), self.rng.range(0, 3));
                    sql += &match self.rng.below(4) {
                        0 => format!(" LIMIT {n}"),
                        1 => format!(" LIMIT {n} OFFSET {o}"),
                        2 => {
                            q.params.extend([Value::Integer(o), Value::Integer(n)]);
                            " LIMIT ?, ?".to_owned()
                        }
                        _ => {
                            q.params.extend([Value::Integer(n), Value::Integer(o)]);
                            " LIMIT ? OFFSET ?".to_owned()
                        }
                    };
                }
            } else {
                order = Order::Keys(keys);
            }
        }
        Step::Check(Query {
            sql,
            params: q.params,
            class: if binary { Class::J } else { Class::Out },
            order,
        })
    }

    /// Rows for every column of `t` but `skip`, as an INSERT; values of
    /// `twin` are written with their case or trailing-space twin now and
    /// then (for a column declared NOCASE or RTRIM).
    fn insert_rows(&mut self, n: usize, skip: Option<&str>, twin: Option<(&str, &str)>) -> String {
        let cols: Vec<String> = self
            .s
            .columns
            .iter()
            .filter(|c| Some(c.as_str()) != skip)
            .cloned()
            .collect();
        let rows: Vec<String> = (0..n.max(1))
            .map(|_| {
                let vals: Vec<String> = cols
                    .iter()
                    .map(|c| {
                        let v = self.s.column_value(&mut self.rng, c, None);
                        match (&v, twin) {
                            (Lit::Text(t), Some((on, k))) if on == c && self.rng.chance(0.5) => {
                                let t = if k == "RTRIM" {
                                    format!("{t} ")
                                } else if t.chars().any(|c| c.is_ascii_lowercase()) {
                                    t.to_ascii_uppercase()
                                } else {
                                    t.to_ascii_lowercase()
                                };
                                Lit::Text(t).sql()
                            }
                            _ => v.sql(),
                        }
                    })
                    .collect();
                format!("({})", vals.join(", "))
            })
            .collect();
        format!(
            "INSERT INTO t({}) VALUES {}",
            cols.join(", "),
            rows.join(", ")
        )
    }

    fn pick_ddl(&mut self, undone: bool) -> Ddl {
        // Columns no trigger, index, key or constraint holds (dropping one
        // of those fails, and a failing ALTER inside a transaction is a
        // known difference: docs/testing.md, bug 6).
        let droppable: Vec<(String, bool)> = self
            .s
            .columns
            .iter()
            .filter(|c| {
                let c = c.as_str();
                ![
                    "note",
                    "u",
                    "p",
                    &self.s.dims[0].name,
                    &self.s.measures[0].name,
                ]
                .contains(&c)
            })
            // `c` is a limb's key.
            .map(|c| (c.clone(), c != "x"))
            .collect();
        match self.rng.weighted(&[1, 4, 3, 2, 3, 2]) {
            0 => Ddl::AddColumn,
            1 if !droppable.is_empty() => {
                let (c, plane) = droppable[self.rng.below(droppable.len())].clone();
                Ddl::DropColumn(c, plane)
            }
            1 => Ddl::DropColumn("x".into(), false),
            2 => {
                let c = self.s.columns[self.rng.below(self.s.columns.len())].clone();
                let plane = self.s.dim(&c).is_some() || self.s.measures.iter().any(|m| m.name == c);
                Ddl::RenameColumn(c, plane, self.rng.chance(0.5))
            }
            3 => Ddl::RenameTable,
            4 => {
                // A collation on a dimension only where the change is undone
                // (afterwards the plane could never serve again).
                let coll = (undone && self.rng.chance(0.5)).then(|| {
                    let texts: Vec<&str> = self
                        .s
                        .dims
                        .iter()
                        .filter(|d| d.decl == Decl::Text)
                        .map(|d| d.name.as_str())
                        .collect();
                    let on = if texts.is_empty() {
                        self.s.dims[0].name.clone()
                    } else {
                        texts[self.rng.below(texts.len())].to_owned()
                    };
                    (on, *self.rng.pick(&["NOCASE", "RTRIM"]))
                });
                Ddl::DropTable(coll.filter(|(on, _)| on != "p"))
            }
            _ => Ddl::TempShadow(self.rng.chance(0.6)),
        }
    }

    /// A write that cannot end the transaction (no `OR ROLLBACK`): the
    /// schema change it goes with must stay inside it.
    fn txn_write(&mut self) -> String {
        for _ in 0..20 {
            let w = self.write();
            if !w.contains("ROLLBACK") {
                return w;
            }
        }
        self.insert_rows(1, None, None)
    }

    /// Writes while the schema is changed: some aimed at the changed
    /// schema, the others as usual (which may fail on both sides alike).
    fn window_write(&mut self, ddl: &Ddl, stage_renamed: bool) -> String {
        match ddl {
            Ddl::DropColumn(c, _) if self.rng.chance(0.6) => {
                let n = self.rng.range(1, 4) as usize;
                self.insert_rows(n, Some(c.as_str()), None)
            }
            Ddl::RenameColumn(c, ..) if stage_renamed => {
                let w = self.txn_write();
                subst(&w, c, &format!("{c}_r"))
            }
            Ddl::RenameTable if stage_renamed => {
                let w = self.txn_write();
                subst(&w, "t", "t_away")
            }
            Ddl::TempShadow(_) if self.rng.chance(0.4) => {
                let n = self.rng.range(1, 4) as usize;
                self.insert_rows(n, None, None)
                    .replacen("INTO t(", "INTO main.t(", 1)
            }
            _ => self.txn_write(),
        }
    }

    /// A schema change inside a transaction or a savepoint (or in
    /// autocommit, then a transaction whose statement fails part-way and
    /// rolls back), with writes and checks around it. Undone by ROLLBACK /
    /// ROLLBACK TO, the plane must serve at once with its old positions and
    /// cells; kept by COMMIT / RELEASE, the schema is put back and the
    /// plane rebuilt where the change took it out of service.
    fn schema_change_in_transaction(&mut self) {
        self.settle();
        // 0: BEGIN; 1: SAVEPOINT a; 2: BEGIN, SAVEPOINT a; 3: autocommit.
        let wrap = self.rng.weighted(&[3, 2, 2, 2]);
        let undone = wrap != 3 && self.rng.chance(0.6);
        let ddl = self.pick_ddl(undone);
        match wrap {
            0 => {
                let b = *self
                    .rng
                    .pick(&["BEGIN", "BEGIN IMMEDIATE", "BEGIN TRANSACTION"]);
                self.exec(b.into());
            }
            1 => self.exec("SAVEPOINT a".into()),
            2 => {
                self.exec("BEGIN".into());
                let w = self.txn_write();
                self.exec(w);
                self.exec("SAVEPOINT a".into());
            }
            _ => {}
        }
        if self.rng.chance(0.4) {
            let w = self.txn_write();
            self.exec(w);
        }
        // The same `SELECT *` text before and after the change: it must
        // have the new columns (a cached statement is prepared again).
        let star = any_total("SELECT * FROM t WHERE id = (SELECT min(id) FROM t)");
        self.push(Step::Check(star.clone()));
        // The change, and what puts the schema back if it is kept.
        let mut back: Vec<String> = Vec::new();
        let mut breaks = true;
        match &ddl {
            Ddl::AddColumn => {
                let k = self.rng.below(4);
                let ty = *self.rng.pick(&["INTEGER DEFAULT 7", "TEXT", "INTEGER"]);
                self.exec(format!("ALTER TABLE t ADD COLUMN extra{k} {ty}"));
                breaks = false;
            }
            Ddl::DropColumn(c, plane) => {
                if self.s.dim(c).is_some() {
                    self.exec(format!("DROP INDEX IF EXISTS i_{c}"));
                    self.exec(format!("DROP INDEX IF EXISTS i_{c}_m"));
                }
                self.exec(format!("ALTER TABLE t DROP COLUMN {c}"));
                back.push(format!(
                    "ALTER TABLE t ADD COLUMN {}",
                    self.s.plain_decl(c, None)
                ));
                breaks = *plane;
            }
            Ddl::RenameColumn(c, plane, _) => {
                self.exec(format!("ALTER TABLE t RENAME COLUMN {c} TO {c}_r"));
                // `p` and `c` are the limbs' keys.
                breaks = *plane || c == "p" || c == "c";
            }
            Ddl::RenameTable => self.exec("ALTER TABLE t RENAME TO t_away".into()),
            Ddl::DropTable(coll) => {
                self.exec("DROP TABLE t".into());
                let coll_on = coll.as_ref().map(|(on, k)| (on.as_str(), *k));
                self.exec(self.s.create_t(false, coll_on));
                for trg in self.s.t_triggers() {
                    self.exec(trg);
                }
                let n = self.rng.range(5, 40) as usize;
                let w = self.insert_rows(n, None, coll_on);
                self.exec(w);
            }
            Ddl::TempShadow(_) => self.exec(self.s.create_t(true, None)),
        }
        if !matches!(ddl, Ddl::RenameTable) {
            self.push(Step::Check(star));
        }
        // The window: writes and checks while the schema is changed.
        for _ in 0..self.rng.range(1, 3) {
            let w = self.window_write(&ddl, true);
            self.exec(w);
            if self.rng.chance(0.5) {
                self.loose_checks(1);
            }
        }
        match &ddl {
            Ddl::RenameColumn(c, _, true) => {
                self.exec(format!("ALTER TABLE t RENAME COLUMN {c}_r TO {c}"))
            }
            Ddl::RenameColumn(c, _, false) => {
                back.push(format!("ALTER TABLE t RENAME COLUMN {c}_r TO {c}"))
            }
            Ddl::RenameTable => {
                self.exec("ALTER TABLE t_away RENAME TO t".into());
                let w = self.txn_write();
                self.exec(w);
            }
            Ddl::TempShadow(true) => self.exec("DROP TABLE temp.t".into()),
            Ddl::TempShadow(false) => back.push("DROP TABLE temp.t".into()),
            Ddl::DropTable(_) => {
                let refill = self.insert_rows(self.rows.min(300), None, None);
                back.push(refill);
            }
            _ => {}
        }
        // A statement failing part-way after the change (it makes the
        // router rebuild inside the transaction).
        let with_coll = matches!(&ddl, Ddl::DropTable(Some(_)));
        if wrap != 3 && (with_coll || self.rng.chance(0.4)) {
            let f = self.overflow_write();
            self.exec(f);
            self.loose_checks(if with_coll { 2 } else { 1 });
        }
        self.loose_checks(1);
        // The end: undone (the plane serves at once) or kept.
        match (wrap, undone) {
            (0, true) => self.exec("ROLLBACK".into()),
            (0, false) => {
                let e = *self.rng.pick(&["COMMIT", "END"]);
                self.exec(e.into());
            }
            (1, true) => {
                self.exec("ROLLBACK TO a".into());
                self.checks(2);
                self.exec("RELEASE a".into());
            }
            (1, false) => self.exec("RELEASE a".into()),
            (2, true) => {
                if self.rng.chance(0.6) {
                    self.exec("ROLLBACK TO a".into());
                    self.checks(2);
                    let w = self.txn_write();
                    self.exec(w);
                    self.checks(1);
                    let e = *self.rng.pick(&["COMMIT", "ROLLBACK"]);
                    self.exec(e.into());
                } else {
                    self.exec("RELEASE a".into());
                    self.loose_checks(1);
                    self.exec("ROLLBACK".into());
                }
            }
            (2, false) => {
                self.exec("RELEASE a".into());
                self.exec("COMMIT".into());
            }
            _ => {
                // Kept in autocommit; the plane may be out of service. A
                // transaction whose statement fails part-way (the router
                // rebuilds) and rolls back must bring back the state of
                // BEGIN, out of service included.
                self.exec("BEGIN".into());
                let w = self.txn_write();
                self.exec(w);
                let f = self.overflow_write();
                self.exec(f);
                self.loose_checks(1);
                self.exec("ROLLBACK".into());
                self.loose_checks(2);
            }
        }
        if undone {
            self.checks(2);
            let w = self.txn_write();
            self.exec(w);
            self.checks(2);
            return;
        }
        for sql in back {
            self.exec(sql);
        }
        if breaks {
            self.settle();
            self.push(Step::Pleroma("PRAGMA pleroma_rebuild('t')".into()));
        }
        self.checks(3);
    }
}

fn pick_distinct(rng: &mut Rng, n: usize, k: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..n).collect();
    let mut out = Vec::new();
    for _ in 0..k.min(n) {
        let i = rng.below(all.len());
        out.push(all.remove(i));
    }
    out
}
