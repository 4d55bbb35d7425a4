//! The guards: per planed table, a partial index whose WHERE calls a
//! function only Pleroma registers (`pleroma_guard`), so that a writer
//! without Pleroma fails instead of changing rows the persisted state
//! describes; the file's guard keys; the checks an open or a follow makes
//! that every guard is in place and empty (and a table emptied outside
//! Pleroma seen by a one-row probe).

use super::*;

/// The function the guard indexes call: only Pleroma connections have it.
pub(crate) const GUARD_FN: &str = "pleroma_guard";
/// What the guard function lets through on one connection.
#[derive(Default)]
pub(crate) struct Guard {
    /// Pleroma is running a statement whose writes it persists. Outside
    /// that (a write through `Connection::sqlite()`, or persistence turned
    /// off here while another connection turned it on) a write to a
    /// guarded table fails before it changes anything.
    pub allow: AtomicBool,
    /// The guard refused a write since this was last cleared.
    pub refused: AtomicBool,
    /// The main file's guard keys (0: none known): its guards pass `id` as
    /// the first argument, and a row stays out of a guard index only when
    /// the function returns `secret`, which only this function does, and
    /// only for the file whose writes this connection persists.
    pub id: AtomicI64,
    pub secret: AtomicI64,
    /// The guards last found in place as Pleroma wrote them, and at which
    /// `schema_version` ([`guards_ok`]).
    checked: std::sync::Mutex<Option<Checked>>,
}

/// Guards in place at a schema version, for a set of definitions.
struct Checked {
    version: i64,
    defs: Vec<Arc<PlaneDef>>,
    keys: (i64, i64),
    specs: Vec<GuardSpec>,
}

impl Guard {
    pub(crate) fn set_keys(&self, keys: Option<(i64, i64)>) {
        let (id, secret) = keys.unwrap_or((0, 0));
        self.id.store(id, Ordering::Relaxed);
        self.secret.store(secret, Ordering::Relaxed);
    }

    /// Pleroma's own writes of the state row: allowed while `f` runs.
    pub(super) fn allowing<T>(&self, f: impl FnOnce() -> T) -> T {
        let was = self.allow.swap(true, Ordering::Relaxed);
        let r = f();
        self.allow.store(was, Ordering::Relaxed);
        r
    }
}

/// Register the guard function on a Pleroma connection. Deterministic (a
/// partial index needs that) and innocuous (so `trusted_schema = OFF`
/// still lets the schema call it). A guard reads `WHERE pleroma_guard(id,
/// cols…) IS NOT secret`: it returns the file's secret only for a write
/// this connection persists for that very file (`id`), so no such row is
/// ever in a guard index, and any stand-in that returns anything else puts
/// the rows it writes into the index (or fails an `UPDATE`/`DELETE` with
/// SQLite's index-corruption check), which open and follow see.
pub(crate) fn register_guard(db: &rusqlite::Connection, g: Arc<Guard>) -> rusqlite::Result<()> {
    db.create_scalar_function(
        GUARD_FN,
        -1,
        FunctionFlags::SQLITE_UTF8
            | FunctionFlags::SQLITE_DETERMINISTIC
            | FunctionFlags::SQLITE_INNOCUOUS,
        move |ctx| {
            let id = if ctx.is_empty() {
                None
            } else {
                ctx.get_raw(0).as_i64().ok()
            };
            let known = g.id.load(Ordering::Relaxed);
            let this_file = known != 0 && id == Some(known);
            if g.allow.load(Ordering::Relaxed)
                && (this_file || crate::mutation::active(Mutation::GuardPassesAnyFile))
            {
                return Ok(g.secret.load(Ordering::Relaxed));
            }
            g.refused.store(true, Ordering::Relaxed);
            Err(rusqlite::Error::UserFunctionError(
                "pleroma_guard: this table has a persisted plane, and this write would bypass it: \
                 write through pleroma::Connection::execute (not Connection::sqlite()) on a \
                 connection opened on this very file (a write into another attached file with \
                 persisted planes, or into the main file through a second name or into a copy of it, is refused)"
                    .into(),
            ))
        },
    )
}

