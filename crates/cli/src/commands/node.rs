//! `drover node status [ID]`, `node drain` (with Nomad's drain monitor), `node eligibility`
//! and `node meta read|apply` (a client node's dynamic metadata).

use clap::{Args, Subcommand};
use drover_api::client::ApiClient;
use std::collections::BTreeMap;

use drover_structs::{Allocation, DrainSpec, DrainStrategy, DurationNs, Node, NodeDrainRequest};

use crate::commands::describe;
use crate::format::{
    allocation_table, date_from_timestamp, now_date, now_unix_nanos, or_none, short_id,
};
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// List nodes, or show one node
    Status(StatusArgs),
    /// Toggle drain mode on a node
    Drain(DrainArgs),
    /// Toggle a node's scheduling eligibility
    Eligibility(EligibilityArgs),
    /// Manage node pools
    Pool {
        #[command(subcommand)]
        command: crate::commands::node_pool::NodePoolCommand,
    },
    /// View or modify a client node's configuration details
    Config(ConfigArgs),
    /// Read and modify a client node's dynamic metadata
    Meta {
        #[command(subcommand)]
        command: NodeMetaCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum NodeMetaCommand {
    /// Read node metadata
    Read(NodeMetaReadArgs),
    /// Modify node metadata
    Apply(NodeMetaApplyArgs),
}

#[derive(Debug, Args)]
pub struct NodeMetaReadArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Reads metadata from the specified node. If not specified the node receiving the
    /// request will be used by default.
    #[arg(long = "node-id", value_name = "ID")]
    pub node_id: Option<String>,
    /// Output the node metadata in its JSON format.
    #[arg(long)]
    pub json: bool,
    /// Format and display node metadata using a Go template.
    #[arg(short = 't', value_name = "TEMPLATE")]
    pub template: Option<String>,
}

#[derive(Debug, Args)]
pub struct NodeMetaApplyArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Updates metadata on the specified node. If not specified the node receiving the
    /// request will be used by default.
    #[arg(long = "node-id", value_name = "ID")]
    pub node_id: Option<String>,
    /// Unset the comma separated list of keys.
    #[arg(long, value_name = "KEY1,...,KEYN")]
    pub unset: Option<String>,
    /// `key=value` pairs to set.
    pub pairs: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// List the known server addresses of the client node.
    #[arg(long)]
    pub servers: bool,
    /// Replace the client's server list with the addresses given (all of them, at once).
    #[arg(long = "update-servers")]
    pub update_servers: bool,
    /// The server addresses, with -update-servers.
    pub addresses: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DrainArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Enable draining on the node.
    #[arg(long)]
    pub enable: bool,
    /// Disable draining on the node.
    #[arg(long)]
    pub disable: bool,
    /// How long allocations may take to migrate before they are stopped (default 1h).
    #[arg(long)]
    pub deadline: Option<String>,
    /// No deadline: allocations migrate as slowly as they need.
    #[arg(long = "no-deadline")]
    pub no_deadline: bool,
    /// Stop every allocation now.
    #[arg(long)]
    pub force: bool,
    /// Leave system jobs' allocations on the node.
    #[arg(long = "ignore-system")]
    pub ignore_system: bool,
    /// Leave the node ineligible when the drain is disabled.
    #[arg(long = "keep-ineligible")]
    pub keep_ineligible: bool,
    /// Only watch the drain in progress.
    #[arg(long)]
    pub monitor: bool,
    /// Return at once instead of watching the drain.
    #[arg(long)]
    pub detach: bool,
    /// The local node.
    #[arg(long = "self")]
    pub local: bool,
    /// Answer yes to the prompt.
    #[arg(long)]
    pub yes: bool,
    /// A message kept in the drain's metadata.
    #[arg(short = 'm')]
    pub message: Option<String>,
    /// Drain metadata, `key=value` (repeatable).
    #[arg(long)]
    pub meta: Vec<String>,
    /// A node ID or ID prefix.
    pub node: Option<String>,
}

