//! Stripping HTML remnants (scraped chat pages leave `<div class="markdown">`,
//! `<p>`, `&lt;`) outside Markdown code fences, where HTML may be the point.
//! Only known HTML tag names are touched, so `a < b` and `Vec<T>` survive.

const BLOCK: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "pre",
    "table",
    "thead",
    "tbody",
    "tr",
    "td",
    "th",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "hr",
];
const INLINE: &[&str] =
    &["span", "code", "strong", "em", "b", "i", "a", "svg", "path", "button", "img", "sup", "sub"];

/// The text without HTML tags and entities, or `None` if there were none.
pub fn strip(text: &str) -> Option<String> {
    if !text.contains('<') && !text.contains('&') {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    for (i, part) in text.split("```").enumerate() {
        if i > 0 {
            out.push_str("```");
        }
        if i % 2 == 1 {
            out.push_str(part); // inside a code fence
            continue;
        }
        let stripped = strip_tags(part);
        let decoded = decode_entities(&stripped);
        changed |= decoded != part;
        out.push_str(&decoded);
    }
    changed.then_some(out)
}

fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        match tag_len(tail) {
            Some((len, block)) => {
                if block && !out.ends_with('\n') && !out.is_empty() {
                    out.push('\n');
                }
                rest = &tail[len..];
            }
            None => {
                out.push('<');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Length of the known HTML tag at the start of `s`, and whether it is a block tag.
fn tag_len(s: &str) -> Option<(usize, bool)> {
    let body = s.strip_prefix('<')?;
    let body = body.strip_prefix('/').unwrap_or(body);
    let name_len = body.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(body.len());
    let name = body[..name_len].to_ascii_lowercase();
    let block = BLOCK.contains(&name.as_str());
    if !block && !INLINE.contains(&name.as_str()) {
        return None;
    }
    let after = body[name_len..].chars().next()?;
    if !(after == '>' || after == '/' || after.is_whitespace()) {
        return None;
    }
    let close = s.find('>')?;
    (close < 2000).then_some((close + 1, block))
}

fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    [
        ("&lt;", "<"),
        ("&gt;", ">"),
        ("&quot;", "\""),
        ("&#39;", "'"),
        ("&#x27;", "'"),
        ("&nbsp;", " "),
        ("&amp;", "&"),
    ]
    .iter()
    .fold(text.to_string(), |acc, (entity, plain)| acc.replace(entity, plain))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_remnants_but_keeps_code_and_comparisons() {
        let text =
            "<div class=\"markdown prose\"><p>Use a &lt;div&gt; when a < b.</p><p>Next</p></div>";
        assert_eq!(strip(text).unwrap(), "Use a <div> when a < b.\nNext\n");
        let code = "Here:\n```html\n<div>keep</div>\n```\n";
        assert_eq!(strip(code), None);
        assert_eq!(strip("Vec<T> and x<y"), None);
    }
}
