//! SQLite values on the wire: the PostgreSQL type of each result column,
//! the text and binary encodings, and parameters decoded into SQLite values.
//!
//! The server never changes a value: a value that cannot be sent exactly as
//! its column's type is declined with an error, not converted.

use bytes::{BufMut, BytesMut};
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::api::Type;
use pgwire::error::ErrorInfo;
use pgwire::messages::data::DataRow;
use pleroma::Value;

use crate::sqlstate::error;

/// The PostgreSQL type a result column is sent as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ColType {
    /// SQLite INTEGER.
    Int8,
    /// SQLite REAL.
    Float8,
    /// SQLite TEXT, or a column whose values change storage class.
    Text,
    /// SQLite BLOB.
    Bytea,
    /// A boolean of the emulated catalog (`attnotnull`), 0 or 1 in SQLite.
    Bool,
    /// The exact 128-bit total of `PleromaSumExact`, which SQLite returns as
    /// the TEXT of an integer.
    Numeric,
}

impl ColType {
    pub(crate) fn pg_type(self) -> Type {
        match self {
            ColType::Int8 => Type::INT8,
            ColType::Float8 => Type::FLOAT8,
            ColType::Text => Type::TEXT,
            ColType::Bytea => Type::BYTEA,
            ColType::Numeric => Type::NUMERIC,
            ColType::Bool => Type::BOOL,
        }
    }

    /// The type a column gets from the values it holds (NULLs say nothing).
    pub(crate) fn of_values<'a>(
        values: impl Iterator<Item = &'a Value>,
        exact_sum: bool,
    ) -> ColType {
        let mut seen: Option<ColType> = None;
        let mut mixed = false;
        for v in values {
            let t = match v {
                Value::Null => continue,
                Value::Integer(_) => ColType::Int8,
                Value::Real(_) => ColType::Float8,
                Value::Text(s) if exact_sum && is_integer_text(s) => ColType::Numeric,
                Value::Text(_) => ColType::Text,
                Value::Blob(_) => ColType::Bytea,
            };
            match seen {
                None => seen = Some(t),
                Some(s) if s != t => mixed = true,
                _ => {}
            }
        }
        if mixed {
            ColType::Text
        } else {
            seen.unwrap_or(if exact_sum {
                ColType::Numeric
            } else {
                ColType::Text
            })
        }
    }

    /// The type a column gets before it runs, from SQLite's declared type
    /// (its affinity rules, in their order); an expression has none and is
    /// sent as text.
    pub(crate) fn of_decl(decl: Option<&str>, exact_sum: bool) -> ColType {
        if exact_sum {
            return ColType::Numeric;
        }
        let Some(decl) = decl else {
            return ColType::Text;
        };
        let d = decl.to_ascii_uppercase();
        if d.contains("INT") {
            ColType::Int8
        } else if d.contains("CHAR") || d.contains("CLOB") || d.contains("TEXT") {
            ColType::Text
        } else if d.contains("BLOB") {
            ColType::Bytea
        } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
            ColType::Float8
        } else {
            ColType::Text
        }
    }
}

