//! Preparing a dataset version from the config's inputs and committing it
//! to the store, with progress bars: `tuneline data prepare` and `tuneline
//! run` both start here.

use std::path::PathBuf;

use indicatif::HumanBytes;

use tuneline_data::prepare::{build, plan, Manifest, MANIFEST};
use tuneline_store::{ArtifactStore, StoreError};

use crate::cli::Global;
use crate::exit::{CliResult, Failure};
use crate::progress::Shown;

/// Prepares `inputs` (or `[data] inputs`) into a committed dataset version,
/// unless it is already committed; returns its prefix.
pub async fn prepare(
    global: &Global,
    store: &ArtifactStore,
    config: &tuneline_core::config::Config,
    inputs: &[String],
) -> CliResult<String> {
    let base = PathBuf::from(".");
    let wanted = if inputs.is_empty() { &config.data.inputs } else { inputs };
    let local = fetch_store_inputs(global, store, config, wanted).await?;
    let plan = tokio::task::block_in_place(|| plan(config, &base, &local))?;
    let prefix = plan.prefix();
    if store.is_committed(&prefix).await? {
        let manifest = manifest_at(store, &prefix).await?;
        return report(global, &manifest, &prefix, "is up to date; nothing to do").map(|()| prefix);
    }
    let staging =
        PathBuf::from(".tuneline/staging").join(format!("{}-{}", plan.name, plan.version));
    let _ = std::fs::remove_dir_all(&staging);
    let shown = Shown::new(&format!("prepare {}", plan.name), global.quiet || global.json);
    let manifest = tokio::task::block_in_place(|| build(&plan, config, &staging, &shown));
    shown.finish();
    let manifest = manifest?;
    let upload = Shown::new(&format!("commit {prefix}"), global.quiet || global.json);
    let pushed = store.push_dir(&staging, &prefix, &upload).await;
    upload.finish();
    match pushed {
        Ok(_) | Err(StoreError::AlreadyCommitted { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let _ = std::fs::remove_dir_all(&staging);
    report(global, &manifest, &prefix, "committed").map(|()| prefix)
}

/// Inputs written `store:PREFIX` name committed artifacts in the store (raw
/// data pushed with `tuneline store push`); inputs written `s3://bucket/key`
/// name plain objects, or every object under a prefix, uploaded with any tool
/// (same endpoint and credentials as the store). Both are brought into the
/// local cache, which skips files already current, and read from there.
async fn fetch_store_inputs(
    global: &Global,
    store: &ArtifactStore,
    config: &tuneline_core::config::Config,
    inputs: &[String],
) -> CliResult<Vec<String>> {
    let cache = std::path::Path::new(tuneline_core::layout::LOCAL_CACHE).join("inputs");
    let mut local = Vec::with_capacity(inputs.len());
    for input in inputs {
        let shown = || Shown::new(&format!("fetch {input}"), global.quiet || global.json);
        if let Some(prefix) = input.strip_prefix("store:") {
            let dir = cache.join(prefix.trim_matches('/'));
            tuneline_store::check_key(prefix)?;
            let progress = shown();
            let pulled = store.pull(prefix, &dir, &progress).await;
            progress.finish();
            pulled?;
            local.push(dir.display().to_string());
        } else if let Some(path) = input.strip_prefix("s3://") {
            let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
            let bucket_store = ArtifactStore::open(&format!("s3://{bucket}"), &config.store)?;
            let parent = key.trim_matches('/').rsplit_once('/').map_or("", |(p, _)| p);
            let progress = shown();
            let files = bucket_store
                .mirror(key, &cache.join("s3").join(bucket).join(parent), &progress)
                .await;
            progress.finish();
            local.extend(files?.into_iter().map(|f| f.display().to_string()));
        } else {
            local.push(input.clone());
        }
    }
    Ok(local)
}

fn report(global: &Global, manifest: &Manifest, prefix: &str, what: &str) -> CliResult {
    if global.json {
        println!(
            "{}",
            serde_json::json!({ "prefix": prefix, "status": what, "manifest": manifest })
        );
    } else {
        println!("dataset {}@{} {what} ({prefix})", manifest.name, manifest.version);
        if !global.quiet {
            print!("{}", render(manifest));
        }
    }
    Ok(())
}

pub async fn manifest_at(store: &ArtifactStore, prefix: &str) -> CliResult<Manifest> {
    let bytes = store.read_committed(prefix, MANIFEST).await?;
    Manifest::parse(&bytes)
        .map_err(|e| Failure::failed(format!("{prefix}/{MANIFEST}: unreadable manifest: {e}")))
}

/// The human view of a manifest: counts at every stage, lengths, packing.
pub fn render(m: &Manifest) -> String {
    use std::fmt::Write;
    let s = &m.stats;
    let mut out = String::new();
    let bytes: u64 = m.inputs.iter().map(|i| i.size).sum();
    let _ = writeln!(out, "inputs       {} file(s), {}", m.inputs.len(), HumanBytes(bytes));
    for t in &m.truncated_inputs {
        let _ = writeln!(out, "  truncated  {t}");
    }
    let _ = writeln!(out, "read         {:>9}", s.input.read);
    section(&mut out, "rejected", &s.input.rejected);
    section(&mut out, "removed", &s.clean.removed);
    let d = &s.dedup;
    let _ = writeln!(
        out,
        "dedup        {:>9}  ({} exact, {} near; {} clusters, largest {})",
        d.exact_removed + d.near_removed,
        d.exact_removed,
        d.near_removed,
        d.clusters,
        d.largest_cluster
    );
    section(&mut out, "dropped", &s.tokenize.removed);
    for (role, n) in &s.input.unknown_roles {
        let _ = writeln!(out, "  unknown role `{role}`: {n}");
    }
    let _ = writeln!(out, "edited       (samples changed, kept)");
    for (edit, n) in &s.clean.edited {
        let _ = writeln!(out, "  {edit:<36} {n:>9}");
    }
    let _ = writeln!(out, "kept         {:>9}", s.kept);
    let l = &s.lengths;
    let _ = writeln!(
        out,
        "tokens/sample p50 {}, p90 {}, p99 {}, max {}, mean {:.0}",
        l.p50, l.p90, l.p99, l.max, l.mean
    );
    for (name, split) in &s.splits {
        let _ = writeln!(
            out,
            "{name:<12} {:>9} samples, {} rows, {} tokens ({} trained), packing efficiency {:.1}%",
            split.samples,
            split.rows,
            split.tokens,
            split.trained_tokens,
            split.packing_efficiency * 100.0
        );
    }
    out
}

/// A stage's total and its count per reason.
fn section(out: &mut String, title: &str, counts: &std::collections::BTreeMap<String, u64>) {
    use std::fmt::Write;
    let total: u64 = counts.values().sum();
    let _ = writeln!(out, "{title:<12} {total:>9}");
    for (reason, n) in counts {
        let _ = writeln!(out, "  {reason:<36} {n:>9}");
    }
}
