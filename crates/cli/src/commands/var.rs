//! `drover var get | put | list | purge | lock`: Nomad's `nomad var` commands, their flags
//! and their output. `put` takes `key=value` items (a value `@file` is read from the file,
//! `-` from standard input; an empty value removes the item) or a whole specification in
//! JSON (`@file.json` or `-` with `-in json`); `lock` holds a variable's lock while a child
//! command runs, renewing it, as Nomad's lock leaser.
//!
//! Not here: what a variable or a lock means (the agent).

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::time::Duration;

use clap::{Args, Subcommand};
use drover_api::client::{ApiClient, ClientError};
use drover_structs::variables::{DEFAULT_LOCK_DELAY, DEFAULT_LOCK_TTL, VariableLock};
use drover_structs::{DurationNs, Timestamp, Variable, VariableMetadata};
use serde_json::Value;

use crate::{ApiFlags, Io, columnize};

const WILDCARD_REFUSED: &str = "The wildcard namespace (\"*\") is not valid for this command.";

#[derive(Debug, Subcommand)]
pub enum VarCommand {
    /// Read a variable
    Get(GetArgs),
    /// Create or update a variable
    Put(PutArgs),
    /// List variables
    List(ListArgs),
    /// Purge a variable
    Purge(PurgeArgs),
    /// Hold a variable's lock while a command runs
    Lock(LockArgs),
}

#[derive(Debug, Args)]
pub struct GetArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print only this item's value.
    #[arg(long)]
    pub item: Option<String>,
    /// go-template, json, hcl, table or none (default: table on a terminal, else json).
    #[arg(long)]
    pub out: Option<String>,
    /// The Go template of `-out go-template`.
    #[arg(long)]
    pub template: Option<String>,
    pub path: String,
}

#[derive(Debug, Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Write whatever the server holds.
    #[arg(long)]
    pub force: bool,
    /// Write only if the variable's modify index is this one (0: only if it does not exist).
    #[arg(long = "check-index")]
    pub check_index: Option<String>,
    /// The format of a specification read from standard input: hcl or json (a file's comes
    /// from its extension, .hcl or .json).
    #[arg(long = "in", default_value = "json")]
    pub input_format: String,
    /// go-template, json, hcl, table or none (default: none on a terminal, else json).
    #[arg(long)]
    pub out: Option<String>,
    /// The Go template of `-out go-template`.
    #[arg(long)]
    pub template: Option<String>,
    /// Say what is done on standard error.
    #[arg(long)]
    pub verbose: bool,
    /// The path (or `@file`/`-` for a whole specification), then `key=value` items.
    #[arg(required = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// go-template, json, table or terse (default: table on a terminal, else json).
    #[arg(long)]
    pub out: Option<String>,
    /// The Go template of `-out go-template`.
    #[arg(long)]
    pub template: Option<String>,
    /// How many variables a page holds (0: all).
    #[arg(long = "per-page", default_value_t = 0)]
    pub per_page: i32,
    /// The token of the page to start from (printed after a page that has a next one).
    #[arg(long = "page-token", default_value = "")]
    pub page_token: String,
    /// A filter expression on the variables' metadata.
    #[arg(long, default_value = "")]
    pub filter: String,
    pub prefix: Option<String>,
}

#[derive(Debug, Args)]
pub struct PurgeArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Purge only if the variable's modify index is this one.
    #[arg(long = "check-index")]
    pub check_index: Option<String>,
    pub path: String,
}

#[derive(Debug, Args)]
pub struct LockArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// The lock's TTL (a Go duration; default 15s).
    #[arg(long)]
    pub ttl: Option<String>,
    /// How long a lost lock still blocks (a Go duration; default 15s).
    #[arg(long)]
    pub delay: Option<String>,
    /// Run the command through /bin/sh -c.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub shell: bool,
    /// Return at once when the lock is held by someone else.
    #[arg(long = "early-return")]
    pub early_return: bool,
    /// How long to wait between attempts (default: 1.1 times the TTL).
    #[arg(long)]
    pub backoff: Option<String>,
    /// Say what is done on standard error.
    #[arg(long)]
    pub verbose: bool,
    /// The variable's path, then the command to run while holding its lock.
    #[arg(required = true, num_args = 2.., trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