fn is_integer_text(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The format of result column `idx`, or an error when the client's Bind
/// named fewer formats than there are columns.
pub(crate) fn format_for(format: &Format, idx: usize) -> Result<FieldFormat, ErrorInfo> {
    match format {
        Format::Individual(codes) if idx >= codes.len() => Err(error(
            "08P01",
            format!(
                "bind message has {} result formats but the query has more columns",
                codes.len()
            ),
        )),
        f => Ok(f.format_for(idx)),
    }
}

pub(crate) fn fields(
    names: &[String],
    types: &[ColType],
    format: &Format,
) -> Result<Vec<FieldInfo>, ErrorInfo> {
    names
        .iter()
        .zip(types)
        .enumerate()
        .map(|(i, (n, t))| {
            Ok(FieldInfo::new(
                n.clone(),
                None,
                None,
                t.pg_type(),
                format_for(format, i)?,
            ))
        })
        .collect()
}

/// Encodes rows as DataRows of the given column types and formats.
pub(crate) fn encode_rows(
    names: &[String],
    rows: &[Vec<Value>],
    types: &[ColType],
    format: &Format,
) -> Result<Vec<DataRow>, ErrorInfo> {
    let formats = (0..types.len())
        .map(|i| format_for(format, i))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::with_capacity(rows.len());
    let mut buf = BytesMut::with_capacity(64 * rows.len().max(1));
    for (r, row) in rows.iter().enumerate() {
        for (c, v) in row.iter().enumerate() {
            encode_value(&mut buf, v, types[c], formats[c]).map_err(|why| {
                error(
                    "42804",
                    format!(
                        "column {} ({:?}) of row {}: {why}; the server does not convert values \
                         (describe the portal, use the simple protocol, or CAST in the query)",
                        c + 1,
                        names[c],
                        r + 1
                    ),
                )
            })?;
        }
        out.push(DataRow::new(buf.split(), row.len() as i16));
    }
    Ok(out)
}

fn encode_value(buf: &mut BytesMut, v: &Value, t: ColType, f: FieldFormat) -> Result<(), String> {
    let text = f == FieldFormat::Text;
    let bytes: Vec<u8> = match (v, t) {
        (Value::Null, _) => {
            buf.put_i32(-1);
            return Ok(());
        }
        (Value::Integer(i), ColType::Bool) if !text => vec![(*i != 0) as u8],
        (Value::Integer(i), ColType::Bool) => if *i != 0 { "t" } else { "f" }.into(),
        (Value::Integer(i), ColType::Int8) if !text => i.to_be_bytes().to_vec(),
        (Value::Integer(i), ColType::Int8 | ColType::Text) => i.to_string().into_bytes(),
        (Value::Real(x), ColType::Float8) if !text => x.to_be_bytes().to_vec(),
        (Value::Real(x), ColType::Float8 | ColType::Text) => float_text(*x).into_bytes(),
        (Value::Text(s), ColType::Text) => s.as_bytes().to_vec(),
        (Value::Text(s), ColType::Numeric) if is_integer_text(s) => {
            if text {
                s.as_bytes().to_vec()
            } else {
                numeric_binary(s)
            }
        }
        (Value::Blob(b), ColType::Bytea) if !text => b.clone(),
        (Value::Blob(b), ColType::Bytea) => bytea_text(b).into_bytes(),
        (Value::Blob(_), ColType::Text) => {
            return Err("a BLOB in a column sent as text".into());
        }
        (v, t) => {
            return Err(format!(
                "a {} value in a column described as {}",
                storage_class(v),
                t.pg_type().name()
            ))
        }
    };
    buf.put_i32(bytes.len() as i32);
    buf.put_slice(&bytes);
    Ok(())
}

fn storage_class(v: &Value) -> &'static str {
    match v {
        Value::Null => "NULL",
        Value::Integer(_) => "INTEGER",
        Value::Real(_) => "REAL",
        Value::Text(_) => "TEXT",
        Value::Blob(_) => "BLOB",
    }
}

/// PostgreSQL's text for a float8: the shortest digits that read back as
/// the same double (what PostgreSQL 12+ sends with its default
/// `extra_float_digits = 1`), written as its `float8out` writes them:
/// plainly when the decimal exponent is from -4 to 14 (`100`, `0.0001`,
/// `123456789012345.6`), else as `1e+15`, `1e-05`, `1.5e-07` (a sign and
/// at least two digits in the exponent).
pub(crate) fn float_text(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    } else if x == f64::INFINITY {
        return "Infinity".into();
    } else if x == f64::NEG_INFINITY {
        return "-Infinity".into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `-1.5e-7`.
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e}'s exponent is an integer");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if !(-4..15).contains(&exp) {
        let e_sign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{mantissa}e{e_sign}{:02}", exp.abs());
    }
    if exp < 0 {
        return format!("{sign}0.{}{digits}", "0".repeat((-exp - 1) as usize));
    }
    let point = exp as usize + 1;
    if digits.len() <= point {
        format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}

pub(crate) fn bytea_text(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 + 2 * b.len());
    s.push_str("\\x");
    for byte in b {
        s.push_str(&format!("{byte:02x}"));
    }
    s
}

/// The binary `numeric` of an integer written in decimal: base-10000 digits
/// from the most significant, weight = their count - 1, scale 0.
fn numeric_binary(s: &str) -> Vec<u8> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let digits = digits.trim_start_matches('0');
    let mut groups: Vec<i16> = Vec::new();
    let pad = (4 - digits.len() % 4) % 4;
    let padded: String = "0".repeat(pad) + digits;
    for chunk in padded.as_bytes().chunks(4) {
        let g = chunk.iter().fold(0i16, |a, b| a * 10 + (b - b'0') as i16);
        groups.push(g);
    }
    let weight = groups.len() as i16 - 1;
    while groups.last() == Some(&0) {
        groups.pop();
    }
    let mut out = Vec::with_capacity(8 + 2 * groups.len());
    out.extend_from_slice(&(groups.len() as i16).to_be_bytes());
    out.extend_from_slice(&(if groups.is_empty() { 0 } else { weight }).to_be_bytes());
    let sign: u16 = if neg && !groups.is_empty() { 0x4000 } else { 0 };
    out.extend_from_slice(&sign.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    for g in groups {
        out.extend_from_slice(&g.to_be_bytes());
    }
    out
}

