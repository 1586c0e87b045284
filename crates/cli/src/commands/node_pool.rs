//! `drover node pool apply|list|info|nodes|jobs|delete`, as Nomad's CLI prints them. `apply`
//! reads a node pool specification in HCL (`node_pool "name" { description, meta,
//! scheduler_config }`) or, with `-json`, a JSON node pool, from a file or `-` (stdin).
//!
//! Not here: the rules a pool must follow (the server answers them).

use std::collections::BTreeMap;
use std::io::Read;

use clap::{Args, Subcommand};
use drover_api::client::ApiClient;
use drover_structs::{JobListStub, NodeListStub, NodePool};

use crate::commands::describe;
use crate::commands::lookup::job_list_table;
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum NodePoolCommand {
    /// Create or update a node pool from a specification
    Apply(ApplyArgs),
    /// List node pools
    List(ListArgs),
    /// Show a node pool
    Info(PoolArgs),
    /// List the nodes of a node pool
    Nodes(PoolArgs),
    /// List the jobs of a node pool
    Jobs(PoolArgs),
    /// Delete a node pool
    Delete(PoolArgs),
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// The input is JSON.
    #[arg(long)]
    pub json: bool,
    /// A node pool specification file, or `-` for stdin.
    pub input: String,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PoolArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// A node pool name or name prefix.
    pub pool: String,
}

pub async fn run(command: NodePoolCommand, io: &mut Io<'_>) -> i32 {
    match command {
        NodePoolCommand::Apply(arguments) => apply(arguments, io).await,
        NodePoolCommand::List(arguments) => list(arguments, io).await,
        NodePoolCommand::Info(arguments) => info(arguments, io).await,
        NodePoolCommand::Nodes(arguments) => nodes(arguments, io).await,
        NodePoolCommand::Jobs(arguments) => jobs(arguments, io).await,
        NodePoolCommand::Delete(arguments) => delete(arguments, io).await,
    }
}

fn client(api: &ApiFlags, io: &mut Io<'_>) -> Option<ApiClient> {
    match api.client() {
        Ok(client) => Some(client),
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            None
        }
    }
}

/// Nomad's `formatNodePoolList`.
fn pool_table(pools: &[NodePool]) -> String {
    let mut rows = vec![vec!["Name".to_string(), "Description".to_string()]];
    rows.extend(
        pools
            .iter()
            .map(|pool| vec![pool.name.clone(), pool.description.clone()]),
    );
    columnize::columns(&rows)
}

async fn all_pools(client: &ApiClient) -> Result<Vec<NodePool>, drover_api::client::ClientError> {
    let value = client.call_json("GET", "/v1/node/pools", None).await?;
    serde_json::from_value(value.unwrap_or_default())
        .map_err(|error| drover_api::client::ClientError::Decode(error.to_string()))
}

/// Nomad's `nodePoolByPrefix`: the one pool with the prefix, an exact match among several, or
/// the candidates.
async fn pool_by_prefix(
    client: &ApiClient,
    prefix: &str,
) -> Result<Result<NodePool, Vec<NodePool>>, String> {
    let pools = all_pools(client)
        .await
        .map_err(|error| describe("retrieving node pool", &error))?;
    let mut matching: Vec<NodePool> = pools
        .into_iter()
        .filter(|pool| pool.name.starts_with(prefix))
        .collect();
    match matching.len() {
        0 => Err(format!(
            "Error retrieving node pool: No node pool with prefix {prefix:?} found"
        )),
        1 => Ok(Ok(matching.remove(0))),
        _ => match matching.iter().position(|pool| pool.name == prefix) {
            Some(exact) => Ok(Ok(matching.remove(exact))),
            None => Ok(Err(matching)),
        },
    }
}

/// Resolves a pool argument, printing Nomad's errors; `None` after an error.
async fn resolve(client: &ApiClient, io: &mut Io<'_>, prefix: &str) -> Option<NodePool> {
    match pool_by_prefix(client, prefix).await {
        Err(message) => {
            io.error(message);
            None
        }
        Ok(Err(many)) => {
            io.error(format!(
                "Prefix matched multiple node pools\n\n{}",
                pool_table(&many)
            ));
            None
        }
        Ok(Ok(pool)) => Some(pool),
    }
}

