//! Small formatting helpers shared by the commands: short IDs, dates, ages, the allocation
//! table and the placement-failure lines, worded as Nomad's CLI words them.
//!
//! Not here: talking to the agent.

use std::fmt::Write as _;

use drover_structs::{AllocListStub, AllocMetric, NodeListStub, Timestamp};

use crate::columnize;

/// Nomad shows IDs cut to 8 characters unless `-verbose`.
pub const SHORT_ID_LENGTH: usize = 8;

pub fn short_id(id: &str, verbose: bool) -> String {
    if verbose {
        id.to_string()
    } else {
        id.chars().take(SHORT_ID_LENGTH).collect()
    }
}

/// A Unix-nanosecond time as `2026-11-21T07:00:00Z`; `N/A` when unset.
pub fn date_from_unix_nanos(unix_nanos: i64) -> String {
    if unix_nanos <= 0 {
        return "N/A".to_string();
    }
    let whole_seconds = unix_nanos - unix_nanos.rem_euclid(1_000_000_000);
    Timestamp::from_unix_nanos(whole_seconds).to_rfc3339_nanos()
}

/// A task state timestamp as a date; `N/A` when unset.
pub fn date_from_timestamp(timestamp: Timestamp) -> String {
    timestamp
        .unix_nanos()
        .map_or_else(|| "N/A".to_string(), date_from_unix_nanos)
}

