//! `drover server members`: the servers of the region, as Nomad 1.1.2 lists them (sorted by
//! name, the leader found by comparing each member's `Addr:port` with `/v1/status/leader`);
//! `drover server force-leave [-prune] <node>`: a failed server out of that list.

use clap::{Args, Subcommand};

use crate::commands::describe;
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// List the servers this agent knows
    Members(MembersArgs),
    /// Force a server into the 'left' state
    ForceLeave(ForceLeaveArgs),
}

#[derive(Debug, Args)]
pub struct ForceLeaveArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Remove server completely from list of members
    #[arg(long)]
    pub prune: bool,
    /// The member's name, as `server members` lists it (`<name>.<region>`)
    pub node: Vec<String>,
}

#[derive(Debug, Args)]
pub struct MembersArgs {
    #[command(flatten)]
    pub api: ApiFlags,
}

pub async fn run(command: ServerCommand, io: &mut Io<'_>) -> i32 {
    match command {
        ServerCommand::Members(arguments) => members(arguments, io).await,
        ServerCommand::ForceLeave(arguments) => force_leave(arguments, io).await,
    }
}

async fn force_leave(arguments: ForceLeaveArgs, io: &mut Io<'_>) -> i32 {
    let [node] = arguments.node.as_slice() else {
        io.error("This command takes one argument: <node>");
        io.error("For additional help try 'drover server force-leave -help'");
        return 1;
    };
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    match client.force_leave(node, arguments.prune).await {
        Ok(()) => 0,
        Err(error) => {
            io.error(describe(&format!("force-leaving server {node}"), &error));
            1
        }
    }
}

async fn members(arguments: MembersArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let answer = match client.agent_members().await {
        Ok(answer) => answer,
        Err(error) => {
            io.error(describe("querying servers", &error));
            return 1;
        }
    };
    let mut members = answer["Members"].as_array().cloned().unwrap_or_default();
    members.sort_by(|a, b| a["Name"].as_str().cmp(&b["Name"].as_str()));
    let (leader, leader_error) = if members.iter().all(|member| member["Status"] == "left") {
        (String::new(), None)
    } else {
        match client.status_leader().await {
            Ok(leader) => (leader, None),
            Err(error) => (String::new(), Some(describe("querying the leader", &error))),
        }
    };
    let text = |value: &serde_json::Value| match value {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    };
    let mut rows = vec![
        [
            "Name",
            "Address",
            "Port",
            "Status",
            "Leader",
            "Protocol",
            "Build",
            "Datacenter",
            "Region",
        ]
        .iter()
        .map(|cell| (*cell).to_string())
        .collect::<Vec<_>>(),
    ];
    for member in &members {
        let address = format!(
            "{}:{}",
            text(&member["Addr"]),
            text(&member["Tags"]["port"])
        );
        rows.push(vec![
            text(&member["Name"]),
            text(&member["Addr"]),
            text(&member["Port"]),
            text(&member["Status"]),
            (!leader.is_empty() && leader == address).to_string(),
            text(&member["ProtocolCur"]),
            text(&member["Tags"]["build"]),
            text(&member["Tags"]["dc"]),
            text(&member["Tags"]["region"]),
        ]);
    }
    io.say(columnize::columns(&rows));
    if let Some(error) = leader_error {
        io.say("");
        io.error(format!("Error determining leaders: {error}"));
        return 1;
    }
    0
}
