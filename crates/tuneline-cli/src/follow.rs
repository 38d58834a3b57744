//! Following a job on the server until it ends: its state, its steps and
//! why each attempt ended, as `tuneline run` and `tuneline jobs submit --wait` show them.

use std::time::Duration;

use tuneline_api::{Client, Job, State};
use tuneline_core::progress::{Progress, Unit};

use crate::cli::Global;
use crate::exit::{CliResult, Failure};
use crate::progress::Shown;

/// Follows job `id` until it ends, showing its `stage` with its steps (of
/// `total`, if it has any) and every requeue. Ctrl-C or SIGTERM end the
/// following with the failure `interrupted` makes.
pub async fn follow(
    client: &Client,
    id: i64,
    (stage, total): (&str, u64),
    global: &Global,
    interrupted: fn() -> Failure,
) -> CliResult<Job> {
    let shown = Shown::new(&format!("job {id}"), global.quiet || global.json);
    // A stage without steps (delivery) gets a line, not an empty bar.
    match total {
        0 => shown.note(&format!("job {id}: {stage}")),
        _ => shown.start(stage, total, Unit::Items),
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(Failure::failed)?;
    let (mut shown_step, mut last_state, mut last_ended) = (0, None, 0);
    let job = loop {
        let job = match client.job(id).await {
            Ok(job) => job,
            Err(e) => break Err(Failure::failed(e)),
        };
        let ended: Vec<_> = job.attempts.iter().filter(|a| a.ended_at.is_some()).collect();
        if last_state != Some(job.state) || last_ended != ended.len() {
            // Why an attempt ended matters when the job goes on (requeued) or fails.
            let why = ended
                .last()
                .filter(|_| ended.len() > last_ended && job.state != State::Succeeded)
                .map_or(String::new(), |a| {
                    let outcome =
                        a.outcome.map(|o| o.as_str()).unwrap_or_default().replace('_', " ");
                    format!(
                        " after attempt {} ended {outcome}{}",
                        ended.len(),
                        a.error
                            .as_deref()
                            .map(|e| format!(": {}", crate::terminal::terminal_safe(e)))
                            .unwrap_or_default()
                    )
                });
            let used = format!("{} of {} attempts used", job.attempts_used, job.max_attempts);
            shown.note(&format!("job {id}: {}{why} ({used})", job.state.as_str()));
            (last_state, last_ended) = (Some(job.state), ended.len());
        }
        let step = job.step.unwrap_or(0);
        if step > shown_step {
            shown.advance(step - shown_step);
            shown_step = step;
        }
        if job.state.is_final() {
            break Ok(job);
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = tokio::signal::ctrl_c() => break Err(interrupted()),
            _ = term.recv() => break Err(interrupted()),
        }
    };
    shown.finish();
    job
}
