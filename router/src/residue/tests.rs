//! From SQL text to the rewritten text, or to the decline reason: one row
//! per case. The inputs are built the way `classify/mod.rs` builds them (the
//! statement prepared on the connection for its columns and parameters).
//!
//! A served row reads `= <head>⟨core⟩<tail>`, where `⟨core⟩` stands for the
//! JSON of the core's rows that the rule binds in at run time; the text is
//! also prepared with an empty core, so it is SQL that SQLite accepts.

use super::{plan, ResiduePlan};
use crate::catalog::{build_entry, PlaneDef};
use crate::decline::Decline;
use crate::planes::Planes;

/// `t(a INTEGER, b TEXT, c INTEGER, x INTEGER, y INTEGER)` with a plane
/// on dimensions `a, b, c` and measures `x, y`; `u` is a table
/// without one.
fn fixture() -> (rusqlite::Connection, Planes) {
    let db = rusqlite::Connection::open_in_memory().unwrap();
    crate::sum_exact::register(&db).unwrap();
    db.execute_batch(
        "CREATE TABLE t(a INTEGER, b TEXT, c INTEGER, x INTEGER, y INTEGER);
         INSERT INTO t VALUES (1, 'p', 10, 5, 7), (2, 'q', 20, NULL, 8);
         CREATE TABLE u(a INTEGER, name TEXT);",
    )
    .unwrap();
    let def = PlaneDef::plane(
        "t".into(),
        ["a", "b", "c"].map(String::from).to_vec(),
        ["x", "y"].map(String::from).to_vec(),
    );
    let mut planes = Planes::default();
    let entry = build_entry(&db, def);
    assert_eq!(entry.broken, None);
    planes.add(entry);
    (db, planes)
}

/// The residue plan of `sql`, with its inputs as the classifier makes them.
fn residue(db: &rusqlite::Connection, planes: &Planes, sql: &str) -> Result<ResiduePlan, Decline> {
    let stmt = db.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let columns = stmt.column_names().map(str::to_owned).collect();
    let count = stmt.parameter_count();
    drop(stmt);
    let stmts = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::SQLiteDialect {}, sql)
        .map_err(|e| Decline::from(format!("not understood ({e})")))?;
    let [sqlparser::ast::Statement::Query(q)] = stmts.as_slice() else {
        return Err(Decline::NoCore);
    };
    plan(planes, sql, q, columns, count, &|_, _| None)
}

/// What a row expects: `= rewritten text` (and the LIMIT cut checked at
/// run time, if any) or `! decline reason`.
fn outcome(db: &rusqlite::Connection, planes: &Planes, sql: &str) -> String {
    match residue(db, planes, sql) {
        Ok(p) => {
            let empty = format!("{}[]{}", p.head, p.tail);
            match db.prepare(&empty) {
                Err(e) => panic!("{sql}: the rewritten text does not prepare: {e}\n{empty}"),
                // Every parameter keeps its number.
                Ok(st) => assert_eq!(st.parameter_count(), p.param_count, "{sql}: {empty}"),
            }
            match &p.cut {
                None => format!("= {}⟨core⟩{}", p.head, p.tail),
                Some(c) => format!(
                    "= {}⟨core⟩{} ⟨cut: keys {:?}, limit {}, offset {}⟩",
                    p.head, p.tail, c.keys, c.limit, c.offset
                ),
            }
        }
        Err(r) => format!("! {r}"),
    }
}

