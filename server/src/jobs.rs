//! The jobs of a session as its cancel sees them, and the progress handler
//! that ends a statement of a cancelled job (see [`crate::cancel`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How many SQLite VM instructions run between two looks for a cancel.
const CHECK_EVERY: i32 = 1000;

/// The jobs of one session, as its cancel sees them.
#[derive(Default, Debug)]
pub(crate) struct Jobs {
    /// The number of the last job handed to the session thread.
    submitted: AtomicU64,
    /// The job running on the session thread (0: none).
    running: AtomicU64,
    /// The job a cancel was meant for.
    cancelled: AtomicU64,
}

impl Jobs {
    /// A number for the next job.
    pub(crate) fn submit(&self) -> u64 {
        self.submitted.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub(crate) fn begin(&self, job: u64) {
        self.running.store(job, Ordering::SeqCst);
    }

    pub(crate) fn end(&self) {
        self.running.store(0, Ordering::SeqCst);
    }

    /// Cancel the last job submitted: the one the session is waiting for.
    pub(crate) fn cancel_last(&self) {
        self.cancelled
            .store(self.submitted.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    fn cancelled(&self) -> bool {
        let running = self.running.load(Ordering::SeqCst);
        running != 0 && self.cancelled.load(Ordering::SeqCst) == running
    }

    /// Makes SQLite interrupt a statement of a cancelled job.
    pub(crate) fn install(
        self: &Arc<Self>,
        db: &mut pleroma::rusqlite::Connection,
    ) -> pleroma::rusqlite::Result<()> {
        let jobs = self.clone();
        db.progress_handler(CHECK_EVERY, Some(move || jobs.cancelled()))
    }
}

/// Opens a session's connection, with the progress handler that
/// interrupts a cancelled job (what `Connection::open` does, plus that).
pub(crate) fn open(
    path: &std::path::Path,
    jobs: &Arc<Jobs>,
) -> pleroma::Result<pleroma::Connection> {
    let mut db = pleroma::rusqlite::Connection::open(path)?;
    jobs.install(&mut db)?;
    pleroma::Connection::wrap(db)
}

/// The message PostgreSQL sends for a cancelled statement.
pub(crate) const MESSAGE: &str = "canceling statement due to user request";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_reaches_only_the_job_it_was_meant_for() {
        let jobs = Jobs::default();
        let a = jobs.submit();
        jobs.cancel_last();
        assert!(!jobs.cancelled(), "nothing runs yet");
        jobs.begin(a);
        assert!(
            jobs.cancelled(),
            "the job starts after its cancel: still cancelled"
        );
        jobs.end();
        let b = jobs.submit();
        jobs.begin(b);
        assert!(!jobs.cancelled(), "the next job is not");
        jobs.end();
    }
}
