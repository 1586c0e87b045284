//! A task's environment: Nomad's `NOMAD_*` variables, the task's own `env` block, variables
//! handed in by prestart hooks, and `${…}` interpolation of those plus node facts into task config
//! strings and env values.
//!
//! Variables set (as Nomad does): `NOMAD_ALLOC_DIR`, `NOMAD_TASK_DIR`, `NOMAD_SECRETS_DIR`,
//! `NOMAD_ALLOC_ID`, `NOMAD_SHORT_ALLOC_ID`, `NOMAD_ALLOC_NAME`, `NOMAD_ALLOC_INDEX`,
//! `NOMAD_GROUP_NAME`, `NOMAD_TASK_NAME`, `NOMAD_JOB_ID`, `NOMAD_JOB_NAME`, `NOMAD_JOB_PARENT_ID`
//! (when dispatched or periodic), `NOMAD_NAMESPACE`, `NOMAD_REGION`, `NOMAD_DC`,
//! `NOMAD_CPU_LIMIT`, `NOMAD_CPU_CORES` (when cores are reserved), `NOMAD_MEMORY_LIMIT`,
//! `NOMAD_MEMORY_MAX_LIMIT` (when set), `NOMAD_META_<key>` (job < group < task meta, under the
//! key as written and upper-cased), and per allocated port `NOMAD_IP_<l>`, `NOMAD_PORT_<l>`,
//! `NOMAD_ADDR_<l>`, `NOMAD_HOST_PORT_<l>`, `NOMAD_HOST_IP_<l>`, `NOMAD_HOST_ADDR_<l>`,
//! `NOMAD_ALLOC_PORT_<l>`, and, once the group's own network (bridge, CNI) has an address,
//! `NOMAD_ALLOC_INTERFACE_<l>`, `NOMAD_ALLOC_IP_<l>`, `NOMAD_ALLOC_ADDR_<l>`; for the ports of the
//! task's own (deprecated) network `NOMAD_IP_<l>`, `NOMAD_IPv4_<l>`, `NOMAD_PORT_<l>`,
//! `NOMAD_ADDR_<l>`, `NOMAD_HOST_PORT_<l>`, and for a sibling task's `NOMAD_ADDR_<task>_<l>`,
//! `NOMAD_IP_<task>_<l>`, `NOMAD_PORT_<task>_<l>`; for each upstream of the group's Connect
//! sidecars `NOMAD_UPSTREAM_IP_<name>`, `NOMAD_UPSTREAM_PORT_<name>`, `NOMAD_UPSTREAM_ADDR_<name>`.
//!
//! Interpolation: `${NAME}` resolves, in order, a task environment variable, then `node.unique.id`,
//! `node.unique.name`, `node.datacenter`, `node.region`, `node.class`, `node.pool`,
//! `attr.<name>` and `meta.<name>` (node meta). Anything unknown is left as written, as Nomad does.
//!
//! **Not** here: HCL variables (`var.*`, resolved by the jobspec), templates.

use std::collections::BTreeMap;
use std::path::Path;

use drover_structs::{Allocation, Node, Task};
use serde_json::{Map, Value};

/// Where the task sees its dirs: host paths (no filesystem isolation, raw_exec) or the fixed
/// paths inside a chroot (exec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskPathView {
    Host,
    Chroot,
}

/// The inputs of a task environment.
#[derive(Debug, Clone, Copy)]
pub struct TaskEnvInputs<'a> {
    pub alloc: &'a Allocation,
    pub task: &'a Task,
    pub node: &'a Node,
    pub region: &'a str,
    pub task_dir: &'a crate::allocdir::TaskDir,
    pub path_view: TaskPathView,
}

/// A task's built environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskEnv {
    /// The variables the task process gets.
    pub env: BTreeMap<String, String>,
    /// Node facts for interpolation (`node.*`, `attr.*`, `meta.*`).
    pub node_values: BTreeMap<String, String>,
}

