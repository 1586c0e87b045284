//! `drover operator snapshot save | restore | inspect` and `drover operator raft list-peers`,
//! with Nomad's flags and output, and `drover operator etcd members` (drover's own: the etcd
//! cluster under a cluster of servers, the raft peers of its state).
//!
//! A snapshot file carries the keyring's key-encryption key unless saved with `-redact`, so it
//! is written readable by its owner only. Not here: the archive's format (`drover_state`).

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;

use clap::{Args, Subcommand};
use drover_state::archive::Snapshot;

use crate::commands::describe;
use crate::{ApiFlags, Io, columnize, format};

#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Save, restore and inspect snapshots of the servers' state
    #[command(subcommand)]
    Snapshot(SnapshotCommand),
    /// Look at the servers' peer set
    #[command(subcommand)]
    Raft(RaftCommand),
    /// Look at the etcd cluster a cluster of servers keeps its state in
    #[command(subcommand)]
    Etcd(EtcdCommand),
}

#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Save a snapshot of the servers' state
    Save(SaveArgs),
    /// Restore a snapshot of the servers' state
    Restore(RestoreArgs),
    /// Describe a snapshot file
    Inspect(InspectArgs),
}

#[derive(Debug, Subcommand)]
pub enum RaftCommand {
    /// List the servers
    ListPeers(ListPeersArgs),
}

#[derive(Debug, Subcommand)]
pub enum EtcdCommand {
    /// List the etcd cluster's members
    Members(EtcdMembersArgs),
}

#[derive(Debug, Args)]
pub struct SaveArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Let any server answer, from a copy that may lag (the etcd member it reads from).
    #[arg(long)]
    pub stale: bool,
    /// Leave out the keyring's key-encryption key (the snapshot then restores only where
    /// that key is held).
    #[arg(long)]
    pub redact: bool,
    pub file: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    pub file: Vec<String>,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Print the snapshot's description as JSON.
    #[arg(long)]
    pub json: bool,
    pub file: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ListPeersArgs {
    #[command(flatten)]
    pub api: ApiFlags,
    /// Accepted for Nomad's sake: every server answers from the same etcd.
    #[arg(long)]
    pub stale: bool,
}

#[derive(Debug, Args)]
pub struct EtcdMembersArgs {
    #[command(flatten)]
    pub api: ApiFlags,
}

pub async fn run(command: OperatorCommand, io: &mut Io<'_>) -> i32 {
    match command {
        OperatorCommand::Snapshot(SnapshotCommand::Save(arguments)) => save(arguments, io).await,
        OperatorCommand::Snapshot(SnapshotCommand::Restore(arguments)) => {
            restore(arguments, io).await
        }
        OperatorCommand::Snapshot(SnapshotCommand::Inspect(arguments)) => inspect(&arguments, io),
        OperatorCommand::Raft(RaftCommand::ListPeers(arguments)) => list_peers(arguments, io).await,
        OperatorCommand::Etcd(EtcdCommand::Members(arguments)) => etcd_members(arguments, io).await,
    }
}

fn client_or_report(api: &ApiFlags, io: &mut Io<'_>) -> Option<drover_api::client::ApiClient> {
    match api.client() {
        Ok(client) => Some(client),
        Err(error) => {
            io.error(format!("Error initializing client: {error}"));
            None
        }
    }
}

/// Nomad's default name: `<name>-state-<year><month><day>-<unix seconds>.snap` (the day is
/// not padded, as Nomad's format string has it).
fn default_snapshot_name() -> String {
    let now = format::now_unix_nanos() / 1_000_000_000;
    let date = format::date_from_unix_nanos(now * 1_000_000_000);
    let (year, month, day) = (
        date.get(0..4).unwrap_or("0000"),
        date.get(5..7).unwrap_or("00"),
        date.get(8..10).unwrap_or("00").trim_start_matches('0'),
    );
    format!("drover-state-{year}{month}{day}-{now}.snap")
}

