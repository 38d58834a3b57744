//! Transfer progress on the terminal: a bar with rate and ETA on a terminal,
//! a plain log line every few seconds otherwise, nothing with `--quiet`.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{HumanBytes, ProgressBar, ProgressStyle};
use tuneline_store::Progress;

/// How often plain log lines are printed.
const LOG_EVERY: Duration = Duration::from_secs(5);

/// Shows one transfer's progress on stderr.
pub enum Shown {
    /// An interactive bar.
    Bar(ProgressBar),
    /// Periodic plain lines.
    Lines { what: String, total: AtomicU64, done: AtomicU64, started: Instant, last: Mutex<Instant> },
    /// Nothing.
    Hidden,
}

impl Shown {
    /// Progress for a transfer called `what` (such as "push models/x").
    pub fn new(what: &str, quiet: bool) -> Self {
        if quiet {
            Shown::Hidden
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(0).with_message(what.to_string());
            bar.set_style(
                ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            Shown::Bar(bar)
        } else {
            let now = Instant::now();
            Shown::Lines {
                what: what.to_string(),
                total: AtomicU64::new(0),
                done: AtomicU64::new(0),
                started: now,
                last: Mutex::new(now),
            }
        }
    }

    /// Removes the bar once the transfer is over.
    pub fn finish(&self) {
        if let Shown::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Shown {
    fn set_total(&self, bytes: u64) {
        match self {
            Shown::Bar(bar) => bar.set_length(bytes),
            Shown::Lines { total, .. } => total.store(bytes, Ordering::Relaxed),
            Shown::Hidden => {}
        }
    }

    fn advance(&self, bytes: u64) {
        match self {
            Shown::Bar(bar) => bar.inc(bytes),
            Shown::Lines { what, total, done, started, last } => {
                let done = done.fetch_add(bytes, Ordering::Relaxed) + bytes;
                let mut last = last.lock().unwrap();
                if last.elapsed() >= LOG_EVERY {
                    *last = Instant::now();
                    let rate = done as f64 / started.elapsed().as_secs_f64().max(1e-3);
                    eprintln!(
                        "{what}: {} / {} ({}/s)",
                        HumanBytes(done),
                        HumanBytes(total.load(Ordering::Relaxed)),
                        HumanBytes(rate as u64)
                    );
                }
            }
            Shown::Hidden => {}
        }
    }
}
