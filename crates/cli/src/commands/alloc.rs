//! `drover alloc status|logs|restart|signal|stop|checks`. Allocation IDs may be given as prefixes
//! (Nomad's short IDs); an ambiguous prefix lists the candidates.

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use drover_api::client::{ApiClient, LogsQuery};
use drover_structs::{AllocResourceUsage, Allocation, CheckQueryResult, TaskState};

use crate::commands::describe;
use crate::commands::lookup::{resolve_allocation, resolve_allocation_or_job, task_names};
use crate::commands::monitor::{MonitorOptions, monitor_evaluation};
use crate::format::{
    date_from_timestamp, date_from_unix_nanos, now_unix_nanos, or_none, pretty_age,
    pretty_from_now, short_id,
};
use crate::{ApiFlags, Io, columnize};

/// Nomad's `-tail -n` guess of bytes per line when asking for the end of a log.
const BYTES_PER_LINE: u64 = 120;
const DEFAULT_TAIL_LINES: u64 = 10;

#[derive(Debug, Subcommand)]
pub enum AllocCommand {
    /// Show an allocation's status, tasks and events
    Status(StatusArgs),
    /// Print or follow a task's logs
    Logs(LogsArgs),
    /// Restart a task, the running tasks, or all tasks of an allocation
    Restart(RestartArgs),
    /// Send a signal to a task, or to all tasks of an allocation
    Signal(SignalArgs),
    /// Stop an allocation (the scheduler places a replacement)
    Stop(StopArgs),
    /// List a directory of an allocation, or print one of its files
    Fs(FsArgs),
    /// Run a command inside a task
    Exec(crate::commands::exec::ExecArgs),
    /// Show the status of an allocation's service checks
    Checks(ChecksArgs),
}

#[derive(Debug, Args)]
pub struct ChecksArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// The allocation ID or ID prefix.
    pub alloc: String,
}

#[derive(Debug, Args)]
pub struct FsArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Describe the path instead of listing or printing it.
    #[arg(long)]
    pub stat: bool,
    /// Print JSON (with -stat or for a directory).
    #[arg(long)]
    pub json: bool,
    /// The argument is a job ID or prefix: use one of its allocations (a running one when
    /// any runs).
    #[arg(long = "job")]
    pub job: bool,
    /// With -job: pick the allocation among those of this task group.
    #[arg(long = "group", value_name = "GROUP")]
    pub group: Option<String>,
    /// The allocation ID or ID prefix (with -job, the job's).
    pub alloc: String,
    /// A path inside the allocation directory (default: its root).
    pub path: Option<String>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// The allocation ID or ID prefix.
    pub alloc: String,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Show stderr instead of stdout.
    #[arg(long)]
    pub stderr: bool,
    /// Follow the log as it grows.
    #[arg(short = 'f')]
    pub follow: bool,
    /// Show the end of the log instead of its start.
    #[arg(long)]
    pub tail: bool,
    /// With -tail: how many lines.
    #[arg(short = 'n', value_name = "LINES")]
    pub lines: Option<u64>,
    /// With -tail: how many bytes.
    #[arg(short = 'c', value_name = "BYTES")]
    pub bytes: Option<u64>,
    /// The task (may also be given as the second argument).
    #[arg(long = "task", value_name = "TASK")]
    pub task_flag: Option<String>,
    /// The argument is a job ID or prefix: use one of its allocations (a running one when
    /// any runs).
    #[arg(long = "job")]
    pub job: bool,
    /// With -job: pick the allocation among those of this task group.
    #[arg(long = "group", value_name = "GROUP")]
    pub group: Option<String>,
    /// The allocation ID or ID prefix (with -job, the job's).
    pub alloc: String,
    /// The task; optional when the allocation runs one task.
    pub task: Option<String>,
}

#[derive(Debug, Args)]
pub struct RestartArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Restart every task, including ones that have finished, in lifecycle order.
    #[arg(long = "all-tasks")]
    pub all_tasks: bool,
    /// The task to restart.
    #[arg(long = "task", value_name = "TASK")]
    pub task_flag: Option<String>,
    /// The allocation ID or ID prefix.
    pub alloc: String,
    /// The task to restart.
    pub task: Option<String>,
}

