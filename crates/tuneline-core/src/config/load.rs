//! Reading `tuneline.toml`: syntax and type errors with their line, unknown keys
//! with the closest valid key, range checks, then secrets from the environment.

use std::path::Path;

use serde_json::Value;
use toml::de::{DeTable, DeValue};

use super::error::{ConfigError, Problem};
use super::schema::Config;
use super::secret::Secret;
use super::validate::validate;

/// The environment variables a secret may come from, and the field each fills.
pub const SECRET_ENV: [(&str, &str); 4] = [
    ("AWS_ACCESS_KEY_ID", "store.access_key_id"),
    ("AWS_SECRET_ACCESS_KEY", "store.secret_access_key"),
    ("TUNELINE_TOKEN", "server.token"),
    ("MLFLOW_TRACKING_TOKEN", "tracking.token"),
];

/// `text` (a valid config) as a job carries it to machines that are not
/// this one: without the secrets a file may hold (each machine reads its own
/// credentials from its environment), and with `[model] path` set to
/// `model`, the store reference of a base model committed for the job.
/// Unchanged when there is nothing to change.
pub fn job_config(text: &str, model: Option<&str>) -> String {
    let Ok(mut table) = text.parse::<toml::Table>() else { return text.to_string() };
    let mut changed = false;
    for (_, field) in SECRET_ENV {
        let (section, key) = field.split_once('.').expect("section.key");
        if let Some(toml::Value::Table(t)) = table.get_mut(section) {
            changed |= t.remove(key).is_some();
        }
    }
    if let Some(model) = model {
        let section =
            table.entry("model").or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(t) = section {
            t.insert("path".into(), toml::Value::String(model.to_string()));
            changed = true;
        }
    }
    if changed {
        toml::to_string(&table).unwrap_or_else(|_| text.to_string())
    } else {
        text.to_string()
    }
}

/// A config as read, with where each secret came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The resolved config.
    pub config: Config,
    /// `(field, source)` for each secret that is set, source being `file` or an env var.
    pub secret_sources: Vec<(String, String)>,
}

impl Config {
    /// Reads and validates `path`, then fills secrets from the process environment.
    pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&text, &path.display().to_string(), |k| std::env::var(k).ok())
    }

    /// Parses and validates TOML `text`; `file` names it in errors, `env` looks up secrets.
    pub fn parse(
        text: &str,
        file: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Loaded, ConfigError> {
        let invalid = |problems| ConfigError::Invalid { file: file.to_string(), problems };
        let spans = DeTable::parse(text)
            .map_err(|e| invalid(vec![toml_problem(text, &e, String::new())]))?
            .into_inner();

        let mut unknown: Vec<Vec<String>> = Vec::new();
        let mut track = serde_path_to_error::Track::new();
        let de = toml::Deserializer::parse(text)
            .map_err(|e| invalid(vec![toml_problem(text, &e, String::new())]))?;
        let parsed: Result<Config, _> = serde_ignored::deserialize(
            serde_path_to_error::Deserializer::new(de, &mut track),
            |path| unknown.push(segments(&path)),
        );
        let config =
            parsed.map_err(|e| invalid(vec![toml_problem(text, &e, track.path().to_string())]))?;

        let mut problems: Vec<Problem> =
            unknown.iter().map(|path| unknown_key(text, &spans, &config, path)).collect();
        problems.extend(validate(&config).into_iter().map(|(field, message)| Problem {
            line: line_of_key(text, &spans, &field.split('.').collect::<Vec<_>>()),
            field,
            message,
        }));
        if !problems.is_empty() {
            problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
            return Err(invalid(problems));
        }
        Ok(with_env_secrets(config, env))
    }
}

fn with_env_secrets(mut config: Config, env: impl Fn(&str) -> Option<String>) -> Loaded {
    let mut sources = Vec::new();
    for (var, field) in SECRET_ENV {
        let slot = match field {
            "store.access_key_id" => &mut config.store.access_key_id,
            "store.secret_access_key" => &mut config.store.secret_access_key,
            "tracking.token" => &mut config.tracking.token,
            _ => &mut config.server.token,
        };
        match env(var).filter(|v| !v.is_empty()) {
            Some(value) => {
                *slot = Some(Secret::new(value));
                sources.push((field.to_string(), format!("env {var}")));
            }
            None if slot.is_some() => sources.push((field.to_string(), "file".to_string())),
            None => {}
        }
    }
    Loaded { config, secret_sources: sources }
}

/// A `toml` syntax or type error as a one-line problem with its line.
fn toml_problem(text: &str, e: &toml::de::Error, field: String) -> Problem {
    let field = if field == "." { String::new() } else { field };
    let line = e.span().map(|s| line_at(text, s.start));
    let mut message = without_strings(e.message().trim()).replace('\n', "; ");
    if field.is_empty() {
        // A syntax error has no field to name, so quote the key of the line it is on (never its value,
        // which may be a secret), or a table header.
        let source =
            line.and_then(|l| text.lines().nth(l - 1)).map(str::trim).and_then(|s| {
                match s.split_once('=') {
                    Some((key, _)) => Some(format!("{} = …", key.trim())),
                    None => s.starts_with('[').then(|| s.to_string()),
                }
            });
        if let Some(source) = source {
            message = format!("{message}: `{source}`");
        }
    }
    Problem { line, field, message }
}

