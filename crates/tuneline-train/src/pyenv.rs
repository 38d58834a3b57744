//! A Python engine's environment, made once per machine from the engine's
//! pinned lock, every wheel checked against its hash (the locks are compiled
//! by `uv pip compile --universal --generate-hashes` from each engine's
//! `requirements.in`). It lives in `<engines>/<engine>-<lock hash>/`, built
//! aside and renamed into place when complete, so a warm start installs
//! nothing and an interrupted install is never taken for a finished one. On
//! an image that has PyTorch already (the PyTorch CUDA images), the torch
//! engine's environment sees the image's own torch (`--system-site-packages`)
//! and installs the rest of its lock only: `<engines>/torch-<lock hash>-image/`.
//! uv installs it: the same wheels take it seconds where pip takes minutes
//! (`bench/engine_setup.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::engine::EngineError;

/// An engine's pinned, hashed requirements, as the binary carries them.
#[derive(Debug, Clone, Copy)]
pub struct Lock {
    /// The engine's name, which names its environment.
    pub engine: &'static str,
    /// `requirements.lock`'s text.
    pub text: &'static str,
    /// Whether an image's own PyTorch stands in for the lock's.
    pub over_image_torch: bool,
    /// What the environment needs once its packages are in, given its
    /// directory (before it is put in place): `None` for nothing.
    pub finish: Option<Finish>,
}

/// A step that completes an environment, given its directory.
pub type Finish = fn(&Path) -> Result<(), EngineError>;

/// The uv release that installs the environment (from PyPI).
pub const UV_VERSION: &str = "0.13.9";

/// The oldest Python the lock resolves for.
pub const MIN_PYTHON: (u32, u32) = (3, 11);

/// The engines' directory, one per machine (every worker cache and project
/// on it shares the 6 GB environment): `TUNELINE_ENGINES_DIR`, else
/// `$XDG_CACHE_HOME/tuneline/engines`, else `~/.cache/tuneline/engines`,
/// else (no home) `<cache>/engines`.
pub fn engines_dir(cache: &Path) -> PathBuf {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("TUNELINE_ENGINES_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("tuneline/engines")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/tuneline/engines")))
        .unwrap_or_else(|| cache.join("engines"))
}

/// The oldest PyTorch of an image that the environment uses instead of its own.
pub const MIN_IMAGE_TORCH: (u32, u32) = (2, 6);

/// `lock`'s environment directory under `engines`, named by the lock's
/// hash: with the lock's own torch, or (`image`) with the image's.
pub fn env_dir(engines: &Path, lock: &Lock, image: bool) -> PathBuf {
    let hash = hex::encode(Sha256::digest(lock.text.as_bytes()));
    let suffix = if image { "-image" } else { "" };
    engines.join(format!("{}-{}{suffix}", lock.engine, &hash[..12]))
}

/// Whether `name` (a lock entry's package) is PyTorch's own stack, which an image provides.
fn image_provides(name: &str) -> bool {
    name == "torch" || name == "triton" || name.starts_with("nvidia-") || name.starts_with("cuda-")
}

