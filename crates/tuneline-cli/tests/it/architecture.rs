//! `docs/ARCHITECTURE.md` stays true: its crate edges are `cargo
//! metadata`'s, and every name it puts in backticks resolves to something in
//! the tree (a path, a Rust item, a command, a config key, a string the code
//! writes). The tree stays clean: no tracked file over 1 MB outside
//! `examples/` and the test fixtures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::cargo_bin;

fn root() -> PathBuf {
    tuneline_testkit::repo_root().canonicalize().expect("the repository")
}

fn document() -> String {
    std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).expect("docs/ARCHITECTURE.md")
}

/// Each workspace crate and the workspace crates it depends on, normal
/// dependencies only, as `cargo metadata` gives them.
fn cargo_edges() -> BTreeMap<String, BTreeSet<String>> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).expect("its JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|d| names.contains(d))
                .map(String::from)
                .collect();
            (p["name"].as_str().expect("a name").to_string(), deps)
        })
        .collect()
}

/// The edge list under the document's `<!-- edges: ... -->` marker.
fn documented_edges(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    let after = doc.split_once("<!-- edges:").expect("the edges marker").1;
    let block = after.split("```").nth(1).expect("a fenced block after the marker");
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (from, to) = line.split_once("->").expect("`crate -> crate, crate`");
            let to = to.split(',').map(str::trim).filter(|t| !t.is_empty()).map(String::from);
            (from.trim().to_string(), to.collect())
        })
        .collect()
}