pub async fn run(command: VarCommand, io: &mut Io<'_>) -> i32 {
    let outcome = match command {
        VarCommand::Get(arguments) => get(arguments, io).await,
        VarCommand::Put(arguments) => put(arguments, io).await,
        VarCommand::List(arguments) => list(arguments, io).await,
        VarCommand::Purge(arguments) => purge(arguments, io).await,
        VarCommand::Lock(arguments) => lock(arguments, io).await,
    };
    match outcome {
        Ok(code) => code,
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

/// The namespace a command names (`-namespace`, else `NOMAD_NAMESPACE`).
fn namespace_flag(api: &ApiFlags) -> Option<String> {
    api.namespace
        .clone()
        .or_else(|| std::env::var("NOMAD_NAMESPACE").ok())
        .filter(|namespace| !namespace.is_empty())
}

fn refuse_wildcard(api: &ApiFlags) -> Result<(), String> {
    if namespace_flag(api).as_deref() == Some("*") {
        Err(WILDCARD_REFUSED.to_owned())
    } else {
        Ok(())
    }
}

/// `/v1/var/<path>` with each segment escaped.
fn var_path(path: &str) -> String {
    let escaped: Vec<String> = path
        .split('/')
        .map(drover_api::client::escape_path_segment)
        .collect();
    format!("/v1/var/{}", escaped.join("/"))
}

/// Nomad's `sanitizePath`.
fn sanitize_path(path: &str) -> String {
    path.trim().trim_matches('/').to_owned()
}

/// Nomad's `formatUnixNanoTime`: RFC 3339 to the second, empty before 1970-01-01T00:00:01.
fn format_time(unix_nanos: i64) -> String {
    if unix_nanos < 1_000_000_000 {
        return String::new();
    }
    let whole = unix_nanos - unix_nanos.rem_euclid(1_000_000_000);
    Timestamp::from_unix_nanos(whole).to_rfc3339_nanos()
}

fn default_out(out: Option<String>, on_terminal: &str) -> String {
    out.unwrap_or_else(|| {
        if std::io::stdout().is_terminal() {
            on_terminal.to_owned()
        } else {
            "json".to_owned()
        }
    })
}

/// A variable specification in HCL, as Nomad's `parseVariableSpec` reads it: `namespace`,
/// `path`, the four integer indexes and times, and `items` (a block or an object of values,
/// numbers and booleans taken as their text); any other key is refused.
fn variable_from_hcl(text: &str) -> Result<Variable, String> {
    const KEYS: [&str; 7] = [
        "namespace",
        "path",
        "create_index",
        "modify_index",
        "create_time",
        "modify_time",
        "items",
    ];
    let parsed: Value = hcl::from_str(text).map_err(|error| error.to_string())?;
    let Value::Object(fields) = parsed else {
        return Err("error parsing: root should be an object".to_owned());
    };
    let mut variable = Variable::default();
    for (key, value) in fields {
        let integer = |value: &Value| {
            value
                .as_i64()
                .ok_or_else(|| format!("{key} must be integer; got {value}"))
        };
        match key.as_str() {
            "namespace" | "path" => {
                let text = item_text(&value).ok_or_else(|| format!("{key} must be a string"))?;
                if key == "path" {
                    variable.path = text;
                } else {
                    variable.namespace = text;
                }
            }
            "create_index" => variable.create_index = integer(&value)?.max(0).unsigned_abs(),
            "modify_index" => variable.modify_index = integer(&value)?.max(0).unsigned_abs(),
            "create_time" => variable.create_time = integer(&value)?,
            "modify_time" => variable.modify_time = integer(&value)?,
            "items" => {
                // A block decodes to an object; repeated blocks to a list of them, merged.
                let objects = match value {
                    Value::Array(objects) => objects,
                    object => vec![object],
                };
                for object in objects {
                    let Value::Object(items) = object else {
                        return Err("items must be a block of key = value".to_owned());
                    };
                    for (item, value) in items {
                        let text = item_text(&value)
                            .ok_or_else(|| format!("item {item:?} must be a string"))?;
                        variable.items.insert(item, text);
                    }
                }
            }
            other => {
                return Err(format!(
                    "invalid key: {other} (valid keys: {})",
                    KEYS.join(", ")
                ));
            }
        }
    }
    Ok(variable)
}

/// A scalar as its text (mapstructure's weak decoding of a string field).
fn item_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(if *flag { "1" } else { "0" }.to_owned()),
        _ => None,
    }
}

