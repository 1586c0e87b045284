//! The functions a task template may call, with consul-template's argument order (the piped
//! value comes last: `{{ .x | split "," }}` is `split "," .x`) and its results.
//!
//! The engine's functions are plain `fn` pointers, so the two that need the task — `env` and
//! `file` — read the [`RenderScope`] that [`super::render`] installs on the rendering thread for
//! the length of one synchronous render.
//!
//! `nomadVar`, `nomadVarExists`, `nomadVarList` and `nomadVarListSafe` answer from the scope's
//! [`VariableCache`], which the template hook fills from the servers with the task's identity:
//! a path or prefix the cache has not fetched yet is recorded as wanted (the hook fetches it
//! and renders again), and `nomadVar` of a variable that does not exist fails the render
//! (the hook waits for it, as Nomad's template blocks on it).
//!
//! `nomadService` and `nomadServices` answer from the same cache, filled from the servers'
//! built-in service catalog with the task's identity: `nomadService "[tag.]name[?ns=ns]"`
//! (and `nomadService <count> "<key>" "<query>"`, the catalog's `choose`) lists the
//! registrations of a service (none yet: an empty list, as consul-template), `nomadServices
//! ["?ns=ns"]` the service names with their tags. A query naming a region (`@region`) fails:
//! drover reads its own region's catalog only.
//!
//! **Not** here: data sources drover lacks: Consul's and Vault's functions are refused by name.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;

use base64::Engine as _;
use drover_template::{Func, FuncError, Value};
use md5::Digest as _;

/// What `env` and `file` see during one render.
#[derive(Debug, Clone, Default)]
pub struct RenderScope {
    /// The task's environment.
    pub env: BTreeMap<String, String>,
    /// The task dir; `file` reads beneath it.
    pub task_dir: PathBuf,
    /// Relative paths `file` read (for the watch loop).
    pub files_read: Vec<String>,
    /// Nomad Variables for `nomadVar*`.
    pub variables: VariableCache,
}

/// One `nomadService` query, as sent to the servers (the tag filters what they answer).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServiceQuery {
    pub name: String,
    /// `?ns=`: a namespace other than the task's.
    pub namespace: Option<String>,
    /// `<count>|<key>`: the catalog's rendezvous choice.
    pub choose: Option<String>,
}

/// Nomad Variables and services as a render sees them: what was fetched, and what it still
/// wants.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VariableCache {
    /// Fetched `nomadService` queries.
    pub services: BTreeMap<ServiceQuery, Vec<drover_structs::ServiceRegistration>>,
    /// Fetched `nomadServices` listings by namespace (`None`: the task's).
    pub service_lists:
        BTreeMap<Option<String>, Vec<drover_structs::service_catalog::ServiceRegistrationListStub>>,
    /// Service queries a render asked for that were not fetched.
    pub wanted_services: std::collections::BTreeSet<ServiceQuery>,
    /// Service listings a render asked for that were not fetched.
    pub wanted_service_lists: std::collections::BTreeSet<Option<String>>,
    /// Fetched variables by path (`None`: there is none).
    pub reads: BTreeMap<String, Option<drover_structs::Variable>>,
    /// Fetched listings by prefix.
    pub lists: BTreeMap<String, Vec<drover_structs::VariableMetadata>>,
    /// Paths a render asked for that were not fetched.
    pub wanted_reads: std::collections::BTreeSet<String>,
    /// Prefixes a render asked for that were not fetched.
    pub wanted_lists: std::collections::BTreeSet<String>,
    /// Paths `nomadVar` wanted that do not exist.
    pub absent: std::collections::BTreeSet<String>,
    /// Whether the render called any `nomadVar*` function.
    pub used: bool,
}

fn with_variables<T>(action: impl FnOnce(&mut VariableCache) -> T) -> Option<T> {
    SCOPE.with(|cell| {
        cell.borrow_mut()
            .as_mut()
            .map(|scope| action(&mut scope.variables))
    })
}

thread_local! {
    static SCOPE: RefCell<Option<RenderScope>> = const { RefCell::new(None) };
}

/// Runs `action` with `scope` installed on this thread and hands the scope back.
pub fn with_scope<T>(scope: RenderScope, action: impl FnOnce() -> T) -> (T, RenderScope) {
    SCOPE.with(|cell| *cell.borrow_mut() = Some(scope));
    let result = action();
    let scope = SCOPE
        .with(|cell| cell.borrow_mut().take())
        .unwrap_or_default();
    (result, scope)
}

