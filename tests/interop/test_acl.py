"""Interop: python-nomad 2.1.0's `acl` calls against a real agent with `acl { enabled = true }`:
bootstrap, policies (create, list, read, update, delete), tokens (create, list, read, self,
update, delete), and the 403 a request without a token gets.
"""

import signal
import tempfile

import nomad
import pytest
from nomad.api.exceptions import URLNotAuthorizedNomadException
from support import start_dev_agent


@pytest.fixture(scope="module")
def agent():
    config = tempfile.NamedTemporaryFile("w", suffix=".hcl", delete=False)
    config.write("acl {\n  enabled = true\n}\n")
    config.close()
    process, host, port = start_dev_agent(f"-config={config.name}")
    yield host, port
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)


def test_python_nomad_acl_calls(agent):
    host, port = agent
    anonymous = nomad.Nomad(host=host, port=port, timeout=30)
    with pytest.raises(URLNotAuthorizedNomadException):
        anonymous.jobs.get_jobs()

    root = anonymous.acl.generate_bootstrap()
    assert root["Type"] == "management"
    admin = nomad.Nomad(host=host, port=port, timeout=30, token=root["SecretID"])

    rules = 'namespace "default" {\n  policy = "read"\n}\n'
    assert admin.acl.create_policy(
        "readonly", {"Name": "readonly", "Description": "reads", "Rules": rules}
    ).ok
    assert [p["Name"] for p in admin.acl.get_policies()] == ["readonly"]
    assert admin.acl.get_policy("readonly")["Rules"] == rules
    assert admin.acl.update_policy(
        "readonly", {"Name": "readonly", "Description": "reads jobs", "Rules": rules}
    ).ok
    assert admin.acl.get_policy("readonly")["Description"] == "reads jobs"

    token = admin.acl.create_token(
        {"Name": "reader", "Type": "client", "Policies": ["readonly"]}
    )
    assert token["Policies"] == ["readonly"]
    accessors = {t["AccessorID"] for t in admin.acl.get_tokens()}
    assert {root["AccessorID"], token["AccessorID"]} <= accessors
    assert admin.acl.get_token(token["AccessorID"])["Name"] == "reader"

    reader = nomad.Nomad(host=host, port=port, timeout=30, token=token["SecretID"])
    assert reader.acl.get_self_token()["AccessorID"] == token["AccessorID"]
    assert reader.jobs.get_jobs() == []

    updated = admin.acl.update_token(
        token["AccessorID"],
        {"AccessorID": token["AccessorID"], "Name": "renamed", "Type": "client",
         "Policies": ["readonly"]},
    )
    assert updated["Name"] == "renamed"
    assert updated["SecretID"] == token["SecretID"]

    assert admin.acl.delete_token(token["AccessorID"])
    with pytest.raises(URLNotAuthorizedNomadException):
        reader.jobs.get_jobs()
    assert admin.acl.delete_policy("readonly")
    assert admin.acl.get_policies() == []