/// `-out` of `var get` and `var put`, and Nomad's error for another.
const OUT_FORMATS: [&str; 5] = ["go-template", "hcl", "json", "none", "table"];
const INVALID_OUT: &str =
    "Invalid value for \"-out\"; valid values are [go-template, hcl, json, none, table]";

/// Nomad's `validateOutputFlag`: `-template` goes with `-out go-template` only, and that
/// format needs one.
fn check_out(
    out: &str,
    template: Option<&str>,
    valid: &[&str],
    invalid: &str,
) -> Result<(), String> {
    let template = template.unwrap_or_default();
    if out != "go-template" && !template.is_empty() {
        return Err(
            "The '-template' flag is only valid when using 'go-template' formatting".to_owned(),
        );
    }
    if !valid.contains(&out) {
        return Err(invalid.to_owned());
    }
    if out == "go-template" && template.is_empty() {
        return Err(
            "A template must be supplied using '-template' when using go-template formatting"
                .to_owned(),
        );
    }
    Ok(())
}

/// `data` as the API answers it, rendered with a Go template (Nomad's `renderWithGoTemplate`
/// runs on the API structs, whose fields are the JSON's names).
fn go_template(template: &str, data: &impl serde::Serialize) -> Result<String, String> {
    let json = serde_json::to_value(data).map_err(|error| error.to_string())?;
    drover_template::render("", template, &drover_template::Value::from_json(&json))
        .map_err(|error| error.to_string())
}

/// Nomad's `renderSVAsUiTable`.
fn variable_table(variable: &Variable) -> String {
    let mut meta = vec![
        ("Namespace", variable.namespace.clone()),
        ("Path", variable.path.clone()),
        ("Create Time", format_time(variable.create_time)),
    ];
    if variable.create_time != variable.modify_time {
        meta.push(("Modify Time", format_time(variable.modify_time)));
    }
    meta.push(("Check Index", variable.modify_index.to_string()));
    let items: Vec<(&str, String)> = variable
        .items
        .iter()
        .map(|(key, value)| (key.as_str(), value.clone()))
        .collect();
    format!(
        "{}\n\nItems\n{}",
        columnize::key_values(&meta),
        columnize::key_values(&items)
    )
}

/// Nomad's `renderAsHCL`.
fn variable_hcl(variable: &Variable) -> String {
    let pad = variable.items.keys().map(String::len).max().unwrap_or(0);
    let mut items = String::new();
    for (key, value) in &variable.items {
        items.push_str(&format!("  {key:>pad$} = {value:?}\n"));
    }
    format!(
        "\nnamespace    = {:?}\npath         = {:?}\ncreate_index = {}  # Set by server\nmodify_index = {}  # Set by server; consulted for check-and-set\ncreate_time  = {}   # Set by server\nmodify_time  = {}   # Set by server\n\nitems = {{\n{items}}}\n",
        variable.namespace,
        variable.path,
        variable.create_index,
        variable.modify_index,
        variable.create_time,
        variable.modify_time,
    )
}

/// Nomad's `api.Variable.AsPrettyJSON`: Nomad's field order, two-space indent.
fn variable_json(variable: &Variable) -> String {
    let mut object = serde_json::Map::new();
    object.insert("Namespace".into(), Value::from(variable.namespace.clone()));
    object.insert("Path".into(), Value::from(variable.path.clone()));
    object.insert("CreateIndex".into(), Value::from(variable.create_index));
    object.insert("ModifyIndex".into(), Value::from(variable.modify_index));
    object.insert("CreateTime".into(), Value::from(variable.create_time));
    object.insert("ModifyTime".into(), Value::from(variable.modify_time));
    object.insert(
        "Items".into(),
        serde_json::to_value(&variable.items).unwrap_or(Value::Null),
    );
    if let Some(lock) = &variable.lock {
        object.insert(
            "Lock".into(),
            serde_json::to_value(lock).unwrap_or(Value::Null),
        );
    }
    serde_json::to_string_pretty(&Value::Object(object)).unwrap_or_default()
}