/// Longest output a function may build (`loop`, `indent`, `repeat`…), so a template cannot
/// exhaust memory through one call.
const MAX_FUNCTION_OUTPUT: usize = 16 * 1024 * 1024;

/// Every function a task template may call, by name.
pub fn all() -> Vec<(&'static str, Func)> {
    let mut functions: Vec<(&'static str, Func)> = vec![
        ("env", env),
        ("file", file),
        ("base64Encode", base64_encode),
        ("base64Decode", base64_decode),
        ("base64URLEncode", base64_url_encode),
        ("base64URLDecode", base64_url_decode),
        ("toJSON", to_json),
        ("toJSONPretty", to_json_pretty),
        ("toYAML", to_yaml),
        ("parseJSON", parse_json),
        ("parseInt", parse_int),
        ("parseBool", parse_bool),
        ("parseFloat", parse_float),
        ("split", split),
        ("join", join),
        ("replaceAll", replace_all),
        ("regexReplaceAll", regex_replace_all),
        ("regexMatch", regex_match),
        ("trimSpace", trim_space),
        ("toLower", to_lower),
        ("toUpper", to_upper),
        ("toTitle", to_title),
        ("contains", contains),
        ("containsAny", contains_any),
        ("containsAll", contains_all),
        ("containsNone", contains_none),
        ("containsNotAll", contains_not_all),
        ("timestamp", timestamp),
        ("loop", loop_range),
        ("add", add),
        ("subtract", subtract),
        ("multiply", multiply),
        ("divide", divide),
        ("modulo", modulo),
        ("indent", indent),
        ("sha256Hex", sha256_hex),
        ("md5sum", md5sum),
        ("sprig_upper", to_upper),
        ("sprig_lower", to_lower),
        ("sprig_trim", trim_space),
        ("sprig_title", to_title),
        ("sprig_repeat", sprig_repeat),
        ("sprig_default", sprig_default),
        ("sprig_quote", sprig_quote),
        ("sprig_squote", sprig_squote),
        ("sprig_trimPrefix", sprig_trim_prefix),
        ("sprig_trimSuffix", sprig_trim_suffix),
        ("sprig_hasPrefix", sprig_has_prefix),
        ("sprig_hasSuffix", sprig_has_suffix),
        ("sprig_list", sprig_list),
        ("sprig_b64enc", base64_encode),
        ("sprig_b64dec", base64_decode),
        ("sprig_sha256sum", sha256_hex),
        ("nomadVar", nomad_var),
        ("nomadVarList", nomad_var_list),
        ("nomadVarListSafe", nomad_var_list),
        ("nomadVarExists", nomad_var_exists),
        ("nomadService", nomad_service),
        ("nomadServices", nomad_services),
    ];
    for name in CONSUL_FUNCTIONS {
        functions.push((name, needs_consul));
    }
    for name in VAULT_FUNCTIONS {
        functions.push((name, needs_vault));
    }
    functions
}

/// consul-template's functions that read Consul.
pub const CONSUL_FUNCTIONS: [&str; 9] = [
    "key",
    "keyExists",
    "keyOrDefault",
    "ls",
    "safeLs",
    "tree",
    "safeTree",
    "service",
    "services",
];

/// consul-template's functions that read Vault.
pub const VAULT_FUNCTIONS: [&str; 2] = ["secret", "secrets"];

fn generic(message: impl Into<String>) -> FuncError {
    FuncError::new(message)
}

fn variable_path_argument(name: &str, args: &[Value]) -> Result<String, FuncError> {
    match args {
        [Value::String(path)] => Ok(path.trim_matches('/').to_owned()),
        [] if name == "nomadVarList" => Ok(String::new()),
        _ => Err(generic(format!("{name}: expects one path argument"))),
    }
}

fn nomad_var(args: &[Value]) -> Result<Value, FuncError> {
    let path = variable_path_argument("nomadVar", args)?;
    let found = with_variables(|cache| {
        cache.used = true;
        match cache.reads.get(&path) {
            Some(Some(variable)) => Ok(Some(variable.items.clone())),
            Some(None) => {
                cache.absent.insert(path.clone());
                Err(generic(format!(
                    "nomadVar: variable {path:?} does not exist"
                )))
            }
            None => {
                cache.wanted_reads.insert(path.clone());
                Ok(None)
            }
        }
    })
    .unwrap_or_else(|| Err(generic("nomadVar: no variables in this render")))?;
    Ok(Value::Map(
        found
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| (key, Value::String(value)))
            .collect::<BTreeMap<_, _>>(),
    ))
}

