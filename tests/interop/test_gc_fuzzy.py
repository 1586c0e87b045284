"""Interop: python-nomad's fuzzy search, `system.initiate_garbage_collection` and the client's
`gc_all_allocations` against a real dev agent ($DROVER_BIN) running a real batch job.
"""

import signal

import nomad
import nomad.api.exceptions
import pytest
from support import start_dev_agent, wait_for

JOB_ID = "fuzzy-interop"


@pytest.fixture(scope="module")
def client():
    process, host, port = start_dev_agent()
    client = nomad.Nomad(host=host, port=port, timeout=30)
    wait_for("the node to register", lambda: client.nodes.get_nodes())
    yield client
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


def register_batch(client, job_id, command):
    client.job.register_job(
        job_id,
        {
            "Job": {
                "ID": job_id,
                "Name": job_id,
                "Type": "batch",
                "Datacenters": ["dc1"],
                "TaskGroups": [
                    {
                        "Name": "crunch",
                        "Tasks": [
                            {
                                "Name": "worker",
                                "Driver": "raw_exec",
                                "Config": {"command": command},
                                "Resources": {"CPU": 50, "MemoryMB": 32},
                            }
                        ],
                    }
                ],
            }
        },
    )


def test_fuzzy_search_matches_names_with_their_scope(client):
    register_batch(client, JOB_ID, "/bin/true")
    found = client.search.fuzzy_search("interop", "all")
    assert found["Matches"]["jobs"] == [{"ID": JOB_ID, "Scope": ["default", JOB_ID]}]
    assert found["Truncations"]["jobs"] is False

    jobs = client.search.fuzzy_search("CRUN", "jobs")
    assert jobs["Matches"]["groups"] == [{"ID": "crunch", "Scope": ["default", JOB_ID]}]
    commands = client.search.fuzzy_search("bin/TR", "jobs")
    assert commands["Matches"]["commands"] == [
        {"ID": "/bin/true", "Scope": ["default", JOB_ID, "crunch", "worker"]}
    ]

    node = client.nodes.get_nodes()[0]
    nodes = client.search.fuzzy_search(node["Name"][:3], "nodes")
    assert {"ID": node["Name"], "Scope": [node["ID"]]} in nodes["Matches"]["nodes"]

    with pytest.raises(nomad.api.exceptions.BaseNomadException) as raised:
        client.search.fuzzy_search("x", "all")
    assert "at least 2 characters" in raised.value.nomad_resp.text


def test_system_gc_collects_a_finished_batch_job(client):
    job_id = "gc-interop"
    register_batch(client, job_id, "/bin/true")
    wait_for(
        "the batch job to finish",
        lambda: client.job.get_job(job_id)["Status"] == "dead",
    )
    allocs = client.job.get_allocations(job_id)
    assert allocs and all(a["ClientStatus"] == "complete" for a in allocs)

    # The client's allocation directories go first, then the server's objects.
    client.client.gc_all_allocations.garbage_collect(client.nodes.get_nodes()[0]["ID"])
    assert client.system.initiate_garbage_collection() is True

    with pytest.raises(nomad.api.exceptions.URLNotFoundNomadException):
        client.job.get_job(job_id)
    for alloc in allocs:
        with pytest.raises(nomad.api.exceptions.URLNotFoundNomadException):
            client.allocation.get_allocation(alloc["ID"])


def test_reconcile_summaries_recounts_a_jobs_allocations(client):
    job_id = "reconcile-interop"
    register_batch(client, job_id, "/bin/true")
    wait_for(
        "the batch job to finish",
        lambda: client.job.get_job(job_id)["Status"] == "dead",
    )
    before = client.job.get_summary(job_id)
    assert client.system.reconcile_summaries() is True
    after = client.job.get_summary(job_id)
    # Counted again from the allocations: the same counts, written anew.
    assert after["Summary"] == before["Summary"]
    assert after["Summary"]["crunch"]["Complete"] == 1
    assert after["ModifyIndex"] > before["ModifyIndex"]
    assert after["CreateIndex"] == client.job.get_job(job_id)["CreateIndex"]