/// Greedy word wrap at `width` (Nomad's `wrapString`).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// Nomad's `handleCASError`: the conflict explained on standard error.
fn say_cas_conflict(io: &mut Io<'_>, check_index: u64, conflict: &Variable) {
    let last_update = if conflict.modify_index > 0 {
        format!(
            " The server-side item was last updated on {}.",
            format_time(conflict.modify_time)
        )
    } else {
        String::new()
    };
    let text = format!(
        "Your provided check-index ({check_index}) does not match the server-side index ({}).{last_update} If you are sure you want to perform this operation, add the -force or -check-index={} flag before the positional arguments.",
        conflict.modify_index, conflict.modify_index
    );
    io.error("\nCheck-and-Set conflict\n");
    let lines: Vec<String> = wrap(&text, 76)
        .into_iter()
        .map(|line| format!("    {line}"))
        .collect();
    io.error(format!("{}\n", lines.join("\n")));
}

/// The conflicting variable of a 409 answer.
fn conflict_of(error: &ClientError) -> Option<Variable> {
    match error {
        ClientError::Status {
            status: 409,
            message,
        } => serde_json::from_str(message).ok(),
        _ => None,
    }
}

/// Nomad's `parseCheckIndex`.
fn parse_check_index(text: Option<&str>) -> Result<Option<u64>, String> {
    match text {
        None | Some("") => Ok(None),
        Some(text) => text
            .parse::<u64>()
            .map(Some)
            .map_err(|error| format!("Error parsing check-index value {text:?}: {error}")),
    }
}

async fn get(arguments: GetArgs, io: &mut Io<'_>) -> Result<i32, String> {
    refuse_wildcard(&arguments.api)?;
    let out = default_out(arguments.out, "table");
    check_out(
        &out,
        arguments.template.as_deref(),
        &OUT_FORMATS,
        INVALID_OUT,
    )?;
    let answer = client(&arguments.api)?
        .call_json("GET", &var_path(&arguments.path), None)
        .await;
    let variable: Variable = match answer {
        Ok(value) => serde_json::from_value(value.unwrap_or(Value::Null))
            .map_err(|error| format!("Error retrieving variable: {error}"))?,
        Err(error) if error.status() == Some(404) => {
            io.error("Variable not found");
            return Ok(1);
        }
        Err(error) => return Err(format!("Error retrieving variable: {error}")),
    };
    if let Some(item) = &arguments.item {
        return match variable.items.get(item) {
            Some(value) => {
                let _ = write!(io.out, "{value}");
                Ok(0)
            }
            None => Err(format!("Variable does not contain {item:?} item")),
        };
    }
    match out.as_str() {
        "json" => io.say(variable_json(&variable)),
        "hcl" => io.say(variable_hcl(&variable)),
        "table" => io.say(variable_table(&variable)),
        "go-template" => io.say(go_template(
            arguments.template.as_deref().unwrap_or_default(),
            &variable,
        )?),
        _ => {}
    }
    Ok(0)
}

/// Reads `key=value` arguments as Nomad's `KVBuilder`.
fn parse_items(args: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut items = BTreeMap::new();
    let mut stdin_used = false;
    let mut read_stdin = || -> Result<String, String> {
        if stdin_used {
            return Err("stdin already consumed".to_owned());
        }
        stdin_used = true;
        std::io::read_to_string(std::io::stdin()).map_err(|error| error.to_string())
    };
    for raw in args {
        if raw.is_empty() {
            continue;
        }
        let invalid = |reason: &str| format!("invalid key/value pair {raw:?}: {reason}");
        let Some((key, value)) = raw.split_once('=') else {
            return Err(invalid("format must be key=value"));
        };
        let value = if let Some(file) = value.strip_prefix('@') {
            std::fs::read_to_string(file)
                .map_err(|error| invalid(&format!("error reading file: {error}")))?
        } else if let Some(literal) = value.strip_prefix('\\').filter(|v| v.starts_with('@')) {
            literal.to_owned()
        } else if value == "-" {
            read_stdin().map_err(|reason| invalid(&reason))?
        } else {
            value.to_owned()
        };
        items.insert(key.to_owned(), value);
    }
    Ok(items)
}

