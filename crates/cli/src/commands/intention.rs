//! `drover intention create|get|delete|list|check`: the service mesh's intentions, as
//! Consul's `consul intention` commands manage them, over `/v1/connect/intentions`.
//!
//! A source or destination is `name` or `namespace/name`; either part may be `*`.

use clap::{Args, Subcommand};

use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum IntentionCommand {
    /// Create (or replace) the intention from a source to a destination
    Create(CreateArgs),
    /// Show the intention from a source to a destination
    Get(PairArgs),
    /// Delete the intention from a source to a destination
    Delete(PairArgs),
    /// List every intention
    List(ListArgs),
    /// Check whether a source may connect to a destination (exit 0: allowed, 2: denied)
    Check(PairArgs),
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Allow the connections (the default).
    #[arg(long, conflicts_with = "deny")]
    pub allow: bool,
    /// Deny the connections.
    #[arg(long)]
    pub deny: bool,
    /// A description.
    #[arg(long, default_value = "")]
    pub description: String,
    /// The source service: `name` or `namespace/name`.
    pub source: String,
    /// The destination service: `name` or `namespace/name`.
    pub destination: String,
}

#[derive(Debug, Args)]
pub struct PairArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// The source service: `name` or `namespace/name`.
    pub source: String,
    /// The destination service: `name` or `namespace/name`.
    pub destination: String,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(command: IntentionCommand, io: &mut Io<'_>) -> i32 {
    match command {
        IntentionCommand::Create(arguments) => create(arguments, io).await,
        IntentionCommand::Get(arguments) => get(arguments, io).await,
        IntentionCommand::Delete(arguments) => delete(arguments, io).await,
        IntentionCommand::List(arguments) => list(arguments, io).await,
        IntentionCommand::Check(arguments) => check(arguments, io).await,
    }
}

fn pair(source: &str, destination: &str) -> Vec<(&'static str, String)> {
    vec![
        ("source", source.to_owned()),
        ("destination", destination.to_owned()),
    ]
}

async fn call(
    io: &mut Io<'_>,
    api: &ApiFlags,
    method: &str,
    path: &str,
    query: &[(&str, String)],
    body: Option<serde_json::Value>,
) -> Result<Option<serde_json::Value>, i32> {
    let client = match api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return Err(1);
        }
    };
    client
        .call_json_query(method, path, query, body)
        .await
        .map_err(|error| {
            io.error(format!("Error: {error}"));
            1
        })
}

fn text(value: &serde_json::Value, key: &str) -> String {
    match value.get(key) {
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

async fn create(arguments: CreateArgs, io: &mut Io<'_>) -> i32 {
    let action = if arguments.deny { "deny" } else { "allow" };
    let body = serde_json::json!({
        "Action": action,
        "Description": arguments.description,
    });
    match call(
        io,
        &arguments.api,
        "PUT",
        "/v1/connect/intentions/exact",
        &pair(&arguments.source, &arguments.destination),
        Some(body),
    )
    .await
    {
        Ok(_) => {
            io.say(format!(
                "Created: {} => {} ({action})",
                arguments.source, arguments.destination
            ));
            0
        }
        Err(code) => code,
    }
}

async fn get(arguments: PairArgs, io: &mut Io<'_>) -> i32 {
    match call(
        io,
        &arguments.api,
        "GET",
        "/v1/connect/intentions/exact",
        &pair(&arguments.source, &arguments.destination),
        None,
    )
    .await
    {
        Ok(Some(intention)) => {
            let rows: Vec<Vec<String>> = [
                (
                    "Source",
                    format!(
                        "{}/{}",
                        text(&intention, "SourceNS"),
                        text(&intention, "SourceName")
                    ),
                ),
                (
                    "Destination",
                    format!(
                        "{}/{}",
                        text(&intention, "DestinationNS"),
                        text(&intention, "DestinationName")
                    ),
                ),
                ("Action", text(&intention, "Action")),
                ("ID", text(&intention, "ID")),
                ("Description", text(&intention, "Description")),
                ("Precedence", text(&intention, "Precedence")),
                ("Created At", text(&intention, "CreatedAt")),
            ]
            .into_iter()
            .map(|(key, value)| vec![key.to_owned(), format!("= {value}")])
            .collect();
            io.say(columnize::columns(&rows).trim_end());
            0
        }
        Ok(None) => 0,
        Err(code) => code,
    }
}

async fn delete(arguments: PairArgs, io: &mut Io<'_>) -> i32 {
    match call(
        io,
        &arguments.api,
        "DELETE",
        "/v1/connect/intentions/exact",
        &pair(&arguments.source, &arguments.destination),
        None,
    )
    .await
    {
        Ok(_) => {
            io.say("Intention deleted.");
            0
        }
        Err(code) => code,
    }
}

async fn list(arguments: ListArgs, io: &mut Io<'_>) -> i32 {
    let listed = match call(
        io,
        &arguments.api,
        "GET",
        "/v1/connect/intentions",
        &[],
        None,
    )
    .await
    {
        Ok(listed) => listed.unwrap_or_else(|| serde_json::json!([])),
        Err(code) => return code,
    };
    if arguments.json {
        io.say(serde_json::to_string_pretty(&listed).unwrap_or_default());
        return 0;
    }
    let intentions = listed.as_array().cloned().unwrap_or_default();
    if intentions.is_empty() {
        io.say("There are no intentions.");
        return 0;
    }
    let mut rows = vec![vec![
        "ID".to_owned(),
        "Source".to_owned(),
        "Action".to_owned(),
        "Destination".to_owned(),
        "Precedence".to_owned(),
    ]];
    for intention in &intentions {
        rows.push(vec![
            text(intention, "ID"),
            format!(
                "{}/{}",
                text(intention, "SourceNS"),
                text(intention, "SourceName")
            ),
            text(intention, "Action"),
            format!(
                "{}/{}",
                text(intention, "DestinationNS"),
                text(intention, "DestinationName")
            ),
            text(intention, "Precedence"),
        ]);
    }
    io.say(columnize::columns(&rows).trim_end());
    0
}

async fn check(arguments: PairArgs, io: &mut Io<'_>) -> i32 {
    match call(
        io,
        &arguments.api,
        "GET",
        "/v1/connect/intentions/check",
        &pair(&arguments.source, &arguments.destination),
        None,
    )
    .await
    {
        Ok(Some(answer)) if answer.get("Allowed") == Some(&serde_json::Value::Bool(true)) => {
            io.say("Allowed");
            0
        }
        Ok(_) => {
            io.say("Denied");
            2
        }
        Err(code) => code,
    }
}