/// The current time as Unix nanoseconds.
pub fn now_unix_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| i64::try_from(since.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The current time as a date, for monitor lines.
pub fn now_date() -> String {
    date_from_unix_nanos(now_unix_nanos())
}

/// An age such as `5s ago`, `3m12s ago`, `2h5m ago`, `4d3h ago`.
pub fn pretty_age(then_unix_nanos: i64, now_unix_nanos: i64) -> String {
    if then_unix_nanos <= 0 {
        return "N/A".to_string();
    }
    let seconds = (now_unix_nanos - then_unix_nanos).max(0) / 1_000_000_000;
    format!("{} ago", pretty_span(seconds))
}

/// A future time as Nomad's CLI shows it: `1m30s from now`.
pub fn pretty_from_now(then_unix_nanos: i64, now_unix_nanos: i64) -> String {
    let seconds = (then_unix_nanos - now_unix_nanos).max(0) / 1_000_000_000;
    format!("{} from now", pretty_span(seconds))
}

/// A span of seconds in its two largest units: `5s`, `3m12s`, `2h5m`, `4d3h`.
fn pretty_span(seconds: i64) -> String {
    let (days, hours, minutes, secs) = (
        seconds / 86_400,
        (seconds % 86_400) / 3600,
        (seconds % 3600) / 60,
        seconds % 60,
    );
    if days > 0 {
        format!("{days}d{hours}h")
    } else if hours > 0 {
        format!("{hours}h{minutes}m")
    } else if minutes > 0 {
        format!("{minutes}m{secs}s")
    } else {
        format!("{secs}s")
    }
}

/// `<none>` for an empty string, as Nomad prints empty fields.
pub fn or_none(text: &str) -> String {
    if text.is_empty() {
        "<none>".to_string()
    } else {
        text.to_string()
    }
}

/// The `Allocations` table of `job status` and `node status`.
pub fn allocation_table(allocations: &[AllocListStub], verbose: bool, now: i64) -> String {
    let mut rows = vec![
        [
            "ID",
            "Node ID",
            "Task Group",
            "Version",
            "Desired",
            "Status",
            "Created",
            "Modified",
        ]
        .iter()
        .map(|cell| (*cell).to_string())
        .collect::<Vec<_>>(),
    ];
    let mut sorted: Vec<&AllocListStub> = allocations.iter().collect();
    sorted.sort_by_key(|allocation| std::cmp::Reverse(allocation.create_index));
    for allocation in sorted {
        rows.push(vec![
            short_id(&allocation.id, verbose),
            short_id(&allocation.node_id, verbose),
            allocation.task_group.clone(),
            allocation.job_version.to_string(),
            allocation.desired_status.clone(),
            allocation.client_status.clone(),
            pretty_age(allocation.create_time, now),
            pretty_age(allocation.modify_time, now),
        ]);
    }
    columnize::columns(&rows)
}

/// The reasons a placement failed, one `* …` line each, with `prefix` before each line.
pub fn placement_failure_lines(metric: &AllocMetric, prefix: &str) -> String {
    let mut text = String::new();
    let mut line = |message: String| {
        let _ = writeln!(text, "{prefix}* {message}");
    };
    if metric.nodes_evaluated == 0 {
        line("No nodes were eligible for evaluation".to_string());
    }
    for (datacenter, available) in &metric.nodes_available {
        if *available == 0 {
            line(format!(
                "No nodes are available in datacenter {datacenter:?}"
            ));
        }
    }
    for (class, count) in &metric.class_filtered {
        line(format!("Class {class:?}: {count} nodes excluded by filter"));
    }
    for (constraint, count) in &metric.constraint_filtered {
        line(format!(
            "Constraint {constraint:?}: {count} nodes excluded by filter"
        ));
    }
    if metric.nodes_exhausted > 0 {
        line(format!(
            "Resources exhausted on {} nodes",
            metric.nodes_exhausted
        ));
    }
    for (class, count) in &metric.class_exhausted {
        line(format!("Class {class:?} exhausted on {count} nodes"));
    }
    for (dimension, count) in &metric.dimension_exhausted {
        line(format!(
            "Dimension {dimension:?} exhausted on {count} nodes"
        ));
    }
    for quota in &metric.quota_exhausted {
        line(format!("Quota limit hit {quota:?}"));
    }
    text
}

/// The node list as `node status` and `node pool nodes` print it.
pub(crate) fn node_table(nodes: &[NodeListStub], verbose: bool) -> String {
    let mut rows = vec![
        [
            "ID",
            "Node Pool",
            "DC",
            "Name",
            "Class",
            "Drain",
            "Eligibility",
            "Status",
        ]
        .iter()
        .map(|cell| (*cell).to_string())
        .collect::<Vec<_>>(),
    ];
    for node in nodes {
        rows.push(vec![
            short_id(&node.id, verbose),
            node.node_pool.clone(),
            node.datacenter.clone(),
            node.name.clone(),
            or_none(&node.node_class),
            node.drain.to_string(),
            node.scheduling_eligibility.clone(),
            node.status.clone(),
        ]);
    }
    columnize::columns(&rows)
}

/// Nomad's `Format` for `-json` and `-t`: the data as JSON indented by four spaces (Nomad's
/// codec settings), or rendered with a Go template over its JSON fields; both at once, or
/// neither, is an error with Nomad's words.
pub fn format_data(
    json: bool,
    template: &str,
    data: &impl serde::Serialize,
) -> Result<String, String> {
    match (json, template.is_empty()) {
        (true, false) => Err("Both json and template formatting are not allowed".to_owned()),
        (true, true) => {
            let mut out = Vec::new();
            let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
            let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
            data.serialize(&mut serializer)
                .map_err(|error| format!("Error formatting the data: {error}"))?;
            String::from_utf8(out).map_err(|error| format!("Error formatting the data: {error}"))
        }
        (false, false) => {
            let value = serde_json::to_value(data)
                .map_err(|error| format!("Error formatting the data: {error}"))?;
            drover_template::render("", template, &drover_template::Value::from_json(&value))
                .map_err(|error| format!("Error formatting the data: {error}"))
        }
        (false, true) => Err("no formatting option given".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_nomad() {
        let second = 1_000_000_000;
        assert_eq!(pretty_age(1, 5 * second + 1), "5s ago");
        assert_eq!(pretty_age(1, 192 * second + 1), "3m12s ago");
        assert_eq!(pretty_age(1, 7500 * second + 1), "2h5m ago");
        assert_eq!(
            pretty_age(1, (4 * 86_400 + 3 * 3600) * second + 1),
            "4d3h ago"
        );
        assert_eq!(pretty_age(0, 5), "N/A");
    }

    #[test]
    fn dates_drop_the_fraction() {
        assert_eq!(
            date_from_unix_nanos(1_700_000_000_123_000_000),
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(date_from_unix_nanos(0), "N/A");
    }

    #[test]
    fn placement_failures_name_the_exhausted_dimension() {
        let metric = AllocMetric {
            nodes_evaluated: 1,
            nodes_exhausted: 1,
            dimension_exhausted: [("memory".to_string(), 1)].into_iter().collect(),
            ..AllocMetric::default()
        };
        assert_eq!(
            placement_failure_lines(&metric, "  "),
            "  * Resources exhausted on 1 nodes\n  * Dimension \"memory\" exhausted on 1 nodes\n"
        );
    }
}
