//! Wording for JSON values in error messages.

use serde_json::Value;

/// What kind of value `value` is, with its article: "a string", "an array", "null".
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
