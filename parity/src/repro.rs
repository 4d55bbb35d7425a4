//! Reproductions: a case's steps as a `.sql` file that SQLite's own shell
//! can read (the Pleroma-only parts are comments), and back.
//!
//! Each step starts with a directive comment:
//!
//! ```text
//! -- @exec                         the statement below, on both databases
//! -- @pleroma PRAGMA ...           a Pleroma PRAGMA (Pleroma side only)
//! -- @pleroma-refused PRAGMA ...   one that Pleroma must refuse
//! -- @second / -- @process         the statement below, from a second
//!                                  connection / process on Pleroma's file
//! -- @reopen                       close and reopen the Pleroma connection
//! -- @check CLASS ORDER [params: v, v]   the query below, compared
//! -- @reader CLASS ORDER [params: ...]  the same, on a second Pleroma
//!                                  connection to the file
//! -- @tlp group=a,b measure=m      then "-- base:", "-- p:", "-- pnull:"
//! -- @norec                        then "-- p:"
//! ```

use anyhow::{bail, Context as _};
use pleroma::Value;

use crate::gen::{Class, Order, Query, Step, Tlp};
use crate::schema::value_sql;

/// The steps as a reproduction file, with `header` as leading comments.
pub fn write(steps: &[Step], header: &str) -> String {
    let mut out = String::from("-- Pleroma parity reproduction\n");
    for l in header.lines() {
        out += &format!("-- {l}\n");
    }
    out += "-- Replay: cargo run --release -p pleroma-parity -- --replay <this file>\n\n";
    for s in steps {
        match s {
            Step::Exec(sql) => out += &format!("-- @exec\n{sql};\n"),
            Step::Pleroma(sql) => out += &format!("-- @pleroma {sql}\n"),
            Step::PleromaRefused(sql) => out += &format!("-- @pleroma-refused {sql}\n"),
            Step::Second(sql) => out += &format!("-- @second\n{sql};\n"),
            Step::Process(sql) => out += &format!("-- @process\n{sql};\n"),
            Step::Plain(sql) => out += &format!("-- @plain\n{sql};\n"),
            Step::StandIn(sql) => out += &format!("-- @standin\n{sql};\n"),
            Step::Append(sql) => out += &format!("-- @append\n{sql};\n"),
            Step::CopyRefused(sql) => out += &format!("-- @copy-refused\n{sql};\n"),
            Step::Reopen => out += "-- @reopen\n",
            Step::Backup => out += "-- @backup\n",
            Step::Restore => out += "-- @restore\n",
            Step::Check(q) | Step::Reader(q) => {
                let word = if matches!(s, Step::Reader(_)) {
                    "reader"
                } else {
                    "check"
                };
                let order = match &q.order {
                    Order::Unordered => "unordered".to_owned(),
                    Order::Total => "total".to_owned(),
                    Order::CountOnly => "count".to_owned(),
                    Order::Keys(k) => format!(
                        "keys:{}",
                        k.iter()
                            .map(|k| k.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                };
                let params = if q.params.is_empty() {
                    String::new()
                } else {
                    format!(
                        " params: {}",
                        q.params
                            .iter()
                            .map(value_sql)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                out += &format!("-- @{word} {} {order}{params}\n{};\n", q.class, q.sql);
            }
            Step::Tlp(t) => {
                out += &format!(
                    "-- @tlp group={} measure={}\n",
                    t.group.join(","),
                    t.measure
                );
                out += &format!(
                    "-- base: {}\n-- p: {}\n-- pnull: {}\n",
                    t.base.as_deref().unwrap_or(""),
                    t.p,
                    t.pnull
                );
            }
            Step::NoRec(p) => out += &format!("-- @norec\n-- p: {p}\n"),
        }
    }
    out
}

/// Read a reproduction file back into steps.
pub fn parse(text: &str) -> anyhow::Result<Vec<Step>> {
    let mut steps = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    // The lines after a directive, up to the next one.
    let body = |i: &mut usize| -> Vec<&str> {
        let mut b = Vec::new();
        while *i < lines.len() && !lines[*i].starts_with("-- @") {
            if !lines[*i].trim().is_empty() {
                b.push(lines[*i]);
            }
            *i += 1;
        }
        b
    };
    let sql = |b: &[&str]| b.join("\n").trim().trim_end_matches(';').to_owned();
    let field = |b: &[&str], name: &str| -> anyhow::Result<String> {
        let p = format!("-- {name}:");
        b.iter()
            .find_map(|l| l.strip_prefix(&p))
            .map(|v| v.trim().to_owned())
            .with_context(|| format!("missing '-- {name}:'"))
    };
    while i < lines.len() {
        let Some(d) = lines[i].strip_prefix("-- @") else {
            i += 1;
            continue;
        };
        let d = d.to_owned();
        i += 1;
        let b = body(&mut i);
        let (word, rest) = d.split_once(' ').unwrap_or((d.as_str(), ""));
        steps.push(match word {
            "exec" => Step::Exec(sql(&b)),
            "pleroma" => Step::Pleroma(rest.trim().to_owned()),
            "pleroma-refused" => Step::PleromaRefused(rest.trim().to_owned()),
            "second" => Step::Second(sql(&b)),
            "process" => Step::Process(sql(&b)),
            "plain" => Step::Plain(sql(&b)),
            "standin" => Step::StandIn(sql(&b)),
            "append" => Step::Append(sql(&b)),
            "copy-refused" => Step::CopyRefused(sql(&b)),
            "reopen" => Step::Reopen,
            "backup" => Step::Backup,
            "restore" => Step::Restore,
            "check" | "reader" => {
                let (head, params) = match rest.split_once(" params: ") {
                    Some((h, p)) => (h, parse_params(p)?),
                    None => (rest, Vec::new()),
                };
                let mut w = head.split_whitespace();
                let class = w
                    .next()
                    .and_then(Class::parse)
                    .context("@check without a class")?;
                let order = match w.next().context("@check without an order")? {
                    "unordered" => Order::Unordered,
                    "total" => Order::Total,
                    "count" => Order::CountOnly,
                    k => Order::Keys(
                        k.strip_prefix("keys:")
                            .context("unknown order")?
                            .split(',')
                            .filter(|x| !x.is_empty())
                            .map(|x| x.parse())
                            .collect::<Result<_, _>>()?,
                    ),
                };
                let q = Query {
                    sql: sql(&b),
                    params,
                    class,
                    order,
                };
                if word == "reader" {
                    Step::Reader(q)
                } else {
                    Step::Check(q)
                }
            }
            "tlp" => {
                let mut group = Vec::new();
                let mut measure = String::new();
                for kv in rest.split_whitespace() {
                    match kv.split_once('=') {
                        Some(("group", g)) => {
                            group = g
                                .split(',')
                                .filter(|x| !x.is_empty())
                                .map(str::to_owned)
                                .collect()
                        }
                        Some(("measure", m)) => measure = m.to_owned(),
                        _ => bail!("unknown @tlp field {kv}"),
                    }
                }
                let base = field(&b, "base")?;
                Step::Tlp(Tlp {
                    group,
                    measure,
                    base: (!base.is_empty()).then_some(base),
                    p: field(&b, "p")?,
                    pnull: field(&b, "pnull")?,
                })
            }
            "norec" => Step::NoRec(field(&b, "p")?),
            other => bail!("unknown directive @{other}"),
        });
    }
    Ok(steps)
}

/// Parameters as SQL literals, read back by SQLite itself.
fn parse_params(list: &str) -> anyhow::Result<Vec<Value>> {
    let db = rusqlite::Connection::open_in_memory()?;
    let mut stmt = db.prepare(&format!("SELECT {list}"))?;
    let n = stmt.column_count();
    let row = stmt.query_row([], |r| {
        (0..n)
            .map(|i| r.get::<_, Value>(i))
            .collect::<rusqlite::Result<Vec<_>>>()
    })?;
    Ok(row)
}

/// A multi-row `INSERT ... VALUES` with half of its rows: the first half,
/// then the second (empty if the statement has fewer than two rows).
pub fn halve_values(s: &Step) -> Vec<Step> {
    let Step::Exec(sql) = s else {
        return Vec::new();
    };
    let Some(at) = sql.find(" VALUES (") else {
        return Vec::new();
    };
    // Rows with a function call (`abs(...)`) hold parentheses: not halved.
    if sql[at..].contains("abs(") {
        return Vec::new();
    }
    let (head, list) = sql.split_at(at + " VALUES ".len());
    let list = &list[1..];
    // Rows hold no parentheses: the list ends at the first ')' after the
    // last "), (".
    let Some(last_sep) = list.rfind("), (") else {
        return Vec::new();
    };
    let Some(end) = list[last_sep + 4..].find(')') else {
        return Vec::new();
    };
    let e = last_sep + 4 + end;
    let (list, tail) = (&list[..e], &list[e + 1..]);
    let rows: Vec<&str> = list.split("), (").collect();
    let (a, b) = rows.split_at(rows.len() / 2);
    [a, b]
        .iter()
        .map(|half| Step::Exec(format!("{head}({}){tail}", half.join("), ("))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproductions_read_back_as_written() {
        let (_, steps) = crate::gen::case(
            7,
            crate::gen::Size {
                rows: 20,
                blocks: 40,
            },
        );
        let text = write(&steps, "header");
        assert_eq!(parse(&text).unwrap(), steps);
    }

    #[test]
    fn halving_keeps_a_valid_insert() {
        let s = Step::Exec(
            "INSERT INTO t(a, b) VALUES (1, 'x y'), (2, NULL), (3, 4) ON CONFLICT(u) DO NOTHING"
                .into(),
        );
        assert_eq!(
            halve_values(&s),
            vec![
                Step::Exec(
                    "INSERT INTO t(a, b) VALUES (1, 'x y') ON CONFLICT(u) DO NOTHING".into()
                ),
                Step::Exec(
                    "INSERT INTO t(a, b) VALUES (2, NULL), (3, 4) ON CONFLICT(u) DO NOTHING".into()
                ),
            ]
        );
    }
}
