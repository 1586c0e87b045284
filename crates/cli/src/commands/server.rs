//! `drover server members`: the servers of the region (one, for a single agent).

use clap::{Args, Subcommand};

use crate::commands::describe;
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// List the servers this agent knows
    Members(MembersArgs),
}

#[derive(Debug, Args)]
pub struct MembersArgs {
    #[command(flatten)]
    pub api: ApiFlags,
}

pub async fn run(command: ServerCommand, io: &mut Io<'_>) -> i32 {
    match command {
        ServerCommand::Members(arguments) => members(arguments, io).await,
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
            "Build",
            "Datacenter",
            "Region",
        ]
        .iter()
        .map(|cell| (*cell).to_string())
        .collect::<Vec<_>>(),
    ];
    let members = answer["Members"].as_array().cloned().unwrap_or_default();
    for member in &members {
        rows.push(vec![
            text(&member["Name"]),
            text(&member["Addr"]),
            text(&member["Port"]),
            text(&member["Status"]),
            (members.len() == 1).to_string(),
            text(&member["Tags"]["build"]),
            text(&member["Tags"]["dc"]),
            text(&member["Tags"]["region"]),
        ]);
    }
    io.say(columnize::columns(&rows));
    0
}
