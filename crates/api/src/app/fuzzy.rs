//! `PUT|POST /v1/search/fuzzy`: Nomad's `Search.FuzzySearch`. The text (at least
//! [`MIN_TERM_LENGTH`] bytes) is looked for, ignoring case, anywhere in the names of jobs (and
//! their groups, services, tasks, and the `image` / `command` / `class` of docker, exec /
//! raw_exec and java tasks), allocations, nodes and namespaces; evaluations and deployments are
//! matched by ID prefix. Each context looks at its first [`LIMIT_QUERY`] objects and keeps at
//! most [`LIMIT_RESULTS`] matches, sorted by where the text was found, then by length, then
//! alphabetically; `Truncations` says where either limit cut the answer, as Nomad's default
//! `search` agent config does.
//!
//! Not here: prefix search (`search`).

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::response::Response;
use drover_structs::{Allocation, Job, Node};
use serde::{Deserialize, Serialize};

use super::respond::{Meta, decode_body, json_response};
use crate::backend::{ApiBackend, Table};
use crate::error::ApiError;
use crate::params::QueryParams;

/// Nomad's `search { limit_query }` default: objects looked at per context.
pub const LIMIT_QUERY: usize = 20;
/// Nomad's `search { limit_results }` default: matches kept per context.
pub const LIMIT_RESULTS: usize = 100;
/// Nomad's `search { min_term_length }` default.
pub const MIN_TERM_LENGTH: usize = 2;

/// The contexts `all` stands for (Nomad's open-source contexts), in its order.
const ALL_CONTEXTS: &[&str] = &[
    "allocs",
    "deployment",
    "evals",
    "jobs",
    "nodes",
    "namespaces",
    "plugins",
    "scaling_policy",
    "volumes",
];

/// Contexts matched by ID prefix rather than by name.
const PREFIX_CONTEXTS: &[&str] = &["evals", "deployment", "scaling_policy", "volumes"];

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct FuzzySearchRequest {
    text: String,
    context: String,
    namespace: String,
}

/// Nomad's `FuzzyMatch`: the matched name (or ID) and the IDs of the objects it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
struct FuzzyMatch {
    #[serde(rename = "ID")]
    id: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    scope: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct FuzzySearchResponse {
    matches: BTreeMap<String, Vec<FuzzyMatch>>,
    truncations: BTreeMap<String, bool>,
    index: u64,
    last_contact: u64,
    known_leader: bool,
    next_token: String,
}

/// One match before sorting: where in the name the text was found.
#[derive(Debug, Clone)]
struct Scored {
    id: String,
    scope: Vec<String>,
    score: usize,
}

/// Where `text` (lower case) is in `name`, ignoring case.
fn fuzzy_index(name: &str, text: &str) -> Option<usize> {
    name.to_lowercase().find(text)
}

/// Nomad's order: earlier position first, then the shorter name, then alphabetical.
fn sort_set(matches: &mut [Scored]) {
    matches.sort_by(|a, b| {
        a.score
            .cmp(&b.score)
            .then(a.id.len().cmp(&b.id.len()))
            .then_with(|| a.id.cmp(&b.id))
    });
}

/// A string parameter of a task's driver config.
fn config_param<'a>(config: &'a serde_json::Map<String, serde_json::Value>, key: &str) -> &'a str {
    config
        .get(key)
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
}

/// Nomad's `fuzzyMatchesJob`: the job's name, its groups, services, tasks and driver
/// commands, images and classes, each with its scope.
fn job_matches(job: &Job, text: &str) -> Vec<(&'static str, Scored)> {
    let mut found = Vec::new();
    let namespace = job.namespace.clone();
    let mut push = |context: &'static str, name: &str, scope: &[&str]| {
        if let Some(score) = fuzzy_index(name, text) {
            let mut full = vec![namespace.clone()];
            full.extend(scope.iter().map(|part| (*part).to_string()));
            found.push((
                context,
                Scored {
                    id: name.to_string(),
                    scope: full,
                    score,
                },
            ));
        }
    };
    let job_id = job.id.as_str();
    push("jobs", &job.name, &[job_id]);
    for group in &job.task_groups {
        let group_name = group.name.as_str();
        push("groups", group_name, &[job_id]);
        for service in &group.services {
            push("services", &service.name, &[job_id, group_name]);
        }
        for task in &group.tasks {
            push("tasks", &task.name, &[job_id, group_name]);
            for service in &task.services {
                push("services", &service.name, &[job_id, group_name, &task.name]);
            }
            let scope = [job_id, group_name, task.name.as_str()];
            match task.driver.as_str() {
                "docker" => push("images", config_param(&task.config, "image"), &scope),
                "exec" | "raw_exec" => {
                    push("commands", config_param(&task.config, "command"), &scope);
                }
                "java" => push("classes", config_param(&task.config, "class"), &scope),
                _ => {}
            }
        }
    }
    found
}