/// The lock without the packages an image's PyTorch provides. An entry is a
/// `name==version` line and its indented `--hash` lines.
pub fn lock_without_torch(lock: &str) -> String {
    let mut out = String::new();
    let mut keep = true;
    for line in lock.lines() {
        if !line.starts_with([' ', '#']) && !line.is_empty() {
            keep = !image_provides(line.split("==").next().unwrap_or_default().trim());
        }
        if keep || line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The image's PyTorch version when `base` imports one at least [`MIN_IMAGE_TORCH`].
fn image_torch(base: &Path) -> Option<String> {
    let out = Command::new(base)
        .args(["-c", "import torch; print(torch.__version__)"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut parts = version.split(['.', '+']).map(|p| p.parse::<u32>().ok());
    let (major, minor) = (parts.next()??, parts.next()??);
    ((major, minor) >= MIN_IMAGE_TORCH).then_some(version)
}

/// The Python that makes the environment: `TUNELINE_PYTHON`, else `python3`.
fn base_python() -> PathBuf {
    std::env::var_os("TUNELINE_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from)
}

/// The Python of `lock`'s environment, the environment made first when it is not there.
pub fn ensure(engines: &Path, lock: &Lock) -> Result<PathBuf, EngineError> {
    for image in [true, false] {
        let python = env_dir(engines, lock, image).join("bin/python");
        if python.exists() {
            return Ok(python);
        }
    }
    let base = base_python();
    check_python(&base, lock.engine)?;
    let image = if lock.over_image_torch { image_torch(&base) } else { None };
    let dir = env_dir(engines, lock, image.is_some());
    let name = lock.engine;
    let python = dir.join("bin/python");
    std::fs::create_dir_all(engines)?;
    let uv = uv(engines, &base)?;
    let partial = engines.join(format!(".{}.partial-{}", file_name(&dir), std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    let mut venv = Command::new(&uv);
    venv.arg("venv").arg("--quiet").arg("-p").arg(&base).arg(&partial);
    let mut install = Command::new(&uv);
    install.args(["pip", "install", "--quiet", "--require-hashes"]);
    let requirements = match &image {
        Some(version) => {
            tracing::info!("making the {name} engine's environment in {} over the image's torch {version} (once per machine)", dir.display());
            venv.arg("--system-site-packages");
            // The lock is complete: nothing else is resolved, so nothing replaces the image's torch.
            install.arg("--no-deps");
            lock_without_torch(lock.text)
        }
        None => {
            tracing::info!(
                "making the {name} engine's environment in {} (once per machine)",
                dir.display()
            );
            lock.text.to_string()
        }
    };
    run(&mut venv, "uv venv")?;
    let file = engines.join(format!(".{}.lock-{}", file_name(&dir), std::process::id()));
    std::fs::write(&file, requirements)?;
    let installed = run(
        install
            .arg("-r")
            .arg(&file)
            .arg("-p")
            .arg(partial.join("bin/python"))
            .env("UV_CACHE_DIR", engines.join("uv-cache")),
        &format!("installing the {name} engine's packages"),
    );
    let _ = std::fs::remove_file(&file);
    installed?;
    if let Some(finish) = lock.finish {
        finish(&partial)?;
    }
    match std::fs::rename(&partial, &dir) {
        Ok(()) => Ok(python),
        // Another worker on this machine finished first: theirs is as good.
        Err(_) if python.exists() => {
            let _ = std::fs::remove_dir_all(&partial);
            Ok(python)
        }
        Err(e) => Err(e.into()),
    }
}

fn file_name(dir: &Path) -> String {
    dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Refuses a missing or too old Python: a worker without one cannot run the engine.
fn check_python(base: &Path, engine: &str) -> Result<(), EngineError> {
    let out = Command::new(base)
        .args(["-c", "import sys; print(sys.version_info[0], sys.version_info[1])"])
        .output();
    let (want_major, want_minor) = MIN_PYTHON;
    let version = out.ok().filter(|o| o.status.success()).and_then(|o| {
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        let mut parts = text.split_whitespace().map(|p| p.parse::<u32>().ok());
        Some((parts.next()??, parts.next()??))
    });
    match version {
        Some(v) if v >= MIN_PYTHON => Ok(()),
        Some((major, minor)) => Err(EngineError::Input(format!("the {engine} engine needs Python {want_major}.{want_minor} or later, and {} is {major}.{minor}; install a newer Python on the worker (or set TUNELINE_PYTHON to one), or use engine = \"native\"", base.display()))),
        None => Err(EngineError::Input(format!("the {engine} engine needs Python {want_major}.{want_minor} or later, and this worker has none (`{}` does not run); install one (or set TUNELINE_PYTHON), or use engine = \"native\"", base.display()))),
    }
}

/// [`UV_VERSION`]'s wheels by hash, every platform's (`uv.lock`).
const UV_LOCK: &str = include_str!("uv.lock");

/// uv, installed from PyPI into `<engines>/uv-<version>/` the first time,
/// by hash (`pip --require-hashes`), as the engines' own locks are.
fn uv(engines: &Path, base: &Path) -> Result<PathBuf, EngineError> {
    let dir = engines.join(format!("uv-{UV_VERSION}"));
    let uv = dir.join("bin/uv");
    if uv.exists() {
        return Ok(uv);
    }
    let partial = engines.join(format!(".uv-{UV_VERSION}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    run(Command::new(base).args(["-m", "venv"]).arg(&partial), "python -m venv")?;
    let lock = partial.join("uv.lock");
    std::fs::write(&lock, UV_LOCK)?;
    run(
        Command::new(partial.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "--require-hashes", "-r"])
            .arg(&lock),
        "installing uv",
    )?;
    if std::fs::rename(&partial, &dir).is_err() && !uv.exists() {
        return Err(EngineError::Infra(format!("cannot move {} into place", partial.display())));
    }
    Ok(uv)
}

/// Runs `command` for its standard output; a failure is the machine's (the
/// index, the network, the disk), with the tool's last words, which name the package.
pub(crate) fn run(command: &mut Command, what: &str) -> Result<String, EngineError> {
    let out = command.output().map_err(|e| EngineError::Infra(format!("{what}: {e}")))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(EngineError::Infra(format!("{what} failed ({}):\n{}", out.status, tail.join("\n"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_an_images_torch_the_lock_keeps_everything_but_torchs_own_stack() {
        let lock = crate::torch::LOCK.text;
        let rest = lock_without_torch(lock);
        let names: Vec<&str> = rest
            .lines()
            .filter(|l| !l.starts_with([' ', '#']) && !l.is_empty())
            .map(|l| l.split("==").next().unwrap())
            .collect();
        for kept in
            ["transformers", "peft", "accelerate", "bitsandbytes", "liger-kernel", "safetensors"]
        {
            assert!(names.contains(&kept), "{kept} missing: {names:?}");
        }
        assert!(!names.iter().any(|n| image_provides(n)), "{names:?}");
        assert!(lock.contains("\ntorch==") && lock.contains("nvidia-cublas"));
        // Every kept entry keeps its hashes.
        assert!(
            rest.lines().filter(|l| l.trim_start().starts_with("--hash")).count() > names.len()
        );
    }

    #[test]
    fn uv_is_pinned_by_hash_at_its_version() {
        let pins: Vec<&str> = UV_LOCK.lines().filter(|l| !l.starts_with([' ', '#'])).collect();
        assert_eq!(pins, [format!("uv=={UV_VERSION} \\")]);
        assert!(UV_LOCK.matches("--hash=sha256:").count() > 10, "every platform's wheel");
        assert!(UV_LOCK.contains(&format!("echo uv=={UV_VERSION} ")), "made for this version");
    }
}
