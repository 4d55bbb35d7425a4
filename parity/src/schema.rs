//! Random schemas and rows: 1–6 dimension columns (INTEGER, TEXT or no
//! declared type, with NULLs and mixed values such as 1 and '1'), 1–3 INTEGER
//! measures whose values span the i64 range, and columns that are not in the
//! plane (a note, a number, a UNIQUE key for conflicts, a foreign key).

use pleroma::Value;

use crate::rng::Rng;

/// A SQL literal.
#[derive(Clone, Debug, PartialEq)]
pub enum Lit {
    Null,
    Int(i64),
    Text(String),
    Real(f64),
}

impl Lit {
    pub fn sql(&self) -> String {
        match self {
            Lit::Null => "NULL".into(),
            Lit::Int(i) => i.to_string(),
            Lit::Text(t) => format!("'{}'", t.replace('\'', "''")),
            Lit::Real(r) => format!("{r:?}"),
        }
    }

    pub fn value(&self) -> Value {
        match self {
            Lit::Null => Value::Null,
            Lit::Int(i) => Value::Integer(*i),
            Lit::Text(t) => Value::Text(t.clone()),
            Lit::Real(r) => Value::Real(*r),
        }
    }
}

/// A value as a SQL literal (for logs and reproductions).
pub fn value_sql(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => format!("{r:?}"),
        Value::Text(t) => format!("'{}'", t.replace('\'', "''")),
        Value::Blob(b) => format!(
            "X'{}'",
            b.iter().map(|x| format!("{x:02X}")).collect::<String>()
        ),
    }
}

/// A dimension column's declared type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decl {
    Integer,
    Text,
    /// No declared type (BLOB affinity): 1 and '1' stay apart.
    Untyped,
    /// `ANY` in a STRICT table: no affinity (5 and '5' stay apart), where
    /// the ordinary rules would give `ANY` NUMERIC affinity.
    Any,
}

/// A collation declared on a column (`None`: none, so BINARY).
pub type Coll = Option<&'static str>;

/// The second dimension table, `cat(ck TEXT PRIMARY KEY, w INTEGER)`, joined
/// on the TEXT column `t.c`; either key may declare a collation, and the
/// values differ only in case or trailing spaces ('a', 'A', 'a '), so a
/// limb that compared by BINARY where SQLite compares by NOCASE or RTRIM
/// would answer wrong. The limb must be refused unless both are BINARY.
#[derive(Clone, Debug)]
pub struct Cat {
    /// On `t.c`.
    pub fact_coll: Coll,
    /// On `cat.ck`.
    pub dim_coll: Coll,
}

impl Cat {
    /// Both keys compare by BINARY: the limb is accepted and serves joins.
    pub fn binary(&self) -> bool {
        let b = |c: Coll| c.is_none_or(|c| c.eq_ignore_ascii_case("BINARY"));
        b(self.fact_coll) && b(self.dim_coll)
    }
}

/// The keys of `cat` (distinct under BINARY, NOCASE and RTRIM alike).
pub const CAT_KEYS: &[&str] = &["a", "B", "c ", "d"];
/// The values of `t.c`: the keys and their case and trailing-space twins.
const CAT_VALUES: &[&str] = &[
    "a", "A", "a ", "b", "B", "B ", "c", "c ", "C", "d", "D ", "e",
];

#[derive(Clone, Debug)]
pub struct Dim {
    pub name: String,
    pub decl: Decl,
    /// The values rows are written with (as literals; SQLite applies the
    /// column's affinity).
    pub domain: Vec<Lit>,
}

/// How wide a measure's values are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Small values: sums never near i64's limits.
    Small,
    /// Mostly small, a few near ±2^63: some sums overflow.
    Wide,
    /// Uniform over i64: sums pass 2^63 and 2^64 both ways.
    Huge,
}

#[derive(Clone, Debug)]
pub struct Measure {
    pub name: String,
    pub profile: Profile,
}

/// The attached table `t` and its neighbours.
#[derive(Clone, Debug)]
pub struct Schema {
    pub dims: Vec<Dim>,
    pub measures: Vec<Measure>,
    /// `t.p` references `parent(pid)` with ON DELETE CASCADE (else SET NULL).
    pub fk_cascade: bool,
    /// Every column of `t` but `id`, in table order.
    pub columns: Vec<String>,
    /// `t` is a STRICT table (its untyped dimensions are declared `ANY`,
    /// `x` is declared `INT`).
    pub strict: bool,
    /// The collation-keyed join to `cat`, if the schema has one.
    pub cat: Option<Cat>,
}

