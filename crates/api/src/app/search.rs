//! `PUT /v1/search`: Nomad's prefix search over object IDs, per context (`allocs`, `jobs`,
//! `nodes`, `evals`, `deployment`, `plugins`, `volumes`, `scaling_policy`, `namespaces`, or
//! `all`), at most 20 IDs looked at per context with `Truncations` saying whether more were
//! left, as Nomad's `Search.PrefixSearch` answers.
//!
//! drover has no CSI plugins or volumes, scaling policies, or namespaces other than
//! `default`, so those contexts answer what Nomad answers for an empty table (`null`).
//! Not here: fuzzy search (`fuzzy`).

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::respond::{Meta, decode_body, json_response};
use crate::backend::{ApiBackend, Table};
use crate::error::ApiError;
use crate::params::QueryParams;

/// The most IDs looked at per context (`truncateLimit` in Nomad).
const TRUNCATE_LIMIT: usize = 20;

/// Nomad's contexts, in its order; `all` searches each.
const CONTEXTS: &[&str] = &[
    "allocs",
    "jobs",
    "nodes",
    "evals",
    "deployment",
    "plugins",
    "volumes",
    "scaling_policy",
    "namespaces",
];

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct SearchRequest {
    prefix: String,
    context: String,
    namespace: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
struct SearchResponse {
    matches: BTreeMap<String, Option<Vec<String>>>,
    truncations: BTreeMap<String, bool>,
    index: u64,
    last_contact: u64,
    known_leader: bool,
    next_token: String,
}

/// Nomad reads UUIDs by whole bytes: an odd-length prefix (hyphens not counted) loses its last
/// character for the lookup, and the IDs found are then checked against the whole prefix.
fn round_uuid_down_if_odd<'a>(prefix: &'a str, context: &str) -> &'a str {
    if context == "jobs" {
        return prefix;
    }
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

/// At most [`TRUNCATE_LIMIT`] IDs looked at (sorted), those with the prefix kept; whether any
/// were left over.
fn prefix_matches(mut ids: Vec<String>, prefix: &str) -> (Option<Vec<String>>, bool) {
    ids.sort();
    let truncated = ids.len() > TRUNCATE_LIMIT;
    let matches: Vec<String> = ids
        .into_iter()
        .take(TRUNCATE_LIMIT)
        .filter(|id| id.starts_with(prefix))
        .collect();
    // Go's nil slice: no match at all is `null`.
    ((!matches.is_empty()).then_some(matches), truncated)
}

/// The namespace a search looks in: the query's, else the body's, else `default`.
pub(super) fn search_namespace(params: &QueryParams, body_namespace: &str) -> String {
    params
        .non_empty("namespace")
        .map(str::to_string)
        .or_else(|| (!body_namespace.is_empty()).then(|| body_namespace.to_string()))
        .unwrap_or_else(|| "default".to_string())
}

/// The contexts a search covers: `all` of `known`, or the one named; anything else is Nomad's
/// error naming the known ones.
pub(super) fn chosen_contexts<'a>(
    context: &'a str,
    known: &[&'a str],
) -> Result<Vec<&'a str>, ApiError> {
    if context == "all" {
        Ok(known.to_vec())
    } else if known.contains(&context) {
        Ok(vec![context])
    } else {
        Err(ApiError::bad_request(format!(
            "context must be one of [{}] or 'all' for all contexts; got {:?}",
            known.join(" "),
            context
        )))
    }
}

pub(super) async fn prefix_search<B: ApiBackend>(
    backend: &B,
    params: &QueryParams,
    body: Bytes,
) -> Result<Response, ApiError> {
    let request: SearchRequest = decode_body(&body)?;
    let namespace = search_namespace(params, &request.namespace);
    let contexts = chosen_contexts(&request.context, CONTEXTS)?;
    let mut tables = Vec::new();
    let mut response = SearchResponse {
        matches: BTreeMap::new(),
        truncations: BTreeMap::new(),
        index: 0,
        last_contact: 0,
        known_leader: true,
        next_token: String::new(),
    };
    for context in contexts {
        let lookup = round_uuid_down_if_odd(&request.prefix, context);
        let ids: Vec<String> = match context {
            "allocs" => {
                tables.push(Table::Allocs);
                backend
                    .allocations(&namespace, lookup)?
                    .into_iter()
                    .map(|allocation| allocation.id)
                    .collect()
            }
            "jobs" => {
                tables.push(Table::Jobs);
                backend
                    .jobs(&namespace, lookup)?
                    .into_iter()
                    .map(|job| job.id.clone())
                    .collect()
            }
            "nodes" => {
                tables.push(Table::Nodes);
                backend
                    .nodes(lookup)?
                    .into_iter()
                    .map(|node| node.id)
                    .collect()
            }
            "evals" => {
                tables.push(Table::Evals);
                backend
                    .evaluations(&namespace, lookup)?
                    .into_iter()
                    .map(|eval| eval.id)
                    .collect()
            }
            "namespaces" => ["default"]
                .into_iter()
                .filter(|name| name.starts_with(lookup))
                .map(str::to_string)
                .collect(),
            "deployment" => {
                tables.push(Table::Deployments);
                backend
                    .deployments(&namespace, lookup)?
                    .into_iter()
                    .map(|deployment| deployment.id)
                    .collect()
            }
            _ => Vec::new(),
        };
        let (matches, truncated) = prefix_matches(ids, &request.prefix);
        response.matches.insert(context.to_string(), matches);
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

    #[test]
    fn odd_uuid_prefixes_are_looked_up_by_whole_bytes() {
        assert_eq!(round_uuid_down_if_odd("e3671fa4-2", "allocs"), "e3671fa4-");
        assert_eq!(
            round_uuid_down_if_odd("e3671fa4-21", "allocs"),
            "e3671fa4-21"
        );
        assert_eq!(round_uuid_down_if_odd("abc", "jobs"), "abc");
    }

    #[test]
    fn twenty_ids_are_looked_at_and_the_rest_truncated() {
        let ids: Vec<String> = (0..25).map(|n| format!("a{n:02}")).collect();
        let (matches, truncated) = prefix_matches(ids.clone(), "a");
        assert_eq!(matches.map(|found| found.len()), Some(20));
        assert!(truncated);
        let (matches, truncated) = prefix_matches(ids[..3].to_vec(), "b");
        assert_eq!(matches, None);
        assert!(!truncated);
    }
}
