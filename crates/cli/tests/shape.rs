//! The binary's shape: the `drover` a user runs carries no test doubles — neither the fake
//! `mock_driver` nor the simulated node and in-memory server, nor the scheduler's builders.

use std::process::Command;

#[test]
fn the_agent_binary_is_built_without_test_doubles() {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "drover",
            "-e",
            "normal,features",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8_lossy(&output.stdout);
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
            "the drover binary is built with {forbidden}:\n{tree}"
        );
    }
}
