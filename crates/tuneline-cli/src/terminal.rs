//! Text from elsewhere (a worker's log lines, a trainer's last words in an
//! attempt's error) made safe to print on the operator's terminal.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character but tab and newline shown escaped
/// (ASCII ones as `\x1b`, C1 ones as `\u{9b}`), so that a line cannot move
/// the cursor, rewrite or hide lines, or set the terminal's title.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        let code = u32::from(c);
        // Writing to a String cannot fail.
        let _ = match c {
            c if !escaped(c) => out.write_char(c),
            _ if code < 0x80 => write!(out, "\\x{code:02x}"),
            _ => write!(out, "\\u{{{code:x}}}"),
        };
    }
    Cow::Owned(out)
}

/// Whether `c` is shown escaped: a control character other than tab and newline.
fn escaped(c: char) -> bool {
    c.is_control() && c != '\t' && c != '\n'
}
