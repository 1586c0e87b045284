"""A task's workload identity verifies against the agent's JWKS with a standard JWT library
(PyJWT with cryptography), carries Nomad's claims, and keeps verifying after a key rotation;
new identities are signed with the new key."""

import json
import os
import shutil
import tempfile
import time
import urllib.request

import jwt
import pytest
from jwt import PyJWKClient

from support import start_dev_agent, wait_for

JOB = {
    "Job": {
        "ID": "idpy",
        "Name": "idpy",
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
                        "Config": {"command": "/bin/sleep", "args": ["3600"]},
                        "Identity": {"Env": True, "File": True},
                    }
                ],
            }
        ],
    }
}


@pytest.fixture(scope="module")
def agent():
    data_dir = tempfile.mkdtemp(prefix="drover-idpy-")
    process, host, port = start_dev_agent(f"-data-dir={data_dir}")
    base = f"http://{host}:{port}"
    yield base, data_dir
    # Stop the jobs first: an agent with a data dir leaves its tasks running when it exits.
    for job_id in ("idpy", "idpy2"):
        call(base, "DELETE", f"/v1/job/{job_id}?purge=true")

    def all_stopped():
        allocs = call(base, "GET", "/v1/allocations")
        return all(a["ClientStatus"] in ("complete", "failed") for a in allocs)

    wait_for("every task to stop", all_stopped)
    process.terminate()
    process.wait(timeout=30)
    shutil.rmtree(data_dir, ignore_errors=True)


def call(base, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def task_token(base, data_dir, job_id):
    def running():
        allocs = call(base, "GET", f"/v1/job/{job_id}/allocations")
        return next((a["ID"] for a in allocs if a["ClientStatus"] == "running"), None)

    alloc_id = wait_for("a running allocation", running)
    path = os.path.join(data_dir, "alloc", alloc_id, "t", "secrets", "nomad_token")
    return alloc_id, wait_for("the token file", lambda: os.path.exists(path) and open(path).read())


def verify(base, token):
    signing_key = PyJWKClient(base + "/.well-known/jwks.json").get_signing_key_from_jwt(token)
    return jwt.decode(
        token, signing_key.key, algorithms=["EdDSA"], audience="nomadproject.io"
    )


def test_identity_verifies_with_pyjwt_and_survives_rotation(agent):
    base, data_dir = agent
    call(base, "PUT", "/v1/jobs", JOB)
    alloc_id, token = task_token(base, data_dir, "idpy")
    claims = verify(base, token)
    assert claims["nomad_namespace"] == "default"
    assert claims["nomad_job_id"] == "idpy"
    assert claims["nomad_allocation_id"] == alloc_id
    assert claims["nomad_task"] == "t"
    assert claims["sub"] == "global:default:idpy:g:t:default"
    assert claims["iat"] <= time.time() + 5
    old_kid = jwt.get_unverified_header(token)["kid"]

    rotated = call(base, "PUT", "/v1/operator/keyring/rotate")
    new_kid = rotated["Key"]["KeyID"]
    assert new_kid != old_kid
    assert verify(base, token)["nomad_allocation_id"] == alloc_id

    job = json.loads(json.dumps(JOB))
    job["Job"]["ID"] = job["Job"]["Name"] = "idpy2"
    call(base, "PUT", "/v1/jobs", job)
    _, second = task_token(base, data_dir, "idpy2")
    assert jwt.get_unverified_header(second)["kid"] == new_kid
    assert verify(base, second)["nomad_job_id"] == "idpy2"
    with pytest.raises(jwt.InvalidAudienceError):
        signing_key = PyJWKClient(base + "/.well-known/jwks.json").get_signing_key_from_jwt(second)
        jwt.decode(second, signing_key.key, algorithms=["EdDSA"], audience="other")
