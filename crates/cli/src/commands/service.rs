//! `drover service list|info|delete`: the built-in service catalog, printed as Nomad's
//! `nomad service` commands print it.
//!
//! Not here: the catalog itself (the server) or registering services (the client).

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use drover_structs::{ServiceRegistration, ServiceRegistrationListStub};

use crate::commands::describe;
use crate::format::short_id;
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// List service registrations
    List(ListArgs),
    /// Display an individual service registration
    Info(InfoArgs),
    /// Delete a service registration
    Delete(DeleteArgs),
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
pub struct InfoArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Display full information.
    #[arg(long)]
    pub verbose: bool,
    /// The service name, or a prefix of it.
    pub service_name: String,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// The service name.
    pub service_name: String,
    /// The registration's ID.
    pub service_id: String,
}

pub async fn run(command: ServiceCommand, io: &mut Io<'_>) -> i32 {
    match command {
        ServiceCommand::List(arguments) => list(arguments, io).await,
        ServiceCommand::Info(arguments) => info(arguments, io).await,
        ServiceCommand::Delete(arguments) => delete(arguments, io).await,
    }
}

fn pipe_rows(lines: &[String]) -> String {
    let rows: Vec<Vec<String>> = lines
        .iter()
        .map(|line| line.split('|').map(str::to_string).collect())
        .collect();
    columnize::columns(&rows)
}

/// Nomad's list table: `Service Name`, `Namespace` when listing every namespace, `Tags`.
fn list_table(all_namespaces: bool, list: &[ServiceRegistrationListStub]) -> String {
    let mut stubs: Vec<&ServiceRegistrationListStub> = list.iter().collect();
    stubs.sort_by(|one, two| one.namespace.cmp(&two.namespace));
    let mut lines = vec![if all_namespaces {
        "Service Name|Namespace|Tags".to_string()
    } else {
        "Service Name|Tags".to_string()
    }];
    for stub in stubs {
        let mut services: Vec<_> = stub.services.iter().collect();
        services.sort_by(|one, two| one.service_name.cmp(&two.service_name));
        for service in services {
            let mut tags = service.tags.clone();
            tags.sort();
            let mut line = service.service_name.clone();
            if all_namespaces {
                line.push('|');
                line.push_str(&stub.namespace);
            }
            line.push_str(&format!("|[{}]", tags.join(",")));
            lines.push(line);
        }
    }
    pipe_rows(&lines)
}

async fn list(arguments: ListArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let list = match client.services().await {
        Ok(list) => list,
        Err(error) => {
            io.error(describe("listing service registrations", &error));
            return 1;
        }
    };
    if list.is_empty() {
        io.say("No service registrations found");
        return 0;
    }
    if arguments.json {
        io.say(serde_json::to_string_pretty(&list).unwrap_or_default());
        return 0;
    }
    io.say(list_table(client.namespace() == Some("*"), &list));
    0
}

/// Which service `prefix` names: an exact name wins, else the only name starting with it.
/// `Err` carries the message to print.
fn resolve_service(
    list: &[ServiceRegistrationListStub],
    prefix: &str,
    all_namespaces: bool,
) -> Result<(String, String), String> {
    let matches: Vec<(&str, &str)> = list
        .iter()
        .flat_map(|stub| {
            stub.services
                .iter()
                .filter(|service| service.service_name.starts_with(prefix))
                .map(|service| (stub.namespace.as_str(), service.service_name.as_str()))
        })
        .collect();
    let exact: Vec<(&str, &str)> = matches
        .iter()
        .filter(|(_, name)| *name == prefix)
        .copied()
        .collect();
    let chosen = match (exact.as_slice(), matches.as_slice()) {
        ([only], _) | ([], [only]) => Some(*only),
        _ => None,
    };
    if let Some((namespace, name)) = chosen {
        return Ok((namespace.to_string(), name.to_string()));
    }
    if matches.is_empty() {
        return Err(format!(
            "Error listing service registrations: No service registrations with prefix {prefix:?} found"
        ));
    }
    let possible: Vec<ServiceRegistrationListStub> = list
        .iter()
        .map(|stub| ServiceRegistrationListStub {
            namespace: stub.namespace.clone(),
            services: stub
                .services
                .iter()
                .filter(|service| service.service_name.starts_with(prefix))
                .cloned()
                .collect(),
        })
        .filter(|stub| !stub.services.is_empty())
        .collect();
    Err(format!(
        "Prefix matched multiple services\n\n{}",
        list_table(all_namespaces, &possible)
    ))
}

/// `host:port`, with brackets around an IPv6 host (Go's `net.JoinHostPort`); the address alone
/// for port 0.
fn host_port(address: &str, port: i64) -> String {
    if port == 0 {
        address.to_string()
    } else if address.contains(':') {
        format!("[{address}]:{port}")
    } else {
        format!("{address}:{port}")
    }
}

/// The registrations grouped by job ID (sorted), each group in the order the server gave.
fn by_job(services: &[ServiceRegistration]) -> BTreeMap<&str, Vec<&ServiceRegistration>> {
    let mut grouped: BTreeMap<&str, Vec<&ServiceRegistration>> = BTreeMap::new();
    for service in services {
        grouped.entry(&service.job_id).or_default().push(service);
    }
    grouped
}

async fn info(arguments: InfoArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let list = match client.services().await {
        Ok(list) => list,
        Err(error) => {
            io.error(describe("listing service registrations", &error));
            return 1;
        }
    };
    let all_namespaces = client.namespace() == Some("*");
    let (namespace, name) = match resolve_service(&list, &arguments.service_name, all_namespaces) {
        Ok(found) => found,
        Err(message) => {
            io.error(message);
            return 1;
        }
    };
    let services = match client.in_namespace(&namespace).service(&name).await {
        Ok(services) => services,
        Err(error) => {
            io.error(describe("listing service registrations", &error));
            return 1;
        }
    };
    if services.is_empty() {
        io.say("No service registrations found");
        return 0;
    }
    if arguments.json {
        io.say(serde_json::to_string_pretty(&services).unwrap_or_default());
        return 0;
    }
    let grouped = by_job(&services);
    if arguments.verbose {
        for service in grouped.values().flatten() {
            let block = columnize::key_values(&[
                ("ID", service.id.clone()),
                ("Service Name", service.service_name.clone()),
                ("Namespace", service.namespace.clone()),
                ("Job ID", service.job_id.clone()),
                ("Alloc ID", service.alloc_id.clone()),
                ("Node ID", service.node_id.clone()),
                ("Datacenter", service.datacenter.clone()),
                ("Address", format!("{}:{}", service.address, service.port)),
                ("Tags", format!("[{}]", service.tags.join(","))),
            ]);
            // Nomad's verbose block ends with an empty line of its own, then one more.
            io.say(format!("{block}\n"));
            io.say("");
        }
        return 0;
    }
    let mut lines = vec!["Job ID|Address|Tags|Node ID|Alloc ID".to_string()];
    for service in grouped.values().flatten() {
        lines.push(format!(
            "{}|{}|[{}]|{}|{}",
            service.job_id,
            host_port(&service.address, service.port),
            service.tags.join(","),
            short_id(&service.node_id, false),
            short_id(&service.alloc_id, false),
        ));
    }
    io.say(pipe_rows(&lines));
    0
}

async fn delete(arguments: DeleteArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    match client
        .delete_service(&arguments.service_name, &arguments.service_id)
        .await
    {
        Ok(()) => {
            io.say("Successfully deleted service registration");
            0
        }
        Err(error) => {
            io.error(describe("deleting service registration", &error));
            1
        }
    }
}
