//! Planes persisted in the database file: a new process opens them without
//! a rebuild, follows another process's commits by their deltas, never
//! trusts a state it cannot prove current (a plain SQLite writer, altered
//! bytes), and loses nothing to SIGKILL.
//!
//! "Another process" is this test binary again: a test re-runs itself with
//! `PLEROMA_CHILD` set, and the child test does the writing.

mod common;
use common::*;
use pleroma::{Connection, RouteKind, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

const SETUP: &str = "PRAGMA journal_mode = WAL;
    CREATE TABLE ev(id INTEGER PRIMARY KEY, device TEXT, country TEXT, cents INTEGER, note TEXT);
    PRAGMA pleroma_attach('ev', 'device, country', 'cents');";

const QUERIES: &[&str] = &[
    "SELECT SUM(cents) FROM ev WHERE device = 'web'",
    "SELECT device, country, COUNT(*), SUM(cents), MIN(cents), MAX(cents) FROM ev GROUP BY device, country ORDER BY device, country",
    "SELECT COUNT(*) FROM ev",
];

fn planes_col(c: &mut Connection, name: &str) -> Value {
    let p = c.query("PRAGMA pleroma_planes", &[]).unwrap();
    let i = p.columns.iter().position(|c| c == name).unwrap();
    p.rows[0][i].clone()
}

/// Every query on `c` equals plain SQLite's on the same file, served by
/// the plane.
fn check_all(c: &mut Connection, path: &Path) {
    let plain = rusqlite::Connection::open(path).unwrap();
    for q in QUERIES {
        let a = c.query(q, &[]).unwrap().rows;
        assert_eq!(
            c.last_route().kind,
            RouteKind::Plane,
            "{q}: {:?}",
            c.last_route()
        );
        assert_eq!(a, sqlite_rows(&plain, q, &[]).unwrap(), "{q}");
    }
}

fn fill(c: &mut Connection, from: i64, n: i64) {
    c.execute_batch("BEGIN").unwrap();
    for i in from..from + n {
        let device = ["web", "ios", "android"][(i % 3) as usize];
        let country = ["fr", "de", "us", "jp"][(i % 4) as usize];
        c.execute(
            "INSERT INTO ev(device, country, cents, note) VALUES (?1, ?2, ?3, 'x')",
            &[text(device), text(country), int(i * 7 - 300)],
        )
        .unwrap();
    }
    c.execute_batch("COMMIT").unwrap();
}

fn new_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let mut c = Connection::open(&path).unwrap();
    c.execute_batch(SETUP).unwrap();
    fill(&mut c, 0, 500);
    (dir, path)
}

