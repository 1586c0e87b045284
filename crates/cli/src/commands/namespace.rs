//! `drover namespace apply | list | status | inspect | delete`: Nomad's namespace commands,
//! their flags and their output. `apply` takes a name (with `-description`, `-quota`) or a
//! specification file in HCL, or in JSON with `-json`.
//!
//! Not here: what a namespace allows (the agent).

use clap::{Args, Subcommand};
use drover_structs::namespace::Namespace;
use serde_json::{Map, Value};

use crate::commands::describe;
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum NamespaceCommand {
    /// Create or update a namespace
    Apply(ApplyArgs),
    /// List namespaces
    List(ListArgs),
    /// Display a namespace's status
    Status(NameArgs),
    /// Inspect a namespace
    Inspect(InspectArgs),
    /// Delete a namespace
    Delete(DeleteArgs),
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// The namespace's description (with a name, not a file).
    #[arg(long)]
    pub description: Option<String>,
    /// The namespace's quota (with a name, not a file).
    #[arg(long)]
    pub quota: Option<String>,
    /// The file is JSON rather than HCL.
    #[arg(long)]
    pub json: bool,
    /// A namespace name, or a specification file (`-` for standard input).
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
pub struct NameArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// A namespace name or prefix.
    pub name: String,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// A namespace name or prefix.
    pub name: String,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    pub name: String,
}

pub async fn run(command: NamespaceCommand, io: &mut Io<'_>) -> i32 {
    let outcome = match command {
        NamespaceCommand::Apply(arguments) => apply(arguments, io).await,
        NamespaceCommand::List(arguments) => list(arguments, io).await,
        NamespaceCommand::Status(arguments) => status(arguments, io).await,
        NamespaceCommand::Inspect(arguments) => inspect(arguments, io).await,
        NamespaceCommand::Delete(arguments) => delete(arguments, io).await,
    };
    match outcome {
        Ok(()) => 0,
        Err(message) => {
            io.error(message);
            1
        }
    }
}

