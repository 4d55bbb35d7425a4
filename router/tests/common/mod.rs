//! Helpers shared by the router's integration tests: a Pleroma connection and
//! a plain SQLite connection fed the same statements, compared row for row.
#![allow(dead_code)]

use pleroma::{Connection, RouteKind, Value};

pub struct Pair {
    pub pl: Connection,
    pub sq: rusqlite::Connection,
}

impl Pair {
    /// Both databases get `setup`; Pleroma also gets `attach`.
    pub fn new(setup: &str, attach: &str) -> Pair {
        let mut pl = Connection::open_in_memory().unwrap();
        let sq = rusqlite::Connection::open_in_memory().unwrap();
        pl.execute_batch(setup).unwrap();
        sq.execute_batch(setup).unwrap();
        pl.execute_batch(attach).unwrap();
        Pair { pl, sq }
    }

    /// Run a write on both; both must agree on success or failure.
    pub fn exec(&mut self, sql: &str) -> bool {
        let a = self.pl.execute_batch(sql);
        let b = self.sq.execute_batch(sql);
        assert_eq!(a.is_ok(), b.is_ok(), "{sql}: pleroma {a:?} vs sqlite {b:?}");
        a.is_ok()
    }

    /// The query on both; answers must be equal (as multisets unless
    /// `ordered`). Returns the route Pleroma took.
    pub fn check(&mut self, sql: &str, params: &[Value]) -> RouteKind {
        let a = self
            .pl
            .query(sql, params)
            .map(|r| r.rows.into_inner())
            .map_err(|e| e.to_string());
        let b = sqlite_rows(&self.sq, sql, params);
        let ordered = sql.to_ascii_lowercase().contains("order by");
        match (a, b) {
            (Ok(mut x), Ok(mut y)) => {
                if !ordered {
                    x.sort_by_key(|r| format!("{r:?}"));
                    y.sort_by_key(|r| format!("{r:?}"));
                }
                assert_eq!(x, y, "{sql} {params:?} (route {:?})", self.pl.last_route());
            }
            (Err(x), Err(y)) => assert_eq!(x, y, "{sql}"),
            (x, y) => panic!("{sql}: pleroma {x:?} vs sqlite {y:?}"),
        }
        self.pl.last_route().kind
    }

    /// Like `check`, and the plane (or the memo of its earlier answer)
    /// must have served it.
    pub fn served(&mut self, sql: &str, params: &[Value]) {
        let k = self.check(sql, params);
        assert_ne!(k, RouteKind::Engine, "{sql}: {:?}", self.pl.last_route());
    }
}

pub fn sqlite_rows(
    db: &rusqlite::Connection,
    sql: &str,
    params: &[Value],
) -> Result<Vec<Vec<Value>>, String> {
    let mut stmt = db.prepare(sql).map_err(|e| e.to_string())?;
    let n = stmt.column_count();
    let mut rows = stmt
        .query(rusqlite::params_from_iter(params.iter()))
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(|e| e.to_string())? {
        out.push((0..n).map(|i| r.get::<_, Value>(i).unwrap()).collect());
    }
    Ok(out)
}

pub fn int(i: i64) -> Value {
    Value::Integer(i)
}

pub fn text(s: &str) -> Value {
    Value::Text(s.into())
}

/// Run `script` statement by statement on a Pleroma connection and on plain
/// SQLite (which skips the `pleroma_*` PRAGMAs), comparing every SELECT's
/// rows and every statement's success or error text. Returns each SELECT's
/// route, in order, and the errors of the PRAGMAs.
pub fn twin_script(
    pl: &mut Connection,
    sq: &rusqlite::Connection,
    script: &str,
) -> (Vec<RouteKind>, Vec<String>) {
    let (mut routes, mut pragma_errors) = (Vec::new(), Vec::new());
    for r in pleroma::split::statements(script) {
        let s = script[r].trim();
        if s.to_ascii_lowercase().starts_with("pragma pleroma") {
            if let Err(e) = pl.execute_batch(s) {
                pragma_errors.push(e.to_string());
            }
            continue;
        }
        if s.to_ascii_uppercase().starts_with("SELECT") {
            let a = pl
                .query(s, &[])
                .map(|r| r.rows.into_inner())
                .map_err(|e| e.to_string());
            let b = sqlite_rows(sq, s, &[]);
            assert_eq!(a, b, "{s} (route {:?})", pl.last_route());
            routes.push(pl.last_route().kind);
        } else {
            let a = pl.execute_batch(s).map_err(|e| e.to_string());
            let b = sq.execute_batch(s).map_err(|e| e.to_string());
            assert_eq!(a, b, "{s}");
        }
    }
    (routes, pragma_errors)
}

/// [`twin_script`] on two fresh in-memory databases.
pub fn twin(script: &str) -> (Vec<RouteKind>, Vec<String>) {
    let mut pl = Connection::open_in_memory().unwrap();
    let sq = rusqlite::Connection::open_in_memory().unwrap();
    twin_script(&mut pl, &sq, script)
}
