//! `drover status [ID]`: the job list, or the status of whatever object the ID (or prefix)
//! names — a job, then an allocation, then a node, as Nomad's `status` command tries them.

use clap::Args;

use crate::commands::{alloc, job, lookup, node};
use crate::{ApiFlags, Io};

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// A job, allocation or node ID or prefix; all jobs when absent.
    pub id: Option<String>,
}

pub async fn run(arguments: StatusArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let Some(id) = arguments.id else {
        return job::list_jobs(&client, io, arguments.json).await;
    };
    let jobs = match client.jobs(&id).await {
        Ok(jobs) => jobs,
        Err(error) => {
            io.error(crate::commands::describe("querying jobs", &error));
            return 1;
        }
    };
    if !jobs.is_empty() {
        let Some(job_id) = job::resolve_job(&client, io, &id).await else {
            return 1;
        };
        return job::show_job(&client, io, &job_id, arguments.json, arguments.verbose).await;
    }
    if id.len() >= 2
        && let Ok(allocations) = client.allocations(&id).await
        && !allocations.is_empty()
    {
        let Some(allocation) = lookup::resolve_allocation(&client, io, &id).await else {
            return 1;
        };
        if arguments.json {
            io.say(serde_json::to_string_pretty(&allocation).unwrap_or_default());
            return 0;
        }
        alloc::show_allocation(&client, io, &allocation, arguments.verbose).await;
        return 0;
    }
    if let Ok(nodes) = client.nodes(&id).await
        && let [only] = nodes.as_slice()
    {
        return node::show_node(&client, io, &only.id, arguments.json, arguments.verbose).await;
    }
    io.error(format!("No matches returned for query \"{id}\""));
    1
}