/// Collects the matches of one context's objects as Nomad's `getFuzzyMatches` does: at most
/// [`LIMIT_QUERY`] objects looked at, at most [`LIMIT_RESULTS`] matches per context.
#[derive(Default)]
struct Accumulator {
    matches: BTreeMap<&'static str, Vec<Scored>>,
    truncations: BTreeMap<&'static str, bool>,
}

impl Accumulator {
    /// Adds the matches of one object; `limited` when it is the last looked at and more were
    /// left.
    fn add(&mut self, found: Vec<(&'static str, Scored)>, limited: bool) {
        for (context, scored) in found {
            let set = self.matches.entry(context).or_default();
            if set.len() >= LIMIT_RESULTS {
                self.truncations.insert(context, true);
                return;
            }
            set.push(scored);
            if limited {
                self.truncations.insert(context, true);
                return;
            }
        }
    }

    fn scan<T>(&mut self, objects: &[T], matcher: impl Fn(&T) -> Vec<(&'static str, Scored)>) {
        for (position, object) in objects.iter().take(LIMIT_QUERY).enumerate() {
            let limited = position == LIMIT_QUERY - 1 && objects.len() > LIMIT_QUERY;
            self.add(matcher(object), limited);
        }
    }
}

fn single(
    context: &'static str,
    name: &str,
    scope: Vec<String>,
    text: &str,
) -> Vec<(&'static str, Scored)> {
    fuzzy_index(name, text)
        .map(|score| {
            vec![(
                context,
                Scored {
                    id: name.to_string(),
                    scope,
                    score,
                },
            )]
        })
        .unwrap_or_default()
}

fn alloc_matches(alloc: &Allocation, text: &str) -> Vec<(&'static str, Scored)> {
    single(
        "allocs",
        &alloc.name,
        vec![alloc.namespace.clone(), alloc.id.clone()],
        text,
    )
}

fn node_matches(node: &Node, text: &str) -> Vec<(&'static str, Scored)> {
    single("nodes", &node.name, vec![node.id.clone()], text)
}

/// Nomad reads UUIDs by whole bytes: an odd-length prefix loses its last character for the
/// lookup (the IDs found are then checked against the text).
fn round_uuid_down_if_odd(prefix: &str) -> &str {
    let hyphens = prefix.matches('-').count();
    if (prefix.len() - hyphens).is_multiple_of(2) {
        prefix
    } else {
        let mut end = prefix.len() - 1;
        while !prefix.is_char_boundary(end) {
            end -= 1;
        }
        &prefix[..end]
    }
}

/// Nomad's `getPrefixMatches` over IDs: the first [`LIMIT_QUERY`] (sorted) looked at, those
/// starting with `text` kept.
fn prefix_matches(mut ids: Vec<String>, text: &str) -> (Vec<FuzzyMatch>, bool) {
    ids.sort();
    let truncated = ids.len() > LIMIT_QUERY;
    let matches = ids
        .into_iter()
        .take(LIMIT_QUERY)
        .filter(|id| id.starts_with(text))
        .map(|id| FuzzyMatch {
            id,
            scope: Vec::new(),
        })
        .collect();
    (matches, truncated)
}

pub(super) async fn fuzzy_search<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: FuzzySearchRequest = decode_body(&body)?;
    let namespace = super::search::search_namespace(params, &request.namespace);
    let contexts = super::search::chosen_contexts(&request.context, ALL_CONTEXTS)?;
    if request.text.len() < MIN_TERM_LENGTH {
        return Err(ApiError::bad_request(format!(
            "fuzzy search query must be at least {MIN_TERM_LENGTH} characters, got {}",
            request.text.len()
        )));
    }
    let text = request.text.to_lowercase();
    // The ID prefix of the prefix contexts is the query's `prefix`, as in Nomad.
    let lookup = round_uuid_down_if_odd(params.prefix());

    let mut response = FuzzySearchResponse {
        matches: BTreeMap::new(),
        truncations: BTreeMap::new(),
        index: 0,
        last_contact: 0,
        known_leader: true,
        next_token: String::new(),
    };
    let mut accumulator = Accumulator::default();
    let mut tables = Vec::new();
    for context in contexts {
        if PREFIX_CONTEXTS.contains(&context) {
            let ids: Vec<String> = match context {
                "evals" => backend
                    .evaluations(&namespace, lookup)?
                    .into_iter()
                    .map(|eval| eval.id)
                    .collect(),
                "deployment" => backend
                    .deployments(&namespace, lookup)?
                    .into_iter()
                    .map(|deployment| deployment.id)
                    .collect(),
                _ => Vec::new(),
            };
            let (matches, truncated) = prefix_matches(ids, &request.text);
            response.matches.insert(context.to_string(), matches);
            response.truncations.insert(context.to_string(), truncated);
            continue;
        }
        response.truncations.insert(context.to_string(), false);
        match context {
            "jobs" => {
                tables.push(Table::Jobs);
                let mut jobs = backend.jobs(&namespace, "")?;
                jobs.sort_by(|a, b| (&a.namespace, &a.id).cmp(&(&b.namespace, &b.id)));
                accumulator.scan(&jobs, |job| job_matches(job, &text));
            }
            "allocs" => {
                tables.push(Table::Allocs);
                let mut allocs = backend.allocations(&namespace, "")?;
                allocs.sort_by(|a, b| (&a.namespace, &a.id).cmp(&(&b.namespace, &b.id)));
                accumulator.scan(&allocs, |alloc| alloc_matches(alloc, &text));
            }
            "nodes" => {
                tables.push(Table::Nodes);
                let mut nodes = backend.nodes("")?;
                nodes.sort_by(|a, b| a.id.cmp(&b.id));
                accumulator.scan(&nodes, |node| node_matches(node, &text));
            }
            "namespaces" => {
                accumulator.scan(&["default"], |name| {
                    single("namespaces", name, Vec::new(), &text)
                });
            }
            _ => {}
        }
    }
    for (context, mut set) in accumulator.matches {
        sort_set(&mut set);
        response.matches.insert(
            context.to_string(),
            set.into_iter()
                .map(|scored| FuzzyMatch {
                    id: scored.id,
                    scope: scored.scope,
                })
                .collect(),
        );
    }
    for (context, truncated) in accumulator.truncations {
        response.truncations.insert(context.to_string(), truncated);
    }
    response.index = if tables.is_empty() {
        0
    } else {
        backend.table_index(&tables)
    };
    let index = response.index;
    json_response(&response, params, Meta::Read(index))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scored(id: &str, score: usize) -> Scored {
        Scored {
            id: id.to_string(),
            scope: Vec::new(),
            score,
        }
    }

    #[test]
    fn matches_sort_by_position_then_length_then_name() {
        let mut set = vec![
            scored("xxweb", 2),
            scored("web-long", 0),
            scored("webb", 0),
            scored("weba", 0),
            scored("web", 0),
        ];
        sort_set(&mut set);
        let order: Vec<&str> = set.iter().map(|found| found.id.as_str()).collect();
        assert_eq!(order, ["web", "weba", "webb", "web-long", "xxweb"]);
    }

    #[test]
    fn a_job_matches_in_every_context_nomad_looks_in() {
        let job: Job = serde_json::from_value(serde_json::json!({
            "ID": "web-id", "Name": "Web", "Namespace": "default",
            "TaskGroups": [{
                "Name": "webgroup",
                "Services": [{"Name": "web-svc"}],
                "Tasks": [{
                    "Name": "webtask", "Driver": "raw_exec",
                    "Config": {"command": "/bin/web"},
                    "Services": [{"Name": "task-web"}]
                }, {
                    "Name": "other", "Driver": "docker", "Config": {"image": "nginx:web"}
                }]
            }]
        }))
        .unwrap();
        let found = job_matches(&job, "web");
        let by_context: Vec<(&str, &str, Vec<String>)> = found
            .iter()
            .map(|(context, scored)| (*context, scored.id.as_str(), scored.scope.clone()))
            .collect();
        let scope = |parts: &[&str]| parts.iter().map(|part| part.to_string()).collect();
        assert_eq!(
            by_context,
            vec![
                ("jobs", "Web", scope(&["default", "web-id"])),
                ("groups", "webgroup", scope(&["default", "web-id"])),
                (
                    "services",
                    "web-svc",
                    scope(&["default", "web-id", "webgroup"])
                ),
                (
                    "tasks",
                    "webtask",
                    scope(&["default", "web-id", "webgroup"])
                ),
                (
                    "services",
                    "task-web",
                    scope(&["default", "web-id", "webgroup", "webtask"])
                ),
                (
                    "commands",
                    "/bin/web",
                    scope(&["default", "web-id", "webgroup", "webtask"])
                ),
                (
                    "images",
                    "nginx:web",
                    scope(&["default", "web-id", "webgroup", "other"])
                ),
            ]
        );
    }

    #[test]
    fn the_last_object_looked_at_truncates_when_more_are_left() {
        let names: Vec<String> = (0..25).map(|n| format!("web{n:02}")).collect();
        let mut accumulator = Accumulator::default();
        accumulator.scan(&names, |name| single("nodes", name, Vec::new(), "web"));
        assert_eq!(accumulator.matches["nodes"].len(), LIMIT_QUERY);
        assert_eq!(accumulator.truncations.get("nodes"), Some(&true));
        let mut accumulator = Accumulator::default();
        accumulator.scan(&names[..3], |name| single("nodes", name, Vec::new(), "web"));
        assert_eq!(accumulator.truncations.get("nodes"), None);
    }
}
