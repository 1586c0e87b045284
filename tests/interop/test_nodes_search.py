"""Interop: python-nomad's `search` and the list `filter`/pagination parameters against a real
dev agent ($DROVER_BIN) running a real two-allocation service job.

Node drain, eligibility and purge are in test_nodes_drain.py.
"""

import signal

import nomad
import nomad.api.exceptions
import pytest
from support import start_dev_agent, wait_for

JOB_ID = "search-interop"


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
                "Type": "service",
                "Datacenters": ["dc1"],
                "TaskGroups": [
                    {
                        "Name": "g",
                        "Count": 2,
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
        "both allocations to run",
        lambda: len(
            [a for a in client.job.get_allocations(JOB_ID) if a["ClientStatus"] == "running"]
        )
        == 2,
    )
    yield client
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


def test_prefix_search_finds_jobs_allocations_and_nodes(client):
    allocs = client.job.get_allocations(JOB_ID)
    alloc_id = allocs[0]["ID"]
    found = client.search.search(alloc_id[:5], "allocs")
    assert alloc_id in found["Matches"]["allocs"]
    assert found["Truncations"]["allocs"] is False

    everything = client.search.search("search-", "all")
    assert everything["Matches"]["jobs"] == [JOB_ID]
    assert everything["Matches"]["plugins"] is None

    node_id = client.nodes.get_nodes()[0]["ID"]
    assert client.search.search(node_id[:4], "nodes")["Matches"]["nodes"] == [node_id]


def test_list_filters_and_pages(client):
    running = client.allocations.get_allocations(
        filter_=f'ClientStatus == "running" and JobID matches "^{JOB_ID}"'
    )
    assert len(running) == 2
    assert client.allocations.get_allocations(filter_='JobID == "nope"') == []
    assert [job["ID"] for job in client.jobs.get_jobs(filter_='Type == "service"')] == [JOB_ID]

    first = client.allocations.get_allocations(per_page=1)
    assert len(first) == 1

    with pytest.raises(nomad.api.exceptions.BadRequestNomadException) as raised:
        client.allocations.get_allocations(filter_="ClientStatus = running")
    assert "1:14 (13)" in raised.value.nomad_resp.text
