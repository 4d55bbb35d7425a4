//! The persisted-plane mutation that needs a writer without Pleroma turns a
//! seeded run red (its own test binary: a mutation is a process-wide
//! switch). The run: a file with a planed table and no trigger, a plain
//! SQLite connection's `DELETE FROM t` (SQLite's truncate shortcut, the one
//! write the guard lets through) at a seeded step between Pleroma writes,
//! and every answer of a Pleroma connection, open and reopened, compared
//! with SQLite's on the same file.

use pleroma::{Connection, Value};

fn answers(c: &mut Connection) -> Result<(), String> {
    for q in [
        "SELECT COUNT(*), SUM(m) FROM t",
        "SELECT g, COUNT(*), SUM(m) FROM t GROUP BY g ORDER BY g",
    ] {
        let got = c.query(q, &[]).map_err(|e| e.to_string())?.rows;
        let mut stmt = c.sqlite().prepare(q).map_err(|e| e.to_string())?;
        let n = stmt.column_count();
        let want: Vec<Vec<Value>> = stmt
            .query_map([], |r| (0..n).map(|i| r.get(i)).collect())
            .map_err(|e| e.to_string())?
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        if got != want {
            return Err(format!("{q}: plane {got:?}, SQLite {want:?}"));
        }
    }
    Ok(())
}

fn run(seed: u64) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("p.db");
    let mut c = Connection::open(&path).map_err(|e| e.to_string())?;
    c.execute_batch(
        "PRAGMA journal_mode = WAL; CREATE TABLE t(g TEXT, m INTEGER);
         PRAGMA pleroma_attach('t', 'g', 'm');",
    )
    .map_err(|e| e.to_string())?;
    let truncate_at = seed % 7;
    for step in 0..10u64 {
        c.execute(
            "INSERT INTO t VALUES (?1, ?2)",
            &[
                Value::Text(["a", "b", "c"][(step % 3) as usize].into()),
                Value::Integer((step * seed) as i64 % 50),
            ],
        )
        .map_err(|e| e.to_string())?;
        if step == truncate_at {
            let plain = rusqlite::Connection::open(&path).map_err(|e| e.to_string())?;
            plain
                .execute_batch("DELETE FROM t")
                .map_err(|e| e.to_string())?;
            answers(&mut c)?;
            // A new process's view of the file: opened from persisted state.
            let mut fresh = Connection::open(&path).map_err(|e| e.to_string())?;
            answers(&mut fresh)?;
        }
        answers(&mut c)?;
    }
    Ok(())
}

#[test]
fn every_persisted_plane_mutation_turns_a_run_with_a_plain_writer_red() {
    for seed in 1..4 {
        run(seed).unwrap_or_else(|e| panic!("seed {seed} without a mutation: {e}"));
    }
    let mut green = Vec::new();
    for &m in pleroma::mutation::PERSIST_MUTATIONS {
        pleroma::mutation::set(Some(m));
        let red = (1..4).any(|seed| run(seed).is_err());
        pleroma::mutation::set(None);
        println!("mutation {m}: {}", if red { "red" } else { "green" });
        if !red {
            green.push(m);
        }
    }
    assert!(
        green.is_empty(),
        "mutations this run does not catch: {green:?}"
    );
}
