"""Interop: python-nomad 2.1.0's `job.plan_job` against a real drover agent — a new job's plan,
the plan of an edited job with its annotated diff, and that planning commits nothing — and
`job.register_job` with `EnforceIndex`, refused with Nomad's error as a Nomad server refuses it.
"""

import copy
import signal

import nomad
import pytest
from support import start_dev_agent, wait_for

JOB_ID = "interop-plan"


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


def service_job(count, version):
    return {
        "Job": {
            "ID": JOB_ID,
            "Name": JOB_ID,
            "Type": "service",
            "Datacenters": ["dc1"],
            "TaskGroups": [
                {
                    "Name": "g",
                    "Count": count,
                    "Tasks": [
                        {
                            "Name": "t",
                            "Driver": "raw_exec",
                            "Config": {"command": "/bin/sleep", "args": ["300"]},
                            "Env": {"VERSION": version},
                            "Resources": {"CPU": 20, "MemoryMB": 16},
                        }
                    ],
                }
            ],
        }
    }


def test_plan_of_a_new_job(agent):
    answer = agent.job.plan_job(JOB_ID, service_job(2, "one"), diff=True)
    assert answer["JobModifyIndex"] == 0
    assert answer["Annotations"]["DesiredTGUpdates"]["g"]["Place"] == 2
    assert answer["FailedTGAllocs"] is None
    assert answer["Diff"]["Type"] == "Added"
    assert answer["Diff"]["TaskGroups"][0]["Updates"] == {"create": 2}
    # Nothing was registered.
    assert agent.jobs.get_jobs() == []


def test_plan_of_an_edited_job_and_enforced_index(agent):
    registered = agent.job.register_job(JOB_ID, service_job(2, "one"))
    index = registered["JobModifyIndex"]
    wait_for(
        "two allocations",
        lambda: len(agent.job.get_allocations(JOB_ID)) == 2,
    )

    answer = agent.job.plan_job(JOB_ID, service_job(2, "two"), diff=True)
    assert answer["JobModifyIndex"] == index
    # Nomad's default update block rolls one allocation at a time: one replaced, one left.
    updates = answer["Annotations"]["DesiredTGUpdates"]["g"]
    assert (updates["DestructiveUpdate"], updates["Ignore"]) == (1, 1)
    task = answer["Diff"]["TaskGroups"][0]["Tasks"][0]
    assert task["Annotations"] == ["forces create/destroy update"]
    assert task["Fields"] == [
        {
            "Type": "Edited",
            "Name": "Env[VERSION]",
            "Old": "one",
            "New": "two",
            "Annotations": None,
        }
    ]
    # Without diff=True there is no diff.
    assert agent.job.plan_job(JOB_ID, service_job(2, "two"))["Diff"] is None

    stale = copy.deepcopy(service_job(2, "two"))
    stale["EnforceIndex"] = True
    stale["JobModifyIndex"] = index + 100
    with pytest.raises(nomad.api.exceptions.BaseNomadException) as refused:
        agent.job.register_job(JOB_ID, stale)
    # Nomad answers a failed EnforceIndex with a 500; it is the caller's conflict: 409, in
    # Nomad's words, which its CLI recognises.
    assert refused.value.nomad_resp.status_code == 409
    assert refused.value.nomad_resp.text == (
        f"Enforcing job modify index {index + 100}: "
        f"job exists with conflicting job modify index: {index}"
    )

    current = copy.deepcopy(service_job(2, "two"))
    current["EnforceIndex"] = True
    current["JobModifyIndex"] = index
    accepted = agent.job.register_job(JOB_ID, current)
    assert accepted["JobModifyIndex"] > index

    versions = agent.job.request(JOB_ID, "versions", params={"diffs": "true"}, method="get").json()
    assert len(versions["Diffs"]) == 1
    assert versions["Diffs"][0]["Type"] == "Edited"
