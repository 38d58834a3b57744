//! `tuneline init [DIR]`: a commented tuneline.toml and an example dataset.

use std::path::Path;

use tuneline_core::config::TEMPLATE;

use crate::cli::InitArgs;
use crate::exit::{CliResult, Failure};

/// A few chat records in OpenAI messages format, so `data/*.jsonl` matches something.
const EXAMPLE_DATA: &str = include_str!("example.jsonl");

/// Runs `tuneline init`.
pub fn run(args: &InitArgs, json: bool) -> CliResult {
    let dir = &args.dir;
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::input(format!("cannot create {}: {e}", dir.display())))?;
    let config = dir.join("tuneline.toml");
    if config.exists() && !args.force {
        return Err(Failure::input(format!(
            "{} already exists; pass --force to overwrite it",
            config.display()
        )));
    }
    let text =
        TEMPLATE.replace("name = \"my-project\"", &format!("name = \"{}\"", project_name(dir)));
    write(&config, &text)?;
    let mut written = vec![config.display().to_string()];
    // The example never replaces a user's data, --force or not.
    let example = dir.join("data/example.jsonl");
    if !example.exists() {
        std::fs::create_dir_all(dir.join("data"))
            .map_err(|e| Failure::input(format!("cannot create data/: {e}")))?;
        write(&example, EXAMPLE_DATA)?;
        written.push(example.display().to_string());
    }
    if json {
        println!("{}", serde_json::json!({ "written": written }));
    } else {
        for path in &written {
            println!("wrote {path}");
        }
        println!("next: edit {}, then `tuneline config check`", config.display());
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> CliResult {
    std::fs::write(path, text)
        .map_err(|e| Failure::input(format!("cannot write {}: {e}", path.display())))
}

/// The directory's name, kept to the characters a project name allows.
fn project_name(dir: &Path) -> String {
    let name = std::fs::canonicalize(dir)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_".contains(c) {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let clean = clean.trim_matches('-').to_string();
    if clean.is_empty() {
        "my-project".to_string()
    } else {
        clean
    }
}
