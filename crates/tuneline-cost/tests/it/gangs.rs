//! Gangs in the plan: an offer is priced for the GPUs the job uses on every
//! machine of the gang, its throughput scales by what links them, its ETH
//! counts every GPU's hours, and an offer without the gang's GPUs is left
//! out with why.

use tuneline_core::config::{Config, Gpus};
use tuneline_cost::catalog::Catalog;
use tuneline_cost::config_job::{self, Overrides};
use tuneline_cost::models::ModelShape;
use tuneline_cost::plan::{plan, Cause, Estimate, Market, Plan, Shape};
use tuneline_cost::scaling::Interconnect;

/// The guide's QLoRA job on Qwen2.5-7B, 500 steps of `accumulation`
/// micro-batches, with `extra` appended to `[training]`.
fn config(accumulation: u32, extra: &str) -> Config {
    let text = format!(
        "[project]\nname = \"gangs\"\n[model]\npath = \"qwen2.5-7b\"\nload_in_4bit = true\n\
         [data]\nmax_seq_length = 4096\n[training]\nengine = \"torch\"\nmax_steps = 500\n\
         per_device_train_batch_size = 1\ngradient_accumulation_steps = {accumulation}\n{extra}"
    );
    Config::parse(&text, "tuneline.toml", |_| None).unwrap_or_else(|e| panic!("{e}")).config
}

fn ranked(config: &Config, gpus: Option<Gpus>, nodes: Option<u32>) -> Plan {
    let job =
        config_job::job(config, ModelShape::preset("qwen2.5-7b").unwrap(), &Overrides::default())
            .unwrap();
    let shapes = config_job::shapes(config, gpus, nodes).unwrap();
    plan(&job, &shapes, &Catalog::shipped(), None, chrono::NaiveDate::MIN, i64::MAX)
}

fn find<'p>(plan: &'p Plan, offer: &str, market: Market, gpus: u32, nodes: u32) -> &'p Estimate {
    plan.ranked
        .iter()
        .find(|e| {
            e.offer == offer && e.market == market && e.gang.gpus == gpus && e.gang.nodes == nodes
        })
        .unwrap_or_else(|| panic!("{offer} {market:?} on {gpus} x {nodes}: {plan:#?}"))
}

#[test]
fn a_gang_is_priced_for_every_machine_and_scales_by_its_links_against_one_gpu() {
    let c = config(8, "");
    let plan = ranked(&c, Some(Gpus::All), Some(2));
    let p4d = "aws/p4d.24xlarge/us-east-1";
    let one = find(&plan, p4d, Market::OnDemand, 1, 1);
    assert_eq!((one.interconnect, one.scaling, one.price_per_hour), (None, 1.0, 21.96));
    assert_eq!(one.hardware, "1/8x A100-40GB", "one GPU of eight, and the whole machine billed");
    let gang = find(&plan, p4d, Market::OnDemand, 8, 2);
    assert_eq!(gang.hardware, "2 x 8x A100-40GB");
    assert_eq!(gang.price_per_hour, 2.0 * 21.96, "both machines billed");
    assert_eq!(gang.interconnect, Some(Interconnect::Network));
    // Eight micro-batches a step over sixteen GPUs: half of them wait.
    assert!(gang.scaling < 0.5, "{gang:?}");
    assert!(
        (gang.tokens - one.tokens).abs() < 1e-6,
        "the same job: {} {}",
        gang.tokens,
        one.tokens
    );
    // ETH divides by the hours of every GPU the job uses.
    let eth = gang.total_cost / (gang.work_h * 16.0 * c.cost.utilization);
    assert!((gang.eth - eth).abs() < 1e-9, "{} against {eth}", gang.eth);
    assert!(gang.eth > one.eth / 8.0, "idle halves of a gang cost ETH");

    // With 16 micro-batches a step, one machine of 8 NVLinked GPUs nearly
    // reaches eight times one GPU; two machines over the network reach less.
    let c = config(16, "");
    let plan = ranked(&c, Some(Gpus::All), None);
    let p4d_one = find(&plan, p4d, Market::OnDemand, 1, 1);
    let p4d_all = find(&plan, p4d, Market::OnDemand, 8, 1);
    assert_eq!(p4d_all.interconnect, Some(Interconnect::Nvlink));
    assert!(p4d_all.scaling > 0.99, "{p4d_all:?}");
    assert!(
        (p4d_all.tokens_per_second / p4d_one.tokens_per_second - 8.0 * p4d_all.scaling).abs()
            < 1e-6
    );
    let g5 = find(&plan, "aws/g5.12xlarge/us-east-1", Market::OnDemand, 4, 1);
    assert_eq!(g5.interconnect, Some(Interconnect::Pcie));
    // A10Gs compute slowly enough that PCIe's all-reduce costs them little.
    assert!(g5.scaling < 1.0 && g5.scaling > 0.99, "{g5:?}");
    let two = ranked(&c, Some(Gpus::All), Some(2));
    let across = find(&two, p4d, Market::OnDemand, 8, 2);
    assert!(across.scaling < p4d_all.scaling, "{across:?}");
    // A spot gang is stopped by a preemption of any of its machines.
    let spot_one = find(&plan, p4d, Market::Spot, 8, 1);
    let spot_two = find(&two, p4d, Market::Spot, 8, 2);
    assert!((spot_two.mtbf_h.unwrap() * 2.0 - spot_one.mtbf_h.unwrap()).abs() < 1e-9);
}

