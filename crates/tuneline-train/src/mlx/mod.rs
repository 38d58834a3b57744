//! The `mlx` engine: MLX with mlx-lm's models and LoRA layers, as
//! `trainer.py`, which [`crate::program`] drives: Metal on Apple Silicon,
//! mlx-cpu elsewhere (what the tests run on Linux).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tuneline_core::config::Engine as EngineKind;

use crate::engine::EngineError;
use crate::program::{ChildEnv, Program};
use crate::pyenv::Lock;

/// mlx (mlx-cpu on Linux, with cmeel-openblas) and mlx-lm, pinned with hashes.
pub const LOCK: Lock =
    Lock { engine: "mlx", text: include_str!("requirements.lock"), over_image_torch: false };

/// The mlx engine's program and environment.
pub static PROGRAM: Program =
    Program { kind: EngineKind::Mlx, trainer: include_str!("trainer.py"), lock: LOCK, child_env };

/// On Linux, mlx-cpu's wheel links the reference BLAS it bundles, which
/// multiplies matrices some 50 times slower than OpenBLAS (`bench/engines.sh`).
/// The program runs with the lock's OpenBLAS (cmeel-openblas) preloaded, so
/// its `cblas_sgemm` is the one mlx calls. That OpenBLAS wants
/// `libgfortran.so.5`, which mlx-cpu's wheel bundles under a hashed name: a
/// link by the plain name, in the environment, points at it. Elsewhere
/// (macOS: Accelerate and Metal) the program runs as it is.
fn child_env(python: &Path) -> Result<ChildEnv, EngineError> {
    if !cfg!(target_os = "linux") {
        return Ok(Vec::new());
    }
    let env = python.parent().and_then(Path::parent).unwrap_or(Path::new("."));
    let packages = site_packages(env)?;
    let openblas = packages.join("cmeel.prefix/lib/libopenblas.so.0");
    let bundled = packages.join("mlx_cpu.libs");
    let fortran = std::fs::read_dir(&bundled)
        .map_err(|e| missing(&bundled, &e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libgfortran")))
        .ok_or_else(|| missing(&bundled, &"no libgfortran in it"))?;
    let links = env.join("openblas-deps");
    let link = links.join("libgfortran.so.5");
    if std::fs::read_link(&link).ok().as_deref() != Some(fortran.as_path()) {
        std::fs::create_dir_all(&links)?;
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&fortran, &link)?;
    }
    if !openblas.exists() {
        return Err(missing(&openblas, &"not installed"));
    }
    let mut path = OsString::from(links.as_os_str());
    path.push(":");
    path.push(bundled.as_os_str());
    Ok(vec![("LD_PRELOAD".into(), openblas.into()), ("LD_LIBRARY_PATH".into(), path)])
}

/// The environment's `lib/python3.X/site-packages`.
fn site_packages(env: &Path) -> Result<PathBuf, EngineError> {
    let lib = env.join("lib");
    std::fs::read_dir(&lib)
        .map_err(|e| missing(&lib, &e))?
        .filter_map(Result::ok)
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .ok_or_else(|| missing(&lib, &"no site-packages"))
}

/// A broken environment is the machine's: removing it makes it again.
fn missing(path: &Path, why: &dyn std::fmt::Display) -> EngineError {
    EngineError::Infra(format!("the mlx engine's environment is incomplete ({}: {why}); remove that environment's directory and run `tuneline engines setup --engine mlx`", path.display()))
}
