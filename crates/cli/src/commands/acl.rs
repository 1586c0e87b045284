//! `drover acl bootstrap | policy apply|list|info|delete | role create|list|info|update|delete |
//! token create|list|info|self|update|delete`: Nomad's ACL commands, their flags and their
//! output. Where Nomad's command takes `-json` and `-t` (bootstrap, policy list and self, role
//! create, list, info and update, token create and list) the data goes through
//! `format::format_data`, Nomad's `Format`; drover's `policy info`, `token info`, `token self`
//! and `token update` take `-json` too.
//!
//! Not here: what a policy means or who may call what (the agent).

use clap::{Args, Subcommand};
use drover_api::client::ApiClient;
use drover_structs::Timestamp;
use drover_structs::acl::{
    AclPolicy, AclPolicyListStub, AclRole, AclRoleListStub, AclRolePolicyLink, AclToken,
    AclTokenListStub,
};
use serde_json::{Value, json};

use crate::commands::describe;
use crate::format::format_data;
use crate::{ApiFlags, Io, columnize};

#[derive(Debug, Subcommand)]
pub enum AclCommand {
    /// Bootstrap the ACL system for initial token
    Bootstrap(BootstrapArgs),
    /// Interact with ACL policies
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Interact with ACL roles
    #[command(subcommand)]
    Role(RoleCommand),
    /// Interact with ACL tokens
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Debug, Subcommand)]
pub enum RoleCommand {
    /// Create a new ACL role
    Create(RoleWriteArgs),
    /// List ACL roles
    List(FormatArgs),
    /// Fetch information on an existing ACL role
    Info(RoleInfoArgs),
    /// Update an existing ACL role
    Update(RoleUpdateArgs),
    /// Delete an existing ACL role
    Delete(RoleIdArgs),
}

#[derive(Debug, Args)]
pub struct RoleWriteArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    #[command(flatten)]
    pub output: OutputFlags,
    /// The role's name.
    #[arg(long)]
    pub name: Option<String>,
    /// The role's description.
    #[arg(long)]
    pub description: Option<String>,
    /// A policy to link (repeatable).
    #[arg(long = "policy")]
    pub policies: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RoleUpdateArgs {
    #[command(flatten)]
    pub write: RoleWriteArgs,
    /// Replace the role's policies, name and description instead of merging.
    #[arg(long)]
    pub no_merge: bool,
    /// The role's ID.
    pub id: String,
}

#[derive(Debug, Args)]
pub struct RoleInfoArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    #[command(flatten)]
    pub output: OutputFlags,
    /// Look the role up by name instead of ID.
    #[arg(long)]
    pub by_name: bool,
    pub id: String,
}

#[derive(Debug, Args)]
pub struct RoleIdArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    pub id: String,
}

#[derive(Debug, Args)]
pub struct BootstrapArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    #[command(flatten)]
    pub output: OutputFlags,
    /// A file holding the bootstrap secret to use (a UUID).
    pub secret_file: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Create or update an ACL policy
    Apply(PolicyApplyArgs),
    /// List ACL policies
    List(FormatArgs),
    /// Fetch info on an existing ACL policy
    Info(InfoArgs),
    /// Delete an existing ACL policy
    Delete(NameArgs),
    /// Lookup self ACL policy assigned to the workload identity or ACL token
    #[command(name = "self")]
    Self_(FormatArgs),
}

#[derive(Debug, Args)]
pub struct PolicyApplyArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// The policy's description.
    #[arg(long)]
    pub description: Option<String>,
    /// The policy's name.
    pub name: String,
    /// The rules file (`-` for standard input).
    pub path: String,
}

#[derive(Debug, Args)]
pub struct JsonArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `-json` and `-t`, as Nomad's commands that print an answer take them.
#[derive(Debug, Args)]
pub struct OutputFlags {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Format the answer with a Go template.
    #[arg(short = 't', value_name = "TEMPLATE")]
    pub template: Option<String>,
}

/// `-json` and `-t` alone, as Nomad's list and self commands take them.
#[derive(Debug, Args)]
pub struct FormatArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

/// One name or accessor ID, and `-json`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    pub name: String,
}