/// Declines first (one or more per class the walker has), then served
/// rewrites.
const CASES: &[(&str, &str)] = &[
    // Declines.
    (
        r#"SELECT a, b, COUNT(*) FROM t GROUP BY a"#,
        r#"! bare column b outside GROUP BY"#,
    ),
    (
        r#"SELECT a, c FROM (SELECT a, c, COUNT(*) AS n FROM t GROUP BY a, c) AS s GROUP BY a"#,
        r#"! bare column c in an outer query over grouped rows"#,
    ),
    (
        r#"SELECT a, random() FROM t GROUP BY a"#,
        r#"! function random() is not on the deterministic list"#,
    ),
    (
        r#"SELECT random() FROM (SELECT COUNT(*) AS n FROM t)"#,
        r#"! function random() is not on the deterministic list"#,
    ),
    (
        r#"SELECT * FROM (SELECT a, c, COUNT(*) AS n FROM t GROUP BY a, c ORDER BY a LIMIT 1)"#,
        r#"! LIMIT without an ORDER BY over every group term (c is not)"#,
    ),
    (
        r#"SELECT a, c, COUNT(*) FROM t GROUP BY a, c ORDER BY 3 LIMIT ? + 1"#,
        r#"! LIMIT/OFFSET that is not a literal or parameter"#,
    ),
    (
        r#"SELECT (SELECT a FROM t GROUP BY a, c ORDER BY a) AS v"#,
        r#"! a scalar subquery over grouped rows without an ORDER BY over every group term (c is not)"#,
    ),
    (
        r#"SELECT (SELECT DISTINCT a FROM t) AS v"#,
        r#"! a scalar subquery over DISTINCT rows without an ORDER BY over every output (a is not)"#,
    ),
    (
        r#"SELECT * FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a) NATURAL JOIN u"#,
        r#"! NATURAL JOIN or USING in an outer query"#,
    ),
    (
        r#"SELECT * FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a) AS s JOIN u USING (a)"#,
        r#"! NATURAL JOIN or USING in an outer query"#,
    ),
    (
        r#"SELECT a, n FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a) WHERE abs(a) > 0"#,
        r#"! abs() in an outer query (it can raise an error)"#,
    ),
    (
        r#"SELECT a, COUNT(*) FROM t WHERE b || 'x' = 'px' GROUP BY a"#,
        r#"! || per row (it can raise an error)"#,
    ),
    (
        r#"SELECT a, printf('%d', COUNT(*)) FROM t GROUP BY a ORDER BY a LIMIT 1"#,
        r#"! a function that can raise an error, under LIMIT"#,
    ),
    (
        r#"SELECT a, SUM(COUNT(*)) FILTER (WHERE c > 1) OVER () FROM t GROUP BY a"#,
        r#"! bare column c outside GROUP BY"#,
    ),
    (
        r#"SELECT DISTINCT a FROM t ORDER BY c"#,
        r#"! DISTINCT with an ORDER BY term that is not an output"#,
    ),
    (
        r#"SELECT DISTINCT a FROM (SELECT a, c, COUNT(*) AS n FROM t GROUP BY a, c) ORDER BY n"#,
        r#"! DISTINCT with ORDER BY n, not an output, in an outer query"#,
    ),
    (
        r#"SELECT DISTINCT COUNT(*) FROM t GROUP BY a ORDER BY 1"#,
        r#"! DISTINCT with ORDER BY over aggregated rows"#,
    ),
    (
        r#"SELECT group_concat(b) FROM t"#,
        r#"! aggregate group_concat() does not merge from the cells"#,
    ),
    (
        r#"SELECT x FROM t GROUP BY a"#,
        r#"! measure x outside an aggregate"#,
    ),
    (
        r#"SELECT COUNT(*) FROM t WHERE rowid > 1"#,
        r#"! column rowid is not a dimension of the plane on t"#,
    ),
    (
        r#"SELECT a FROM t"#,
        r#"! a row list (no aggregate, no GROUP BY, no DISTINCT)"#,
    ),
    (
        r#"SELECT COUNT(*) FROM u"#,
        r#"! no block reads the planed table alone"#,
    ),
    (
        r#"SELECT COUNT(*) FROM t JOIN u USING (a)"#,
        r#"! no block reads the planed table alone"#,
    ),
    (
        r#"SELECT COUNT(*) FROM t WHERE b = 'p' COLLATE NOCASE"#,
        r#"! no block reads the planed table alone"#,
    ),
    (
        r#"SELECT COUNT(*) AS "n n" FROM t"#,
        r#"! no block reads the planed table alone"#,
    ),
    (
        r#"SELECT a, row_number() OVER (ORDER BY a) FROM t GROUP BY a, c"#,
        r#"! row_number() OVER an order that is not total over the groups"#,
    ),
    (
        r#"SELECT SUM(n) OVER () FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a)"#,
        r#"! window function sum() in an outer query"#,
    ),
    (
        r#"SELECT SUM(n) FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a)"#,
        r#"! aggregate sum() in an outer query"#,
    ),
    (
        r#"SELECT AVG(CASE WHEN a = ? THEN x END) FROM t"#,
        r#"! AVG over a parameter"#,
    ),
    (
        r#"SELECT SUM(DISTINCT x) FROM t"#,
        r#"! sum(DISTINCT) over a measure"#,
    ),
    (
        r#"SELECT a FROM t GROUP BY a UNION SELECT a FROM u LIMIT 1"#,
        r#"! no block reads the planed table alone"#,
    ),
    (
        r#"SELECT COUNT(*) FROM t WHERE a IN (SELECT a FROM u)"#,
        r#"! a subquery over other tables inside a served block"#,
    ),
    // Read through the tokenizer: comments, quotes, operators.
    (
        r#"SELECT a, sum( x ) FROM t WHERE c ISNULL OR b == 'p' GROUP BY a"#,
        r#"! not understood (sql parser error: Expected: end of statement, found: ISNULL at Line: 1, Column: 35)"#,
    ),
    (
        r#"SELECT [a], COUNT(*) FROM t GROUP BY `a`"#,
        r#"! bare column a outside GROUP BY"#,
    ),
    (
        r#"SELECT AVG(CASE WHEN b = :p THEN x END) FROM t"#,
        r#"! AVG over a parameter"#,
    ),
    (
        r#"SELECT a, COUNT(*) FILTER (WHERE NOT (c > 1)) OVER (), SUM(-x) FROM t GROUP BY a"#,
        r#"! bare column c outside GROUP BY"#,
    ),
    (
        r#"SELECT a, SUM(x) AS "pleroma$n" FROM t GROUP BY a"#,
        r#"! no block reads the planed table alone"#,
    ),
    // Served.
    (
        r#"SELECT a, c, COUNT(*) FROM t GROUP BY a, c ORDER BY 3 LIMIT 2"#,
        r#"= WITH "pleroma$core"("a", "c", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS INTEGER), value->>2 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, c, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" GROUP BY a, c ORDER BY 3  ⟨cut: keys [2], limit 2, offset 0⟩"#,
    ),
    (
        r#"SELECT a, c, COUNT(*) FROM t GROUP BY a, c ORDER BY COUNT(*) LIMIT 2 OFFSET 1"#,
        r#"= WITH "pleroma$core"("a", "c", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS INTEGER), value->>2 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, c, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" GROUP BY a, c ORDER BY COALESCE(SUM("pleroma$n"), 0)  ⟨cut: keys [2], limit 2, offset 1⟩"#,
    ),
    (
        r#"SELECT (SELECT a FROM t GROUP BY a ORDER BY a) AS v"#,
        r#"= WITH "pleroma$core"("a", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), value->>1 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT (SELECT a FROM "pleroma$core" AS "t" GROUP BY a ORDER BY a) AS v"#,
    ),
    (
        r#"SELECT (SELECT COUNT(*) FROM t) AS n"#,
        r#"= WITH "pleroma$core"("pleroma$n") AS (SELECT value->>0 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT (SELECT COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t") AS n"#,
    ),
    (
        r#"SELECT s.a, n, name FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a) AS s JOIN u ON u.a = s.a"#,
        r#"= WITH "pleroma$core"("a", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), value->>1 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT s.a, n, name FROM (SELECT a, COALESCE(SUM("pleroma$n"), 0) AS n FROM "pleroma$core" AS "t" GROUP BY a) AS s JOIN u ON u.a = s.a"#,
    ),
    (
        r#"SELECT a, printf('%d', COUNT(*)) FROM t GROUP BY a"#,
        r#"= WITH "pleroma$core"("a", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), value->>1 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, printf('%d', COALESCE(SUM("pleroma$n"), 0)) FROM "pleroma$core" AS "t" GROUP BY a"#,
    ),
    (
        r#"SELECT a, n * 2 FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a) WHERE n > 1"#,
        r#"= WITH "pleroma$core"("a", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), value->>1 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, n * 2 FROM (SELECT a, COALESCE(SUM("pleroma$n"), 0) AS n FROM "pleroma$core" AS "t" GROUP BY a) WHERE n > 1"#,
    ),
    (
        r#"SELECT b, SUM(x) + 1, MAX(y) FROM t WHERE a IN (1, 2) GROUP BY b HAVING COUNT(*) > 0"#,
        r#"= WITH "pleroma$core"("a", "b", "pleroma$n", "pleroma$c0", "pleroma$s0", "pleroma$lo0", "pleroma$hi0", "pleroma$c1", "pleroma$s1", "pleroma$lo1", "pleroma$hi1") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS TEXT), value->>2, value->>3, value->>4, value->>5, value->>6, value->>7, value->>8, value->>9, value->>10 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT b, SUM("pleroma$s0") + 1, MAX("pleroma$hi1") FROM "pleroma$core" AS "t" WHERE a IN (1, 2) GROUP BY b HAVING COALESCE(SUM("pleroma$n"), 0) > 0"#,
    ),
    (
        r#"SELECT a, rank() OVER (ORDER BY SUM(x)) FROM t GROUP BY a"#,
        r#"= WITH "pleroma$core"("a", "pleroma$n", "pleroma$c0", "pleroma$s0", "pleroma$lo0", "pleroma$hi0") AS (SELECT CAST(value->>0 AS INTEGER), value->>1, value->>2, value->>3, value->>4, value->>5 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, rank() OVER (ORDER BY SUM("pleroma$s0")) FROM "pleroma$core" AS "t" GROUP BY a"#,
    ),
    (
        r#"WITH s AS (SELECT a, AVG(x) AS m FROM t GROUP BY a) SELECT m FROM s"#,
        r#"= WITH "pleroma$core"("a", "pleroma$n", "pleroma$c0", "pleroma$s0", "pleroma$lo0", "pleroma$hi0") AS (SELECT CAST(value->>0 AS INTEGER), value->>1, value->>2, value->>3, value->>4, value->>5 FROM json_each('⟨core⟩') AS "pleroma$j"), s AS (SELECT a, (CAST(SUM("pleroma$s0") AS REAL) / SUM("pleroma$c0")) AS m FROM "pleroma$core" AS "t" GROUP BY a) SELECT m FROM s"#,
    ),
    (
        r#"SELECT DISTINCT b FROM t ORDER BY b LIMIT 1"#,
        r#"= WITH "pleroma$core"("b", "pleroma$n") AS (SELECT CAST(value->>0 AS TEXT), value->>1 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT DISTINCT b FROM "pleroma$core" AS "t" ORDER BY b LIMIT 1"#,
    ),
    (
        r#"SELECT COUNT(c), COUNT(*) FILTER (WHERE a > 1) FROM t"#,
        r#"= WITH "pleroma$core"("a", "c", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS INTEGER), value->>2 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT COALESCE(SUM(CASE WHEN (c) IS NULL THEN 0 ELSE "pleroma$n" END), 0), COALESCE(SUM("pleroma$n") FILTER (WHERE a > 1), 0) FROM "pleroma$core" AS "t""#,
    ),
    (
        r#"SELECT SUM(CASE WHEN a = 1 THEN x ELSE 0 END) FROM t"#,
        r#"= WITH "pleroma$core"("a", "pleroma$n", "pleroma$c0", "pleroma$s0", "pleroma$lo0", "pleroma$hi0") AS (SELECT CAST(value->>0 AS INTEGER), value->>1, value->>2, value->>3, value->>4, value->>5 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT SUM(CASE WHEN (a = 1) THEN "pleroma$s0" ELSE 0 END) FROM "pleroma$core" AS "t""#,
    ),
    (
        r#"SELECT COUNT(*) FROM t WHERE abs(a) = 1"#,
        r#"= WITH "pleroma$core"("a", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), value->>1 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" WHERE abs(a) = 1"#,
    ),
    (
        r#"SELECT s.a, COUNT(*) FROM t AS s GROUP BY s.a"#,
        r#"= WITH "pleroma$core"("a", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), value->>1 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT s.a, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS s GROUP BY s.a"#,
    ),
    (
        r#"SELECT PleromaSumExact(x), TOTAL(y), MIN(x) FROM t"#,
        r#"= WITH "pleroma$core"("pleroma$n", "pleroma$c0", "pleroma$s0", "pleroma$lo0", "pleroma$hi0", "pleroma$c1", "pleroma$s1", "pleroma$lo1", "pleroma$hi1") AS (SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6, value->>7, value->>8 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT PleromaSumExact("pleroma$s0"), TOTAL("pleroma$s1"), MIN("pleroma$lo0") FROM "pleroma$core" AS "t""#,
    ),
    (
        r#"SELECT a, COUNT(*) FROM t WHERE NOT a = 1 AND -c < 0 GROUP BY a"#,
        r#"= WITH "pleroma$core"("a", "c", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS INTEGER), value->>2 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" WHERE NOT a = 1 AND -c < 0 GROUP BY a"#,
    ),
    (
        r#"SELECT CAST(COUNT(*) AS TEXT), coalesce(MAX(x), 0) FROM t WHERE b IS NOT NULL"#,
        r#"= WITH "pleroma$core"("b", "pleroma$n", "pleroma$c0", "pleroma$s0", "pleroma$lo0", "pleroma$hi0") AS (SELECT CAST(value->>0 AS TEXT), value->>1, value->>2, value->>3, value->>4, value->>5 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT CAST(COALESCE(SUM("pleroma$n"), 0) AS TEXT), coalesce(MAX("pleroma$hi0"), 0) FROM "pleroma$core" AS "t" WHERE b IS NOT NULL"#,
    ),
    (
        r#"SELECT COUNT(*) FROM t WHERE b LIKE 'p%'"#,
        r#"= WITH "pleroma$core"("b", "pleroma$n") AS (SELECT CAST(value->>0 AS TEXT), value->>1 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" WHERE b LIKE 'p%'"#,
    ),
    (
        r#"SELECT a FROM t GROUP BY a UNION SELECT a FROM u"#,
        r#"= WITH "pleroma$core"("a", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), value->>1 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a FROM "pleroma$core" AS "t" GROUP BY a UNION SELECT a FROM u"#,
    ),
    (
        r#"SELECT a, COUNT(*) FROM t GROUP BY a ORDER BY a LIMIT 1"#,
        r#"= WITH "pleroma$core"("a", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), value->>1 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" GROUP BY a ORDER BY a LIMIT 1"#,
    ),
    // Served, read through the tokenizer.
    (
        r#"SELECT a, COUNT(*) /* all */ FROM t -- the table
 WHERE b != 'collate' GROUP BY a"#,
        r#"= WITH "pleroma$core"("a", "b", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS TEXT), value->>2 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, COALESCE(SUM("pleroma$n"), 0) /* all */ FROM "pleroma$core" AS "t" -- the table
 WHERE b != 'collate' GROUP BY a"#,
    ),
    (
        r#"SELECT a, COUNT(*) FROM t WHERE c NOTNULL GROUP BY a"#,
        r#"= WITH "pleroma$core"("a", "c", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS INTEGER), value->>2 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" WHERE c NOTNULL GROUP BY a"#,
    ),
    (
        r#"SELECT AVG(CASE WHEN b = 'x:y' THEN x END) FROM t"#,
        r#"= WITH "pleroma$core"("b", "pleroma$n", "pleroma$c0", "pleroma$s0", "pleroma$lo0", "pleroma$hi0") AS (SELECT CAST(value->>0 AS TEXT), value->>1, value->>2, value->>3, value->>4, value->>5 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT (CAST(SUM(CASE WHEN (b = 'x:y') THEN "pleroma$s0" ELSE NULL END) AS REAL) / SUM(CASE WHEN (b = 'x:y') THEN "pleroma$c0" ELSE 0 END)) FROM "pleroma$core" AS "t""#,
    ),
    (
        r#"SELECT a, c, COUNT(*) FROM t GROUP BY a, c ORDER BY 3 LIMIT /* n */ 2 -- end
;"#,
        r#"= WITH "pleroma$core"("a", "c", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS INTEGER), value->>2 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, c, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" GROUP BY a, c ORDER BY 3  -- end
; ⟨cut: keys [2], limit 2, offset 0⟩"#,
    ),
    (
        r#"SELECT a, c, COUNT(*) FROM t GROUP BY a, c ORDER BY 3 LIMIT 2, 1"#,
        r#"= WITH "pleroma$core"("a", "c", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS INTEGER), value->>2 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, c, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" GROUP BY a, c ORDER BY 3  ⟨cut: keys [2], limit 1, offset 2⟩"#,
    ),
    (
        r#"SELECT a, c, COUNT(*) FROM t GROUP BY a, c ORDER BY 3 LIMIT ?"#,
        r#"= WITH "pleroma$core"("a", "c", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS INTEGER), value->>2 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, c, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" GROUP BY a, c ORDER BY 3 LIMIT -1 + 0 * (?) ⟨cut: keys [2], limit ?1, offset 0⟩"#,
    ),
    (
        r#"SELECT a, c, COUNT(*) FROM t WHERE a <> ?5 GROUP BY a, c ORDER BY 3 DESC LIMIT ? OFFSET :o"#,
        r#"= WITH "pleroma$core"("a", "c", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS INTEGER), value->>2 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, c, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" WHERE a <> ?5 GROUP BY a, c ORDER BY 3 DESC LIMIT -1 + 0 * (?) OFFSET 0 * (:o) ⟨cut: keys [2], limit ?6, offset ?7⟩"#,
    ),
    (
        r#"SELECT a, c, COUNT(*) FROM t WHERE a <> :o GROUP BY a, c ORDER BY 3 LIMIT :o, ?"#,
        r#"= WITH "pleroma$core"("a", "c", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS INTEGER), value->>2 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, c, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" WHERE a <> :o GROUP BY a, c ORDER BY 3 LIMIT 0 * (:o), -1 + 0 * (?) ⟨cut: keys [2], limit ?2, offset ?1⟩"#,
    ),
    (
        r#"SELECT a, SUM(x) FROM t WHERE b = 'pleroma$core' GROUP BY a"#,
        r#"= WITH "pleroma$core"("a", "b", "pleroma$n", "pleroma$c0", "pleroma$s0", "pleroma$lo0", "pleroma$hi0") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS TEXT), value->>2, value->>3, value->>4, value->>5, value->>6 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, SUM("pleroma$s0") FROM "pleroma$core" AS "t" WHERE b = 'pleroma$core' GROUP BY a"#,
    ),
    (
        r#"SELECT a, COUNT(*) FROM t WHERE b = 'p' /* COLLATE */ GROUP BY a"#,
        r#"= WITH "pleroma$core"("a", "b", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS TEXT), value->>2 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" WHERE b = 'p' /* COLLATE */ GROUP BY a"#,
    ),
    (
        r#"SELECT a, COUNT(*) FROM t WHERE c IS NOT NULL AND CAST(b AS INTEGER) > -1 GROUP BY a"#,
        r#"= WITH "pleroma$core"("a", "b", "c", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS TEXT), CAST(value->>2 AS INTEGER), value->>3 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" WHERE c IS NOT NULL AND CAST(b AS INTEGER) > -1 GROUP BY a"#,
    ),
    (
        r#"SELECT a, COUNT(*) FROM t WHERE b IN ('p', 'q') AND c BETWEEN 1 AND 20 GROUP BY a"#,
        r#"= WITH "pleroma$core"("a", "b", "c", "pleroma$n") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS TEXT), CAST(value->>2 AS INTEGER), value->>3 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, COALESCE(SUM("pleroma$n"), 0) FROM "pleroma$core" AS "t" WHERE b IN ('p', 'q') AND c BETWEEN 1 AND 20 GROUP BY a"#,
    ),
    (
        r#"SELECT a, MAX(x)
  FILTER (WHERE
 c > 1) FROM t GROUP BY a"#,
        r#"= WITH "pleroma$core"("a", "c", "pleroma$n", "pleroma$c0", "pleroma$s0", "pleroma$lo0", "pleroma$hi0") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS INTEGER), value->>2, value->>3, value->>4, value->>5, value->>6 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT a, MAX("pleroma$hi0") FILTER (WHERE c > 1) FROM "pleroma$core" AS "t" GROUP BY a"#,
    ),
    (
        r#"SELECT COUNT(*) FILTER (WHERE b != 'p'), SUM(x) FILTER (WHERE a == 1) FROM t"#,
        r#"= WITH "pleroma$core"("a", "b", "pleroma$n", "pleroma$c0", "pleroma$s0", "pleroma$lo0", "pleroma$hi0") AS (SELECT CAST(value->>0 AS INTEGER), CAST(value->>1 AS TEXT), value->>2, value->>3, value->>4, value->>5, value->>6 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT COALESCE(SUM("pleroma$n") FILTER (WHERE b != 'p'), 0), SUM("pleroma$s0") FILTER (WHERE a == 1) FROM "pleroma$core" AS "t""#,
    ),
    (
        r#"SELECT MAX(y) FILTER (WHERE c NOTNULL) FROM t"#,
        r#"= WITH "pleroma$core"("c", "pleroma$n", "pleroma$c1", "pleroma$s1", "pleroma$lo1", "pleroma$hi1") AS (SELECT CAST(value->>0 AS INTEGER), value->>1, value->>2, value->>3, value->>4, value->>5 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT MAX("pleroma$hi1") FILTER (WHERE c NOTNULL) FROM "pleroma$core" AS "t""#,
    ),
    (
        r#"SELECT count ( * ) filter ( where x'00' <> b ) FROM t"#,
        r#"= WITH "pleroma$core"("b", "pleroma$n") AS (SELECT CAST(value->>0 AS TEXT), value->>1 FROM json_each('⟨core⟩') AS "pleroma$j") SELECT COALESCE(SUM("pleroma$n") FILTER (WHERE x'00' <> b), 0) FROM "pleroma$core" AS "t""#,
    ),
];

