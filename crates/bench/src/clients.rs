//! `run-clients`: register → N `sleep` tasks running across client agents of their own (one
//! process and data dir each) of a server-only agent whose state is in the embedded store or,
//! with `--etcd`, in etcd: the same scenario as `run-sleep`, with the server's writes and the
//! clients' updates crossing HTTP as in a cluster.
//!
//! Not here: the agents' processes (`agent`), the shared waits (`process`).

use std::time::Duration;

use crate::agent::{AgentProcess, backend_note, poll};
use crate::process::{Bench, START_LIMIT, fresh_dir, run_sleeps, stop_and_wait_gone};
use crate::procfs;
use crate::stats::Report;

pub fn run_clients(bench: &Bench, count: usize, clients: usize) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for run in 0..bench.runs {
        let temp = fresh_dir()?;
        let server =
            AgentProcess::spawn_server(&bench.drover, &temp.path().join("server").join("data"))?;
        server.wait_api_ready(START_LIMIT)?;
        let server_address = server.address.trim_start_matches("http://").to_owned();
        let agents = (0..clients)
            .map(|number| {
                AgentProcess::spawn_client(
                    &bench.drover,
                    &temp.path().join(format!("client-{number}")).join("data"),
                    &server_address,
                    &format!("client-{number}"),
                )
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        poll(
            START_LIMIT,
            Duration::from_millis(20),
            "the clients' nodes to be ready",
            || {
                let nodes = server.get_json("/v1/nodes").ok()?;
                let ready = nodes
                    .as_array()?
                    .iter()
                    .filter(|node| node["Status"] == "ready")
                    .count();
                (ready == clients).then_some(())
            },
        )?;
        let job_id = format!("clients-{count}-{run}");
        let server_cpu = procfs::cpu_ms(server.pid());
        let clients_cpu: f64 = agents.iter().map(|agent| procfs::cpu_ms(agent.pid())).sum();
        let (elapsed, allocs) = run_sleeps(&server, &job_id, count)?;
        report.add(
            &format!("register -> {count} allocs running on {clients} clients"),
            "ms",
            elapsed.as_secs_f64() * 1000.0,
        );
        report.add(
            "server agent on-CPU time, register -> running",
            "ms",
            procfs::cpu_ms(server.pid()) - server_cpu,
        );
        report.add(
            "client agents' on-CPU time (sum), register -> running",
            "ms",
            agents
                .iter()
                .map(|agent| procfs::cpu_ms(agent.pid()))
                .sum::<f64>()
                - clients_cpu,
        );
        let mut per_node = std::collections::BTreeMap::<String, usize>::new();
        for alloc in &allocs {
            *per_node
                .entry(alloc["NodeName"].as_str().unwrap_or_default().to_owned())
                .or_default() += 1;
        }
        report.note(format!("run {}: allocs per client {per_node:?}", run + 1));
        let tasks: Vec<i32> = agents
            .iter()
            .flat_map(|agent| procfs::data_dir_processes(&agent.data_dir, &[agent.pid()]).tasks)
            .collect();
        if tasks.len() != count {
            report.note(format!(
                "run {}: found {} task processes for {count} allocs",
                run + 1,
                tasks.len()
            ));
        }
        let (gone, _) = stop_and_wait_gone(&server, &job_id, &tasks)?;
        report.add(
            "stop -> all task processes gone",
            "ms",
            gone.as_secs_f64() * 1000.0,
        );
        drop(agents);
        drop(server);
        report.record_load();
    }
    report.note(format!(
        "a server-only agent ({}) and {clients} client-only agents, each its own process, raw_exec sleep tasks",
        backend_note()
    ));
    Ok(report)
}
