//! `tuneline jobs ls | submit | cancel | logs`: a server's jobs, through its
//! API with the bearer token.

use std::time::Duration;

use tuneline_api::{ClientError, CommandSpec, Job, JobSpec, JobSubmit};

use crate::cli::{Global, JobsArgs, JobsCommand};
use crate::context::load_config;
use crate::exit::{CliResult, Failure};
use crate::plane::{client, token};

/// Runs a `tuneline jobs` command.
pub async fn run(global: &Global, args: &JobsArgs) -> CliResult {
    let config = load_config(global, true)?.config;
    let server = args.server.clone().unwrap_or_else(|| format!("http://{}", config.server.listen));
    let token = token(args.token.as_deref())?;
    let client = client(&server, &token, args.trust.fingerprint.as_deref(), args.trust.insecure_http)?;
    let failed = |e: ClientError| Failure::failed(e);
    match &args.command {
        JobsCommand::Ls => {
            let jobs = client.jobs().await.map_err(failed)?;
            if global.json {
                println!("{}", serde_json::to_string_pretty(&jobs).expect("serializable"));
            } else {
                println!("{:>5} {:<8} {:<10} {:>8} {:>6} {:>6}  RUN", "ID", "KIND", "STATE", "ATTEMPTS", "USED", "STEP");
                for j in &jobs {
                    let step = j.step.map_or("-".to_string(), |s| s.to_string());
                    let used = format!("{}/{}", j.attempts_used, j.max_attempts);
                    println!(
                        "{:>5} {:<8} {:<10} {:>8} {:>6} {:>6}  {}",
                        j.id,
                        j.spec.kind().as_str(),
                        j.state.as_str(),
                        j.attempts.len(),
                        used,
                        step,
                        j.spec.run()
                    );
                }
            }
        }
        JobsCommand::Submit { run, store, dataset, max_attempts, argv } => {
            let spec = CommandSpec { dataset: dataset.clone(), ..CommandSpec::new(argv, run, store) };
            let job = JobSubmit::new(JobSpec::Command(spec), Some(*max_attempts));
            let queued = client.submit(&job).await.map_err(|e| Failure::input(e.to_string()))?;
            show(global, &queued, "queued");
        }
        JobsCommand::Cancel { id } => show(global, &client.cancel(*id).await.map_err(failed)?, "cancel requested"),
        JobsCommand::Logs { id, follow } => {
            let mut after = 0;
            loop {
                for line in client.logs(*id, after).await.map_err(failed)? {
                    println!("{}", line.text);
                    after = line.seq;
                }
                if !follow || client.job(*id).await.map_err(failed)?.state.is_final() {
                    break;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    Ok(())
}

fn show(global: &Global, job: &Job, what: &str) {
    if global.json {
        println!("{}", serde_json::to_string(job).expect("serializable"));
    } else {
        println!("job {} {what} ({})", job.id, job.state.as_str());
    }
}
