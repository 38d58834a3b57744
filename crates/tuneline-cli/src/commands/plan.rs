//! `tuneline plan`: the job in the config (or named on the command line)
//! priced on every catalog offer: memory fit, throughput, checkpoint
//! interval, expected wall time, $, ETH and $ per million tokens, ranked
//! by $ among the offers that meet `[cost] deadline`.

use std::path::Path;

use tuneline_core::config::Config;
use tuneline_core::layout;
use tuneline_cost::config_job::{self, Overrides};
use tuneline_cost::gpus::{self, Gpu};
use tuneline_cost::memory::Optimizer;
use tuneline_cost::plan::{Job, Phase};
use tuneline_cost::report::report;
use tuneline_train::setup::model_shape;

use crate::cli::{Global, PlanArgs};
use crate::context::{load_config, localize_model, open_store};
use crate::exit::{CliResult, Failure};

/// Runs `tuneline plan`. A `store:` base model is pulled into the cache to read its shape.
pub async fn plan(global: &Global, args: &PlanArgs) -> CliResult {
    let mut config = load_config(global, true)?.config;
    if args.model.is_none() && layout::store_ref(&config.model.path).is_some() {
        let store = open_store(global, &config)?;
        localize_model(global, &store, &mut config, Path::new(tuneline_core::layout::LOCAL_CACHE))
            .await?;
    }
    if args.refresh {
        refresh(&config).await?;
    }
    let catalog = config_job::catalog(&config).map_err(Failure::input)?;
    let job = job(&config, args)?;
    let shapes = config_job::shapes(&config, args.gpus, args.nodes).map_err(Failure::input)?;
    let only_gpu = args.gpu.as_deref().map(known_gpu).transpose()?;
    let report = report(&config, &catalog, job, shapes, only_gpu)
        .map_err(|e| Failure::input(e.to_string()))?;
    if global.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("plan serializes"));
        return Ok(());
    }
    print!("{}", report.render(args.top, config_job::max_age_days(&config)));
    Ok(())
}

/// `--refresh`: reads the clouds' prices into today's prices file and says what changed.
async fn refresh(config: &Config) -> CliResult {
    let today = chrono::Utc::now().date_naive();
    let listed = config_job::catalog(config).map_err(Failure::input)?;
    let read =
        tuneline_providers::refresh::read(config, &listed, today, &|k| std::env::var(k).ok()).await;
    if read.asked == 0 {
        return Err(Failure::input("--refresh: no cloud to ask; configure [providers.aws], [providers.runpod], [providers.vast] or [providers.lambda]"));
    }
    for note in &read.notes {
        eprintln!("warning: {note}");
    }
    if read.failed == read.asked {
        return Err(Failure::input(format!(
            "--refresh: no cloud answered ({} asked); see the warnings above",
            read.asked
        )));
    }
    let path = tuneline_cost::prices::write(
        Path::new(tuneline_cost::prices::PRICES_DIR),
        today,
        &read.prices,
    )
    .map_err(Failure::failed)?;
    eprintln!("refreshed {} price(s) into {}:", read.prices.len(), path.display());
    for price in &read.prices {
        let was = listed.offers.iter().find(|o| o.id == price.id);
        let show = |now: Option<f64>, before: Option<f64>| match (now, before) {
            (Some(now), Some(before)) => format!("${now:.4}/h (was ${before:.4}/h)"),
            (Some(now), None) => format!("${now:.4}/h"),
            (None, _) => "not offered".to_string(),
        };
        let on_demand = price
            .on_demand_per_hour
            .map(|p| format!(" on demand {}", show(Some(p), was.map(|o| o.on_demand_per_hour))))
            .unwrap_or_default();
        let spot = show(price.spot_per_hour, was.and_then(|o| o.spot_per_hour));
        eprintln!("  {}:{on_demand} spot {spot} ({})", price.id, price.source);
    }
    Ok(())
}

/// The job the config describes, with the command line's overrides.
fn job(config: &Config, args: &PlanArgs) -> CliResult<Job> {
    let phase = match args.phase.as_deref() {
        None => None,
        Some("experiment") => Some(Phase::Experiment),
        Some("validation") => Some(Phase::Validation),
        Some("delivery") => Some(Phase::Delivery),
        Some(other) => {
            return Err(Failure::input(format!(
                "--phase {other}: write experiment, validation or delivery"
            )))
        }
    };
    let optimizer = match args.optim.as_str() {
        "adamw_torch" | "adamw" => Optimizer::AdamW,
        "adamw_bnb_8bit" | "adamw_8bit" | "paged_adamw_8bit" => Optimizer::AdamW8bit,
        "sgd" => Optimizer::Sgd,
        other => {
            return Err(Failure::input(format!(
                "--optim {other}: write adamw_torch, adamw_bnb_8bit or sgd"
            )))
        }
    };
    let overrides = Overrides {
        quant: args.quant,
        max_seq_length: args.max_seq_length,
        batch: args.batch,
        steps: args.steps,
        phase,
        no_gradient_checkpointing: args.no_gradient_checkpointing,
        optimizer: Some(optimizer),
    };
    let shape = model_shape(args.model.as_deref().unwrap_or(&config.model.path))?;
    config_job::job(config, shape, &overrides).map_err(Failure::input)
}

fn known_gpu(name: &str) -> CliResult<&'static Gpu> {
    gpus::find(name).ok_or_else(|| {
        Failure::input(format!("--gpu {name}: not a GPU tuneline knows; known: {}", gpus::names()))
    })
}