#[derive(Debug, Args)]
pub struct SignalArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// The signal to send (default SIGKILL).
    #[arg(short = 's', value_name = "SIGNAL")]
    pub signal: Option<String>,
    /// The task to signal.
    #[arg(long = "task", value_name = "TASK")]
    pub task_flag: Option<String>,
    /// The allocation ID or ID prefix.
    pub alloc: String,
    /// The task to signal; all tasks when absent.
    pub task: Option<String>,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Return right after stopping, without watching the evaluation.
    #[arg(long)]
    pub detach: bool,
    /// Show full IDs.
    #[arg(long)]
    pub verbose: bool,
    /// The allocation ID or ID prefix.
    pub alloc: String,
}

pub async fn run(command: AllocCommand, io: &mut Io<'_>) -> i32 {
    match command {
        AllocCommand::Status(arguments) => alloc_status(arguments, io).await,
        AllocCommand::Logs(arguments) => alloc_logs(arguments, io).await,
        AllocCommand::Restart(arguments) => alloc_restart(arguments, io).await,
        AllocCommand::Signal(arguments) => alloc_signal(arguments, io).await,
        AllocCommand::Stop(arguments) => alloc_stop(arguments, io).await,
        AllocCommand::Fs(arguments) => alloc_fs(arguments, io).await,
        AllocCommand::Exec(arguments) => crate::commands::exec::alloc_exec(arguments, io).await,
        AllocCommand::Checks(arguments) => alloc_checks(arguments, io).await,
    }
}

fn client_or_report(api: &ApiFlags, io: &mut Io<'_>) -> Option<ApiClient> {
    match api.client() {
        Ok(client) => Some(client),
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            None
        }
    }
}

fn bytes_text(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        let rounded = format!("{value:.1}");
        format!("{} {}", rounded.trim_end_matches(".0"), UNITS[unit])
    }
}

fn task_resources(
    allocation: &Allocation,
    task: &str,
    usage: Option<&AllocResourceUsage>,
) -> String {
    let allocated = allocation
        .allocated_resources
        .as_ref()
        .and_then(|resources| resources.tasks.get(task));
    let cpu_total = allocated.map_or(0, |resources| resources.cpu.cpu_shares);
    let memory_total = allocated.map_or(0, |resources| resources.memory.memory_mb);
    let disk = allocation
        .allocated_resources
        .as_ref()
        .map_or(0, |resources| resources.shared.disk_mb);
    let task_usage = usage.and_then(|usage| usage.tasks.get(task));
    let (cpu, memory) = match task_usage {
        Some(task_usage) => {
            let stats = &task_usage.resource_usage;
            let used_mhz = stats.cpu_stats.total_ticks.round() as i64;
            let used_memory = stats.memory_stats.rss.max(stats.memory_stats.usage);
            (
                format!("{used_mhz}/{cpu_total} MHz"),
                format!(
                    "{}/{}",
                    bytes_text(used_memory),
                    bytes_text(u64::try_from(memory_total).unwrap_or(0) * 1024 * 1024)
                ),
            )
        }
        None => (
            format!("{cpu_total} MHz"),
            bytes_text(u64::try_from(memory_total).unwrap_or(0) * 1024 * 1024),
        ),
    };
    // The task's own (deprecated) network, as Nomad lists it: dynamic ports, then static.
    let addresses: Vec<String> = allocated
        .map(|resources| resources.networks.as_slice())
        .unwrap_or_default()
        .iter()
        .flat_map(|network| {
            network
                .dynamic_ports
                .iter()
                .chain(&network.reserved_ports)
                .map(|port| format!("{}: {}:{}", port.label, network.ip, port.value))
        })
        .collect();
    let mut rows = vec![
        vec![
            "CPU".into(),
            "Memory".into(),
            "Disk".into(),
            "Addresses".into(),
        ],
        vec![
            cpu,
            memory,
            format!("{disk} MiB"),
            addresses.first().cloned().unwrap_or_default(),
        ],
    ];
    for address in addresses.iter().skip(1) {
        rows.push(vec![
            String::new(),
            String::new(),
            String::new(),
            address.clone(),
        ]);
    }
    columnize::columns(&rows)
}

