//! `tuneline.toml` loading: what a user sees when the file is right and when it is wrong.

use tuneline_core::config::{
    ComputeDevice, Config, ConfigError, LrSchedulerType, SaveSteps, TEMPLATE,
};

fn no_env(_: &str) -> Option<String> {
    None
}

fn problems(text: &str) -> String {
    match Config::parse(text, "tuneline.toml", no_env) {
        Ok(_) => panic!("config should be rejected:\n{text}"),
        Err(e @ ConfigError::Invalid { .. }) => e.to_string(),
        Err(e) => panic!("unexpected error {e}"),
    }
}

#[test]
fn template_parses_with_every_section_and_hf_names() {
    let loaded =
        Config::parse(TEMPLATE, "tuneline.toml", no_env).expect("the init template is valid");
    let c = loaded.config;
    assert_eq!(c.training.max_steps, Some(500));
    assert_eq!(c.training.per_device_train_batch_size, 2);
    assert_eq!(c.training.lr_scheduler_type, LrSchedulerType::Cosine);
    assert_eq!(c.training.save_steps, SaveSteps::Steps(250));
    assert_eq!(c.lora.lora_r, 64);
    assert_eq!(c.model.device, ComputeDevice::Auto);
    for (text, device) in [
        ("cpu", ComputeDevice::Cpu),
        ("cuda", ComputeDevice::Cuda(0)),
        ("cuda:3", ComputeDevice::Cuda(3)),
    ] {
        let c = Config::parse(&format!("[model]\ndevice = \"{text}\"\n"), "tuneline.toml", no_env)
            .expect("a device")
            .config;
        assert_eq!(c.model.device, device);
    }
    assert_eq!(c.lora.target_modules.len(), 7);
    for section in [
        "[project]",
        "[store]",
        "[model]",
        "[data]",
        "[training]",
        "[lora]",
        "[workers]",
        "[providers.local]",
        "[server]",
        "[cost]",
    ] {
        assert!(TEMPLATE.contains(section), "template lacks {section}");
    }
}

#[test]
fn unknown_key_names_full_path_line_and_closest_key() {
    let msg = problems("[training]\nlearning_rate = 1e-4\nlora_rr = 8\n");
    assert_eq!(msg, "tuneline.toml:3: training.lora_rr: unknown key in [training]; did you mean `lora_r` in [lora]?");
    let msg = problems("[training]\nlearnig_rate = 1e-4\n");
    assert_eq!(msg, "tuneline.toml:2: training.learnig_rate: unknown key in [training]; did you mean `learning_rate`?");
    let msg = problems("[data]\ndedup = { exact = true, treshold = 0.5 }\n");
    assert!(msg.contains("data.dedup.treshold") && msg.contains("`threshold`"), "{msg}");
    let msg = problems("[trainig]\nmax_steps = 1\n");
    assert!(
        msg.contains(
            "tuneline.toml:1: trainig: unknown key at the top level; did you mean `training`?"
        ),
        "{msg}"
    );
}

#[test]
fn out_of_range_values_name_field_and_allowed_range() {
    let msg = problems("[lora]\nlora_r = 0\n[training]\nlearning_rate = -1\n");
    let lines: Vec<&str> = msg.lines().collect();
    assert_eq!(
        lines,
        [
            "tuneline.toml:2: lora.lora_r: 0 is out of range; allowed: 1..=4096",
            "tuneline.toml:4: training.learning_rate: -1 is out of range; allowed: 0 < x <= 1",
        ]
    );
}

