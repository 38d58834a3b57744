//! What every test starts from, made once per test binary: a random LoRA
//! adapter on the real SmolLM2 GGUF cut to its first blocks
//! (`smollm2_small_gguf`: every tensor kind, a third of the bytes; every
//! projection of every layer adapted, B not zero), merged into an f32 Hugging Face directory and exported as f32,
//! f16, q8_0 and q4_k_m GGUFs and as a LoRA GGUF.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use candle_core::{DType, Device, Tensor};
use rand::{Rng, SeedableRng};
use tuneline_deliver::gguf::adapter::export_checkpoint_adapter;
use tuneline_deliver::gguf::quant::Quant;
use tuneline_deliver::{gguf, hf_dir, merge};
use tuneline_model::llama::{Llama, Lora, LoraSettings};
use tuneline_model::{BaseModel, Origin};

/// LoRA rank and alpha of the test adapter.
pub const R: usize = 8;
/// LoRA alpha.
pub const ALPHA: f64 = 16.0;
/// The exported model's `general.name`.
pub const NAME: &str = "support-bot";
/// The base's tensors: nine a block, the embeddings and the final norm.
pub const TENSORS: usize = 9 * tuneline_testkit::SMALL_LAYERS as usize + 2;

/// The files the tests read.
pub struct Fixture {
    /// The base GGUF.
    pub base: PathBuf,
    /// The adapter checkpoint directory.
    pub adapter: PathBuf,
    /// The merged model, f32 safetensors.
    pub merged: PathBuf,
    /// The model GGUF of each export type.
    pub exports: HashMap<&'static str, PathBuf>,
    /// The LoRA GGUF.
    pub adapter_gguf: PathBuf,
    /// The base, unmerged, as an f32 GGUF.
    pub base_f32: PathBuf,
}

/// The shared fixture.
pub fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(make)
}

fn make() -> Fixture {
    let dir = fixture_dir();
    let base = tuneline_testkit::smollm2_small_gguf();
    let adapter = dir.join("checkpoint");
    random_adapter(&base, &adapter);
    let m = merge::merge(&base, &adapter).unwrap();
    let merged = dir.join("merged");
    hf_dir::write(&m, hf_dir::WeightDtype::F32, hf_dir::SHARD_BYTES, &merged).unwrap();
    let mut exports = HashMap::new();
    for quant in ["f32", "f16", "q8_0", "q4_k_m"] {
        let out = dir.join(format!("model.{quant}.gguf"));
        gguf::export(&m, quant.parse::<Quant>().unwrap(), NAME, &out).unwrap();
        exports.insert(quant, out);
    }
    let adapter_gguf = dir.join("adapter.gguf");
    export_checkpoint_adapter(&base, &adapter, NAME, &adapter_gguf).unwrap();
    let base_f32 = dir.join("base.f32.gguf");
    gguf::export(&merge::open(&base).unwrap(), Quant::F32, NAME, &base_f32).unwrap();
    Fixture { base, adapter, merged, exports, adapter_gguf, base_f32 }
}

/// The fixture's directory (660 MB): one per test process under Cargo's
/// scratch directory. A static is never dropped, so a temporary directory
/// would outlive every run; instead each run removes the directories of
/// processes that have ended.
fn fixture_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("delivery-fixture");
    for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        let pid = entry.file_name().to_string_lossy().parse::<u32>().ok();
        if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let dir = root.join(std::process::id().to_string());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A PEFT adapter on `base` with every projection adapted and B drawn at
/// random (a fresh adapter's B is zero), with its `origin.json`.
pub fn random_adapter(base: &Path, dir: &Path) {
    let config = Llama::read_config(base).unwrap();
    let settings = LoraSettings {
        r: R,
        lora_alpha: ALPHA,
        lora_dropout: 0.0,
        target_modules: config.linear_modules().into_iter().map(String::from).collect(),
        use_rslora: false,
    };
    Lora::init(settings, &config, 7, DType::F32, &Device::Cpu).unwrap().save(dir).unwrap();
    let file = dir.join("adapter_model.safetensors");
    let mut tensors: std::collections::BTreeMap<String, Tensor> =
        candle_core::safetensors::load(&file, &Device::Cpu).unwrap().into_iter().collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    for (name, t) in tensors.iter_mut() {
        if name.contains("lora_B") {
            let values: Vec<f32> =
                (0..t.elem_count()).map(|_| rng.random_range(-0.05f32..0.05)).collect();
            *t = Tensor::from_vec(values, t.dims(), &Device::Cpu).unwrap();
        }
    }
    candle_core::safetensors::save(&tensors.into_iter().collect(), &file).unwrap();
    Origin { base: BaseModel::identify(base).unwrap(), dataset: "datasets/support/test".into() }
        .save(dir)
        .unwrap();
}

/// Runs the test Python on `script` (beside this file) with `args`; returns its stdout, failing with its stderr.
pub fn python(script: &str, args: &[&str]) -> String {
    let here = tuneline_testkit::crate_dir().join("tests/delivery");
    let out = Command::new(tuneline_testkit::test_python())
        .arg(here.join(script))
        .args(args)
        .current_dir(&here)
        .output()
        .unwrap();
    assert!(out.status.success(), "{script} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `path` as a string argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}