/// The guard of one table: its index name and its statement.
pub(super) fn guard_of(table: &str, columns: &[&str], (id, secret): (i64, i64)) -> GuardSpec {
    let name = format!("pleroma_guard_{table}");
    let cols = columns
        .iter()
        .map(|c| quote(c))
        .collect::<Vec<_>>()
        .join(", ");
    let cond = format!("{GUARD_FN}({id}, {cols}) IS NOT {secret}");
    let sql = format!(
        "CREATE INDEX {} ON {}({}) WHERE {cond}",
        quote(&name),
        quote(table),
        quote(columns[0]),
    );
    let probe = format!(
        "SELECT 1 FROM main.{} INDEXED BY {} WHERE {cond} LIMIT 1",
        quote(table),
        quote(&name)
    );
    GuardSpec { name, sql, probe }
}

/// A guard as Pleroma makes it: its name, its `CREATE INDEX`, and the
/// probe that reads whether it holds an entry ([`guard_empty`]).
pub(super) struct GuardSpec {
    pub name: String,
    pub sql: String,
    probe: String,
}

/// The guards the planes need: one per planed table (and the state table
/// itself), over every column a plane of that table reads.
pub(super) fn guards_needed<'a>(
    defs: impl Iterator<Item = &'a PlaneDef>,
    keys: (i64, i64),
) -> Vec<GuardSpec> {
    let mut tables: Vec<(String, Vec<&str>)> = Vec::new();
    for def in defs {
        let cols = def.columns_read().into_iter();
        match tables
            .iter_mut()
            .find(|(t, _)| t.eq_ignore_ascii_case(&def.table))
        {
            Some((_, cs)) => {
                for c in cols {
                    if !cs.iter().any(|x| x.eq_ignore_ascii_case(c)) {
                        cs.push(c);
                    }
                }
            }
            None => tables.push((def.table.clone(), cols.collect())),
        }
    }
    let mut out: Vec<_> = tables
        .iter()
        .filter(|(_, cs)| !cs.is_empty())
        .map(|(t, cs)| guard_of(t, cs, keys))
        .collect();
    out.push(guard_of(
        STATE,
        &["seq", "kind", "schema_version", "schema_hash", "body"],
        keys,
    ));
    out
}

/// The file's guard keys, as its state table's guard records them.
pub(crate) fn file_keys(db: &rusqlite::Connection) -> rusqlite::Result<Option<(i64, i64)>> {
    file_keys_in(db, "main")
}

/// The guard keys of the file attached as `schema`.
pub(crate) fn file_keys_in(
    db: &rusqlite::Connection,
    schema: &str,
) -> rusqlite::Result<Option<(i64, i64)>> {
    let name = format!("pleroma_guard_{STATE}");
    let Some(Some(sql)) = object_sql_in(db, schema, &name)? else {
        return Ok(None);
    };
    let num = |s: &str| -> Option<i64> {
        let d: String = s.chars().take_while(char::is_ascii_digit).collect();
        d.parse().ok().filter(|&n: &i64| n > 0)
    };
    let id = sql
        .find(&format!("{GUARD_FN}("))
        .and_then(|i| num(&sql[i + GUARD_FN.len() + 1..]));
    let secret = sql.rfind(" IS NOT ").and_then(|i| num(&sql[i + 8..]));
    Ok(id.zip(secret))
}

/// Fresh keys for a file that has no guard: random, positive.
pub(super) fn new_keys() -> (i64, i64) {
    use std::hash::BuildHasher;
    let r = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        (h.finish() & (i64::MAX as u64)).max(1) as i64
    };
    (r(), r())
}

/// Whether a guard index (in place as `g.sql` says) holds no entry. The
/// probe scans the index itself: its WHERE is the index's own, so SQLite
/// uses the partial index and codes no test of that term
/// (`whereApplyPartialIndexConstraints`): the program is the index's
/// `Rewind`/`Next`, reads no table row and calls no function, so an entry
/// whose row is gone is found too (test `the_guard_probe_reads_only_the_index`).
/// An error reads as an entry (the state is then not trusted). Before, one
/// page of `dbstat`, which prepares a query of the schema at each use:
/// about 64,000 instructions a guard, twice per follow.
pub(super) fn guard_empty(db: &rusqlite::Connection, g: &GuardSpec) -> bool {
    let found = db.prepare_cached(&g.probe).and_then(|mut st| st.exists([]));
    matches!(found, Ok(false))
}