#[derive(Debug, Args)]
pub struct EligibilityArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Mark the node eligible for scheduling.
    #[arg(long)]
    pub enable: bool,
    /// Mark the node ineligible for scheduling.
    #[arg(long)]
    pub disable: bool,
    /// The local node.
    #[arg(long = "self")]
    pub local: bool,
    /// A node ID or ID prefix.
    pub node: Option<String>,
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
        NodeCommand::Drain(arguments) => node_drain(arguments, io).await,
        NodeCommand::Eligibility(arguments) => node_eligibility(arguments, io).await,
        NodeCommand::Pool { command } => crate::commands::node_pool::run(command, io).await,
        NodeCommand::Config(arguments) => node_config(arguments, io).await,
        NodeCommand::Meta {
            command: NodeMetaCommand::Read(arguments),
        } => node_meta_read(arguments, io).await,
        NodeCommand::Meta {
            command: NodeMetaCommand::Apply(arguments),
        } => node_meta_apply(arguments, io).await,
    }
}

/// Nomad's `lookupNodeID`: a node ID prefix (at least two characters) that matches one node.
async fn lookup_node_id(client: &ApiClient, given: &str) -> Result<String, String> {
    if given.len() == 1 {
        return Err("Node ID must contain at least two characters.".to_owned());
    }
    let prefix = crate::commands::lookup::sanitize_uuid_prefix(given);
    let nodes = client
        .nodes(prefix)
        .await
        .map_err(|error| format!("Error querying node: {error}"))?;
    match nodes.as_slice() {
        [] => Err(format!("No node(s) with prefix or id {prefix:?} found")),
        [only] => Ok(only.id.clone()),
        many => Err(format!(
            "Prefix matched multiple nodes\n\n{}",
            crate::format::node_table(many, true)
        )),
    }
}

/// Nomad's `formatNodeMeta`: `key = value` lines in key order.
fn node_meta_lines(meta: &BTreeMap<String, String>) -> String {
    let pairs: Vec<(&str, String)> = meta
        .iter()
        .filter(|(key, _)| !key.is_empty())
        .map(|(key, value)| (key.as_str(), value.clone()))
        .collect();
    columnize::key_values(&pairs)
}

/// Nomad's `node config`: lists (`-servers`) or replaces (`-update-servers ADDR...`) the
/// servers of the agent's client.
async fn node_config(arguments: ConfigArgs, io: &mut Io<'_>) -> i32 {
    if !arguments.servers && !arguments.update_servers {
        io.error("The '-servers' or '-update-servers' flag(s) must be set");
        io.error("For additional help try 'drover node config -help'");
        return 1;
    }
    if arguments.update_servers && arguments.addresses.is_empty() {
        io.error(
            "If the '-update-servers' flag is set, at least one server argument must be provided",
        );
        io.error("For additional help try 'drover node config -help'");
        return 1;
    }
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    if arguments.update_servers {
        return match client.set_agent_servers(&arguments.addresses).await {
            Ok(()) => {
                io.say("Updated server list");
                0
            }
            Err(error) => {
                io.error(format!("Error updating server list: {error}"));
                1
            }
        };
    }
    match client.agent_servers().await {
        Ok(servers) => {
            for server in servers {
                io.say(server);
            }
            0
        }
        Err(error) => {
            io.error(format!("Error querying server list: {error}"));
            1
        }
    }
}

