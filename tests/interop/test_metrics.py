"""Interop: `/v1/metrics` read by python-nomad (go-metrics' JSON summary) and by the Python
Prometheus client's own text parser, with a real agent running a real task.

The agent ($DROVER_BIN) runs in dev mode with an explicit `telemetry` block, so what is
published follows the config file, not dev mode's defaults.
"""

import os
import signal
import tempfile
import urllib.error
import urllib.request

import nomad
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import start_dev_agent, wait_for

JOB_ID = "metrics-interop"


class Agent:
    def __init__(self, telemetry):
        self.config = tempfile.NamedTemporaryFile("w", suffix=".hcl", delete=False)
        self.config.write("telemetry {\n" + telemetry + "\n}\n")
        self.config.close()
        self.process, host, port = start_dev_agent(f"-config={self.config.name}")
        self.url = f"http://{host}:{port}"
        self.client = nomad.Nomad(host=host, port=port, timeout=30)
        wait_for("the node to register", lambda: self.client.nodes.get_nodes())

    def get(self, path):
        try:
            with urllib.request.urlopen(self.url + path, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        os.unlink(self.config.name)


@pytest.fixture(scope="module")
def agent():
    agent = Agent(
        'prometheus_metrics = true\n'
        'collection_interval = "200ms"\n'
        "publish_allocation_metrics = true\n"
        "publish_node_metrics = true"
    )
    yield agent
    agent.stop()


def service_job():
    return {
        "Job": {
            "ID": JOB_ID,
            "Name": JOB_ID,
            "Type": "service",
            "Datacenters": ["dc1"],
            "TaskGroups": [
                {
                    "Name": "g",
                    "Count": 1,
                    "Tasks": [
                        {
                            "Name": "t",
                            "Driver": "raw_exec",
                            # Holds some memory so RSS is clearly measured.
                            "Config": {
                                "command": "/bin/sh",
                                "args": ["-c", "x=$(head -c 2000000 /dev/zero | tr -c a a); sleep 300"],
                            },
                            "Resources": {"CPU": 100, "MemoryMB": 64},
                            "KillTimeout": 2000000000,
                        }
                    ],
                }
            ],
        }
    }


def running_alloc(agent):
    allocs = agent.client.job.get_allocations(JOB_ID)
    running = [a for a in allocs if a["ClientStatus"] == "running"]
    return running[0]["ID"] if running else None


def samples_of(families, name, alloc_id):
    for family in families:
        for sample in family.samples:
            if sample.name == name and sample.labels.get("alloc_id") == alloc_id:
                yield sample


def test_prometheus_text_parses_and_holds_per_task_memory_and_cpu(agent):
    agent.client.job.register_job(JOB_ID, service_job())
    alloc_id = wait_for("the task to run", lambda: running_alloc(agent))

    def scrape():
        status, body = agent.get("/v1/metrics?format=prometheus")
        assert status == 200, body
        families = list(text_string_to_metric_families(body))
        rss = list(samples_of(families, "nomad_client_allocs_memory_rss", alloc_id))
        # The job summary gauges are sampled on the server's own collection tick: they catch
        # up with the running allocation a tick after the client's gauges may.
        summary_running = [
            s.value
            for family in families
            if family.name == "nomad_nomad_job_summary_running"
            for s in family.samples
            if s.labels.get("job") == JOB_ID
        ]
        return (families, rss) if rss and summary_running == [1] else None

    families, rss = wait_for("the task's memory gauge and the job summary", scrape)
    assert rss[0].labels["task"] == "t"
    assert rss[0].labels["job"] == JOB_ID
    assert rss[0].labels["task_group"] == "g"
    assert rss[0].labels["namespace"] == "default"
    assert rss[0].value > 500_000
    ticks = list(samples_of(families, "nomad_client_allocs_cpu_total_ticks", alloc_id))
    assert len(ticks) == 1 and ticks[0].value >= 0
    percent = list(samples_of(families, "nomad_client_allocs_cpu_total_percent", alloc_id))
    assert len(percent) == 1
    by_name = {family.name: family for family in families}
    assert by_name["nomad_client_allocs_memory_rss"].type == "gauge"
    running = by_name["nomad_client_allocations_running"].samples
    assert running[0].value == 1
    assert by_name["nomad_client_host_memory_total"].samples[0].value > 0
    summary = [
        s
        for s in by_name["nomad_nomad_job_summary_running"].samples
        if s.labels["job"] == JOB_ID
    ]
    assert summary[0].labels["task_group"] == "g" and summary[0].value == 1
    assert "nomad_nomad_broker_total_ready" in by_name
    assert "nomad_runtime_num_goroutines" in by_name


def test_python_nomad_reads_the_json_summary(agent):
    alloc_id = wait_for("the task to run", lambda: running_alloc(agent))

    def rss_gauge():
        metrics = agent.client.metrics.get_metrics()
        assert set(metrics) >= {"Timestamp", "Gauges", "Counters", "Samples", "Points"}
        return [
            gauge
            for gauge in metrics["Gauges"]
            if gauge["Name"] == "nomad.client.allocs.memory.rss"
            and gauge["Labels"].get("alloc_id") == alloc_id
        ]

    gauge = wait_for("the task's memory gauge in the JSON summary", rss_gauge)[0]
    assert gauge["Labels"]["task"] == "t"
    assert gauge["Value"] > 0


def test_counters_and_samples_follow_go_metrics(agent):
    """The task runner's `nomad.client.allocs.running` counter and the server's
    `nomad.nomad.job.register` timing: cumulative in the Prometheus text, and in the JSON
    summary once the 10 s interval they fell in has finished."""
    alloc_id = wait_for("the task to run", lambda: running_alloc(agent))

    def prometheus():
        status, body = agent.get("/v1/metrics?format=prometheus")
        assert status == 200, body
        by_name = {f.name: f for f in text_string_to_metric_families(body)}
        if "nomad_client_allocs_running" not in by_name:
            return None
        return by_name

    by_name = wait_for("the running counter in the Prometheus text", prometheus)
    running = by_name["nomad_client_allocs_running"]
    assert running.type == "counter"
    ours = [s for s in running.samples if s.labels.get("alloc_id") == alloc_id]
    assert ours and ours[0].value >= 1
    assert ours[0].labels["task"] == "t" and ours[0].labels["job"] == JOB_ID
    register = by_name["nomad_nomad_job_register"]
    assert register.type == "summary"
    counts = [s for s in register.samples if s.name.endswith("_count")]
    assert counts and counts[0].value >= 1

    def json_summary():
        metrics = agent.client.metrics.get_metrics()
        counters = [
            c
            for c in metrics["Counters"]
            if c["Name"] == "nomad.client.allocs.running"
            and c["Labels"].get("alloc_id") == alloc_id
        ]
        samples = [s for s in metrics["Samples"] if s["Name"] == "nomad.nomad.job.register"]
        return (counters, samples) if counters and samples else None

    # Both fell in the interval the job started in; it is shown once it has ended.
    counters, samples = wait_for("the finished interval in the JSON summary", json_summary, 30)
    assert counters[0]["Count"] >= 1 and counters[0]["Labels"]["task_group"] == "g"
    assert samples[0]["Count"] >= 1 and samples[0]["Mean"] >= 0


def test_stopped_allocation_gauges_disappear(agent):
    alloc_id = wait_for("the task to run", lambda: running_alloc(agent))

    # Only the gauges go: the task runner's counters (`nomad.client.allocs.running`, …) carry
    # the allocation's ID too and, as in Nomad's Prometheus sink, stay cumulative.
    def has_gauges():
        _, body = agent.get("/v1/metrics?format=prometheus")
        return any(
            sample.labels.get("alloc_id") == alloc_id
            for family in text_string_to_metric_families(body)
            if family.type == "gauge"
            for sample in family.samples
        )

    wait_for("the running allocation's gauges", has_gauges)
    agent.client.job.deregister_job(JOB_ID, purge=True)
    wait_for("the stopped allocation's gauges to go", lambda: not has_gauges())


def test_prometheus_output_off_answers_415_as_nomad():
    agent = Agent("prometheus_metrics = false\npublish_allocation_metrics = false")
    try:
        status, body = agent.get("/v1/metrics?format=prometheus")
        assert status == 415
        assert "Prometheus is not enabled" in body
        status, _ = agent.get("/v1/metrics")
        assert status == 200
    finally:
        agent.stop()
