//! The reference of every `tuneline.toml` key, generated from the schema
//! (schemars reads the same doc comments, types and defaults that load the
//! file): `tuneline config reference` prints it, and `docs/config.md` is it,
//! checked by a test so that it is never stale. A key's example is its line
//! in the `init` template, or else its default.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Config, TEMPLATE};

/// The schema key whose value is a config value's written form, in words
/// (`duration: "30s", ...`), for the types that read their own form.
pub(crate) const WRITTEN: &str = "written";

/// Examples of the keys the template leaves out, as `[section]` tables.
const EXAMPLES: &str = include_str!("examples.toml");

/// The reference as Markdown: one table per section, in the template's
/// order, nested tables after their parent, keys in alphabetical order.
pub fn markdown() -> String {
    let root = serde_json::to_value(schemars::schema_for!(Config)).expect("a schema serializes");
    let defs = root.get("$defs").and_then(Value::as_object).cloned().unwrap_or_default();
    let examples = template_examples();
    let mut out = String::from(
        "# `tuneline.toml` reference\n\n\
         Every key, its type, its default and an example. Generated from the schema by \
         `tuneline config reference`; a test fails when this file is stale. \
         `tuneline init` writes a commented starting file, and `tuneline config check` \
         checks one, naming the file, line and key of each problem.\n",
    );
    let reader = Reader { defs: &defs, examples: &examples };
    for (name, property) in in_template_order("", properties(&root)) {
        reader.section(&mut out, &name, property);
    }
    out
}

/// Looks schemas up, and the template's examples.
struct Reader<'a> {
    defs: &'a Map<String, Value>,
    /// `(section, key)` -> the value the template writes.
    examples: &'a BTreeMap<(String, String), String>,
}

impl Reader<'_> {
    /// The schema a property points to (through `$ref`, or an optional's `anyOf`).
    fn resolve<'v>(&'v self, schema: &'v Value) -> &'v Value {
        if let Some(name) = schema.get("$ref").and_then(Value::as_str) {
            let name = name.trim_start_matches("#/$defs/");
            return self.defs.get(name).map_or(schema, |d| self.resolve(d));
        }
        if let Some(inner) = optional(schema) {
            return self.resolve(inner);
        }
        schema
    }

    /// Writes the table `[path]` whose schema is `schema`, then its nested tables.
    fn section(&self, out: &mut String, path: &str, schema: &Value) {
        let table = self.resolve(schema);
        let (nested, keys): (Vec<_>, Vec<_>) = properties(table)
            .into_iter()
            .partition(|(_, property)| !properties(self.resolve(property)).is_empty());
        if !keys.is_empty() {
            out.push_str(&format!("\n## `[{path}]`\n\n"));
            if let Some(about) = description(table).or_else(|| description(schema)) {
                out.push_str(&format!("{about}\n\n"));
            }
            out.push_str("| key | type | default | example | meaning |\n|---|---|---|---|---|\n");
        }
        for (key, property) in &keys {
            let default = property.get("default").map(toml_value);
            let example = self
                .examples
                .get(&(path.to_string(), key.clone()))
                .cloned()
                .or_else(|| default.clone().filter(|d| d != "none"))
                .map_or(String::new(), |e| format!("`{key} = {e}`"));
            let meaning = description(property).or_else(|| description(self.resolve(property)));
            out.push_str(&format!(
                "| `{key}` | {} | {} | {} | {} |\n",
                cell(&self.kind(property)),
                default.map_or(String::new(), |d| format!("`{}`", cell(&d))),
                cell(&example),
                cell(&meaning.unwrap_or_default()),
            ));
        }
        for (path, property) in in_template_order(&format!("{path}."), nested) {
            self.section(out, &path, property);
        }
    }

    /// A property's type in words.
    fn kind(&self, schema: &Value) -> String {
        if let Some(inner) = optional(schema) {
            return format!("{} (optional)", self.kind(inner));
        }
        let schema = match schema.get("$ref") {
            Some(_) => self.resolve(schema),
            None => schema,
        };
        if let Some(form) = schema.get(WRITTEN).and_then(Value::as_str) {
            return form.to_string();
        }
        let choices: Vec<String> = match (schema.get("enum"), schema.get("oneOf")) {
            (Some(Value::Array(values)), _) => values.iter().map(toml_value).collect(),
            (_, Some(Value::Array(variants))) => {
                variants.iter().filter_map(|v| v.get("const")).map(toml_value).collect()
            }
            _ => Vec::new(),
        };
        if !choices.is_empty() {
            return choices.join(" | ");
        }
        match schema.get("type") {
            Some(Value::String(t)) if t == "array" => {
                format!("list of {}", schema.get("items").map_or("values".into(), |i| self.kind(i)))
            }
            Some(Value::String(t)) if t == "object" => "table".to_string(),
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(types)) => {
                let named: Vec<&str> =
                    types.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect();
                let optional = types.len() > named.len();
                let mut kind = named.join(" or ");
                if kind == "array" {
                    kind = format!(
                        "list of {}",
                        schema.get("items").map_or("values".into(), |i| self.kind(i))
                    );
                }
                if optional {
                    kind.push_str(" (optional)");
                }
                kind
            }
            _ => "value".to_string(),
        }
    }
}

