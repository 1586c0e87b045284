//! `drover connect-proxy -config <path>` (hidden): runs one Connect sidecar proxy
//! (`drover_mesh::proxy`) from the JSON config the client wrote, until SIGTERM or SIGINT.

use std::path::PathBuf;

use clap::Args;

use crate::Io;

#[derive(Debug, Args)]
pub struct ConnectProxyArgs {
    /// The proxy's config file (JSON, `ConnectProxyConfig`).
    #[arg(long)]
    pub config: PathBuf,
    /// The level of the logs written to standard error.
    #[arg(long, default_value = "info")]
    pub log_level: String,
}

pub async fn run(arguments: ConnectProxyArgs, io: &mut Io<'_>) -> i32 {
    let level = match arguments
        .log_level
        .parse::<drover_agent::logging::LogLevel>()
    {
        Ok(level) => level,
        Err(error) => {
            io.error(format!("Error: {error}"));
            return 1;
        }
    };
    drover_agent::logging::init(level, false, &drover_agent::logging::LogHub::new());
    let config = match drover_mesh::proxy::load_config(&arguments.config) {
        Ok(config) => config,
        Err(error) => {
            io.error(format!("Error: {error}"));
            return 1;
        }
    };
    use tokio::signal::unix::{SignalKind, signal};
    let (mut interrupt, mut terminate) = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(interrupt), Ok(terminate)) => (interrupt, terminate),
        (Err(error), _) | (_, Err(error)) => {
            io.error(format!("Error installing the signal handlers: {error}"));
            return 1;
        }
    };
    let shutdown = async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    };
    match drover_mesh::proxy::run(config, shutdown).await {
        Ok(()) => 0,
        Err(error) => {
            io.error(format!("Error: {error}"));
            1
        }
    }
}
