"""Drift through the API with the real AWS driver on the sandbox: the issue's own case (a Fixed VM
terminated, 22 opened to the world on the VPC's default group, both out of band with boto3) read by
`GET /provisioning-jobs/{id}/drift`, counted by the gauge, repaired by `PATCH {"vmOp": "repair"}`, and the
drift clean after. test_api_drift.py covers the refusals and the job-not-at-rest answers, which need a
driver held in the middle of its repair; test_aws_drift.py covers the ten cases through the CLI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.helpers import Sandbox
from tests.integration.test_api_drift import DriftApi, serve_in_process

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`"),
]


@pytest.fixture(scope="module")
def api(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DriftApi]:
    yield from serve_in_process(sandbox, tmp_path_factory, None)


def test_the_issues_case_read_counted_repaired_and_clean_after(api: DriftApi, sandbox: Sandbox) -> None:
    from vmplane.jobs import drift
    from vmplane.jobs import service as jobs
    from vmplane.store.db import transaction

    job = api.provisioned("api-drift-aws")
    job_id, infra = job["id"], job["config"]["infra"]
    assert api.drift(job_id).json()["drift"] == []
    ec2 = sandbox.client("ec2")
    first = infra["VMs"][0]
    ec2.terminate_instances(InstanceIds=[first["ID"]])
    default = ec2.describe_security_groups(
        Filters=[{"Name": "vpc-id", "Values": [infra["NetworkID"]]}, {"Name": "group-name", "Values": ["default"]}]
    )["SecurityGroups"][0]["GroupId"]
    world_ssh = {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}
    ec2.authorize_security_group_ingress(GroupId=default, IpPermissions=[world_ssh])

    r = api.drift(job_id)
    assert r.status_code == 200, r.text
    body = r.json()
    found = {(d["resource"], d["kind"], d["id"], d["change"]) for d in body["drift"]}
    assert found == {
        (f"aws_instance.{first['Name']}", "instance", first["ID"], "missing"),
        ("aws_security_group.api-drift-aws-default", "security-group", default, "changed"),
    }, body
    with transaction(api.settings.db_url) as s:  # the JSON `vmplane drift -o json` prints: the same check
        assert drift.check(jobs.view(jobs.get_row(s, job_id))).to_json() == body
    gauge = {k: v for k, v in api.gauge().items() if v}
    assert gauge == {("instance", "missing"): 1, ("security-group", "changed"): 1}
    assert api.job(job_id)["version"] == job["version"]  # a read records nothing

    r = api.repair(job_id, if_match=r.headers["ETag"])
    assert r.status_code == 202, r.text
    assert sorted(i["path"] for i in r.json()["impact"]) == sorted(d["resource"] for d in body["drift"])
    done = api.wait(job_id, "succeeded", "failed")
    assert done["status"] == "succeeded", done["error"]
    assert api.drift(job_id).json()["drift"] == []
    assert set(api.gauge().values()) == {0}
    vms = {v["Name"]: v["ID"] for v in done["config"]["infra"]["VMs"]}
    assert set(vms) == {v["Name"] for v in infra["VMs"]} and vms[first["Name"]] != first["ID"]  # under its name
    assert ec2.describe_security_groups(GroupIds=[default])["SecurityGroups"][0]["IpPermissions"] == []

    assert api.c.delete(f"/provisioning-jobs/{job_id}", headers=api.auth("admin")).status_code == 202
    assert api.wait(job_id, "deleted", "delete_failed")["status"] == "deleted"
