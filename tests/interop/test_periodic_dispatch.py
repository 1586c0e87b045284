"""Interop: python-nomad's `job.dispatch_job` and `job.periodic_job` against a real drover
agent ($DROVER_BIN, dev mode): a parameterized job dispatched with a base64 payload and
metadata runs a child whose task reads the payload, a dispatch the job forbids is refused, and
a periodic job is forced to launch a child now.
"""

import base64
import signal

import nomad
import pytest
from support import start_dev_agent, wait_for


@pytest.fixture(scope="module")
def agent():
    process, host, port = start_dev_agent()
    client = nomad.Nomad(host=host, port=port, timeout=30)
    wait_for("the node to register", lambda: client.nodes.get_nodes())
    yield client
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


def template_job(job_id, command, **extra):
    return {
        "Job": {
            "ID": job_id,
            "Name": job_id,
            "Type": "batch",
            "Datacenters": ["dc1"],
            **extra,
            "TaskGroups": [
                {
                    "Name": "g",
                    "Count": 1,
                    "Tasks": [
                        {
                            "Name": "t",
                            "Driver": "raw_exec",
                            "Config": {"command": "/bin/sh", "args": ["-c", command]},
                            "DispatchPayload": {"File": "input.txt"},
                            "Resources": {"CPU": 50, "MemoryMB": 32},
                        }
                    ],
                }
            ],
        }
    }


def children(agent, parent):
    return [job for job in agent.jobs.get_jobs(prefix=parent + "/") if job["ParentID"] == parent]


def test_dispatch_job_runs_a_child_with_payload_and_meta(agent):
    agent.job.register_job(
        "convert",
        template_job(
            "convert",
            'echo "$NOMAD_META_customer:$(cat "$NOMAD_TASK_DIR/input.txt")"',
            ParameterizedJob={"Payload": "required", "MetaRequired": ["customer"]},
        ),
    )
    payload = base64.b64encode(b"hello from python").decode()
    answer = agent.job.dispatch_job("convert", payload=payload, meta={"customer": "acme"})
    child_id = answer["DispatchedJobID"]
    assert child_id.startswith("convert/dispatch-")
    assert len(answer["EvalID"]) == 36
    assert answer["EvalCreateIndex"] > 0 and answer["JobCreateIndex"] > 0
    child = agent.job.get_job(child_id)
    assert child["ParentID"] == "convert"
    assert child["Dispatched"] is True
    assert child["Meta"]["customer"] == "acme"

    def completed():
        allocs = agent.job.get_allocations(child_id)
        return [alloc for alloc in allocs if alloc["ClientStatus"] == "complete"]

    alloc = wait_for("the dispatched child completes", completed, limit=120)[0]
    logs = agent.client.cat.read_file(alloc["ID"], path="/alloc/logs/t.stdout.0")
    assert logs == "acme:hello from python\n"


def test_dispatch_job_refusals_name_the_problem(agent):
    agent.job.register_job(
        "bare",
        template_job(
            "bare",
            "true",
            ParameterizedJob={"Payload": "forbidden", "MetaOptional": ["customer"]},
        ),
    )
    with pytest.raises(nomad.api.exceptions.BaseNomadException) as refused:
        agent.job.dispatch_job("bare", payload=base64.b64encode(b"x").decode())
    assert refused.value.nomad_resp.status_code == 400
    assert "Payload provided but forbidden by parameterized job" in refused.value.nomad_resp.text
    with pytest.raises(nomad.api.exceptions.BaseNomadException) as refused:
        agent.job.dispatch_job("bare", meta={"color": "red"})
    assert "unpermitted metadata keys: [color]" in refused.value.nomad_resp.text


def test_periodic_job_forces_a_launch(agent):
    agent.job.register_job(
        "report",
        template_job(
            "report",
            "true",
            Periodic={"Enabled": True, "SpecType": "cron", "Spec": "0 0 1 1 * 2099"},
        ),
    )
    assert children(agent, "report") == []
    answer = agent.job.periodic_job("report")
    assert len(answer["EvalID"]) == 36
    assert answer["EvalCreateIndex"] > 0
    launched = children(agent, "report")
    assert len(launched) == 1
    assert launched[0]["ID"].startswith("report/periodic-")
    with pytest.raises(nomad.api.exceptions.BaseNomadException) as refused:
        agent.job.periodic_job("convert")
    assert "can't force launch non-periodic job" in refused.value.nomad_resp.text
