//! A job's life: `queued -> leased -> running -> succeeded | failed |
//! cancelled`. An attempt that ends without finishing sends its job back to
//! `queued` until the attempts that [`RetryPolicy`] counts reach
//! `max_attempts`; a user error (bad config, bad data) fails at once, since a
//! retry would fail the same way.

use tuneline_api::Outcome;
pub use tuneline_api::{RetryPolicy, State};

/// What happened to a leased or running job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A worker took it.
    Leased,
    /// Its worker started it.
    Started,
    /// It finished.
    Succeeded,
    /// It failed because of its input; retrying cannot help.
    UserError(String),
    /// It failed because of the machine, the network or the store.
    InfraError(String),
    /// Its worker was reclaimed (a spot notice) or exited holding it.
    Preempted,
    /// Its worker went silent past the lease timeout.
    Lost,
    /// A user cancelled it.
    Cancelled,
}

impl Event {
    /// How an attempt that ends with this event ended; `None` if no attempt ends.
    pub fn outcome(&self) -> Option<Outcome> {
        match self {
            Self::Leased | Self::Started => None,
            Self::Succeeded => Some(Outcome::Succeeded),
            Self::UserError(_) => Some(Outcome::UserError),
            Self::InfraError(_) => Some(Outcome::InfraError),
            Self::Preempted => Some(Outcome::Preempted),
            Self::Lost => Some(Outcome::Lost),
            Self::Cancelled => Some(Outcome::Cancelled),
        }
    }

    /// The attempt's error, for failures.
    pub fn error(&self) -> Option<&str> {
        match self {
            Self::UserError(e) | Self::InfraError(e) => Some(e),
            _ => None,
        }
    }
}

/// The state after `event` in `state`, when `used` attempts (this one
/// included) of `max_attempts` count under `policy`; `None` when the event
/// cannot happen there.
pub fn next(
    state: State,
    event: &Event,
    used: u32,
    max_attempts: u32,
    policy: &RetryPolicy,
) -> Option<State> {
    use State::*;
    let counts = event.outcome().is_some_and(|o| policy.counts(o));
    let retry = if !counts || used < max_attempts { Queued } else { Failed };
    match (state, event) {
        (Queued, Event::Leased) => Some(Leased),
        (Leased, Event::Started) => Some(Running),
        (Running, Event::Succeeded) => Some(Succeeded),
        (Leased | Running, Event::UserError(_)) => Some(Failed),
        (Leased | Running, Event::InfraError(_) | Event::Preempted | Event::Lost) => Some(retry),
        // No worker could be launched for it.
        (Queued, Event::InfraError(_)) => Some(retry),
        (Queued | Leased | Running, Event::Cancelled) => Some(Cancelled),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RetryPolicy = RetryPolicy::SERVER;

    #[test]
    fn the_happy_path_and_retries() {
        assert_eq!(next(State::Queued, &Event::Leased, 0, 3, &POLICY), Some(State::Leased));
        assert_eq!(next(State::Leased, &Event::Started, 0, 3, &POLICY), Some(State::Running));
        assert_eq!(next(State::Running, &Event::Succeeded, 0, 3, &POLICY), Some(State::Succeeded));
        assert_eq!(next(State::Running, &Event::Preempted, 1, 3, &POLICY), Some(State::Queued));
        assert_eq!(
            next(State::Running, &Event::Lost, 3, 3, &POLICY),
            Some(State::Failed),
            "the third attempt was the last"
        );
        assert_eq!(
            next(State::Running, &Event::UserError("bad config".into()), 1, 3, &POLICY),
            Some(State::Failed),
            "no retry"
        );
        let lenient = RetryPolicy { preempted: false, ..POLICY };
        assert_eq!(
            next(State::Running, &Event::Preempted, 3, 3, &lenient),
            Some(State::Queued),
            "a preemption the policy does not count"
        );
    }

    #[test]
    fn final_states_stay_final() {
        for s in [State::Succeeded, State::Failed, State::Cancelled] {
            for e in [
                Event::Leased,
                Event::Started,
                Event::Succeeded,
                Event::Preempted,
                Event::Lost,
                Event::Cancelled,
            ] {
                assert_eq!(next(s, &e, 0, 3, &POLICY), None, "{s:?} on {e:?}");
            }
        }
        assert_eq!(next(State::Queued, &Event::Succeeded, 0, 3, &POLICY), None);
        assert_eq!(State::parse("running"), Some(State::Running));
    }
}
