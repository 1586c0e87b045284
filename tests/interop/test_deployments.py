"""Interop: python-nomad 2.1.0's `job.stable_job` and `job.revert_job` against a real drover
agent ($DROVER_BIN, dev mode): a version marked stable as `/v1/job/<id>/versions` shows it, and
an earlier version registered again as the next one, with Nomad's refusals mapped to
python-nomad's exceptions.

Not yet here: `deployment` / `deployments`, which need the server's deployments.
"""

import signal

import nomad
import pytest
from support import start_dev_agent, wait_for

JOB_ID = "versions-interop"


@pytest.fixture(scope="module")
def agent():
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


def service_job(color):
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
                            "Config": {"command": "/bin/sh", "args": ["-c", "sleep 300"]},
                            "Env": {"COLOR": color},
                            "Resources": {"CPU": 20, "MemoryMB": 16},
                            "KillTimeout": 2000000000,
                        }
                    ],
                }
            ],
        }
    }


def color(job):
    return job["TaskGroups"][0]["Tasks"][0]["Env"]["COLOR"]


def test_stable_and_revert(agent):
    agent.job.register_job(JOB_ID, service_job("blue"))
    agent.job.register_job(JOB_ID, service_job("green"))
    assert agent.job.get_job(JOB_ID)["Version"] == 1

    answer = agent.job.stable_job(JOB_ID, 0, True)
    assert answer["Index"] > 0
    versions = agent.job.get_versions(JOB_ID)["Versions"]
    assert [(v["Version"], v["Stable"]) for v in versions] == [(1, False), (0, True)]

    with pytest.raises(nomad.api.exceptions.BadRequestNomadException):
        agent.job.revert_job(JOB_ID, 1)
    with pytest.raises(nomad.api.exceptions.BadRequestNomadException):
        agent.job.revert_job(JOB_ID, 0, enforce_prior_version=5)
    with pytest.raises(nomad.api.exceptions.URLNotFoundNomadException):
        agent.job.revert_job(JOB_ID, 9)

    answer = agent.job.revert_job(JOB_ID, 0, enforce_prior_version=1)
    assert answer["EvalID"]
    job = agent.job.get_job(JOB_ID)
    assert (job["Version"], color(job), job["Stable"]) == (2, "blue", False)

    def running_at_version_2():
        allocs = agent.job.get_allocations(JOB_ID)
        return any(a["JobVersion"] == 2 and a["ClientStatus"] == "running" for a in allocs)

    wait_for("the reverted version to run", running_at_version_2)
