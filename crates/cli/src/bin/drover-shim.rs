//! `drover-shim`: the per-task supervisor binary. All of its logic lives in `drover-shim`.
//!
//! Usage: `drover-shim <launch-spec.json>`. Prints one JSON start report line on stdout and
//! exits; the daemonized shim keeps running. See `drover_shim::proto`.
//!
//! `drover-shim exec <spec-json>` instead runs one command in a running task's context
//! (`alloc exec`); see `drover_shim::exec_mode`.

fn main() {
    std::process::exit(drover_shim::main_from_args(std::env::args_os()))
}