/// `message` with every quoted string value serde put in it (`string "…"`) left out: a value
/// in the wrong key may be a secret.
fn without_strings(message: &str) -> String {
    const QUOTED: &str = "string \"";
    let mut out = String::new();
    let mut rest = message;
    while let Some(at) = rest.find(QUOTED) {
        out.push_str(&rest[..at]);
        out.push_str("a string");
        let mut chars = rest[at + QUOTED.len()..].char_indices();
        let mut end = rest.len() - at - QUOTED.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &rest[at + QUOTED.len() + end..];
    }
    out.push_str(rest);
    out
}

/// Key segments of a path reported by `serde_ignored`.
fn segments(path: &serde_ignored::Path) -> Vec<String> {
    use serde_ignored::Path as P;
    match path {
        P::Root => Vec::new(),
        P::Seq { parent, index } => [segments(parent), vec![index.to_string()]].concat(),
        P::Map { parent, key } => [segments(parent), vec![key.clone()]].concat(),
        P::Some { parent } | P::NewtypeStruct { parent } | P::NewtypeVariant { parent } => {
            segments(parent)
        }
    }
}

/// An unknown key, with the closest valid key as a suggestion.
fn unknown_key(text: &str, spans: &DeTable, config: &Config, path: &[String]) -> Problem {
    let (name, parent) = path.split_last().expect("an unknown key has a name");
    let mut tree = serde_json::to_value(config).expect("config serializes");
    // Every backend's table, set or not, so that a key of another backend is recognised.
    tree["providers"] = serde_json::to_value(super::Providers::every()).expect("tables serialize");
    let mut candidates = Vec::new();
    collect_keys(&tree, &mut Vec::new(), &mut candidates);
    let here = parent.join(".");
    let owner = candidates.iter().find(|(table, key)| {
        key == name
            && *table != here
            && table.starts_with("providers.")
            && here.starts_with("providers.")
    });
    if let Some((table, _)) = owner {
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        let message = format!(
            "`{name}` is a key of [{table}], not of [{here}]; move it there, or leave it out"
        );
        return Problem { line: line_of_key(text, spans, &refs), field: path.join("."), message };
    }
    // Prefer a key in the same table; a much closer key elsewhere also counts.
    let best = candidates
        .iter()
        .map(|(table, key)| {
            let score = strsim::normalized_damerau_levenshtein(name, key)
                + if *table == here { 0.05 } else { 0.0 };
            (score, table, key)
        })
        .filter(|(score, _, _)| *score >= 0.6)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let hint = match best {
        Some((_, table, key)) if *table == here => format!("; did you mean `{key}`?"),
        Some((_, table, key)) => format!("; did you mean `{key}` in [{table}]?"),
        None => String::new(),
    };
    let where_ =
        if here.is_empty() { "at the top level".to_string() } else { format!("in [{here}]") };
    let refs: Vec<&str> = path.iter().map(String::as_str).collect();
    Problem {
        line: line_of_key(text, spans, &refs),
        field: path.join("."),
        message: format!("unknown key {where_}{hint}"),
    }
}

/// Every `(table, key)` pair of the config tree, tables as dotted paths.
fn collect_keys(value: &Value, table: &mut Vec<String>, out: &mut Vec<(String, String)>) {
    if let Value::Object(map) = value {
        for (key, child) in map {
            out.push((table.join("."), key.clone()));
            table.push(key.clone());
            collect_keys(child, table, out);
            table.pop();
        }
    }
}

/// The 1-based line where the key at `path` is written, if it is; a
/// segment `name[i]` is the array's element `i`, on its own line when written so.
fn line_of_key(text: &str, spans: &DeTable, path: &[&str]) -> Option<usize> {
    let (first, rest) = path.split_first()?;
    let (name, index) = match first.strip_suffix(']').and_then(|s| s.split_once('[')) {
        Some((name, i)) => (name, i.parse::<usize>().ok()),
        None => (*first, None),
    };
    let (key, value) = spans.iter().find(|(k, _)| k.get_ref() == name)?;
    let nested = match (value.get_ref(), index) {
        (DeValue::Table(t), None) if !rest.is_empty() => line_of_key(text, t, rest),
        (DeValue::Array(items), Some(i)) => {
            items.get(i).map(|item| line_at(text, item.span().start))
        }
        _ => None,
    };
    nested.or_else(|| Some(line_at(text, key.span().start)))
}

fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod secret_tests {
    use super::*;

    #[test]
    fn a_job_config_carries_no_secret_and_names_the_committed_model() {
        let text =
            "[store]\nurl = \"s3://b/p\"\nsecret_access_key = \"hunter2\"\naccess_key_id = \"GK1\"\n[server]\ntoken = \"t0k\"\n[model]\npath = \"m.gguf\"\n";
        let shared = job_config(text, Some("store:models/base/m/ab"));
        assert!(
            !shared.contains("hunter2") && !shared.contains("GK1") && !shared.contains("t0k"),
            "{shared}"
        );
        assert!(
            shared.contains("s3://b/p")
                && shared.contains("path = \"store:models/base/m/ab\"")
                && !shared.contains("m.gguf"),
            "{shared}"
        );
        let plain = "[store]\nurl = \"s3://b/p\"\n# a comment\n";
        assert_eq!(job_config(plain, None), plain, "a config without secrets is sent as written");
    }
}
