//! Chat templates rendered with `minijinja` the way transformers renders them
//! (`apply_chat_template`): `trim_blocks` and `lstrip_blocks`, loop controls,
//! Python string methods, `raise_exception`, and a `tojson` that writes what
//! Python's `json.dumps` writes.

use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error, ErrorKind};
use serde::Serialize;

use crate::special_tokens::SpecialTokens;

/// One chat turn, as a conversation's JSON writes it (`{"role": ..., "content": ...}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text of the turn.
    pub content: String,
}

impl Message {
    /// A turn in which `role` says `content`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self { role: role.into(), content: content.into() }
    }
}

/// A compiled chat template with the special tokens it may refer to.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    special: SpecialTokens,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").field("special", &self.special).finish_non_exhaustive()
    }
}

/// The instructions one rendering may run.
const TEMPLATE_FUEL: u64 = 50_000_000;

/// A chat template that does not compile, or fails on the messages given;
/// each names the template's line and what Jinja said.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// Jinja refused the source.
    #[error("invalid chat template, {}", at(.0))]
    Invalid(#[source] Error),
    /// Rendering failed (a `raise_exception`, a missing field, out of fuel).
    #[error("chat template failed, {}", at(.0))]
    Failed(#[source] Error),
}

/// "line N: what went wrong", from a Jinja error.
fn at(e: &Error) -> String {
    let line = e.line().map_or_else(|| "at an unknown line".to_string(), |l| format!("line {l}"));
    match e.detail() {
        Some(detail) => format!("{line}: {}: {detail}", e.kind()),
        None => format!("{line}: {}", e.kind()),
    }
}

impl ChatTemplate {
    /// Compiles `source`; the error says where the template is invalid.
    pub fn new(source: &str, special: SpecialTokens) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        // A template comes with the model, from whoever made the file: one that loops without end
        // runs out of fuel instead of hanging data preparation. Real ones use a few hundred per message.
        env.set_fuel(Some(TEMPLATE_FUEL));
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", |message: String| -> Result<Value, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        });
        env.add_template_owned("chat", source.to_string()).map_err(TemplateError::Invalid)?;
        Ok(Self { env, source: source.to_string(), special })
    }

    /// The Jinja source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders `messages`; with `add_generation_prompt` the text ends where the assistant's reply begins.
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        let s = &self.special;
        let ctx = minijinja::context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => s.bos, eos_token => s.eos, pad_token => s.pad, unk_token => s.unk,
        };
        let template = self.env.get_template("chat").expect("added in new()");
        template.render(ctx).map_err(TemplateError::Failed)
    }
}

/// Python's `json.dumps(value, ensure_ascii=False, indent=indent)`, as transformers' `tojson`.
fn tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let mut out = Vec::new();
    let written = match indent {
        Some(n) => {
            let pad = vec![b' '; n];
            value.serialize(&mut serde_json::Serializer::with_formatter(
                &mut out,
                serde_json::ser::PrettyFormatter::with_indent(&pad),
            ))
        }
        None => {
            value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, PythonFormatter))
        }
    };
    written.map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    Ok(Value::from_safe_string(String::from_utf8(out).expect("serde_json writes UTF-8")))
}

/// `json.dumps`' default separators: `", "` between items and `": "` after keys.
struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tojson_writes_what_python_writes() {
        let t = ChatTemplate::new(
            "{{ messages | tojson }}|{{ {'a': [1, 'é<']} | tojson }}",
            SpecialTokens::default(),
        )
        .unwrap();
        let out = t.render(&[Message::new("user", "hi")], false).unwrap();
        assert_eq!(out, r#"[{"role": "user", "content": "hi"}]|{"a": [1, "é<"]}"#);
    }

    #[test]
    fn raise_exception_fails_with_the_message() {
        let t = ChatTemplate::new(
            "{{ raise_exception('roles must alternate') }}",
            SpecialTokens::default(),
        )
        .unwrap();
        assert!(t.render(&[], false).unwrap_err().to_string().contains("roles must alternate"));
    }
}