fn nomad_var_exists(args: &[Value]) -> Result<Value, FuncError> {
    let path = variable_path_argument("nomadVarExists", args)?;
    with_variables(|cache| {
        cache.used = true;
        match cache.reads.get(&path) {
            Some(found) => Value::Bool(found.is_some()),
            None => {
                cache.wanted_reads.insert(path.clone());
                Value::Bool(false)
            }
        }
    })
    .ok_or_else(|| generic("nomadVarExists: no variables in this render"))
}

fn nomad_var_list(args: &[Value]) -> Result<Value, FuncError> {
    let prefix = variable_path_argument("nomadVarList", args)?;
    with_variables(|cache| {
        cache.used = true;
        match cache.lists.get(&prefix) {
            Some(listed) => Value::List(
                listed
                    .iter()
                    .map(|meta| json_to_value(&serde_json::to_value(meta).unwrap_or_default()))
                    .collect(),
            ),
            None => {
                cache.wanted_lists.insert(prefix.clone());
                Value::List(Vec::new())
            }
        }
    })
    .ok_or_else(|| generic("nomadVarList: no variables in this render"))
}

/// `[tag.]name[?ns=namespace][@region]`, consul-template's `nomadService` query.
fn parse_service_query(query: &str) -> Result<(Option<String>, ServiceQuery), FuncError> {
    static PATTERN: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"\A(?:(?P<tag>[\w=:.\-]+)\.)?(?P<name>[\w\-]+)(?:\?ns=(?P<namespace>[\w\-]+))?(?:@(?P<region>[\w.\-]+))?\z",
        )
        .ok()
    });
    let captures = PATTERN
        .as_ref()
        .and_then(|pattern| pattern.captures(query))
        .ok_or_else(|| generic(format!("nomad.service: invalid format: {query:?}")))?;
    if let Some(region) = captures.name("region") {
        return Err(generic(format!(
            "nomad.service: {query:?} names region {:?}; drover reads the catalog of its own region only",
            region.as_str()
        )));
    }
    let part = |name: &str| captures.name(name).map(|found| found.as_str().to_string());
    Ok((
        part("tag"),
        ServiceQuery {
            name: part("name").unwrap_or_default(),
            namespace: part("namespace"),
            choose: None,
        },
    ))
}

fn nomad_service(args: &[Value]) -> Result<Value, FuncError> {
    let (tag, query) = match args {
        [query] => parse_service_query(&string_arg("nomadService", query)?)?,
        [count, key, query] => {
            let count = int_arg("nomadService", count)?;
            let key = string_arg("nomadService", key)?;
            let (tag, mut query) = parse_service_query(&string_arg("nomadService", query)?)?;
            query.choose = Some(format!("{count}|{key}"));
            (tag, query)
        }
        _ => {
            return Err(generic(format!(
                "nomadService: expected 1 or 3 arguments, got {}",
                args.len()
            )));
        }
    };
    with_variables(|cache| {
        cache.used = true;
        let Some(found) = cache.services.get(&query) else {
            cache.wanted_services.insert(query.clone());
            return Value::List(Vec::new());
        };
        let mut services: Vec<&drover_structs::ServiceRegistration> = found
            .iter()
            .filter(|service| tag.as_ref().is_none_or(|tag| service.tags.contains(tag)))
            .collect();
        services.sort_by(|one, two| one.service_name.cmp(&two.service_name));
        Value::List(
            services
                .into_iter()
                .map(|service| {
                    let mut tags = service.tags.clone();
                    tags.sort();
                    json_to_value(&serde_json::json!({
                        "ID": service.id,
                        "Name": service.service_name,
                        "Namespace": service.namespace,
                        "Node": service.node_id,
                        "Address": service.address,
                        "Port": service.port,
                        "Datacenter": service.datacenter,
                        "Tags": tags,
                        "JobID": service.job_id,
                        "AllocID": service.alloc_id,
                    }))
                })
                .collect(),
        )
    })
    .ok_or_else(|| generic("nomadService: no services in this render"))
}