fn task_events(state: &TaskState) -> String {
    let last_restart = if state.restarts == 0 {
        "N/A".to_string()
    } else {
        date_from_timestamp(state.last_restart)
    };
    let finished_at = if state.state == "dead" {
        date_from_timestamp(state.finished_at)
    } else {
        "N/A".to_string()
    };
    let mut text = String::from("Task Events:\n");
    text.push_str(&columnize::key_values(&[
        ("Started At", date_from_timestamp(state.started_at)),
        ("Finished At", finished_at),
        ("Total Restarts", state.restarts.to_string()),
        ("Last Restart", last_restart),
    ]));
    text.push_str("\n\nRecent Events:\n");
    let mut rows = vec![vec![
        "Time".to_string(),
        "Type".to_string(),
        "Description".to_string(),
    ]];
    for event in state.events.iter().rev() {
        let description = if event.display_message.is_empty() {
            event.message.clone()
        } else {
            event.display_message.clone()
        };
        rows.push(vec![
            date_from_unix_nanos(event.time),
            event.r#type.clone(),
            description,
        ]);
    }
    text.push_str(&columnize::columns(&rows));
    text
}

async fn alloc_status(arguments: StatusArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client_or_report(&arguments.api, io) else {
        return 1;
    };
    let Some(allocation) = resolve_allocation(&client, io, &arguments.alloc).await else {
        return 1;
    };
    if arguments.json {
        io.say(serde_json::to_string_pretty(&allocation).unwrap_or_default());
        return 0;
    }
    show_allocation(&client, io, &allocation, arguments.verbose).await;
    0
}

/// The detailed status of one allocation.
pub async fn show_allocation(
    client: &ApiClient,
    io: &mut Io<'_>,
    allocation: &Allocation,
    verbose: bool,
) {
    let now = now_unix_nanos();
    let mut pairs = vec![
        ("ID", short_id(&allocation.id, verbose)),
        ("Eval ID", short_id(&allocation.eval_id, verbose)),
        ("Name", allocation.name.clone()),
        ("Node ID", short_id(&allocation.node_id, verbose)),
        ("Node Name", allocation.node_name.clone()),
        ("Job ID", allocation.job_id.clone()),
        ("Job Version", allocation.job_version().to_string()),
        ("Client Status", allocation.client_status.clone()),
        (
            "Client Description",
            or_none(&allocation.client_description),
        ),
        ("Desired Status", allocation.desired_status.clone()),
        (
            "Desired Description",
            or_none(&allocation.desired_description),
        ),
        ("Created", pretty_age(allocation.create_time, now)),
        ("Modified", pretty_age(allocation.modify_time, now)),
    ];
    pairs.extend(reschedule_lines(client, allocation, verbose, now).await);
    if let Some(address) = network_address(allocation) {
        pairs.push(("Network Address", address));
    }
    io.say(columnize::key_values(&pairs));
    if let Some(addresses) = allocation_addresses(allocation) {
        io.say("");
        io.say(addresses);
    }
    let usage = if allocation.client_status == "running" {
        client.allocation_stats(&allocation.id).await.ok()
    } else {
        None
    };
    // Nomad shows checks only for allocations a client still runs; errors leave them out.
    if let Ok(checks) = client.allocation_checks(&allocation.id).await
        && let Some(summary) = checks_summary(&checks)
    {
        io.say("");
        io.say(summary);
    }
    let states: &BTreeMap<String, TaskState> = &allocation.task_states;
    for task in task_names(allocation) {
        let Some(state) = states.get(&task) else {
            continue;
        };
        io.say("");
        io.say(format!("Task \"{task}\" is \"{}\"", state.state));
        io.say("Task Resources:");
        io.say(task_resources(allocation, &task, usage.as_ref()));
        io.say("");
        io.say(task_events(state));
    }
}

/// The address of the allocation's own network (bridge, CNI) and its interface, from its
/// `NetworkStatus`, when it has one.
fn network_address(allocation: &Allocation) -> Option<String> {
    let status = allocation.network_status.as_ref()?;
    let address = status
        .get("Address")?
        .as_str()
        .filter(|text| !text.is_empty())?;
    match status.get("InterfaceName").and_then(|name| name.as_str()) {
        Some(interface) if !interface.is_empty() => Some(format!("{address} ({interface})")),
        _ => Some(address.to_string()),
    }
}

