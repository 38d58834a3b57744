//! The reference Python's outputs, computed once per distinct input: a run
//! is keyed by the sha256 of its script, its arguments, the bytes of every
//! file and directory it reads, and the versions of the tools it runs
//! (the reference environment's installed distributions). What it printed
//! and what it wrote are kept in `<cache>/reference-outputs/<key>/`, and a
//! later run with the same key gets the same bytes back, so a test compares
//! against a cached reference exactly as against a fresh one. A changed
//! model, script or pin changes the key, and the tool runs again.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::deps::{cache_dir, reference_python};

/// One argument of a reference run.
enum Arg {
    /// Passed as it is.
    Text(String),
    /// A file or directory the tool reads, passed as its path.
    Input(PathBuf),
    /// Where the tool writes (a file or a directory), passed as its path.
    Output(PathBuf),
    /// A file or directory the tool reads without being told (a module it
    /// imports): keyed, not passed.
    Reads(PathBuf),
}

/// A run of the reference Python (`reference_python`), cached.
pub struct Reference {
    args: Vec<Arg>,
}

impl Reference {
    /// A run of the script at `script` (keyed by its bytes).
    pub fn script(script: &Path) -> Self {
        Self { args: vec![Arg::Input(script.to_path_buf())] }
    }

    /// A run of the program text `code` (`python -c`).
    pub fn code(code: &str) -> Self {
        Self { args: vec![Arg::Text("-c".into()), Arg::Text(code.into())] }
    }

    /// Adds an argument passed as it is.
    pub fn text(mut self, text: &str) -> Self {
        self.args.push(Arg::Text(text.into()));
        self
    }

    /// Adds a file or directory the tool reads.
    pub fn input(mut self, path: &Path) -> Self {
        self.args.push(Arg::Input(path.to_path_buf()));
        self
    }

    /// Adds where the tool writes: what is there after the run is kept.
    pub fn output(mut self, path: &Path) -> Self {
        self.args.push(Arg::Output(path.to_path_buf()));
        self
    }

    /// Keys the run by a file or directory it reads unbidden.
    pub fn reads(mut self, path: &Path) -> Self {
        self.args.push(Arg::Reads(path.to_path_buf()));
        self
    }

    /// What the tool printed, its outputs in place: from the cache when this
    /// exact run was made before, else run now (and kept). Panics with the
    /// tool's stderr, naming `what`, when it fails.
    pub fn run(self, what: &str) -> Vec<u8> {
        let entry = cache_dir().join("reference-outputs").join(self.key());
        if !entry.join("stdout").is_file() {
            // The tool wrote its outputs in place; the entry keeps copies.
            return self.compute(what, &entry);
        }
        for (i, out) in self.outputs().enumerate() {
            copy(&entry.join(format!("out{i}")), out);
        }
        std::fs::read(entry.join("stdout")).unwrap()
    }

    fn outputs(&self) -> impl Iterator<Item = &PathBuf> {
        self.args.iter().filter_map(|a| match a {
            Arg::Output(path) => Some(path),
            _ => None,
        })
    }

    /// Runs the tool, keeps what it printed and wrote in `entry` (which
    /// appears whole or not at all), and returns what it printed.
    fn compute(&self, what: &str, entry: &Path) -> Vec<u8> {
        let mut command = Command::new(reference_python());
        for arg in &self.args {
            match arg {
                Arg::Text(text) => drop(command.arg(text)),
                Arg::Input(path) | Arg::Output(path) => drop(command.arg(path)),
                Arg::Reads(_) => {}
            }
        }
        let run = command.output().unwrap();
        assert!(run.status.success(), "{what} failed:\n{}", String::from_utf8_lossy(&run.stderr));
        let partial = entry.with_extension(format!("partial-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::create_dir_all(&partial).unwrap();
        for (i, out) in self.outputs().enumerate() {
            copy(out, &partial.join(format!("out{i}")));
        }
        std::fs::write(partial.join("stdout"), &run.stdout).unwrap();
        if std::fs::rename(&partial, entry).is_err() {
            // Another test made the same entry first: theirs is the same.
            let _ = std::fs::remove_dir_all(&partial);
        }
        run.stdout
    }

    /// The sha256 of the tools, the arguments and the bytes they name.
    fn key(&self) -> String {
        let mut hash = Sha256::new();
        hash.update(tools());
        for arg in &self.args {
            match arg {
                Arg::Text(text) => hash.update(format!("text {}\0{text}\0", text.len())),
                // A tool may write an input's last name (the converter's `general.name`),
                // never the rest of its path, nor where it writes.
                Arg::Input(path) => {
                    hash_tree(&mut hash, &format!("input {}", last_name(path)), path)
                }
                Arg::Reads(path) => hash_tree(&mut hash, "reads", path),
                Arg::Output(_) => hash.update("output\0"),
            }
        }
        format!("{:x}", hash.finalize())
    }
}

/// Hashes `path`'s content: a file's bytes, or a directory's files by
/// their names relative to it, in order.
fn hash_tree(hash: &mut Sha256, role: &str, path: &Path) {
    let mut files = Vec::new();
    walk(path, &mut files);
    files.sort();
    hash.update(format!("{role} {}\0", files.len()));
    for file in files {
        let name = file.strip_prefix(path).unwrap_or(&file).to_string_lossy().into_owned();
        let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        hash.update(format!("{name}\0{}\0", bytes.len()));
        hash.update(&bytes);
    }
}

fn last_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Every file under `path` (itself, when it is one).
fn walk(path: &Path, files: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            walk(&entry.unwrap().path(), files);
        }
    } else {
        files.push(path.to_path_buf());
    }
}

/// Copies the file or directory `from` to `to`, over what is there.
fn copy(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        std::fs::copy(from, to)
            .unwrap_or_else(|e| panic!("{} -> {}: {e}", from.display(), to.display()));
    }
}

/// The reference environment's identity: its launcher, and every
/// distribution it sees (`name-version.dist-info`, its own and those of
/// the torch engine's environment, which a `.pth` file adds).
fn tools() -> &'static str {
    static TOOLS: OnceLock<String> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let mut id = std::fs::read_to_string(reference_python()).unwrap();
        let lib = cache_dir().join("reference/lib");
        let mut sites: Vec<PathBuf> = std::fs::read_dir(&lib)
            .unwrap_or_else(|e| panic!("{}: {e}", lib.display()))
            .map(|e| e.unwrap().path().join("site-packages"))
            .collect();
        while let Some(site) = sites.pop() {
            let mut names: Vec<String> = std::fs::read_dir(&site)
                .unwrap_or_else(|e| panic!("{}: {e}", site.display()))
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            for name in names {
                if name.ends_with(".dist-info") {
                    id.push_str(&name);
                    id.push('\n');
                } else if name.ends_with(".pth") {
                    let text = std::fs::read_to_string(site.join(&name)).unwrap_or_default();
                    sites.extend(text.lines().map(PathBuf::from).filter(|p| p.is_dir()));
                }
            }
        }
        id
    })
}