/// A node pool specification in HCL: `node_pool "name" { description, meta { … },
/// scheduler_config { … } }`.
pub fn parse_pool_spec(text: &str) -> Result<NodePool, String> {
    let value: serde_json::Value = hcl::from_str(text).map_err(|error| error.to_string())?;
    let object = value.as_object().ok_or("expected a node_pool block")?;
    for key in object.keys() {
        if key != "node_pool" {
            return Err(format!("Unsupported argument or block {key:?}"));
        }
    }
    let blocks = object
        .get("node_pool")
        .and_then(serde_json::Value::as_object)
        .ok_or("missing node_pool block")?;
    if blocks.len() != 1 {
        return Err("expected exactly one node_pool block".to_string());
    }
    let (name, body) = blocks
        .iter()
        .next()
        .ok_or("expected exactly one node_pool block")?;
    let body = body.as_object().ok_or("node_pool block must be a block")?;
    let mut pool = NodePool {
        name: name.clone(),
        ..NodePool::default()
    };
    for (key, value) in body {
        match key.as_str() {
            "description" => {
                pool.description = value
                    .as_str()
                    .ok_or("description must be a string")?
                    .to_string();
            }
            "meta" => {
                let meta: BTreeMap<String, String> = serde_json::from_value(value.clone())
                    .map_err(|_| "meta must be a block of strings".to_string())?;
                pool.meta = Some(meta);
            }
            "scheduler_config" => {
                let config = value
                    .as_object()
                    .ok_or("scheduler_config must be a block")?;
                let mut wire = serde_json::Map::new();
                for (key, value) in config {
                    let name = match key.as_str() {
                        "scheduler_algorithm" => "SchedulerAlgorithm",
                        "memory_oversubscription_enabled" => "MemoryOversubscriptionEnabled",
                        other => return Err(format!("Unsupported argument {other:?}")),
                    };
                    wire.insert(name.to_string(), value.clone());
                }
                pool.scheduler_configuration = Some(serde_json::Value::Object(wire));
            }
            other => return Err(format!("Unsupported argument or block {other:?}")),
        }
    }
    Ok(pool)
}

async fn apply(arguments: ApplyArgs, io: &mut Io<'_>) -> i32 {
    let content = if arguments.input == "-" {
        let mut text = String::new();
        if let Err(error) = std::io::stdin().read_to_string(&mut text) {
            io.error(format!("Failed to read stdin: {error}"));
            return 1;
        }
        text
    } else {
        match std::fs::read_to_string(&arguments.input) {
            Ok(text) => text,
            Err(error) => {
                io.error(format!(
                    "Failed to read file {:?}: {error}",
                    arguments.input
                ));
                return 1;
            }
        }
    };
    let json_input = arguments.json || arguments.input.ends_with(".json");
    let parsed = if json_input {
        serde_json::from_str::<NodePool>(&content).map_err(|error| error.to_string())
    } else {
        parse_pool_spec(&content)
    };
    let pool = match parsed {
        Ok(pool) => pool,
        Err(error) => {
            io.error(format!("Failed to parse input content: {error}"));
            return 1;
        }
    };
    let Some(client) = client(&arguments.api, io) else {
        return 1;
    };
    let body = match serde_json::to_value(&pool) {
        Ok(body) => body,
        Err(error) => {
            io.error(format!("Failed to parse input content: {error}"));
            return 1;
        }
    };
    if let Err(error) = client.call_json("PUT", "/v1/node/pools", Some(body)).await {
        io.error(describe("applying node pool", &error));
        return 1;
    }
    io.say(format!("Successfully applied node pool {:?}!", pool.name));
    0
}

async fn list(arguments: ListArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client(&arguments.api, io) else {
        return 1;
    };
    let pools = match all_pools(&client).await {
        Ok(pools) => pools,
        Err(error) => {
            io.error(describe("querying node pools", &error));
            return 1;
        }
    };
    if arguments.json {
        io.say(serde_json::to_string_pretty(&pools).unwrap_or_default());
    } else {
        io.say(pool_table(&pools));
    }
    0
}

