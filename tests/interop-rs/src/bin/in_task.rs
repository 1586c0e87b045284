//! Runs inside a drover task (raw_exec, `identity { env = true }`) and reports, as one JSON line
//! on standard output, what `nomad-client-rs` found and got through the task's API socket:
//! whether it chose the Task API on its own, the job's own variable, and what a workload
//! identity without policies is refused.

use nomad_client_rs::ClientError;
use nomad_client_rs::NomadClient;
use nomad_client_rs::job::{ListJobsOptions, ReadJobOptions};
use nomad_client_rs::variable::ReadVariableOptions;
use serde_json::{Value, json};

/// A call's outcome as the test compares it: the value, or Nomad's status and message.
fn outcome<T>(result: Result<T, ClientError>, value: impl FnOnce(T) -> Value) -> Value {
    match result {
        Ok(answer) => json!({ "ok": value(answer) }),
        Err(ClientError::NomadRejected { status, message }) => {
            json!({ "status": status, "message": message })
        }
        Err(other) => json!({ "error": other.to_string() }),
    }
}

#[tokio::main]
async fn main() {
    drover_interop_rs::install_crypto_provider();
    let client = match NomadClient::from_env() {
        Ok(client) => client,
        Err(error) => {
            println!("{}", json!({ "client": error.to_string() }));
            return;
        }
    };
    let job = std::env::var("NOMAD_JOB_ID").unwrap_or_default();
    let read = ReadVariableOptions::default();
    let report = json!({
        "uses_task_api": client.uses_task_api(),
        "own_variable": outcome(
            client.read_variable(&format!("nomad/jobs/{job}"), &read).await,
            |variable| json!(variable.items),
        ),
        "other_variable": outcome(
            client.read_variable("nomad/jobs/someone-else", &read).await,
            |variable| json!(variable.items),
        ),
        "list_jobs": outcome(
            client.list_jobs(&ListJobsOptions::default()).await,
            |jobs| json!(jobs.len()),
        ),
        "read_own_job": outcome(
            client.read_job(&job, &ReadJobOptions::default()).await,
            |job| json!(job.id),
        ),
    });
    println!("{report}");
}