/// One name or accessor ID.
#[derive(Debug, Args)]
pub struct NameArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    pub name: String,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a new ACL token
    Create(TokenWriteArgs),
    /// List ACL tokens
    List(FormatArgs),
    /// Fetch information on an existing ACL token
    Info(InfoArgs),
    /// Lookup self ACL token
    #[command(name = "self")]
    Self_(JsonArgs),
    /// Update an existing ACL token
    Update(TokenUpdateArgs),
    /// Delete an existing ACL token
    Delete(NameArgs),
}

#[derive(Debug, Args)]
pub struct TokenWriteArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    #[command(flatten)]
    pub output: OutputFlags,
    /// The token's name.
    #[arg(long)]
    pub name: Option<String>,
    /// `client` or `management`.
    #[arg(long = "type", default_value = "client")]
    pub token_type: String,
    /// A policy to attach (repeatable).
    #[arg(long = "policy")]
    pub policies: Vec<String>,
    /// The name of a role to link (repeatable).
    #[arg(long = "role-name")]
    pub role_names: Vec<String>,
    /// The ID of a role to link (repeatable).
    #[arg(long = "role-id")]
    pub role_ids: Vec<String>,
    /// Replicate the token to all regions.
    #[arg(long)]
    pub global: bool,
    /// How long the token lives (a Go duration such as 1h).
    #[arg(long)]
    pub ttl: Option<String>,
}

#[derive(Debug, Args)]
pub struct TokenUpdateArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long = "type")]
    pub token_type: Option<String>,
    #[arg(long = "policy")]
    pub policies: Vec<String>,
    /// The token's accessor ID.
    pub accessor: String,
}

pub async fn run(command: AclCommand, io: &mut Io<'_>) -> i32 {
    let outcome = match command {
        AclCommand::Bootstrap(arguments) => bootstrap(arguments, io).await,
        AclCommand::Policy(command) => policy(command, io).await,
        AclCommand::Role(command) => role(command, io).await,
        AclCommand::Token(command) => token(command, io).await,
    };
    match outcome {
        Ok(()) => 0,
        Err(message) => {
            io.error(message);
            1
        }
    }
}

fn client(api: &ApiFlags) -> Result<ApiClient, String> {
    api.client()
        .map_err(|error| format!("Error initializing client: {error}"))
}

