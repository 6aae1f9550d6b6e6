"""Launch templates, one per pool: a new version when the image, type, user-data or disk changes."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from functools import partial
from typing import Any

from vmplane.bootstrap.cloudinit import render_user_data
from vmplane.bootstrap.vmconfig import job_manifest
from vmplane.clouds import deletes
from vmplane.clouds.aws import naming, tokens
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.security_groups import ensure_security_group
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import find_tagged, job_filters, tag_list, tag_spec
from vmplane.clouds.base import Context


def launch_template_data(ctx: Context, pool_name: str) -> dict[str, Any]:
    spec, infra, t = ctx.spec, ctx.infra, ctx.tagger
    pool = spec.pools[pool_name]
    image = aws_ids(infra).Images[pool_name]
    user_data = render_user_data(spec, pool_name, job_manifest(spec, pool_name, ctx.vmconfig))
    return {
        "ImageId": image.ImageID,
        "InstanceType": pool.instance_type,
        "IamInstanceProfile": {"Arn": aws_ids(infra).InstanceProfileArn},
        "UserData": base64.b64encode(user_data.encode()).decode(),
        "SecurityGroupIds": [infra.VMSecurityGroupID],
        # IMDSv2 only; hop limit 2 so containers on the Docker bridge can still reach it.
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 2},
        "BlockDeviceMappings": [
            {
                "DeviceName": image.RootDeviceName,
                "Ebs": {
                    "VolumeSize": pool.disk_gb,
                    "VolumeType": "gp3",
                    "Encrypted": True,
                    "DeleteOnTermination": True,
                },
            }
        ],
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tag_list(t.tags("vm"))},
            {"ResourceType": "volume", "Tags": tag_list(t.tags("volume"))},
            {"ResourceType": "network-interface", "Tags": tag_list(t.tags("vm-eni"))},
        ],
    }


def ensure_launch_templates(aws: AwsClients, ctx: Context) -> None:
    ensure_security_group(aws, ctx)
    ec2, infra, t = aws.ec2, ctx.infra, ctx.tagger
    for pool_name in ctx.spec.pools:
        name = naming.launch_template_name(ctx.spec, pool_name)
        data = launch_template_data(ctx, pool_name)
        found = aws_call(
            ec2.describe_launch_templates,
            Filters=[*job_filters(t, "launch-template"), {"Name": "tag:Name", "Values": [name]}],
        )["LaunchTemplates"]
        if not found:
            lt = aws_call(
                ec2.create_launch_template,
                LaunchTemplateName=name,
                LaunchTemplateData=data,
                ClientToken=tokens.launch_template_token(
                    ctx.job_id, pool_name, aws_ids(infra).LaunchTemplateAttempts.get(pool_name, 0)
                ),
                TagSpecifications=tag_spec("launch-template", t.tags("launch-template", name)),
            )["LaunchTemplate"]
            lt_id, version = lt["LaunchTemplateId"], int(lt["LatestVersionNumber"])
        else:
            lt_id = found[0]["LaunchTemplateId"]
            latest = aws_call(ec2.describe_launch_template_versions, LaunchTemplateId=lt_id, Versions=["$Latest"])
            current = latest["LaunchTemplateVersions"][0]
            version = int(current["VersionNumber"])
            current_data = current["LaunchTemplateData"]
            if _differs(current_data, data) or _tags_differ(current_data, data):
                # A changed image or user-data is a new version; running VMs are not rotated by this.
                # New tags are one too, so that VMs launched later carry them.
                version = int(
                    aws_call(ec2.create_launch_template_version, LaunchTemplateId=lt_id, LaunchTemplateData=data)[
                        "LaunchTemplateVersion"
                    ]["VersionNumber"]
                )
        infra.LaunchTemplateID = {**infra.LaunchTemplateID, pool_name: lt_id}
        infra.LaunchTemplateVersion = {**infra.LaunchTemplateVersion, pool_name: version}
        _carry_tag_only_changes(aws, ctx, pool_name, lt_id, version, data)
        ctx.save()
        ctx.log(f"launch template {name} {lt_id} v{version}")


def _carry_tag_only_changes(
    aws: AwsClients, ctx: Context, pool_name: str, lt_id: str, version: int, data: dict[str, Any]
) -> None:
    """VMs launched from a version that differs from the current one only in its tags are not outdated:
    a tag change re-tags running VMs in place (stepUpdateTags). Decided from the versions' contents, not
    from what this run created, so a crash between creating the version and saving converges too."""
    older = sorted(
        {
            v.LaunchTemplateVersion
            for v in ctx.infra.VMs
            if v.Pool == pool_name and v.LaunchTemplateVersion is not None and v.LaunchTemplateVersion != version
        }
    )
    if not older:
        return
    found = aws_call(
        aws.ec2.describe_launch_template_versions, LaunchTemplateId=lt_id, Versions=[str(v) for v in older]
    )["LaunchTemplateVersions"]
    same = {int(v["VersionNumber"]) for v in found if not _differs(v["LaunchTemplateData"], data)}
    for vm in ctx.infra.VMs:
        if vm.Pool == pool_name and vm.LaunchTemplateVersion in same:
            vm.LaunchTemplateVersion = version
    if same:
        ctx.log(f"pool {pool_name}: v{', v'.join(map(str, sorted(same)))} differ from v{version} only in tags")


def _tags_differ(current: Mapping[str, Any], desired: dict[str, Any]) -> bool:
    """Whether the tags a version gives what it launches differ, by resource type and order-free. Only
    the types vmplane sets count: the sandbox also lists the template's own tags in version 1's data."""

    def by_type(data: Mapping[str, Any]) -> dict[str, dict[str, str]]:
        specs = data.get("TagSpecifications", [])
        return {s["ResourceType"]: {t["Key"]: t["Value"] for t in s.get("Tags", [])} for s in specs}

    want, have = by_type(desired), by_type(current)
    return any(have.get(kind) != tags for kind, tags in want.items())


def _differs(current: Mapping[str, Any], desired: dict[str, Any]) -> bool:
    keys = (
        "ImageId",
        "InstanceType",
        "UserData",
        "SecurityGroupIds",
        "BlockDeviceMappings",
        "IamInstanceProfile",
        "MetadataOptions",
    )
    return any(current.get(k) != desired.get(k) for k in keys)


# ---- teardown -------------------------------------------------------------------------------------


def delete_launch_templates(aws: AwsClients, ctx: Context) -> None:
    ec2 = aws.ec2
    found = find_tagged(ec2.describe_launch_templates, "LaunchTemplates", job_filters(ctx.tagger))
    for lt in found:
        lt_id = lt["LaunchTemplateId"]
        deletes.delete(partial(aws_call, ec2.delete_launch_template, LaunchTemplateId=lt_id), what=f"delete {lt_id}")
    ctx.infra.LaunchTemplateID, ctx.infra.LaunchTemplateVersion = {}, {}
    ctx.save()
    ctx.log(f"deleted {len(found)} launch templates")