/// The state table and every guard, created or brought up to date (a
/// guard with an entry in it is made again). Inside the caller's write
/// transaction.
pub(super) fn ensure_schema(
    db: &rusqlite::Connection,
    views: &[View],
    guard: &Guard,
) -> rusqlite::Result<()> {
    let keys = match file_keys(db)? {
        Some(k) => k,
        None => new_keys(),
    };
    guard.set_keys(Some(keys));
    crate::user_counters::schema_statement(
        db,
        &format!(
            "CREATE TABLE IF NOT EXISTS main.{STATE}(seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, \
         schema_version INTEGER NOT NULL, schema_hash INTEGER NOT NULL, body BLOB NOT NULL)"
        ),
    )?;
    for g in guards_needed(views.iter().filter(|v| !v.broken).map(|v| &*v.def), keys) {
        match object_sql(db, &g.name)? {
            Some(Some(s)) if s == g.sql && guard_empty(db, &g) => continue,
            Some(_) => crate::user_counters::schema_statement(
                db,
                &format!("DROP INDEX main.{}", quote(&g.name)),
            )?,
            None => {}
        }
        // The guard goes into the schema the table is in: main (a TEMP
        // table of the same name puts the plane out of service anyway).
        crate::user_counters::schema_statement(
            db,
            &g.sql.replacen("CREATE INDEX ", "CREATE INDEX main.", 1),
        )?;
    }
    Ok(())
}

/// Whether every guard is in place as Pleroma wrote it (`Err`: which
/// check failed), and empty: no write passed it but Pleroma's. `version`:
/// the file's `schema_version` now.
///
/// Which guards are in place is read from the schema once per schema
/// version and set of planes: every DDL moves `schema_version`, so at the
/// version where the guards' text (and the keys in it) was found as
/// Pleroma writes it, it still is (a `schema_version` set back by hand is
/// the limit of `docs/design.md`, "Persistent planes", which no check
/// sees). Whether each is empty is asked at every call: a write past a
/// guard moves no schema version.
pub(super) fn guards_ok(
    db: &rusqlite::Connection,
    planes: &Planes,
    guard: &Guard,
    version: i64,
) -> Result<(), Untrusted> {
    let defs: Vec<Arc<PlaneDef>> = planes
        .entries
        .iter()
        .filter(|e| e.broken.is_none())
        .map(|e| e.def.clone())
        .collect();
    let mut checked = guard.checked.lock().unwrap_or_else(|e| e.into_inner());
    let same = checked.as_ref().is_some_and(|c| {
        c.version == version
            && c.defs.len() == defs.len()
            && c.defs
                .iter()
                .zip(&defs)
                .all(|(a, b)| Arc::ptr_eq(a, b) || a == b)
    });
    if !same {
        *checked = None;
        let keys = file_keys(db)?;
        guard.set_keys(keys);
        let Some(keys) = keys else {
            return Err(Rebuild::GuardMissing.into());
        };
        let specs = guards_needed(defs.iter().map(|d| &**d), keys);
        for g in &specs {
            let stored = object_sql(db, &g.name)?.flatten();
            let want = g.sql.replacen("CREATE INDEX ", "CREATE INDEX main.", 1);
            if stored.as_deref() != Some(g.sql.as_str()) && stored.as_deref() != Some(want.as_str())
            {
                return Err(Rebuild::GuardMissing.into());
            }
        }
        *checked = Some(Checked {
            version,
            defs,
            keys,
            specs,
        });
    }
    let c = checked.as_ref().expect("checked above");
    guard.set_keys(Some(c.keys));
    for g in &c.specs {
        if !crate::mutation::active(Mutation::GuardIndexUnchecked) && !guard_empty(db, g) {
            return Err(Rebuild::GuardBypassed.into());
        }
    }
    Ok(())
}

