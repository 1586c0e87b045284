"""Interop: python-nomad 2.1.0's `scaling.get_scaling_policies` / `get_scaling_policy` against a
real drover agent ($DROVER_BIN, dev mode), and job scaling through python-nomad's own requester
(`job.request(<id>, "scale", ...)`: 2.1.0 has no named method for `/v1/job/<id>/scale`): a scale
up placed, a count beyond the policy refused as `BadRequestNomadException`, the events listed.
"""

import signal

import nomad
import pytest
from support import start_dev_agent, wait_for

JOB_ID = "scaling-interop"


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


def scaled_job():
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
                    "Scaling": {"Min": 1, "Max": 3, "Policy": {"cooldown": "1m"}},
                    "Update": {"MinHealthyTime": 1000000000, "HealthyDeadline": 20000000000},
                    "Tasks": [
                        {
                            "Name": "t",
                            "Driver": "raw_exec",
                            "Config": {"command": "/bin/sh", "args": ["-c", "sleep 300"]},
                            "Resources": {"CPU": 20, "MemoryMB": 16},
                            "KillTimeout": 2000000000,
                        }
                    ],
                }
            ],
        }
    }


def scale_status(client):
    return client.job.request(JOB_ID, "scale", method="get").json()


def test_policies_and_scaling(agent):
    agent.job.register_job(JOB_ID, scaled_job())
    policies = agent.scaling.get_scaling_policies(job=JOB_ID)
    assert len(policies) == 1
    assert policies[0]["Type"] == "horizontal"
    assert policies[0]["Target"] == {"Namespace": "default", "Job": JOB_ID, "Group": "g"}
    assert agent.scaling.get_scaling_policies(type_="horizontal") == policies
    policy = agent.scaling.get_scaling_policy(policies[0]["ID"])
    assert (policy["Min"], policy["Max"], policy["Policy"]) == (1, 3, {"cooldown": "1m"})
    with pytest.raises(nomad.api.exceptions.URLNotFoundNomadException):
        agent.scaling.get_scaling_policy("nope")

    wait_for(
        "the first deployment to succeed",
        lambda: (agent.job.get_deployment(JOB_ID) or {}).get("Status") == "successful",
    )
    answer = agent.job.request(
        JOB_ID,
        "scale",
        method="post",
        json={"Count": 2, "Target": {"Group": "g"}, "Message": "from python"},
    ).json()
    assert answer["EvalID"]
    assert answer["JobModifyIndex"] > 0
    wait_for("two running", lambda: scale_status(agent)["TaskGroups"]["g"]["Running"] == 2)

    with pytest.raises(nomad.api.exceptions.BadRequestNomadException) as refused:
        agent.job.request(
            JOB_ID, "scale", method="post", json={"Count": 4, "Target": {"Group": "g"}}
        )
    assert "group count was greater than scaling policy maximum: 4 > 3" in refused.value.nomad_resp.text

    status = scale_status(agent)
    group = status["TaskGroups"]["g"]
    assert group["Desired"] == 2
    assert [(event["Count"], event["PreviousCount"], event["Message"]) for event in group["Events"]] == [
        (2, 1, "from python")
    ]
    assert group["Events"][0]["EvalID"] == answer["EvalID"]