/// Nomad's "Allocation Addresses" section: each port of the group network as
/// `*label|yes|host:port -> to`, headed by the network's mode when it names one.
fn allocation_addresses(allocation: &Allocation) -> Option<String> {
    let resources = allocation.allocated_resources.as_ref()?;
    let network = resources.shared.networks.first()?;
    if network.reserved_ports.is_empty() && network.dynamic_ports.is_empty() {
        return None;
    }
    let mut rows = vec!["Label|Dynamic|Address".to_string()];
    let row = |label: &str, value: i64, to: i64, host_ip: &str| {
        let mut text = format!("{label}|yes|{host_ip}:{value}");
        if to > 0 {
            text.push_str(&format!(" -> {to}"));
        }
        text
    };
    if resources.shared.ports.is_empty() {
        for port in network.dynamic_ports.iter().chain(&network.reserved_ports) {
            rows.push(row(&port.label, port.value, port.to, &network.ip));
        }
    } else {
        for port in &resources.shared.ports {
            rows.push(row(
                &format!("*{}", port.label),
                port.value,
                port.to,
                &port.host_ip,
            ));
        }
    }
    let mode = if network.mode.is_empty() {
        String::new()
    } else {
        format!(" (mode = {:?})", network.mode)
    };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.split('|').map(str::to_string).collect())
        .collect();
    Some(format!(
        "Allocation Addresses{mode}:\n{}",
        columnize::columns(&cells)
    ))
}

/// Nomad's reschedule lines of `alloc status`: the attempts used within the policy's interval
/// (when it limits them), the replacement, and when a delayed replacement is due.
async fn reschedule_lines(
    client: &ApiClient,
    allocation: &Allocation,
    verbose: bool,
    now: i64,
) -> Vec<(&'static str, String)> {
    let mut lines = Vec::new();
    if let Some(tracker) = allocation.reschedule_tracker.as_ref()
        && !tracker.events.is_empty()
    {
        let (attempted, allowed) = reschedule_info(allocation, allocation.modify_time);
        if allowed > 0 {
            lines.push(("Reschedule Attempts", format!("{attempted}/{allowed}")));
        }
    }
    if !allocation.next_allocation.is_empty() {
        lines.push((
            "Replacement Alloc ID",
            short_id(&allocation.next_allocation, verbose),
        ));
    }
    if !allocation.followup_eval_id.is_empty()
        && let Ok(evaluation) = client.evaluation(&allocation.followup_eval_id).await
        && let Some(wait_until) = evaluation.wait_until.unix_nanos()
        && wait_until > now
    {
        lines.push(("Reschedule Eligibility", pretty_from_now(wait_until, now)));
    }
    lines
}

/// Nomad's `Allocation.RescheduleInfo`: reschedules within the group policy's interval before
/// `at` (Unix nanoseconds), and the attempts the policy allows.
pub fn reschedule_info(allocation: &Allocation, at: i64) -> (i64, i64) {
    let Some(policy) = allocation
        .job
        .as_deref()
        .and_then(|job| job.lookup_task_group(&allocation.task_group))
        .and_then(|group| group.reschedule_policy.as_ref())
    else {
        return (0, 0);
    };
    let interval = policy.interval.as_nanos();
    let attempted = match allocation.reschedule_tracker.as_ref() {
        Some(tracker) if policy.attempts > 0 && interval > 0 => tracker
            .events
            .iter()
            .filter(|event| at.saturating_sub(event.reschedule_time) < interval)
            .count(),
        _ => 0,
    };
    (
        i64::try_from(attempted).unwrap_or(i64::MAX),
        policy.attempts,
    )
}

/// A check's task as Nomad shows it: `(group)` for a group service's check.
fn check_task(check: &CheckQueryResult) -> String {
    if check.task.is_empty() {
        "(group)".to_string()
    } else {
        check.task.clone()
    }
}