/// Before an `ALTER TABLE`: drop every guard (SQLite refuses to drop or
/// rename a column an index uses). The state row of the transaction puts
/// them back for every plane still in service.
pub(crate) fn drop_guards(db: &rusqlite::Connection) -> rusqlite::Result<()> {
    let guards: Vec<String> = db
        .prepare_cached(
            "SELECT name FROM main.sqlite_schema WHERE type = 'index' \
             AND name LIKE 'pleroma\\_guard\\_%' ESCAPE '\\' AND tbl_name <> 'pleroma_state' \
             AND sql LIKE '%pleroma_guard(%'",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for g in guards {
        crate::user_counters::schema_statement(db, &format!("DROP INDEX main.{}", quote(&g)))?;
    }
    Ok(())
}

/// Why Pleroma cannot keep `table`'s persisted state in this file: a user
/// object holds a name it needs (found from outside: a user table named
/// `pleroma_state` made the file unopenable after an attach, one named
/// `pleroma_guard_t` failed every later INSERT into `t`).
pub(crate) fn names_taken(
    db: &rusqlite::Connection,
    table: &str,
) -> rusqlite::Result<Option<String>> {
    let kind = |name: &str| -> rusqlite::Result<Option<(String, String)>> {
        db.prepare_cached(
            "SELECT type, tbl_name FROM main.sqlite_schema WHERE name = ?1 COLLATE NOCASE",
        )?
        .query_row([name], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
    };
    if let Some((t, _)) = kind(STATE)? {
        if state_is_ours(db)? != Some(true) {
            return Ok(Some(format!(
                "the {t} {STATE} is not Pleroma's, which keeps the planes' state under that name; \
                 rename it, or PRAGMA pleroma_persist = off"
            )));
        }
    }
    for (g, of) in [
        (format!("pleroma_guard_{table}"), table),
        (format!("pleroma_guard_{STATE}"), STATE),
    ] {
        if kind(&g)?.is_some() && !is_guard(db, &g, of)? {
            let t = kind(&g)?.map(|k| k.0).unwrap_or_default();
            return Ok(Some(format!(
                "the {t} {g} is not Pleroma's, which guards {of} under that name; \
                 rename it, or PRAGMA pleroma_persist = off"
            )));
        }
    }
    Ok(None)
}

/// Whether the object `name` is a guard Pleroma made on `table`: an index
/// of it whose WHERE calls the guard function (found from outside: a
/// user's index of that name was dropped as if it were one).
pub(crate) fn is_guard(
    db: &rusqlite::Connection,
    name: &str,
    table: &str,
) -> rusqlite::Result<bool> {
    let row: Option<(String, String, Option<String>)> = db
        .prepare_cached(
            "SELECT type, tbl_name, sql FROM main.sqlite_schema WHERE name = ?1 COLLATE NOCASE",
        )?
        .query_row([name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    Ok(row.is_some_and(|(t, on, sql)| {
        t == "index"
            && on.eq_ignore_ascii_case(table)
            && sql.is_some_and(|s| s.contains(&format!("{GUARD_FN}(")))
    }))
}

/// Whether main's `pleroma_state` is Pleroma's: a table with the state's
/// columns (`None`: there is none).
pub(crate) fn state_is_ours(db: &rusqlite::Connection) -> rusqlite::Result<Option<bool>> {
    let t: Option<String> = db
        .prepare_cached("SELECT type FROM main.sqlite_schema WHERE name = ?1 COLLATE NOCASE")?
        .query_row([STATE], |r| r.get(0))
        .optional()?;
    let Some(t) = t else {
        return Ok(None);
    };
    let cols: Vec<String> = db
        .prepare_cached("SELECT name FROM pragma_table_info(?1, 'main')")?
        .query_map([STATE], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(Some(
        t == "table" && cols == ["seq", "kind", "schema_version", "schema_hash", "body"],
    ))
}

/// Drop the guard of a table that no longer has a plane.
pub(crate) fn drop_guard(db: &rusqlite::Connection, table: &str) -> rusqlite::Result<()> {
    let name = format!("pleroma_guard_{table}");
    if is_guard(db, &name, table)? {
        crate::user_counters::schema_statement(db, &format!("DROP INDEX main.{}", quote(&name)))?;
    }
    Ok(())
}

/// Whether the table has a row (one index step; the probe for a `DELETE`
/// without `WHERE` outside Pleroma, the one write the guard lets through).
pub(super) fn has_rows(db: &rusqlite::Connection, table: &str) -> rusqlite::Result<bool> {
    db.prepare_cached(&format!("SELECT 1 FROM main.{} LIMIT 1", quote(table)))?
        .exists([])
}

/// Every plane's row count agrees with whether its table has rows.
pub(super) fn probes_ok(db: &rusqlite::Connection, planes: &Planes) -> rusqlite::Result<bool> {
    for e in &planes.entries {
        if e.broken.is_some() || e.plane.fault().is_some() {
            continue;
        }
        if has_rows(db, &e.def.table)? != (e.plane.rows() > 0) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The attached files, other than main and its aliases, whose guard keys are
/// main's (see `Planes::main_copies`).
pub(crate) fn main_copies(
    db: &rusqlite::Connection,
    aliases: &[String],
) -> rusqlite::Result<Vec<String>> {
    let Some(keys) = file_keys(db)? else {
        return Ok(Vec::new());
    };
    let schemas: Vec<String> = db
        .prepare("SELECT name FROM pragma_database_list WHERE name NOT IN ('main', 'temp')")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut out = Vec::new();
    for s in schemas {
        if aliases.iter().any(|a| a.eq_ignore_ascii_case(&s)) {
            continue;
        }
        if file_keys_in(db, &s)? == Some(keys) {
            out.push(s);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// With the bundled SQLite, the probe scans the guard index alone: it
    /// calls no function, reads no table row, and finds an entry whose row
    /// is gone (what a stand-in's write leaves behind).
    #[test]
    fn the_guard_probe_reads_only_the_index() {
        let db = rusqlite::Connection::open_in_memory().unwrap();
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        static SECRET: AtomicUsize = AtomicUsize::new(1);
        db.create_scalar_function(
            GUARD_FN,
            -1,
            rusqlite::functions::FunctionFlags::SQLITE_UTF8
                | rusqlite::functions::FunctionFlags::SQLITE_DETERMINISTIC,
            |_| {
                CALLS.fetch_add(1, Ordering::SeqCst);
                Ok(SECRET.load(Ordering::SeqCst) as i64)
            },
        )
        .unwrap();
        db.execute_batch("CREATE TABLE \"t x\"(id INTEGER PRIMARY KEY, a, \"b c\", d)")
            .unwrap();
        let g = guard_of("t x", &["a", "b c", "d"], (7, 1));
        db.execute_batch(&g.sql).unwrap();
        for i in 0..50 {
            db.execute(
                "INSERT INTO \"t x\"(a, \"b c\", d) VALUES (?1, ?1, ?1)",
                [i],
            )
            .unwrap();
        }
        let plan: String = db
            .query_row(&format!("EXPLAIN QUERY PLAN {}", g.probe), [], |r| r.get(3))
            .unwrap();
        assert!(plan.contains("pleroma_guard_t x"), "{plan}");
        CALLS.store(0, Ordering::SeqCst);
        assert!(guard_empty(&db, &g));
        // A stand-in: the function says "not the secret", the row goes into
        // the index; then the secret again, and the row is deleted without
        // its entry.
        SECRET.store(2, Ordering::SeqCst);
        db.execute("INSERT INTO \"t x\"(id, a) VALUES (1000, 1)", [])
            .unwrap();
        SECRET.store(1, Ordering::SeqCst);
        CALLS.store(0, Ordering::SeqCst);
        assert!(!guard_empty(&db, &g));
        assert_eq!(
            CALLS.load(Ordering::SeqCst),
            0,
            "the probe called the function"
        );
        db.execute("DELETE FROM \"t x\" WHERE id = 1000", [])
            .unwrap();
        assert!(!guard_empty(&db, &g));
        assert_eq!(CALLS.load(Ordering::SeqCst), 1, "only the DELETE called it");
    }
}
