//! Text rules applied to every turn: Unicode NFC, control characters, HTML remnants.

use unicode_normalization::{is_nfc_quick, IsNormalized, UnicodeNormalization};

/// Cleans one text, noting each kind of edit made.
pub fn clean(text: &str, strip_html: bool, edits: &mut Vec<&'static str>) -> String {
    let mut out = if is_nfc_quick(text.chars()) == IsNormalized::Yes {
        text.to_string()
    } else {
        let nfc: String = text.nfc().collect();
        if nfc != text {
            edits.push("unicode normalized (NFC)");
        }
        nfc
    };
    if out.chars().any(is_removed_control) {
        out.retain(|c| !is_removed_control(c));
        edits.push("control characters removed");
    }
    if strip_html {
        if let Some(stripped) = super::html::strip(&out) {
            out = stripped;
            edits.push("HTML stripped");
        }
    }
    out
}

/// Control characters other than newline and tab.
fn is_removed_control(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfc_and_control_characters() {
        let mut edits = Vec::new();
        assert_eq!(clean("cafe\u{301}\u{0}\r\nok\tyes", false, &mut edits), "café\nok\tyes");
        assert_eq!(edits, ["unicode normalized (NFC)", "control characters removed"]);
    }
}
