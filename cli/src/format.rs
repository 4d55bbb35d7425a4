//! Printing result sets the way the `sqlite3` shell does, so that the two
//! programs' outputs can be diffed.

use std::io::{self, Write};

use pleroma::{Rows, Value};

/// The output modes of `.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `a|b|c`, one row a line: `sqlite3`'s default.
    List,
    /// A table drawn with box characters, headers always shown.
    Box,
    /// RFC 4180 CSV, quoted where `sqlite3` quotes, rows ended by CRLF.
    Csv,
    /// A JSON array of objects, one object a line.
    Json,
}

impl Mode {
    pub(crate) fn parse(name: &str) -> Option<Mode> {
        match name {
            "list" => Some(Mode::List),
            "box" => Some(Mode::Box),
            "csv" => Some(Mode::Csv),
            "json" => Some(Mode::Json),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::List => "list",
            Mode::Box => "box",
            Mode::Csv => "csv",
            Mode::Json => "json",
        }
    }
}

/// How results are printed: the mode, whether list and CSV show headers,
/// the text of NULL and the separators of list and CSV mode.
#[derive(Clone, Debug)]
pub(crate) struct Printer {
    pub(crate) mode: Mode,
    pub(crate) headers: bool,
    /// `.nullvalue`: printed for NULL in list, CSV and box mode.
    pub(crate) null_value: String,
    /// `.separator COL ROW`.
    pub(crate) col_sep: String,
    pub(crate) row_sep: String,
}

impl Default for Printer {
    fn default() -> Self {
        Printer {
            mode: Mode::List,
            headers: false,
            null_value: String::new(),
            col_sep: "|".into(),
            row_sep: "\n".into(),
        }
    }
}

impl Printer {
    /// `.mode`: as in sqlite3, list and CSV mode set their separators.
    pub(crate) fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
        let (col, row) = match mode {
            Mode::List => ("|", "\n"),
            Mode::Csv => (",", "\r\n"),
            Mode::Box | Mode::Json => return,
        };
        self.col_sep = col.into();
        self.row_sep = row.into();
    }

    /// A value's bytes, NULL as `.nullvalue` sets it.
    fn cell(&self, v: &Value) -> Vec<u8> {
        match v {
            Value::Null => self.null_value.as_bytes().to_vec(),
            v => text_bytes(v),
        }
    }

    /// Print a statement's result set; a statement without columns prints
    /// nothing, and neither does an empty result (as in `sqlite3`).
    pub(crate) fn print(&self, out: &mut dyn Write, rows: &Rows) -> io::Result<()> {
        if rows.columns.is_empty() {
            return Ok(());
        }
        match self.mode {
            Mode::List => self.list(out, rows),
            Mode::Box => self.boxed(out, rows),
            Mode::Csv => self.csv(out, rows),
            Mode::Json => json(out, rows),
        }
    }

    fn list(&self, out: &mut dyn Write, rows: &Rows) -> io::Result<()> {
        let (col, row_sep) = (self.col_sep.as_bytes(), self.row_sep.as_bytes());
        if self.headers && !rows.rows.is_empty() {
            out.write_all(rows.columns.join(&self.col_sep).as_bytes())?;
            out.write_all(row_sep)?;
        }
        for row in &rows.rows {
            for (i, v) in row.iter().enumerate() {
                if i > 0 {
                    out.write_all(col)?;
                }
                out.write_all(&self.cell(v))?;
            }
            out.write_all(row_sep)?;
        }
        Ok(())
    }

    fn csv(&self, out: &mut dyn Write, rows: &Rows) -> io::Result<()> {
        let line = |out: &mut dyn Write,
                    cells: &mut dyn Iterator<Item = Option<Vec<u8>>>|
         -> io::Result<()> {
            for (i, cell) in cells.enumerate() {
                if i > 0 {
                    out.write_all(self.col_sep.as_bytes())?;
                }
                match cell {
                    Some(bytes) => out.write_all(&csv_field(&bytes, self.col_sep.as_bytes()))?,
                    None => out.write_all(self.null_value.as_bytes())?,
                }
            }
            out.write_all(self.row_sep.as_bytes())
        };
        if self.headers && !rows.rows.is_empty() {
            line(
                out,
                &mut rows.columns.iter().map(|c| Some(c.as_bytes().to_vec())),
            )?;
        }
        for row in &rows.rows {
            line(
                out,
                &mut row
                    .iter()
                    .map(|v| (!matches!(v, Value::Null)).then(|| text_bytes(v))),
            )?;
        }
        Ok(())
    }
}

/// The rows of EXPLAIN QUERY PLAN (id, parent, notused, detail) drawn as
/// the tree `sqlite3` draws, whatever the output mode.
pub(crate) fn query_plan(out: &mut dyn Write, rows: &Rows) -> io::Result<()> {
    let nodes: Vec<(i64, i64, String)> = rows
        .rows
        .iter()
        .filter_map(|r| match (r.first(), r.get(1), r.get(3)) {
            (Some(Value::Integer(id)), Some(Value::Integer(parent)), Some(detail)) => Some((
                *id,
                *parent,
                String::from_utf8_lossy(&text_bytes(detail)).into_owned(),
            )),
            _ => None,
        })
        .collect();
    if nodes.is_empty() {
        return Ok(());
    }
    writeln!(out, "QUERY PLAN")?;
    plan_level(out, &nodes, 0, &mut String::new())
}