/// Nomad's "Nomad Service Checks" section of `alloc status`; `None` without checks.
pub fn checks_summary(checks: &BTreeMap<String, CheckQueryResult>) -> Option<String> {
    if checks.is_empty() {
        return None;
    }
    let mut rows: Vec<Vec<String>> = checks
        .values()
        .map(|check| {
            vec![
                check.service.clone(),
                check_task(check),
                check.check.clone(),
                check.mode.clone(),
                check.status.clone(),
            ]
        })
        .collect();
    rows.sort();
    rows.insert(
        0,
        ["Service", "Task", "Name", "Mode", "Status"]
            .map(str::to_string)
            .to_vec(),
    );
    Some(format!(
        "Nomad Service Checks:\n{}",
        columnize::columns(&rows)
    ))
}

/// Nomad's `alloc checks` listing: one block of key/values per check.
pub fn checks_listing(checks: &BTreeMap<String, CheckQueryResult>) -> String {
    let mut text = format!("Status of {} Nomad Service Checks\n", checks.len());
    for check in checks.values() {
        let mut pairs = vec![
            ("ID", check.id.clone()),
            ("Name", check.check.clone()),
            ("Group", check.group.clone()),
            ("Task", check_task(check)),
            ("Service", check.service.clone()),
            ("Status", check.status.clone()),
        ];
        if check.status_code > 0 {
            pairs.push(("StatusCode", check.status_code.to_string()));
        }
        pairs.push(("Mode", check.mode.clone()));
        pairs.push((
            "Timestamp",
            date_from_unix_nanos(check.timestamp.saturating_mul(1_000_000_000)),
        ));
        pairs.push(("Output", check.output.clone()));
        text.push('\n');
        text.push_str(&columnize::key_values(&pairs));
        text.push('\n');
    }
    text
}

async fn alloc_checks(arguments: ChecksArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client_or_report(&arguments.api, io) else {
        return 1;
    };
    let Some(allocation) = resolve_allocation(&client, io, &arguments.alloc).await else {
        return 1;
    };
    let checks = match client.allocation_checks(&allocation.id).await {
        Ok(checks) => checks,
        Err(error) => {
            io.error(describe("querying allocation checks", &error));
            return 1;
        }
    };
    if arguments.json {
        io.say(serde_json::to_string_pretty(&checks).unwrap_or_default());
        return 0;
    }
    io.say(checks_listing(&checks).trim_end());
    0
}

async fn alloc_logs(arguments: LogsArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client_or_report(&arguments.api, io) else {
        return 1;
    };
    let Some(allocation) = resolve_allocation_or_job(
        &client,
        io,
        &arguments.alloc,
        arguments.job,
        arguments.group.as_deref(),
    )
    .await
    else {
        return 1;
    };
    let task = match arguments.task_flag.or(arguments.task) {
        Some(task) => task,
        None => {
            let names = task_names(&allocation);
            match names.as_slice() {
                [only] => only.clone(),
                _ => {
                    let list: Vec<String> =
                        names.iter().map(|name| format!("  * {name}")).collect();
                    io.error(format!(
                        "Allocation \"{}\" is running the following tasks:\n{}\n\nPlease specify the task.",
                        short_id(&allocation.id, false),
                        list.join("\n")
                    ));
                    return 1;
                }
            }
        }
    };
    let tail_lines = match (arguments.tail, arguments.lines, arguments.bytes) {
        (_, _, Some(_)) => None,
        (true, lines, None) => Some(lines.unwrap_or(DEFAULT_TAIL_LINES)),
        (false, Some(lines), None) => Some(lines),
        (false, None, None) => None,
    };
    let offset = match (arguments.bytes, tail_lines) {
        (Some(bytes), _) => bytes,
        (None, Some(lines)) => lines.saturating_mul(BYTES_PER_LINE),
        (None, None) => 0,
    };
    let from_end = arguments.tail || arguments.bytes.is_some() || tail_lines.is_some();
    let query = LogsQuery {
        task,
        stderr: arguments.stderr,
        follow: arguments.follow,
        from_end,
        offset,
        plain: false,
    };
    let mut stream = match client.logs(&allocation.id, &query).await {
        Ok(stream) => stream,
        Err(error) => {
            io.error(describe("reading logs", &error));
            return 1;
        }
    };
    // With a line count, the first read (the `offset` bytes before the end) is cut to the
    // last N lines; the rest is printed as it arrives. The first read is over once it has
    // all its bytes, the stream goes quiet (a heartbeat), or a second has passed.
    let mut pending_tail: Option<Vec<u8>> = tail_lines.map(|_| Vec::new());
    let started = tokio::time::Instant::now();
    loop {
        let frame = match stream.next_frame().await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(error) => {
                io.error(describe("reading logs", &error));
                return 1;
            }
        };
        match pending_tail.as_mut() {
            Some(buffer) => {
                buffer.extend_from_slice(&frame.data.0);
                let complete = frame.is_heartbeat()
                    || buffer.len() as u64 >= offset
                    || started.elapsed() >= std::time::Duration::from_secs(1);
                if complete && let (Some(buffer), Some(lines)) = (pending_tail.take(), tail_lines) {
                    let _ = io.out.write_all(last_lines(&buffer, lines));
                    let _ = io.out.flush();
                }
            }
            None => {
                let _ = io.out.write_all(&frame.data.0);
                let _ = io.out.flush();
            }
        }
    }
    if let (Some(buffer), Some(lines)) = (pending_tail, tail_lines) {
        let _ = io.out.write_all(last_lines(&buffer, lines));
    }
    let _ = io.out.flush();
    0
}

