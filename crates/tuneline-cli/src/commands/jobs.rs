//! `tuneline jobs ls | submit | cancel | logs`: a server's jobs, through its
//! API with the bearer token. `submit --train` queues the config's training
//! job; `--wait` follows a job to its end and exits with its status, so that
//! a CI step fails when training fails.

use std::time::Duration;

use tuneline_api::{ClientError, CommandSpec, GangShape, Job, JobSpec, JobSubmit, LogEnd, State};

use crate::cli::{Global, JobsArgs, JobsCommand};
use crate::connect::{client, token};
use crate::context::{load_config, open_store};
use crate::exit::{CliResult, Failure};
use crate::follow::follow;
use crate::terminal::terminal_safe;
use crate::train_job::train_job;

/// Runs a `tuneline jobs` command.
pub async fn run(global: &Global, args: &JobsArgs) -> CliResult {
    let config = load_config(global, true)?.config;
    let server = args.server.clone().unwrap_or_else(|| format!("http://{}", config.server.listen));
    let token = token(args.token.as_deref())?;
    let client =
        client(&server, &token, args.trust.fingerprint.as_deref(), args.trust.insecure_http)?;
    let failed = |e: ClientError| Failure::failed(e);
    match &args.command {
        JobsCommand::Ls => {
            let jobs = client.jobs().await.map_err(failed)?;
            if global.json {
                println!("{}", serde_json::to_string_pretty(&jobs).expect("serializable"));
            } else {
                println!(
                    "{:>5} {:<8} {:<10} {:>8} {:>6} {:>6} {:<7} RUN",
                    "ID", "KIND", "STATE", "ATTEMPTS", "USED", "STEP", "ENGINE"
                );
                for j in &jobs {
                    let step = j.step.map_or("-".to_string(), |s| s.to_string());
                    let used = format!("{}/{}", j.attempts_used, j.max_attempts);
                    let engine = j.attempts.iter().rev().find_map(|a| a.engine.as_deref());
                    println!(
                        "{:>5} {:<8} {:<10} {:>8} {:>6} {:>6} {:<7} {}",
                        j.id,
                        j.spec.kind().as_str(),
                        j.state.as_str(),
                        // A gang's attempt is one, whatever its machines.
                        j.attempts.iter().filter(|a| a.is_attempt()).count(),
                        used,
                        step,
                        engine.unwrap_or("-"),
                        j.spec.run()
                    );
                }
            }
        }
        JobsCommand::Submit {
            train,
            run,
            store,
            dataset,
            nodes,
            gpus,
            max_attempts,
            wait,
            argv,
        } => {
            let (spec, steps) = if *train {
                let mut config = config;
                let store = open_store(global, &config)?;
                let job = train_job(global, &store, &mut config).await?;
                (job.spec(), job.max_steps)
            } else {
                let (run, store) =
                    (run.as_deref().unwrap_or_default(), store.as_deref().unwrap_or_default());
                (
                    JobSpec::Command(CommandSpec {
                        dataset: dataset.clone(),
                        gang: (*nodes > 1).then_some(GangShape {
                            nodes: *nodes,
                            min_nodes: *nodes,
                            gpus: gpus.unwrap_or(0),
                        }),
                        ..CommandSpec::new(argv, run, store)
                    }),
                    0,
                )
            };
            let queued = client
                .submit(&JobSubmit::new(spec, Some(*max_attempts)))
                .await
                .map_err(|e| Failure::input(e.to_string()))?;
            show(global, &queued, "queued");
            if *wait {
                let ended = follow(
                    &client,
                    queued.id,
                    (queued.spec.kind().as_str(), steps),
                    global,
                    stopped_waiting,
                )
                .await?;
                show(global, &ended, "ended");
                if ended.state != State::Succeeded {
                    let why = ended
                        .error
                        .as_deref()
                        .map(|e| format!(": {}", terminal_safe(e)))
                        .unwrap_or_default();
                    return Err(Failure::failed(format!(
                        "job {} {}{why}",
                        ended.id,
                        ended.state.as_str()
                    )));
                }
            }
        }
        JobsCommand::Cancel { id } => {
            show(global, &client.cancel(*id).await.map_err(failed)?, "cancel requested")
        }
        JobsCommand::Logs { id, follow, head, all } => {
            let end = if *head || *all { LogEnd::First } else { LogEnd::Last };
            let mut after = print_logs(&client.logs(*id, 0, end).await.map_err(failed)?, 0);
            if !(*all || *follow) {
                return Ok(());
            }
            loop {
                // The state is read first: a job that had ended has no line after the page that follows.
                let ended = *follow && client.job(*id).await.map_err(failed)?.state.is_final();
                let page = client.logs(*id, after, LogEnd::First).await.map_err(failed)?;
                after = print_logs(&page, after);
                if page.is_empty() {
                    if !follow || ended {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
    Ok(())
}

/// Prints `lines` for a terminal, and returns the last one's number (`after` when there is none).
fn print_logs(lines: &[tuneline_api::LogLine], after: i64) -> i64 {
    for line in lines {
        println!("{}", terminal_safe(&line.text));
    }
    lines.last().map_or(after, |l| l.seq)
}

/// Ctrl-C while waiting: the job goes on on the server.
fn stopped_waiting() -> Failure {
    Failure::failed("stopped waiting; the job goes on on the server: `tuneline jobs logs ID --follow` follows it")
}

fn show(global: &Global, job: &Job, what: &str) {
    if global.json {
        println!("{}", serde_json::to_string(job).expect("serializable"));
    } else {
        println!("job {} {what} ({})", job.id, job.state.as_str());
    }
}
