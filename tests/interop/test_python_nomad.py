"""Interop: the unchanged `python-nomad` package from PyPI drives a real drover agent.

The agent is the binary named by $DROVER_BIN, started in dev mode on a free port in a temporary
data dir. Every call goes through python-nomad's own request code, so what it sends and what it
expects back (status codes, JSON shapes, booleans as `True`/`False`) is what a Nomad user's
script would send and expect.
"""

import signal

import nomad
import pytest
from support import start_dev_agent, wait_for

JOB_ID = "interop"


@pytest.fixture(scope="module")
def agent():
    # No data dir: the dev agent keeps its state in a temporary dir and stops every task,
    # and removes every alloc dir, when it exits.
    process, host, port = start_dev_agent()
    client = nomad.Nomad(host=host, port=port, timeout=30)
    wait_for("the node to register", lambda: client.nodes.get_nodes())
    yield client
    try:
        client.job.deregister_job(JOB_ID, purge=True)
    except nomad.api.exceptions.BaseNomadException:
        pass
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


def batch_job(job_id, command):
    return {
        "Job": {
            "ID": job_id,
            "Name": job_id,
            "Type": "batch",
            "Datacenters": ["dc1"],
            "TaskGroups": [
                {
                    "Name": "g",
                    "Count": 1,
                    "RestartPolicy": {
                        "Attempts": 0,
                        "Mode": "fail",
                        "Interval": 1800000000000,
                        "Delay": 15000000000,
                    },
                    "Tasks": [
                        {
                            "Name": "t",
                            "Driver": "raw_exec",
                            "Config": {"command": "/bin/sh", "args": ["-c", command]},
                            "Env": {"FOO": "bar"},
                            "Resources": {"CPU": 100, "MemoryMB": 64},
                            "KillTimeout": 5000000000,
                        }
                    ],
                }
            ],
        }
    }


def test_agent_status_and_regions(agent):
    assert agent.status.leader.get_leader()
    assert isinstance(agent.status.peers.get_peers(), list)
    assert agent.regions.get_regions() == ["global"]
    me = agent.agent.get_agent()
    assert me["config"]["Region"] == "global"
    members = agent.agent.get_members()
    assert members["Members"][0]["Status"] == "alive"


def test_agent_servers_of_a_dev_agent(agent):
    servers = agent.agent.get_servers()
    assert len(servers) == 1 and servers[0].startswith("127.0.0.1:")
    # The dev agent's client reaches the server in its own process: there is no list to set,
    # and the agent says so rather than keeping a list nothing uses.
    with pytest.raises(nomad.api.exceptions.BaseNomadException) as refused:
        agent.agent.update_servers(["10.0.0.1:4646"])
    assert "in its own process" in refused.value.nomad_resp.text
    assert agent.agent.get_servers() == servers


def test_nodes_list_and_read(agent):
    nodes = agent.nodes.get_nodes()
    assert len(nodes) == 1
    node = agent.node.get_node(nodes[0]["ID"])
    assert node["Status"] == "ready"
    assert node["HTTPAddr"]
    assert node["Drivers"]["raw_exec"]["Detected"] is True
    assert isinstance(agent.node.get_allocations(nodes[0]["ID"]), list)
    host = agent.client.stats.read_stats(node_id=nodes[0]["ID"])
    assert host["Memory"]["Total"] > 0
    assert host["CPU"] and all("CPU" in cpu for cpu in host["CPU"])
    assert host["Uptime"] > 0


def test_job_lifecycle(agent):
    assert isinstance(agent.jobs.get_jobs(), list)
    response = agent.jobs.register_job(batch_job(JOB_ID, "echo hello from $FOO"))
    assert response["EvalID"]
    assert response["JobModifyIndex"] >= 1

    job = agent.job.get_job(JOB_ID)
    assert job["ID"] == JOB_ID
    assert job["TaskGroups"][0]["Tasks"][0]["Driver"] == "raw_exec"
    assert [j["ID"] for j in agent.jobs.get_jobs(prefix="inter")] == [JOB_ID]

    evaluation = wait_for(
        "the evaluation to complete",
        lambda: (lambda e: e if e["Status"] == "complete" else None)(
            agent.evaluation.get_evaluation(response["EvalID"])
        ),
    )
    assert evaluation["JobID"] == JOB_ID
    assert any(e["ID"] == response["EvalID"] for e in agent.evaluations.get_evaluations())
    assert any(e["ID"] == response["EvalID"] for e in agent.job.get_evaluations(JOB_ID))

    allocs = wait_for(
        "the alloc to complete",
        lambda: [a for a in agent.job.get_allocations(JOB_ID) if a["ClientStatus"] == "complete"],
    )
    alloc_id = allocs[0]["ID"]
    assert any(a["ID"] == alloc_id for a in agent.allocations.get_allocations())
    assert any(a["ID"] == alloc_id for a in agent.evaluation.get_allocations(response["EvalID"]))
    alloc = agent.allocation.get_allocation(alloc_id)
    assert alloc["Job"]["ID"] == JOB_ID
    assert alloc["TaskStates"]["t"]["State"] == "dead"
    types = [event["Type"] for event in alloc["TaskStates"]["t"]["Events"]]
    assert "Started" in types and "Terminated" in types

    logs = agent.client.stream_logs.stream(alloc_id, "t", "stdout", plain=True)
    assert "hello from bar" in logs

    summary = agent.job.get_summary(JOB_ID)
    assert summary["Summary"]["g"]["Complete"] == 1
    versions = agent.job.get_versions(JOB_ID)
    assert versions["Versions"][0]["Version"] == 0

    agent.job.deregister_job(JOB_ID, purge=True)
    with pytest.raises(nomad.api.exceptions.URLNotFoundNomadException):
        agent.job.get_job(JOB_ID)


