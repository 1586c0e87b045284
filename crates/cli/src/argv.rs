//! Nomad's flag syntax on top of clap: Nomad (Go's `flag` package) writes long flags with one
//! dash (`-detach`, `-address=http://…`, `-var-file f`). Before clap parses, every
//! single-dash flag whose name is longer than one letter is rewritten to the double-dash form.
//! Single-letter flags (`-n 10`, `-f`, `-s SIGHUP`) and `--flags` pass through unchanged, and
//! nothing after a bare `--` is touched.
//!
//! Not here: the flags themselves (see the command definitions).

use std::ffi::OsString;

/// Rewrites `-name[=value]` to `--name[=value]` for multi-letter names; the program name
/// (first element) is kept as is.
pub fn rewrite_single_dash_flags(arguments: Vec<OsString>) -> Vec<OsString> {
    let mut rewritten = Vec::with_capacity(arguments.len());
    let mut passthrough = false;
    for (position, argument) in arguments.into_iter().enumerate() {
        if position == 0 || passthrough {
            rewritten.push(argument);
            continue;
        }
        let Some(text) = argument.to_str() else {
            rewritten.push(argument);
            continue;
        };
        if text == "--" {
            passthrough = true;
            rewritten.push(argument);
            continue;
        }
        if is_single_dash_long_flag(text) {
            rewritten.push(OsString::from(format!("-{text}")));
        } else {
            rewritten.push(argument);
        }
    }
    rewritten
}

fn is_single_dash_long_flag(text: &str) -> bool {
    let Some(rest) = text.strip_prefix('-') else {
        return false;
    };
    if rest.starts_with('-') {
        return false;
    }
    let name = rest.split_once('=').map_or(rest, |(name, _)| name);
    name.chars().count() > 1
        && name
            .chars()
            .next()
            .is_some_and(|first| first.is_ascii_alphabetic())
        && name.chars().all(|character| {
            character.is_ascii_alphanumeric() || character == '-' || character == '_'
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(arguments: &[&str]) -> Vec<String> {
        rewrite_single_dash_flags(arguments.iter().map(OsString::from).collect())
            .into_iter()
            .map(|argument| argument.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn nomad_single_dash_long_flags_become_double_dash() {
        assert_eq!(
            rewrite(&[
                "drover",
                "job",
                "run",
                "-detach",
                "-address=http://10.0.0.1:4646",
                "-var-file",
                "v.hcl",
                "web.hcl"
            ]),
            vec![
                "drover",
                "job",
                "run",
                "--detach",
                "--address=http://10.0.0.1:4646",
                "--var-file",
                "v.hcl",
                "web.hcl"
            ]
        );
        assert_eq!(
            rewrite(&["drover", "job", "stop", "-purge", "web"]),
            vec!["drover", "job", "stop", "--purge", "web"]
        );
        assert_eq!(
            rewrite(&["drover", "job", "run", "-var", "image=nginx:1.2", "x.hcl"]),
            vec!["drover", "job", "run", "--var", "image=nginx:1.2", "x.hcl"]
        );
    }

    #[test]
    fn short_flags_double_dash_flags_and_values_are_left_alone() {
        assert_eq!(
            rewrite(&[
                "drover", "alloc", "logs", "-n", "10", "-f", "-stderr", "--tail", "abc", "web"
            ]),
            vec![
                "drover", "alloc", "logs", "-n", "10", "-f", "--stderr", "--tail", "abc", "web"
            ]
        );
        assert_eq!(
            rewrite(&["drover", "alloc", "signal", "-s", "SIGUSR1", "abc"]),
            vec!["drover", "alloc", "signal", "-s", "SIGUSR1", "abc"]
        );
        assert_eq!(
            rewrite(&["drover", "x", "-1", "-"]),
            vec!["drover", "x", "-1", "-"]
        );
    }

    #[test]
    fn nothing_after_a_double_dash_is_rewritten() {
        assert_eq!(
            rewrite(&[
                "drover", "alloc", "exec", "abc", "--", "ls", "-la", "-color"
            ]),
            vec![
                "drover", "alloc", "exec", "abc", "--", "ls", "-la", "-color"
            ]
        );
    }
}
