//! The shim entry point as a small example binary, for trying launch specs by hand without
//! building the agent.

fn main() {
    std::process::exit(drover_shim::main_from_args(std::env::args_os()));
}