async fn save(arguments: SaveArgs, io: &mut Io<'_>) -> i32 {
    if arguments.file.len() > 1 {
        io.error("This command takes either no arguments or one: <filename>");
        io.error("For additional help try 'drover operator snapshot save -help'");
        return 1;
    }
    let filename = arguments
        .file
        .first()
        .cloned()
        .unwrap_or_else(default_snapshot_name);
    match std::fs::symlink_metadata(&filename) {
        Ok(_) => {
            io.error(format!("Destination file already exists: {filename:?}"));
            io.error("For additional help try 'drover operator snapshot save -help'");
            return 1;
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            io.error(format!("Unexpected failure checking {filename:?}: {error}"));
            return 1;
        }
    }
    let Some(client) = client_or_report(&arguments.api, io) else {
        return 1;
    };
    let temporary = format!("{filename}.tmp");
    // Owner-only from the start: the file carries the keyring's key-encryption key.
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
    {
        Ok(file) => file,
        Err(error) => {
            io.error(format!("Failed to create file: {error}"));
            return 1;
        }
    };
    let mut bytes = match client.snapshot_save(arguments.stale).await {
        Ok(bytes) => bytes,
        Err(error) => {
            let _ = std::fs::remove_file(&temporary);
            io.error(format!("Failed to get snapshot file: {error}"));
            return 1;
        }
    };
    if arguments.redact {
        io.say("Redacting key material from snapshot");
        match Snapshot::decode(&bytes).and_then(|snapshot| snapshot.redacted().encode()) {
            Ok(redacted) => bytes = redacted,
            Err(error) => {
                let _ = std::fs::remove_file(&temporary);
                io.error(format!("Could not redact snapshot: {error}"));
                return 1;
            }
        }
    }
    if let Err(error) = file.write_all(&bytes).and_then(|()| file.sync_all()) {
        let _ = std::fs::remove_file(&temporary);
        io.error(format!("Failed to download snapshot file: {error}"));
        return 1;
    }
    if let Err(error) = std::fs::rename(&temporary, &filename) {
        io.error(format!("Failed to finalize snapshot file: {error}"));
        return 1;
    }
    io.say(format!("State file written to {filename}"));
    0
}

async fn restore(arguments: RestoreArgs, io: &mut Io<'_>) -> i32 {
    let [filename] = arguments.file.as_slice() else {
        io.error("This command takes one argument: <filename>");
        io.error("For additional help try 'drover operator snapshot restore -help'");
        return 1;
    };
    let bytes = match std::fs::read(filename) {
        Ok(bytes) => bytes,
        Err(error) => {
            io.error(format!(
                "Error opening snapshot file: {:?}",
                format!("open {filename}: {error}")
            ));
            return 1;
        }
    };
    let Some(client) = client_or_report(&arguments.api, io) else {
        return 1;
    };
    match client.snapshot_restore(bytes).await {
        Ok(_) => {
            io.say("Snapshot Restored");
            0
        }
        Err(error) => {
            io.error(format!("Failed to get restore snapshot: {error}"));
            1
        }
    }
}

/// Sizes as Go's `humanize.IBytes` writes them: `667 B`, `1.2 KiB`, `12 MiB`.
fn ibytes(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 10 {
        return format!("{bytes} B");
    }
    let exponent = ((bytes as f64).ln() / 1024_f64.ln()).floor() as usize;
    let exponent = exponent.min(UNITS.len() - 1);
    let value = (bytes as f64 / 1024_f64.powi(exponent as i32) * 10.0 + 0.5).floor() / 10.0;
    if value < 10.0 {
        format!("{value:.1} {}", UNITS[exponent])
    } else {
        format!("{value:.0} {}", UNITS[exponent])
    }
}

