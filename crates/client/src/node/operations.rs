//! The operations the HTTP API asks of the node: look up, stats, restart, signal, stop.

use std::collections::BTreeMap;
use std::sync::Arc;

use drover_structs::Allocation;

use super::client::Client;
use super::error::ClientError;
use super::runner::{AllocRunnerFactory, AllocRunnerHandle};
use crate::server_conn::ServerConn;

impl<S: ServerConn, F: AllocRunnerFactory> Client<S, F> {
    /// The runner of an allocation.
    pub fn runner(&self, alloc_id: &str) -> Result<Arc<F::Runner>, ClientError> {
        self.read_runners()
            .get(alloc_id)
            .cloned()
            .ok_or_else(|| ClientError::UnknownAlloc {
                alloc_id: alloc_id.to_string(),
            })
    }

    /// The allocation as this node runs it.
    pub fn alloc(&self, alloc_id: &str) -> Result<Allocation, ClientError> {
        Ok(self.runner(alloc_id)?.alloc())
    }

    /// Nomad's `AllocResourceUsage` of an allocation: each running task's usage (or only
    /// `task`'s) and their sum. Cpu ticks are scaled by the node's total compute per core.
    pub async fn alloc_stats(
        &self,
        alloc_id: &str,
        task: Option<&str>,
    ) -> Result<drover_structs::AllocResourceUsage, ClientError> {
        let runner = self.runner(alloc_id)?;
        let usage = runner.stats(task).await?;
        let node = self.node();
        let cores = node
            .attributes
            .get("cpu.numcores")
            .and_then(|cores| cores.parse::<u32>().ok())
            .unwrap_or(1);
        let total_mhz = node
            .node_resources
            .as_ref()
            .map_or(0.0, |resources| resources.cpu.cpu_shares as f64);
        Ok(alloc_resource_usage(&usage, total_mhz, cores))
    }

    /// The IDs of every allocation with a runner here, sorted.
    pub fn alloc_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.read_runners().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Restarts one task, the running tasks, or every task (`all_tasks`) of an allocation.
    pub async fn restart(
        &self,
        alloc_id: &str,
        task: Option<&str>,
        all_tasks: bool,
    ) -> Result<(), ClientError> {
        if task.is_some() && all_tasks {
            return Err(ClientError::InvalidRequest {
                alloc_id: alloc_id.to_string(),
                message: "task name and all tasks cannot both be given".to_string(),
            });
        }
        self.runner(alloc_id)?.restart(task, all_tasks).await
    }

    /// Sends a signal to one task or every task of an allocation.
    pub async fn signal(
        &self,
        alloc_id: &str,
        task: Option<&str>,
        signal: &str,
    ) -> Result<(), ClientError> {
        self.runner(alloc_id)?.signal(task, signal).await
    }

    /// Stops an allocation here, as the server does by setting its desired status to `stop`.
    /// The API's `/v1/allocation/<id>/stop` goes through the server instead (which also
    /// reschedules); this is the node-local form, for draining and tests.
    pub async fn stop(&self, alloc_id: &str) -> Result<(), ClientError> {
        let runner = self.runner(alloc_id)?;
        let mut alloc = runner.alloc();
        alloc.desired_status = drover_structs::ALLOC_DESIRED_STATUS_STOP.to_string();
        alloc.desired_description = "stopped on the node".to_string();
        runner.update(alloc).await;
        Ok(())
    }
}

/// Converts the drivers' task usage into Nomad's wire form, with the allocation's sum.
pub fn alloc_resource_usage(
    usage: &BTreeMap<String, drover_driver::TaskResourceUsage>,
    node_total_mhz: f64,
    node_cores: u32,
) -> drover_structs::AllocResourceUsage {
    let mut total = drover_structs::ResourceUsage::default();
    let mut tasks = BTreeMap::new();
    let mut latest = 0i64;
    for (name, task) in usage {
        let resource_usage = drover_structs::ResourceUsage {
            memory_stats: drover_structs::MemoryStats {
                rss: task.memory.rss,
                cache: task.memory.cache,
                swap: task.memory.swap,
                usage: task.memory.usage,
                max_usage: task.memory.max_usage,
                kernel_usage: task.memory.kernel_usage,
                kernel_max_usage: task.memory.kernel_max_usage,
                measured: task.memory.measured.clone(),
                ..Default::default()
            },
            cpu_stats: drover_structs::CpuStats {
                system_mode: task.cpu.system_mode_percent,
                user_mode: task.cpu.user_mode_percent,
                total_ticks: task.cpu.total_ticks(node_total_mhz, node_cores),
                throttled_periods: task.cpu.throttled_periods,
                throttled_time: task.cpu.throttled_time_ns,
                percent: task.cpu.percent,
                measured: task.cpu.measured.clone(),
            },
            device_stats: None,
        };
        total.add(&resource_usage);
        let timestamp = i64::try_from(task.timestamp_unix_ns).unwrap_or(i64::MAX);
        latest = latest.max(timestamp);
        tasks.insert(
            name.clone(),
            drover_structs::TaskResourceUsage {
                resource_usage,
                timestamp,
                pids: None,
            },
        );
    }
    drover_structs::AllocResourceUsage {
        resource_usage: total,
        tasks,
        timestamp: latest,
    }
}