#[test]
fn rewrites_and_declines() {
    let (db, planes) = fixture();
    let mut wrong = Vec::new();
    for (sql, want) in CASES {
        let got = outcome(&db, &planes, sql);
        if got != *want {
            wrong.push(format!("{sql}\n  want {want}\n  got  {got}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What `pleroma_explain` prints of the split (after `residue: `).
const SPLITS: &[(&str, &str)] = &[
    (
        "SELECT a, n * 2 FROM (SELECT a, COUNT(*) AS n FROM t GROUP BY a) WHERE n > 1",
        "cells: GROUP BY (a) with COUNT(*); SQLite: an outer query",
    ),
    (
        "SELECT a, c, SUM(x) FROM t GROUP BY a, c ORDER BY 3 LIMIT 2",
        "cells: GROUP BY (a, c) with SUM(); SQLite: LIMIT (checked for a tie at the cut)",
    ),
    (
        "SELECT a, rank() OVER (ORDER BY MAX(y)) FROM t GROUP BY a",
        "cells: GROUP BY (a) with MAX(); SQLite: rank() OVER",
    ),
    (
        "SELECT DISTINCT b FROM t",
        "cells: GROUP BY (b) with no aggregate; SQLite: DISTINCT",
    ),
];

#[test]
fn explain_names_the_split() {
    let (db, planes) = fixture();
    for (sql, want) in SPLITS {
        let p = residue(&db, &planes, sql).unwrap_or_else(|r| panic!("{sql}: {r}"));
        assert_eq!(p.split, *want, "{sql}");
    }
}

/// The classifier acts on `Decline::NoCore` (it gives its own reason then):
/// the variant, not its text.
#[test]
fn no_core_is_the_variant() {
    let (db, planes) = fixture();
    for sql in [
        "SELECT COUNT(*) FROM u",
        "SELECT COUNT(*) FROM t JOIN u USING (a)",
        "SELECT COUNT(*) FROM t WHERE b = 'p' COLLATE NOCASE",
    ] {
        assert!(
            matches!(residue(&db, &planes, sql), Err(Decline::NoCore)),
            "{sql}"
        );
    }
}
