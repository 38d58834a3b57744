//! `docs/config.md` is the reference generated from the schema, never a stale copy.

use std::path::Path;

use tuneline_core::config::reference::markdown;

#[test]
fn docs_config_md_is_the_reference_the_schema_generates() {
    // Cargo's run-time value: the test binary may be a build from a clone at another path.
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("run by cargo");
    let path = Path::new(&manifest).join("../../docs/config.md");
    let generated = markdown();
    if std::env::var_os("TUNELINE_WRITE_REFERENCE").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == generated,
        "docs/config.md is stale: `tuneline config reference > docs/config.md` (or \
         TUNELINE_WRITE_REFERENCE=1 cargo test -p tuneline-core --test it config_reference) writes it again"
    );
}

#[test]
fn the_reference_names_every_section_and_the_keys_a_user_reaches_for() {
    let text = markdown();
    for section in [
        "[project]",
        "[store]",
        "[model]",
        "[data]",
        "[data.dedup]",
        "[training]",
        "[lora]",
        "[workers]",
        "[providers.aws]",
        "[providers.slurm]",
        "[server]",
        "[cost]",
        "[tracking]",
    ] {
        assert!(text.contains(&format!("## `{section}`")), "no {section} section");
    }
    for row in [
        "| `max_steps` | integer",
        "| `time_limit` | duration (\"4h\"), minutes (240) or Slurm's \"D-HH:MM:SS\" (optional)",
        "| `provider` | \"local\" \\| \"manual\" \\| \"ssh\"",
        "| `lease_timeout` | duration: \"30s\", \"5m\", \"1h 30m\" | `\"30s\"`",
    ] {
        assert!(text.contains(row), "no row starting {row}");
    }
    let without_example: Vec<&str> = text.lines().filter(|l| l.contains("|  |")).collect();
    assert!(without_example.is_empty(), "keys without an example: {without_example:#?}");
}