fn nomad_services(args: &[Value]) -> Result<Value, FuncError> {
    let namespace = match args {
        [] => None,
        [query] => {
            let query = string_arg("nomadServices", query)?;
            let namespace = query.strip_prefix("?ns=").filter(|namespace| {
                !namespace.is_empty()
                    && namespace
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
            });
            match namespace {
                Some(namespace) => Some(namespace.to_string()),
                None if query.contains('@') => {
                    return Err(generic(format!(
                        "nomad.services: {query:?} names a region; drover reads the catalog of its own region only"
                    )));
                }
                None => {
                    return Err(generic(format!(
                        "nomad.services: invalid format: {query:?}"
                    )));
                }
            }
        }
        _ => {
            return Err(generic(format!(
                "nomadServices: expected 0 or 1 arguments, got {}",
                args.len()
            )));
        }
    };
    with_variables(|cache| {
        cache.used = true;
        let Some(listed) = cache.service_lists.get(&namespace) else {
            cache.wanted_service_lists.insert(namespace.clone());
            return Value::List(Vec::new());
        };
        let mut snippets: Vec<serde_json::Value> = listed
            .iter()
            .flat_map(|stub| {
                stub.services.iter().map(|service| {
                    let mut tags = service.tags.clone();
                    tags.sort();
                    serde_json::json!({
                        "Name": service.service_name,
                        "Namespace": stub.namespace,
                        "Tags": tags,
                    })
                })
            })
            .collect();
        snippets.sort_by(|one, two| one["Name"].as_str().cmp(&two["Name"].as_str()));
        Value::List(snippets.iter().map(json_to_value).collect())
    })
    .ok_or_else(|| generic("nomadServices: no services in this render"))
}

fn needs_consul(_: &[Value]) -> Result<Value, FuncError> {
    Err(generic(
        "this function needs Consul, which drover does not use",
    ))
}

fn needs_vault(_: &[Value]) -> Result<Value, FuncError> {
    Err(generic(
        "this function needs Vault, which drover does not use",
    ))
}

fn exactly<'a, const N: usize>(name: &str, args: &'a [Value]) -> Result<&'a [Value; N], FuncError> {
    <&[Value; N]>::try_from(args).map_err(|_| {
        generic(format!(
            "wrong number of args for {name}: want {N} got {}",
            args.len()
        ))
    })
}

/// A value as text, as Go's `fmt` prints it for strings and numbers.
fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Missing | Value::Nil => String::new(),
        other => other.to_string(),
    }
}

fn string_arg(name: &str, value: &Value) -> Result<String, FuncError> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Int(number) => Ok(number.to_string()),
        Value::Float(number) => Ok(Value::Float(*number).to_string()),
        Value::Bool(flag) => Ok(flag.to_string()),
        other => Err(generic(format!("{name}: expected a string, got {other}"))),
    }
}

fn int_arg(name: &str, value: &Value) -> Result<i64, FuncError> {
    match value {
        Value::Int(number) => Ok(*number),
        Value::Float(number) => Ok(*number as i64),
        Value::String(text) => text
            .trim()
            .parse()
            .map_err(|_| generic(format!("{name}: {text:?} is not an integer"))),
        other => Err(generic(format!("{name}: expected a number, got {other}"))),
    }
}

fn env(args: &[Value]) -> Result<Value, FuncError> {
    let [key] = exactly::<1>("env", args)?;
    let key = string_arg("env", key)?;
    let value = SCOPE.with(|cell| {
        cell.borrow()
            .as_ref()
            .and_then(|scope| scope.env.get(&key).cloned())
    });
    Ok(Value::String(value.unwrap_or_default()))
}

fn file(args: &[Value]) -> Result<Value, FuncError> {
    let [path] = exactly::<1>("file", args)?;
    let path = string_arg("file", path)?;
    let task_dir = SCOPE.with(|cell| cell.borrow().as_ref().map(|scope| scope.task_dir.clone()));
    let task_dir = task_dir.ok_or_else(|| generic("file: no task dir"))?;
    let contents = super::beneath::read_to_string(&task_dir, &path)
        .map_err(|error| generic(format!("file: {error}")))?;
    SCOPE.with(|cell| {
        if let Some(scope) = cell.borrow_mut().as_mut() {
            scope.files_read.push(path);
        }
    });
    Ok(Value::String(contents))
}

fn base64_encode(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("base64Encode", args)?;
    Ok(Value::String(
        base64::engine::general_purpose::STANDARD.encode(text(input)),
    ))
}

fn decode_with(
    name: &str,
    engine: &base64::engine::GeneralPurpose,
    args: &[Value],
) -> Result<Value, FuncError> {
    let [input] = exactly::<1>(name, args)?;
    let bytes = engine
        .decode(text(input))
        .map_err(|error| generic(format!("{name}: {error}")))?;
    String::from_utf8(bytes)
        .map(Value::String)
        .map_err(|_| generic(format!("{name}: decoded bytes are not UTF-8")))
}