/// Parent keys `t.p` may reference.
pub const PARENTS: i64 = 6;
/// UNIQUE keys `u` given to the first rows; conflicts aim at these.
pub const HOT_KEYS: i64 = 60;

const INT_POOL: &[i64] = &[-3, -1, 0, 1, 2, 3, 5, 7, 10, 42, 1000, i64::MAX, i64::MIN];
const TEXT_POOL: &[&str] = &[
    "a", "b", "c", "eu", "us", "x y", "1", "2", "7", "-3", "B", "ab", "A", "a ",
];
/// Values an `ANY` dimension holds both as integers and as texts.
const TWINS: &[i64] = &[1, 2, 5, 7, -3, 0];
const COLLS: &[&str] = &["NOCASE", "RTRIM", "BINARY"];

impl Schema {
    pub fn generate(rng: &mut Rng) -> Schema {
        let p_is_dim = rng.chance(0.3);
        let nd = rng.range(1, if p_is_dim { 5 } else { 6 }) as usize;
        let strict = rng.chance(0.35);
        let mut dims = Vec::new();
        for i in 0..nd {
            let decl = if strict && i == 0 {
                // Every STRICT table has an ANY dimension.
                Decl::Any
            } else if strict {
                *rng.pick(&[Decl::Integer, Decl::Text, Decl::Any, Decl::Any])
            } else {
                *rng.pick(&[Decl::Integer, Decl::Text, Decl::Untyped])
            };
            dims.push(Dim {
                name: format!("d{i}"),
                decl,
                domain: domain(rng, decl, strict),
            });
        }
        // In a quarter of the schemas, one dimension of 1,100 to 2,000
        // values: past 1,024 (and 11 bits) once enough rows are drawn. From
        // a stream of its own, so that the schema's other draws stay.
        let mut big = Rng::new(rng.clone().next_u64() ^ 0xB16_D0_3A1);
        if big.chance(0.25) {
            let d = &mut dims[big.below(nd)];
            let n = big.range(1100, 2000);
            d.domain = (0..n)
                .map(|k| match d.decl {
                    Decl::Text => Lit::Text(format!("v{k:04}")),
                    _ => Lit::Int(k * 7 - 3000),
                })
                .collect();
            d.domain.push(Lit::Null);
        }
        if p_is_dim {
            let mut domain: Vec<Lit> = (1..=PARENTS).map(Lit::Int).collect();
            domain.push(Lit::Null);
            dims.push(Dim {
                name: "p".into(),
                decl: Decl::Integer,
                domain,
            });
        }
        let nm = rng.range(1, 3) as usize;
        let measures = (0..nm)
            .map(|j| Measure {
                name: format!("m{j}"),
                profile: match j {
                    0 => Profile::Small,
                    1 => *rng.pick(&[Profile::Small, Profile::Wide, Profile::Wide, Profile::Huge]),
                    _ => Profile::Huge,
                },
            })
            .collect::<Vec<_>>();
        // Plane columns interleaved with the others, so that column positions
        // in the table differ from positions in the plane.
        let mut columns: Vec<String> = dims
            .iter()
            .map(|d| d.name.clone())
            .chain(measures.iter().map(|m| m.name.clone()))
            .collect();
        let cat = rng.chance(0.4).then(|| {
            let mut coll = || -> Coll {
                if rng.chance(0.45) {
                    None
                } else {
                    Some(*rng.pick(COLLS))
                }
            };
            Cat {
                fact_coll: coll(),
                dim_coll: coll(),
            }
        });
        let others: &[&str] = if cat.is_some() {
            &["note", "x", "u", "p", "c"]
        } else {
            &["note", "x", "u", "p"]
        };
        for &c in others {
            if !columns.iter().any(|x| x == c) {
                let at = rng.below(columns.len() + 1);
                columns.insert(at, c.into());
            }
        }
        Schema {
            dims,
            measures,
            fk_cascade: rng.chance(0.5),
            columns,
            strict,
            cat,
        }
    }

