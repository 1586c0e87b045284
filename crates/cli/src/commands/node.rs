//! `drover node status [ID]`.

use clap::{Args, Subcommand};
use drover_api::client::ApiClient;
use drover_structs::{Node, NodeListStub};

use crate::commands::describe;
use crate::format::{allocation_table, now_unix_nanos, or_none, short_id};
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// List nodes, or show one node
    Status(StatusArgs),
}

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
    /// A node ID or ID prefix; all nodes when absent.
    pub node: Option<String>,
}

pub async fn run(command: NodeCommand, io: &mut Io<'_>) -> i32 {
    match command {
        NodeCommand::Status(arguments) => node_status(arguments, io).await,
    }
}

fn node_table(nodes: &[NodeListStub], verbose: bool) -> String {
    let mut rows = vec![
        [
            "ID",
            "Node Pool",
            "DC",
            "Name",
            "Class",
            "Drain",
            "Eligibility",
            "Status",
        ]
        .iter()
        .map(|cell| (*cell).to_string())
        .collect::<Vec<_>>(),
    ];
    for node in nodes {
        rows.push(vec![
            short_id(&node.id, verbose),
            node.node_pool.clone(),
            node.datacenter.clone(),
            node.name.clone(),
            or_none(&node.node_class),
            node.drain.to_string(),
            node.scheduling_eligibility.clone(),
            node.status.clone(),
        ]);
    }
    columnize::columns(&rows)
}

async fn node_status(arguments: StatusArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let prefix = arguments.node.clone().unwrap_or_default();
    let nodes = match client.nodes(&prefix).await {
        Ok(nodes) => nodes,
        Err(error) => {
            io.error(describe("querying node status", &error));
            return 1;
        }
    };
    if arguments.node.is_none() {
        if arguments.json {
            io.say(serde_json::to_string_pretty(&nodes).unwrap_or_default());
        } else if nodes.is_empty() {
            io.say("No nodes registered");
        } else {
            io.say(node_table(&nodes, arguments.verbose));
        }
        return 0;
    }
    let chosen = match nodes.as_slice() {
        [] => {
            io.error(format!("No node(s) with prefix \"{prefix}\" found"));
            return 1;
        }
        [only] => only.id.clone(),
        many => match many.iter().find(|node| node.id == prefix) {
            Some(exact) => exact.id.clone(),
            None => {
                io.error(format!(
                    "Prefix matched multiple nodes\n\n{}",
                    node_table(many, arguments.verbose)
                ));
                return 1;
            }
        },
    };
    show_node(&client, io, &chosen, arguments.json, arguments.verbose).await
}

/// The detailed status of one node.
pub async fn show_node(
    client: &ApiClient,
    io: &mut Io<'_>,
    node_id: &str,
    json: bool,
    verbose: bool,
) -> i32 {
    let node: Node = match client.node(node_id).await {
        Ok(node) => node,
        Err(error) => {
            io.error(describe("querying node info", &error));
            return 1;
        }
    };
    if json {
        io.say(serde_json::to_string_pretty(&node).unwrap_or_default());
        return 0;
    }
    let drivers: Vec<&str> = node
        .drivers
        .iter()
        .filter(|(_, info)| info.detected && info.healthy)
        .map(|(name, _)| name.as_str())
        .collect();
    io.say(columnize::key_values(&[
        ("ID", short_id(&node.id, verbose)),
        ("Name", node.name.clone()),
        ("Node Pool", node.node_pool.clone()),
        ("Class", or_none(&node.node_class)),
        ("DC", node.datacenter.clone()),
        ("Drain", node.drain_strategy.is_some().to_string()),
        ("Eligibility", node.scheduling_eligibility.clone()),
        ("Status", node.status.clone()),
        ("HTTP Address", node.http_addr.clone()),
        ("Drivers", or_none(&drivers.join(","))),
    ]));
    let allocations = match client.node_allocations(node_id).await {
        Ok(allocations) => allocations,
        Err(error) => {
            io.error(describe("querying node allocations", &error));
            return 1;
        }
    };
    io.say("");
    io.say("Allocations");
    if allocations.is_empty() {
        io.say("No allocations placed");
    } else {
        let stubs: Vec<_> = allocations
            .iter()
            .map(drover_structs::Allocation::stub)
            .collect();
        io.say(allocation_table(&stubs, verbose, now_unix_nanos()));
    }
    0
}
