//! Throttles on guessing and flooding. Only wrong credentials are counted
//! (bearer tokens and dashboard logins), each per source address and per
//! presented credential (its SHA-256): past [`MAX_FAILURES`] of either in a
//! [`WINDOW`], every further wrong one is answered 429 until that window
//! ends. A right credential is never throttled, whatever others sent from
//! its address: workers and the admin behind one NAT or proxy keep working
//! while a misconfigured client or a guesser there is refused. Registrations
//! through the join secret, which anyone holding it may send, share one budget.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// Wrong credentials one source may present, or one wrong credential be
/// presented, per window: more than a misconfigured client retries, far
/// fewer than a guesser needs.
pub const MAX_FAILURES: u32 = 100;
/// Registrations the join secret may make per window.
pub const MAX_JOINS: u32 = 120;
/// The window both are counted over.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Sources and credentials remembered at most; past it, ended windows are forgotten first.
const MAX_KEYS: usize = 100_000;

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

/// What failures are counted by.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// The address a request came from.
    Source(IpAddr),
    /// The SHA-256 of the credential presented (never the credential itself).
    Credential([u8; 32]),
}

/// Counts of failures by source and by credential, and of joins.
pub struct Throttle {
    failures: Mutex<HashMap<Key, Window>>,
    joins: Mutex<Option<Window>>,
}

impl Default for Throttle {
    fn default() -> Self {
        Self { failures: Mutex::new(HashMap::new()), joins: Mutex::new(None) }
    }
}

impl Throttle {
    /// Counts the wrong credential `presented` from `source` (`None`: in
    /// process, not counted by address), or `Err(seconds to wait)` when its
    /// address or the credential itself already failed too often in this window.
    pub fn wrong(&self, source: Option<IpAddr>, presented: &str) -> Result<(), u64> {
        let now = Instant::now();
        let keys = [
            source.map(Key::Source),
            Some(Key::Credential(Sha256::digest(presented.as_bytes()).into())),
        ];
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() >= MAX_KEYS {
            failures.retain(|_, w| now.duration_since(w.start) < WINDOW);
        }
        let wait = keys
            .iter()
            .flatten()
            .filter_map(|key| failures.get(key).map(|w| w.at(now)))
            .filter(|w| w.count >= MAX_FAILURES)
            .map(|w| (WINDOW - now.duration_since(w.start)).as_secs().max(1))
            .max();
        if let Some(wait) = wait {
            return Err(wait);
        }
        for key in keys.into_iter().flatten() {
            let w = failures.entry(key).or_insert(Window { start: now, count: 0 });
            *w = w.at(now);
            w.count += 1;
        }
        Ok(())
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
        for i in 0..MAX_FAILURES {
            assert_eq!(t.wrong(guesser, &format!("guess {i}")), Ok(()));
        }
        assert!(t.wrong(guesser, "another").is_err_and(|wait| (1..=60).contains(&wait)));
        assert_eq!(t.wrong(other, "another"), Ok(()), "another address is counted apart");
        for _ in 0..MAX_FAILURES {
            let _ = t.wrong(None, "one stale token");
        }
        assert!(
            t.wrong(other, "one stale token").is_err(),
            "a credential is counted wherever it comes from"
        );
        for _ in 0..MAX_JOINS {
            assert_eq!(t.join(), Ok(()));
        }
        assert!(t.join().is_err());
    }
}