    /// The rows of `lk`: per dimension, its first three values (the first
    /// twice, in two groups), and a NULL key and a key no row holds.
    fn lookup_rows(&self) -> String {
        let mut rows = Vec::new();
        for (i, d) in self.dims.iter().enumerate() {
            for (j, v) in d.domain.iter().take(3).enumerate() {
                rows.push(format!(
                    "({}, '{}', {})",
                    v.sql(),
                    ["a", "b", "c"][j],
                    i as i64 * 3 + j as i64 - 2
                ));
            }
            if let Some(v) = d.domain.first() {
                rows.push(format!("({}, 'b', {})", v.sql(), i + 1));
            }
        }
        rows.push("(NULL, 'n', 1)".into());
        rows.push("('no such key', 'z', 0)".into());
        rows.join(", ")
    }

    pub fn dim(&self, name: &str) -> Option<&Dim> {
        self.dims.iter().find(|d| d.name == name)
    }

    fn column_decl(&self, c: &str) -> String {
        match c {
            "u" => "u INTEGER UNIQUE".into(),
            "p" => self.fk_decl(),
            _ => self.plain_decl(c, None),
        }
    }

    /// A column's name and type, without constraints (for `ALTER TABLE ADD
    /// COLUMN` and the TEMP twin of `t`), with `coll` declared if given.
    pub fn plain_decl(&self, c: &str, coll: Coll) -> String {
        let mut out = if let Some(d) = self.dim(c) {
            match d.decl {
                _ if c == "p" => "p INTEGER".into(),
                Decl::Integer => format!("{c} INTEGER"),
                Decl::Text => format!("{c} TEXT"),
                Decl::Untyped => c.to_owned(),
                Decl::Any => format!("{c} ANY"),
            }
        } else {
            match c {
                "note" => "note TEXT".into(),
                "x" if self.strict => "x INT".into(),
                "x" => "x INTEGER".into(),
                "u" | "p" => format!("{c} INTEGER"),
                "c" => match self.cat.as_ref().and_then(|k| k.fact_coll) {
                    Some(k) => format!("c TEXT COLLATE {k}"),
                    None => "c TEXT".into(),
                },
                m => format!("{m} INTEGER"),
            }
        };
        if let Some(k) = coll {
            out += &format!(" COLLATE {k}");
        }
        out
    }

