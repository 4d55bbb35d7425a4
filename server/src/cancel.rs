//! Cancel requests (psql's Ctrl-C): a new connection sends the session's
//! process id and secret key, and the statement that session is running
//! ends with PostgreSQL's `57014` "canceling statement due to user request".
//!
//! pgwire matches the key: every session registers with the server's
//! [`ConnectionManager`] (under the pid and key its startup sent), and
//! [`DefaultCancelHandler`](pgwire::api::cancel::DefaultCancelHandler) fires
//! the registered handle of a request whose pid and key match; a wrong key
//! finds nothing and does nothing. The session listens on its handle only
//! while it waits for a statement ([`run`]), so a cancel that arrives while
//! the session is idle goes nowhere, as in PostgreSQL.
//!
//! Ending the statement: the session's SQLite connection has a progress
//! handler that SQLite calls every [`CHECK_EVERY`](crate::jobs) virtual-machine
//! instructions; it interrupts the statement when the job it belongs to was
//! cancelled. Jobs are numbered, so a cancel meant for one job never reaches
//! the next, even when it lands just as the first one ends. (SQLite's own
//! `sqlite3_interrupt` is not used: it is lost when it falls between two of
//! the statements the router runs for one of the client's.)

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use futures::future::{select, Either};
use pgwire::api::{ClientInfo, ConnectionGuard, ConnectionHandle, ConnectionManager};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};

use crate::session::{Engine, Worker};

/// A session's entry in the server's cancel registry; dropping it (when
/// the connection ends) takes the entry out.
pub(crate) struct Registration {
    handle: Arc<ConnectionHandle>,
    _guard: ConnectionGuard,
}

impl Registration {
    /// Registers the session under the pid and secret key its startup sent.
    pub(crate) fn new(manager: &Arc<ConnectionManager>, client: &impl ClientInfo) -> Registration {
        let (pid, key) = client.pid_and_secret_key();
        let (handle, guard) = manager.register(pid, key);
        Registration {
            handle,
            _guard: guard,
        }
    }
}

/// Runs `f` on the session's thread; a cancel request for this session
/// that arrives meanwhile interrupts it. The session listens from before
/// its thread is there (`worker`, which opens the connection at the first
/// statement): a cancel that arrives while it opens ends the statement as
/// soon as it runs.
pub(crate) async fn run<'w, R: Send + 'static>(
    registration: &Registration,
    worker: impl Future<Output = PgWireResult<&'w Worker>>,
    f: impl FnOnce(&mut Engine) -> R + Send + 'static,
) -> PgWireResult<R> {
    let mut cancelled = registration.handle.start_query().await;
    let worker = pin!(worker);
    let (worker, early) = match select(worker, &mut cancelled).await {
        Either::Left((w, _)) => (w?, false),
        Either::Right((fired, w)) => (w.await?, fired.is_ok()),
    };
    let mut job = Box::pin(worker.run(f));
    if early {
        // Its first poll hands the job to the session thread; then it is
        // the job to cancel.
        if let Poll::Ready(r) = futures::poll!(&mut job) {
            return r.map_err(user_error);
        }
        worker.cancel();
        return job.await.map_err(user_error);
    }
    match select(job, cancelled).await {
        Either::Left((r, _)) => r,
        Either::Right((fired, job)) => {
            if fired.is_ok() {
                worker.cancel();
            }
            job.await
        }
    }
    .map_err(user_error)
}

fn user_error(e: ErrorInfo) -> PgWireError {
    PgWireError::UserError(Box::new(e))
}
