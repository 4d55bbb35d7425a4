//! SQLite's type affinity and comparison rules, for the values a plane holds
//! (INTEGER, TEXT, NULL) against literals and bound parameters.
//! Anything these rules are not sure of comes back as `None`: the query is
//! then declined and SQLite answers it.

use crate::mutation::Mutation;
use std::borrow::Cow;
use std::cmp::Ordering;

use pleroma_plane::DimValue;
use rusqlite::types::Value;

/// Column affinity, from the declared type (SQLite's five rules, in order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Affinity {
    Integer,
    Text,
    /// No declared type, or BLOB.
    Blob,
    Real,
    Numeric,
}

impl Affinity {
    /// The affinity of a column declared `decl` in a table that is STRICT
    /// or not: in a STRICT table `ANY` means no affinity at all, where the
    /// ordinary rules would give it NUMERIC.
    pub fn of_column(decl: &str, strict: bool) -> Affinity {
        if strict
            && decl.trim().eq_ignore_ascii_case("ANY")
            && !crate::mutation::active(Mutation::StrictAnyNumeric)
        {
            Affinity::Blob
        } else {
            Affinity::of_decl(decl)
        }
    }

    /// The affinity of a declared type by SQLite's five rules (not for
    /// STRICT tables: see [`Affinity::of_column`]).
    pub fn of_decl(decl: &str) -> Affinity {
        let d = decl.to_ascii_uppercase();
        if d.contains("INT") {
            Affinity::Integer
        } else if d.contains("CHAR") || d.contains("CLOB") || d.contains("TEXT") {
            Affinity::Text
        } else if d.contains("BLOB") || d.is_empty() {
            Affinity::Blob
        } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
            Affinity::Real
        } else {
            Affinity::Numeric
        }
    }

    fn is_numeric(self) -> bool {
        matches!(self, Affinity::Integer | Affinity::Real | Affinity::Numeric)
    }
}

/// The value a literal (or bound parameter, which has no affinity) takes when
/// compared with a column of affinity `aff`.
pub(crate) fn convert_operand(aff: Affinity, v: &Value) -> Option<Value> {
    if crate::mutation::active(Mutation::WrongAffinity) {
        return Some(v.clone());
    }
    match v {
        Value::Null => Some(Value::Null),
        Value::Blob(_) => None,
        Value::Integer(i) => match aff {
            Affinity::Text => Some(Value::Text(i.to_string())),
            _ => Some(Value::Integer(*i)),
        },
        Value::Real(r) => match aff {
            // TEXT affinity would render the real as text; its exact
            // rendering is SQLite's business.
            Affinity::Text => None,
            _ if r.is_finite() => Some(Value::Real(*r)),
            _ => None,
        },
        Value::Text(t) => {
            if !aff.is_numeric() {
                return Some(Value::Text(t.clone()));
            }
            if let Some(i) = plain_integer(t) {
                Some(Value::Integer(i))
            } else if !t.bytes().any(|b| b.is_ascii_digit()) {
                // No digit: SQLite cannot read it as a number; it stays text.
                Some(Value::Text(t.clone()))
            } else {
                None
            }
        }
    }
}

/// What SQLite stores for `v` bound to a column of affinity `aff` (the
/// appender's values, fed to a plane without reading the row back), when
/// that is certain; `None` when only SQLite's own conversion can say (text
/// that may read as a number, a REAL into a numeric or TEXT column, any
/// value into a REAL column): the appender then reads the stored row.
/// A STRICT table follows the same rules where it accepts the value, and
/// fails the INSERT where it does not.
pub(crate) fn stored(aff: Affinity, v: &Value) -> Option<Cow<'_, Value>> {
    if crate::mutation::active(Mutation::AppenderSkipsAffinity) {
        return Some(Cow::Borrowed(v));
    }
    match (v, aff) {
        (Value::Null | Value::Blob(_), _) => Some(Cow::Borrowed(v)),
        // A REAL column reads back every number as REAL, however stored.
        (_, Affinity::Real) => None,
        (Value::Integer(i), Affinity::Text) => Some(Cow::Owned(Value::Text(i.to_string()))),
        (Value::Integer(_), _) => Some(Cow::Borrowed(v)),
        (Value::Real(_), Affinity::Blob) => Some(Cow::Borrowed(v)),
        // Numeric affinity turns a REAL that is an exact integer into one,
        // and TEXT affinity renders it: SQLite's business.
        (Value::Real(_), _) => None,
        (Value::Text(_), Affinity::Text | Affinity::Blob) => Some(Cow::Borrowed(v)),
        (Value::Text(t), _) => {
            if let Some(i) = plain_integer(t) {
                Some(Cow::Owned(Value::Integer(i)))
            } else if !t.bytes().any(|b| b.is_ascii_digit()) {
                // No digit: SQLite cannot read it as a number.
                Some(Cow::Borrowed(v))
            } else {
                None
            }
        }
    }
}

/// `-?[1-9][0-9]*` or `0` within i64: the texts numeric affinity certainly
/// turns into that integer.
fn plain_integer(t: &str) -> Option<i64> {
    let digits = t.strip_prefix('-').unwrap_or(t);
    let ok = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && !(t.starts_with('-') && digits == "0");
    if ok {
        t.parse().ok()
    } else {
        None
    }
}

pub(crate) fn dim_to_value(v: &DimValue) -> Value {
    match v {
        DimValue::Null => Value::Null,
        DimValue::Int(i) => Value::Integer(*i),
        DimValue::Text(s) => Value::Text(String::from(&**s)),
    }
}