fn base64_decode(args: &[Value]) -> Result<Value, FuncError> {
    decode_with(
        "base64Decode",
        &base64::engine::general_purpose::STANDARD,
        args,
    )
}

fn base64_url_encode(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("base64URLEncode", args)?;
    Ok(Value::String(
        base64::engine::general_purpose::URL_SAFE.encode(text(input)),
    ))
}

fn base64_url_decode(args: &[Value]) -> Result<Value, FuncError> {
    decode_with(
        "base64URLDecode",
        &base64::engine::general_purpose::URL_SAFE,
        args,
    )
}

/// A template value as JSON (maps with sorted keys, as Go's encoder writes them).
pub fn value_to_json(value: &Value) -> serde_json::Value {
    match value {
        Value::Missing | Value::Nil => serde_json::Value::Null,
        Value::Bool(flag) => serde_json::Value::Bool(*flag),
        Value::String(text) => serde_json::Value::String(text.clone()),
        Value::Int(number) => serde_json::Value::from(*number),
        Value::Float(number) => serde_json::Number::from_f64(*number)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Value::List(items) => serde_json::Value::Array(items.iter().map(value_to_json).collect()),
        Value::Map(map) => serde_json::Value::Object(
            map.iter()
                .map(|(key, value)| (key.clone(), value_to_json(value)))
                .collect(),
        ),
    }
}

/// JSON as a template value.
pub fn json_to_value(json: &serde_json::Value) -> Value {
    Value::from_json(json)
}

fn to_json(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("toJSON", args)?;
    serde_json::to_string(&value_to_json(input))
        .map(Value::String)
        .map_err(|error| generic(format!("toJSON: {error}")))
}

fn to_json_pretty(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("toJSONPretty", args)?;
    serde_json::to_string_pretty(&value_to_json(input))
        .map(Value::String)
        .map_err(|error| generic(format!("toJSONPretty: {error}")))
}

fn yaml_scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !matches!(
            text,
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "~"
        )
        && text.parse::<f64>().is_err();
    if plain {
        text.to_string()
    } else {
        serde_json::Value::String(text.to_string()).to_string()
    }
}

fn write_yaml(json: &serde_json::Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match json {
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (key, value) in map {
                out.push_str(&format!("{pad}{}:", yaml_scalar(key)));
                write_yaml_child(value, indent, out);
            }
        }
        serde_json::Value::Array(items) if !items.is_empty() => {
            for item in items {
                out.push_str(&format!("{pad}-"));
                write_yaml_child(item, indent, out);
            }
        }
        scalar => out.push_str(&format!("{pad}{}\n", yaml_inline(scalar))),
    }
}

fn write_yaml_child(value: &serde_json::Value, indent: usize, out: &mut String) {
    match value {
        serde_json::Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_yaml(value, indent + 2, out);
        }
        serde_json::Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_yaml(value, indent + 2, out);
        }
        scalar => out.push_str(&format!(" {}\n", yaml_inline(scalar))),
    }
}

fn yaml_inline(scalar: &serde_json::Value) -> String {
    match scalar {
        serde_json::Value::Null => "null".to_string(),
        serde_json::Value::String(text) => yaml_scalar(text),
        serde_json::Value::Object(_) => "{}".to_string(),
        serde_json::Value::Array(_) => "[]".to_string(),
        other => other.to_string(),
    }
}

fn to_yaml(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("toYAML", args)?;
    let mut out = String::new();
    write_yaml(&value_to_json(input), 0, &mut out);
    // consul-template trims the trailing newline.
    Ok(Value::String(out.trim_end_matches('\n').to_string()))
}

fn parse_json(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("parseJSON", args)?;
    let input = text(input);
    if input.trim().is_empty() {
        return Ok(Value::Map(BTreeMap::new()));
    }
    serde_json::from_str::<serde_json::Value>(&input)
        .map(|json| json_to_value(&json))
        .map_err(|error| generic(format!("parseJSON: {error}")))
}

fn parse_int(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("parseInt", args)?;
    let input = text(input);
    input
        .trim()
        .parse::<i64>()
        .map(Value::from)
        .map_err(|error| generic(format!("parseInt: {input:?}: {error}")))
}

fn parse_bool(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("parseBool", args)?;
    // Go's strconv.ParseBool.
    match text(input).as_str() {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(Value::Bool(true)),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(Value::Bool(false)),
        other => Err(generic(format!("parseBool: {other:?} is not a boolean"))),
    }
}

fn parse_float(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("parseFloat", args)?;
    let input = text(input);
    input
        .trim()
        .parse::<f64>()
        .map(Value::from)
        .map_err(|error| generic(format!("parseFloat: {input:?}: {error}")))
}

