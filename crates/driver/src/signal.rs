//! Signal names as job specs write them (`SIGINT`, `int`, `15`) to numbers. Not for: sending them.

use nix::sys::signal::Signal;
use std::str::FromStr;

use crate::DriverError;

/// The signal a task is stopped with when its `kill_signal` is unset (Nomad's default).
pub const DEFAULT_KILL_SIGNAL: &str = "SIGINT";

/// The signals a task may be sent on Linux, by name: what the node advertises as `os.signals`
/// (for `change_signal` and `kill_signal` feasibility) and what the client accepts, from this
/// one table. Every name here parses with [`parse_signal`].
pub const SIGNAL_NAMES: &[&str] = &[
    "SIGABRT",
    "SIGALRM",
    "SIGBUS",
    "SIGCHLD",
    "SIGCONT",
    "SIGFPE",
    "SIGHUP",
    "SIGILL",
    "SIGINT",
    "SIGIO",
    "SIGIOT",
    "SIGKILL",
    "SIGPIPE",
    "SIGPROF",
    "SIGPWR",
    "SIGQUIT",
    "SIGSEGV",
    "SIGSTKFLT",
    "SIGSTOP",
    "SIGSYS",
    "SIGTERM",
    "SIGTRAP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGUSR1",
    "SIGUSR2",
    "SIGVTALRM",
    "SIGWINCH",
    "SIGXCPU",
    "SIGXFSZ",
];

/// Parses `SIGUSR1`, `USR1`, `usr1` or `10` into a signal.
pub fn parse_signal(name: &str) -> Result<Signal, DriverError> {
    let trimmed = name.trim();
    if let Ok(number) = trimmed.parse::<i32>() {
        return Signal::try_from(number).map_err(|_| DriverError::UnknownSignal(name.to_string()));
    }
    let upper = trimmed.to_ascii_uppercase();
    let full = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    if full == "SIGIOT" {
        // Linux's other name of SIGABRT.
        return Ok(Signal::SIGABRT);
    }
    Signal::from_str(&full).map_err(|_| DriverError::UnknownSignal(name.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn names_short_names_and_numbers_parse() {
        assert_eq!(parse_signal("SIGINT").unwrap(), Signal::SIGINT);
        assert_eq!(parse_signal("usr1").unwrap(), Signal::SIGUSR1);
        assert_eq!(parse_signal("15").unwrap(), Signal::SIGTERM);
        assert!(matches!(
            parse_signal("SIGNOPE"),
            Err(DriverError::UnknownSignal(_))
        ));
        assert!(parse_signal("999").is_err());
    }

    #[test]
    fn every_name_of_the_table_parses() {
        for name in SIGNAL_NAMES {
            assert!(parse_signal(name).is_ok(), "{name}");
        }
        assert_eq!(parse_signal("iot").unwrap(), Signal::SIGABRT);
    }
}
