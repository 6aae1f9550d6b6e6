"""The same org/env already in the account under names vmplane would create (here as the generated
Terraform stack leaves them: same names, another owner's tag): `vmplane apply` is refused by stepValidate's
checks before a job exists (exit 2), names the resource and its owner, and records and creates nothing.
Inspection uses boto3 against the sandbox."""

from __future__ import annotations

import pytest
from tests.helpers import Cli, Sandbox, write_env

from vmplane.clouds.aws.iam import ASSUME_ROLE_POLICY
from vmplane.jobs.precheck import UNBORN_JOB

NAME = "itest-taken"
DOMAIN = f"{NAME}.sandbox.vmplane.test"
ROLE = f"vmplane-acme-{NAME}-vm"


def _record(sb: Sandbox, action: str) -> None:
    r53 = sb.client("route53")
    zone = next(z["Id"] for z in r53.list_hosted_zones()["HostedZones"] if z["Name"] == "sandbox.vmplane.test.")
    rrset = {"Name": DOMAIN, "Type": "A", "TTL": 60, "ResourceRecords": [{"Value": "192.0.2.10"}]}
    r53.change_resource_record_sets(
        HostedZoneId=zone, ChangeBatch={"Changes": [{"Action": action, "ResourceRecordSet": rrset}]}
    )


def _created_anything(sb: Sandbox, job_id: str) -> list[str]:
    ec2 = sb.client("ec2")
    out = []
    for key, value in (("zop:jobId", job_id), ("zop:env", NAME)):
        f = [{"Name": f"tag:{key}", "Values": [value]}]
        out += [v["VpcId"] for v in ec2.describe_vpcs(Filters=f)["Vpcs"]]
        out += [s["SubnetId"] for s in ec2.describe_subnets(Filters=f)["Subnets"]]
        out += [a["AllocationId"] for a in ec2.describe_addresses(Filters=f)["Addresses"]]
    return out


@pytest.mark.sandbox
def test_taken_names_refuse_apply_before_any_job_and_nothing_is_created(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, NAME, example="web.jsonc")
    iam = sandbox.client("iam")
    iam.create_role(
        # A trust policy IAM accepts: the strict sandbox, like IAM, refuses "{}" (MalformedPolicyDocument).
        RoleName=ROLE,
        AssumeRolePolicyDocument=ASSUME_ROLE_POLICY,
        Tags=[{"Key": "zop:jobId", "Value": "tf-stack-itest"}],
    )
    _record(sandbox, "CREATE")
    try:
        refused = cli.run("apply", "-f", str(env_file), "--sandbox", "--yes", "--output", "json")
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stdout == ""  # no job to print
        assert f"IAM role {ROLE} already exists and belongs to job tf-stack-itest" in refused.stderr
        assert cli.json("jobs")["jobs"] == []
        assert _created_anything(sandbox, UNBORN_JOB) == []

        # The role gone, the hand-made DNS record at the domain is the next conflict, named by its field.
        iam.delete_role(RoleName=ROLE)
        refused = cli.run("apply", "-f", str(env_file), "--sandbox", "--yes")
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "loadBalancer.domain: " in refused.stderr
        assert f"A record for {DOMAIN} that this job did not write" in refused.stderr
        assert cli.json("jobs")["jobs"] == []
        assert _created_anything(sandbox, UNBORN_JOB) == []
    finally:
        _record(sandbox, "DELETE")
        if any(r["RoleName"] == ROLE for r in iam.list_roles()["Roles"]):
            iam.delete_role(RoleName=ROLE)
