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
}

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
}

/// Parent keys `t.p` may reference.
pub const PARENTS: i64 = 6;
/// UNIQUE keys `u` given to the first rows; conflicts aim at these.
pub const HOT_KEYS: i64 = 60;

const INT_POOL: &[i64] = &[-3, -1, 0, 1, 2, 3, 5, 7, 10, 42, 1000, i64::MAX, i64::MIN];
const TEXT_POOL: &[&str] = &[
    "a", "b", "c", "eu", "us", "x y", "1", "2", "7", "-3", "B", "ab",
];

impl Schema {
    pub fn generate(rng: &mut Rng) -> Schema {
        let p_is_dim = rng.chance(0.3);
        let nd = rng.range(1, if p_is_dim { 5 } else { 6 }) as usize;
        let mut dims = Vec::new();
        for i in 0..nd {
            let decl = *rng.pick(&[Decl::Integer, Decl::Text, Decl::Untyped]);
            dims.push(Dim {
                name: format!("d{i}"),
                decl,
                domain: domain(rng, decl),
            });
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
        for c in ["note", "x", "u", "p"] {
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
        }
    }

    pub fn dim(&self, name: &str) -> Option<&Dim> {
        self.dims.iter().find(|d| d.name == name)
    }

    fn column_decl(&self, c: &str) -> String {
        if let Some(d) = self.dim(c) {
            if c == "p" {
                return self.fk_decl();
            }
            return match d.decl {
                Decl::Integer => format!("{c} INTEGER"),
                Decl::Text => format!("{c} TEXT"),
                Decl::Untyped => c.to_owned(),
            };
        }
        match c {
            "note" => "note TEXT".into(),
            "x" => "x INTEGER".into(),
            "u" => "u INTEGER UNIQUE".into(),
            "p" => self.fk_decl(),
            m => format!("{m} INTEGER"),
        }
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
        let cols: Vec<String> = self.columns.iter().map(|c| self.column_decl(c)).collect();
        let d0 = &self.dims[0].name;
        let m0 = &self.measures[0].name;
        vec![
            "PRAGMA foreign_keys = ON".into(),
            // The small dimension table of the join limb.
            "CREATE TABLE parent(pid INTEGER PRIMARY KEY, w INTEGER, tag TEXT)".into(),
            format!(
                "INSERT INTO parent(pid, w, tag) VALUES {}",
                (1..=PARENTS).map(|i| format!("({i}, {}, 'g{}')", i * 10 - 25, i % 3)).collect::<Vec<_>>().join(", ")
            ),
            format!("CREATE TABLE t(id INTEGER PRIMARY KEY, {})", cols.join(", ")),
            "CREATE TABLE aux(k, v INTEGER)".into(),
            // A trigger on another table that writes the attached one.
            format!("CREATE TRIGGER aux_ins AFTER INSERT ON aux BEGIN INSERT INTO t({d0}, {m0}, note) VALUES (NEW.k, NEW.v, 'trg'); END"),
            format!("CREATE TRIGGER aux_del AFTER DELETE ON aux BEGIN DELETE FROM t WHERE note = 'trg' AND {m0} IS OLD.v; END"),
            // Triggers that fail a statement after it changed rows.
            "CREATE TRIGGER boom_abort BEFORE INSERT ON t WHEN NEW.note = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END".into(),
            "CREATE TRIGGER boom_fail BEFORE UPDATE ON t WHEN NEW.note = 'boom-fail' BEGIN SELECT RAISE(FAIL, 'boom fail'); END".into(),
            "CREATE TRIGGER boom_rollback BEFORE UPDATE ON t WHEN NEW.note = 'boom-rollback' BEGIN SELECT RAISE(ROLLBACK, 'boom rollback'); END".into(),
            // A trigger on the attached table writing itself (depth 1 events).
            format!("CREATE TRIGGER t_echo AFTER INSERT ON t WHEN NEW.note = 'echo' BEGIN UPDATE t SET {m0} = 1, note = 'echoed' WHERE id = NEW.id; END"),
        ]
    }

    /// The join limb of `t.p` to `parent.pid`.
    pub fn limb(&self) -> String {
        "PRAGMA pleroma_limb('t', 'p', 'parent', 'pid')".into()
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
fn domain(rng: &mut Rng, decl: Decl) -> Vec<Lit> {
    let n = if rng.chance(0.2) {
        rng.range(10, 30)
    } else {
        rng.range(2, 8)
    } as usize;
    // How many texts among the values: few for INTEGER, most for TEXT.
    let text_share = match decl {
        Decl::Integer => 0.15,
        Decl::Text => 0.7,
        Decl::Untyped => 0.5,
    };
    let mut out: Vec<Lit> = Vec::new();
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
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if rng.chance(0.6) {
        let at = rng.below(out.len() + 1);
        out.insert(at, Lit::Null);
    }
    out
}