async fn node_meta_read(arguments: NodeMetaReadArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let node_id = match arguments.node_id.as_deref().filter(|id| !id.is_empty()) {
        Some(given) => match lookup_node_id(&client, given).await {
            Ok(node_id) => Some(node_id),
            Err(message) => {
                io.error(message);
                return 1;
            }
        },
        None => None,
    };
    let meta = match client.node_meta(node_id.as_deref()).await {
        Ok(meta) => meta,
        Err(error) => {
            io.error(format!("Error reading dynamic node metadata: {error}"));
            return 1;
        }
    };
    let template = arguments.template.unwrap_or_default();
    if arguments.json || !template.is_empty() {
        if arguments.json && !template.is_empty() {
            io.error("Both json and template formatting are not allowed");
            return 1;
        }
        if arguments.json {
            io.say(serde_json::to_string_pretty(&meta).unwrap_or_default());
            return 0;
        }
        let rendered = serde_json::to_value(&meta)
            .map_err(|error| error.to_string())
            .and_then(|value| {
                drover_template::render("", &template, &drover_template::Value::from_json(&value))
                    .map_err(|error| error.to_string())
            });
        return match rendered {
            Ok(text) => {
                io.say(text);
                0
            }
            Err(error) => {
                io.error(format!("Error executing template: {error}"));
                1
            }
        };
    }
    io.say("All Meta");
    io.say(node_meta_lines(&meta.meta));
    io.say("\nDynamic Meta");
    let dynamic: Vec<(&str, String)> = meta
        .dynamic
        .iter()
        .map(|(key, value)| {
            (
                key.as_str(),
                value.clone().unwrap_or_else(|| "<unset>".to_owned()),
            )
        })
        .collect();
    io.say(columnize::key_values(&dynamic));
    io.say("\nStatic Meta");
    io.say(node_meta_lines(&meta.r#static));
    0
}

async fn node_meta_apply(arguments: NodeMetaApplyArgs, io: &mut Io<'_>) -> i32 {
    let unset = arguments.unset.clone().unwrap_or_default();
    if unset.is_empty() && arguments.pairs.is_empty() {
        io.error("Must specify -unset or at least 1 key=value pair");
        return 1;
    }
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let node_id = match arguments.node_id.as_deref().filter(|id| !id.is_empty()) {
        Some(given) => match lookup_node_id(&client, given).await {
            Ok(node_id) => node_id,
            Err(message) => {
                io.error(message);
                return 1;
            }
        },
        None => String::new(),
    };
    // Nomad's parseMapFromArgs and applyNodeMetaUnset: `key` alone sets an empty value, and
    // `-unset` names keys to unset (the empty key is skipped).
    let mut meta: BTreeMap<String, Option<String>> = BTreeMap::new();
    for pair in &arguments.pairs {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        meta.insert(key.to_owned(), Some(value.to_owned()));
    }
    for key in unset.split(',').filter(|key| !key.is_empty()) {
        meta.insert(key.to_owned(), None);
    }
    let request = drover_structs::node_meta::NodeMetaApplyRequest { node_id, meta };
    match client.apply_node_meta(&request).await {
        Ok(_) => 0,
        Err(error) => {
            io.error(format!("Error applying dynamic node metadata: {error}"));
            1
        }
    }
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
            io.say(crate::format::node_table(&nodes, arguments.verbose));
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
                    crate::format::node_table(many, arguments.verbose)
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
        ("Drain", format_drain(&node)),
        ("Eligibility", node.scheduling_eligibility.clone()),
        ("Status", node.status.clone()),
        ("HTTP Address", node.http_addr.clone()),
        ("Drivers", or_none(&drivers.join(","))),
    ]));
    if verbose {
        io.say("");
        io.say("Drivers");
        io.say(driver_table(&node));
    }
    io.say("");
    io.say("Node Events");
    io.say(node_event_table(&node, verbose));
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

