//! The binary's shape: the `drover` a user runs carries no test doubles — neither the fake
//! `mock_driver` nor the simulated node and in-memory server, nor the scheduler's builders.

use std::process::Command;

/// The features of `drover`'s normal dependencies as `cargo tree` resolves them for `packages`.
#[allow(clippy::expect_used)] // a failed expectation is a failed test
fn normal_features(packages: &[&str]) -> String {
    let output = Command::new(env!("CARGO"))
        .arg("tree")
        .args(packages)
        .args(["-e", "normal,features", "--prefix", "none", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Both `cargo build -p drover` and a build of the whole workspace (Cargo unifies the features
/// its members ask for, so one member turning a test double on as a normal dependency would
/// put it into `drover`: drover-bench is outside the workspace for this). The built binary
/// itself is checked by `scripts/check-test-doubles`, which CI runs.
#[test]
fn the_agent_binary_is_built_without_test_doubles() {
    for packages in [&["-p", "drover"][..], &["--workspace"][..]] {
        let tree = normal_features(packages);
        assert!(
            tree.contains("drover-client"),
            "the tree lists dependencies:\n{tree}"
        );
        for forbidden in [
            "drover-driver feature \"mock\"",
            "drover-client feature \"testing\"",
            "drover-scheduler feature \"testing\"",
        ] {
            assert!(
                !tree.contains(forbidden),
                "a build of {packages:?} makes the drover binary with {forbidden}:\n{tree}"
            );
        }
    }
}
