//! Nomad's flag syntax on top of clap: Nomad (Go's `flag` package) writes long flags with one
//! dash (`-detach`, `-address=http://…`, `-var-file f`). Before clap parses, every
//! single-dash flag whose name is longer than one letter is rewritten to the double-dash form.
//! Single-letter flags (`-n 10`, `-f`, `-s SIGHUP`) and `--flags` pass through unchanged, and
//! nothing after a bare `--` is touched. For `alloc exec`, whose trailing arguments are the
//! remote command's own (`ls -la`), nothing after the allocation ID is touched either, as Go's
//! flag parsing stops at the first positional argument.
//!
//! Not here: the flags themselves (see the command definitions).

use std::ffi::OsString;

/// Rewrites `-name[=value]` to `--name[=value]` for multi-letter names; the program name
/// (first element) is kept as is.
pub fn rewrite_single_dash_flags(arguments: Vec<OsString>) -> Vec<OsString> {
    let is_exec = arguments.len() > 2
        && arguments[1].to_str() == Some("alloc")
        && arguments[2].to_str() == Some("exec");
    let mut rewritten = Vec::with_capacity(arguments.len());
    let mut passthrough = false;
    let mut next_is_value = false;
    for (position, argument) in arguments.into_iter().enumerate() {
        if position == 0 || passthrough || (is_exec && position <= 2) {
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
        if is_exec && !next_is_value && !text.starts_with('-') {
            // The allocation ID: the command follows.
            passthrough = true;
            rewritten.push(argument);
            continue;
        }
        let was_value = std::mem::take(&mut next_is_value);
        if !was_value && is_single_dash_long_flag(text) {
            next_is_value = is_exec && EXEC_VALUE_FLAGS.contains(&text.trim_start_matches('-'));
            rewritten.push(OsString::from(format!("-{text}")));
        } else {
            next_is_value = is_exec
                && !was_value
                && text.starts_with("--")
                && EXEC_VALUE_FLAGS.contains(&text.trim_start_matches('-'));
            rewritten.push(argument);
        }
    }
    rewritten
}

/// The flags of `alloc exec` that take the next argument as their value.
const EXEC_VALUE_FLAGS: &[&str] = &["task", "address", "region", "namespace", "token"];

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
    fn the_remote_command_of_alloc_exec_is_left_alone() {
        assert_eq!(
            rewrite(&[
                "drover",
                "alloc",
                "exec",
                "-task",
                "web",
                "-address=http://x:1",
                "-i=false",
                "abc",
                "ls",
                "-la",
                "-color"
            ]),
            vec![
                "drover",
                "alloc",
                "exec",
                "--task",
                "web",
                "--address=http://x:1",
                "-i=false",
                "abc",
                "ls",
                "-la",
                "-color"
            ]
        );
        assert_eq!(
            rewrite(&[
                "drover",
                "alloc",
                "exec",
                "-address",
                "http://x:1",
                "abc",
                "/bin/sh",
                "-c",
                "exit 7"
            ]),
            vec![
                "drover",
                "alloc",
                "exec",
                "--address",
                "http://x:1",
                "abc",
                "/bin/sh",
                "-c",
                "exit 7"
            ]
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
