//! The rule for tests that need root (and, usually, a cgroup filesystem): where what they need
//! is there they run; where it is missing they skip with the reason printed, except under
//! `CI=true`, where a missing requirement fails the test — CI runs as root on purpose, and a
//! test that quietly skipped there would prove nothing.
//!
//! Shared by the root-only tests of every crate; nothing in the agent calls it.

/// What a root-only test does on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootTestDecision {
    Run,
    /// Not under CI: skip, printing why.
    Skip(String),
    /// Under `CI=true`: fail, saying why.
    Fail(String),
}

/// The decision for a test that needs `needs` (said in words), given whether this process is
/// root, whether the rest of what it needs is there, and the value of `CI`.
pub fn decide(needs: &str, is_root: bool, available: bool, ci: Option<&str>) -> RootTestDecision {
    if is_root && available {
        return RootTestDecision::Run;
    }
    let missing = if is_root {
        format!("needs {needs}, which this machine lacks")
    } else {
        format!("needs root and {needs}")
    };
    if ci.is_some_and(|value| value.eq_ignore_ascii_case("true")) {
        RootTestDecision::Fail(format!("CI=true, but the test {missing}"))
    } else {
        RootTestDecision::Skip(format!("skipping: {missing}"))
    }
}

/// Whether a root-only test should run here: `true` to run; `false` (after printing why) to
/// skip; under `CI=true` a missing requirement panics, failing the test.
pub fn root_test_may_run(needs: &str, available: bool) -> bool {
    let ci = std::env::var("CI").ok();
    match decide(
        needs,
        nix::unistd::geteuid().is_root(),
        available,
        ci.as_deref(),
    ) {
        RootTestDecision::Run => true,
        RootTestDecision::Skip(reason) => {
            eprintln!("{reason}");
            false
        }
        #[allow(clippy::panic)] // failing the calling test is the point
        RootTestDecision::Fail(reason) => panic!("{reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEEDS: &str = "a cgroup filesystem";

    #[test]
    fn root_with_everything_runs_under_ci_or_not() {
        for ci in [None, Some("true"), Some("false")] {
            assert_eq!(decide(NEEDS, true, true, ci), RootTestDecision::Run);
        }
    }

    #[test]
    fn without_root_or_the_filesystem_it_skips_outside_ci() {
        for ci in [None, Some("false"), Some(""), Some("1")] {
            let RootTestDecision::Skip(reason) = decide(NEEDS, false, true, ci) else {
                panic!("not root, CI={ci:?}: skip");
            };
            assert!(
                reason.contains("needs root and a cgroup filesystem"),
                "{reason}"
            );
            assert!(matches!(
                decide(NEEDS, true, false, ci),
                RootTestDecision::Skip(_)
            ));
        }
    }

    #[test]
    fn under_ci_a_missing_requirement_fails() {
        for ci in ["true", "TRUE"] {
            let RootTestDecision::Fail(reason) = decide(NEEDS, false, true, Some(ci)) else {
                panic!("not root under CI: fail");
            };
            assert!(reason.starts_with("CI=true"), "{reason}");
            let RootTestDecision::Fail(reason) = decide(NEEDS, true, false, Some(ci)) else {
                panic!("no cgroups under CI: fail");
            };
            assert!(reason.contains("which this machine lacks"), "{reason}");
        }
    }
}
