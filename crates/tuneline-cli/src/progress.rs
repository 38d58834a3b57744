//! Progress on the terminal: a bar with rate and ETA on a terminal, a plain
//! log line per stage and every few seconds otherwise, nothing with `--quiet`.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{HumanBytes, ProgressBar, ProgressStyle};
use tuneline_core::progress::{Progress, Unit};
use tuneline_deliver::pipeline::Stages;

/// How often plain log lines are printed within a stage.
const LOG_EVERY: Duration = Duration::from_secs(5);

/// Shows one command's progress on stderr.
pub enum Shown {
    /// An interactive bar.
    Bar { bar: ProgressBar, prefix: String },
    /// Plain lines.
    Lines { prefix: String, state: Mutex<LineState>, done: AtomicU64 },
    /// Nothing shown (`--quiet`).
    Hidden,
}

/// The current stage, for plain lines.
pub struct LineState {
    what: String,
    total: u64,
    unit: Unit,
    started: Instant,
    last: Instant,
}

impl Shown {
    /// Progress for a command described by `prefix` (such as "push models/x").
    pub fn new(prefix: &str, quiet: bool) -> Self {
        if quiet {
            return Shown::Hidden;
        }
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(0).with_message(prefix.to_string());
            return Shown::Bar { bar, prefix: prefix.to_string() };
        }
        let now = Instant::now();
        let state =
            LineState { what: String::new(), total: 0, unit: Unit::Items, started: now, last: now };
        Shown::Lines {
            prefix: prefix.to_string(),
            state: Mutex::new(state),
            done: AtomicU64::new(0),
        }
    }

    /// Prints a line about the work (above the bar, if there is one).
    pub fn note(&self, line: &str) {
        match self {
            Shown::Bar { bar, .. } => bar.suspend(|| eprintln!("{line}")),
            Shown::Lines { .. } => eprintln!("{line}"),
            Shown::Hidden => {}
        }
    }

    /// Removes the bar once the work is over.
    pub fn finish(&self) {
        if let Shown::Bar { bar, .. } = self {
            bar.finish_and_clear();
        }
    }
}

/// A stage dropped is done: its bar goes.
impl Drop for Shown {
    fn drop(&mut self) {
        self.finish();
    }
}

fn amount(unit: Unit, n: u64) -> String {
    match unit {
        Unit::Bytes => HumanBytes(n).to_string(),
        Unit::Items => n.to_string(),
    }
}

impl Progress for Shown {
    fn start(&self, what: &str, total: u64, unit: Unit) {
        match self {
            Shown::Bar { bar, prefix } => {
                let counts = match unit {
                    Unit::Bytes => "{bytes}/{total_bytes} {bytes_per_sec}",
                    Unit::Items => "{pos}/{len} {per_sec}",
                };
                let template = format!("{{msg}} [{{bar:30}}] {counts} eta {{eta}}");
                bar.set_style(
                    ProgressStyle::with_template(&template)
                        .expect("valid template")
                        .progress_chars("=> "),
                );
                bar.set_message(format!("{prefix}: {what}"));
                bar.set_length(total);
                bar.set_position(0);
                bar.reset_eta();
            }
            Shown::Lines { prefix, state, done } => {
                let now = Instant::now();
                *state.lock().unwrap() =
                    LineState { what: what.to_string(), total, unit, started: now, last: now };
                done.store(0, Ordering::Relaxed);
                eprintln!("{prefix}: {what} ({})", amount(unit, total));
            }
            Shown::Hidden => {}
        }
    }

    fn advance(&self, n: u64) {
        match self {
            Shown::Bar { bar, .. } => bar.inc(n),
            Shown::Lines { prefix, state, done } => {
                let done = done.fetch_add(n, Ordering::Relaxed) + n;
                let mut s = state.lock().unwrap();
                if s.last.elapsed() >= LOG_EVERY {
                    s.last = Instant::now();
                    let rate = done as f64 / s.started.elapsed().as_secs_f64().max(1e-3);
                    let rate = match s.unit {
                        Unit::Bytes => HumanBytes(rate as u64).to_string(),
                        Unit::Items => format!("{rate:.2}"),
                    };
                    eprintln!(
                        "{prefix}: {}: {} / {} ({rate}/s)",
                        s.what,
                        amount(s.unit, done),
                        amount(s.unit, s.total)
                    );
                }
            }
            Shown::Hidden => {}
        }
    }
}

/// Progress on this terminal, as `--quiet` and `--json` allow.
pub struct Terminal {
    quiet: bool,
    hidden: bool,
}

impl Terminal {
    /// As the command line asks.
    pub fn of(global: &crate::cli::Global) -> Self {
        Self { quiet: global.quiet, hidden: global.quiet || global.json }
    }
}

impl Stages for Terminal {
    fn stage(&self, what: &str) -> Box<dyn Progress> {
        Box::new(Shown::new(what, self.hidden))
    }

    fn note(&self, line: &str) {
        if !self.quiet {
            eprintln!("{line}");
        }
    }
}
