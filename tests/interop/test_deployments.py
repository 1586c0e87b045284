"""Interop: python-nomad 2.1.0's `job.stable_job` and `job.revert_job` against a real drover
agent ($DROVER_BIN, dev mode): a version marked stable as `/v1/job/<id>/versions` shows it, and
an earlier version registered again as the next one, with Nomad's refusals mapped to
python-nomad's exceptions; `deployment` / `deployments` and `job.get_deployment(s)`: a canary
rollout promoted, a deployment paused, resumed and failed, and manual allocation health.
"""

import signal

import nomad
import pytest
from support import start_dev_agent, wait_for

JOB_ID = "versions-interop"
ROLLOUT_ID = "rollout-interop"


@pytest.fixture(scope="module")
def agent():
    process, host, port = start_dev_agent()
    client = nomad.Nomad(host=host, port=port, timeout=30)
    wait_for("the node to register", lambda: client.nodes.get_nodes())
    yield client
    for job_id in (JOB_ID, ROLLOUT_ID):
        try:
            client.job.deregister_job(job_id, purge=True)
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


def rollout_job(color, health_check="task_states"):
    job = service_job(color)["Job"]
    job["ID"] = job["Name"] = ROLLOUT_ID
    job["TaskGroups"][0]["Count"] = 2
    job["Update"] = {
        "MaxParallel": 1,
        "Canary": 1,
        "AutoPromote": False,
        "MinHealthyTime": 1_000_000_000,
        "HealthCheck": health_check,
    }
    return {"Job": job}


def latest(agent, version, status=None):
    def probe():
        deployment = agent.job.get_deployment(ROLLOUT_ID)
        if deployment and deployment["JobVersion"] == version:
            if status is None or deployment["Status"] == status:
                return deployment
        return None

    return wait_for(f"deployment of version {version} {status or ''}", probe)


def test_deployments_promote_pause_fail_and_alloc_health(agent):
    agent.job.register_job(ROLLOUT_ID, rollout_job("blue"))
    first = latest(agent, 0, "successful")
    assert first["StatusDescription"] == "Deployment completed successfully"
    assert agent.deployments.get_deployments(prefix=first["ID"][:4])[0]["ID"] == first["ID"]
    assert first["ID"] in agent.deployments
    assert agent.deployment.get_deployment(first["ID"])["JobID"] == ROLLOUT_ID
    allocs = agent.deployment.get_deployment_allocations(first["ID"])
    assert len(allocs) == 2 and all(a["DeploymentStatus"]["Healthy"] for a in allocs)

    # A canary, promoted by hand.
    agent.job.register_job(ROLLOUT_ID, rollout_job("green"))
    waiting = wait_for(
        "a healthy canary",
        lambda: (d := latest(agent, 1))["TaskGroups"]["g"]["HealthyAllocs"] == 1 and d,
    )
    assert waiting["StatusDescription"] == "Deployment is running but requires manual promotion"
    answer = agent.deployment.promote_deployment_all(waiting["ID"])
    assert answer["EvalID"] and answer["DeploymentModifyIndex"] == answer["Index"]
    assert answer["RevertedJobVersion"] is None
    done = latest(agent, 1, "successful")
    assert done["TaskGroups"]["g"]["Promoted"] is True
    with pytest.raises(nomad.api.exceptions.BaseNomadException) as refused:
        agent.deployment.promote_deployment_all(done["ID"])
    assert "can't promote terminal deployment" in str(refused.value.nomad_resp.text)

    # Paused, resumed, failed by hand.
    agent.job.register_job(ROLLOUT_ID, rollout_job("red"))
    third = latest(agent, 2)
    paused = agent.deployment.pause_deployment(third["ID"], True)
    assert paused["EvalID"] == ""
    assert agent.deployment.get_deployment(third["ID"])["Status"] == "paused"
    resumed = agent.deployment.pause_deployment(third["ID"], False)
    assert resumed["EvalID"]
    assert agent.deployment.get_deployment(third["ID"])["Status"] == "running"
    failed = agent.deployment.fail_deployment(third["ID"])
    assert failed["EvalID"]
    gone = agent.deployment.get_deployment(third["ID"])
    assert (gone["Status"], gone["StatusDescription"]) == ("failed", "Deployment marked as failed")

    # Manual health: the canary is healthy because the operator says so.
    agent.job.register_job(ROLLOUT_ID, rollout_job("white", health_check="manual"))
    fourth = latest(agent, 3)

    def canary():
        allocs = agent.deployment.get_deployment_allocations(fourth["ID"])
        return allocs[0]["ID"] if allocs else None

    canary_id = wait_for("the manual canary", canary)
    answer = agent.deployment.deployment_allocation_health(
        fourth["ID"], healthy_allocations=[canary_id]
    )
    assert answer["EvalID"]
    counted = agent.deployment.get_deployment(fourth["ID"])
    assert counted["TaskGroups"]["g"]["HealthyAllocs"] == 1
    with pytest.raises(nomad.api.exceptions.BaseNomadException):
        agent.deployment.deployment_allocation_health(fourth["ID"])
    assert len(agent.job.get_deployments(ROLLOUT_ID)) == 4