/// A parameter as SQLite sees it. Text-format parameters of a type the
/// client did not name (OID 0) or of a text type are bound as TEXT, as a
/// quoted literal would be: SQLite's affinity rules then apply exactly as
/// they do to a literal compared with a column. Typed numbers are bound as
/// SQLite's INTEGER or REAL, as their literals would be.
pub(crate) fn param(raw: Option<&[u8]>, ty: &Type, binary: bool) -> Result<Value, String> {
    let Some(raw) = raw else {
        return Ok(Value::Null);
    };
    if binary {
        return binary_param(raw, ty);
    }
    let s = std::str::from_utf8(raw).map_err(|_| "a text parameter is not UTF-8".to_string())?;
    Ok(match *ty {
        Type::INT2 | Type::INT4 | Type::INT8 | Type::OID => Value::Integer(
            s.trim()
                .parse()
                .map_err(|_| format!("invalid input for type {}: {s:?}", ty.name()))?,
        ),
        Type::FLOAT4 | Type::FLOAT8 => Value::Real(
            parse_float(s).ok_or_else(|| format!("invalid input for type {}: {s:?}", ty.name()))?,
        ),
        Type::NUMERIC => numeric_literal(s)?,
        Type::BOOL => Value::Integer(match s.trim().to_ascii_lowercase().as_str() {
            "t" | "true" | "yes" | "on" | "1" => 1,
            "f" | "false" | "no" | "off" | "0" => 0,
            _ => return Err(format!("invalid input for type boolean: {s:?}")),
        }),
        Type::BYTEA => Value::Blob(bytea_param(s)?),
        _ => Value::Text(s.to_owned()),
    })
}

fn parse_float(s: &str) -> Option<f64> {
    match s.trim() {
        "NaN" => Some(f64::NAN),
        "Infinity" | "inf" => Some(f64::INFINITY),
        "-Infinity" | "-inf" => Some(f64::NEG_INFINITY),
        t => t.parse().ok(),
    }
}

/// A numeric parameter is what SQLite makes of the same numeric literal: an
/// INTEGER when it is a whole number within 64 bits, else a REAL.
fn numeric_literal(s: &str) -> Result<Value, String> {
    let t = s.trim();
    if let Ok(i) = t.parse::<i64>() {
        return Ok(Value::Integer(i));
    }
    t.parse::<f64>()
        .map(Value::Real)
        .map_err(|_| format!("invalid input for type numeric: {s:?}"))
}

fn bytea_param(s: &str) -> Result<Vec<u8>, String> {
    let hex = s
        .strip_prefix("\\x")
        .ok_or_else(|| "a text bytea parameter must be in hex format (\\x...)".to_string())?;
    if hex.len() % 2 != 0 {
        return Err("a hex bytea parameter has an odd number of digits".into());
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&hex[i..i + 2], 16)
                .map_err(|_| "invalid hex digit in a bytea parameter".to_string())
        })
        .collect()
}

fn binary_param(raw: &[u8], ty: &Type) -> Result<Value, String> {
    let fixed = |n: usize| -> Result<&[u8], String> {
        if raw.len() == n {
            Ok(raw)
        } else {
            Err(format!(
                "a binary {} parameter must be {n} bytes, got {}",
                ty.name(),
                raw.len()
            ))
        }
    };
    Ok(match *ty {
        Type::INT2 => Value::Integer(i16::from_be_bytes(fixed(2)?.try_into().unwrap()) as i64),
        Type::INT4 => Value::Integer(i32::from_be_bytes(fixed(4)?.try_into().unwrap()) as i64),
        Type::OID => Value::Integer(u32::from_be_bytes(fixed(4)?.try_into().unwrap()) as i64),
        Type::INT8 => Value::Integer(i64::from_be_bytes(fixed(8)?.try_into().unwrap())),
        Type::FLOAT4 => Value::Real(f32::from_be_bytes(fixed(4)?.try_into().unwrap()) as f64),
        Type::FLOAT8 => Value::Real(f64::from_be_bytes(fixed(8)?.try_into().unwrap())),
        Type::BOOL => Value::Integer(fixed(1)?[0].min(1) as i64),
        Type::BYTEA => Value::Blob(raw.to_vec()),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => Value::Text(
            String::from_utf8(raw.to_vec())
                .map_err(|_| "a text parameter is not UTF-8".to_string())?,
        ),
        _ => {
            return Err(format!(
                "binary parameters of type {} are not supported; send it in text format",
                ty.name()
            ))
        }
    })
}

