//! `drover deployment list|status|promote|fail|pause|resume` and `drover job promote`, with
//! Nomad's tables and words, and the deployment monitor `job run` hands over to once its
//! evaluation finished (Nomad's non-terminal monitor: the deployment printed again whenever it
//! changes, until it is successful, failed or cancelled; a failed one with `auto_revert` is
//! followed by the deployment of the version rolled back to).
//!
//! Not here: evaluation monitoring (`monitor`).

use clap::{Args, Subcommand};
use drover_api::client::ApiClient;
use drover_structs::Deployment;
use serde_json::json;

use crate::commands::deployment_view::{deployment_text, monitor_deployment};
use crate::commands::describe;
use crate::commands::monitor::{MonitorOptions, monitor_evaluation};
use crate::format::{format_data, now_date, short_id};
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum DeploymentCommand {
    /// List deployments
    List(ListArgs),
    /// Show the status of a deployment
    Status(StatusArgs),
    /// Promote a deployment's canaries
    Promote(PromoteArgs),
    /// Mark a deployment failed
    Fail(WriteArgs),
    /// Pause a deployment
    Pause(WriteArgs),
    /// Resume a paused deployment
    Resume(WriteArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Format with a Go template.
    #[arg(short = 't', value_name = "TEMPLATE")]
    pub template: Option<String>,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Format with a Go template.
    #[arg(short = 't', value_name = "TEMPLATE")]
    pub template: Option<String>,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// Watch the deployment until it finishes.
    #[arg(long)]
    pub monitor: bool,
    /// The deployment ID or ID prefix; every deployment when absent.
    pub deployment: Option<String>,
}

#[derive(Debug, Args)]
pub struct PromoteArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Promote only this group's canaries (repeatable).
    #[arg(long = "group", value_name = "GROUP")]
    pub groups: Vec<String>,
    /// Return right after promoting, without watching the evaluation.
    #[arg(long)]
    pub detach: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// The deployment ID or ID prefix (for `job promote`: the job ID or prefix).
    pub id: String,
}

#[derive(Debug, Args)]
pub struct WriteArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Return right after the change, without watching the evaluation.
    #[arg(long)]
    pub detach: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// The deployment ID or ID prefix.
    pub deployment: String,
}

pub async fn run(command: DeploymentCommand, io: &mut Io<'_>) -> i32 {
    match command {
        DeploymentCommand::List(arguments) => list(arguments, io).await,
        DeploymentCommand::Status(arguments) => status(arguments, io).await,
        DeploymentCommand::Promote(arguments) => promote(arguments, io).await,
        DeploymentCommand::Fail(arguments) => fail(arguments, io).await,
        DeploymentCommand::Pause(arguments) => pause(arguments, io, true).await,
        DeploymentCommand::Resume(arguments) => pause(arguments, io, false).await,
    }
}

fn client_of(api: &ApiFlags, io: &mut Io<'_>) -> Option<ApiClient> {
    match api.client() {
        Ok(client) => Some(client),
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            None
        }
    }
}

/// Nomad's `formatDeployments`.
pub fn deployments_table(deployments: &[Deployment], verbose: bool) -> String {
    if deployments.is_empty() {
        return "No deployments found".to_owned();
    }
    let mut rows = vec![
        ["ID", "Job ID", "Job Version", "Status", "Description"]
            .iter()
            .map(|cell| (*cell).to_string())
            .collect::<Vec<_>>(),
    ];
    for deployment in deployments {
        rows.push(vec![
            short_id(&deployment.id, verbose),
            deployment.job_id.clone(),
            deployment.job_version.to_string(),
            deployment.status.clone(),
            deployment.status_description.clone(),
        ]);
    }
    columnize::columns(&rows)
}

/// Finds one deployment by ID or prefix as Nomad's `getDeployment` does; prints why not.
async fn resolve(
    client: &ApiClient,
    io: &mut Io<'_>,
    id: &str,
    verbose: bool,
) -> Option<Deployment> {
    let found = if id.len() == 36 {
        client
            .deployment(id)
            .await
            .map(|deployment| vec![deployment])
    } else {
        let mut prefix = id.replace('-', "");
        if prefix.len() == 1 {
            io.error(
                "Error retrieving deployment: Identifier must contain at least two characters.",
            );
            return None;
        }
        if prefix.len() % 2 == 1 {
            prefix.pop();
        }
        client.deployments(&prefix).await
    };
    match found {
        Err(error) => {
            io.error(describe("retrieving deployment", &error));
            None
        }
        Ok(mut candidates) => match candidates.len() {
            0 => {
                io.error(format!(
                    "Error retrieving deployment: Deployment ID {id:?} matched no deployments"
                ));
                None
            }
            1 => candidates.pop(),
            _ => {
                io.error(format!(
                    "Prefix matched multiple deployments\n\n{}",
                    deployments_table(&candidates, verbose)
                ));
                None
            }
        },
    }
}

async fn list(arguments: ListArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client_of(&arguments.api, io) else {
        return 1;
    };
    let template = arguments.template.unwrap_or_default();
    match client.deployments("").await {
        Ok(deployments) if arguments.json || !template.is_empty() => {
            say_formatted(io, arguments.json, &template, &deployments)
        }
        Ok(deployments) => {
            io.say(deployments_table(&deployments, arguments.verbose));
            0
        }
        Err(error) => {
            io.error(describe("retrieving deployments", &error));
            1
        }
    }
}

/// Prints `data` as Nomad's `Format` does for `-json` and `-t`.
fn say_formatted(io: &mut Io<'_>, json: bool, template: &str, data: &impl serde::Serialize) -> i32 {
    match format_data(json, template, data) {
        Ok(text) => {
            io.say(text);
            0
        }
        Err(error) => {
            io.error(error);
            1
        }
    }
}

