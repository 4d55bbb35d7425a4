//! One writer at a time, first come first served.
//!
//! SQLite lets one connection write at a time and makes the others poll
//! (`busy_timeout` sleeps up to 100 ms between tries), so under many
//! writers a waiting session can starve while the lock passes between
//! others. The server's sessions therefore queue for a write: a session
//! takes its turn before its first write of a transaction and gives it back
//! when it is out of its transaction again. Waiting is bounded like
//! SQLite's busy timeout. Writers outside the server (other processes) still
//! meet SQLite's own lock and busy timeout.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Default)]
struct State {
    held: bool,
    queue: VecDeque<u64>,
    next: u64,
}

/// The server's queue of writing sessions.
#[derive(Default)]
pub(crate) struct Writers {
    state: Mutex<State>,
    turn: Condvar,
}

/// A session's turn to write; the next in line goes on when it drops.
pub(crate) struct Turn(Arc<Writers>);

impl Drop for Turn {
    fn drop(&mut self) {
        self.0.lock().held = false;
        self.0.turn.notify_all();
    }
}

impl Writers {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Only counters are touched under this lock: never poisoned in a
        // way that leaves them inconsistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the session's turn, at most `timeout`.
    pub(crate) fn wait(self: &Arc<Self>, timeout: Duration) -> Option<Turn> {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        let me = s.next;
        s.next += 1;
        s.queue.push_back(me);
        loop {
            if !s.held && s.queue.front() == Some(&me) {
                s.queue.pop_front();
                s.held = true;
                return Some(Turn(self.clone()));
            }
            let now = Instant::now();
            if now >= deadline {
                s.queue.retain(|&t| t != me);
                drop(s);
                self.turn.notify_all();
                return None;
            }
            s = self
                .turn
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_taken_in_order_and_a_timeout_leaves_the_queue() {
        let w = Arc::new(Writers::default());
        let first = w.wait(Duration::from_secs(1)).unwrap();
        assert!(
            w.wait(Duration::from_millis(20)).is_none(),
            "held: the wait times out"
        );
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for i in 0..4 {
            let (w2, order) = (w.clone(), order.clone());
            threads.push(std::thread::spawn(move || {
                let _t = w2.wait(Duration::from_secs(5)).unwrap();
                order.lock().unwrap().push(i);
            }));
            // Queue them in a known order.
            while w.lock().queue.len() < i + 1 {
                std::thread::yield_now();
            }
        }
        drop(first);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
    }
}