pub(crate) async fn call(
    api: &ApiFlags,
    doing: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Result<Option<Value>, String> {
    client(api)?
        .call_json(method, path, body)
        .await
        .map_err(|error| describe(doing, &error))
}

pub(crate) fn decode<T: serde::de::DeserializeOwned>(value: Option<Value>) -> Result<T, String> {
    serde_json::from_value(value.unwrap_or(Value::Null))
        .map_err(|error| format!("Error decoding the answer: {error}"))
}

/// Nomad's `Format` behind `-json` and `-t`: prints `data` so and answers true, or answers
/// false when neither was asked for (the caller prints its own table). A bad template is the
/// error Nomad prints.
pub(crate) fn say_formatted(
    io: &mut Io<'_>,
    json: bool,
    template: Option<&str>,
    data: &impl serde::Serialize,
) -> Result<bool, String> {
    let template = template.unwrap_or_default();
    if !json && template.is_empty() {
        return Ok(false);
    }
    io.say(format_data(json, template, data)?);
    Ok(true)
}

/// Go's `time.Time.String()` in UTC: `2006-01-02 15:04:05.999999999 +0000 UTC`.
fn go_time(timestamp: Timestamp) -> String {
    let text = timestamp.to_rfc3339_nanos();
    let text = text.trim_end_matches('Z').replacen('T', " ", 1);
    format!("{text} +0000 UTC")
}

/// Nomad's `outputACLToken`: the token's fields, then for a client token its policies and a
/// table of its roles.
pub(crate) fn format_token(token: &AclToken) -> String {
    let mut fields = vec![
        ("Accessor ID", token.accessor_id.clone()),
        ("Secret ID", token.secret_id.clone()),
        ("Name", token.name.clone()),
        ("Type", token.token_type.clone()),
        ("Global", token.global.to_string()),
        ("Create Time", go_time(token.create_time)),
        (
            "Expiry Time",
            token
                .expiration_time
                .map_or_else(|| "<none>".to_owned(), go_time),
        ),
        ("Create Index", token.create_index.to_string()),
        ("Modify Index", token.modify_index.to_string()),
    ];
    if token.is_management() {
        fields.push(("Policies", "n/a".to_owned()));
        fields.push(("Roles", "n/a".to_owned()));
        return columnize::key_values(&fields);
    }
    // Go's `%v` of a string slice.
    fields.push((
        "Policies",
        format!(
            "[{}]",
            token.policies.as_deref().unwrap_or_default().join(" ")
        ),
    ));
    let links = token.roles.as_deref().unwrap_or_default();
    let roles = if links.is_empty() {
        "<none>".to_owned()
    } else {
        let mut rows = vec![vec!["ID".to_owned(), "Name".to_owned()]];
        rows.extend(
            links
                .iter()
                .map(|link| vec![link.id.clone(), link.name.clone()]),
        );
        columnize::columns(&rows)
    };
    format!("{}\n\nRoles\n{roles}", columnize::key_values(&fields))
}

fn say_token(
    io: &mut Io<'_>,
    json: bool,
    template: Option<&str>,
    token: &AclToken,
) -> Result<(), String> {
    if !say_formatted(io, json, template, token)? {
        io.say(format_token(token));
    }
    Ok(())
}

async fn bootstrap(arguments: BootstrapArgs, io: &mut Io<'_>) -> Result<(), String> {
    let body = match &arguments.secret_file {
        Some(path) => {
            let secret = std::fs::read_to_string(path)
                .map_err(|error| format!("Error reading bootstrap secret file: {error}"))?;
            Some(json!({"BootstrapSecret": secret.trim()}))
        }
        None => None,
    };
    let answer = call(
        &arguments.api,
        "bootstrapping",
        "POST",
        "/v1/acl/bootstrap",
        body,
    )
    .await?;
    let token: AclToken = decode(answer)?;
    say_token(
        io,
        arguments.output.json,
        arguments.output.template.as_deref(),
        &token,
    )
}

fn policy_path(name: &str) -> String {
    format!(
        "/v1/acl/policy/{}",
        drover_api::client::escape_path_segment(name)
    )
}

async fn policy(command: PolicyCommand, io: &mut Io<'_>) -> Result<(), String> {
    match command {
        PolicyCommand::Apply(arguments) => {
            let rules = if arguments.path == "-" {
                std::io::read_to_string(std::io::stdin())
                    .map_err(|error| format!("Error reading policy from stdin: {error}"))?
            } else {
                std::fs::read_to_string(&arguments.path)
                    .map_err(|error| format!("Error reading policy file: {error}"))?
            };
            let body = json!({
                "Name": arguments.name,
                "Description": arguments.description.unwrap_or_default(),
                "Rules": rules,
            });
            call(
                &arguments.api,
                "writing ACL policy",
                "PUT",
                &policy_path(&arguments.name),
                Some(body),
            )
            .await?;
            io.say(format!(
                "Successfully wrote {:?} ACL policy!",
                arguments.name
            ));
        }
        PolicyCommand::List(arguments) => {
            let answer = call(
                &arguments.api,
                "retrieving ACL policies",
                "GET",
                "/v1/acl/policies",
                None,
            )
            .await?;
            let policies: Vec<AclPolicyListStub> = decode(answer)?;
            if say_formatted(
                io,
                arguments.output.json,
                arguments.output.template.as_deref(),
                &policies,
            )? {
                return Ok(());
            }
            if policies.is_empty() {
                io.say("No policies found");
            } else {
                let mut rows = vec![vec!["Name".to_owned(), "Description".to_owned()]];
                rows.extend(
                    policies
                        .iter()
                        .map(|policy| vec![policy.name.clone(), policy.description.clone()]),
                );
                io.say(columnize::columns(&rows));
            }
        }
        PolicyCommand::Info(arguments) => {
            let answer = call(
                &arguments.api,
                "querying ACL policy",
                "GET",
                &policy_path(&arguments.name),
                None,
            )
            .await?;
            let policy: AclPolicy = decode(answer)?;
            if !say_formatted(io, arguments.json, None, &policy)? {
                io.say(columnize::key_values(&[
                    ("Name", policy.name.clone()),
                    ("Description", policy.description.clone()),
                    ("CreateIndex", policy.create_index.to_string()),
                    ("ModifyIndex", policy.modify_index.to_string()),
                ]));
                io.say(format!("\nRules\n\n{}", policy.rules));
            }
        }
        PolicyCommand::Self_(arguments) => policy_self(arguments, io).await?,
        PolicyCommand::Delete(arguments) => {
            call(
                &arguments.api,
                "deleting ACL policy",
                "DELETE",
                &policy_path(&arguments.name),
                None,
            )
            .await?;
            io.say(format!(
                "Successfully deleted {:?} ACL policy!",
                arguments.name
            ));
        }
    }
    Ok(())
}

/// `acl policy self`, as Nomad's: the token is read first (a management token holds no
/// policies), then the caller's policies with the job, group and task they are bound to.
async fn policy_self(arguments: FormatArgs, io: &mut Io<'_>) -> Result<(), String> {
    let answer = call(
        &arguments.api,
        "fetching token",
        "GET",
        "/v1/acl/token/self",
        None,
    )
    .await?;
    let token: AclToken = decode(answer)?;
    if token.is_management() {
        io.say("This is a management token. No individual policies are assigned.");
        return Ok(());
    }
    let answer = call(
        &arguments.api,
        "fetching WI policies",
        "GET",
        "/v1/acl/policy/self",
        None,
    )
    .await?;
    let policies: Vec<AclPolicyListStub> = decode(answer)?;
    if policies.is_empty() {
        io.say("No policies found.");
    } else if !say_formatted(
        io,
        arguments.output.json,
        arguments.output.template.as_deref(),
        &policies,
    )? {
        let specified = |value: &str| {
            if value.is_empty() {
                "<not specified>".to_owned()
            } else {
                value.to_owned()
            }
        };
        let mut rows = vec![
            ["Name", "Job ID", "Group Name", "Task Name"]
                .map(str::to_owned)
                .to_vec(),
        ];
        rows.extend(policies.iter().map(|policy| {
            let bound = |field: fn(&drover_structs::acl::JobAcl) -> &str| {
                policy.job_acl.as_ref().map_or_else(
                    || "<unavailable>".to_owned(),
                    |binding| specified(field(binding)),
                )
            };
            vec![
                policy.name.clone(),
                bound(|binding| &binding.job_id),
                bound(|binding| &binding.group),
                bound(|binding| &binding.task),
            ]
        }));
        io.say(columnize::columns(&rows));
    }
    Ok(())
}

/// Role links by name, then by ID, each without repeats (Nomad's
/// `generateACLTokenRoleLinks`).
fn role_links(names: &[String], ids: &[String]) -> Vec<Value> {
    let mut links: Vec<Value> = Vec::new();
    let mut unique = |key: &str, values: &[String]| {
        let mut seen: Vec<&String> = Vec::new();
        for value in values {
            if !seen.contains(&value) {
                seen.push(value);
                links.push(json!({ key: value }));
            }
        }
    };
    unique("Name", names);
    unique("ID", ids);
    links
}

/// Nomad's `formatACLRole`: policy names sorted, comma-separated.
fn format_role(role: &AclRole) -> String {
    columnize::key_values(&[
        ("ID", role.id.clone()),
        ("Name", role.name.clone()),
        ("Description", role.description.clone()),
        ("Policies", policy_names(&role.policies)),
        ("Create Index", role.create_index.to_string()),
        ("Modify Index", role.modify_index.to_string()),
    ])
}

fn policy_names(links: &[AclRolePolicyLink]) -> String {
    let mut names: Vec<&str> = links.iter().map(|link| link.name.as_str()).collect();
    names.sort_unstable();
    names.join(",")
}

fn policy_links(names: &[String]) -> Vec<AclRolePolicyLink> {
    let mut links: Vec<AclRolePolicyLink> = Vec::new();
    for name in names {
        if !links.iter().any(|link| &link.name == name) {
            links.push(AclRolePolicyLink { name: name.clone() });
        }
    }
    links
}

fn role_path(id: &str) -> String {
    format!(
        "/v1/acl/role/{}",
        drover_api::client::escape_path_segment(id)
    )
}

fn say_role(
    io: &mut Io<'_>,
    json: bool,
    template: Option<&str>,
    role: &AclRole,
) -> Result<(), String> {
    if !say_formatted(io, json, template, role)? {
        io.say(format_role(role));
    }
    Ok(())
}

/// The name and policies a create (or a no-merge update) needs, checked before any call.
fn required_role_fields(arguments: &RoleWriteArgs) -> Result<String, String> {
    let name = arguments
        .name
        .clone()
        .filter(|name| !name.is_empty())
        .ok_or("ACL role name must be specified using the -name flag")?;
    if arguments.policies.is_empty() {
        return Err("At least one policy name must be specified using the -policy flag".to_owned());
    }
    Ok(name)
}

async fn role(command: RoleCommand, io: &mut Io<'_>) -> Result<(), String> {
    match command {
        RoleCommand::Create(arguments) => {
            let name = required_role_fields(&arguments)?;
            let role = AclRole {
                name,
                description: arguments.description.clone().unwrap_or_default(),
                policies: policy_links(&arguments.policies),
                ..AclRole::default()
            };
            let body = serde_json::to_value(&role)
                .map_err(|error| format!("Error encoding role: {error}"))?;
            let answer = call(
                &arguments.api,
                "creating ACL role",
                "PUT",
                "/v1/acl/role",
                Some(body),
            )
            .await?;
            let role: AclRole = decode(answer)?;
            say_role(
                io,
                arguments.output.json,
                arguments.output.template.as_deref(),
                &role,
            )?;
        }
        RoleCommand::List(arguments) => {
            let answer = call(
                &arguments.api,
                "listing ACL roles",
                "GET",
                "/v1/acl/roles",
                None,
            )
            .await?;
            let roles: Vec<AclRoleListStub> = decode(answer)?;
            if say_formatted(
                io,
                arguments.output.json,
                arguments.output.template.as_deref(),
                &roles,
            )? {
                return Ok(());
            }
            if roles.is_empty() {
                io.say("No ACL roles found");
            } else {
                let mut rows = vec![
                    ["ID", "Name", "Description", "Policies"]
                        .map(str::to_owned)
                        .to_vec(),
                ];
                rows.extend(roles.iter().map(|role| {
                    vec![
                        role.id.clone(),
                        role.name.clone(),
                        role.description.clone(),
                        policy_names(&role.policies),
                    ]
                }));
                io.say(columnize::columns(&rows));
            }
        }
        RoleCommand::Info(arguments) => {
            let path = if arguments.by_name {
                format!(
                    "/v1/acl/role/name/{}",
                    drover_api::client::escape_path_segment(&arguments.id)
                )
            } else {
                role_path(&arguments.id)
            };
            let answer = call(&arguments.api, "reading ACL role", "GET", &path, None).await?;
            let role: AclRole = decode(answer)?;
            say_role(
                io,
                arguments.output.json,
                arguments.output.template.as_deref(),
                &role,
            )?;
        }
        RoleCommand::Update(arguments) => {
            let write = &arguments.write;
            let answer = call(
                &write.api,
                "when retrieving ACL role",
                "GET",
                &role_path(&arguments.id),
                None,
            )
            .await?;
            let current: AclRole = decode(answer)?;
            let updated = if arguments.no_merge {
                let name = required_role_fields(write)?;
                AclRole {
                    id: arguments.id.clone(),
                    name,
                    description: write.description.clone().unwrap_or_default(),
                    policies: policy_links(&write.policies),
                    ..AclRole::default()
                }
            } else {
                let name = write.name.clone().filter(|name| !name.is_empty());
                let description = write
                    .description
                    .clone()
                    .filter(|description| !description.is_empty());
                if write.policies.is_empty() && name.is_none() && description.is_none() {
                    return Err(
                        "Please provide at least one flag to update the ACL role".to_owned()
                    );
                }
                let mut updated = current.clone();
                if let Some(name) = name {
                    updated.name = name;
                }
                if let Some(description) = description {
                    updated.description = description;
                }
                for name in &write.policies {
                    if !updated.policies.iter().any(|link| &link.name == name) {
                        updated
                            .policies
                            .push(AclRolePolicyLink { name: name.clone() });
                    }
                }
                updated
            };
            let body = serde_json::to_value(&updated)
                .map_err(|error| format!("Error encoding role: {error}"))?;
            let answer = call(
                &write.api,
                "updating ACL role",
                "PUT",
                &role_path(&arguments.id),
                Some(body),
            )
            .await?;
            let role: AclRole = decode(answer)?;
            say_role(
                io,
                write.output.json,
                write.output.template.as_deref(),
                &role,
            )?;
        }
        RoleCommand::Delete(arguments) => {
            call(
                &arguments.api,
                "deleting ACL role",
                "DELETE",
                &role_path(&arguments.id),
                None,
            )
            .await?;
            io.say(format!("ACL role {} successfully deleted", arguments.id));
        }
    }
    Ok(())
}

fn token_path(accessor: &str) -> String {
    format!(
        "/v1/acl/token/{}",
        drover_api::client::escape_path_segment(accessor)
    )
}

async fn token(command: TokenCommand, io: &mut Io<'_>) -> Result<(), String> {
    match command {
        TokenCommand::Create(arguments) => {
            let mut body = json!({
                "Name": arguments.name.clone().unwrap_or_default(),
                "Type": arguments.token_type,
                "Policies": arguments.policies,
                "Roles": role_links(&arguments.role_names, &arguments.role_ids),
                "Global": arguments.global,
            });
            if let Some(ttl) = &arguments.ttl {
                let ttl = drover_structs::parse_go_duration(ttl)
                    .map_err(|error| format!("Error parsing TTL: {error}"))?;
                body["ExpirationTTL"] = json!(ttl);
            }
            let answer = call(
                &arguments.api,
                "creating token",
                "PUT",
                "/v1/acl/token",
                Some(body),
            )
            .await?;
            let token: AclToken = decode(answer)?;
            say_token(
                io,
                arguments.output.json,
                arguments.output.template.as_deref(),
                &token,
            )?;
        }
        TokenCommand::List(arguments) => {
            let answer = call(
                &arguments.api,
                "retrieving ACL tokens",
                "GET",
                "/v1/acl/tokens",
                None,
            )
            .await?;
            let tokens: Vec<AclTokenListStub> = decode(answer)?;
            if say_formatted(
                io,
                arguments.output.json,
                arguments.output.template.as_deref(),
                &tokens,
            )? {
                return Ok(());
            }
            if tokens.is_empty() {
                io.say("No tokens found");
            } else {
                let now = crate::format::now_unix_nanos();
                let mut rows = vec![
                    ["Name", "Type", "Global", "Accessor ID", "Expired"]
                        .map(str::to_owned)
                        .to_vec(),
                ];
                rows.extend(tokens.iter().map(|token| {
                    let expired = token
                        .expiration_time
                        .and_then(Timestamp::unix_nanos)
                        .is_some_and(|expiry| expiry <= now);
                    vec![
                        token.name.clone(),
                        token.token_type.clone(),
                        token.global.to_string(),
                        token.accessor_id.clone(),
                        expired.to_string(),
                    ]
                }));
                io.say(columnize::columns(&rows));
            }
        }
        TokenCommand::Info(arguments) => {
            let answer = call(
                &arguments.api,
                "fetching token",
                "GET",
                &token_path(&arguments.name),
                None,
            )
            .await?;
            let token: AclToken = decode(answer)?;
            say_token(io, arguments.json, None, &token)?;
        }
        TokenCommand::Self_(arguments) => {
            let answer = call(
                &arguments.api,
                "fetching self token",
                "GET",
                "/v1/acl/token/self",
                None,
            )
            .await?;
            let token: AclToken = decode(answer)?;
            say_token(io, arguments.json, None, &token)?;
        }
        TokenCommand::Update(arguments) => {
            let answer = call(
                &arguments.api,
                "fetching token",
                "GET",
                &token_path(&arguments.accessor),
                None,
            )
            .await?;
            let mut token: AclToken = decode(answer)?;
            if let Some(name) = arguments.name {
                token.name = name;
            }
            if let Some(token_type) = arguments.token_type {
                token.token_type = token_type;
            }
            if !arguments.policies.is_empty() {
                token.policies = Some(arguments.policies);
            }
            let body = serde_json::to_value(&token)
                .map_err(|error| format!("Error encoding token: {error}"))?;
            let answer = call(
                &arguments.api,
                "updating token",
                "PUT",
                &token_path(&arguments.accessor),
                Some(body),
            )
            .await?;
            let token: AclToken = decode(answer)?;
            say_token(io, arguments.json, None, &token)?;
        }
        TokenCommand::Delete(arguments) => {
            call(
                &arguments.api,
                "deleting token",
                "DELETE",
                &token_path(&arguments.name),
                None,
            )
            .await?;
            io.say(format!("Token {} successfully deleted", arguments.name));
        }
    }
    Ok(())
}