/// Run the child test `name` of this binary on `path`.
fn child(name: &str, path: &Path, arg: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("PLEROMA_CHILD", path)
        .env("PLEROMA_CHILD_ARG", arg)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn child_env() -> Option<(PathBuf, String)> {
    let p = std::env::var_os("PLEROMA_CHILD")?;
    Some((
        p.into(),
        std::env::var("PLEROMA_CHILD_ARG").unwrap_or_default(),
    ))
}

#[test]
fn a_new_process_opens_from_the_persisted_state() {
    let (_d, path) = new_db();
    let mut c = Connection::open(&path).unwrap();
    check_all(&mut c, &path);
    assert_eq!(planes_col(&mut c, "rebuilds"), int(0));
}

/// Single-row writes leave a delta each until the deltas outweigh the
/// checkpoint; then one commit writes a checkpoint and drops the rows
/// before it. A new connection opens from whatever is there, exactly.
#[test]
fn deltas_are_compacted_into_a_checkpoint() {
    let (_d, path) = new_db();
    let mut c = Connection::open(&path).unwrap();
    let state = |c: &mut Connection| -> (i64, i64) {
        let r = c
            .query(
                "SELECT count(*), sum(kind = 'checkpoint') FROM pleroma_state",
                &[],
            )
            .unwrap();
        match (&r.rows[0][0], &r.rows[0][1]) {
            (Value::Integer(n), Value::Integer(k)) => (*n, *k),
            other => panic!("{other:?}"),
        }
    };
    let mut most = 0;
    let mut compacted = false;
    for i in 0..700 {
        c.execute(
            "INSERT INTO ev(device, country, cents, note) VALUES (?1, 'fr', ?2, 'x')",
            &[text(["web", "ios"][i % 2]), int(i as i64)],
        )
        .unwrap();
        let (rows, checkpoints) = state(&mut c);
        assert_eq!(checkpoints, 1, "one checkpoint, the deltas after it");
        compacted |= rows < most;
        most = most.max(rows);
        if i % 97 == 0 {
            let mut fresh = Connection::open(&path).unwrap();
            check_all(&mut fresh, &path);
            assert_eq!(planes_col(&mut fresh, "rebuilds"), int(0));
        }
    }
    assert!(compacted, "700 one-row deltas were never compacted");
    // A plane of a few cells: its checkpoint is small, so the floor decides
    // (`CHECKPOINT_FLOOR` over a delta's weight and bytes).
    assert!((100..=400).contains(&most), "{most} state rows at most");
    check_all(&mut c, &path);
}

/// The writer of the child tests: `arg` is "rows N" (N single-row
/// autocommit INSERTs), or "crash SEED" (writes until killed).
#[test]
fn child_writer() {
    let Some((path, arg)) = child_env() else {
        return;
    };
    let mut c = Connection::open(&path).unwrap();
    let mut words = arg.split(' ');
    match (
        words.next(),
        words.next().map(|n| n.parse::<u64>().unwrap()),
    ) {
        (Some("rows"), Some(n)) => {
            for i in 0..n as i64 {
                c.execute(
                    "INSERT INTO ev(device, country, cents, note) VALUES ('web', 'nz', ?1, 'c')",
                    &[int(i)],
                )
                .unwrap();
            }
        }
        (Some("crash"), Some(seed)) => crash_writer(&mut c, seed),
        _ => panic!("bad child argument {arg}"),
    }
}

#[test]
fn another_process_commit_is_followed_by_its_delta() {
    let (_d, path) = new_db();
    let mut c = Connection::open(&path).unwrap();
    check_all(&mut c, &path);
    assert!(child("child_writer", &path, "rows 3")
        .wait()
        .unwrap()
        .success());
    check_all(&mut c, &path);
    // And a transaction of the parent's own, then the child again.
    fill(&mut c, 1000, 20);
    assert!(child("child_writer", &path, "rows 2")
        .wait()
        .unwrap()
        .success());
    // `pleroma_planes` follows the child's commit before it counts (found
    // from outside: it showed the rows as of this connection's last query).
    let plain = rusqlite::Connection::open(&path).unwrap();
    let n: i64 = plain
        .query_row("SELECT count(*) FROM ev", [], |r| r.get(0))
        .unwrap();
    assert_eq!(planes_col(&mut c, "rows"), int(n));
    check_all(&mut c, &path);
    assert_eq!(
        planes_col(&mut c, "rebuilds"),
        int(0),
        "{:?}",
        planes_col(&mut c, "last_rebuild")
    );
    let mut fresh = Connection::open(&path).unwrap();
    check_all(&mut fresh, &path);
    assert_eq!(planes_col(&mut fresh, "rebuilds"), int(0));
}

#[test]
fn a_plain_sqlite_writer_cannot_change_a_planed_table() {
    let (_d, path) = new_db();
    let plain = rusqlite::Connection::open(&path).unwrap();
    for w in [
        "INSERT INTO ev(device, country, cents) VALUES ('web', 'fr', 1)",
        "DELETE FROM ev WHERE id = 3",
        "UPDATE ev SET cents = cents + 1 WHERE id = 4",
        "UPDATE ev SET device = 'tv'",
        "REPLACE INTO ev(id, device, country, cents) VALUES (1, 'web', 'fr', 1)",
        "UPDATE pleroma_state SET body = x'00'",
    ] {
        let e = plain.execute_batch(w).unwrap_err().to_string();
        assert!(e.contains("pleroma_guard"), "{w}: {e}");
    }
    // What does not touch a plane's columns still works.
    plain
        .execute_batch("UPDATE ev SET note = 'n' WHERE id < 10")
        .unwrap();
    plain
        .execute_batch("CREATE TABLE other(x); INSERT INTO other VALUES (1)")
        .unwrap();
    // A schema change outside Pleroma: the state is not trusted, rebuilt.
    let mut c = Connection::open(&path).unwrap();
    check_all(&mut c, &path);
    assert_eq!(planes_col(&mut c, "rebuilds"), int(1));
    assert_eq!(
        planes_col(&mut c, "last_rebuild"),
        text("the schema changed outside Pleroma")
    );
    // ... and persisted again: the next process opens without one.
    let mut d = Connection::open(&path).unwrap();
    check_all(&mut d, &path);
    assert_eq!(planes_col(&mut d, "rebuilds"), int(0));
}

#[test]
fn a_table_emptied_outside_pleroma_is_seen() {
    let (_d, path) = new_db();
    let mut c = Connection::open(&path).unwrap();
    check_all(&mut c, &path);
    // SQLite's truncate shortcut calls no function: the guard's one hole.
    let plain = rusqlite::Connection::open(&path).unwrap();
    plain.execute_batch("DELETE FROM ev").unwrap();
    // Seen by the open connection, and by a new one.
    check_all(&mut c, &path);
    assert_eq!(
        c.query("SELECT COUNT(*) FROM ev", &[]).unwrap().rows,
        vec![vec![int(0)]]
    );
    assert_eq!(
        planes_col(&mut c, "last_rebuild"),
        text("the table was emptied outside Pleroma")
    );
    let mut d = Connection::open(&path).unwrap();
    check_all(&mut d, &path);
}

#[test]
fn altered_persisted_bytes_are_never_trusted() {
    let (_d, path) = new_db();
    {
        // A program that registers a function of the guard's name, and
        // returns the secret it reads from the schema (the forgery no check
        // sees), can write the state table: flip one byte of the checkpoint.
        let plain = rusqlite::Connection::open(&path).unwrap();
        let sql: String = plain
            .query_row(
                "SELECT sql FROM sqlite_schema WHERE name = 'pleroma_guard_pleroma_state'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let secret: i64 = sql.rsplit(' ').next().unwrap().parse().unwrap();
        plain
            .create_scalar_function(
                "pleroma_guard",
                -1,
                rusqlite::functions::FunctionFlags::SQLITE_DETERMINISTIC,
                move |_| Ok(secret),
            )
            .unwrap();
        let body: Vec<u8> = plain
            .query_row(
                "SELECT body FROM pleroma_state ORDER BY seq LIMIT 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
        for (i, cut) in [(body.len() / 2, false), (0, true)] {
            let mut b = body.clone();
            if cut {
                b.truncate(b.len() - 9);
            } else {
                b[i] ^= 1;
            }
            plain
                .execute("UPDATE pleroma_state SET body = ?1 WHERE seq = (SELECT min(seq) FROM pleroma_state)", [b])
                .unwrap();
            let mut c = Connection::open(&path).unwrap();
            check_all(&mut c, &path);
            assert_eq!(planes_col(&mut c, "rebuilds"), int(1));
            assert_eq!(
                planes_col(&mut c, "last_rebuild"),
                text("the persisted state failed its checksum")
            );
            drop(c);
        }
    }
}

#[test]
fn rolled_back_and_failed_writes_persist_nothing() {
    let (_d, path) = new_db();
    let mut c = Connection::open(&path).unwrap();
    c.execute_batch(
        "BEGIN; INSERT INTO ev(device, country, cents) VALUES ('web', 'fr', 1000000); ROLLBACK",
    )
    .unwrap();
    c.execute_batch("CREATE UNIQUE INDEX ev_cents ON ev(cents)")
        .unwrap_or(());
    // A multi-row INSERT that fails halfway (ABORT): nothing stays.
    let e = c.execute_batch("INSERT INTO ev(device, country, cents) VALUES ('ios', 'fr', 123456), ('ios', 'fr', 123456)");
    assert!(e.is_err());
    // OR FAIL keeps the rows before the failing one, as in autocommit.
    let e = c.execute_batch("INSERT OR FAIL INTO ev(device, country, cents) VALUES ('tv', 'fr', 777777), ('tv', 'fr', 777777)");
    assert!(e.is_err());
    check_all(&mut c, &path);
    let mut d = Connection::open(&path).unwrap();
    check_all(&mut d, &path);
    assert_eq!(
        planes_col(&mut d, "rebuilds"),
        int(0),
        "{:?}",
        planes_col(&mut d, "last_rebuild")
    );
}

/// SIGKILL to this process, now (no destructor, no rollback, no close).
fn kill_me() -> ! {
    let _ = Command::new("kill")
        .args(["-KILL", &std::process::id().to_string()])
        .status();
    loop {
        std::thread::park();
    }
}

/// Seeded writes of every kind; at a seeded step the process kills itself
/// with SIGKILL: between statements, or inside an open transaction.
fn crash_writer(c: &mut Connection, seed: u64) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let kill_at = next() % 120;
    for step in 0.. {
        let r = next();
        let dying = step == kill_at;
        let dev = ["web", "ios", "tv"][(r % 3) as usize];
        let cents = (r >> 8) as i64 % 10_000 - 2_000;
        match r % 5 {
            0 => {
                if dying {
                    kill_me();
                }
                c.execute(
                    "INSERT INTO ev(device, country, cents) VALUES (?1, 'k', ?2)",
                    &[text(dev), int(cents)],
                )
                .unwrap();
            }
            1 => {
                c.execute_batch(&format!(
                    "BEGIN; INSERT INTO ev(device, country, cents) VALUES ('{dev}', 'b', {cents});"
                ))
                .unwrap();
                if dying {
                    kill_me();
                }
                c.execute_batch(&format!(
                    "UPDATE ev SET cents = cents + 1 WHERE id % 17 = {}; COMMIT",
                    r % 17
                ))
                .unwrap();
            }
            2 => {
                if dying {
                    kill_me();
                }
                c.execute_batch(&format!(
                    "DELETE FROM ev WHERE id IN (SELECT id FROM ev ORDER BY id LIMIT 1 OFFSET {})",
                    r % 50
                ))
                .unwrap();
            }
            3 => {
                c.execute_batch(&format!(
                    "BEGIN; INSERT INTO ev(device, country, cents) SELECT device, country, cents + {cents} FROM ev WHERE id % 29 = {};",
                    r % 29
                ))
                .unwrap();
                if dying {
                    kill_me();
                }
                c.execute_batch("COMMIT").unwrap();
            }
            _ => {
                c.execute_batch(&format!(
                    "BEGIN; INSERT INTO ev(device, country, cents) VALUES ('{dev}', 'open', {cents})"
                ))
                .unwrap();
                if dying {
                    kill_me();
                }
                c.execute_batch("ROLLBACK").unwrap();
            }
        }
    }
}

#[test]
fn sigkill_at_seeded_points_loses_nothing() {
    let trials: u64 = std::env::var("PLEROMA_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let (_d, path) = new_db();
    for t in 0..trials {
        let status = child("child_writer", &path, &format!("crash {}", t + 1))
            .wait()
            .unwrap();
        assert!(!status.success(), "trial {t}: the child was not killed");
        let mut c = Connection::open(&path).unwrap();
        check_all(&mut c, &path);
        assert_eq!(
            planes_col(&mut c, "rebuilds"),
            int(0),
            "trial {t}: {:?}",
            planes_col(&mut c, "last_rebuild")
        );
    }
}

#[test]
fn a_backup_taken_while_a_writer_runs_opens_exact_without_a_rebuild() {
    assert!(
        Command::new("sqlite3").arg("-version").output().is_ok(),
        "the sqlite3 program is not on PATH: install it (Debian/Ubuntu: apt-get install sqlite3) \
         or run the README's test command, bash scripts/test.sh, which does"
    );
    let (d, path) = new_db();
    let copy = d.path().join("copy.db");
    let mut w = child("child_writer", &path, "rows 400");
    // SQLite's online backup API, as a replica receives the file: `.backup`
    // of the sqlite3 program, a few times while the writer commits.
    for _ in 0..3 {
        let out = Command::new("sqlite3")
            .arg(&path)
            .arg(format!(".backup '{}'", copy.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(w.wait().unwrap().success());
    let mut c = Connection::open(&copy).unwrap();
    check_all(&mut c, &copy);
    assert_eq!(
        planes_col(&mut c, "rebuilds"),
        int(0),
        "{:?}",
        planes_col(&mut c, "last_rebuild")
    );
}

#[test]
fn persistence_turned_off_and_on_elsewhere_is_followed() {
    let (_d, path) = new_db();
    let mut a = Connection::open(&path).unwrap();
    check_all(&mut a, &path);
    let mut b = Connection::open(&path).unwrap();
    b.execute_batch("PRAGMA pleroma_persist = off").unwrap();
    drop(b);
    // `a` follows the setting: its write persists nothing, and no guard
    // comes back, so a plain program can write.
    a.execute(
        "INSERT INTO ev(device, country, cents) VALUES ('web', 'fr', 5)",
        &[],
    )
    .unwrap();
    check_all(&mut a, &path);
    let plain = rusqlite::Connection::open(&path).unwrap();
    plain
        .execute_batch("INSERT INTO ev(device, country, cents) VALUES ('web', 'fr', 6)")
        .unwrap();
    check_all(&mut a, &path);
    assert_eq!(
        a.query("PRAGMA pleroma_persist", &[]).unwrap().rows,
        vec![vec![text("off")]]
    );
    // Turned on again elsewhere: `a`'s next write is refused by the new
    // guard (it would commit without the state row), `a` opens the planes
    // again and runs it once more, persisted from then on.
    let mut b = Connection::open(&path).unwrap();
    b.execute_batch("PRAGMA pleroma_persist = on").unwrap();
    drop(b);
    let w = "INSERT INTO ev(device, country, cents) VALUES ('ios', 'de', 7)";
    a.execute(w, &[]).unwrap();
    check_all(&mut a, &path);
    let mut fresh = Connection::open(&path).unwrap();
    check_all(&mut fresh, &path);
    assert_eq!(planes_col(&mut fresh, "rebuilds"), int(0));
}

/// A RELEASE inside a transaction writes a state row; the transaction's
/// final state (here: back to the committed one, so COMMIT writes no row,
/// and once after a COMMIT that failed on a deferred foreign key) must
/// replace or remove it: a new process opens exact, without a rebuild.
#[test]
fn a_release_time_row_never_outlives_its_transaction() {
    let (_d, path) = new_db();
    let mut c = Connection::open(&path).unwrap();
    c.execute_batch(
        "CREATE TABLE par(id INTEGER PRIMARY KEY);
         CREATE TABLE ch(pid INTEGER REFERENCES par(id) DEFERRABLE INITIALLY DEFERRED);
         PRAGMA foreign_keys = ON;
         BEGIN;
         INSERT INTO ev(device, country, cents, note) VALUES ('web', 'fr', 100000, 'x');
         SAVEPOINT s; RELEASE s;
         DELETE FROM ev WHERE cents = 100000;
         COMMIT;",
    )
    .unwrap();
    c.execute_batch(
        "BEGIN; INSERT INTO ev(device, country, cents, note) VALUES ('ios', 'de', 7777, 'x');
         INSERT INTO ch VALUES (42);",
    )
    .unwrap();
    assert!(c.execute("COMMIT", &[]).is_err(), "the deferred key fails");
    c.execute_batch("DELETE FROM ch; DELETE FROM ev WHERE cents = 7777; COMMIT;")
        .unwrap();
    drop(c);
    let mut c = Connection::open(&path).unwrap();
    assert_eq!(planes_col(&mut c, "last_rebuild"), Value::Null);
    check_all(&mut c, &path);
}

/// A program that registers its own `pleroma_guard` (returning a constant)
/// writes a guarded table: its rows land in the guard index, and the next
/// open rebuilds and says why, then persists clean guards again.
#[test]
fn a_stand_in_for_the_guard_function_is_seen() {
    let (_d, path) = new_db();
    for ret in [Some(1i64), None] {
        let plain = rusqlite::Connection::open(&path).unwrap();
        plain
            .create_scalar_function(
                "pleroma_guard",
                -1,
                rusqlite::functions::FunctionFlags::SQLITE_UTF8
                    | rusqlite::functions::FunctionFlags::SQLITE_DETERMINISTIC,
                move |_| Ok(ret),
            )
            .unwrap();
        plain
            .execute(
                "INSERT INTO ev(device, country, cents, note) VALUES ('web', 'us', 123456, 'x')",
                [],
            )
            .unwrap();
        // An UPDATE or DELETE through the stand-in fails SQLite's own index
        // check, or leaves rows in the index too: either way no silent write.
        let _ = plain.execute("UPDATE ev SET cents = cents + 1 WHERE device = 'ios'", []);
        drop(plain);
        let mut c = Connection::open(&path).unwrap();
        let why = planes_col(&mut c, "last_rebuild");
        assert!(
            matches!(&why, Value::Text(t) if t.contains("guard")),
            "{why:?}"
        );
        check_all(&mut c, &path);
        drop(c);
        let mut c = Connection::open(&path).unwrap();
        assert_eq!(
            planes_col(&mut c, "last_rebuild"),
            Value::Null,
            "clean again"
        );
        check_all(&mut c, &path);
    }
}

/// A Pleroma connection writes only the persisted file it persists for:
/// another persisted file attached to it, and its own file attached again
/// through a hard link, are refused (SQLite keeps nothing), so both files
/// still open exact from their state.
#[test]
fn the_guard_passes_only_writes_persisted_for_that_file() {
    let (d, path) = new_db();
    let other = d.path().join("other.db");
    let mut o = Connection::open(&other).unwrap();
    o.execute_batch(SETUP).unwrap();
    fill(&mut o, 0, 50);
    drop(o);
    let link = d.path().join("link.db");
    std::fs::hard_link(&path, &link).unwrap();
    let mut c = Connection::open(&path).unwrap();
    c.execute(&format!("ATTACH '{}' AS o", other.display()), &[])
        .unwrap();
    c.execute(&format!("ATTACH '{}' AS l", link.display()), &[])
        .unwrap();
    for w in [
        "INSERT INTO o.ev(device, country, cents, note) VALUES ('web', 'fr', 5, 'x')",
        "DELETE FROM o.ev WHERE device = 'web'",
        "INSERT INTO l.ev(device, country, cents, note) VALUES ('web', 'fr', 5, 'x')",
    ] {
        assert!(c.execute(w, &[]).is_err(), "{w}");
    }
    c.execute_batch("BEGIN").unwrap();
    assert!(c
        .execute(
            "INSERT INTO l.ev(device, country, cents, note) VALUES ('web', 'fr', 5, 'x')",
            &[]
        )
        .is_err());
    c.execute_batch("COMMIT").unwrap();
    drop(c);
    for p in [&path, &other] {
        let mut c = Connection::open(p).unwrap();
        assert_eq!(planes_col(&mut c, "last_rebuild"), Value::Null);
        check_all(&mut c, p);
    }
}

/// A copy of the main file (a backup, a copied file) has the main file's
/// guard keys, so the guard would pass writes into it that no state row of
/// its own follows. While one is attached, the guard passes nothing; after
/// DETACH the main file is written as before, and the copy opens exact.
#[test]
fn a_copy_of_the_main_file_attached_is_never_written_unpersisted() {
    let (d, path) = new_db();
    let copy = d.path().join("copy.db");
    std::fs::copy(&path, &copy).unwrap();
    let mut c = Connection::open(&path).unwrap();
    c.execute(&format!("ATTACH '{}' AS k", copy.display()), &[])
        .unwrap();
    let w = "INSERT INTO k.ev(device, country, cents, note) VALUES ('web', 'fr', 5, 'x')";
    assert!(c.execute(w, &[]).is_err(), "{w}");
    c.execute_batch("BEGIN").unwrap();
    assert!(c.execute(w, &[]).is_err(), "{w} in a transaction");
    c.execute_batch("COMMIT").unwrap();
    c.execute("DETACH k", &[]).unwrap();
    c.execute(
        "INSERT INTO ev(device, country, cents, note) VALUES ('ios', 'de', 7, 'y')",
        &[],
    )
    .unwrap();
    drop(c);
    for p in [&path, &copy] {
        let mut c = Connection::open(p).unwrap();
        assert_eq!(planes_col(&mut c, "last_rebuild"), Value::Null);
        check_all(&mut c, p);
    }
}