/// SQLite's sort order (BINARY collation): NULL < numbers < TEXT < BLOB.
pub(crate) fn sort_cmp(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Null => 0,
            Value::Integer(_) | Value::Real(_) => 1,
            Value::Text(_) => 2,
            Value::Blob(_) => 3,
        }
    }
    match (a, b) {
        (Value::Integer(x), Value::Integer(y)) => x.cmp(y),
        (Value::Integer(x), Value::Real(y)) => int_real_cmp(*x, *y),
        (Value::Real(x), Value::Integer(y)) => int_real_cmp(*y, *x).reverse(),
        (Value::Real(x), Value::Real(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
        (Value::Text(x), Value::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Blob(x), Value::Blob(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// A comparison operator's result in SQL's three-valued logic: `None` when
/// either side is NULL.
pub(crate) fn sql_cmp(a: &Value, b: &Value) -> Option<Ordering> {
    if matches!(a, Value::Null) || matches!(b, Value::Null) {
        None
    } else {
        Some(sort_cmp(a, b))
    }
}

/// An integer against a real, exactly (as sqlite3IntFloatCompare does).
fn int_real_cmp(i: i64, r: f64) -> Ordering {
    if r.is_nan() {
        return Ordering::Greater;
    }
    if r < -9_223_372_036_854_775_808.0 {
        return Ordering::Greater;
    }
    if r >= 9_223_372_036_854_775_808.0 {
        return Ordering::Less;
    }
    let t = r.trunc() as i64;
    match i.cmp(&t) {
        Ordering::Equal => {
            let frac = r - r.trunc();
            if frac > 0.0 {
                Ordering::Less
            } else if frac < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        o => o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Columns of every affinity, ordinary and STRICT (`ANY`).
    const DECLS: &[(&str, bool)] = &[
        ("INTEGER", false),
        ("TEXT", false),
        ("", false),
        ("BLOB", false),
        ("REAL", false),
        ("NUMERIC", false),
        ("INT", true),
        ("TEXT", true),
        ("ANY", true),
    ];

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::Integer),
            (-1000i64..1000).prop_map(Value::Integer),
            any::<f64>().prop_map(Value::Real),
            (-100i32..100).prop_map(|i| Value::Real(f64::from(i) / 4.0)),
            "[ +\\-0-9.eExXa\t]{0,8}".prop_map(Value::Text),
            any::<i64>().prop_map(|i| Value::Text(i.to_string())),
            prop::collection::vec(any::<u8>(), 0..4).prop_map(Value::Blob),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Whatever `stored` is sure of is what SQLite stores (and reads
        /// back) for that value bound to an INSERT.
        #[test]
        fn stored_is_what_sqlite_stores(v in value(), d in 0..DECLS.len()) {
            let (decl, strict) = DECLS[d];
            let db = rusqlite::Connection::open_in_memory().unwrap();
            let table = format!("CREATE TABLE x(c {decl}){}", if strict { " STRICT" } else { "" });
            db.execute_batch(&table).unwrap();
            let inserted = db.execute("INSERT INTO x VALUES (?1)", [&v]);
            if let (Ok(_), Some(want)) = (inserted, stored(Affinity::of_column(decl, strict), &v)) {
                let got: Value = db.query_row("SELECT c FROM x", [], |r| r.get(0)).unwrap();
                let same = match (&got, &*want) {
                    (Value::Real(a), Value::Real(b)) => a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    (a, b) => a == b,
                };
                prop_assert!(same, "{v:?} into {decl} (strict {strict}): SQLite stored {got:?}, stored() said {want:?}");
            }
        }
    }

    #[test]
    fn affinity_follows_the_declared_type_rules() {
        assert_eq!(Affinity::of_decl("BIGINT"), Affinity::Integer);
        assert_eq!(Affinity::of_decl("varchar(10)"), Affinity::Text);
        assert_eq!(Affinity::of_decl(""), Affinity::Blob);
        assert_eq!(Affinity::of_decl("DOUBLE"), Affinity::Real);
        assert_eq!(Affinity::of_decl("DATE"), Affinity::Numeric);
        // "INT" wins over "CHAR": rule order.
        assert_eq!(Affinity::of_decl("CHARINT"), Affinity::Integer);
    }

    #[test]
    fn numeric_affinity_converts_only_certain_texts() {
        assert_eq!(
            convert_operand(Affinity::Integer, &Value::Text("5".into())),
            Some(Value::Integer(5))
        );
        assert_eq!(
            convert_operand(Affinity::Integer, &Value::Text("abc".into())),
            Some(Value::Text("abc".into()))
        );
        assert_eq!(
            convert_operand(Affinity::Integer, &Value::Text("5.0".into())),
            None
        );
        assert_eq!(
            convert_operand(Affinity::Integer, &Value::Text("05".into())),
            None
        );
        assert_eq!(
            convert_operand(Affinity::Text, &Value::Integer(5)),
            Some(Value::Text("5".into()))
        );
        assert_eq!(
            convert_operand(Affinity::Blob, &Value::Text("5".into())),
            Some(Value::Text("5".into()))
        );
    }

    #[test]
    fn integers_and_reals_compare_exactly() {
        assert_eq!(
            sort_cmp(&Value::Integer(2), &Value::Real(2.5)),
            Ordering::Less
        );
        assert_eq!(
            sort_cmp(&Value::Integer(-2), &Value::Real(-2.5)),
            Ordering::Greater
        );
        assert_eq!(
            sort_cmp(&Value::Integer(i64::MAX), &Value::Real(9.3e18)),
            Ordering::Less
        );
        assert_eq!(
            sort_cmp(&Value::Integer(3), &Value::Real(3.0)),
            Ordering::Equal
        );
        assert_eq!(
            sort_cmp(&Value::Integer(3), &Value::Text("1".into())),
            Ordering::Less
        );
    }
}