#[test]
fn wrong_type_names_field_and_line() {
    let msg = problems("[lora]\nlora_r = \"eight\"\n");
    assert!(
        msg.starts_with("tuneline.toml:2: lora.lora_r: invalid type: a string, expected u32"),
        "{msg}"
    );
    // A value in the wrong key may be a secret: it is never repeated.
    let msg = problems("[training]\nlearning_rate = \"sk-live-\\\"quoted\\\"-secret\"\n");
    assert!(
        msg.contains("training.learning_rate: invalid type: a string, expected f64")
            && !msg.contains("secret"),
        "{msg}"
    );
    let msg = problems("[training]\nlr_scheduler_type = \"cosin\"\n");
    assert!(msg.contains("training.lr_scheduler_type") && msg.contains("`cosine`"), "{msg}");
    let msg = problems("[model]\ndevice = \"gpu\"\n");
    assert!(
        msg.starts_with("tuneline.toml:2: model.device: `gpu` is not a device")
            && msg.contains("\"cuda:N\""),
        "{msg}"
    );
    let msg = problems("[workers]\nidle_timeout = \"soon\"\n");
    assert!(msg.contains("workers.idle_timeout") && msg.contains("\"30m\""), "{msg}");
}

#[test]
fn syntax_error_gives_line() {
    let msg = problems("[project]\nname = \n");
    assert!(msg.starts_with("tuneline.toml:2:"), "{msg}");
    // The line is quoted by its key alone.
    let msg = problems("[store]\nsecret_access_key = \"wJalrXUtnFEMI/K7MDENG\n");
    assert!(
        msg.starts_with("tuneline.toml:2:")
            && msg.contains("`secret_access_key = …`")
            && !msg.contains("wJalr"),
        "{msg}"
    );
}

#[test]
fn secrets_come_from_env_over_file_and_are_masked() {
    let text = "[store]\naccess_key_id = \"AKIAFILEKEY\"\nsecret_access_key = \"filesecret\"\n";
    let env = |k: &str| (k == "AWS_SECRET_ACCESS_KEY").then(|| "envsecret".to_string());
    let loaded = Config::parse(text, "t.toml", env).unwrap();
    let store = &loaded.config.store;
    assert_eq!(store.access_key_id.as_ref().unwrap().expose(), "AKIAFILEKEY");
    assert_eq!(store.secret_access_key.as_ref().unwrap().expose(), "envsecret");
    assert_eq!(
        loaded.secret_sources,
        [
            ("store.access_key_id".to_string(), "file".to_string()),
            ("store.secret_access_key".to_string(), "env AWS_SECRET_ACCESS_KEY".to_string()),
        ]
    );
    let shown = format!("{:?} {}", loaded.config, toml::to_string(&loaded.config).unwrap());
    assert!(!shown.contains("AKIAFILEKEY") && !shown.contains("envsecret"), "{shown}");

    let token =
        Config::parse("", "t.toml", |k| (k == "TUNELINE_TOKEN").then(|| "tok".into())).unwrap();
    assert_eq!(token.config.server.token.unwrap().expose(), "tok");
}

#[test]
fn bad_names_are_rejected() {
    let msg = problems("[project]\nname = \"../escape\"\n");
    assert!(msg.contains("project.name") && msg.contains("not a valid name"), "{msg}");
}

#[test]
fn a_ranked_pool_lists_rented_providers_each_once_each_with_its_table() {
    let msg = problems("[workers]\nproviders = [\"aws\", \"local\", \"lambda\", \"aws\"]\n[providers.aws]\nregion = \"us-east-1\"\n");
    assert!(
        msg.contains(
            "tuneline.toml:2: workers.providers[1]: is \"local\"; the ranked pool rents machines"
        ),
        "{msg}"
    );
    assert!(msg.contains("workers.providers[2]: is \"lambda\", which has no [providers.lambda] table; add one naming its instance_type and region"), "{msg}");
    assert!(msg.contains("workers.providers[3]: lists \"aws\" twice"), "{msg}");
    let c = Config::parse(
        "[workers]\nproviders = [\"aws\"]\n[providers.aws]\ninstance_type = \"g5.xlarge\"\nregion = \"us-east-1\"\nimage = \"ami-1\"\nbinary_url = \"https://x/tuneline\"\n",
        "tuneline.toml",
        no_env,
    ).unwrap().config;
    assert_eq!(
        c.workers.launching(),
        [tuneline_core::config::ProviderKind::Aws],
        "the list replaces provider"
    );
    assert_eq!(
        Config::parse("", "tuneline.toml", no_env).unwrap().config.workers.launching(),
        [tuneline_core::config::ProviderKind::Local]
    );
}

