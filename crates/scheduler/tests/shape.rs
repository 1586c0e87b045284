//! The crate's shape: the scheduler depends on no async runtime, no HTTP stack and no storage.

use std::process::Command;

#[test]
fn the_scheduler_links_no_runtime_io_or_storage_crates() {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "drover-scheduler",
            "-e",
            "normal",
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
        tree.contains("drover-structs"),
        "the tree lists dependencies:\n{tree}"
    );
    for forbidden in [
        "tokio ", "reqwest ", "axum ", "redb ", "hyper ", "rand ", "uuid ",
    ] {
        assert!(
            !tree.contains(forbidden),
            "drover-scheduler depends on {forbidden}:\n{tree}"
        );
    }
}
