//! `drover agent`: one process that is both server (state, scheduler, plan applier) and client
//! (node agent running tasks), serving Nomad's HTTP API.
//!
//! This module owns the agent's flags and configuration and wires the library crates together;
//! the work itself lives in those crates.

use std::path::PathBuf;

/// Flags of `drover agent`, named as Nomad names them (`-dev`, `-config`, `-data-dir`, ...).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentArgs {
    /// Development mode: server and client in one process, state in a temporary directory
    /// unless `-data-dir` is given, listening on 127.0.0.1.
    #[arg(long)]
    pub dev: bool,
    /// Agent configuration file (HCL, with Nomad's keys). May be repeated.
    #[arg(long = "config", value_name = "FILE")]
    pub config: Vec<PathBuf>,
    /// Directory for server and client state.
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address the HTTP API binds to.
    #[arg(long = "bind", value_name = "ADDR")]
    pub bind: Option<String>,
    /// HTTP API port; 0 picks a free port.
    #[arg(long = "http-port", value_name = "PORT")]
    pub http_port: Option<u16>,
}

/// Runs the agent until SIGINT or SIGTERM.
pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    anyhow::bail!("the agent is not available in this build ({args:?})")
}