async fn put(arguments: PutArgs, io: &mut Io<'_>) -> Result<i32, String> {
    let check_index = parse_check_index(arguments.check_index.as_deref())?;
    refuse_wildcard(&arguments.api)?;
    let out = default_out(arguments.out, "none");
    check_out(
        &out,
        arguments.template.as_deref(),
        &OUT_FORMATS,
        INVALID_OUT,
    )?;
    let mut input_format = arguments.input_format.clone();
    if !["hcl", "json"].contains(&input_format.as_str()) {
        return Err("Invalid value for \"-in\"; valid values are [hcl, json]".to_owned());
    }
    let mut args = arguments.args.as_slice();
    let spec_ref = |arg: &str| arg == "-" || (arg.starts_with('@') && !arg.starts_with("\\@"));
    let mut path = String::new();
    let mut spec: Option<String> = None;
    // A file's format comes from its extension, as Nomad's `setParserForFileArg`.
    let mut read_spec = |arg: &str| -> Result<String, String> {
        if arg == "-" {
            return std::io::read_to_string(std::io::stdin())
                .map_err(|error| format!("Error reading from stdin: {error}"));
        }
        let file = &arg[1..];
        input_format = match std::path::Path::new(file)
            .extension()
            .and_then(|extension| extension.to_str())
        {
            Some("json") => "json".to_owned(),
            Some("hcl") => "hcl".to_owned(),
            _ => {
                return Err(format!(
                    "Unable to determine format of {file}; Use the -in flag to specify it."
                ));
            }
        };
        std::fs::read_to_string(file).map_err(|error| format!("Error reading {file:?}: {error}"))
    };
    match args {
        [only] if !spec_ref(only) => return Err("Must supply data".to_owned()),
        [first, ..] if spec_ref(first) => {
            spec = Some(read_spec(first)?);
            args = &args[1..];
        }
        [first, rest @ ..] => {
            path = sanitize_path(first);
            args = rest;
            if let Some(next) = args.first().filter(|next| spec_ref(next)) {
                spec = Some(read_spec(next)?);
                args = &args[1..];
            }
        }
        [] => return Err("Not enough arguments (expected >1, got 0)".to_owned()),
    }
    let mut variable = match spec {
        None => Variable {
            path: path.clone(),
            namespace: namespace_flag(&arguments.api).unwrap_or_default(),
            ..Variable::default()
        },
        Some(text) => {
            let mut parsed: Variable = if input_format == "hcl" {
                variable_from_hcl(&text).map_err(|error| {
                    format!("Failed to parse variable data: error parsing hcl: {error}")
                })?
            } else {
                serde_json::from_str(&text).map_err(|error| {
                    format!("Failed to parse variable data: error unmarshaling json: {error}")
                })?
            };
            let mut reset = false;
            if let Some(namespace) = namespace_flag(&arguments.api)
                && namespace != parsed.namespace
            {
                parsed.namespace = namespace;
                reset = true;
            }
            if !path.is_empty() && path != parsed.path {
                parsed.path = path.clone();
                reset = true;
            }
            if reset {
                parsed.create_index = 0;
                parsed.create_time = 0;
                parsed.modify_index = 0;
                parsed.modify_time = 0;
            }
            parsed
        }
    };
    let data = parse_items(args).map_err(|error| format!("Failed to parse K=V data: {error}"))?;
    for (key, value) in data {
        if value.is_empty() {
            if variable.items.remove(&key).is_some() && arguments.verbose {
                io.error(format!("Removed item {key:?}"));
            }
            continue;
        }
        variable.items.insert(key, value);
    }
    if let Some(index) = check_index {
        variable.modify_index = index;
    }
    let query = if arguments.force {
        Vec::new()
    } else {
        vec![("cas", variable.modify_index.to_string())]
    };
    let body = serde_json::to_value(&variable).map_err(|error| error.to_string())?;
    let answer = client(&arguments.api)?
        .call_json_query("PUT", &var_path(&variable.path), &query, Some(body))
        .await;
    let written: Variable = match answer {
        Ok(value) => serde_json::from_value(value.unwrap_or(Value::Null))
            .map_err(|error| format!("Error creating variable: {error}"))?,
        Err(error) => {
            if let Some(conflict) = conflict_of(&error) {
                say_cas_conflict(io, variable.modify_index, &conflict);
                return Ok(1);
            }
            return Err(format!("Error creating variable: {error}"));
        }
    };
    let created = format!(
        "Created variable {:?} with modify index {}",
        written.path, written.modify_index
    );
    match out.as_str() {
        "json" => io.say(variable_json(&written)),
        "hcl" => io.say(variable_hcl(&written)),
        "table" => io.say(variable_table(&written)),
        "go-template" => io.say(go_template(
            arguments.template.as_deref().unwrap_or_default(),
            &written,
        )?),
        _ => {
            io.say(created);
            return Ok(0);
        }
    }
    if arguments.verbose {
        io.error(created);
    }
    Ok(0)
}