async fn info(arguments: PoolArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client(&arguments.api, io) else {
        return 1;
    };
    let Some(pool) = resolve(&client, io, &arguments.pool).await else {
        return 1;
    };
    if arguments.json {
        io.say(serde_json::to_string_pretty(&pool).unwrap_or_default());
        return 0;
    }
    io.say(columnize::key_values(&[
        ("Name", pool.name.clone()),
        ("Description", pool.description.clone()),
    ]));
    io.say("");
    io.say("Metadata");
    match pool.meta.as_ref().filter(|meta| !meta.is_empty()) {
        Some(meta) => {
            let pairs: Vec<(&str, String)> = meta
                .iter()
                .map(|(key, value)| (key.as_str(), value.clone()))
                .collect();
            io.say(columnize::key_values(&pairs));
        }
        None => io.say("No metadata"),
    }
    io.say("");
    io.say("Scheduler Configuration");
    io.say("No scheduler configuration");
    0
}

async fn nodes(arguments: PoolArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client(&arguments.api, io) else {
        return 1;
    };
    let Some(pool) = resolve(&client, io, &arguments.pool).await else {
        return 1;
    };
    let path = format!("/v1/node/pool/{}/nodes", pool.name);
    let nodes: Vec<NodeListStub> =
        match client
            .call_json("GET", &path, None)
            .await
            .and_then(|value| {
                serde_json::from_value(value.unwrap_or_default())
                    .map_err(|error| drover_api::client::ClientError::Decode(error.to_string()))
            }) {
            Ok(nodes) => nodes,
            Err(error) => {
                io.error(describe("querying nodes", &error));
                return 1;
            }
        };
    if arguments.json {
        io.say(serde_json::to_string_pretty(&nodes).unwrap_or_default());
    } else if nodes.is_empty() {
        io.say("No nodes");
    } else {
        io.say(crate::format::node_table(&nodes, arguments.verbose));
    }
    0
}

async fn jobs(arguments: PoolArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client(&arguments.api, io) else {
        return 1;
    };
    let Some(pool) = resolve(&client, io, &arguments.pool).await else {
        return 1;
    };
    let path = format!("/v1/node/pool/{}/jobs", pool.name);
    let jobs: Vec<JobListStub> =
        match client
            .call_json("GET", &path, None)
            .await
            .and_then(|value| {
                serde_json::from_value(value.unwrap_or_default())
                    .map_err(|error| drover_api::client::ClientError::Decode(error.to_string()))
            }) {
            Ok(jobs) => jobs,
            Err(error) => {
                io.error(describe("querying jobs", &error));
                return 1;
            }
        };
    if arguments.json {
        io.say(serde_json::to_string_pretty(&jobs).unwrap_or_default());
    } else if jobs.is_empty() {
        io.say("No jobs");
    } else {
        io.say(job_list_table(&jobs));
    }
    0
}

async fn delete(arguments: PoolArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client(&arguments.api, io) else {
        return 1;
    };
    let path = format!("/v1/node/pool/{}", arguments.pool);
    if let Err(error) = client.call_json("DELETE", &path, None).await {
        io.error(describe("deleting node pool", &error));
        return 1;
    }
    io.say(format!(
        "Successfully deleted node pool {:?}!",
        arguments.pool
    ));
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hcl_specification_reads_as_nomads() {
        let pool = parse_pool_spec(
            r#"
node_pool "gpu" {
  description = "GPU nodes"
  meta {
    team = "ml"
  }
}
"#,
        )
        .unwrap();
        assert_eq!(pool.name, "gpu");
        assert_eq!(pool.description, "GPU nodes");
        assert_eq!(pool.meta.unwrap()["team"], "ml");
        assert!(parse_pool_spec("node_pool \"x\" { colour = \"red\" }").is_err());
        let with_config = parse_pool_spec(
            "node_pool \"x\" {\n scheduler_config {\n scheduler_algorithm = \"spread\"\n }\n}",
        )
        .unwrap();
        assert_eq!(
            with_config.scheduler_configuration,
            Some(serde_json::json!({"SchedulerAlgorithm": "spread"}))
        );
    }
}
