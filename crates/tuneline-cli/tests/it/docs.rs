//! Every `tuneline` command that README.md and docs/quickstart.md tell a
//! newcomer to type is one the binary accepts: each is run with `--help`
//! added, which checks its subcommands and flags without doing its work.

use crate::common::TestContext;

/// The lines of a Markdown file's code blocks: indented by four spaces, or fenced.
fn code_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            lines.push(line.trim().to_string());
        } else if let Some(code) = line.strip_prefix("    ") {
            lines.push(code.trim().to_string());
        }
    }
    lines
}

/// Words as the shell splits them, for the plain lines the docs hold: blanks
/// apart, double quotes grouping.
fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let (mut word, mut quoted) = (String::new(), false);
    for c in command.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The `tuneline` commands of a code line: each part between `&&`, `;` and
/// `|` that runs tuneline, its trailing `# comment` and its redirections
/// (`> FILE`, `< FILE`) removed.
fn commands(line: &str) -> Vec<Vec<String>> {
    let line = line.split(" #").next().unwrap_or_default();
    line.split("&&")
        .flat_map(|part| part.split([';', '|']))
        .map(|part| {
            let mut words = words(part);
            while let Some(at) = words.iter().position(|w| w == ">" || w == "<") {
                words.drain(at..(at + 2).min(words.len()));
            }
            words
        })
        .filter(|w| w.first().map(String::as_str) == Some("tuneline"))
        .map(|w| w[1..].to_vec())
        .collect()
}

/// Runs each tuneline command of `file` with `--help`, which must succeed;
/// returns how many there were.
fn accepts_every_command(ctx: &TestContext, file: &str) -> usize {
    let path = tuneline_testkit::repo_root().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut count = 0;
    for line in code_lines(&text) {
        for mut args in commands(&line) {
            // Before a `--`, past which the words are the external command's.
            let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
            args.insert(at, "--help".to_string());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, _, err) = ctx.run(&args);
            assert_eq!(code, 0, "{file}: `{line}`: tuneline refuses it:\n{err}");
            count += 1;
        }
    }
    count
}

#[test]
fn every_command_the_readme_and_the_quickstart_give_is_one_the_binary_accepts() {
    let ctx = TestContext::new();
    let readme = accepts_every_command(&ctx, "README.md");
    let quickstart = accepts_every_command(&ctx, "docs/quickstart.md");
    // Every command the two pages give, so that a page whose blocks were not read fails.
    assert_eq!((readme, quickstart), (6, 14), "commands checked in README.md and the quickstart");
}
