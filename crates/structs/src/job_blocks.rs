//! The job blocks that connect a job to something outside the scheduler: volumes and their
//! mounts, Vault, Consul and Connect, CSI plugins, autoscaling policies, devices and NUMA,
//! custom DNS and CNI arguments, disconnect and migrate strategies, multiregion deployment,
//! task actions and the web UI's job description. Each has Nomad's wire shape.
//!
//! Holding a block here says nothing about whether drover runs it: the jobspec crate decides
//! which of them a job may use (and refuses the others with a reason). Defaults for them live
//! with the rest of the API's defaults in [`crate::canonicalize`].

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::lenient::wire_struct;
use crate::placement::{Affinity, Constraint};
use crate::time::DurationNs;

/// `VolumeRequest.Type` of a host volume.
pub const VOLUME_TYPE_HOST: &str = "host";
/// `VolumeRequest.Type` of a CSI volume.
pub const VOLUME_TYPE_CSI: &str = "csi";
/// `VolumeMount.PropagationMode` default.
pub const VOLUME_MOUNT_PROPAGATION_PRIVATE: &str = "private";
/// `ScalingPolicy.Type` of a group's `scaling` block.
pub const SCALING_POLICY_TYPE_HORIZONTAL: &str = "horizontal";
/// The default Vault and Consul cluster name.
pub const DEFAULT_INTEGRATION_CLUSTER: &str = "default";

wire_struct! {
    /// A group `volume "name" { ... }` block: a host or CSI volume the group's tasks may mount.
    pub struct VolumeRequest {
        pub name: String,
        pub r#type: String,
        pub source: String,
        pub read_only: bool,
        pub sticky: bool,
        pub access_mode: String,
        pub attachment_mode: String,
        pub mount_options: Option<CsiMountOptions>,
        pub per_alloc: bool,
    }
}

impl VolumeRequest {
    /// The source an allocation named `alloc_name` asks for: with `per_alloc`, the source
    /// followed by the `[index]` suffix of the allocation's name (Nomad's `AllocSuffix`:
    /// `data` for `web.app[1]` is `data[1]`), else the source itself.
    pub fn source_for(&self, alloc_name: &str) -> String {
        if !self.per_alloc {
            return self.source.clone();
        }
        let suffix = alloc_name.rfind('[').map_or("", |open| &alloc_name[open..]);
        format!("{}{suffix}", self.source)
    }
}

wire_struct! {
    /// Mount options of a CSI volume.
    pub struct CsiMountOptions {
        #[serde(rename = "FSType")]
        pub fs_type: String,
        pub mount_flags: Vec<String>,
    }
}

wire_struct! {
    /// A task `volume_mount` block: where a group volume appears inside the task.
    pub struct VolumeMount {
        pub volume: String,
        pub destination: String,
        pub read_only: bool,
        pub propagation_mode: String,
        #[serde(rename = "SELinuxLabel")]
        pub selinux_label: String,
    }
}

wire_struct! {
    /// A `vault` block (job, group or task; the job's and group's are copied into each task
    /// that has none). `Env` is true when the key is absent.
    pub struct Vault {
        pub policies: Vec<String>,
        pub role: String,
        pub namespace: String,
        pub cluster: String,
        pub env: bool = true,
        pub disable_file: bool,
        pub change_mode: String,
        pub change_signal: String,
        pub allow_token_expiration: bool,
    }
}

wire_struct! {
    /// A group or task `consul` block.
    pub struct Consul {
        pub namespace: String,
        pub cluster: String,
        pub partition: String,
    }
}

wire_struct! {
    /// A group `scaling` block (type `horizontal`) or a task `scaling "cpu"|"mem"` block
    /// (`vertical_cpu`, `vertical_mem`). `Policy` is the autoscaler's own configuration, kept as
    /// written. `Enabled` is true when the key is absent.
    pub struct ScalingPolicy {
        #[serde(rename = "ID")]
        pub id: String,
        pub namespace: String,
        pub target: BTreeMap<String, String>,
        pub min: Option<i64>,
        pub max: Option<i64>,
        pub policy: Map<String, Value>,
        pub enabled: bool = true,
        pub r#type: String,
        pub create_index: u64,
        pub modify_index: u64,
    }
}

