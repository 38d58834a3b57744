//! Throttles on guessing and flooding: wrong bearer tokens and wrong
//! dashboard logins (not missing ones) are counted per source address, and a source past
//! [`MAX_FAILURES`] in a [`WINDOW`] is answered 429 until the window ends.
//! A request that presents a right credential from another source is never
//! slowed: it takes no lock past a map lookup. Registrations through the
//! join secret, which anyone holding it may send, share one budget.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Wrong credentials one source may present per window: more than a
/// misconfigured client retries, far fewer than a guesser needs.
pub const MAX_FAILURES: u32 = 100;
/// Registrations the join secret may make per window.
pub const MAX_JOINS: u32 = 120;
/// The window both are counted over.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Sources remembered at most; past it, ended windows are forgotten first.
const MAX_SOURCES: usize = 100_000;

/// A count over a window that began at `start`.
#[derive(Clone, Copy)]
struct Window {
    start: Instant,
    count: u32,
}

impl Window {
    /// The count at `now`, restarted when the window has ended.
    fn at(self, now: Instant) -> Self {
        if now.duration_since(self.start) >= WINDOW {
            Self { start: now, count: 0 }
        } else {
            self
        }
    }
}

/// Counts of failures by source, and of joins.
pub struct Throttle {
    failures: Mutex<HashMap<IpAddr, Window>>,
    joins: Mutex<Option<Window>>,
}

impl Default for Throttle {
    fn default() -> Self {
        Self { failures: Mutex::new(HashMap::new()), joins: Mutex::new(None) }
    }
}

impl Throttle {
    /// `Err(seconds to wait)` while `source` has failed too often in this window.
    pub fn check(&self, source: Option<IpAddr>) -> Result<(), u64> {
        let Some(source) = source else { return Ok(()) };
        let now = Instant::now();
        let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        match failures.get(&source).map(|w| w.at(now)) {
            Some(w) if w.count >= MAX_FAILURES => {
                Err((WINDOW - now.duration_since(w.start)).as_secs().max(1))
            }
            _ => Ok(()),
        }
    }

    /// Counts a failed credential from `source`.
    pub fn failed(&self, source: Option<IpAddr>) {
        let Some(source) = source else { return };
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() >= MAX_SOURCES {
            failures.retain(|_, w| now.duration_since(w.start) < WINDOW);
        }
        let w = failures.entry(source).or_insert(Window { start: now, count: 0 });
        *w = w.at(now);
        w.count += 1;
    }

    /// Takes one registration from the join secret's budget; `Err(seconds to wait)` when it is spent.
    pub fn join(&self) -> Result<(), u64> {
        let now = Instant::now();
        let mut joins = self.joins.lock().unwrap_or_else(|p| p.into_inner());
        let w = joins.get_or_insert(Window { start: now, count: 0 });
        *w = w.at(now);
        if w.count >= MAX_JOINS {
            return Err((WINDOW - now.duration_since(w.start)).as_secs().max(1));
        }
        w.count += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guessing_source_is_stopped_and_others_are_not() {
        let t = Throttle::default();
        let (guesser, other) =
            (Some("10.0.0.1".parse().unwrap()), Some("10.0.0.2".parse().unwrap()));
        for _ in 0..MAX_FAILURES {
            assert_eq!(t.check(guesser), Ok(()));
            t.failed(guesser);
        }
        assert!(t.check(guesser).is_err_and(|wait| (1..=60).contains(&wait)));
        assert_eq!(t.check(other), Ok(()));
        assert_eq!(
            t.check(None),
            Ok(()),
            "a request with no address (in-process) is not throttled"
        );
        for _ in 0..MAX_JOINS {
            assert_eq!(t.join(), Ok(()));
        }
        assert!(t.join().is_err());
    }
}