    /// `CREATE TABLE t(...)` as the setup creates it, or with `coll` on the
    /// column `coll_on`, or as a TEMP table of the same columns.
    pub fn create_t(&self, temp: bool, coll_on: Option<(&str, &'static str)>) -> String {
        let cols: Vec<String> = self
            .columns
            .iter()
            .map(|c| match coll_on {
                Some((on, k)) if on == c => self.plain_decl(c, Some(k)),
                _ if temp => self.plain_decl(c, None),
                _ => self.column_decl(c),
            })
            .collect();
        format!(
            "CREATE {}TABLE t(id INTEGER PRIMARY KEY, {}){}",
            if temp { "TEMP " } else { "" },
            cols.join(", "),
            if self.strict { " STRICT" } else { "" }
        )
    }

    /// The triggers on `t` (a `DROP TABLE t` drops them).
    pub fn t_triggers(&self) -> Vec<String> {
        let m0 = &self.measures[0].name;
        vec![
            // Triggers that fail a statement after it changed rows.
            "CREATE TRIGGER boom_abort BEFORE INSERT ON t WHEN NEW.note = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END".into(),
            "CREATE TRIGGER boom_fail BEFORE UPDATE ON t WHEN NEW.note = 'boom-fail' BEGIN SELECT RAISE(FAIL, 'boom fail'); END".into(),
            "CREATE TRIGGER boom_rollback BEFORE UPDATE ON t WHEN NEW.note = 'boom-rollback' BEGIN SELECT RAISE(ROLLBACK, 'boom rollback'); END".into(),
            // A trigger on the attached table writing itself (depth 1 events).
            format!("CREATE TRIGGER t_echo AFTER INSERT ON t WHEN NEW.note = 'echo' BEGIN UPDATE t SET {m0} = 1, note = 'echoed' WHERE id = NEW.id; END"),
        ]
    }

    fn fk_decl(&self) -> String {
        format!(
            "p INTEGER REFERENCES parent(pid) ON DELETE {}",
            if self.fk_cascade {
                "CASCADE"
            } else {
                "SET NULL"
            }
        )
    }

    /// The statements that create the tables and triggers (run on both sides).
    pub fn ddl(&self) -> Vec<String> {
        let d0 = &self.dims[0].name;
        let m0 = &self.measures[0].name;
        let mut out = vec![
            "PRAGMA foreign_keys = ON".into(),
            // The small dimension table of the join limb.
            "CREATE TABLE parent(pid INTEGER PRIMARY KEY, w INTEGER, tag TEXT)".into(),
            format!(
                "INSERT INTO parent(pid, w, tag) VALUES {}",
                (1..=PARENTS).map(|i| format!("({i}, {}, 'g{}')", i * 10 - 25, i % 3)).collect::<Vec<_>>().join(", ")
            ),
            self.create_t(false, None),
            "CREATE TABLE aux(k, v INTEGER)".into(),
            // The lookup table of lookup joins (class L): keys from the
            // dimensions' domains, some twice, a NULL key, one no row has.
            "CREATE TABLE lk(k, grp TEXT, w INTEGER, kt TEXT)".into(),
            format!("INSERT INTO lk(k, grp, w) VALUES {}", self.lookup_rows()),
            // The same keys under TEXT affinity: 5 becomes '5' there, which
            // an untyped dimension's 5 does not equal (BLOB affinity).
            "UPDATE lk SET kt = k".into(),
            // A trigger on another table that writes the attached one.
            format!("CREATE TRIGGER aux_ins AFTER INSERT ON aux BEGIN INSERT INTO t({d0}, {m0}, note) VALUES (NEW.k, NEW.v, 'trg'); END"),
            format!("CREATE TRIGGER aux_del AFTER DELETE ON aux BEGIN DELETE FROM t WHERE note = 'trg' AND {m0} IS OLD.v; END"),
        ];
        out.extend(self.t_triggers());
        if let Some(cat) = &self.cat {
            let coll = cat
                .dim_coll
                .map(|k| format!(" COLLATE {k}"))
                .unwrap_or_default();
            out.push(format!(
                "CREATE TABLE cat(ck TEXT PRIMARY KEY{coll}, w INTEGER)"
            ));
            out.push(format!(
                "INSERT INTO cat(ck, w) VALUES {}",
                CAT_KEYS
                    .iter()
                    .enumerate()
                    .map(|(i, k)| format!("('{k}', {})", (i as i64 + 1) * 100 + 1))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        out
    }

    /// The join limb of `t.p` to `parent.pid`.
    pub fn limb(&self) -> String {
        "PRAGMA pleroma_limb('t', 'p', 'parent', 'pid')".into()
    }

    /// The limb of `t.c` to `cat.ck`, and whether it must be accepted.
    pub fn cat_limb(&self) -> Option<(String, bool)> {
        self.cat.as_ref().map(|c| {
            (
                "PRAGMA pleroma_limb('t', 'c', 'cat', 'ck')".to_owned(),
                c.binary(),
            )
        })
    }

    pub fn attach(&self) -> String {
        let dims: Vec<&str> = self.dims.iter().map(|d| d.name.as_str()).collect();
        let ms: Vec<&str> = self.measures.iter().map(|m| m.name.as_str()).collect();
        format!(
            "PRAGMA pleroma_attach('t', '{}', '{}')",
            dims.join(", "),
            ms.join(", ")
        )
    }

    /// A second, smaller plane on `t`, named `p2`: some of its dimensions
    /// (never its own plane's first ones in their order, so that answering
    /// from the wrong plane gives other groups) and some of its measures.
    pub fn attach_second(&self, rng: &mut Rng) -> String {
        let mut dims: Vec<&str> = self.dims.iter().map(|d| d.name.as_str()).collect();
        for i in (1..dims.len()).rev() {
            dims.swap(i, rng.below(i + 1));
        }
        dims.truncate(rng.range(1, self.dims.len().max(2) as i64 - 1) as usize);
        let prefix = dims.iter().zip(&self.dims).all(|(a, b)| *a == b.name);
        if prefix {
            dims.reverse();
            if dims.len() == 1 {
                dims[0] = &self.dims[self.dims.len() - 1].name;
            }
        }
        let mut ms: Vec<&str> = self.measures.iter().map(|m| m.name.as_str()).collect();
        if ms.len() > 1 && rng.chance(0.5) {
            ms.remove(rng.below(ms.len()));
        }
        format!(
            "PRAGMA pleroma_attach('t', '{}', '{}', 'p2')",
            dims.join(", "),
            ms.join(", ")
        )
    }

    /// The column list of an INSERT that gives every column but `id`.
    pub fn insert_columns(&self) -> String {
        self.columns.join(", ")
    }

    pub fn dim_value(&self, rng: &mut Rng, d: usize) -> Lit {
        let dom = &self.dims[d].domain;
        // Skewed: the first values are the most common.
        let i = if rng.chance(0.5) {
            rng.below(dom.len().min(3))
        } else {
            rng.below(dom.len())
        };
        dom[i].clone()
    }

    pub fn measure_value(&self, rng: &mut Rng, m: usize) -> Lit {
        if rng.chance(0.08) {
            return Lit::Null;
        }
        Lit::Int(match self.measures[m].profile {
            Profile::Small => rng.range(-1000, 1000),
            Profile::Wide if rng.chance(0.03) => match rng.below(6) {
                0 => i64::MAX,
                1 => i64::MIN,
                2 => i64::MAX - rng.range(0, 1000),
                3 => i64::MIN + rng.range(0, 1000),
                4 => rng.range(1 << 62, i64::MAX),
                _ => rng.range(i64::MIN, -(1 << 62)),
            },
            Profile::Wide => rng.range(-100_000, 100_000),
            Profile::Huge => rng.next_u64() as i64,
        })
    }

    /// A value for any column of `t` but `id`; `u` is the UNIQUE key to use.
    pub fn column_value(&self, rng: &mut Rng, c: &str, u: Option<i64>) -> Lit {
        if let Some(d) = self.dims.iter().position(|d| d.name == c) {
            return self.dim_value(rng, d);
        }
        if let Some(m) = self.measures.iter().position(|m| m.name == c) {
            return self.measure_value(rng, m);
        }
        match c {
            "note" => Lit::Text(format!("n{}", rng.below(10))),
            "x" => Lit::Int(rng.range(0, 100)),
            "u" => u.map_or(Lit::Null, Lit::Int),
            "p" if rng.chance(0.3) => Lit::Null,
            "p" => Lit::Int(rng.range(1, PARENTS)),
            "c" if rng.chance(0.15) => Lit::Null,
            "c" => Lit::Text((*rng.pick(CAT_VALUES)).into()),
            _ => unreachable!("unknown column {c}"),
        }
    }

    /// `(v, v, ...)` for [`Schema::insert_columns`].
    pub fn row(&self, rng: &mut Rng, u: Option<i64>) -> String {
        let vals: Vec<String> = self
            .columns
            .iter()
            .map(|c| self.column_value(rng, c, u).sql())
            .collect();
        format!("({})", vals.join(", "))
    }

    /// Like [`Schema::row`] with the given note.
    pub fn row_with_note(&self, rng: &mut Rng, u: Option<i64>, note: &str) -> String {
        let vals: Vec<String> = self
            .columns
            .iter()
            .map(|c| {
                if c == "note" {
                    Lit::Text(note.into()).sql()
                } else {
                    self.column_value(rng, c, u).sql()
                }
            })
            .collect();
        format!("({})", vals.join(", "))
    }
}

/// The values one dimension is written with.
fn domain(rng: &mut Rng, decl: Decl, strict: bool) -> Vec<Lit> {
    let n = if rng.chance(0.2) {
        rng.range(10, 30)
    } else {
        rng.range(2, 8)
    } as usize;
    // How many texts among the values: few for INTEGER, most for TEXT.
    let text_share = match decl {
        Decl::Integer => 0.15,
        Decl::Text => 0.7,
        Decl::Untyped | Decl::Any => 0.5,
    };
    let mut out: Vec<Lit> = Vec::new();
    if decl == Decl::Any {
        // The same number as an integer and as a text.
        for _ in 0..rng.range(1, 3) {
            let n = *rng.pick(TWINS);
            for v in [Lit::Int(n), Lit::Text(n.to_string())] {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        }
    }
    let mut guard = 0;
    while out.len() < n && guard < 1000 {
        guard += 1;
        let v = if rng.chance(text_share) {
            if rng.chance(0.7) {
                Lit::Text((*rng.pick(TEXT_POOL)).into())
            } else {
                Lit::Text(format!("v{}", rng.below(100)))
            }
        } else if rng.chance(0.7) {
            Lit::Int(*rng.pick(INT_POOL))
        } else {
            Lit::Int(rng.range(-50, 500))
        };
        // A STRICT INTEGER column takes only texts that are integers.
        let refused = strict
            && decl == Decl::Integer
            && matches!(&v, Lit::Text(t) if t.parse::<i64>().is_err());
        if !out.contains(&v) && !refused {
            out.push(v);
        }
    }
    if rng.chance(0.6) {
        let at = rng.below(out.len() + 1);
        out.insert(at, Lit::Null);
    }
    out
}
