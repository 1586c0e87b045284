"""Interop: python-nomad 2.1.0's node drain, eligibility and purge calls against a real dev
agent ($DROVER_BIN): `node.drain_node_with_spec`, `node.eligible_node` (eligible and
ineligible), `node.purge_node`, answered in Nomad's shapes. A batch job keeps the node busy, so
a drain with a deadline stays in place until it is cancelled.
"""

import signal

import nomad
import nomad.api.exceptions
import pytest
from support import start_dev_agent, wait_for

JOB_ID = "drain-interop"


@pytest.fixture(scope="module")
def client():
    process, host, port = start_dev_agent()
    client = nomad.Nomad(host=host, port=port, timeout=30)
    wait_for("the node to register", lambda: client.nodes.get_nodes())
    client.job.register_job(
        JOB_ID,
        {
            "Job": {
                "ID": JOB_ID,
                "Name": JOB_ID,
                "Type": "batch",
                "Datacenters": ["dc1"],
                "TaskGroups": [
                    {
                        "Name": "g",
                        "Tasks": [
                            {
                                "Name": "t",
                                "Driver": "raw_exec",
                                "Config": {"command": "/bin/sleep", "args": ["300"]},
                                "Resources": {"CPU": 50, "MemoryMB": 32},
                            }
                        ],
                    }
                ],
            }
        },
    )
    wait_for(
        "the batch allocation to run",
        lambda: [a for a in client.job.get_allocations(JOB_ID) if a["ClientStatus"] == "running"],
    )
    yield client
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


def node_id(client):
    return client.nodes.get_nodes()[0]["ID"]


def test_eligibility_toggles_and_answers_nomads_shape(client):
    nid = node_id(client)
    answer = client.node.eligible_node(nid, ineligible=True)
    assert answer["NodeModifyIndex"] > 0
    assert answer["EvalIDs"] is None
    assert client.node.get_node(nid)["SchedulingEligibility"] == "ineligible"
    events = [e["Message"] for e in client.node.get_node(nid)["Events"]]
    assert "Node marked as ineligible for scheduling" in events

    answer = client.node.eligible_node(nid, eligible=True)
    assert answer["NodeModifyIndex"] > 0
    assert isinstance(answer["EvalIDs"], list)
    assert client.node.get_node(nid)["SchedulingEligibility"] == "eligible"


def test_drain_with_spec_sets_and_cancels_a_drain(client):
    nid = node_id(client)
    answer = client.node.drain_node_with_spec(
        nid, {"Deadline": 600_000_000_000, "IgnoreSystemJobs": True}
    )
    assert answer["NodeModifyIndex"] > 0
    node = client.node.get_node(nid)
    assert node["Drain"] is True
    assert node["SchedulingEligibility"] == "ineligible"
    assert node["DrainStrategy"]["Deadline"] == 600_000_000_000
    assert node["DrainStrategy"]["IgnoreSystemJobs"] is True
    assert node["DrainStrategy"]["ForceDeadline"] != "0001-01-01T00:00:00Z"
    assert node["LastDrain"]["Status"] == "draining"

    # Eligible while draining is refused, as Nomad refuses it.
    with pytest.raises(nomad.api.exceptions.BaseNomadException):
        client.node.eligible_node(nid, eligible=True)

    # Cancelled (an empty spec) and marked eligible.
    answer = client.node.drain_node_with_spec(nid, {}, mark_eligible=True)
    node = client.node.get_node(nid)
    assert node["Drain"] is False
    assert node["DrainStrategy"] is None
    assert node["SchedulingEligibility"] == "eligible"
    assert node["LastDrain"]["Status"] == "canceled"


def test_a_drain_of_an_empty_node_completes(client):
    nid = node_id(client)
    client.job.deregister_job(JOB_ID, purge=True)
    wait_for(
        "the batch allocation to stop",
        lambda: all(
            a["ClientStatus"] != "running" for a in client.node.get_allocations(nid)
        ),
    )
    client.node.drain_node_with_spec(nid, {"Deadline": 0}, mark_eligible=False)
    wait_for(
        "the drain to complete",
        lambda: client.node.get_node(nid)["LastDrain"]["Status"] == "complete",
    )
    node = client.node.get_node(nid)
    assert node["DrainStrategy"] is None
    assert node["SchedulingEligibility"] == "ineligible"
    client.node.eligible_node(nid, eligible=True)


def test_purge_removes_the_node(client):
    nid = node_id(client)
    answer = client.node.purge_node(nid)
    assert answer["NodeModifyIndex"] > 0
    assert "HeartbeatTTL" in answer and "KnownLeader" in answer
    with pytest.raises(nomad.api.exceptions.URLNotFoundNomadException):
        client.node.get_node(nid)