#[test]
fn gpus_beyond_an_offer_leave_it_out_and_a_tight_deadline_makes_a_gang_the_cheapest() {
    let c = config(8, "gpus = 4\n");
    let plan = ranked(&c, None, None);
    let out = plan
        .excluded
        .iter()
        .find(|x| x.offer == "aws/g5.xlarge/us-east-1" && x.cause == Cause::Gpus)
        .expect("a one-GPU offer cannot hold four");
    assert!(out.reason.contains("has 1 GPU(s) per machine") && out.reason.contains("4"), "{out:?}");
    assert!(plan.ranked.iter().all(|e| e.gang.gpus == 1 || e.gang.gpus == 4), "{plan:#?}");
    assert!(
        plan.excluded.iter().any(|x| x.offer.contains("c7i") && x.cause == Cause::Gpus),
        "CPU machines train no gang"
    );

    // The job takes 3 h on one H100: within 1 h only gangs finish it.
    let c = config(16, "[cost]\ndeadline = \"1h\"\n");
    let plan = ranked(&c, Some(Gpus::All), None);
    let cheapest = plan.cheapest().expect("a gang meets the deadline");
    assert!(cheapest.gang.world() > 1 && cheapest.wall_h <= 1.0, "{cheapest:?}");
    assert!(plan.excluded.iter().any(|x| x.cause == Cause::Deadline));

    let mut native = config(8, "");
    (native.training.engine, native.model.load_in_4bit) =
        (tuneline_core::config::Engine::Native, false);
    let e = config_job::shapes(&native, Some(Gpus::Count(2)), None).unwrap_err().to_string();
    assert!(e.contains("the native engine trains on one GPU"), "{e}");
    assert_eq!(
        config_job::shapes(&native, None, None).unwrap(),
        [Shape::SINGLE],
        "one GPU for a native job"
    );
}

/// A 16-bit Qwen2.5-32B (64 GB of weights), and a 4-bit Qwen2.5-72B
/// (QLoRA: 41 GB in nf4 blocks and 16-bit embeddings), fit no A100-40GB
/// whole. A gang of the p4d's eight left whole is left out, saying that
/// `fsdp` would shard it; with `fsdp = true` each GPU holds an eighth,
/// and the plan prices the gathers every pass makes.
#[test]
fn a_base_too_big_for_one_gpu_is_planned_sharded_over_the_gang_with_fsdp() {
    let p4d = "aws/p4d.24xlarge/us-east-1";
    for (model, load_in_4bit) in [("qwen2.5-32b", false), ("qwen2.5-72b", true)] {
        let job = |fsdp: bool| {
            let text = format!(
                "[project]\nname = \"fsdp\"\n[model]\npath = \"{model}\"\nload_in_4bit = {load_in_4bit}\n\
                 [data]\nmax_seq_length = 2048\n\
                 [training]\nengine = \"torch\"\nmax_steps = 100\nper_device_train_batch_size = 1\n\
                 gradient_accumulation_steps = 2\ngradient_checkpointing = true\ngpus = \"all\"\nfsdp = {fsdp}\n"
            );
            let c = Config::parse(&text, "tuneline.toml", |_| None)
                .unwrap_or_else(|e| panic!("{e}"))
                .config;
            let shape = ModelShape::preset(model).unwrap();
            let job = config_job::job(&c, shape, &Overrides::default()).unwrap();
            let shapes = config_job::shapes(&c, None, None).unwrap();
            plan(&job, &shapes, &Catalog::shipped(), None, chrono::NaiveDate::MIN, i64::MAX)
        };
        let whole = job(false);
        let out = whole
            .excluded
            .iter()
            .find(|e| e.offer == p4d && e.market == Market::OnDemand && e.reason.contains("fsdp"))
            .unwrap_or_else(|| panic!("{model}: {:#?}", whole.excluded));
        assert_eq!(out.cause, Cause::Memory);
        assert!(out.reason.contains("gang's 8"), "{}", out.reason);

        let sharded = job(true);
        let gang = find(&sharded, p4d, Market::OnDemand, 8, 1);
        eprintln!(
            "{model} (4-bit: {load_in_4bit}) on a p4d's 8 GPUs sharded: {:.1} GiB a GPU, scaling {:.4}",
            gang.peak_gib, gang.scaling
        );
        assert!(
            gang.peak_gib < 40.0 * 0.85,
            "an eighth of the base and two layers gathered: {gang:?}"
        );
        assert!(gang.scaling < 1.0, "the gathers cost something: {gang:?}");
        assert!(
            sharded.ranked.iter().all(|e| !(e.offer == p4d && e.gang.gpus == 1)),
            "{model}: one A100-40GB still cannot hold it"
        );
    }
}
