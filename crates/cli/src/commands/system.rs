//! `drover system gc` and `drover system reconcile summaries`: Nomad's system commands, each
//! one `PUT` to the server (`/v1/system/gc`, `/v1/system/reconcile/summaries`), silent on
//! success and `Error running …: <why>` on failure, as Nomad's CLI prints them.

use clap::{Args, Subcommand};

use crate::commands::describe;
use crate::{ApiFlags, Io};

#[derive(Debug, Subcommand)]
pub enum SystemCommand {
    /// Run the system garbage collection process
    Gc(SystemArgs),
    /// Perform system reconciliation tasks
    #[command(subcommand)]
    Reconcile(ReconcileCommand),
}

#[derive(Debug, Subcommand)]
pub enum ReconcileCommand {
    /// Reconciles the summaries of all registered jobs
    Summaries(SystemArgs),
}

#[derive(Debug, Args)]
pub struct SystemArgs {
    #[command(flatten)]
    pub api: ApiFlags,
}

pub async fn run(command: SystemCommand, io: &mut Io<'_>) -> i32 {
    let (arguments, path, doing) = match command {
        SystemCommand::Gc(arguments) => (
            arguments,
            "/v1/system/gc",
            "running system garbage-collection",
        ),
        SystemCommand::Reconcile(ReconcileCommand::Summaries(arguments)) => (
            arguments,
            "/v1/system/reconcile/summaries",
            "running system summary reconciliation",
        ),
    };
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    match client.call_json("PUT", path, None).await {
        Ok(_) => 0,
        Err(error) => {
            io.error(describe(doing, &error));
            1
        }
    }
}
