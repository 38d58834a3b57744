//! `tuneline store ls | push | pull | verify | gc`.

use std::time::Instant;

use indicatif::HumanBytes;
use tuneline_store::{ArtifactStore, GcOptions, StoreError};

use crate::cli::{Global, StoreCommand};
use crate::context::{load_config, open_store};
use crate::exit::{CliResult, Failure};
use crate::progress::Shown;

/// Runs a `tuneline store` command.
pub async fn run(global: &Global, command: &StoreCommand) -> CliResult {
    let loaded = load_config(global, true)?;
    let store = open_store(global, &loaded.config)?;
    match command {
        StoreCommand::Ls { prefix } => ls(global, &store, prefix).await,
        StoreCommand::Push { local_dir, prefix } => {
            let (commit, secs) = with_progress(global, &format!("push {prefix}"), async |p| {
                store.push_dir_following_links(local_dir, prefix, p).await
            })
            .await?;
            if global.json {
                print_json(&serde_json::json!({ "commit": commit, "seconds": secs }));
            } else {
                let size = commit.total_size();
                println!(
                    "committed {prefix}: {} files, {} in {secs:.1}s ({}/s)",
                    commit.files.len(),
                    HumanBytes(size),
                    HumanBytes((size as f64 / secs.max(1e-3)) as u64)
                );
            }
            Ok(())
        }
        StoreCommand::Pull { prefix, local_dir } => {
            let (report, secs) = with_progress(global, &format!("pull {prefix}"), async |p| {
                store.pull(prefix, local_dir, p).await
            })
            .await?;
            if global.json {
                print_json(&serde_json::json!({ "report": report, "seconds": secs }));
            } else {
                println!(
                    "pulled {prefix} into {}: {} of {} files transferred ({}), {} already in place, in {secs:.1}s",
                    local_dir.display(),
                    report.files_transferred,
                    report.files,
                    HumanBytes(report.bytes_transferred),
                    report.files - report.files_transferred,
                );
            }
            Ok(())
        }
        StoreCommand::Verify { prefix } => verify(global, &store, prefix).await,
        StoreCommand::Gc { dry_run, older_than } => {
            let opts = GcOptions {
                dry_run: *dry_run,
                older_than: *older_than,
                save_total_limit: loaded.config.training.save_total_limit,
            };
            let removals = store.gc(&opts).await?;
            if global.json {
                print_json(&serde_json::json!({ "dry_run": dry_run, "removals": removals }));
                return Ok(());
            }
            let verb = if *dry_run { "would remove" } else { "removed" };
            for r in &removals {
                println!("{verb} {}  ({}, {})", r.key, r.reason, HumanBytes(r.bytes));
            }
            let freed: u64 = removals.iter().map(|r| r.bytes).sum();
            println!("{verb} {} item(s), {}", removals.len(), HumanBytes(freed));
            Ok(())
        }
    }
}

async fn ls(global: &Global, store: &ArtifactStore, prefix: &str) -> CliResult {
    let listing = store.list_committed(prefix).await?;
    for (broken, what) in &listing.broken {
        eprintln!(
            "warning: {broken} is committed but {what}; run `tuneline store verify {broken}`"
        );
    }
    if global.json {
        print_json(&serde_json::to_value(&listing.artifacts).expect("serializable"));
        return Ok(());
    }
    if listing.artifacts.is_empty() {
        println!("no committed artifacts{} in {}", under(prefix), store.url());
        return Ok(());
    }
    let width = listing.artifacts.iter().map(|a| a.prefix.len()).max().unwrap_or(0).max(6);
    println!("{:width$}  {:>6}  {:>10}  COMMITTED", "PREFIX", "FILES", "SIZE");
    for a in &listing.artifacts {
        println!(
            "{:width$}  {:>6}  {:>10}  {}",
            a.prefix,
            a.files,
            HumanBytes(a.size).to_string(),
            a.committed_at
        );
    }
    Ok(())
}

async fn verify(global: &Global, store: &ArtifactStore, prefix: &str) -> CliResult {
    let (results, _) =
        with_progress(global, &format!("verify {prefix}"), async |p| store.verify(prefix, p).await)
            .await?;
    let bad: usize = results.iter().map(|r| r.problems.len()).sum();
    if global.json {
        print_json(&serde_json::json!({ "ok": bad == 0, "artifacts": results }));
    } else {
        for r in &results {
            if r.problems.is_empty() {
                println!("ok       {} ({} files)", r.prefix, r.files);
            }
            for p in &r.problems {
                println!("CORRUPT  {}: {}", p.key, p.problem);
            }
        }
    }
    if bad > 0 {
        return Err(Failure::verification(format!(
            "{bad} file(s) corrupt or missing{}",
            under(prefix)
        )));
    }
    Ok(())
}

/// Runs a transfer while showing its progress; returns its result and the seconds it took.
async fn with_progress<T>(
    global: &Global,
    what: &str,
    transfer: impl AsyncFnOnce(&Shown) -> Result<T, StoreError>,
) -> CliResult<(T, f64)> {
    let shown = Shown::new(what, global.quiet || global.json);
    let started = Instant::now();
    let result = transfer(&shown).await;
    shown.finish();
    Ok((result?, started.elapsed().as_secs_f64()))
}

/// " under `PREFIX`", or nothing for the whole store.
fn under(prefix: &str) -> String {
    if prefix.is_empty() {
        String::new()
    } else {
        format!(" under `{prefix}`")
    }
}

fn print_json(value: &serde_json::Value) {
    println!("{}", serde_json::to_string_pretty(value).expect("serializable"));
}