fn split(args: &[Value]) -> Result<Value, FuncError> {
    let [separator, input] = exactly::<2>("split", args)?;
    let input = text(input);
    if input.is_empty() {
        return Ok(Value::List(Vec::new()));
    }
    let separator = text(separator);
    let parts: Vec<Value> = if separator.is_empty() {
        input
            .chars()
            .map(|c| Value::String(c.to_string()))
            .collect()
    } else {
        input
            .split(separator.as_str())
            .map(|part| Value::String(part.to_string()))
            .collect()
    };
    Ok(Value::List(parts))
}

fn join(args: &[Value]) -> Result<Value, FuncError> {
    let [separator, list] = exactly::<2>("join", args)?;
    let Value::List(items) = list else {
        return Err(generic(format!("join: expected a list, got {list}")));
    };
    let items: Vec<String> = items.iter().map(text).collect();
    Ok(Value::String(items.join(&text(separator))))
}

fn replace_all(args: &[Value]) -> Result<Value, FuncError> {
    let [from, to, input] = exactly::<3>("replaceAll", args)?;
    let from = text(from);
    let input = text(input);
    if from.is_empty() {
        return Ok(Value::String(input));
    }
    Ok(Value::String(input.replace(&from, &text(to))))
}

fn compile(name: &str, pattern: &str) -> Result<regex::Regex, FuncError> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|error| generic(format!("{name}: {error}")))
}

fn regex_replace_all(args: &[Value]) -> Result<Value, FuncError> {
    let [pattern, replacement, input] = exactly::<3>("regexReplaceAll", args)?;
    let pattern = compile("regexReplaceAll", &text(pattern))?;
    // Go's `$1` expansion; `${1}` works in both.
    let input = text(input);
    let replacement = text(replacement);
    let replaced = pattern.replace_all(&input, replacement.as_str());
    Ok(Value::String(replaced.into_owned()))
}

fn regex_match(args: &[Value]) -> Result<Value, FuncError> {
    let [pattern, input] = exactly::<2>("regexMatch", args)?;
    let pattern = compile("regexMatch", &text(pattern))?;
    Ok(Value::Bool(pattern.is_match(&text(input))))
}

fn trim_space(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("trimSpace", args)?;
    Ok(Value::String(text(input).trim().to_string()))
}

fn to_lower(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("toLower", args)?;
    Ok(Value::String(text(input).to_lowercase()))
}

fn to_upper(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("toUpper", args)?;
    Ok(Value::String(text(input).to_uppercase()))
}

fn to_title(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("toTitle", args)?;
    // Go's strings.Title: the first letter of each word upper-cased, the rest unchanged.
    let mut out = String::new();
    let mut at_word_start = true;
    for c in text(input).chars() {
        if at_word_start && c.is_alphanumeric() {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        at_word_start = !(c.is_alphanumeric() || c == '_' || c == '\'');
    }
    Ok(Value::String(out))
}

/// consul-template's `in`: `list` (a list or a string) holds `needle`.
fn holds(list: &Value, needle: &Value) -> bool {
    match list {
        Value::List(items) => items.iter().any(|item| match (item, needle) {
            (Value::String(left), Value::String(right)) => left == right,
            (Value::Int(left), Value::Int(right)) => left == right,
            (Value::Float(left), Value::Float(right)) => left == right,
            (Value::Int(left), Value::Float(right)) | (Value::Float(right), Value::Int(left)) => {
                *left as f64 == *right
            }
            _ => false,
        }),
        Value::String(haystack) => match needle {
            Value::String(needle) => haystack.contains(needle.as_str()),
            _ => false,
        },
        _ => false,
    }
}

fn contains(args: &[Value]) -> Result<Value, FuncError> {
    let [needle, list] = exactly::<2>("contains", args)?;
    Ok(Value::Bool(holds(list, needle)))
}

fn needles<'a>(name: &str, value: &'a Value) -> Result<&'a [Value], FuncError> {
    match value {
        Value::List(items) => Ok(items),
        other => Err(generic(format!("{name}: expected a list, got {other}"))),
    }
}

fn contains_any(args: &[Value]) -> Result<Value, FuncError> {
    let [wanted, list] = exactly::<2>("containsAny", args)?;
    let wanted = needles("containsAny", wanted)?;
    Ok(Value::Bool(wanted.iter().any(|item| holds(list, item))))
}