async fn list(arguments: ListArgs, io: &mut Io<'_>) -> Result<i32, String> {
    let out = default_out(arguments.out, "table");
    check_out(
        &out,
        arguments.template.as_deref(),
        &["go-template", "json", "table", "terse"],
        "Invalid value for \"-out\"; valid values are [go-template, json, table, terse]",
    )?;
    if !arguments.filter.is_empty() {
        io.error(
            "Filter queries require a full scan of the data; use prefix searching where possible",
        );
    }
    let prefix = arguments.prefix.clone().unwrap_or_default();
    let mut query = vec![("prefix", prefix)];
    if arguments.per_page != 0 {
        query.push(("per_page", arguments.per_page.to_string()));
    }
    if !arguments.page_token.is_empty() {
        query.push(("next_token", arguments.page_token.clone()));
    }
    if !arguments.filter.is_empty() {
        query.push(("filter", arguments.filter.clone()));
    }
    let (answer, meta) = client(&arguments.api)?
        .call_json_with_meta("GET", "/v1/vars", &query)
        .await
        .map_err(|error| format!("Error retrieving vars: {error}"))?;
    let mut variables: Vec<VariableMetadata> =
        serde_json::from_value(answer.unwrap_or(Value::Array(Vec::new())))
            .map_err(|error| format!("Error retrieving vars: {error}"))?;
    match out.as_str() {
        "json" => {
            // A paged answer carries its query metadata, as Nomad's `var list -out json`.
            let shown = if arguments.per_page > 0 {
                serde_json::json!({
                    "Data": variables,
                    "QueryMeta": {
                        "LastIndex": meta.last_index,
                        "LastContact": 0,
                        "KnownLeader": meta.known_leader,
                        "RequestTime": meta.request_time_nanos,
                        "NextToken": meta.next_token,
                    },
                })
            } else {
                serde_json::to_value(&variables).unwrap_or_default()
            };
            io.say(serde_json::to_string_pretty(&shown).unwrap_or_default());
            return Ok(0);
        }
        "go-template" => io.say(go_template(
            arguments.template.as_deref().unwrap_or_default(),
            &variables,
        )?),
        "terse" => {
            let wildcard = namespace_flag(&arguments.api).as_deref() == Some("*");
            let rows: Vec<Vec<String>> = variables
                .iter()
                .map(|variable| {
                    if wildcard {
                        vec![variable.namespace.clone(), variable.path.clone()]
                    } else {
                        vec![variable.path.clone()]
                    }
                })
                .collect();
            io.say(columnize::columns(&rows));
        }
        _ => {
            if variables.is_empty() {
                io.say("No matching variables found");
            } else {
                variables.sort_by(|a, b| (&a.namespace, &a.path).cmp(&(&b.namespace, &b.path)));
                let mut rows = vec![vec![
                    "Namespace".to_owned(),
                    "Path".to_owned(),
                    "Last Updated".to_owned(),
                ]];
                rows.extend(variables.iter().map(|variable| {
                    vec![
                        variable.namespace.clone(),
                        variable.path.clone(),
                        format_time(variable.modify_time),
                    ]
                }));
                io.say(columnize::columns(&rows));
            }
        }
    }
    if !meta.next_token.is_empty() {
        io.error(format!("Next page token: {}", meta.next_token));
    }
    Ok(0)
}

async fn purge(arguments: PurgeArgs, io: &mut Io<'_>) -> Result<i32, String> {
    let check_index = match arguments.check_index.as_deref() {
        None | Some("") => None,
        Some(text) => Some(text.parse::<u64>().map_err(|error| {
            if matches!(error.kind(), std::num::IntErrorKind::PosOverflow) {
                format!("Invalid -check-index value {text:?}: out of range for uint64")
            } else {
                format!("Invalid -check-index value {text:?}: not parsable as uint64")
            }
        })?),
    };
    refuse_wildcard(&arguments.api)?;
    let query: Vec<(&str, String)> = check_index
        .map(|index| vec![("cas", index.to_string())])
        .unwrap_or_default();
    match client(&arguments.api)?
        .call_json_query("DELETE", &var_path(&arguments.path), &query, None)
        .await
    {
        Ok(_) => {
            io.say(format!(
                "Successfully purged variable {:?}!",
                arguments.path
            ));
            Ok(0)
        }
        Err(error) => {
            if let Some(conflict) = conflict_of(&error) {
                say_cas_conflict(io, check_index.unwrap_or_default(), &conflict);
                return Ok(1);
            }
            Err(format!("Error purging variable: {error}"))
        }
    }
}