#[test]
fn a_misspelt_provider_a_missing_key_and_another_providers_key_are_named_at_load() {
    let msg = problems("[workers]\nprovider = \"awz\"\n");
    assert!(
        msg.contains(
            "tuneline.toml:2: workers.provider: `awz` is not a provider; did you mean `aws`?"
        ),
        "{msg}"
    );

    let msg = problems(
        "[workers]\nprovider = \"aws\"\n\n[providers.aws]\ninstance_type = \"g5.xlarge\"\n",
    );
    assert!(
        msg.contains(
            "tuneline.toml:4: providers.aws.region: is missing; name the region to launch in"
        ),
        "{msg}"
    );
    assert!(
        msg.contains("tuneline.toml:4: providers.aws.image: is missing; name the AMI"),
        "{msg}"
    );

    let msg =
        problems("[providers.runpod]\nimage = \"x\"\nhosts = [\"a@b\"]\ncloud_type = \"SECURE\"\n[providers.aws]\ncloud_type = \"SECURE\"\n[providers.awz]\n");
    assert!(msg.contains("tuneline.toml:3: providers.runpod.hosts: `hosts` is a key of [providers.ssh], not of [providers.runpod]"), "{msg}");
    assert!(msg.contains("tuneline.toml:6: providers.aws.cloud_type: `cloud_type` is a key of [providers.runpod]"), "{msg}");
    assert!(
        msg.contains(
            "tuneline.toml:7: providers.awz: unknown key in [providers]; did you mean `aws`?"
        ),
        "{msg}"
    );

    let msg = problems("[workers]\nprovider = \"ssh\"\n");
    assert!(
        msg.contains("workers.provider: is \"ssh\", which has no [providers.ssh] table"),
        "{msg}"
    );
}

#[test]
fn a_slurm_time_limit_is_typed_and_one_slurm_would_refuse_is_refused_at_load() {
    let time = |text: &str| {
        let c = Config::parse(
            &format!("[providers.slurm]\ntime_limit = {text}\n"),
            "tuneline.toml",
            no_env,
        )
        .unwrap()
        .config;
        c.providers.slurm.unwrap().time_limit.unwrap().sbatch()
    };
    assert_eq!(
        time("\"4h\""),
        "0-04:00:00",
        "the doc comment's own form reaches sbatch as Slurm reads it"
    );
    assert_eq!(time("\"30m\""), "0-00:30:00");
    assert_eq!(time("240"), "0-04:00:00");
    assert_eq!(time("\"1-12:00:00\""), "1-12:00:00");
    let msg = problems("[providers.slurm]\ntime_limit = \"4 hours please\"\n");
    assert!(
        msg.contains(
            "tuneline.toml:2: providers.slurm.time_limit: `4 hours please` is no time limit"
        ),
        "{msg}"
    );
    let msg = problems("[providers.runpod]\ncloud_type = \"SECUR\"\n");
    assert!(msg.contains("providers.runpod.cloud_type"), "{msg}");
}

#[test]
fn fsdp_without_a_gang_is_refused_at_its_line() {
    let msg = problems("[training]\nengine = \"torch\"\nfsdp = true\n");
    assert!(
        msg.starts_with("tuneline.toml:3: training.fsdp: shards the base over a gang's members")
            && msg.contains("set gpus or nodes above 1"),
        "{msg}"
    );
    let text = "[training]\nengine = \"torch\"\ngpus = \"all\"\nfsdp = true\n";
    assert!(Config::parse(text, "tuneline.toml", no_env).unwrap().config.training.fsdp);
    let qlora =
        "[model]\nload_in_4bit = true\n[training]\nengine = \"torch\"\ngpus = 2\nfsdp = true\n";
    assert!(
        Config::parse(qlora, "tuneline.toml", no_env).unwrap().config.training.fsdp,
        "QLoRA + FSDP"
    );
}
