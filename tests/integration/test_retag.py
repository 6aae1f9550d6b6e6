"""A change of `tags` applied in place on the sandbox (examples/web.jsonc: an ASG behind an HTTPS LB):
the update succeeds and every tagged resource of the job carries exactly the new user tags, none of
the removed ones. Inspection uses boto3 against the sandbox, independent of vmplane's records."""

from __future__ import annotations

import json

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.test_apply_destroy import job_resources
from tests.integration.test_load_balancer import lb_parts

OLD = {"team": "platform", "costCenter": "cc-1234"}  # the example's tags
NEW = {"team": "web-platform", "owner": "alice"}  # a value changed, a key added, a key removed


def user_tags(tags: list[dict[str, str]] | dict[str, str]) -> dict[str, str]:
    """The user's part of a tag set: not vmplane's (zop:), not AWS's (aws:), not Name."""
    pairs = tags.items() if isinstance(tags, dict) else ((t["Key"], t["Value"]) for t in tags)
    return {k: v for k, v in pairs if not k.startswith(("zop:", "aws:")) and k != "Name"}


def every_tag_set(sb: Sandbox, job_id: str, domain: str) -> dict[str, list[list[dict[str, str]]]]:
    """The tags of each resource of the job, by kind; every kind must have at least one resource."""
    out: dict[str, list[list[dict[str, str]]]] = {
        kind: [r.get("Tags", []) for r in items] for kind, items in job_resources(sb, job_id).items() if kind != "roles"
    }
    iam, asg, elb, acm = sb.client("iam"), sb.client("autoscaling"), sb.client("elbv2"), sb.client("acm")
    # The sandbox's DescribeLaunchTemplates echoes the tags given at creation; EC2's tag API has the current ones.
    ec2 = sb.client("ec2")
    lt_ids = [lt["LaunchTemplateId"] for lt in job_resources(sb, job_id)["launch_templates"]]
    out["launch_templates"] = [
        [{"Key": t["Key"], "Value": t["Value"]} for t in ec2.describe_tags(Filters=[by_id])["Tags"]]
        for by_id in ({"Name": "resource-id", "Values": [i]} for i in lt_ids)
    ]
    role = "vmplane-acme-itest-retag-vm"
    out["iam_role"] = [iam.list_role_tags(RoleName=role)["Tags"]]
    out["instance_profile"] = [iam.get_instance_profile(InstanceProfileName=role)["InstanceProfile"]["Tags"]]
    groups = asg.describe_auto_scaling_groups(AutoScalingGroupNames=["vmplane-acme-itest-retag-web"])
    out["asg"] = [g["Tags"] for g in groups["AutoScalingGroups"]]
    parts = lb_parts(sb, job_id, domain)
    listeners = [x["ListenerArn"] for x in parts["listeners"]]
    for kind, arns in (("alb", parts["lbs"]), ("target_group", parts["target_groups"]), ("listeners", listeners)):
        out[kind] = [d["Tags"] for d in elb.describe_tags(ResourceArns=arns)["TagDescriptions"]] if arns else []
    out["certificate"] = [acm.list_tags_for_certificate(CertificateArn=a)["Tags"] for a in parts["certificates"]]
    return out


@pytest.mark.sandbox
def test_a_tags_edit_retags_every_resource_of_the_job(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, "itest-retag", example="web.jsonc")
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes", timeout=600)
    domain = "itest-retag.sandbox.vmplane.test"
    try:
        before = every_tag_set(sandbox, job["id"], domain)
        # Every kind is there to check (the sandbox leaves an ASG instance's volumes untagged, so none are listed).
        assert [k for k, v in before.items() if not v] == ["volumes"]
        assert all(user_tags(t) == OLD for sets in before.values() for t in sets)

        spec = json.loads(env_file.read_text())
        spec["tags"] = NEW
        env_file.write_text(json.dumps(spec))
        updated = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes", timeout=600)
        assert updated["status"] == "succeeded", updated["error"]
        assert updated["config"]["operation"]["kind"] == "update"
        assert "stepUpdateTags" in json.dumps(updated["config"]["operation"])

        after = every_tag_set(sandbox, job["id"], domain)
        assert {k: len(v) for k, v in after.items()} == {k: len(v) for k, v in before.items()}
        wrong = {kind: [user_tags(t) for t in sets if user_tags(t) != NEW] for kind, sets in after.items()}
        assert not any(wrong.values()), wrong
        # The ASG hands the new tags to the instances it launches from now on.
        (asg_tags,) = after["asg"]
        assert all(t["PropagateAtLaunch"] for t in asg_tags if t["Key"] in NEW)
        # So does the launch template (a new version), and no VM is outdated: a tag change replaces nothing.
        ec2 = sandbox.client("ec2")
        (lt_id,) = updated["config"]["infra"]["LaunchTemplateID"].values()
        latest = ec2.describe_launch_template_versions(LaunchTemplateId=lt_id, Versions=["$Latest"])
        specs = latest["LaunchTemplateVersions"][0]["LaunchTemplateData"]["TagSpecifications"]
        assert all(user_tags(s["Tags"]) == NEW for s in specs if s["ResourceType"] in ("instance", "volume"))
        current = updated["config"]["infra"]["LaunchTemplateVersion"]["web"]
        assert current == 2 and all(v["LaunchTemplateVersion"] == current for v in updated["config"]["infra"]["VMs"])
    finally:
        assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes", timeout=600)["status"] == "deleted"
