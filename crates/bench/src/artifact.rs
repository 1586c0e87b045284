//! `run-artifact --count N`: register → N tasks running when each task fetches a checksummed
//! tar.gz artifact, first with the node's artifact cache cold (one download shared by the N
//! allocations), then for a second job naming the same artifact (cache hit, unpack only),
//! then for a job without an artifact, all on one agent. The artifact (1 MiB of incompressible
//! data plus a small file, made with the system's `tar`) is served by an HTTP server on
//! 127.0.0.1 in this process, which counts its requests.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::agent::AgentProcess;
use crate::process::{
    Bench, START_LIMIT, fresh_dir, job_hcl, ms, poll_interval, register_body, wait_allocs_status,
};
use crate::stats::Report;

/// Serves `body` at any path; returns the URL base and the request counter.
fn serve(body: Vec<u8>) -> anyhow::Result<(String, Arc<AtomicUsize>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = format!("http://{}", listener.local_addr()?);
    let requests = Arc::new(AtomicUsize::new(0));
    let counter = requests.clone();
    let body = Arc::new(body);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (body, counter) = (body.clone(), counter.clone());
            std::thread::spawn(move || {
                let Ok(clone) = stream.try_clone() else {
                    return;
                };
                let mut reader = BufReader::new(clone);
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|read| read > 0) {
                    if line == "\r\n" {
                        break;
                    }
                    line.clear();
                }
                counter.fetch_add(1, Ordering::SeqCst);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body);
            });
        }
    });
    Ok((address, requests))
}

/// A tar.gz of 1 MiB of random bytes and a small file, and its sha256.
fn tarball(dir: &std::path::Path) -> anyhow::Result<(Vec<u8>, String)> {
    let content = dir.join("content");
    std::fs::create_dir_all(&content)?;
    // Incompressible bytes from xorshift, so the archive is as large as its content.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let random: Vec<u8> = (0..1 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u8
        })
        .collect();
    std::fs::write(content.join("blob.bin"), random)?;
    std::fs::write(content.join("hello.txt"), "hello\n")?;
    let archive = dir.join("app.tar.gz");
    let status = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(&content)
        .arg(".")
        .status()
        .context("running tar")?;
    if !status.success() {
        bail!("tar failed: {status}");
    }
    let output = Command::new("sha256sum").arg(&archive).output()?;
    let digest = String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    Ok((std::fs::read(&archive)?, digest))
}

fn run_job(
    agent: &AgentProcess,
    hcl: &str,
    job_id: &str,
    count: usize,
) -> anyhow::Result<Duration> {
    let body = register_body(agent, hcl)?;
    let started = Instant::now();
    agent.send_json("PUT", "/v1/jobs", &body)?;
    wait_allocs_status(
        agent,
        job_id,
        count,
        "running",
        poll_interval(count),
        Duration::from_secs(600),
    )?;
    Ok(started.elapsed())
}

pub fn run_artifact(bench: &Bench, count: usize) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for run in 0..bench.runs {
        let temp = fresh_dir()?;
        let (archive, digest) = tarball(temp.path())?;
        let (address, requests) = serve(archive)?;
        let agent = AgentProcess::spawn(&bench.drover, &temp.path().join("data"))?;
        agent.wait_node_ready(START_LIMIT)?;
        let artifact = format!(
            "      artifact {{\n        source = \"{address}/app.tar.gz\"\n        options {{\n          checksum = \"sha256:{digest}\"\n        }}\n      }}\n"
        );
        let with_artifact = |job_id: &str| {
            job_hcl(job_id, "service", count, "/bin/sleep", &["3600"]).replacen(
                "      logs {",
                &format!("{artifact}      logs {{"),
                1,
            )
        };
        let cold_id = format!("artifact-cold-{run}");
        let cold = run_job(&agent, &with_artifact(&cold_id), &cold_id, count)?;
        report.add(
            &format!("register -> {count} running, artifact not cached"),
            "ms",
            ms(cold),
        );
        let cached_id = format!("artifact-cached-{run}");
        let cached = run_job(&agent, &with_artifact(&cached_id), &cached_id, count)?;
        report.add(
            &format!("register -> {count} running, artifact cached"),
            "ms",
            ms(cached),
        );
        let plain_id = format!("no-artifact-{run}");
        let plain = run_job(
            &agent,
            &job_hcl(&plain_id, "service", count, "/bin/sleep", &["3600"]),
            &plain_id,
            count,
        )?;
        report.add(
            &format!("register -> {count} running, no artifact"),
            "ms",
            ms(plain),
        );
        let fetched = requests.load(Ordering::SeqCst);
        if fetched != 1 {
            report.note(format!("run {}: {fetched} downloads, expected 1", run + 1));
        }
        drop(agent);
        report.record_load();
    }
    report.note("artifact: a 1 MiB tar.gz with a sha256 checksum, served on 127.0.0.1");
    Ok(report)
}
