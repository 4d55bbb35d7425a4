//! The planes of one database file, shared by every Pleroma connection that
//! this process opens on it.
//!
//! Each connection keeps its own working copy of the planes (the hook feeds
//! it, so a writer sees its own uncommitted writes and nobody else does).
//! After a commit, a connection *publishes* an O(1) snapshot of its planes,
//! tagged with the identity of the committed state it describes: the
//! `sqlite3_snapshot` of a read transaction opened right after the commit
//! (see [`WalSnapshot`]). Another connection whose `data_version` moved
//! *adopts* the published planes, instead of rebuilding them from the
//! table, only when the state its own SQLite read transaction shows has
//! that same identity. The argument why a published state is exact for its
//! identity is in `docs/design.md` ("Shared planes").
//!
//! Readers take no lock: the history of published states sits behind an
//! `ArcSwap`, and loading it is one atomic operation.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use arc_swap::ArcSwap;

use pleroma_plane::{Plane, PlaneConfig};

use crate::catalog::PlaneEntry;
use crate::ffi::WalSnapshot;
use crate::persist::Mark;
use crate::planes::PublishedEntry;

/// How many published states a reader can still find: a read transaction
/// pinned a little before the newest commit adopts the state it pinned.
const HISTORY: usize = 8;

/// The planes of one committed state of the file.
pub(crate) struct Published {
    pub id: WalSnapshot,
    pub entries: Vec<PublishedEntry>,
    /// Where this state stands in the persisted log.
    pub mark: Mark,
}

/// What a connection's `data_version` change resolves to.
pub(crate) enum Found {
    /// A published state is exactly what this connection sees.
    Published(Arc<Published>),
    /// Another connection of this process has committed and not yet
    /// published: the planes cannot be proven current this moment.
    InFlight,
    /// Older than every state still in the history: newer commits of this
    /// process were published since the state was read.
    Passed,
    /// Nothing published matches: an outside writer, or nothing published.
    Nothing,
}

/// The shared planes of one database file.
pub(crate) struct Database {
    /// Published states, newest first.
    history: ArcSwap<Vec<Arc<Published>>>,
    /// Serializes publishers (a few pointer copies; readers never take it).
    publishing: Mutex<()>,
    /// Commits of this process's connections between "may commit" and
    /// "published or given up".
    in_flight: AtomicUsize,
    /// Open Pleroma connections on the file.
    connections: AtomicUsize,
}

/// A file's identity: the same file under any spelling of its path.
#[derive(Clone, PartialEq, Eq, Debug)]
struct FileKey(u64, u64);

fn file_key(path: &Path) -> Option<FileKey> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some(FileKey(meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        let c = std::fs::canonicalize(path).ok()?;
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        c.hash(&mut h);
        Some(FileKey(h.finish(), 0))
    }
}

/// The open files of this process and their planes.
type Registry = Vec<(FileKey, Weak<Database>)>;

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| Mutex::new(Vec::new()));

impl Database {
    pub(crate) fn new() -> Database {
        Database {
            history: ArcSwap::from_pointee(Vec::new()),
            publishing: Mutex::new(()),
            in_flight: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
        }
    }

    /// The shared planes of the database file `db` has open as `main`, or a
    /// private set for an in-memory or temporary database.
    pub fn for_connection(db: &rusqlite::Connection) -> Arc<Database> {
        let key = db
            .path()
            .filter(|p| !p.is_empty())
            .and_then(|p| file_key(Path::new(p)));
        let Some(key) = key else {
            return Arc::new(Database::new());
        };
        let mut reg = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        reg.retain(|(_, w)| w.strong_count() > 0);
        if let Some(d) = reg
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade())
        {
            return d;
        }
        let d = Arc::new(Database::new());
        reg.push((key, Arc::downgrade(&d)));
        d
    }

    /// Count a connection in; the guard counts it out.
    pub fn join(self: &Arc<Database>) -> Member {
        self.connections.fetch_add(1, Ordering::SeqCst);
        Member(self.clone())
    }

    /// Whether another Pleroma connection of this process shares the file.
    pub fn shared(&self) -> bool {
        self.connections.load(Ordering::SeqCst) > 1
    }

    /// Mark a commit as possibly under way; the guard ends it.
    pub fn commit_in_flight(self: &Arc<Database>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }

    /// Publish the planes of the committed state `id`.
    pub fn publish(&self, id: WalSnapshot, entries: Vec<PublishedEntry>, mark: Mark) {
        let _g = self.publishing.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.history.load();
        let mut next: Vec<Arc<Published>> = Vec::with_capacity(HISTORY);
        next.push(Arc::new(Published { id, entries, mark }));
        next.extend(old.iter().take(HISTORY - 1).cloned());
        self.history.store(Arc::new(next));
    }

    /// The newest published state (for the deliberate mutations only).
    pub fn newest(&self) -> Option<Arc<Published>> {
        self.history.load().first().cloned()
    }

    /// Publish `entries` under the identity of the newest published state:
    /// wrong by construction, for the deliberate mutations only.
    pub fn publish_as_newest(&self, entries: Vec<PublishedEntry>) {
        if let Some(p) = self.newest() {
            self.publish(p.id.clone(), entries, p.mark);
        }
    }

    /// The published state whose identity is `id`, if any.
    pub fn find(&self, id: &WalSnapshot) -> Found {
        // `in_flight` is read first: a commit that ends and publishes after
        // this read is then found in the history loaded below.
        let in_flight = self.in_flight.load(Ordering::SeqCst) > 0;
        let history = self.history.load();
        if let Some(p) = history.iter().find(|p| p.id == *id) {
            return Found::Published(p.clone());
        }
        if history.len() == HISTORY && history.last().is_some_and(|p| id.older_than(&p.id)) {
            return Found::Passed;
        }
        if in_flight {
            Found::InFlight
        } else {
            Found::Nothing
        }
    }
}

/// A connection counted in a [`Database`].
pub(crate) struct Member(Arc<Database>);

impl Drop for Member {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A commit under way (see [`Database::commit_in_flight`]).
pub(crate) struct InFlight(Arc<Database>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An entry from another connection's published planes, keeping this
/// connection's counters of the same plane (`old`).
pub(crate) fn entry_from_published(p: &PublishedEntry, old: Option<&PlaneEntry>) -> PlaneEntry {
    let mut config = PlaneConfig::new(p.def.dims.clone(), p.def.measures.clone());
    config.cap = p.def.cap;
    let mut plane = Plane::new(config);
    plane.restore(&p.snap.plane);
    PlaneEntry {
        def: p.def.clone(),
        cols: p.snap.cols.clone(),
        plane,
        broken: p.snap.broken.clone(),
        stats: old.map(|o| o.stats.clone()).unwrap_or_default(),
    }
}
