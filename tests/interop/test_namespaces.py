"""Interop: python-nomad 2.1.0's `namespace`/`namespaces` and `variables`/`variable` calls
against a real agent: create, list (with a prefix), read, update and delete a namespace, a job
registered in it, variables written, listed and read per namespace, and the refusals (a
namespace holding a job is not deleted, `default` never is, a job in an unknown namespace is
refused).
"""

import signal

import nomad
import pytest
from nomad.api.exceptions import BaseNomadException, URLNotFoundNomadException
from support import start_dev_agent


def unplaceable_job(job_id):
    return {
        "Job": {
            "ID": job_id,
            "Name": job_id,
            "Type": "service",
            "Datacenters": ["dc1"],
            "TaskGroups": [
                {
                    "Name": "app",
                    "Count": 1,
                    "Constraints": [
                        {"LTarget": "${node.unique.name}", "RTarget": "nowhere", "Operand": "="}
                    ],
                    "Tasks": [
                        {
                            "Name": "server",
                            "Driver": "raw_exec",
                            "Config": {"command": "/bin/sleep", "args": ["3600"]},
                        }
                    ],
                }
            ],
        }
    }


@pytest.fixture(scope="module")
def agent():
    process, host, port = start_dev_agent()
    yield host, port
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)


def test_python_nomad_namespace_and_variable_calls(agent):
    host, port = agent
    n = nomad.Nomad(host=host, port=port, timeout=30)

    assert [ns["Name"] for ns in n.namespaces.get_namespaces()] == ["default"]
    assert n.namespace.create_namespace({"Name": "web", "Description": "Web team"}).ok
    assert n.namespace.create_namespace({"Name": "batch"}).ok
    assert [ns["Name"] for ns in n.namespaces.get_namespaces()] == ["batch", "default", "web"]
    assert [ns["Name"] for ns in n.namespaces.get_namespaces(prefix="w")] == ["web"]
    assert "web" in n.namespaces
    assert "web" in n.namespace
    assert "nope" not in n.namespace
    web = n.namespace.get_namespace("web")
    assert web["Description"] == "Web team"
    assert n.namespace.update_namespace("web", {"Name": "web", "Description": "Web"}).ok
    updated = n.namespace.get_namespace("web")
    assert updated["Description"] == "Web"
    assert updated["CreateIndex"] == web["CreateIndex"]
    assert updated["ModifyIndex"] > web["ModifyIndex"]
    with pytest.raises(URLNotFoundNomadException):
        n.namespace.get_namespace("nope")

    # A job lives in its namespace; an unknown namespace is refused.
    in_web = nomad.Nomad(host=host, port=port, timeout=30, namespace="web")
    job = unplaceable_job("web-app")
    job["Job"]["Namespace"] = "web"
    assert in_web.jobs.register_job(job)["EvalID"]
    assert [j["ID"] for j in in_web.jobs.get_jobs()] == ["web-app"]
    assert n.jobs.get_jobs() == []
    assert [j["ID"] for j in n.jobs.get_jobs(namespace="*")] == ["web-app"]
    lost = unplaceable_job("lost")
    lost["Job"]["Namespace"] = "nope"
    with pytest.raises(BaseNomadException) as refused:
        n.jobs.register_job(lost)
    assert 'job "lost" is in nonexistent namespace "nope"' in refused.value.nomad_resp.text

    # Variables per namespace.
    written = n.variable.create_variable("app/db", {"Items": {"user": "web"}}, namespace="web")
    assert written["Namespace"] == "web"
    n.variable.create_variable("app/db", {"Items": {"user": "default"}})
    assert n.variable.get_variable("app/db", namespace="web")["Items"] == {"user": "web"}
    assert n.variable.get_variable("app/db")["Items"] == {"user": "default"}
    assert [v["Namespace"] for v in n.variables.get_variables(prefix="app", namespace="web")] == [
        "web"
    ]
    assert sorted(v["Namespace"] for v in n.variables.get_variables(namespace="*")) == [
        "default",
        "web",
    ]

    # Not deleted while it holds a job; default never.
    with pytest.raises(BaseNomadException) as refused:
        n.namespace.delete_namespace("web")
    assert 'namespace "web" has non-terminal jobs' in refused.value.nomad_resp.text
    with pytest.raises(BaseNomadException) as refused:
        n.namespace.delete_namespace("default")
    assert refused.value.nomad_resp.text == "can not delete default namespace"

    in_web.job.deregister_job("web-app", purge=True)
    n.variable.delete_variable("app/db", namespace="web")
    assert n.namespace.delete_namespace("web").ok
    assert n.namespace.delete_namespace("batch").ok
    assert [ns["Name"] for ns in n.namespaces.get_namespaces()] == ["default"]