/// The last `lines` lines of `data` (a trailing newline does not start a new line).
fn last_lines(data: &[u8], lines: u64) -> &[u8] {
    if lines == 0 {
        return &data[data.len()..];
    }
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    let mut seen = 0;
    for (position, byte) in body.iter().enumerate().rev() {
        if *byte == b'\n' {
            seen += 1;
            if seen == lines {
                return &data[position + 1..];
            }
        }
    }
    data
}

fn pick_task(
    flag: Option<String>,
    positional: Option<String>,
    io: &mut Io<'_>,
) -> Result<Option<String>, ()> {
    match (flag, positional) {
        (Some(flag), Some(positional)) if flag != positional => {
            io.error("Task given twice (as -task and as an argument) with different names");
            Err(())
        }
        (Some(task), _) | (None, Some(task)) => Ok(Some(task)),
        (None, None) => Ok(None),
    }
}

async fn alloc_restart(arguments: RestartArgs, io: &mut Io<'_>) -> i32 {
    let Ok(task) = pick_task(arguments.task_flag, arguments.task, io) else {
        return 1;
    };
    if arguments.all_tasks && task.is_some() {
        io.error("The -all-tasks option is not allowed when restarting a specific task.");
        return 1;
    }
    let Some(client) = client_or_report(&arguments.api, io) else {
        return 1;
    };
    let Some(allocation) = resolve_allocation(&client, io, &arguments.alloc).await else {
        return 1;
    };
    match client
        .restart_allocation(&allocation.id, task.as_deref(), arguments.all_tasks)
        .await
    {
        Ok(_) => 0,
        Err(error) => {
            io.error(describe("restarting allocation", &error));
            1
        }
    }
}

async fn alloc_signal(arguments: SignalArgs, io: &mut Io<'_>) -> i32 {
    let Ok(task) = pick_task(arguments.task_flag, arguments.task, io) else {
        return 1;
    };
    let Some(client) = client_or_report(&arguments.api, io) else {
        return 1;
    };
    let Some(allocation) = resolve_allocation(&client, io, &arguments.alloc).await else {
        return 1;
    };
    let signal = arguments.signal.unwrap_or_else(|| "SIGKILL".to_string());
    match client
        .signal_allocation(&allocation.id, task.as_deref(), &signal)
        .await
    {
        Ok(_) => 0,
        Err(error) => {
            io.error(describe("signalling allocation", &error));
            1
        }
    }
}

async fn alloc_stop(arguments: StopArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client_or_report(&arguments.api, io) else {
        return 1;
    };
    let Some(allocation) = resolve_allocation(&client, io, &arguments.alloc).await else {
        return 1;
    };
    let response = match client.stop_allocation(&allocation.id).await {
        Ok(response) => response,
        Err(error) => {
            io.error(describe("stopping allocation", &error));
            return 1;
        }
    };
    if arguments.detach || response.eval_id.is_empty() {
        io.say(response.eval_id);
        return 0;
    }
    monitor_evaluation(
        &client,
        io,
        &response.eval_id,
        MonitorOptions::new(arguments.verbose),
    )
    .await
}