/// What a lock call answered.
enum LockAnswer {
    Done(Option<Value>),
    Conflict,
}

async fn lock_call(
    client: &ApiClient,
    path: &str,
    operation: &str,
    body: Value,
) -> Result<LockAnswer, String> {
    match client
        .call_json_query(
            "PUT",
            &var_path(path),
            &[(operation, String::new())],
            Some(body),
        )
        .await
    {
        Ok(answer) => Ok(LockAnswer::Done(answer)),
        Err(error) if error.status() == Some(409) => Ok(LockAnswer::Conflict),
        Err(error) => Err(error.to_string()),
    }
}

fn parse_duration_flag(text: &str, what: &str) -> Result<DurationNs, String> {
    DurationNs::parse_go(text).map_err(|error| format!("Invalid {what}: {error}"))
}

fn std_duration(duration: DurationNs, factor: f64) -> Duration {
    Duration::from_secs_f64(duration.0.max(0) as f64 / 1e9 * factor)
}

async fn lock(arguments: LockArgs, io: &mut Io<'_>) -> Result<i32, String> {
    refuse_wildcard(&arguments.api)?;
    let (path, command) = match arguments.args.split_first() {
        Some((path, command)) if !command.is_empty() => (sanitize_path(path), command.to_vec()),
        _ => {
            return Err(format!(
                "Not enough arguments (expected >2, got {})",
                arguments.args.len()
            ));
        }
    };
    let verbose = |io: &mut Io<'_>, message: &str| {
        if arguments.verbose {
            io.error(message);
        }
    };
    let mut lock = VariableLock {
        ttl: DEFAULT_LOCK_TTL,
        lock_delay: DEFAULT_LOCK_DELAY,
        ..VariableLock::default()
    };
    if let Some(ttl) = &arguments.ttl {
        lock.ttl = parse_duration_flag(ttl, "TTL")?;
    }
    if let Some(delay) = &arguments.delay {
        lock.lock_delay = parse_duration_flag(delay, "Lock Delay")?;
    }
    let wait_period = match &arguments.backoff {
        Some(backoff) => std_duration(parse_duration_flag(backoff, "backoff")?, 1.0),
        None => std_duration(lock.ttl, 1.1),
    };
    let renewal_period = std_duration(lock.ttl, 0.7);
    let client = client(&arguments.api)?;
    let variable = Variable {
        path: path.clone(),
        namespace: namespace_flag(&arguments.api).unwrap_or_default(),
        lock: Some(lock),
        ..Variable::default()
    };
    let body = serde_json::to_value(&variable).map_err(|error| error.to_string())?;
    // A random start among instances started together, as Nomad's lock leaser.
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos() % 100);
    tokio::time::sleep(Duration::from_millis(u64::from(jitter))).await;
    verbose(io, "Attempting to acquire lock");
    let held: Variable = loop {
        match lock_call(&client, &path, "lock-acquire", body.clone())
            .await
            .map_err(|error| format!("Lock error:locks: {error}"))?
        {
            LockAnswer::Done(answer) => {
                break serde_json::from_value(answer.unwrap_or(Value::Null))
                    .map_err(|error| format!("Lock error:locks: {error}"))?;
            }
            LockAnswer::Conflict if arguments.early_return => return Ok(0),
            LockAnswer::Conflict => tokio::time::sleep(wait_period).await,
        }
    };
    let lock_id = held
        .lock
        .as_ref()
        .map(|lock| lock.id.clone())
        .unwrap_or_default();
    let holder = serde_json::json!({"Path": path, "Lock": {"ID": lock_id}});
    verbose(
        io,
        &format!("Variable locked, ready to execute: {}", command.join(" ")),
    );
    let mut child = if arguments.shell {
        tokio::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(command.join(" "))
            .spawn()
    } else {
        tokio::process::Command::new(&command[0])
            .args(&command[1..])
            .spawn()
    }
    .map_err(|error| format!("Lock error:locks: error executing protected function {error}"))?;
    let mut renew =
        tokio::time::interval_at(tokio::time::Instant::now() + renewal_period, renewal_period);
    let outcome: Result<(), String> = loop {
        tokio::select! {
            status = child.wait() => {
                break match status {
                    Ok(status) if status.success() => Ok(()),
                    Ok(status) => Err(format!(
                        "locks: error executing protected function {}",
                        go_exit_status(&status)
                    )),
                    Err(error) => Err(format!("locks: error executing protected function {error}")),
                };
            }
            _ = renew.tick() => {
                match lock_call(&client, &path, "lock-renew", holder.clone()).await {
                    Ok(LockAnswer::Done(_)) => {}
                    Ok(LockAnswer::Conflict) => {
                        let _ = child.kill().await;
                        break Err("locks: the lock was lost".to_owned());
                    }
                    Err(error) => {
                        let _ = child.kill().await;
                        break Err(format!("locks: error renewing the lease: {error}"));
                    }
                }
            }
        }
    };
    verbose(io, "Releasing the lock");
    let released = lock_call(&client, &path, "lock-release", holder).await;
    let mut errors = Vec::new();
    if let Err(error) = outcome {
        errors.push(error);
    }
    match released {
        Ok(LockAnswer::Done(_)) => {}
        Ok(LockAnswer::Conflict) => {
            errors.push("lock release: release conflict conflicting operation over lock".into());
        }
        Err(error) => errors.push(format!("lock release: {error}")),
    }
    if errors.is_empty() {
        Ok(0)
    } else {
        Err(format!("Lock error:{}", errors.join("\n")))
    }
}