/// `$1`, `$2`, ... (PostgreSQL's placeholders) as `?1`, `?2`: SQLite reads
/// `$1` as a *named* parameter numbered by first appearance, `?1` binds the
/// first parameter wherever it stands. Read by the tokenizer: literals, quoted
/// names and comments are left alone, and so is a `$` inside a word (`a$1`).
/// A variable that goes on past its digits with `::` or `(…)` (`$1::int`)
/// has its `$1` rewritten; one that goes on with a word character (`$1a`)
/// is left.
pub(crate) fn numbered_placeholders(sql: &str) -> std::borrow::Cow<'_, str> {
    if !sql.contains('$') {
        return sql.into();
    }
    let mut out = String::with_capacity(sql.len());
    let mut last = 0;
    for t in pleroma::tokenize::tokens(sql) {
        let Some(rest) = t.text.strip_prefix('$') else {
            continue;
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let after = rest.as_bytes().get(digits);
        // Only a variable (or an illegal one, `$1(x`) starts with `$`.
        if digits > 0
            && !after.is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$')
        {
            out.push_str(&sql[last..t.start]);
            out.push('?');
            last = t.start + 1;
        }
    }
    out.push_str(&sql[last..]);
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_written_as_postgresql_writes_them() {
        // PostgreSQL 15's float8out, read off `SELECT x::float8`.
        for (x, pg) in [
            (1e300, "1e+300"),
            (1e-7, "1e-07"),
            (1.5e-7, "1.5e-07"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1e15, "1e+15"),
            (1e16, "1e+16"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e21, "1e+21"),
            (-3.5e-10, "-3.5e-10"),
            (100.0, "100"),
            (2.5, "2.5"),
            (1e14, "100000000000000"),
            (123456789012345.6, "123456789012345.6"),
            (1234567890123456.7, "1.2345678901234568e+15"),
            (-0.25, "-0.25"),
            (0.0, "0"),
            (-0.0, "-0"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(float_text(x), pg, "{x:?}");
        }
    }

    #[test]
    fn placeholders_outside_literals_become_numbered() {
        assert_eq!(
            numbered_placeholders("SELECT $2, '$1', \"$1\", $1 -- $3\n"),
            "SELECT ?2, '$1', \"$1\", ?1 -- $3\n"
        );
        assert_eq!(
            numbered_placeholders("SELECT a$1 FROM t"),
            "SELECT a$1 FROM t"
        );
        assert_eq!(
            numbered_placeholders("SELECT [$1], `$1`, /* $1 */ $1::int, $1a, x'00'||$10"),
            "SELECT [$1], `$1`, /* $1 */ ?1::int, $1a, x'00'||?10"
        );
    }

    #[test]
    fn numeric_binary_round_trips_through_postgres_layout() {
        // 123456789 = 1 2345 6789: three base-10000 digits, weight 2.
        assert_eq!(
            numeric_binary("123456789"),
            [0, 3, 0, 2, 0, 0, 0, 0, 0, 1, 0x09, 0x29, 0x1a, 0x85]
        );
        // -10000 = 1 0000: trailing zero digit dropped, weight 1.
        assert_eq!(numeric_binary("-10000"), [0, 1, 0, 1, 0x40, 0, 0, 0, 0, 1]);
        assert_eq!(numeric_binary("0"), [0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn a_column_that_changes_storage_class_is_text() {
        let vals = [Value::Integer(1), Value::Null, Value::Real(2.5)];
        assert_eq!(ColType::of_values(vals.iter(), false), ColType::Text);
        let vals = [Value::Null, Value::Integer(1)];
        assert_eq!(ColType::of_values(vals.iter(), false), ColType::Int8);
        let vals = [Value::Text(
            "170141183460469231731687303715884105727".into(),
        )];
        assert_eq!(ColType::of_values(vals.iter(), true), ColType::Numeric);
    }
}