fn file_table(entries: &[drover_structs::AllocFileInfo]) -> String {
    let mut rows = vec![vec![
        "Mode".to_string(),
        "Size".to_string(),
        "Modified Time".to_string(),
        "Name".to_string(),
    ]];
    for entry in entries {
        let name = if entry.is_dir {
            format!("{}/", entry.name)
        } else {
            entry.name.clone()
        };
        rows.push(vec![
            entry.file_mode.clone(),
            bytes_text(u64::try_from(entry.size).unwrap_or(0)),
            entry
                .mod_time
                .unix_nanos()
                .map_or_else(|| "N/A".to_string(), date_from_unix_nanos),
            name,
        ]);
    }
    columnize::columns(&rows)
}

async fn alloc_fs(arguments: FsArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client_or_report(&arguments.api, io) else {
        return 1;
    };
    let Some(allocation) = resolve_allocation_or_job(
        &client,
        io,
        &arguments.alloc,
        arguments.job,
        arguments.group.as_deref(),
    )
    .await
    else {
        return 1;
    };
    let path = arguments.path.unwrap_or_else(|| "/".to_string());
    let info = match client.fs_stat(&allocation.id, &path).await {
        Ok(info) => info,
        Err(error) => {
            io.error(describe("getting file info", &error));
            return 1;
        }
    };
    if arguments.stat {
        if arguments.json {
            io.say(serde_json::to_string_pretty(&info).unwrap_or_default());
        } else {
            io.say(file_table(std::slice::from_ref(&info)));
        }
        return 0;
    }
    if info.is_dir {
        return match client.fs_list(&allocation.id, &path).await {
            Ok(entries) if arguments.json => {
                io.say(serde_json::to_string_pretty(&entries).unwrap_or_default());
                0
            }
            Ok(entries) => {
                io.say(file_table(&entries));
                0
            }
            Err(error) => {
                io.error(describe("listing directory", &error));
                1
            }
        };
    }
    match client.fs_cat(&allocation.id, &path).await {
        Ok(data) => {
            let _ = io.out.write_all(&data);
            let _ = io.out.flush();
            0
        }
        Err(error) => {
            io.error(describe("reading file", &error));
            1
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // a failed expectation is a failed test
mod tests {
    use super::*;

    fn check(task: &str, status_code: i64) -> CheckQueryResult {
        CheckQueryResult {
            id: "abc".into(),
            mode: "healthiness".into(),
            status: "failure".into(),
            status_code,
            output: "broken".into(),
            timestamp: 1_700_000_000,
            group: "web.web[0]".into(),
            task: task.into(),
            service: "web".into(),
            check: "alive".into(),
        }
    }

    #[test]
    fn checks_are_listed_as_nomad_lists_them() {
        let checks = BTreeMap::from([("abc".to_string(), check("", 500))]);
        let listing = checks_listing(&checks);
        assert!(
            listing.starts_with("Status of 1 Nomad Service Checks\n\n"),
            "{listing}"
        );
        for expected in [
            "ID",
            "Name",
            "Group",
            "Task",
            "Service",
            "StatusCode",
            "Mode",
            "Output",
        ] {
            assert!(
                listing.contains(expected),
                "{expected} missing from {listing}"
            );
        }
        assert!(listing.contains("(group)"), "{listing}");
        let without_code = checks_listing(&BTreeMap::from([("abc".to_string(), check("t", 0))]));
        assert!(!without_code.contains("StatusCode"), "{without_code}");
        let summary = checks_summary(&checks).unwrap();
        assert!(
            summary.starts_with("Nomad Service Checks:\nService"),
            "{summary}"
        );
        assert!(summary.contains("alive"), "{summary}");
        assert_eq!(checks_summary(&BTreeMap::new()), None);
    }

    #[test]
    fn last_lines_keeps_the_tail() {
        assert_eq!(last_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(last_lines(b"a\nb\nc", 2), b"b\nc");
        assert_eq!(last_lines(b"a\nb\n", 5), b"a\nb\n");
        assert_eq!(last_lines(b"a\nb\n", 0), b"");
    }

    #[test]
    fn sizes_read_like_nomad() {
        assert_eq!(bytes_text(300 * 1024 * 1024), "300 MiB");
        assert_eq!(bytes_text(6_606_028), "6.3 MiB");
        assert_eq!(bytes_text(12), "12 B");
    }
}