fn plan_level(
    out: &mut dyn Write,
    nodes: &[(i64, i64, String)],
    parent: i64,
    prefix: &mut String,
) -> io::Result<()> {
    let children: Vec<&(i64, i64, String)> = nodes.iter().filter(|n| n.1 == parent).collect();
    for (i, (id, _, detail)) in children.iter().enumerate() {
        let last = i + 1 == children.len();
        writeln!(out, "{prefix}{}{detail}", if last { "`--" } else { "|--" })?;
        let len = prefix.len();
        prefix.push_str(if last { "   " } else { "|  " });
        plan_level(out, nodes, *id, prefix)?;
        prefix.truncate(len);
    }
    Ok(())
}

/// A value as `sqlite3` prints it in list mode: NULL as an empty string,
/// REAL as SQLite renders it as text, TEXT and BLOB as their bytes up to the
/// first NUL (`sqlite3` prints them as C strings).
pub(crate) fn text_bytes(v: &Value) -> Vec<u8> {
    let c_string = |b: &[u8]| b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())].to_vec();
    match v {
        Value::Null => Vec::new(),
        Value::Integer(i) => i.to_string().into_bytes(),
        Value::Real(r) => format_real(*r).into_bytes(),
        Value::Text(s) => c_string(s.as_bytes()),
        Value::Blob(b) => c_string(b),
    }
}

