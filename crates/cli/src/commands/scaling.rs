//! `drover scaling policy list|info`: the scaling policies the groups' `scaling` blocks declare,
//! as Nomad's `scaling policy` commands print them (a table sorted by target; one policy's
//! fields with its policy document as JSON), with `-json` and `-t` as Nomad's `Format`.
//!
//! Not here: the policies themselves (the server stores them at register).

use clap::{Args, Subcommand};
use drover_structs::ScalingPolicyListStub;

use crate::commands::describe;
use crate::format::{format_data, short_id};
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum ScalingCommand {
    /// Interact with scaling policies
    #[command(subcommand)]
    Policy(PolicyCommand),
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Display all scaling policies
    List(ListArgs),
    /// Display an individual scaling policy
    Info(InfoArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Only the policies of this job.
    #[arg(long)]
    pub job: Option<String>,
    /// Only the policies of this type.
    #[arg(long = "type")]
    pub policy_type: Option<String>,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// Print the policies as JSON.
    #[arg(long)]
    pub json: bool,
    /// Format the policies with a Go template.
    #[arg(short = 't', value_name = "TEMPLATE")]
    pub template: Option<String>,
    /// Nomad takes no arguments here; any is an error.
    #[arg(hide = true)]
    pub extra: Vec<String>,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// Print the policy as JSON (every policy without an ID).
    #[arg(long)]
    pub json: bool,
    /// Format the policy with a Go template (every policy without an ID).
    #[arg(short = 't', value_name = "TEMPLATE")]
    pub template: Option<String>,
    /// The policy ID or ID prefix.
    pub policy: Vec<String>,
}

pub async fn run(command: ScalingCommand, io: &mut Io<'_>) -> i32 {
    match command {
        ScalingCommand::Policy(PolicyCommand::List(arguments)) => list(arguments, io).await,
        ScalingCommand::Policy(PolicyCommand::Info(arguments)) => info(arguments, io).await,
    }
}

/// Nomad's `formatScalingPolicyTarget`: namespace, job and group first, then the rest.
fn target_text(target: &std::collections::BTreeMap<String, String>) -> String {
    let mut first = [String::new(), String::new(), String::new()];
    let mut other = Vec::new();
    for (key, value) in target {
        let pair = format!("{key}:{value}");
        match key.to_ascii_lowercase().as_str() {
            "namespace" => first[0] = pair,
            "job" => first[1] = pair,
            "group" => first[2] = pair,
            _ => other.push(pair),
        }
    }
    let mut parts: Vec<String> = first.to_vec();
    parts.extend(other);
    parts.join(",").trim_matches(',').to_owned()
}

/// Nomad's `formatScalingPolicies`: sorted by target text.
fn policies_table(policies: &[ScalingPolicyListStub], verbose: bool) -> String {
    if policies.is_empty() {
        return "No policies found".to_owned();
    }
    let mut sorted: Vec<(String, &ScalingPolicyListStub)> = policies
        .iter()
        .map(|policy| (target_text(&policy.target), policy))
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rows = vec![
        ["ID", "Enabled", "Type", "Target"]
            .iter()
            .map(|cell| (*cell).to_owned())
            .collect::<Vec<_>>(),
    ];
    for (target, policy) in sorted {
        rows.push(vec![
            short_id(&policy.id, verbose),
            policy.enabled.to_string(),
            policy.r#type.clone(),
            target,
        ]);
    }
    columnize::columns(&rows)
}

async fn list(arguments: ListArgs, io: &mut Io<'_>) -> i32 {
    if !arguments.extra.is_empty() {
        io.error("This command takes no arguments");
        io.error("For additional help try 'drover scaling policy list -help'");
        return 1;
    }
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let mut filters = Vec::new();
    if let Some(policy_type) = arguments.policy_type.filter(|text| !text.is_empty()) {
        filters.push(("type", policy_type));
    }
    if let Some(job) = arguments.job.filter(|text| !text.is_empty()) {
        filters.push(("job", job));
    }
    let policies = match client.scaling_policies(&filters).await {
        Ok(policies) => policies,
        Err(error) => {
            io.error(describe("listing scaling policies", &error));
            return 1;
        }
    };
    let template = arguments.template.unwrap_or_default();
    if arguments.json || !template.is_empty() {
        return match format_data(arguments.json, &template, &policies) {
            Ok(text) => {
                io.say(text);
                0
            }
            Err(error) => {
                io.error(error);
                1
            }
        };
    }
    io.say(policies_table(&policies, arguments.verbose));
    0
}

async fn info(arguments: InfoArgs, io: &mut Io<'_>) -> i32 {
    let client = match arguments.api.client() {
        Ok(client) => client,
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            return 1;
        }
    };
    let template = arguments.template.clone().unwrap_or_default();
    let formatted = arguments.json || !template.is_empty();
    if arguments.policy.is_empty() && formatted {
        let policies = match client.scaling_policies(&[]).await {
            Ok(policies) => policies,
            Err(error) => {
                io.error(format!("Error listing scaling policies: {error}"));
                return 1;
            }
        };
        return match format_data(arguments.json, &template, &policies) {
            Ok(text) => {
                io.say(text);
                0
            }
            Err(error) => {
                io.error(error);
                1
            }
        };
    }
    let [policy_id] = arguments.policy.as_slice() else {
        io.error("This command takes one of the following argument conditions:");
        io.error(" * A single <policy_id>");
        io.error(" * No arguments, with output format specified");
        io.error("For additional help try 'drover scaling policy info -help'");
        return 1;
    };
    if policy_id.chars().count() == 1 {
        io.error("Identifier must contain at least two characters.");
        return 1;
    }
    let prefix = crate::commands::lookup::sanitize_uuid_prefix(policy_id);
    let candidates = match client
        .scaling_policies(&[("prefix", prefix.to_owned())])
        .await
    {
        Ok(candidates) => candidates,
        Err(error) => {
            io.error(format!("Error querying scaling policy: {error}"));
            return 1;
        }
    };
    let id = match candidates.as_slice() {
        [] => {
            io.error(format!(
                "No scaling policies with prefix or id {prefix:?} found"
            ));
            return 1;
        }
        [only] => only.id.clone(),
        _ => {
            // Nomad 1.1.2 answers an ambiguous prefix with the candidates and exit code 0.
            io.error(format!(
                "Prefix matched multiple scaling policies\n\n{}",
                policies_table(&candidates, arguments.verbose)
            ));
            return 0;
        }
    };
    let policy = match client.scaling_policy(&id).await {
        Ok(policy) => policy,
        Err(error) => {
            io.error(format!("Error querying scaling policy: {error}"));
            return 1;
        }
    };
    if formatted {
        return match format_data(arguments.json, &template, &policy) {
            Ok(text) => {
                io.say(text);
                0
            }
            Err(error) => {
                io.error(error);
                1
            }
        };
    }
    let document = if policy.policy.is_empty() {
        "<empty>".to_owned()
    } else {
        match format_data(true, "", &policy.policy) {
            Ok(text) => text,
            Err(error) => {
                io.error(error);
                return 1;
            }
        }
    };
    let bound = |value: Option<i64>| value.map_or_else(|| "<nil>".to_owned(), |n| n.to_string());
    io.say(columnize::key_values(&[
        ("ID", short_id(&policy.id, arguments.verbose)),
        ("Enabled", policy.enabled.to_string()),
        ("Target", target_text(&policy.target)),
        ("Min", bound(policy.min)),
        ("Max", bound(policy.max)),
    ]));
    io.say("\nPolicy:");
    io.say(document);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stub(id: &str, job: &str, group: &str) -> ScalingPolicyListStub {
        ScalingPolicyListStub {
            id: id.to_owned(),
            enabled: true,
            r#type: "horizontal".to_owned(),
            target: [("Namespace", "default"), ("Job", job), ("Group", group)]
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value.to_owned()))
                .collect(),
            ..ScalingPolicyListStub::default()
        }
    }

    #[test]
    fn the_table_is_sorted_by_target_as_nomad_prints_it() {
        let table = policies_table(
            &[
                stub("b6f8e0d2-0000-4000-8000-000000000002", "web", "app"),
                stub("0a1c3e57-0000-4000-8000-000000000001", "api", "server"),
            ],
            false,
        );
        assert_eq!(
            table,
            "ID        Enabled  Type        Target\n\
             0a1c3e57  true     horizontal  Namespace:default,Job:api,Group:server\n\
             b6f8e0d2  true     horizontal  Namespace:default,Job:web,Group:app"
        );
        assert_eq!(policies_table(&[], false), "No policies found");
    }

    #[test]
    fn a_target_lists_namespace_job_and_group_first() {
        let mut target = stub("x", "web", "app").target;
        target.insert("Task".to_owned(), "server".to_owned());
        assert_eq!(
            target_text(&target),
            "Namespace:default,Job:web,Group:app,Task:server"
        );
    }
}