fn contains_all(args: &[Value]) -> Result<Value, FuncError> {
    let [wanted, list] = exactly::<2>("containsAll", args)?;
    let wanted = needles("containsAll", wanted)?;
    Ok(Value::Bool(wanted.iter().all(|item| holds(list, item))))
}

fn contains_none(args: &[Value]) -> Result<Value, FuncError> {
    let [wanted, list] = exactly::<2>("containsNone", args)?;
    let wanted = needles("containsNone", wanted)?;
    Ok(Value::Bool(!wanted.iter().any(|item| holds(list, item))))
}

fn contains_not_all(args: &[Value]) -> Result<Value, FuncError> {
    let [wanted, list] = exactly::<2>("containsNotAll", args)?;
    let wanted = needles("containsNotAll", wanted)?;
    Ok(Value::Bool(!wanted.iter().all(|item| holds(list, item))))
}

fn timestamp(args: &[Value]) -> Result<Value, FuncError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    match args {
        [] => Ok(Value::String(rfc3339_utc(seconds))),
        [layout] => match text(layout).as_str() {
            "unix" => Ok(Value::String(seconds.to_string())),
            "2006-01-02T15:04:05Z07:00" => Ok(Value::String(rfc3339_utc(seconds))),
            other => Err(generic(format!(
                "timestamp: layout {other:?} is not supported (use \"unix\" or RFC 3339's \"2006-01-02T15:04:05Z07:00\")"
            ))),
        },
        _ => Err(generic("timestamp takes at most one argument")),
    }
}

