//! The training pool of `[workers] providers`: the listed tables' instance
//! types, priced by the catalog and ranked for the config's job by what the
//! job is expected to cost, as `tuneline plan` ranks; the phase, memory fit,
//! deadline and the data's region all count, and what is left out says why.

use tuneline_core::config::{Config, ProviderKind};
use tuneline_cost::config_job::{self, training_pool, Overrides};
use tuneline_cost::models::ModelShape;
use tuneline_cost::plan::{Cause, Market};

/// A 500-step QLoRA job on Qwen2.5-7B at 4096 tokens, with `extra` appended.
fn config(extra: &str) -> Config {
    let text = format!(
        r#"
[project]
name = "pool"
[model]
path = "qwen2.5-7b"
quantized_base = true
[data]
max_seq_length = 4096
[training]
max_steps = 500
per_device_train_batch_size = 1
gradient_accumulation_steps = 1
[workers]
providers = ["aws", "lambda"]
[providers.aws]
region = "us-east-1"
image = "ami-03cf127a"
spot = true
instance_type = "g6e.xlarge"
fallback_instance_types = ["g5.xlarge", "c7i.4xlarge"]
[providers.lambda]
region = "us-east-1"
instance_type = "gpu_1x_a10"
fallback_instance_types = ["gpu_1x_h100_pcie"]
{extra}
"#
    );
    Config::parse(&text, "tuneline.toml", |_| None).unwrap_or_else(|e| panic!("{e}")).config
}

fn ranked(config: &Config) -> (Vec<config_job::PoolOffer>, Vec<tuneline_cost::plan::Excluded>) {
    let job =
        config_job::job(config, ModelShape::preset("qwen2.5-7b").unwrap(), &Overrides::default())
            .unwrap();
    training_pool(config, &job).unwrap()
}

#[test]
fn offers_of_every_listed_provider_rank_by_the_jobs_expected_cost_and_a_cpu_too_small_is_left_out()
{
    let (pool, out) = ranked(&config(""));
    let ids: Vec<&str> = pool.iter().map(|p| p.estimate.offer.as_str()).collect();
    assert_eq!(pool.len(), 4, "two providers' GPUs: {ids:?}");
    assert!(
        pool.windows(2).all(|w| w[0].estimate.total_cost <= w[1].estimate.total_cost),
        "cheapest job first: {ids:?}"
    );
    assert!(
        pool.iter().any(|p| p.provider == ProviderKind::Lambda)
            && pool.iter().any(|p| p.provider == ProviderKind::Aws),
        "{ids:?}"
    );
    let aws = pool.iter().find(|p| p.provider == ProviderKind::Aws).unwrap();
    assert_eq!(aws.estimate.market, Market::Spot, "aws's table asks for spot");
    let lambda = pool.iter().find(|p| p.provider == ProviderKind::Lambda).unwrap();
    assert_eq!(lambda.estimate.market, Market::OnDemand, "Lambda has no spot");
    // The CPU machine cannot hold a 7B job in its memory: out, with the figures.
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((out[0].offer.as_str(), out[0].cause), ("aws/c7i.4xlarge/us-east-1", Cause::Memory));
    assert!(
        out[0].reason.starts_with("needs ") && out[0].reason.contains(" GiB, has "),
        "{}",
        out[0].reason
    );
    let why = pool[0].why();
    assert!(
        why.starts_with("expected $")
            && why.contains("h for the job, ETH $")
            && why.contains("prices as of 2025-"),
        "{why}"
    );
}

#[test]
fn validation_rents_only_on_demand_gpus_so_spot_offers_leave_the_pool_with_the_reason() {
    let mut c = config("");
    c.workers.phase = tuneline_core::config::Phase::Validation;
    let (pool, out) = ranked(&c);
    assert!(
        pool.iter().all(|p| p.provider == ProviderKind::Lambda),
        "only on-demand GPUs: {:?}",
        pool.iter().map(|p| &p.estimate.offer).collect::<Vec<_>>()
    );
    assert!(
        out.iter().filter(|e| e.cause == Cause::Phase).all(|e| e.offer.starts_with("aws/")),
        "{out:?}"
    );
    assert!(
        out.iter().any(
            |e| e.offer == "aws/g5.xlarge/us-east-1" && e.reason == "validation runs on-demand"
        ),
        "{out:?}"
    );
}

#[test]
fn data_in_another_cloud_pays_egress_on_every_start_there() {
    let pool = ranked(&config("[cost]\ndata_region = \"aws/us-east-1\"")).0;
    let cost = |id: &str| pool.iter().find(|p| p.estimate.offer == id).unwrap().estimate.clone();
    assert_eq!(cost("aws/g5.xlarge/us-east-1").egress_cost, 0.0, "the data is beside it");
    let far = cost("lambda/gpu_1x_a10/us-east-1");
    assert!(far.egress_cost > 0.0, "the data leaves AWS for Lambda on every start");
    let beside =
        ranked(&config("")).0.into_iter().find(|p| p.estimate.offer == far.offer).unwrap().estimate;
    assert!(
        far.total_cost > beside.total_cost && far.restart_h > beside.restart_h,
        "slower starts and egress cost more"
    );
}

#[test]
fn a_listed_type_the_catalog_lacks_and_a_spot_table_without_a_spot_price_are_named_with_what_to_do()
{
    let mut c = config("");
    c.providers.aws.as_mut().unwrap().fallback_instance_types.push("g9.huge".into());
    let job = config_job::job(&c, ModelShape::preset("qwen2.5-7b").unwrap(), &Overrides::default())
        .unwrap();
    let e = training_pool(&c, &job).unwrap_err().to_string();
    assert!(e.contains("providers.aws: the catalog has no aws/g9.huge/us-east-1; add it with its prices to [cost] catalog"), "{e}");

    let mut c = config("");
    c.providers.lambda.as_mut().unwrap().spot = true;
    let e = training_pool(&c, &job).unwrap_err().to_string();
    assert!(
        e.contains(
            "providers.lambda: the catalog has no spot price for lambda/gpu_1x_a10/us-east-1"
        ) && e.contains("spot = false"),
        "{e}"
    );
}

#[test]
fn auto_save_steps_follows_the_pools_first_spot_offer() {
    let c = config("");
    let job = config_job::job(&c, ModelShape::preset("qwen2.5-7b").unwrap(), &Overrides::default())
        .unwrap();
    let first = training_pool(&c, &job).unwrap().0.remove(0);
    match config_job::auto_save_steps(&c, ModelShape::preset("qwen2.5-7b").unwrap()) {
        Ok((steps, why)) => {
            assert_eq!(first.estimate.market, Market::Spot);
            assert_eq!(Some(steps), first.estimate.save_steps);
            assert!(why.contains(&first.estimate.offer), "{why}");
        }
        Err(e) => assert!(
            first.estimate.market == Market::OnDemand && e.to_string().contains("runs on-demand"),
            "{e}"
        ),
    }
}