impl TaskEnv {
    /// Builds the environment of `inputs.task`, with `hook_env` (from prestart hooks) layered
    /// over the task's own env block. The task's env values are themselves interpolated.
    pub fn build(inputs: &TaskEnvInputs<'_>, hook_env: &BTreeMap<String, String>) -> Self {
        let mut env = nomad_variables(inputs);
        let node_values = node_values(inputs.node, inputs.region);
        let mut task_env = TaskEnv {
            env: env.clone(),
            node_values,
        };
        for (key, value) in &inputs.task.env {
            let interpolated = task_env.interpolate(value);
            env.insert(key.clone(), interpolated);
        }
        for (key, value) in hook_env {
            env.insert(key.clone(), value.clone());
        }
        task_env.env = env;
        task_env
    }

    /// Replaces every `${NAME}` that names a known variable or node fact.
    pub fn interpolate(&self, text: &str) -> String {
        let mut output = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            output.push_str(&rest[..start]);
            let after_open = &rest[start + 2..];
            let Some(end) = after_open.find('}') else {
                output.push_str(&rest[start..]);
                return output;
            };
            let name = after_open[..end].trim();
            match self.lookup(name) {
                Some(value) => output.push_str(value),
                None => output.push_str(&rest[start..start + 2 + end + 1]),
            }
            rest = &after_open[end + 1..];
        }
        output.push_str(rest);
        output
    }

    fn lookup(&self, name: &str) -> Option<&str> {
        if let Some(value) = self.env.get(name) {
            return Some(value);
        }
        if let Some(env_name) = name
            .strip_prefix("env[\"")
            .and_then(|inner| inner.strip_suffix("\"]"))
        {
            return self.env.get(env_name).map(String::as_str);
        }
        self.node_values.get(name).map(String::as_str)
    }

    /// Interpolates every string (recursively, values only) of a task's driver config.
    pub fn interpolate_config(&self, config: &Map<String, Value>) -> Map<String, Value> {
        config
            .iter()
            .map(|(key, value)| (key.clone(), self.interpolate_value(value)))
            .collect()
    }

    fn interpolate_value(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.interpolate(text)),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| self.interpolate_value(item))
                    .collect(),
            ),
            Value::Object(map) => Value::Object(self.interpolate_config(map)),
            other => other.clone(),
        }
    }
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn nomad_variables(inputs: &TaskEnvInputs<'_>) -> BTreeMap<String, String> {
    let TaskEnvInputs {
        alloc,
        task,
        node,
        region,
        task_dir,
        path_view,
    } = *inputs;
    let mut env = BTreeMap::new();
    let mut set = |key: &str, value: String| {
        env.insert(key.to_string(), value);
    };

    match path_view {
        TaskPathView::Host => {
            set("NOMAD_ALLOC_DIR", path_text(&task_dir.shared_alloc_dir));
            set("NOMAD_TASK_DIR", path_text(&task_dir.local_dir));
            set("NOMAD_SECRETS_DIR", path_text(&task_dir.secrets_dir));
        }
        TaskPathView::Chroot => {
            set("NOMAD_ALLOC_DIR", "/alloc".to_string());
            set("NOMAD_TASK_DIR", "/local".to_string());
            set("NOMAD_SECRETS_DIR", "/secrets".to_string());
        }
    }

    set("NOMAD_ALLOC_ID", alloc.id.clone());
    set(
        "NOMAD_SHORT_ALLOC_ID",
        alloc.id.chars().take(8).collect::<String>(),
    );
    set("NOMAD_ALLOC_NAME", alloc.name.clone());
    set(
        "NOMAD_ALLOC_INDEX",
        alloc
            .index()
            .map_or_else(|| "0".to_string(), |index| index.to_string()),
    );
    set("NOMAD_GROUP_NAME", alloc.task_group.clone());
    set("NOMAD_TASK_NAME", task.name.clone());
    set("NOMAD_NAMESPACE", alloc.namespace.clone());
    set("NOMAD_REGION", region.to_string());
    set("NOMAD_DC", node.datacenter.clone());

    let job = alloc.job.as_deref();
    if let Some(job) = job {
        set("NOMAD_JOB_ID", job.id.clone());
        set("NOMAD_JOB_NAME", job.name.clone());
        if !job.parent_id.is_empty() {
            set("NOMAD_JOB_PARENT_ID", job.parent_id.clone());
        }
    } else {
        set("NOMAD_JOB_ID", alloc.job_id.clone());
        set("NOMAD_JOB_NAME", alloc.job_id.clone());
    }

    // Resources: the allocated ones when present, else the task's ask.
    let allocated = alloc
        .allocated_resources
        .as_ref()
        .and_then(|resources| resources.tasks.get(&task.name));
    let asked = task.resources.as_ref();
    let cpu = allocated
        .map(|resources| resources.cpu.cpu_shares)
        .or(asked.map(|resources| resources.cpu))
        .unwrap_or(0);
    let memory = allocated
        .map(|resources| resources.memory.memory_mb)
        .or(asked.map(|resources| resources.memory_mb))
        .unwrap_or(0);
    let memory_max = allocated
        .map(|resources| resources.memory.memory_max_mb)
        .or(asked.map(|resources| resources.memory_max_mb))
        .unwrap_or(0);
    set("NOMAD_CPU_LIMIT", cpu.to_string());
    set("NOMAD_MEMORY_LIMIT", memory.to_string());
    if memory_max > 0 {
        set("NOMAD_MEMORY_MAX_LIMIT", memory_max.to_string());
    }
    if let Some(cores) = allocated
        .and_then(|resources| resources.cpu.reserved_cores.as_ref())
        .filter(|cores| !cores.is_empty())
    {
        let list: Vec<String> = cores.iter().map(u16::to_string).collect();
        set("NOMAD_CPU_CORES", list.join(","));
    }

    // Meta: job < group < task.
    let mut meta = BTreeMap::new();
    if let Some(job) = job {
        meta.extend(job.meta.clone());
        if let Some(group) = job.lookup_task_group(&alloc.task_group) {
            meta.extend(group.meta.clone());
        }
    }
    meta.extend(task.meta.clone());
    for (key, value) in meta {
        let sanitized = key.replace(['.', '-'], "_");
        set(&format!("NOMAD_META_{sanitized}"), value.clone());
        set(&format!("NOMAD_META_{}", sanitized.to_uppercase()), value);
    }

    // Ports shared by the group.
    if let Some(resources) = alloc.allocated_resources.as_ref() {
        for port in &resources.shared.ports {
            let label = port.label.replace(['.', '-'], "_");
            let host_ip = if port.host_ip.is_empty() {
                "127.0.0.1".to_string()
            } else {
                port.host_ip.clone()
            };
            let task_port = if port.to > 0 { port.to } else { port.value };
            set(&format!("NOMAD_IP_{label}"), host_ip.clone());
            set(&format!("NOMAD_HOST_IP_{label}"), host_ip.clone());
            set(&format!("NOMAD_PORT_{label}"), task_port.to_string());
            set(&format!("NOMAD_ALLOC_PORT_{label}"), task_port.to_string());
            set(&format!("NOMAD_HOST_PORT_{label}"), port.value.to_string());
            set(
                &format!("NOMAD_ADDR_{label}"),
                format!("{host_ip}:{}", port.value),
            );
            set(
                &format!("NOMAD_HOST_ADDR_{label}"),
                format!("{host_ip}:{}", port.value),
            );
        }
        // The group network's own address (bridge, CNI), as Nomad adds it per port.
        let status = alloc.network_status.as_ref();
        let address = status
            .and_then(|status| status.get("Address"))
            .and_then(Value::as_str)
            .filter(|address| !address.is_empty());
        if let Some(address) = address {
            let interface = status
                .and_then(|status| status.get("InterfaceName"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            for port in &resources.shared.ports {
                let label = port.label.replace(['.', '-'], "_");
                let task_port = if port.to > 0 { port.to } else { port.value };
                set(
                    &format!("NOMAD_ALLOC_INTERFACE_{label}"),
                    interface.to_string(),
                );
                set(&format!("NOMAD_ALLOC_IP_{label}"), address.to_string());
                set(
                    &format!("NOMAD_ALLOC_ADDR_{label}"),
                    format!("{address}:{task_port}"),
                );
            }
        }
    }
    task_network_variables(alloc, task, &mut env);
    if let Some(group) = job.and_then(|job| job.lookup_task_group(&alloc.task_group)) {
        upstream_variables(group, &mut env);
    }
    env
}

/// Nomad's `NOMAD_UPSTREAM_{IP,PORT,ADDR}_<name>` for every upstream of the group's Connect
/// sidecars, in every task of the group: the sidecar listens on 127.0.0.1 inside the group's
/// namespace (Nomad's rule, whatever `local_bind_address` says), under the destination's name
/// as written and with characters an env name cannot hold replaced by `_`.
fn upstream_variables(group: &drover_structs::TaskGroup, env: &mut BTreeMap<String, String>) {
    const IP: &str = "127.0.0.1";
    for service in &group.services {
        let Some(connect) = service
            .connect
            .as_ref()
            .filter(|connect| connect.has_sidecar())
        else {
            continue;
        };
        for upstream in connect.upstreams() {
            let port = upstream.local_bind_port.to_string();
            let clean = clean_env_name(&upstream.destination_name);
            for name in [upstream.destination_name.as_str(), clean.as_str()] {
                env.insert(format!("NOMAD_UPSTREAM_IP_{name}"), IP.to_string());
                env.insert(format!("NOMAD_UPSTREAM_PORT_{name}"), port.clone());
                env.insert(
                    format!("NOMAD_UPSTREAM_ADDR_{name}"),
                    format!("{IP}:{port}"),
                );
            }
        }
    }
}

/// Nomad's `CleanEnvVar(name, '_')`: letters, `_`, `.` and (not first) digits are kept.
fn clean_env_name(name: &str) -> String {
    name.chars()
        .enumerate()
        .map(|(index, c)| {
            if c == '_' || c == '.' || c.is_ascii_alphabetic() || (index > 0 && c.is_ascii_digit())
            {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Nomad's variables for the tasks' own (deprecated) networks: for each port of this task's
/// network `NOMAD_IP_<label>`, `NOMAD_IPv4_<label>` (or `NOMAD_IPv6_`), `NOMAD_HOST_PORT_<label>`,
/// `NOMAD_PORT_<label>` (the host port: the task runs in the host's network; a docker task's
/// `port_map` sets its own in the container) and `NOMAD_ADDR_<label>`; for each port of a
/// sibling task's network `NOMAD_ADDR_<task>_<label>`, `NOMAD_IP_<task>_<label>` and
/// `NOMAD_PORT_<task>_<label>`. Keys are cleaned as Nomad cleans them.
fn task_network_variables(alloc: &Allocation, task: &Task, env: &mut BTreeMap<String, String>) {
    let Some(resources) = alloc.allocated_resources.as_ref() else {
        return;
    };
    let mut set = |key: String, value: String| {
        env.insert(clean_env_key(&key), value);
    };
    let mut unclean = Vec::new();
    for (task_name, task_resources) in &resources.tasks {
        for network in &task_resources.networks {
            let ip = network.ip.as_str();
            for port in network.reserved_ports.iter().chain(&network.dynamic_ports) {
                let label = port.label.as_str();
                let value = port.value.to_string();
                let address = join_host_port(ip, &value);
                if task_name == &task.name {
                    let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
                    set(format!("NOMAD_IP_{label}"), ip.to_string());
                    set(format!("NOMAD_HOST_PORT_{label}"), value.clone());
                    set(format!("NOMAD_ADDR_{label}"), address);
                    set(format!("NOMAD_PORT_{label}"), value);
                    // Not among the prefixes Nomad cleans: set as written.
                    unclean.push((format!("NOMAD_{family}_{label}"), ip.to_string()));
                } else {
                    set(format!("NOMAD_ADDR_{task_name}_{label}"), address);
                    set(format!("NOMAD_IP_{task_name}_{label}"), ip.to_string());
                    set(format!("NOMAD_PORT_{task_name}_{label}"), value);
                }
            }
        }
    }
    env.extend(unclean);
}

/// Nomad's `CleanEnvVar(key, '_')`: every byte but ASCII letters, `_`, `.` and (after the
/// first) digits becomes `_`.
pub(crate) fn clean_env_key(key: &str) -> String {
    key.bytes()
        .enumerate()
        .map(|(index, byte)| match byte {
            b'_' | b'.' | b'a'..=b'z' | b'A'..=b'Z' => byte as char,
            b'0'..=b'9' if index > 0 => byte as char,
            _ => '_',
        })
        .collect()
}

/// `host:port`, with an IPv6 host in brackets (Go's `net.JoinHostPort`).
fn join_host_port(host: &str, port: &str) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

pub(crate) fn node_values(node: &Node, region: &str) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    values.insert("node.unique.id".to_string(), node.id.clone());
    values.insert("node.unique.name".to_string(), node.name.clone());
    values.insert("node.datacenter".to_string(), node.datacenter.clone());
    values.insert("node.region".to_string(), region.to_string());
    values.insert("node.class".to_string(), node.node_class.clone());
    values.insert("node.pool".to_string(), node.node_pool.clone());
    for (key, value) in &node.attributes {
        values.insert(format!("attr.{key}"), value.clone());
    }
    for (key, value) in &node.meta {
        values.insert(format!("meta.{key}"), value.clone());
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocdir::AllocDir;
    use drover_structs::{Job, NetworkResource, Port, Resources, TaskGroup};

    /// The environment of the first task of `alloc`'s first group, in `/data/alloc`, seen from
    /// the host, in region `global`.
    fn first_task_env(
        alloc: &Allocation,
        node: &Node,
        hook_env: &BTreeMap<String, String>,
    ) -> Result<TaskEnv, Box<dyn std::error::Error>> {
        let task = alloc
            .job
            .as_deref()
            .and_then(|job| job.task_groups.first())
            .and_then(|group| group.tasks.first())
            .ok_or("fixture task")?;
        let alloc_dir = AllocDir::new(Path::new("/data/alloc"), &alloc.id)?;
        let task_dir = alloc_dir.task_dir(&task.name)?;
        let inputs = TaskEnvInputs {
            alloc,
            task,
            node,
            region: "global",
            task_dir: &task_dir,
            path_view: TaskPathView::Host,
        };
        Ok(TaskEnv::build(&inputs, hook_env))
    }

    fn fixture() -> (Allocation, Node) {
        let task = Task {
            name: "web".into(),
            driver: "raw_exec".into(),
            env: BTreeMap::from([
                (
                    "GREETING".into(),
                    "hello ${NOMAD_TASK_NAME} on ${node.unique.name}".into(),
                ),
                ("UNKNOWN".into(), "${nope.value}".into()),
            ]),
            meta: BTreeMap::from([("owner".into(), "task".into())]),
            resources: Some(Resources {
                cpu: 250,
                memory_mb: 128,
                memory_max_mb: 256,
                ..Resources::default()
            }),
            ..Task::default()
        };
        let job = Job {
            id: "example/dispatch-1".into(),
            name: "example".into(),
            parent_id: "example".into(),
            meta: BTreeMap::from([
                ("owner".into(), "job".into()),
                ("team".into(), "ops".into()),
            ]),
            task_groups: vec![TaskGroup {
                name: "cache".into(),
                tasks: vec![task],
                ..TaskGroup::default()
            }],
            ..Job::default()
        };
        let alloc = Allocation {
            id: "8e3a1b2c-0000-4000-8000-000000000000".into(),
            name: "example.cache[3]".into(),
            namespace: "default".into(),
            task_group: "cache".into(),
            job_id: job.id.clone(),
            job: Some(std::sync::Arc::new(job)),
            ..Allocation::default()
        };
        let node = Node {
            id: "node-1".into(),
            name: "box".into(),
            datacenter: "dc1".into(),
            attributes: BTreeMap::from([("kernel.name".into(), "linux".into())]),
            ..Node::default()
        };
        (alloc, node)
    }

    #[test]
    fn task_network_ports_are_in_the_task_and_sibling_env() -> Result<(), Box<dyn std::error::Error>>
    {
        let (mut alloc, node) = fixture();
        let network = |ip: &str, reserved: (&str, i64), dynamic: (&str, i64)| NetworkResource {
            device: "eth0".into(),
            ip: ip.into(),
            mbits: 10,
            reserved_ports: vec![Port {
                label: reserved.0.into(),
                value: reserved.1,
                ..Port::default()
            }],
            dynamic_ports: vec![Port {
                label: dynamic.0.into(),
                value: dynamic.1,
                ..Port::default()
            }],
            ..NetworkResource::default()
        };
        let mut allocated = drover_structs::AllocatedResources::default();
        allocated.tasks.insert(
            "web".into(),
            drover_structs::AllocatedTaskResources {
                networks: vec![network("10.0.0.5", ("admin", 9090), ("http", 23456))],
                ..Default::default()
            },
        );
        allocated.tasks.insert(
            "side-car".into(),
            drover_structs::AllocatedTaskResources {
                networks: vec![network("10.0.0.5", ("db-main", 5432), ("stats", 24000))],
                ..Default::default()
            },
        );
        alloc.allocated_resources = Some(allocated);
        let env = first_task_env(&alloc, &node, &BTreeMap::new())?;
        let get = |key: &str| env.env.get(key).cloned().unwrap_or_default();
        assert_eq!(get("NOMAD_PORT_http"), "23456");
        assert_eq!(get("NOMAD_HOST_PORT_http"), "23456");
        assert_eq!(get("NOMAD_IP_http"), "10.0.0.5");
        assert_eq!(get("NOMAD_IPv4_http"), "10.0.0.5");
        assert_eq!(get("NOMAD_ADDR_http"), "10.0.0.5:23456");
        assert_eq!(get("NOMAD_PORT_admin"), "9090");
        assert_eq!(get("NOMAD_ADDR_admin"), "10.0.0.5:9090");
        // A sibling's ports, keys cleaned as Nomad cleans them.
        assert_eq!(get("NOMAD_ADDR_side_car_db_main"), "10.0.0.5:5432");
        assert_eq!(get("NOMAD_IP_side_car_stats"), "10.0.0.5");
        assert_eq!(get("NOMAD_PORT_side_car_stats"), "24000");
        assert!(!env.env.contains_key("NOMAD_PORT_stats"));
        assert_eq!(clean_env_key("NOMAD_PORT_a-b.c9"), "NOMAD_PORT_a_b.c9");
        assert_eq!(join_host_port("::1", "80"), "[::1]:80");
        Ok(())
    }

    #[test]
    fn connect_upstreams_are_in_every_task_env_as_nomad_names_them()
    -> Result<(), Box<dyn std::error::Error>> {
        let (mut alloc, node) = fixture();
        let mut job = alloc.job.as_deref().cloned().ok_or("fixture job")?;
        job.task_groups[0].services = vec![drover_structs::Service {
            name: "count-dashboard".into(),
            connect: Some(serde_json::from_value(serde_json::json!({
                "SidecarService": {"Proxy": {"Upstreams": [
                    {"DestinationName": "count-api", "LocalBindPort": 8080,
                     "LocalBindAddress": "127.0.0.2"}
                ]}}
            }))?),
            ..drover_structs::Service::default()
        }];
        alloc.job = Some(std::sync::Arc::new(job));
        let env = first_task_env(&alloc, &node, &BTreeMap::new())?;
        let get = |key: &str| env.env.get(key).cloned().unwrap_or_default();
        assert_eq!(get("NOMAD_UPSTREAM_ADDR_count_api"), "127.0.0.1:8080");
        assert_eq!(get("NOMAD_UPSTREAM_IP_count_api"), "127.0.0.1");
        assert_eq!(get("NOMAD_UPSTREAM_PORT_count_api"), "8080");
        assert_eq!(get("NOMAD_UPSTREAM_ADDR_count-api"), "127.0.0.1:8080");
        assert_eq!(clean_env_name("9-a.b_c"), "__a.b_c");
        Ok(())
    }

    #[test]
    fn nomad_variables_and_interpolation() -> Result<(), Box<dyn std::error::Error>> {
        let (alloc, node) = fixture();
        let hook_env = BTreeMap::from([("FROM_HOOK".to_string(), "1".to_string())]);
        let env = first_task_env(&alloc, &node, &hook_env)?;
        let get = |key: &str| env.env.get(key).cloned().unwrap_or_default();
        assert_eq!(get("NOMAD_ALLOC_ID"), alloc.id);
        assert_eq!(get("NOMAD_SHORT_ALLOC_ID"), "8e3a1b2c");
        assert_eq!(get("NOMAD_ALLOC_INDEX"), "3");
        assert_eq!(get("NOMAD_ALLOC_NAME"), "example.cache[3]");
        assert_eq!(get("NOMAD_GROUP_NAME"), "cache");
        assert_eq!(get("NOMAD_TASK_NAME"), "web");
        assert_eq!(get("NOMAD_JOB_ID"), "example/dispatch-1");
        assert_eq!(get("NOMAD_JOB_NAME"), "example");
        assert_eq!(get("NOMAD_JOB_PARENT_ID"), "example");
        assert_eq!(get("NOMAD_DC"), "dc1");
        assert_eq!(get("NOMAD_REGION"), "global");
        assert_eq!(get("NOMAD_CPU_LIMIT"), "250");
        assert_eq!(get("NOMAD_MEMORY_LIMIT"), "128");
        assert_eq!(get("NOMAD_MEMORY_MAX_LIMIT"), "256");
        assert_eq!(get("NOMAD_META_owner"), "task");
        assert_eq!(get("NOMAD_META_OWNER"), "task");
        assert_eq!(get("NOMAD_META_team"), "ops");
        assert_eq!(
            get("NOMAD_TASK_DIR"),
            format!("/data/alloc/{}/web/local", alloc.id)
        );
        assert_eq!(
            get("NOMAD_ALLOC_DIR"),
            format!("/data/alloc/{}/alloc", alloc.id)
        );
        assert_eq!(get("GREETING"), "hello web on box");
        assert_eq!(get("UNKNOWN"), "${nope.value}");
        assert_eq!(get("FROM_HOOK"), "1");

        let config = serde_json::json!({
            "command": "/bin/echo",
            "args": ["${NOMAD_ALLOC_INDEX}", "${attr.kernel.name}", "${env[\"NOMAD_DC\"]}", 5],
            "nested": {"path": "${NOMAD_TASK_DIR}/x ${unclosed"}
        });
        let interpolated = env.interpolate_config(config.as_object().ok_or("object")?);
        assert_eq!(
            Value::Object(interpolated),
            serde_json::json!({
                "command": "/bin/echo",
                "args": ["3", "linux", "dc1", 5],
                "nested": {"path": format!("/data/alloc/{}/web/local/x ${{unclosed", alloc.id)}
            })
        );
        Ok(())
    }
}
