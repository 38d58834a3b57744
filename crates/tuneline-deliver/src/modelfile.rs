//! An Ollama `Modelfile` beside a GGUF: `FROM` the file, the chat template
//! as the Go template Ollama runs (ChatML, which Qwen2 and Qwen3 use too,
//! Llama 3, Gemma, Phi-3 and Phi-4), a `PARAMETER stop` per end-of-turn
//! token, and the template's default system prompt as `SYSTEM`.

use std::path::{Path, PathBuf};

use tuneline_model::{ChatTemplate, Message};

use crate::atomic;
use crate::error::DeliverError;

/// A chat-template family Ollama has a Go template for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `<|im_start|>role ... <|im_end|>` (SmolLM2, Qwen2, Qwen2.5).
    ChatMl,
    /// `<|start_header_id|>role<|end_header_id|> ... <|eot_id|>` (Llama 3).
    Llama3,
    /// `<start_of_turn>user|model ... <end_of_turn>` (Gemma 2 and 3); a
    /// system prompt is a user turn, as Ollama's Gemma templates have it.
    Gemma,
    /// `<|role|> ... <|end|>` (Phi-3, Phi-3.5).
    Phi3,
    /// `<|im_start|>role<|im_sep|> ... <|im_end|>` (Phi-4).
    Phi4,
}

const CHATML: &str = "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n";
const LLAMA3: &str = "{{- range .Messages }}<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n{{ .Content }}<|eot_id|>{{ end }}<|start_header_id|>assistant<|end_header_id|>\n\n";
const GEMMA: &str = "{{- range .Messages }}<start_of_turn>{{ if eq .Role \"assistant\" }}model{{ else }}user{{ end }}\n{{ .Content }}<end_of_turn>\n{{ end }}<start_of_turn>model\n";
const PHI3: &str =
    "{{- range .Messages }}<|{{ .Role }}|>\n{{ .Content }}<|end|>\n{{ end }}<|assistant|>\n";
const PHI4: &str = "{{- range .Messages }}<|im_start|>{{ .Role }}<|im_sep|>{{ .Content }}<|im_end|>{{ end }}<|im_start|>assistant<|im_sep|>";

impl Family {
    /// The family of a Jinja chat template, if it is one Ollama's Go form is written for.
    pub fn of(template: &ChatTemplate) -> Option<Self> {
        let source = template.source();
        // Phi-4's markers include ChatML's: its separator is asked first.
        [
            ("<|im_sep|>", Self::Phi4),
            ("<|im_start|>", Self::ChatMl),
            ("<|start_header_id|>", Self::Llama3),
            ("<start_of_turn>", Self::Gemma),
            ("<|assistant|>", Self::Phi3),
        ]
        .into_iter()
        .find_map(|(marker, family)| source.contains(marker).then_some(family))
    }

    /// The Go template.
    pub fn go_template(self) -> &'static str {
        match self {
            Self::ChatMl => CHATML,
            Self::Llama3 => LLAMA3,
            Self::Gemma => GEMMA,
            Self::Phi3 => PHI3,
            Self::Phi4 => PHI4,
        }
    }

    /// The tokens that end a turn.
    pub fn stops(self) -> &'static [&'static str] {
        match self {
            Self::ChatMl | Self::Phi4 => &["<|im_end|>"],
            Self::Llama3 => &["<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"],
            Self::Gemma => &["<end_of_turn>"],
            Self::Phi3 => &["<|end|>", "<|user|>", "<|assistant|>"],
        }
    }

    /// The system turn the template adds when the chat has none, read off
    /// a rendering of one user turn.
    pub fn default_system(self, template: &ChatTemplate) -> Option<String> {
        let text = template.render(&[Message::new("user", "\u{1}")], false).ok()?;
        let (start, end) = match self {
            Self::ChatMl => ("<|im_start|>system\n", "<|im_end|>"),
            Self::Phi4 => ("<|im_start|>system<|im_sep|>", "<|im_end|>"),
            Self::Llama3 => ("<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>"),
            Self::Phi3 => ("<|system|>\n", "<|end|>"),
            // Gemma has no system turn of its own.
            Self::Gemma => return None,
        };
        let after = &text[text.find(start)? + start.len()..];
        let system = &after[..after.find(end)?];
        (!system.trim().is_empty()).then(|| system.to_string())
    }
}

/// The text of a Modelfile for `gguf` with `template`.
pub fn modelfile(gguf: &Path, template: Option<&ChatTemplate>) -> String {
    let file = gguf.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut out = format!("FROM ./{file}\n");
    let Some((template, family)) = template.and_then(|t| Some((t, Family::of(t)?))) else {
        return out;
    };
    out.push_str(&format!("TEMPLATE \"\"\"{}\"\"\"\n", family.go_template()));
    for stop in family.stops() {
        out.push_str(&format!("PARAMETER stop \"{stop}\"\n"));
    }
    if let Some(system) = family.default_system(template) {
        out.push_str(&format!("SYSTEM \"\"\"{system}\"\"\"\n"));
    }
    out
}

