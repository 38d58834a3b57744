//! A job's life: `queued -> leased -> running -> succeeded | failed |
//! cancelled`. A preempted or lost worker sends its job back to `queued` with
//! the attempt counted, until `max_attempts`; an infrastructure error does
//! the same; a user error (bad config, bad data) fails at once, since a
//! retry would fail the same way.

use serde::{Deserialize, Serialize};

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Waiting for a worker.
    Queued,
    /// Handed to a worker, not yet started.
    Leased,
    /// Its worker is running it.
    Running,
    /// Done.
    Succeeded,
    /// Given up: a user error, or out of attempts.
    Failed,
    /// Stopped by a user.
    Cancelled,
}

impl State {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Leased => "leased",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The state named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Queued, Self::Leased, Self::Running, Self::Succeeded, Self::Failed, Self::Cancelled].into_iter().find(|s| s.as_str() == name)
    }

    /// No transition leaves it.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

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
    /// Its worker was reclaimed (spot notice) or went silent.
    Preempted,
    /// A user cancelled it.
    Cancelled,
}

/// The state after `event` in `state`, with `attempts` of `max_attempts`
/// used; `None` when the event cannot happen there.
pub fn next(state: State, event: &Event, attempts: u32, max_attempts: u32) -> Option<State> {
    use State::*;
    let retry = if attempts + 1 < max_attempts { Queued } else { Failed };
    match (state, event) {
        (Queued, Event::Leased) => Some(Leased),
        (Leased, Event::Started) => Some(Running),
        (Running, Event::Succeeded) => Some(Succeeded),
        (Leased | Running, Event::UserError(_)) => Some(Failed),
        (Leased | Running, Event::InfraError(_) | Event::Preempted) => Some(retry),
        (Queued | Leased | Running, Event::Cancelled) => Some(Cancelled),
        _ => None,
    }
}

/// Whether `event` uses up an attempt.
pub fn counts_attempt(event: &Event) -> bool {
    matches!(event, Event::InfraError(_) | Event::Preempted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_happy_path_and_retries() {
        let (s, e) = (State::Queued, Event::Leased);
        assert_eq!(next(s, &e, 0, 3), Some(State::Leased));
        assert_eq!(next(State::Leased, &Event::Started, 0, 3), Some(State::Running));
        assert_eq!(next(State::Running, &Event::Succeeded, 0, 3), Some(State::Succeeded));
        assert_eq!(next(State::Running, &Event::Preempted, 0, 3), Some(State::Queued));
        assert_eq!(next(State::Running, &Event::Preempted, 2, 3), Some(State::Failed), "the third attempt was the last");
        assert_eq!(next(State::Running, &Event::UserError("bad config".into()), 0, 3), Some(State::Failed), "no retry");
    }

    #[test]
    fn final_states_stay_final() {
        for s in [State::Succeeded, State::Failed, State::Cancelled] {
            for e in [Event::Leased, Event::Started, Event::Succeeded, Event::Preempted, Event::Cancelled] {
                assert_eq!(next(s, &e, 0, 3), None, "{s:?} on {e:?}");
            }
        }
        assert_eq!(next(State::Queued, &Event::Succeeded, 0, 3), None);
        assert_eq!(State::parse("running"), Some(State::Running));
    }
}