/// `seconds` since the epoch as RFC 3339 in UTC (`2006-01-02T15:04:05Z`).
pub fn rfc3339_utc(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = drover_structs::time::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

fn loop_range(args: &[Value]) -> Result<Value, FuncError> {
    let (start, stop) = match args {
        [stop] => (0, int_arg("loop", stop)?),
        [start, stop] => (int_arg("loop", start)?, int_arg("loop", stop)?),
        _ => return Err(generic("loop takes one or two integers")),
    };
    let count = stop.saturating_sub(start).max(0);
    if count > 1_000_000 {
        return Err(generic(format!(
            "loop: {count} iterations exceed the limit of 1000000"
        )));
    }
    Ok(Value::List((start..stop).map(Value::from).collect()))
}

enum Operand {
    Integer(i64),
    Float(f64),
}

fn operand(name: &str, value: &Value) -> Result<Operand, FuncError> {
    match value {
        Value::Int(number) => Ok(Operand::Integer(*number)),
        Value::Float(number) => Ok(Operand::Float(*number)),
        other => Err(generic(format!("{name}: expected a number, got {other}"))),
    }
}

/// consul-template's arithmetic: `add b a` is `a + b`, so `{{ 5 | subtract 2 }}` is 3.
fn arithmetic(
    name: &str,
    args: &[Value],
    integer: fn(i64, i64) -> Option<i64>,
    float: fn(f64, f64) -> f64,
) -> Result<Value, FuncError> {
    let [right, left] = exactly::<2>(name, args)?;
    match (operand(name, left)?, operand(name, right)?) {
        (Operand::Integer(left), Operand::Integer(right)) => {
            integer(left, right).map(Value::from).ok_or_else(|| {
                generic(format!(
                    "{name}: {left} and {right}: overflow or division by zero"
                ))
            })
        }
        (Operand::Integer(left), Operand::Float(right)) => {
            Ok(Value::from(float(left as f64, right)))
        }
        (Operand::Float(left), Operand::Integer(right)) => {
            Ok(Value::from(float(left, right as f64)))
        }
        (Operand::Float(left), Operand::Float(right)) => Ok(Value::from(float(left, right))),
    }
}

fn add(args: &[Value]) -> Result<Value, FuncError> {
    arithmetic("add", args, i64::checked_add, |a, b| a + b)
}

fn subtract(args: &[Value]) -> Result<Value, FuncError> {
    arithmetic("subtract", args, i64::checked_sub, |a, b| a - b)
}

fn multiply(args: &[Value]) -> Result<Value, FuncError> {
    arithmetic("multiply", args, i64::checked_mul, |a, b| a * b)
}

fn divide(args: &[Value]) -> Result<Value, FuncError> {
    arithmetic("divide", args, i64::checked_div, |a, b| a / b)
}

fn modulo(args: &[Value]) -> Result<Value, FuncError> {
    let [right, left] = exactly::<2>("modulo", args)?;
    let (Operand::Integer(left), Operand::Integer(right)) =
        (operand("modulo", left)?, operand("modulo", right)?)
    else {
        return Err(generic("modulo: expected integers"));
    };
    left.checked_rem(right)
        .map(Value::from)
        .ok_or_else(|| generic("modulo: division by zero"))
}

fn indent(args: &[Value]) -> Result<Value, FuncError> {
    let [spaces, input] = exactly::<2>("indent", args)?;
    let spaces = int_arg("indent", spaces)?;
    let spaces =
        usize::try_from(spaces).map_err(|_| generic("indent value must be a positive integer"))?;
    let input = text(input);
    let lines = input.lines().count().max(1);
    if spaces.saturating_mul(lines).saturating_add(input.len()) > MAX_FUNCTION_OUTPUT {
        return Err(generic("indent: output too large"));
    }
    let prefix = " ".repeat(spaces);
    let mut out = String::with_capacity(input.len() + spaces * lines);
    let mut at_line_start = true;
    for c in input.chars() {
        if at_line_start && c != '\n' {
            out.push_str(&prefix);
        }
        out.push(c);
        at_line_start = c == '\n';
    }
    Ok(Value::String(out))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn sha256_hex(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("sha256Hex", args)?;
    Ok(Value::String(hex(&sha2::Sha256::digest(
        text(input).as_bytes(),
    ))))
}

fn md5sum(args: &[Value]) -> Result<Value, FuncError> {
    let [input] = exactly::<1>("md5sum", args)?;
    Ok(Value::String(hex(&md5::Md5::digest(
        text(input).as_bytes(),
    ))))
}

fn sprig_repeat(args: &[Value]) -> Result<Value, FuncError> {
    let [count, input] = exactly::<2>("sprig_repeat", args)?;
    let count = usize::try_from(int_arg("sprig_repeat", count)?).unwrap_or(0);
    let input = text(input);
    if count.saturating_mul(input.len()) > MAX_FUNCTION_OUTPUT {
        return Err(generic("sprig_repeat: output too large"));
    }
    Ok(Value::String(input.repeat(count)))
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Missing | Value::Nil => true,
        Value::String(text) => text.is_empty(),
        Value::List(items) => items.is_empty(),
        Value::Map(map) => map.is_empty(),
        Value::Bool(flag) => !flag,
        Value::Int(number) => *number == 0,
        Value::Float(number) => *number == 0.0,
    }
}

fn sprig_default(args: &[Value]) -> Result<Value, FuncError> {
    match args {
        [fallback] => Ok(fallback.clone()),
        [fallback, given] if is_empty(given) => Ok(fallback.clone()),
        [_, given] => Ok(given.clone()),
        _ => Err(generic(
            "wrong number of args for sprig_default: want at least 1 got 0",
        )),
    }
}

fn sprig_quote(args: &[Value]) -> Result<Value, FuncError> {
    let quoted: Vec<String> = args
        .iter()
        .map(|value| serde_json::Value::String(text(value)).to_string())
        .collect();
    Ok(Value::String(quoted.join(" ")))
}

fn sprig_squote(args: &[Value]) -> Result<Value, FuncError> {
    let quoted: Vec<String> = args
        .iter()
        .map(|value| format!("'{}'", text(value)))
        .collect();
    Ok(Value::String(quoted.join(" ")))
}

fn sprig_trim_prefix(args: &[Value]) -> Result<Value, FuncError> {
    let [prefix, input] = exactly::<2>("sprig_trimPrefix", args)?;
    let input = text(input);
    let prefix = text(prefix);
    Ok(Value::String(
        input
            .strip_prefix(prefix.as_str())
            .unwrap_or(&input)
            .to_string(),
    ))
}

fn sprig_trim_suffix(args: &[Value]) -> Result<Value, FuncError> {
    let [suffix, input] = exactly::<2>("sprig_trimSuffix", args)?;
    let input = text(input);
    let suffix = text(suffix);
    Ok(Value::String(
        input
            .strip_suffix(suffix.as_str())
            .unwrap_or(&input)
            .to_string(),
    ))
}

fn sprig_has_prefix(args: &[Value]) -> Result<Value, FuncError> {
    let [prefix, input] = exactly::<2>("sprig_hasPrefix", args)?;
    Ok(Value::Bool(text(input).starts_with(text(prefix).as_str())))
}

fn sprig_has_suffix(args: &[Value]) -> Result<Value, FuncError> {
    let [suffix, input] = exactly::<2>("sprig_hasSuffix", args)?;
    Ok(Value::Bool(text(input).ends_with(text(suffix).as_str())))
}

fn sprig_list(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::List(args.to_vec()))
}