/// Nomad's `Drivers` section of `node status -verbose`: every driver, by name.
fn driver_table(node: &Node) -> String {
    let mut rows = vec![
        ["Driver", "Detected", "Healthy", "Message", "Time"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for (name, info) in &node.drivers {
        rows.push(vec![
            name.clone(),
            info.detected.to_string(),
            info.healthy.to_string(),
            info.health_description.clone(),
            date_from_timestamp(info.update_time),
        ]);
    }
    columnize::columns(&rows)
}

/// Nomad's `Node Events` section, newest first; a driver's event names the driver as its
/// subsystem (`Driver: docker`), and `-verbose` adds the details (`key: value, …`).
fn node_event_table(node: &Node, verbose: bool) -> String {
    let mut header = vec!["Time", "Subsystem", "Message"];
    if verbose {
        header.push("Details");
    }
    let mut rows = vec![header.into_iter().map(str::to_owned).collect::<Vec<_>>()];
    for event in node.events.iter().rev() {
        let subsystem = match event.details.get("driver") {
            Some(driver) if !driver.is_empty() => format!("Driver: {driver}"),
            _ => event.subsystem.clone(),
        };
        let mut row = vec![
            date_from_timestamp(event.timestamp),
            subsystem,
            event.message.clone(),
        ];
        if verbose {
            row.push(
                event
                    .details
                    .iter()
                    .map(|(key, value)| format!("{key}: {value}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
        rows.push(row);
    }
    columnize::columns(&rows)
}

/// The drain as Nomad's `node status` shows it: `true; 2026-…Z deadline; ignoring system jobs`.
fn format_drain(node: &Node) -> String {
    let Some(strategy) = &node.drain_strategy else {
        return node.drain.to_string();
    };
    let mut text = "true".to_string();
    if strategy.deadline.as_nanos() < 0 {
        text.push_str("; force drain");
    } else if strategy.force_deadline.is_zero() {
        text.push_str("; no deadline");
    } else {
        text.push_str(&format!(
            "; {} deadline",
            date_from_timestamp(strategy.force_deadline)
        ));
    }
    if strategy.ignore_system_jobs {
        text.push_str("; ignoring system jobs");
    }
    text
}

/// `node drain` without a deadline flag: Nomad's one hour.
const DEFAULT_DRAIN_DEADLINE: DurationNs = DurationNs::from_hours(1);

/// The node a `node drain` / `node eligibility` names (`-self`: the agent's own), resolved from
/// an ID prefix as Nomad does; the error text on failure.
async fn resolve_node(
    client: &ApiClient,
    local: bool,
    given: Option<&str>,
    action: &str,
) -> Result<(String, String), String> {
    let node_id = if local {
        let info = client
            .agent_self()
            .await
            .map_err(|error| format!("Error querying agent info: {error}"))?;
        let Some(client_stats) = info.pointer("/stats/client") else {
            return Err("Nomad not running in client mode".to_string());
        };
        client_stats
            .get("node_id")
            .and_then(serde_json::Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| "Failed to determine node ID".to_string())?
    } else {
        given.unwrap_or_default().to_owned()
    };
    if node_id.len() == 1 {
        return Err("Identifier must contain at least two characters.".to_string());
    }
    let prefix = crate::commands::lookup::sanitize_uuid_prefix(&node_id).to_owned();
    let nodes = client
        .nodes(&prefix)
        .await
        .map_err(|error| format!("Error {action}: {error}"))?;
    match nodes.as_slice() {
        [] => Err(format!("No node(s) with prefix or id {node_id:?} found")),
        [only] => Ok((node_id, only.id.clone())),
        many => Err(format!(
            "Prefix matched multiple nodes\n\n{}",
            crate::format::node_table(many, true)
        )),
    }
}

/// Nomad's yes/no prompt; `Ok(true)` only for an exact `y`.
fn confirm(io: &mut Io<'_>, question: &str) -> Result<bool, i32> {
    let _ = write!(io.out, "{question} ");
    let _ = io.out.flush();
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        io.error("Failed to parse answer: could not read standard input");
        return Err(1);
    }
    let answer = answer.trim();
    let lower = answer.to_lowercase();
    if answer.is_empty() || lower.starts_with('n') {
        io.say("Canceling drain toggle");
        Err(0)
    } else if lower.starts_with('y') && answer.len() > 1 {
        io.say("For confirmation, an exact ‘y’ is required.");
        Err(0)
    } else if answer != "y" {
        io.say("No confirmation detected. For confirmation, an exact 'y' is required.");
        Err(1)
    } else {
        Ok(true)
    }
}

const DRAIN_HELP: &str = "For additional help try 'drover node drain -help'";

async fn node_drain(arguments: DrainArgs, io: &mut Io<'_>) -> i32 {
    let DrainArgs {
        enable,
        disable,
        monitor,
        force,
        no_deadline,
        ignore_system,
        ..
    } = arguments;
    if monitor && (enable || disable) {
        io.error("The -monitor flag cannot be used with the '-enable' or '-disable' flags");
        io.error(DRAIN_HELP);
        return 1;
    }
    if (enable && disable) || (!monitor && !enable && !disable) {
        io.error("Either the '-enable' or '-disable' flag must be set, unless using '-monitor'");
        io.error(DRAIN_HELP);
        return 1;
    }
    if arguments.local == arguments.node.is_some() {
        io.error("Node ID must be specified if -self isn't being used");
        io.error(DRAIN_HELP);
        return 1;
    }
    if disable && (arguments.deadline.is_some() || force || no_deadline || ignore_system) {
        io.error("-disable can't be combined with flags configuring drain strategy");
        io.error(DRAIN_HELP);
        return 1;
    }
    if arguments.deadline.is_some() && (force || no_deadline) {
        io.error("-deadline can't be combined with -force or -no-deadline");
        io.error(DRAIN_HELP);
        return 1;
    }
    if force && no_deadline {
        io.error("-force and -no-deadline are mutually exclusive");
        io.error(DRAIN_HELP);
        return 1;
    }
    let deadline = if force {
        DurationNs::from_secs(-1)
    } else if no_deadline {
        DurationNs::ZERO
    } else if let Some(text) = &arguments.deadline {
        match DurationNs::parse_go(text) {
            Ok(duration) if duration.as_nanos() > 0 => duration,
            Ok(_) => {
                io.error("A positive drain duration must be given");
                return 1;
            }
            Err(error) => {
                io.error(format!("Failed to parse deadline {text:?}: {error}"));
                return 1;
            }
        }
    } else {
        DEFAULT_DRAIN_DEADLINE
    };
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let (given, node_id) = match resolve_node(
        &client,
        arguments.local,
        arguments.node.as_deref(),
        "toggling drain mode",
    )
    .await
    {
        Ok(found) => found,
        Err(message) => {
            io.error(message);
            return 1;
        }
    };
    let (node, index) = match client.node_blocking(&node_id, 0).await {
        Ok(found) => found,
        Err(error) => {
            io.error(format!("Error toggling drain mode: {error}"));
            return 1;
        }
    };
    if monitor {
        if node.drain_strategy.is_none() {
            io.error("No drain strategy set");
            return 0;
        }
        io.say(format!(
            "{}: Monitoring node {:?}: Ctrl-C to detach monitoring",
            now_date(),
            node.id
        ));
        monitor_drain(&client, io, &node.id, index, ignore_system).await;
        return 0;
    }
    if given != node.id && !arguments.yes && !arguments.local {
        let verb = if disable { "disable" } else { "enable" };
        let question = format!(
            "Are you sure you want to {verb} drain mode for node {:?}? [y/N]",
            node.id
        );
        if let Err(code) = confirm(io, &question) {
            return code;
        }
    }
    let mut meta: BTreeMap<String, String> = BTreeMap::new();
    if disable && let Some(previous) = node.last_drain.as_ref().and_then(|last| last.meta.clone()) {
        meta = previous;
    }
    if let Some(message) = &arguments.message {
        let key = if enable { "message" } else { "cancel_message" };
        meta.insert(key.to_string(), message.clone());
    }
    for pair in &arguments.meta {
        if pair.is_empty() {
            continue;
        }
        match pair.split_once('=') {
            Some((key, value)) => meta.insert(key.to_string(), value.to_string()),
            None => meta.insert(pair.clone(), String::new()),
        };
    }
    let request = NodeDrainRequest {
        node_id: node.id.clone(),
        drain_spec: enable.then_some(DrainSpec {
            deadline,
            ignore_system_jobs: ignore_system,
        }),
        mark_eligible: !arguments.keep_ineligible,
        meta,
    };
    let response = match client.update_node_drain(&node.id, &request).await {
        Ok(response) => response,
        Err(error) => {
            io.error(format!("Error updating drain specification: {error}"));
            return 1;
        }
    };
    if !enable || arguments.detach {
        if enable {
            io.say(format!("Node {:?} drain strategy set", node.id));
        } else {
            io.say(format!("Node {:?} drain strategy unset", node.id));
        }
    }
    if enable && !arguments.detach {
        let now = now_date();
        io.say(format!(
            "{now}: Ctrl-C to stop monitoring: will not cancel the node drain"
        ));
        io.say(format!("{now}: Node {:?} drain strategy set", node.id));
        monitor_drain(&client, io, &node.id, response.index, ignore_system).await;
    }
    0
}

/// One line of the drain monitor, stamped as Nomad's.
fn monitor_line(io: &mut Io<'_>, error: bool, message: &str) {
    let line = format!("{}: {message}", now_date());
    if error {
        io.error(line);
    } else {
        io.say(line);
    }
}

/// Nomad's drain monitor: the node's drain (until it is gone) and its allocations' moves
/// (until none still runs), each watched with blocking queries.
async fn monitor_drain(
    client: &ApiClient,
    io: &mut Io<'_>,
    node_id: &str,
    index: u64,
    ignore_system: bool,
) {
    let mut node_index = index;
    let mut node_done = false;
    let mut last_strategy: Option<DrainStrategy> = None;
    let mut allocs_index = 0;
    let mut allocs_done = false;
    let mut known: BTreeMap<String, Allocation> = BTreeMap::new();
    let mut first_allocs = true;
    while !(node_done && allocs_done) {
        if !allocs_done {
            match client
                .node_allocations_blocking(node_id, allocs_index)
                .await
            {
                Err(error) => {
                    monitor_line(io, true, &format!("Error monitoring allocations: {error}"));
                    allocs_done = true;
                }
                Ok((allocs, seen)) => {
                    allocs_index = seen;
                    let mut running = 0;
                    for alloc in allocs {
                        let migrating = alloc.desired_transition.should_migrate();
                        let message = match known.get(&alloc.id) {
                            None => None,
                            Some(previous) if previous.client_status != alloc.client_status => {
                                Some(format!(
                                    "status {} -> {}",
                                    previous.client_status, alloc.client_status
                                ))
                            }
                            Some(previous)
                                if migrating && !previous.desired_transition.should_migrate() =>
                            {
                                Some("marked for migration".to_string())
                            }
                            Some(previous)
                                if migrating
                                    && previous.desired_status != alloc.desired_status
                                    && alloc.desired_status
                                        == drover_structs::ALLOC_DESIRED_STATUS_STOP =>
                            {
                                Some("draining".to_string())
                            }
                            Some(_) => None,
                        };
                        if let Some(message) = message
                            && !first_allocs
                        {
                            monitor_line(io, false, &format!("Alloc {:?} {message}", alloc.id));
                        }
                        let counted =
                            !(ignore_system && alloc.job_type() == drover_structs::JOB_TYPE_SYSTEM);
                        if counted
                            && alloc.job.is_some()
                            && (alloc.client_status == drover_structs::ALLOC_CLIENT_STATUS_PENDING
                                || alloc.client_status
                                    == drover_structs::ALLOC_CLIENT_STATUS_RUNNING)
                        {
                            running += 1;
                        }
                        known.insert(alloc.id.clone(), alloc);
                    }
                    first_allocs = false;
                    if running == 0 {
                        monitor_line(
                            io,
                            false,
                            &format!("All allocations on node {node_id:?} have stopped"),
                        );
                        allocs_done = true;
                    }
                }
            }
        }
        if !node_done {
            // Only block on the node once the allocations are done; otherwise look without
            // waiting so an allocation change is never held up behind it.
            let wait_from = if allocs_done { node_index } else { 0 };
            match client.node_blocking(node_id, wait_from).await {
                Err(error) => {
                    monitor_line(io, true, &format!("Error monitoring node: {error}"));
                    node_done = true;
                }
                Ok((node, seen)) => {
                    node_index = seen;
                    match &node.drain_strategy {
                        None => {
                            monitor_line(io, false, &format!("Drain complete for node {node_id}"));
                            node_done = true;
                        }
                        Some(strategy) => {
                            if node.status == drover_structs::NODE_STATUS_DOWN {
                                monitor_line(io, true, &format!("Node {node_id:?} down"));
                            }
                            if last_strategy.as_ref().is_some_and(|last| last != strategy) {
                                monitor_line(
                                    io,
                                    false,
                                    &format!(
                                        "Node {node_id:?} drain updated: {}",
                                        drain_strategy_text(strategy)
                                    ),
                                );
                            }
                            last_strategy = Some(strategy.clone());
                        }
                    }
                }
            }
        }
    }
}

/// A drain strategy as Nomad's API prints it (`DrainStrategy.String`, times in Go's
/// `time.Time` form).
fn drain_strategy_text(strategy: &DrainStrategy) -> String {
    let deadline = go_time_text(strategy.force_deadline);
    if strategy.ignore_system_jobs {
        format!("drain ignoring system jobs and deadline at {deadline}")
    } else {
        format!("drain with deadline at {deadline}")
    }
}

/// Go's `time.Time.String` of a UTC time: `2006-01-02 15:04:05.999999999 +0000 UTC`.
fn go_time_text(time: drover_structs::Timestamp) -> String {
    let text = time.to_rfc3339_nanos().replacen('T', " ", 1);
    format!("{} +0000 UTC", text.trim_end_matches('Z'))
}

async fn node_eligibility(arguments: EligibilityArgs, io: &mut Io<'_>) -> i32 {
    const HELP: &str = "For additional help try 'drover node eligibility -help'";
    if arguments.enable == arguments.disable {
        io.error("Either the '-enable' or '-disable' flag must be set");
        io.error(HELP);
        return 1;
    }
    if arguments.local == arguments.node.is_some() {
        io.error("Node ID must be specified if -self isn't being used");
        io.error(HELP);
        return 1;
    }
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let (_, node_id) = match resolve_node(
        &client,
        arguments.local,
        arguments.node.as_deref(),
        "updating scheduling eligibility",
    )
    .await
    {
        Ok(found) => found,
        Err(message) => {
            io.error(message);
            return 1;
        }
    };
    let eligibility = if arguments.enable {
        drover_structs::NODE_SCHEDULING_ELIGIBLE
    } else {
        drover_structs::NODE_SCHEDULING_INELIGIBLE
    };
    if let Err(error) = client.update_node_eligibility(&node_id, eligibility).await {
        io.error(format!("Error updating scheduling eligibility: {error}"));
        return 1;
    }
    io.say(format!(
        "Node {node_id:?} scheduling eligibility set: {eligibility} for scheduling"
    ));
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drain_reads_as_nomads_node_status() {
        let mut node = Node::default();
        assert_eq!(format_drain(&node), "false");
        node.drain_strategy = Some(DrainStrategy {
            deadline: DurationNs::from_secs(-1),
            ..DrainStrategy::default()
        });
        assert_eq!(format_drain(&node), "true; force drain");
        node.drain_strategy = Some(DrainStrategy {
            ignore_system_jobs: true,
            ..DrainStrategy::default()
        });
        assert_eq!(
            format_drain(&node),
            "true; no deadline; ignoring system jobs"
        );
        node.drain_strategy = Some(DrainStrategy {
            deadline: DurationNs::from_secs(30),
            force_deadline: drover_structs::Timestamp::from_unix_nanos(1_700_000_000_000_000_000),
            ..DrainStrategy::default()
        });
        assert_eq!(format_drain(&node), "true; 2023-11-14T22:13:20Z deadline");
    }

    #[test]
    fn a_drain_update_reads_as_nomads_monitor() {
        let mut strategy = DrainStrategy {
            deadline: DurationNs::from_secs(30),
            force_deadline: drover_structs::Timestamp::from_unix_nanos(1_700_000_000_500_000_000),
            ..DrainStrategy::default()
        };
        assert_eq!(
            drain_strategy_text(&strategy),
            "drain with deadline at 2023-11-14 22:13:20.5 +0000 UTC"
        );
        strategy.ignore_system_jobs = true;
        strategy.force_deadline = drover_structs::Timestamp::ZERO;
        assert_eq!(
            drain_strategy_text(&strategy),
            "drain ignoring system jobs and deadline at 0001-01-01 00:00:00 +0000 UTC"
        );
    }
}