def test_parse_hcl(agent):
    parsed = agent.jobs.parse(
        'job "parsed" {\n  group "g" {\n    task "t" {\n      driver = "raw_exec"\n'
        '      config {\n        command = "/bin/true"\n      }\n    }\n  }\n}\n',
        canonicalize=True,
    )
    assert parsed["ID"] == "parsed"
    assert parsed["TaskGroups"][0]["Tasks"][0]["Config"]["command"] == "/bin/true"


def test_bad_requests_map_to_python_exceptions(agent):
    with pytest.raises(nomad.api.exceptions.URLNotFoundNomadException):
        agent.job.get_job("no-such-job")
    with pytest.raises(nomad.api.exceptions.URLNotFoundNomadException):
        agent.allocation.get_allocation("00000000-0000-0000-0000-000000000000")
    with pytest.raises(nomad.api.exceptions.BadRequestNomadException):
        agent.jobs.register_job({"Job": {"ID": "broken", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t"}]}]}})


def test_client_operations_on_a_running_task(agent):
    job = batch_job("interop-svc", "trap 'echo got-usr1' USR1; echo ready; while true; do sleep 0.1; done")
    job["Job"]["Type"] = "service"
    agent.jobs.register_job(job)
    try:
        alloc = wait_for(
            "the service alloc to run",
            lambda: [
                a
                for a in agent.job.get_allocations("interop-svc")
                if a["ClientStatus"] == "running"
            ],
        )[0]
        alloc_id = alloc["ID"]

        # Filesystem: the alloc dir, its shared logs, a task file.
        root = agent.client.ls.list_files(alloc_id, path="/")
        names = {entry["Name"] for entry in root}
        assert {"alloc", "t"} <= names, names
        logs = agent.client.ls.list_files(alloc_id, path="/alloc/logs")
        assert any(entry["Name"] == "t.stdout.0" for entry in logs)
        stat = agent.client.stat.stat_file(alloc_id, path="/alloc/logs/t.stdout.0")
        assert stat["IsDir"] is False and stat["Size"] > 0
        wait_for(
            "the task's first line",
            lambda: "ready" in agent.client.cat.read_file(alloc_id, path="/alloc/logs/t.stdout.0"),
        )

        # Resource usage of the running task.
        usage = agent.client.allocation.read_allocation_stats(alloc_id)
        assert usage["Tasks"]["t"]["ResourceUsage"]["MemoryStats"]["RSS"] > 0

        # A signal the task traps, then a user restart.
        agent.client.allocation.signal_allocation(alloc_id, "SIGUSR1", task="t")
        wait_for(
            "the trap to fire",
            lambda: "got-usr1" in agent.client.stream_logs.stream(alloc_id, "t", "stdout", plain=True),
        )
        agent.client.allocation.restart_allocation(alloc_id)
        wait_for(
            "a second Started event",
            lambda: [
                e
                for e in agent.allocation.get_allocation(alloc_id)["TaskStates"]["t"]["Events"]
                if e["Type"] == "Started"
            ][1:],
        )
        types = [e["Type"] for e in agent.allocation.get_allocation(alloc_id)["TaskStates"]["t"]["Events"]]
        assert "Restart Signaled" in types and "Signaling" in types

        # Traversal out of the alloc dir is refused, never answered with host files.
        with pytest.raises(nomad.api.exceptions.BaseNomadException):
            agent.client.cat.read_file(alloc_id, path="/../../../../etc/passwd")
    finally:
        agent.job.deregister_job("interop-svc", purge=True)