async fn call(
    api: &ApiFlags,
    doing: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<Option<Value>, String> {
    api.client()
        .map_err(|error| format!("Error initializing client: {error}"))?
        .call_json(method, path, body)
        .await
        .map_err(|error| describe(doing, &error))
}

fn namespace_path(name: &str) -> String {
    format!(
        "/v1/namespace/{}",
        drover_api::client::escape_path_segment(name)
    )
}

fn print_json(io: &mut Io<'_>, value: &impl serde::Serialize) {
    io.say(serde_json::to_string_pretty(value).unwrap_or_default());
}

/// Nomad's `formatNamespaces`.
fn format_namespaces(namespaces: &mut [Namespace]) -> String {
    if namespaces.is_empty() {
        return "No namespaces found".to_owned();
    }
    namespaces.sort_by(|a, b| a.name.cmp(&b.name));
    let mut rows = vec![vec!["Name".to_owned(), "Description".to_owned()]];
    rows.extend(
        namespaces
            .iter()
            .map(|namespace| vec![namespace.name.clone(), namespace.description.clone()]),
    );
    columnize::columns(&rows)
}

/// Nomad's `formatNamespaceBasics`.
fn format_basics(namespace: &Namespace) -> String {
    let joined = |items: &[String], empty: &str| {
        if items.is_empty() {
            empty.to_owned()
        } else {
            items.join(",")
        }
    };
    let capabilities = namespace.capabilities.clone().unwrap_or_default();
    columnize::key_values(&[
        ("Name", namespace.name.clone()),
        ("Description", namespace.description.clone()),
        ("Quota", namespace.quota.clone()),
        (
            "Enabled Drivers",
            joined(&capabilities.enabled_task_drivers, "*"),
        ),
        (
            "Disabled Drivers",
            joined(&capabilities.disabled_task_drivers, ""),
        ),
        (
            "Enabled Network Modes",
            joined(&capabilities.enabled_network_modes, "*"),
        ),
        (
            "Disabled Network Modes",
            joined(&capabilities.disabled_network_modes, ""),
        ),
    ])
}

async fn fetch_all(api: &ApiFlags) -> Result<Vec<Namespace>, String> {
    let answer = call(api, "retrieving namespaces", "GET", "/v1/namespaces", None).await?;
    serde_json::from_value(answer.unwrap_or(Value::Null))
        .map_err(|error| format!("Error retrieving namespaces: {error}"))
}

/// Nomad's `getNamespace`: a prefix lookup, an exact match winning over several.
async fn lookup(api: &ApiFlags, name: &str) -> Result<Namespace, String> {
    let mut matches: Vec<Namespace> = fetch_all(api)
        .await?
        .into_iter()
        .filter(|namespace| namespace.name.starts_with(name))
        .collect();
    match matches.len() {
        0 => Err(format!(
            "Error retrieving namespaces: Namespace {name:?} matched no namespaces"
        )),
        1 => Ok(matches.remove(0)),
        _ => match matches.iter().position(|namespace| namespace.name == name) {
            Some(exact) => Ok(matches.remove(exact)),
            None => Err(format!(
                "Prefix matched multiple namespaces\n\n{}",
                format_namespaces(&mut matches)
            )),
        },
    }
}

async fn list(arguments: ListArgs, io: &mut Io<'_>) -> Result<(), String> {
    let mut namespaces = fetch_all(&arguments.api).await?;
    if arguments.json {
        print_json(io, &namespaces);
    } else {
        io.say(format_namespaces(&mut namespaces));
    }
    Ok(())
}

async fn status(arguments: NameArgs, io: &mut Io<'_>) -> Result<(), String> {
    let namespace = lookup(&arguments.api, &arguments.name).await?;
    if arguments.json {
        print_json(io, &namespace);
        return Ok(());
    }
    io.say(format_basics(&namespace));
    if let Some(meta) = namespace.meta.as_ref().filter(|meta| !meta.is_empty()) {
        io.say("\nMetadata");
        let pairs: Vec<(&str, String)> = meta
            .iter()
            .map(|(key, value)| (key.as_str(), value.clone()))
            .collect();
        io.say(columnize::key_values(&pairs));
    }
    Ok(())
}

async fn inspect(arguments: InspectArgs, io: &mut Io<'_>) -> Result<(), String> {
    let namespace = lookup(&arguments.api, &arguments.name).await?;
    print_json(io, &namespace);
    Ok(())
}

async fn delete(arguments: DeleteArgs, io: &mut Io<'_>) -> Result<(), String> {
    call(
        &arguments.api,
        "deleting namespace",
        "DELETE",
        &namespace_path(&arguments.name),
        None,
    )
    .await?;
    io.say(format!(
        "Successfully deleted namespace {:?}!",
        arguments.name
    ));
    Ok(())
}

/// The API's field for a namespace specification's HCL key, as Nomad's CLI decodes it.
fn api_field(key: &str) -> String {
    match key {
        "node_pool_config" => "NodePoolConfiguration".to_owned(),
        "vault" => "VaultConfiguration".to_owned(),
        "consul" => "ConsulConfiguration".to_owned(),
        other => other
            .split('_')
            .map(|word| {
                let mut chars = word.chars();
                chars.next().map_or_else(String::new, |first| {
                    first.to_uppercase().collect::<String>() + chars.as_str()
                })
            })
            .collect(),
    }
}

/// A namespace specification in HCL as the API's JSON: top-level keys and the
/// `capabilities` block's keys renamed, `meta` and claims kept as given.
fn hcl_spec_to_json(text: &str) -> Result<Value, String> {
    let parsed: Value = hcl::from_str(text)
        .map_err(|error| format!("Error parsing quota specification: {error}"))?;
    let Value::Object(fields) = parsed else {
        return Err(
            "Error parsing quota specification: error parsing: root should be an object".to_owned(),
        );
    };
    let mut spec = Map::new();
    for (key, value) in fields {
        // A block written once decodes as an object, written twice as a list: the first wins.
        let value = match value {
            Value::Array(mut blocks) if key != "capabilities" && !blocks.is_empty() => {
                blocks.remove(0)
            }
            other => other,
        };
        let value = match (key.as_str(), value) {
            ("capabilities" | "node_pool_config" | "vault" | "consul", Value::Object(inner)) => {
                Value::Object(
                    inner
                        .into_iter()
                        .map(|(key, value)| (api_field(&key), value))
                        .collect(),
                )
            }
            (_, other) => other,
        };
        spec.insert(api_field(&key), value);
    }
    Ok(Value::Object(spec))
}

async fn apply(arguments: ApplyArgs, io: &mut Io<'_>) -> Result<(), String> {
    let input = arguments.input.as_str();
    let is_file = input == "-" || std::path::Path::new(input).is_file();
    let body = if is_file {
        if arguments.quota.is_some() || arguments.description.is_some() {
            io.error("Flags are ignored when a file is specified!");
        }
        let text = if input == "-" {
            std::io::read_to_string(std::io::stdin())
                .map_err(|error| format!("Failed to read stdin: {error}"))?
        } else {
            std::fs::read_to_string(input)
                .map_err(|error| format!("Failed to read file: {error}"))?
        };
        if arguments.json {
            serde_json::from_str::<Value>(&text)
                .map_err(|error| format!("Failed to parse quota: {error}"))?
        } else {
            hcl_spec_to_json(&text)?
        }
    } else {
        if input.is_empty() {
            return Err("Namespace name required".to_owned());
        }
        let existing = match call(
            &arguments.api,
            "looking up namespace",
            "GET",
            &namespace_path(input),
            None,
        )
        .await
        {
            Ok(answer) => answer,
            Err(message) if message.contains("404") => None,
            Err(message) => return Err(message),
        };
        let mut namespace: Namespace = match existing {
            Some(value) => serde_json::from_value(value)
                .map_err(|error| format!("Error looking up namespace: {error}"))?,
            None => Namespace {
                name: input.to_owned(),
                ..Namespace::default()
            },
        };
        if let Some(description) = arguments.description {
            namespace.description = description;
        }
        if let Some(quota) = arguments.quota {
            namespace.quota = quota;
        }
        serde_json::to_value(&namespace).map_err(|error| error.to_string())?
    };
    let name = body
        .get("Name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    call(
        &arguments.api,
        "applying namespace",
        "PUT",
        "/v1/namespace",
        Some(body),
    )
    .await?;
    io.say(format!("Successfully applied namespace {name:?}!"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hcl_spec_becomes_the_apis_json() {
        let spec = hcl_spec_to_json(
            r#"
            name = "prod"
            description = "Production"
            capabilities {
              enabled_task_drivers = ["exec"]
              disabled_network_modes = ["host"]
            }
            meta {
              owner = "ops"
            }
            "#,
        )
        .unwrap();
        assert_eq!(
            spec,
            serde_json::json!({
                "Name": "prod",
                "Description": "Production",
                "Capabilities": {
                    "EnabledTaskDrivers": ["exec"],
                    "DisabledNetworkModes": ["host"]
                },
                "Meta": {"owner": "ops"}
            })
        );
    }
}
