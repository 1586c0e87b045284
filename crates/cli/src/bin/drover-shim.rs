//! `drover-shim`: the per-task supervisor binary. All of its logic lives in `drover-shim`.

fn main() {}
