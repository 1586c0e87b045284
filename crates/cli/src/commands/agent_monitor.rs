//! `drover monitor [-log-level=LEVEL] [-json]`: streams an agent's log as Nomad's `nomad
//! monitor` does (`GET /v1/agent/monitor`), printing each line as it comes until interrupted or
//! the agent goes away.
//!
//! Not here: the evaluation monitor of `job run` (`commands::monitor`).

use clap::Args;

use crate::commands::describe;
use crate::{ApiFlags, Io};

#[derive(Debug, Args)]
pub struct MonitorArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// The least severe level to show: TRACE, DEBUG, INFO, WARN or ERROR.
    #[arg(long = "log-level", value_name = "LEVEL", default_value = "INFO")]
    pub log_level: String,
    /// Print the log lines as JSON.
    #[arg(long = "json", alias = "log-json")]
    pub json: bool,
}

pub async fn run(arguments: MonitorArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let mut stream = match client
        .agent_monitor(&arguments.log_level, arguments.json)
        .await
    {
        Ok(stream) => stream,
        Err(error) => {
            io.error(describe("starting monitor", &error));
            return 1;
        }
    };
    loop {
        match stream.next_frame().await {
            Ok(Some(frame)) => {
                if !frame.data.0.is_empty() {
                    let _ = io.out.write_all(&frame.data.0);
                    let _ = io.out.flush();
                }
            }
            Ok(None) => return 0,
            Err(error) => {
                io.error(describe("reading the monitor stream", &error));
                return 1;
            }
        }
    }
}
