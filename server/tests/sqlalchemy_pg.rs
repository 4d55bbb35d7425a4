//! SQLAlchemy's PostgreSQL dialect (`postgresql+psycopg://`) and pandas
//! against `pleroma serve`: the dialect connects (`version()`,
//! `current_schema()`, psycopg's type lookup), reflects tables and columns
//! from the emulated catalog, runs `pandas.read_sql` and
//! `DataFrame.to_sql`, and an ORM session creates, reads, updates and
//! deletes. Every answer is compared with plain SQLite on the same file.
//!
//! The Python comes from `PLEROMA_SERVER_PYTHON`, which `scripts/test.sh`
//! sets to its test environment (SQLAlchemy, pandas and psycopg from the
//! package index).

mod common;

use std::process::Command;

use common::{sqlite, Cell, QUERIES};

fn python(program: &str, port: u16) -> serde_json::Value {
    let py = std::env::var_os("PLEROMA_SERVER_PYTHON").unwrap_or_else(|| {
        panic!(
            "PLEROMA_SERVER_PYTHON is not set: run bash scripts/test.sh, or set it to a python \
             with SQLAlchemy, pandas and psycopg[binary] installed"
        )
    });
    let out = Command::new(&py)
        .arg("-c")
        .arg(program)
        .arg(port.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {py:?}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python failed: {stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn cell(v: &serde_json::Value) -> Cell {
    match v {
        serde_json::Value::Null => Cell::Null,
        serde_json::Value::Number(n) => Cell::Num(n.as_f64().unwrap()),
        serde_json::Value::String(s) => Cell::parse(s),
        other => panic!("unexpected {other}"),
    }
}

fn rows(v: &serde_json::Value) -> Vec<Vec<Cell>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(cell).collect())
        .collect()
}

const PROGRAM: &str = r#"
import sys, json, math
import pandas as pd
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, Session

port = int(sys.argv[1])
engine = sa.create_engine(f"postgresql+psycopg://tester@127.0.0.1:{port}/ledger")
out = {}
with engine.connect() as c:
    out["version"] = c.dialect.server_version_info
    out["schema"] = c.dialect.default_schema_name
insp = sa.inspect(engine)
out["tables"] = sorted(insp.get_table_names())
out["has_invoices"] = insp.has_table("invoices")
out["has_nothing"] = insp.has_table("no_such_table")
out["columns"] = [
    [c["name"], str(c["type"]), c["nullable"], c["default"]]
    for c in insp.get_columns("invoices")
]

def plain(v):
    if isinstance(v, float) and math.isnan(v):
        return None
    return v.item() if hasattr(v, "item") else v

out["read_sql"] = [
    [plain(v) for v in r]
    for r in pd.read_sql(sys.argv[2], engine).itertuples(index=False)
]
df = pd.DataFrame({"k": [1, 2, 3], "label": ["x", None, "z"], "w": [1.5, None, -2.0]})
out["to_sql"] = df.to_sql("frame", engine, index=False)
out["read_back"] = [
    [plain(v) for v in r]
    for r in pd.read_sql("SELECT k, label, w FROM frame ORDER BY k", engine).itertuples(index=False)
]

class Base(DeclarativeBase):
    pass

class Item(Base):
    __tablename__ = "items"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]
    qty: Mapped[int] = mapped_column(default=0)

Base.metadata.create_all(engine)
with Session(engine) as s:
    s.add_all([Item(name="a", qty=2), Item(name="b"), Item(name="c", qty=7)])
    s.commit()
    out["orm_ids"] = [i.id for i in s.scalars(sa.select(Item).order_by(Item.id))]
    s.get(Item, 1).qty = 5
    s.delete(s.get(Item, 2))
    s.commit()
    out["orm_sum"] = s.execute(sa.select(sa.func.sum(Item.qty))).scalar()
    # A failed flush rolls the session back: nothing of it stays.
    s.add(Item(name=None))
    try:
        s.commit()
        out["orm_null"] = "committed"
    except sa.exc.IntegrityError as e:
        s.rollback()
        out["orm_null"] = type(e.orig).__name__
print(json.dumps(out))
"#;

#[test]
fn sqlalchemys_postgresql_dialect_and_pandas_work_against_pleroma_serve() {
    let f = common::fixture();
    let server = common::serve(&f.db);
    let port = server.addr().port();
    let query = QUERIES[1];
    // The query goes into the program as a Python string literal.
    let out = python(&PROGRAM.replace("sys.argv[2]", &format!("{query:?}")), port);

    assert_eq!(out["version"][0], 16, "{out}");
    assert_eq!(out["schema"], "public");
    let tables: Vec<Cell> = out["tables"].as_array().unwrap().iter().map(cell).collect();
    let want: Vec<Cell> = sqlite(
        &f.db,
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
         AND name NOT IN ('frame', 'items') ORDER BY name",
    )
    .into_iter()
    .map(|r| r[0].clone())
    .collect();
    // Reflected before frame and items were made.
    assert_eq!(tables, want, "{out}");
    assert_eq!(out["has_invoices"], true);
    assert_eq!(out["has_nothing"], false);
    // Columns: names, the type the server sends each as, NOT NULL, default.
    let columns = &out["columns"];
    let want = [
        // INTEGER PRIMARY KEY: the rowid, never NULL.
        ("id", "BIGINT", false, None),
        ("region", "TEXT", false, None),
        ("status", "TEXT", true, None),
        ("month", "BIGINT", true, None),
        ("amount_cents", "BIGINT", true, Some("0")),
    ];
    assert_eq!(columns.as_array().unwrap().len(), want.len(), "{columns}");
    for (got, (name, ty, nullable, default)) in columns.as_array().unwrap().iter().zip(want) {
        assert_eq!(got[0], name, "{got}");
        assert_eq!(got[1], ty, "{got}");
        assert_eq!(got[2], nullable, "{got}");
        assert_eq!(got[3].as_str(), default, "{got}");
    }

    assert_eq!(rows(&out["read_sql"]), sqlite(&f.db, query));
    assert_eq!(
        out["to_sql"].as_i64().map(|n| n == 3 || n == -1),
        Some(true),
        "{out}"
    );
    assert_eq!(
        rows(&out["read_back"]),
        sqlite(&f.db, "SELECT k, label, w FROM frame ORDER BY k")
    );
    assert_eq!(
        sqlite(&f.db, "SELECT COUNT(*), SUM(k) FROM frame"),
        vec![vec![Cell::Num(3.0), Cell::Num(6.0)]]
    );

    assert_eq!(out["orm_ids"], serde_json::json!([1, 2, 3]));
    assert_eq!(out["orm_sum"], 12);
    assert_eq!(out["orm_null"], "NotNullViolation");
    assert_eq!(
        sqlite(&f.db, "SELECT id, name, qty FROM items ORDER BY id"),
        vec![
            vec![Cell::Num(1.0), Cell::Text("a".into()), Cell::Num(5.0)],
            vec![Cell::Num(3.0), Cell::Text("c".into()), Cell::Num(7.0)],
        ]
    );
}
