//! `tuneline engines setup` over an image that has PyTorch already (the
//! PyTorch CUDA images): the environment sees the image's torch and installs
//! the rest of the lock only, from the same hash-checked wheels.

use std::path::Path;

use tuneline_train::pyenv::{env_dir, UV_VERSION};
use tuneline_train::torch::LOCK;

use crate::common::TestContext;

#[test]
fn over_an_images_torch_the_environment_installs_the_rest_of_the_lock_only() {
    let shared = tuneline_testkit::cache_dir().join("engines");
    let pinned = env_dir(&shared, &LOCK, false);
    assert!(
        pinned.join("bin/python").is_file(),
        "the torch engine's environment is not at {}: run `bash scripts/setup-test-deps.sh`",
        pinned.display()
    );
    // The "image": this machine's Python 3 with a torch on its path (the
    // pinned environment's packages). uv's wheels come from the shared cache,
    // offline: the test downloads nothing.
    let site = std::fs::read_dir(pinned.join("lib"))
        .unwrap()
        .map(|e| e.unwrap().path().join("site-packages"))
        .find(|p| p.join("torch").is_dir())
        .expect("torch in the pinned environment");
    let ctx = TestContext::new();
    let engines = ctx.path("engines");
    std::fs::create_dir_all(&engines).unwrap();
    for shared_dir in ["uv-cache".to_string(), format!("uv-{UV_VERSION}")] {
        std::os::unix::fs::symlink(shared.join(&shared_dir), engines.join(&shared_dir)).unwrap();
    }
    let run = |args: &[&str]| {
        let mut cmd = ctx.cmd(args);
        cmd.env("TUNELINE_ENGINES_DIR", &engines).env("PYTHONPATH", &site).env("UV_OFFLINE", "1");
        crate::common::output(cmd)
    };
    let (code, out, err) = run(&["engines", "setup"]);
    assert_eq!(code, 0, "{err}");
    let image = env_dir(&engines, &LOCK, true);
    assert_eq!(Path::new(out.trim()), image.join("bin/python"), "{out}");
    let installed: Vec<String> = std::fs::read_dir(image.join("lib"))
        .unwrap()
        .flat_map(|e| std::fs::read_dir(e.unwrap().path().join("site-packages")).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for kept in ["transformers", "peft", "accelerate", "bitsandbytes", "liger_kernel"] {
        assert!(installed.iter().any(|n| n == kept), "{kept} not installed: {installed:?}");
    }
    for left in ["torch", "triton", "nvidia"] {
        assert!(
            !installed.iter().any(|n| n == left),
            "{left} installed over the image's: {installed:?}"
        );
    }
    assert!(
        std::fs::read_to_string(image.join("pyvenv.cfg"))
            .unwrap()
            .contains("include-system-site-packages = true"),
        "the environment sees the image's packages"
    );
    // A warm start takes it as it is.
    let (code, again, _) = run(&["engines", "setup"]);
    assert_eq!((code, again), (0, out));
}