/// Go's `exec.ExitError` text: `exit status N` or `signal: killed`.
fn go_exit_status(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("signal: {signal}"),
        _ => "exit status unknown".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_from_arguments_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        std::fs::write(&file, "from-file").unwrap();
        let items = parse_items(&[
            "user=app".to_owned(),
            format!("password=@{}", file.display()),
            "literal=\\@at".to_owned(),
            "gone=".to_owned(),
        ])
        .unwrap();
        assert_eq!(items["user"], "app");
        assert_eq!(items["password"], "from-file");
        assert_eq!(items["literal"], "@at");
        assert_eq!(items["gone"], "");
        assert!(parse_items(&["novalue".to_owned()]).is_err());
    }

    #[test]
    fn an_hcl_specification_reads_as_nomads_var_put_reads_it() {
        let variable = variable_from_hcl(
            r#"
namespace    = "prod"
path         = "app/db"
modify_index = 7
items {
  user = "app"
  port = 5432
  tls  = true
}
"#,
        )
        .unwrap();
        assert_eq!(variable.namespace, "prod");
        assert_eq!(variable.path, "app/db");
        assert_eq!(variable.modify_index, 7);
        assert_eq!(variable.items["user"], "app");
        assert_eq!(variable.items["port"], "5432");
        assert_eq!(variable.items["tls"], "1");
        // What `var get -out hcl` prints reads back as the same variable.
        let round = variable_from_hcl(&variable_hcl(&variable)).unwrap();
        assert_eq!(round.items, variable.items);
        assert_eq!(round.path, variable.path);
        let unknown = variable_from_hcl("path = \"a\"\nowner = \"me\"\n").unwrap_err();
        assert!(unknown.contains("invalid key: owner"), "{unknown}");
        let index = variable_from_hcl("modify_index = \"seven\"\n").unwrap_err();
        assert!(index.contains("modify_index must be integer"), "{index}");
        assert!(variable_from_hcl("items {").is_err());
    }

    #[test]
    fn hcl_output_aligns_keys_as_nomad() {
        let variable = Variable {
            namespace: "default".to_owned(),
            path: "app/db".to_owned(),
            create_index: 5,
            modify_index: 6,
            create_time: 1,
            modify_time: 2,
            items: BTreeMap::from([
                ("a".to_owned(), "1".to_owned()),
                ("long".to_owned(), "two".to_owned()),
            ]),
            ..Variable::default()
        };
        assert_eq!(
            variable_hcl(&variable),
            "\nnamespace    = \"default\"\npath         = \"app/db\"\ncreate_index = 5  # Set by server\nmodify_index = 6  # Set by server; consulted for check-and-set\ncreate_time  = 1   # Set by server\nmodify_time  = 2   # Set by server\n\nitems = {\n     a = \"1\"\n  long = \"two\"\n}\n"
        );
    }

    #[test]
    fn a_conflict_is_explained_as_nomad() {
        assert_eq!(
            wrap("aa bb cc", 5),
            vec!["aa bb".to_owned(), "cc".to_owned()]
        );
    }
}