async fn status(arguments: StatusArgs, io: &mut Io<'_>) -> i32 {
    let template = arguments.template.clone().unwrap_or_default();
    let formatted = arguments.json || !template.is_empty();
    if arguments.monitor && formatted {
        io.error("The monitor flag cannot be used with the '-json' or '-t' flags");
        return 1;
    }
    let Some(client) = client_of(&arguments.api, io) else {
        return 1;
    };
    let Some(id) = arguments.deployment else {
        return match client.deployments("").await {
            Ok(deployments) => {
                io.say(deployments_table(&deployments, arguments.verbose));
                0
            }
            Err(error) => {
                io.error(describe("retrieving deployments", &error));
                1
            }
        };
    };
    let Some(deployment) = resolve(&client, io, &id, arguments.verbose).await else {
        return 1;
    };
    if formatted {
        return say_formatted(io, arguments.json, &template, &deployment);
    }
    if arguments.monitor {
        io.say(format!(
            "{}: Monitoring deployment \"{}\"",
            now_date(),
            short_id(&deployment.id, arguments.verbose)
        ));
        monitor_deployment(&client, io, &deployment.id, arguments.verbose, "").await;
        return 0;
    }
    io.say(deployment_text(&deployment, arguments.verbose, true));
    0
}

/// Watches the evaluation a deployment write created, unless detached.
async fn follow(
    client: &ApiClient,
    io: &mut Io<'_>,
    eval_id: &str,
    detach: bool,
    verbose: bool,
) -> i32 {
    if detach || eval_id.is_empty() {
        return 0;
    }
    monitor_evaluation(client, io, eval_id, MonitorOptions::new(verbose)).await
}

async fn promote(arguments: PromoteArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client_of(&arguments.api, io) else {
        return 1;
    };
    let Some(deployment) = resolve(&client, io, &arguments.id, arguments.verbose).await else {
        return 1;
    };
    match promote_request(&client, &deployment.id, &arguments.groups).await {
        Ok(response) => {
            follow(
                &client,
                io,
                &response.eval_id,
                arguments.detach,
                arguments.verbose,
            )
            .await
        }
        Err(error) => {
            io.error(describe("promoting deployment", &error));
            1
        }
    }
}

async fn promote_request(
    client: &ApiClient,
    deployment_id: &str,
    groups: &[String],
) -> Result<drover_structs::DeploymentUpdateResponse, drover_api::client::ClientError> {
    let body = if groups.is_empty() {
        json!({"DeploymentID": deployment_id, "All": true})
    } else {
        json!({"DeploymentID": deployment_id, "Groups": groups})
    };
    client
        .deployment_write("promote", deployment_id, body)
        .await
}

/// `job promote`: promotes the job's latest deployment.
pub async fn job_promote(arguments: PromoteArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client_of(&arguments.api, io) else {
        return 1;
    };
    let Some(job_id) = crate::commands::lookup::resolve_job(&client, io, &arguments.id).await
    else {
        return 1;
    };
    let deployment = match client.job_latest_deployment(&job_id).await {
        Ok(Some(deployment)) => deployment,
        Ok(None) => {
            io.error(format!("Job {job_id:?} has no deployment to promote"));
            return 1;
        }
        Err(error) => {
            io.error(describe("retrieving deployment", &error));
            return 1;
        }
    };
    match promote_request(&client, &deployment.id, &arguments.groups).await {
        Ok(response) => {
            follow(
                &client,
                io,
                &response.eval_id,
                arguments.detach,
                arguments.verbose,
            )
            .await
        }
        Err(error) => {
            io.error(format!(
                "Error promoting deployment {:?} for job {job_id:?}: {error}",
                deployment.id
            ));
            1
        }
    }
}

async fn fail(arguments: WriteArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client_of(&arguments.api, io) else {
        return 1;
    };
    let Some(deployment) = resolve(&client, io, &arguments.deployment, arguments.verbose).await
    else {
        return 1;
    };
    let response = match client
        .deployment_write(
            "fail",
            &deployment.id,
            json!({"DeploymentID": deployment.id}),
        )
        .await
    {
        Ok(response) => response,
        Err(error) => {
            io.error(describe("failing deployment", &error));
            return 1;
        }
    };
    match response.reverted_job_version {
        None => io.say(format!("Deployment {:?} failed", deployment.id)),
        Some(version) => io.say(format!(
            "Deployment {:?} failed. Auto-reverted to job version {version}.",
            deployment.id
        )),
    }
    if arguments.detach || response.eval_id.is_empty() {
        return 0;
    }
    io.say("");
    follow(&client, io, &response.eval_id, false, arguments.verbose).await
}

async fn pause(arguments: WriteArgs, io: &mut Io<'_>, paused: bool) -> i32 {
    let Some(client) = client_of(&arguments.api, io) else {
        return 1;
    };
    let Some(deployment) = resolve(&client, io, &arguments.deployment, arguments.verbose).await
    else {
        return 1;
    };
    let response = match client
        .deployment_write(
            "pause",
            &deployment.id,
            json!({"DeploymentID": deployment.id, "Pause": paused}),
        )
        .await
    {
        Ok(response) => response,
        Err(error) => {
            let doing = if paused {
                "pausing deployment"
            } else {
                "resuming deployment"
            };
            io.error(describe(doing, &error));
            return 1;
        }
    };
    if paused {
        io.say(format!("Deployment {:?} paused", deployment.id));
        return 0;
    }
    io.say(format!("Deployment {:?} resumed", deployment.id));
    if arguments.detach || response.eval_id.is_empty() {
        return 0;
    }
    io.say("");
    follow(&client, io, &response.eval_id, false, arguments.verbose).await
}