/// A REAL the way SQLite converts it to text (`printf("%!.15g")`): 15
/// significant digits, trailing zeros dropped but always a decimal point
/// (`1.0`, `1.0e+20`), a two-digit signed exponent, `Inf` for infinities.
pub(crate) fn format_real(r: f64) -> String {
    if r.is_infinite() {
        return if r > 0.0 { "Inf".into() } else { "-Inf".into() };
    }
    if r.is_nan() {
        return "NaN".into();
    }
    if r == 0.0 {
        // SQLite prints no sign for negative zero.
        return "0.0".into();
    }
    // Rust rounds exactly; the exponent is the one after rounding to 15 digits.
    let sci = format!("{r:.14e}");
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` always has an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    if !(-4..15).contains(&exp) {
        let m = with_point(mantissa.trim_end_matches('0'));
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (14 - exp) as usize;
        let fixed = format!("{r:.decimals$}");
        if fixed.contains('.') {
            with_point(fixed.trim_end_matches('0'))
        } else {
            format!("{fixed}.0")
        }
    }
}

fn with_point(s: &str) -> String {
    if s.ends_with('.') {
        format!("{s}0")
    } else {
        s.to_owned()
    }
}

/// `sqlite3` quotes a CSV field that is empty or holds a quote, the column
/// separator, a space, control character or any non-ASCII byte.
fn csv_field(bytes: &[u8], sep: &[u8]) -> Vec<u8> {
    let needs_quote = bytes.is_empty()
        || bytes
            .iter()
            .any(|&b| b <= b' ' || b == b'"' || b == b'\'' || b >= 0x7f)
        || (!sep.is_empty() && bytes.windows(sep.len()).any(|w| w == sep));
    if !needs_quote {
        return bytes.to_vec();
    }
    let mut q = Vec::with_capacity(bytes.len() + 2);
    q.push(b'"');
    for &b in bytes {
        if b == b'"' {
            q.push(b'"');
        }
        q.push(b);
    }
    q.push(b'"');
    q
}

fn json(out: &mut dyn Write, rows: &Rows) -> io::Result<()> {
    let keys: Vec<String> = rows.columns.iter().map(|c| json_string(c)).collect();
    for (n, row) in rows.rows.iter().enumerate() {
        out.write_all(if n == 0 { b"[{" } else { b",\n{" })?;
        for (i, v) in row.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write!(out, "{}:{}", keys[i], json_value(v))?;
        }
        out.write_all(b"}")?;
    }
    if !rows.rows.is_empty() {
        out.write_all(b"]\n")?;
    }
    Ok(())
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

fn json_value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Integer(i) => i.to_string(),
        // The shortest text that reads back as the same double; JSON has no
        // infinity, so (as `sqlite3` does) write one as a number too large.
        Value::Real(r) if r.is_infinite() => if *r > 0.0 { "1e999" } else { "-1e999" }.into(),
        // SQLite prints no sign for negative zero.
        Value::Real(r) if *r == 0.0 => "0.0".into(),
        Value::Real(r) => format!("{r:?}"),
        Value::Text(s) => json_string(s),
        Value::Blob(b) => json_string(&String::from_utf8_lossy(b)),
    }
}

impl Printer {
    fn boxed(&self, out: &mut dyn Write, rows: &Rows) -> io::Result<()> {
        if rows.rows.is_empty() {
            return Ok(());
        }
        let cells: Vec<Vec<String>> = rows
            .rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|v| String::from_utf8_lossy(&self.cell(v)).into_owned())
                    .collect()
            })
            .collect();
        let widths: Vec<usize> = rows
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                cells
                    .iter()
                    .map(|r| width(&r[i]))
                    .chain([width(c)])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let rule = |l: &str, m: &str, r: &str| {
            let bars: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            format!("{l}{}{r}\n", bars.join(m))
        };
        out.write_all(rule("┌", "┬", "┐").as_bytes())?;
        let head: Vec<String> = rows
            .columns
            .iter()
            .zip(&widths)
            .map(|(c, &w)| {
                let left = (w - width(c)) / 2;
                format!(
                    " {}{c}{} ",
                    " ".repeat(left),
                    " ".repeat(w - width(c) - left)
                )
            })
            .collect();
        writeln!(out, "│{}│", head.join("│"))?;
        out.write_all(rule("├", "┼", "┤").as_bytes())?;
        for row in &cells {
            let line: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(c, &w)| format!(" {c}{} ", " ".repeat(w - width(c))))
                .collect();
            writeln!(out, "│{}│", line.join("│"))?;
        }
        out.write_all(rule("└", "┴", "┘").as_bytes())
    }
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// The error and its causes, one after the other; SQLite's bare result code
/// ("Error code 14: ...") is left out, as its message already says it.
pub(crate) fn message(e: &anyhow::Error) -> String {
    let parts: Vec<String> = e
        .chain()
        .filter(|c| c.downcast_ref::<pleroma::rusqlite::ffi::Error>().is_none())
        .map(ToString::to_string)
        .collect();
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reals_print_as_sqlite_prints_them() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e20, "1.0e+20"),
            (-4.0, "-4.0"),
            (123456789012345678.0, "1.23456789012346e+17"),
            (1e-5, "1.0e-05"),
            (0.0001, "0.0001"),
            (0.1 + 0.2, "0.3"),
            (100.0, "100.0"),
            (1.5e15, "1.5e+15"),
            (1e15, "1.0e+15"),
            (999999999999999.0, "999999999999999.0"),
            (9999999999999999.0, "1.0e+16"),
            (1.23456789012345, "1.23456789012345"),
            (std::f64::consts::PI, "3.14159265358979"),
            (-2.5e-300, "-2.5e-300"),
            (f64::INFINITY, "Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (-0.0, "0.0"),
        ];
        for (v, want) in cases {
            assert_eq!(format_real(v), want, "{v:e}");
        }
    }

    fn sample() -> Rows {
        Rows {
            columns: vec!["i".into(), "s".into()].into(),
            rows: vec![
                vec![Value::Integer(1), Value::Text("a,b".into())],
                vec![Value::Null, Value::Text("é".into())],
            ]
            .into(),
        }
    }

    fn render(p: Printer) -> String {
        let mut out = Vec::new();
        p.print(&mut out, &sample()).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn list_mode_separates_with_bars_and_prints_null_as_empty() {
        assert_eq!(render(Printer::default()), "1|a,b\n|é\n");
        assert_eq!(
            render(Printer {
                mode: Mode::List,
                headers: true,
                ..Printer::default()
            }),
            "i|s\n1|a,b\n|é\n"
        );
    }

    #[test]
    fn csv_mode_quotes_as_sqlite3_does() {
        assert_eq!(
            render({
                let mut p = Printer::default();
                p.set_mode(Mode::Csv);
                p
            }),
            "1,\"a,b\"\r\n,\"é\"\r\n"
        );
    }

    #[test]
    fn json_mode_writes_one_object_a_line() {
        assert_eq!(
            render(Printer {
                mode: Mode::Json,
                headers: false,
                ..Printer::default()
            }),
            "[{\"i\":1,\"s\":\"a,b\"},\n{\"i\":null,\"s\":\"é\"}]\n"
        );
    }

    #[test]
    fn a_query_plan_is_drawn_as_a_tree() {
        let row = |id, parent, detail: &str| {
            vec![
                Value::Integer(id),
                Value::Integer(parent),
                Value::Integer(0),
                Value::Text(detail.into()),
            ]
        };
        let plan = Rows {
            columns: vec![
                "id".into(),
                "parent".into(),
                "notused".into(),
                "detail".into(),
            ]
            .into(),
            rows: vec![
                row(2, 0, "SCAN f"),
                row(5, 0, "LIST SUBQUERY 1"),
                row(7, 5, "SCAN c"),
                row(9, 0, "USE TEMP B-TREE"),
            ]
            .into(),
        };
        let mut out = Vec::new();
        query_plan(&mut out, &plan).unwrap();
        let want = "QUERY PLAN\n|--SCAN f\n|--LIST SUBQUERY 1\n|  `--SCAN c\n`--USE TEMP B-TREE\n";
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    #[test]
    fn box_mode_centres_headers_and_pads_cells() {
        let want = "┌───┬─────┐\n│ i │  s  │\n├───┼─────┤\n│ 1 │ a,b │\n│   │ é   │\n└───┴─────┘\n";
        assert_eq!(
            render(Printer {
                mode: Mode::Box,
                headers: false,
                ..Printer::default()
            }),
            want
        );
    }
}
