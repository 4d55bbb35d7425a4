//! The answer check every run makes: all arms return the same rows.
//!
//! Integers exactly, REAL to 1e-9 relative, TEXT and BLOB byte for byte,
//! NULL only as NULL; row order where the statement has an ORDER BY, else as
//! a multiset. Pleroma's arms must also match SQLite's storage classes
//! (INTEGER vs REAL); DuckDB's arm may return a number in the other class
//! (its SUM is a HUGEINT, its AVG a DOUBLE) and is compared by value.

use std::cmp::Ordering;

use rusqlite::types::Value;

use crate::workload::{Answer, Arm};

const REL_TOL: f64 = 1e-9;

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= REL_TOL * a.abs().max(b.abs())
}

/// Equal under the check's rules; `by_value` lets INTEGER match REAL.
pub fn same_value(a: &Value, b: &Value, by_value: bool) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Integer(x), Value::Integer(y)) => x == y,
        (Value::Real(x), Value::Real(y)) => close(*x, *y),
        (Value::Integer(x), Value::Real(y)) | (Value::Real(y), Value::Integer(x)) if by_value => {
            close(*x as f64, *y)
        }
        (Value::Text(x), Value::Text(y)) => x == y,
        (Value::Blob(x), Value::Blob(y)) => x == y,
        _ => false,
    }
}

fn rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Integer(_) | Value::Real(_) => 1,
        Value::Text(_) => 2,
        Value::Blob(_) => 3,
    }
}

/// A total order for sorting rows into a canonical multiset order.
fn cmp_value(a: &Value, b: &Value) -> Ordering {
    let num = |v: &Value| match v {
        Value::Integer(i) => *i as f64,
        Value::Real(r) => *r,
        _ => 0.0,
    };
    rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
        (Value::Integer(x), Value::Integer(y)) => x.cmp(y),
        (Value::Text(x), Value::Text(y)) => x.cmp(y),
        (Value::Blob(x), Value::Blob(y)) => x.cmp(y),
        _ => num(a).total_cmp(&num(b)),
    })
}

fn cmp_row(a: &[Value], b: &[Value]) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| cmp_value(x, y))
        .find(|o| o.is_ne())
        .unwrap_or(a.len().cmp(&b.len()))
}

/// Does the statement fix its row order? (An ORDER BY in the outermost
/// statement; our workloads keep ORDER BY out of subqueries.)
pub fn ordered(sql: &str) -> bool {
    pleroma::tokenize::orders_rows(sql)
}

/// Compare two answers; `Err` says where they differ.
pub fn same_rows(
    a: &[Vec<Value>],
    b: &[Vec<Value>],
    ordered: bool,
    by_value: bool,
) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("{} rows vs {} rows", a.len(), b.len()));
    }
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    if !ordered {
        a.sort_by(|x, y| cmp_row(x, y));
        b.sort_by(|x, y| cmp_row(x, y));
    }
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        if x.len() != y.len() || !x.iter().zip(y).all(|(u, v)| same_value(u, v, by_value)) {
            return Err(format!("row {i} differs: {x:?} vs {y:?}"));
        }
    }
    Ok(())
}

fn show(rows: &[Vec<Value>]) -> String {
    let mut s: Vec<String> = rows.iter().take(20).map(|r| format!("    {r:?}")).collect();
    if rows.len() > 20 {
        s.push(format!("    ... ({} rows in all)", rows.len()));
    }
    s.join("\n")
}

/// Compare every answer with the reference (the `sqlite` arm's, else the
/// first). Each verdict's `Err` carries a message with both answers.
pub fn compare_all(query: &str, sql: &str, answers: &[Answer]) -> Vec<(Arm, Result<(), String>)> {
    let Some(reference) = answers
        .iter()
        .find(|a| a.arm == Arm::Sqlite)
        .or(answers.first())
    else {
        return Vec::new();
    };
    let ord = ordered(sql);
    answers
        .iter()
        .map(|a| {
            let by_value = a.arm == Arm::Duckdb || reference.arm == Arm::Duckdb;
            let verdict = same_rows(&reference.rows, &a.rows, ord, by_value).map_err(|why| {
                format!(
                    "MISMATCH in {query} ({} vs {}): {why}\n  sql: {sql}\n  {}:\n{}\n  {}:\n{}",
                    reference.arm.name(),
                    a.arm.name(),
                    reference.arm.name(),
                    show(&reference.rows),
                    a.arm.name(),
                    show(&a.rows)
                )
            });
            (a.arm, verdict)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reals_match_to_a_relative_tolerance() {
        assert!(same_value(
            &Value::Real(1.0),
            &Value::Real(1.0 + 1e-12),
            false
        ));
        assert!(!same_value(&Value::Real(1.0), &Value::Real(1.001), false));
        assert!(!same_value(&Value::Integer(1), &Value::Real(1.0), false));
        assert!(same_value(&Value::Integer(1), &Value::Real(1.0), true));
    }

    #[test]
    fn unordered_answers_compare_as_multisets() {
        let a = vec![vec![Value::Integer(1)], vec![Value::Integer(2)]];
        let b = vec![vec![Value::Integer(2)], vec![Value::Integer(1)]];
        assert!(same_rows(&a, &b, false, false).is_ok());
        assert!(same_rows(&a, &b, true, false).is_err());
        assert!(ordered("select a from t order  by a"));
        assert!(!ordered("select a from t"));
    }
}