wire_struct! {
    /// A `migrate` block (job or group): how allocations leave a draining node.
    pub struct MigrateStrategy {
        pub max_parallel: i64,
        pub health_check: String,
        pub min_healthy_time: DurationNs,
        pub healthy_deadline: DurationNs,
    }
}

wire_struct! {
    /// A group `disconnect` block: what happens to allocations on a client that stops
    /// answering. `Replace` is true when the key is absent.
    pub struct DisconnectStrategy {
        pub lost_after: DurationNs,
        pub stop_on_client_after: Option<DurationNs>,
        pub replace: bool = true,
        pub reconcile: String,
    }
}

wire_struct! {
    /// A network's `dns` block.
    pub struct DnsConfig {
        pub servers: Vec<String>,
        pub searches: Vec<String>,
        pub options: Vec<String>,
    }
}

wire_struct! {
    /// A network's `cni` block: arguments passed to the CNI plugins.
    pub struct CniConfig {
        pub args: BTreeMap<String, String>,
    }
}

wire_struct! {
    /// A `device "vendor/type/name" { ... }` block in `resources`.
    pub struct RequestedDevice {
        pub name: String,
        pub count: u64,
        pub constraints: Vec<Constraint>,
        pub affinities: Vec<Affinity>,
    }
}

wire_struct! {
    /// A `numa` block in `resources`.
    pub struct NumaResource {
        pub affinity: String,
        pub devices: Vec<String>,
    }
}

wire_struct! {
    /// A task `csi_plugin` block: the task is a CSI plugin.
    pub struct TaskCsiPluginConfig {
        #[serde(rename = "ID")]
        pub id: String,
        pub r#type: String,
        pub mount_dir: String,
        pub stage_publish_base_dir: String,
        pub health_timeout: DurationNs,
    }
}

wire_struct! {
    /// A job `multiregion` block.
    pub struct Multiregion {
        pub strategy: Option<MultiregionStrategy>,
        pub regions: Vec<MultiregionRegion>,
    }
}

wire_struct! {
    pub struct MultiregionStrategy {
        pub max_parallel: i64,
        pub on_failure: String,
    }
}

wire_struct! {
    pub struct MultiregionRegion {
        pub name: String,
        pub count: i64,
        pub datacenters: Vec<String>,
        pub node_pool: String,
        pub meta: BTreeMap<String, String>,
    }
}

wire_struct! {
    /// A task `action "name" { ... }` block: a command users may run in the task on demand.
    pub struct Action {
        pub name: String,
        pub command: String,
        pub args: Vec<String>,
    }
}

wire_struct! {
    /// A job version's tag (Nomad 1.9's `JobVersionTag`): a name unique among the job's
    /// versions, a description, and when it was applied (Unix nanoseconds).
    pub struct JobVersionTag {
        pub name: String,
        pub description: String,
        pub tagged_time: i64,
    }
}

wire_struct! {
    /// A job `ui` block: a description and links shown by a web UI.
    pub struct JobUiConfig {
        pub description: String,
        pub links: Vec<JobUiLink>,
    }
}

wire_struct! {
    pub struct JobUiLink {
        pub label: String,
        #[serde(rename = "URL")]
        pub url: String,
    }
}

wire_struct! {
    /// A service's `weights` block (Consul DNS weights).
    pub struct ServiceWeights {
        pub passing: i64,
        pub warning: i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_alloc_source_takes_the_allocation_index() {
        let mut request = VolumeRequest {
            r#type: VOLUME_TYPE_HOST.to_string(),
            source: "data".to_string(),
            ..VolumeRequest::default()
        };
        assert_eq!(request.source_for("web.app[1]"), "data");
        request.per_alloc = true;
        assert_eq!(request.source_for("web.app[1]"), "data[1]");
        assert_eq!(request.source_for("web.app[12]"), "data[12]");
        assert_eq!(request.source_for("plain"), "data");
    }
}