#[test]
fn the_documented_crate_edges_are_cargos() {
    let (documented, actual) = (documented_edges(&document()), cargo_edges());
    for (name, deps) in &actual {
        assert_eq!(
            documented.get(name),
            Some(deps),
            "docs/ARCHITECTURE.md's edges of {name} differ from Cargo.toml's; write `{name} -> {}`",
            deps.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    let stale: Vec<_> = documented.keys().filter(|k| !actual.contains_key(*k)).collect();
    assert!(stale.is_empty(), "docs/ARCHITECTURE.md names crates that do not exist: {stale:?}");
}

/// Every file and directory of the tree, relative to the root, but build
/// outputs and version control.
fn tree(dir: &Path, root: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("a readable tree").flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if [".git", "target", ".tuneline", "node_modules", "__pycache__"].contains(&name.as_str()) {
            continue;
        }
        let rel = path.strip_prefix(root).expect("under the root").to_string_lossy().into_owned();
        if path.is_dir() {
            out.push(format!("{rel}/"));
            tree(&path, root, out);
        } else {
            out.push(rel);
        }
    }
}

/// What the document's names resolve against.
struct Tree {
    root: PathBuf,
    /// Every path, directories with a trailing `/`.
    paths: Vec<String>,
    /// Every Rust and Python source of the crates, concatenated.
    sources: String,
    /// Every `Cargo.toml`, concatenated.
    manifests: String,
    /// `docs/config.md`, the config's reference.
    config: String,
}

impl Tree {
    fn read() -> Self {
        let root = root();
        let mut paths = Vec::new();
        tree(&root, &root, &mut paths);
        let read = |ends: &[&str]| -> String {
            paths
                .iter()
                .filter(|p| ends.iter().any(|e| p.ends_with(e)))
                .map(|p| std::fs::read_to_string(root.join(p)).unwrap_or_default())
                .collect()
        };
        let sources = read(&[".rs", ".py"]);
        let manifests = read(&["Cargo.toml"]);
        let config = std::fs::read_to_string(root.join("docs/config.md")).expect("docs/config.md");
        Self { root, paths, sources, manifests, config }
    }

    /// A path of the tree, whole or as the end of one (`layout.rs`,
    /// `torch/`), or with one `*` (`tests/contracts/*.json`).
    fn path(&self, name: &str) -> bool {
        let ends = |p: &str, end: &str| p == end || p.ends_with(&format!("/{end}"));
        match name.split_once('*') {
            Some((head, tail)) => self.paths.iter().any(|p| {
                p.ends_with(tail) && p.len() > head.len() && (head.is_empty() || p.contains(head))
            }),
            None => self.paths.iter().any(|p| ends(p, name)),
        }
    }

    /// A Rust item, module or field named `name`, or a crate (`tuneline_core`, `object_store`).
    fn symbol(&self, name: &str) -> bool {
        let name = name.trim_end_matches('!');
        let crate_dir = format!("crates/{}/", name.replace('_', "-"));
        let defined = [
            "fn ",
            "struct ",
            "enum ",
            "trait ",
            "mod ",
            "const ",
            "static ",
            "type ",
            "macro_rules! ",
            "pub ",
        ]
        .iter()
        .any(|keyword| {
            self.sources.match_indices(&format!("{keyword}{name}")).any(|(at, m)| {
                let next = self.sources[at + m.len()..].chars().next().unwrap_or(' ');
                !(next.is_alphanumeric() || next == '_')
            })
        });
        defined
            || self.paths.iter().any(|p| p == &crate_dir || p.ends_with(&format!("/{name}.rs")))
            || self.manifests.contains(&format!("\n{name} ="))
            || self.manifests.contains(&format!("\n{name}.workspace"))
    }

    /// A config key `key` in `docs/config.md`'s table of `section` (any table when `None`).
    fn config_key(&self, section: Option<&str>, key: &str) -> bool {
        let row = format!("| `{key}` |");
        match section {
            Some(section) => self
                .config
                .split("\n## ")
                .find(|table| table.starts_with(&format!("`[{section}]`")))
                .is_some_and(|table| table.contains(&row)),
            None => self.config.contains(&row),
        }
    }

    /// Whether the document's backticked `name` resolves, and if not why.
    fn resolves(&self, name: &str) -> Result<(), String> {
        let ok = if let Some(words) = name.strip_prefix("tuneline ") {
            let out = Command::new(cargo_bin("tuneline"))
                .args(words.split_whitespace())
                .arg("--help")
                .output()
                .expect("the binary runs");
            out.status.success()
        } else if let Some(args) = name.strip_prefix("cargo ") {
            // Each crate (`-p`) and test binary (`--test`) it names exists.
            let words: Vec<&str> = args.split_whitespace().collect();
            let named = |flag: &str| -> Vec<&str> {
                let given = words.windows(2).filter(|w| w[0] == flag).map(|w| w[1]);
                given.filter(|w| !w.starts_with('<')).collect()
            };
            named("-p").iter().all(|c| self.root.join("crates").join(c).is_dir())
                && named("--test").iter().all(|t| {
                    self.path(&format!("tests/{t}/")) || self.path(&format!("tests/{t}.rs"))
                })
        } else if let Some(lint) = name.strip_prefix("clippy::") {
            self.sources.contains(&format!("clippy::{lint})"))
        } else if let Some(script) = name.strip_prefix("bash ") {
            self.root.join(script).is_file()
        } else if let Some(feature) = name.strip_prefix("--features ") {
            self.manifests.contains(&format!("\n{feature} = ["))
        } else if let Some(rest) = name.strip_prefix('[') {
            let (section, key) = rest.split_once("] ").ok_or("a config key is `[table] key`")?;
            let key = key.split([' ', '=']).next().unwrap_or_default();
            self.config_key(Some(section), key)
        } else if let Some((key, _)) = name.split_once(" = ") {
            self.config_key(None, key)
        } else if name.contains('<') {
            // A pattern with placeholders: each literal piece is in the code.
            name.split(['<', '>']).step_by(2).all(|piece| self.sources.contains(piece))
        } else if name.contains("://") || name.ends_with(':') {
            self.sources.contains(&format!("\"{name}"))
        } else if name.contains('/') || name.contains('*') {
            self.path(name)
        } else if name.contains('.') && !name.contains("::") {
            // A file: of the tree, or one the code writes by name (`COMMIT.json`).
            self.path(name) || self.sources.contains(&format!("\"{name}\""))
        } else if name.starts_with("tuneline-") {
            self.root.join("crates").join(name).is_dir()
        } else if name == "tuneline" {
            true
        } else {
            name.split("::").all(|segment| self.symbol(segment))
        };
        if ok {
            Ok(())
        } else {
            Err("nothing of that name in the tree".into())
        }
    }
}

/// The names between backticks in `doc`, outside fenced blocks.
fn backticked(doc: &str) -> BTreeSet<String> {
    let prose: String = doc.split("```").step_by(2).collect::<Vec<_>>().join("\n");
    prose.split('`').skip(1).step_by(2).map(|s| s.replace('\n', " ")).collect()
}

#[test]
fn every_backticked_name_in_the_document_resolves() {
    let tree = Tree::read();
    let unresolved: Vec<String> = backticked(&document())
        .into_iter()
        .filter_map(|name| tree.resolves(&name).err().map(|why| format!("`{name}`: {why}")))
        .collect();
    assert!(
        unresolved.is_empty(),
        "docs/ARCHITECTURE.md names what the tree does not have (rename it, or fix the document):\n{}",
        unresolved.join("\n")
    );
}

#[test]
fn no_tracked_file_over_1_mb_lies_outside_examples_and_fixtures() {
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root())
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git ls-files: {}", String::from_utf8_lossy(&out.stderr));
    let listed = String::from_utf8(out.stdout).expect("UTF-8 paths");
    let large: Vec<String> = listed
        .split('\0')
        .filter(|p| !p.is_empty() && !p.starts_with("examples/") && !p.contains("tests/fixtures/"))
        .filter_map(|p| {
            let size = std::fs::metadata(root().join(p)).ok()?.len();
            (size > 1_000_000).then(|| format!("{p} ({size} bytes)"))
        })
        .collect();
    assert!(
        large.is_empty(),
        "tracked files over 1 MB outside examples/ and the test fixtures (remove them, or ignore their kind in .gitignore):\n{}",
        large.join("\n")
    );
}
