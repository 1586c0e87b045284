//! `drover job tag apply|unset`: Nomad 1.9's job version tags, through
//! `PUT|DELETE /v1/job/<id>/versions/<name>/tag`. A tagged version is kept whatever the job's
//! number of versions, shown by `job history` and a target of `job revert <job> <tag>`.

use clap::{Args, Subcommand};

use crate::commands::describe;
use crate::commands::lookup::resolve_job;
use crate::{ApiFlags, Io};

#[derive(Debug, Subcommand)]
pub enum TagCommand {
    /// Tag a version of a job (the latest unless -version)
    Apply(ApplyArgs),
    /// Remove a tag from a job's version
    Unset(UnsetArgs),
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// The tag's name, unique among the job's versions.
    #[arg(long, default_value = "")]
    pub name: String,
    /// A description of the tagged version.
    #[arg(long, default_value = "")]
    pub description: String,
    /// The version to tag (default: the job's latest).
    #[arg(long, default_value = "")]
    pub version: String,
    /// The job ID or ID prefix.
    pub job: String,
}

#[derive(Debug, Args)]
pub struct UnsetArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// The tag's name.
    #[arg(long, default_value = "")]
    pub name: String,
    /// The job ID or ID prefix.
    pub job: String,
}

pub async fn run(command: TagCommand, io: &mut Io<'_>) -> i32 {
    match command {
        TagCommand::Apply(arguments) => apply(arguments, io).await,
        TagCommand::Unset(arguments) => unset(arguments, io).await,
    }
}

fn tag_path(job_id: &str, name: &str) -> String {
    format!(
        "/v1/job/{}/versions/{}/tag",
        drover_api::client::escape_path_segment(job_id),
        drover_api::client::escape_path_segment(name)
    )
}

async fn apply(arguments: ApplyArgs, io: &mut Io<'_>) -> i32 {
    if arguments.job.is_empty() {
        io.error("A job name is required");
        return 1;
    }
    if arguments.name.is_empty() {
        io.error("A version tag name is required");
        io.error("For additional help try 'drover job tag apply -help'");
        return 1;
    }
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let Some(job_id) = resolve_job(&client, io, arguments.job.trim()).await else {
        return 1;
    };
    let version = if arguments.version.is_empty() {
        match client.job(&job_id).await {
            Ok(job) => job.version,
            Err(error) => {
                io.error(describe("retrieving job versions", &error));
                return 1;
            }
        }
    } else {
        match arguments.version.parse::<u64>() {
            Ok(version) => version,
            Err(_) => {
                io.error(format!(
                    "Error parsing version: strconv.ParseUint: parsing {:?}: invalid syntax",
                    arguments.version
                ));
                return 1;
            }
        }
    };
    let body = serde_json::json!({"Version": version, "Description": arguments.description});
    if let Err(error) = client
        .call_json("PUT", &tag_path(&job_id, &arguments.name), Some(body))
        .await
    {
        io.error(describe("tagging job version", &error));
        return 1;
    }
    io.say(format!(
        "Job version {version} tagged with name \"{}\"",
        arguments.name
    ));
    0
}

async fn unset(arguments: UnsetArgs, io: &mut Io<'_>) -> i32 {
    if arguments.job.is_empty() {
        io.error("A job name is required");
        return 1;
    }
    if arguments.name.is_empty() {
        io.error("A version tag name is required");
        io.error("For additional help try 'drover job tag unset -help'");
        return 1;
    }
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let Some(job_id) = resolve_job(&client, io, arguments.job.trim()).await else {
        return 1;
    };
    if let Err(error) = client
        .call_json("DELETE", &tag_path(&job_id, &arguments.name), None)
        .await
    {
        io.error(describe("tagging job version", &error));
        return 1;
    }
    io.say(format!(
        "Tag \"{}\" removed from job \"{}\"",
        arguments.name, arguments.job
    ));
    0
}