/// A Modelfile's parts, as [`modelfile`] writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// `FROM`: the GGUF, relative to the Modelfile.
    pub from: String,
    /// `TEMPLATE`.
    pub template: Option<String>,
    /// Each `PARAMETER stop`.
    pub stops: Vec<String>,
    /// `SYSTEM`.
    pub system: Option<String>,
}

/// Why a Modelfile cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadModelfile {
    /// A `"""` value that never closes (the command).
    #[error("{0}: no closing \"\"\"")]
    Unclosed(String),
    /// No `FROM` line.
    #[error("no FROM line")]
    NoFrom,
}

/// Reads a Modelfile `text`: `FROM`, `TEMPLATE`, `PARAMETER stop` and
/// `SYSTEM`, values quoted, or triple-quoted over several lines.
pub fn parse(text: &str) -> Result<Parsed, BadModelfile> {
    let mut parsed =
        Parsed { from: String::new(), template: None, stops: Vec::new(), system: None };
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let (command, arg) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
        let (name, arg) = match command.to_ascii_uppercase().as_str() {
            "PARAMETER" => arg
                .split_once(' ')
                .map_or((String::new(), ""), |(p, v)| (format!("PARAMETER {p}"), v.trim())),
            other => (other.to_string(), arg),
        };
        let value = match arg.strip_prefix("\"\"\"") {
            Some(open) => match open.find("\"\"\"") {
                Some(end) => open[..end].to_string(),
                None => {
                    let mut value = open.to_string();
                    loop {
                        let next =
                            lines.next().ok_or_else(|| BadModelfile::Unclosed(name.clone()))?;
                        value.push('\n');
                        if let Some(end) = next.find("\"\"\"") {
                            value.push_str(&next[..end]);
                            break value;
                        }
                        value.push_str(next);
                    }
                }
            },
            None => arg.trim_matches('"').to_string(),
        };
        match name.as_str() {
            "FROM" => parsed.from = value,
            "TEMPLATE" => parsed.template = Some(value),
            "SYSTEM" => parsed.system = Some(value),
            "PARAMETER stop" => parsed.stops.push(value),
            _ => {}
        }
    }
    if parsed.from.is_empty() {
        return Err(BadModelfile::NoFrom);
    }
    Ok(parsed)
}

/// Writes `Modelfile` beside `gguf`; returns its path.
pub fn write(gguf: &Path, template: Option<&ChatTemplate>) -> Result<PathBuf, DeliverError> {
    let path = gguf.with_file_name("Modelfile");
    atomic::write(&path, modelfile(gguf, template).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tuneline_model::SpecialTokens;

    #[test]
    fn a_chatml_template_gives_its_go_form_stop_and_default_system() {
        let source = "{% for m in messages %}{% if loop.first and m['role'] != 'system' %}<|im_start|>system\nYou are SmolLM.<|im_end|>\n{% endif %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}";
        let t = ChatTemplate::new(source, SpecialTokens::default()).unwrap();
        let text = modelfile(Path::new("/x/model.q8_0.gguf"), Some(&t));
        assert_eq!(text, format!("FROM ./model.q8_0.gguf\nTEMPLATE \"\"\"{CHATML}\"\"\"\nPARAMETER stop \"<|im_end|>\"\nSYSTEM \"\"\"You are SmolLM.\"\"\"\n"));
    }

    #[test]
    fn a_written_modelfile_parses_back() {
        let source = "{% for m in messages %}{% if loop.first and m['role'] != 'system' %}<|im_start|>system\nYou are SmolLM.<|im_end|>\n{% endif %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}";
        let t = ChatTemplate::new(source, SpecialTokens::default()).unwrap();
        let parsed = parse(&modelfile(Path::new("/x/model.q8_0.gguf"), Some(&t))).unwrap();
        assert_eq!(
            parsed,
            Parsed {
                from: "./model.q8_0.gguf".into(),
                template: Some(CHATML.into()),
                stops: vec!["<|im_end|>".into()],
                system: Some("You are SmolLM.".into())
            }
        );
        assert_eq!(parse("TEMPLATE x").unwrap_err().to_string(), "no FROM line");
    }

    #[test]
    fn a_llama3_template_without_default_system_has_no_system_line() {
        let source = "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{% endfor %}";
        let t = ChatTemplate::new(source, SpecialTokens::default()).unwrap();
        let text = modelfile(Path::new("m.gguf"), Some(&t));
        assert!(
            text.contains("PARAMETER stop \"<|eot_id|>\"") && !text.contains("SYSTEM"),
            "{text}"
        );
        assert_eq!(modelfile(Path::new("m.gguf"), None), "FROM ./m.gguf\n");
    }
}
