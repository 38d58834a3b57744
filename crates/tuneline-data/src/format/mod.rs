//! Record formats: detecting them per file and turning each record into a
//! [`Sample`] of normalized turns.

mod fields;
mod roles;

use serde_json::Value;
use tuneline_core::config::DataFormat;
use tuneline_core::json::kind;

pub use fields::FieldNames;
pub use roles::Role;

use crate::read::{Origin, RawRecord};

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: String,
}

/// A training sample: a conversation, or raw text for continued pretraining.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sample {
    /// Turns in order.
    Chat(Vec<Turn>),
    /// Plain text.
    Text(String),
}

/// A sample and where it came from.
#[derive(Debug, Clone)]
pub struct Record {
    /// Where it came from.
    pub origin: Origin,
    /// The normalized sample.
    pub sample: Sample,
}

/// Why a record was rejected: a category to count, and the detail to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Counted category, such as `unknown role` or `missing field`.
    pub category: &'static str,
    /// What exactly, such as "unknown role `narrator` in conversations[3].from".
    pub detail: String,
    /// The role name, for `unknown role` rejections (counted per name).
    pub unknown_role: Option<String>,
}

impl Rejection {
    /// A rejection of `category` with its detail.
    pub fn new(category: &'static str, detail: impl Into<String>) -> Self {
        Self { category, detail: detail.into(), unknown_role: None }
    }
}

/// The format of a record, from its keys; `None` when no format fits.
pub fn detect(value: &Value, names: &FieldNames) -> Option<DataFormat> {
    let has = |canonical: &str| value.get(names.get(canonical)).is_some();
    if has("conversations") {
        Some(DataFormat::Sharegpt)
    } else if has("messages") {
        Some(DataFormat::Messages)
    } else if has("instruction") {
        Some(DataFormat::Alpaca)
    } else if has("prompt") && has("completion") {
        Some(DataFormat::PromptCompletion)
    } else if has("text") {
        Some(DataFormat::Text)
    } else {
        None
    }
}

/// Interprets `raw` in `format` (never `Auto`).
pub fn normalize(
    raw: RawRecord,
    format: DataFormat,
    names: &FieldNames,
) -> Result<Record, Rejection> {
    let RawRecord { origin, value } = raw;
    if !value.is_object() {
        return Err(Rejection::new(
            "not an object",
            format!("the record is {}, not an object", kind(&value)),
        ));
    }
    let sample = match format {
        DataFormat::Sharegpt => {
            Sample::Chat(turns(&value, names, "conversations", "from", "value")?)
        }
        DataFormat::Messages => Sample::Chat(turns(&value, names, "messages", "role", "content")?),
        DataFormat::Alpaca => {
            let mut out = Vec::new();
            if let Some(system) = optional_text(&value, names, "system")? {
                out.push(Turn { role: Role::System, content: system });
            }
            let instruction = text(&value, names, "instruction")?;
            let input = optional_text(&value, names, "input")?.filter(|i| !i.trim().is_empty());
            let prompt = match input {
                Some(input) => format!("{instruction}\n\n{input}"),
                None => instruction,
            };
            out.push(Turn { role: Role::User, content: prompt });
            out.push(Turn { role: Role::Assistant, content: text(&value, names, "output")? });
            Sample::Chat(out)
        }
        DataFormat::PromptCompletion => Sample::Chat(vec![
            Turn { role: Role::User, content: text(&value, names, "prompt")? },
            Turn { role: Role::Assistant, content: text(&value, names, "completion")? },
        ]),
        DataFormat::Text => Sample::Text(text(&value, names, "text")?),
        DataFormat::Auto => unreachable!("the format is detected before normalizing"),
    };
    Ok(Record { origin, sample })
}

fn turns(
    value: &Value,
    names: &FieldNames,
    list: &str,
    role: &str,
    content: &str,
) -> Result<Vec<Turn>, Rejection> {
    let field = names.get(list);
    let items = match value.get(field) {
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(Rejection::new(
                "wrong type",
                format!("`{field}` is {}, not an array", kind(other)),
            ))
        }
        None => return Err(Rejection::new("missing field", format!("no `{field}` field"))),
    };
    let (role_field, content_field) = (names.get(role), names.get(content));
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let who = match item.get(role_field) {
                Some(Value::String(s)) => s,
                Some(other) => {
                    return Err(Rejection::new(
                        "wrong type",
                        format!("{field}[{i}].{role_field} is {}", kind(other)),
                    ))
                }
                None => {
                    return Err(Rejection::new(
                        "missing field",
                        format!("no `{field}[{i}].{role_field}`"),
                    ))
                }
            };
            let role = Role::parse(who).ok_or_else(|| Rejection {
                unknown_role: Some(who.clone()),
                ..Rejection::new(
                    "unknown role",
                    format!("unknown role `{who}` in {field}[{i}].{role_field}"),
                )
            })?;
            let content = match item.get(content_field) {
                Some(c) => content_text(c).ok_or_else(|| {
                    Rejection::new(
                        "wrong type",
                        format!("{field}[{i}].{content_field} is {}, not text", kind(c)),
                    )
                })?,
                None => {
                    return Err(Rejection::new(
                        "missing field",
                        format!("no `{field}[{i}].{content_field}`"),
                    ))
                }
            };
            Ok(Turn { role, content })
        })
        .collect()
}

/// A string, or OpenAI-style content parts whose text parts are joined.
fn content_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Null => Some(String::new()),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                _ => p.get("text").and_then(Value::as_str),
            })
            .collect::<Option<Vec<&str>>>()
            .map(|texts| texts.join("")),
        _ => None,
    }
}

fn text(value: &Value, names: &FieldNames, canonical: &str) -> Result<String, Rejection> {
    let field = names.get(canonical);
    optional_text(value, names, canonical)?
        .ok_or_else(|| Rejection::new("missing field", format!("no `{field}` field")))
}

fn optional_text(
    value: &Value,
    names: &FieldNames,
    canonical: &str,
) -> Result<Option<String>, Rejection> {
    let field = names.get(canonical);
    match value.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => {
            Err(Rejection::new("wrong type", format!("`{field}` is {}, not a string", kind(other))))
        }
    }
}
