//! `tuneline config check`: validate, then show the resolved config with secrets masked.

use crate::cli::Global;
use crate::context::{config_path, load_config};
use crate::exit::CliResult;

/// Runs `tuneline config check`.
pub fn check(global: &Global) -> CliResult {
    let loaded = load_config(global, false)?;
    let path = config_path(global);
    if global.json {
        let sources: serde_json::Map<String, serde_json::Value> =
            loaded.secret_sources.iter().map(|(f, s)| (f.clone(), s.clone().into())).collect();
        let out = serde_json::json!({ "file": path, "valid": true, "config": loaded.config, "secret_sources": sources });
        println!("{}", serde_json::to_string_pretty(&out).expect("serializable"));
        return Ok(());
    }
    println!("# {}: valid", path.display());
    for (field, source) in &loaded.secret_sources {
        println!("# {field}: set from {source} (masked)");
    }
    println!("# resolved, with defaults filled in:\n");
    print!("{}", toml::to_string_pretty(&loaded.config).expect("config serializes"));
    Ok(())
}