/// Tables named `prefix` + their key, in the template's order (the order of
/// a run: project, store, model, data, ...), those it lacks last.
fn in_template_order<'v>(
    prefix: &str,
    tables: Vec<(String, &'v Value)>,
) -> Vec<(String, &'v Value)> {
    let mut tables: Vec<_> =
        tables.into_iter().map(|(key, v)| (format!("{prefix}{key}"), v)).collect();
    tables.sort_by_key(|(path, _)| TEMPLATE.find(&format!("[{path}")).unwrap_or(usize::MAX));
    tables
}

/// The inner schema of an optional (`anyOf: [X, null]`), if `schema` is one.
fn optional(schema: &Value) -> Option<&Value> {
    let any = schema.get("anyOf")?.as_array()?;
    let (null, other): (Vec<&Value>, Vec<&Value>) =
        any.iter().partition(|s| s.get("type").and_then(Value::as_str) == Some("null"));
    (null.len() == 1 && other.len() == 1).then(|| other[0])
}

/// A schema's properties, in the order the struct writes them.
fn properties(schema: &Value) -> Vec<(String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().map(|(k, v)| (k.clone(), v)).collect())
        .unwrap_or_default()
}

/// A schema's description on one line.
fn description(schema: &Value) -> Option<String> {
    let text = schema.get("description")?.as_str()?;
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// A JSON value as TOML writes it.
fn toml_value(value: &Value) -> String {
    match value {
        Value::Null => "none".to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => {
            format!("[{}]", items.iter().map(toml_value).collect::<Vec<_>>().join(", "))
        }
        Value::Object(map) if map.is_empty() => "{}".to_string(),
        Value::Object(map) => format!(
            "{{ {} }}",
            map.iter()
                .map(|(k, v)| format!("{k} = {}", toml_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// Text safe in a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The `key = value` lines (commented out or not) of the template, then of
/// the examples file for the keys the template leaves out, by section and key.
fn template_examples() -> BTreeMap<(String, String), String> {
    let mut section = String::new();
    let mut examples = BTreeMap::new();
    for line in TEMPLATE.lines().chain(EXAMPLES.lines()) {
        // Commented-out lines are examples too.
        let line = line.trim().trim_start_matches('#').trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.split(']').next()) {
            section = header.to_string();
            continue;
        }
        let Some((key, rest)) = line.split_once('=') else { continue };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        // The value ends where a comment begins, outside a string.
        let mut in_string = false;
        let value: String = rest
            .chars()
            .take_while(|&c| {
                if c == '"' {
                    in_string = !in_string;
                }
                in_string || c != '#'
            })
            .collect();
        examples.entry((section.clone(), key.to_string())).or_insert(value.trim().to_string());
    }
    examples
}