fn inspect(arguments: &InspectArgs, io: &mut Io<'_>) -> i32 {
    let [filename] = arguments.file.as_slice() else {
        io.error("This command takes one argument: <filename>");
        io.error("For additional help try 'drover operator snapshot inspect -help'");
        return 1;
    };
    let bytes = match std::fs::read(filename) {
        Ok(bytes) => bytes,
        Err(error) => {
            io.error(format!(
                "Error opening snapshot file: open {filename}: {error}"
            ));
            return 1;
        }
    };
    let snapshot = match Snapshot::decode(&bytes) {
        Ok(snapshot) => snapshot,
        Err(error) => {
            io.error(format!("Error inspecting snapshot: {error}"));
            return 1;
        }
    };
    let stats = snapshot.table_stats();
    if arguments.json {
        let value = serde_json::json!({ "Meta": snapshot.meta, "Stats": stats });
        match serde_json::to_string_pretty(&value) {
            Ok(text) => io.say(text),
            Err(error) => {
                io.error(error.to_string());
                return 1;
            }
        }
        return 0;
    }
    let created = snapshot.created_unix_ms();
    io.say(columnize::key_values(&[
        (
            "Created",
            if created > 0 {
                format::date_from_unix_nanos(created.saturating_mul(1_000_000))
            } else {
                String::new()
            },
        ),
        ("ID", snapshot.meta.id.clone()),
        ("Size", ibytes(snapshot.meta.size)),
        ("Index", snapshot.meta.index.to_string()),
        ("Term", snapshot.meta.term.to_string()),
        ("Version", snapshot.meta.version.to_string()),
        ("Backend", snapshot.meta.backend.clone()),
        (
            "Keyring",
            if snapshot.meta.keyring_included {
                "included".to_owned()
            } else {
                "redacted".to_owned()
            },
        ),
    ]));
    io.say("");
    let mut rows = vec![vec![
        "Type".to_owned(),
        "Count".to_owned(),
        "Size".to_owned(),
    ]];
    for stat in &stats {
        rows.push(vec![
            stat.name.clone(),
            stat.count.to_string(),
            ibytes(stat.sum),
        ]);
    }
    rows.push(vec![String::new(), String::new(), String::new()]);
    rows.push(vec![
        "Total".to_owned(),
        stats.iter().map(|stat| stat.count).sum::<u64>().to_string(),
        ibytes(stats.iter().map(|stat| stat.sum).sum()),
    ]);
    io.say(columnize::columns(&rows));
    0
}

fn text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

async fn list_peers(arguments: ListPeersArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client_or_report(&arguments.api, io) else {
        return 1;
    };
    let query = if arguments.stale {
        vec![("stale", "true".to_owned())]
    } else {
        Vec::new()
    };
    let reply = match client
        .call_json_query("GET", "/v1/operator/raft/configuration", &query, None)
        .await
    {
        Ok(reply) => reply.unwrap_or_default(),
        Err(error) => {
            io.error(format!("Failed to retrieve raft configuration: {error}"));
            return 1;
        }
    };
    let mut servers = reply["Servers"].as_array().cloned().unwrap_or_default();
    servers.sort_by(|a, b| a["Node"].as_str().cmp(&b["Node"].as_str()));
    let mut rows = vec![
        ["Node", "ID", "Address", "State", "Voter", "RaftProtocol"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for server in &servers {
        let state = if server["Leader"] == true {
            "leader"
        } else {
            "follower"
        };
        rows.push(vec![
            text(&server["Node"]),
            text(&server["ID"]),
            text(&server["Address"]),
            state.to_owned(),
            text(&server["Voter"]),
            text(&server["RaftProtocol"]),
        ]);
    }
    io.say(columnize::columns(&rows));
    0
}

async fn etcd_members(arguments: EtcdMembersArgs, io: &mut Io<'_>) -> i32 {
    let Some(client) = client_or_report(&arguments.api, io) else {
        return 1;
    };
    let reply = match client
        .call_json("GET", "/v1/operator/etcd/members", None)
        .await
    {
        Ok(reply) => reply.unwrap_or_default(),
        Err(error) => {
            io.error(describe("querying the etcd members", &error));
            return 1;
        }
    };
    let mut rows = vec![
        [
            "Name",
            "ID",
            "Client URLs",
            "State",
            "Voter",
            "Version",
            "DB Size",
            "Raft Term",
            "Raft Index",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for member in reply["Members"].as_array().into_iter().flatten() {
        let reachable = member["Reachable"] == true;
        let state = match (reachable, member["Leader"] == true) {
            (false, _) => "unreachable",
            (true, true) => "leader",
            (true, false) => "follower",
        };
        let urls: Vec<String> = member["ClientURLs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        let known = |value: &serde_json::Value| {
            if reachable {
                text(value)
            } else {
                String::new()
            }
        };
        rows.push(vec![
            text(&member["Name"]),
            text(&member["ID"]),
            urls.join(","),
            state.to_owned(),
            (member["IsLearner"] != true).to_string(),
            known(&member["Version"]),
            if reachable {
                ibytes(member["DbSize"].as_u64().unwrap_or(0))
            } else {
                String::new()
            },
            known(&member["RaftTerm"]),
            known(&member["RaftIndex"]),
        ]);
    }
    io.say(columnize::columns(&rows));
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_humanize_writes_them() {
        assert_eq!(ibytes(0), "0 B");
        assert_eq!(ibytes(667), "667 B");
        assert_eq!(ibytes(1229), "1.2 KiB");
        assert_eq!(ibytes(12 * 1024 * 1024), "12 MiB");
    }
}
