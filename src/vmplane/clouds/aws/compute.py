"""The VM security group, launch templates, Fixed-pool instances and ASG pools."""

from __future__ import annotations

import base64
import contextlib
import time
from typing import Any

from vmplane.bootstrap.cloudinit import SENTINEL_CHECK_COMMAND, render_user_data
from vmplane.clouds.aws import exec as aws_exec
from vmplane.clouds.aws.errors import aws_call, aws_errors
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import find_tagged, job_filters, tag_list, tag_spec
from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.errors import (
    ConflictError,
    DeadlineExceededError,
    DependencyViolationError,
    InvalidRequestError,
    NotFoundError,
    TransientError,
)
from vmplane.clouds.waits import poll, retry
from vmplane.spec.models import AsgPool, FixedPool
from vmplane.state import VMRecord, VMState

LIVE_STATES = ["pending", "running", "stopping", "stopped"]
RUNNING_TIMEOUT = 600.0
IAM_PROPAGATION_TIMEOUT = 120.0
TEARDOWN_TIMEOUT = 900.0


def resource_name(ctx: Context, suffix: str) -> str:
    return f"vmplane-{ctx.spec.org}-{ctx.spec.name}-{suffix}"


# ---- security group -------------------------------------------------------------------------------


def ensure_security_group(aws: AwsClients, ctx: Context) -> str:
    """The VM group: the configured TCP ports from inside the VPC only. Never 22, never 0.0.0.0/0."""
    ec2, infra, t = aws.ec2, ctx.infra, ctx.tagger
    found = find_tagged(ec2.describe_security_groups, "SecurityGroups", job_filters(t, "vm-sg"))
    if found:
        sg = found[0]
    else:
        name = resource_name(ctx, "vm")
        gid = aws_call(
            ec2.create_security_group,
            GroupName=name,
            Description=f"vmplane VMs of {ctx.spec.org}/{ctx.spec.name}: VPC-internal ingress only",
            VpcId=infra.VpcID,
            TagSpecifications=tag_spec("security-group", t.tags("vm-sg", name)),
        )["GroupId"]
        sg = {"GroupId": gid, "IpPermissions": []}
    infra.VMSecurityGroupID = sg["GroupId"]
    ctx.save()

    desired = {(p, infra.VpcCidr) for p in ctx.spec.network.ingress_ports}
    current: set[tuple[int, str]] = set()
    stale: list[dict[str, Any]] = []
    for perm in sg.get("IpPermissions", []):
        single_tcp = perm.get("IpProtocol") == "tcp" and perm.get("FromPort") == perm.get("ToPort")
        keep = [r for r in perm.get("IpRanges", []) if single_tcp and (perm["FromPort"], r["CidrIp"]) in desired]
        current.update((perm["FromPort"], r["CidrIp"]) for r in keep)
        # Anything else (other ports or protocols, other CIDRs, IPv6, groups, prefix lists) was not asked for.
        extra = {k: perm.get(k, []) for k in ("Ipv6Ranges", "UserIdGroupPairs", "PrefixListIds")}
        extra["IpRanges"] = [r for r in perm.get("IpRanges", []) if r not in keep]
        if any(extra.values()):
            rule = {k: perm[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in perm}
            stale.append({**rule, **{k: v for k, v in extra.items() if v}})
    to_add = sorted(desired - current)
    if to_add:
        with contextlib.suppress(ConflictError):  # InvalidPermission.Duplicate: added before a crash
            aws_call(
                ec2.authorize_security_group_ingress,
                GroupId=sg["GroupId"],
                IpPermissions=[_tcp_rule(port, cidr) for port, cidr in to_add],
            )
    # Security groups are mutable in place (the seed): drop whatever the spec does not ask for.
    if stale:
        aws_call(ec2.revoke_security_group_ingress, GroupId=sg["GroupId"], IpPermissions=stale)
    ctx.log(f"vm security group {sg['GroupId']}: tcp {sorted(p for p, _ in desired)} from {infra.VpcCidr}")
    return str(sg["GroupId"])


def _tcp_rule(port: int, cidr: str) -> dict[str, Any]:
    return {
        "IpProtocol": "tcp",
        "FromPort": port,
        "ToPort": port,
        "IpRanges": [{"CidrIp": cidr, "Description": "inside the VPC"}],
    }


# ---- launch templates -----------------------------------------------------------------------------


def launch_template_data(ctx: Context, pool_name: str) -> dict[str, Any]:
    spec, infra, t = ctx.spec, ctx.infra, ctx.tagger
    pool = spec.pools[pool_name]
    image = infra.Images[pool_name]
    user_data = render_user_data(spec, pool_name)
    return {
        "ImageId": image.ImageID,
        "InstanceType": pool.instance_type,
        "IamInstanceProfile": {"Arn": infra.InstanceProfileArn},
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
        name = resource_name(ctx, pool_name)
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
                ClientToken=f"{ctx.job_id}-lt-{pool_name}"[:64],
                TagSpecifications=tag_spec("launch-template", t.tags("launch-template", name)),
            )["LaunchTemplate"]
            lt_id, version = lt["LaunchTemplateId"], int(lt["LatestVersionNumber"])
        else:
            lt_id = found[0]["LaunchTemplateId"]
            latest = aws_call(ec2.describe_launch_template_versions, LaunchTemplateId=lt_id, Versions=["$Latest"])
            current = latest["LaunchTemplateVersions"][0]
            version = int(current["VersionNumber"])
            if _differs(current["LaunchTemplateData"], data):
                # A changed image or user-data is a new version; running VMs are not rotated by this.
                version = int(
                    aws_call(ec2.create_launch_template_version, LaunchTemplateId=lt_id, LaunchTemplateData=data)[
                        "LaunchTemplateVersion"
                    ]["VersionNumber"]
                )
        infra.LaunchTemplateID = {**infra.LaunchTemplateID, pool_name: lt_id}
        infra.LaunchTemplateVersion = {**infra.LaunchTemplateVersion, pool_name: version}
        ctx.save()
        ctx.log(f"launch template {name} {lt_id} v{version}")


def _differs(current: dict[str, Any], desired: dict[str, Any]) -> bool:
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


# ---- Fixed pools ----------------------------------------------------------------------------------


def ensure_vms(aws: AwsClients, ctx: Context) -> None:
    for pool_name, pool in ctx.spec.pools.items():
        if isinstance(pool, FixedPool):
            _ensure_fixed_pool(aws, ctx, pool_name, pool)
        else:
            _ensure_asg_pool(aws, ctx, pool_name, pool)
    _wait_running(aws, ctx)
    _wait_bootstrapped(aws, ctx)


def _ensure_fixed_pool(aws: AwsClients, ctx: Context, pool_name: str, pool: FixedPool) -> None:
    infra = ctx.infra
    for index in range(pool.size):
        name = f"{ctx.spec.name}-{pool_name}-{index}"
        rec = infra.vm(name)
        if rec is None:
            rec = VMRecord(Name=name, Pool=pool_name, Index=index)
            infra.VMs = [*infra.VMs, rec]
            ctx.save()  # intent first: a crash from here on leaves a record to reconcile
        live = _find_instance(aws, ctx, name)
        if live is None:
            subnet = infra.PrivateSubnetIDs[index % len(infra.PrivateSubnetIDs)]
            live = _run_instance(aws, ctx, pool_name, name, subnet)
        _record_instance(rec, live, infra.LaunchTemplateVersion.get(pool_name))
        ctx.save()
    ctx.log(f"pool {pool_name}: {pool.size} VMs launched")


def _find_instance(aws: AwsClients, ctx: Context, name: str) -> dict[str, Any] | None:
    reservations = aws_call(
        aws.ec2.describe_instances,
        Filters=[*job_filters(ctx.tagger, "vm", name), {"Name": "instance-state-name", "Values": LIVE_STATES}],
    )["Reservations"]
    instances = [i for r in reservations for i in r["Instances"]]
    return instances[0] if instances else None


def _run_instance(aws: AwsClients, ctx: Context, pool_name: str, name: str, subnet: str) -> dict[str, Any]:
    infra = ctx.infra

    def launch() -> dict[str, Any]:
        try:
            return dict(
                aws_call(
                    aws.ec2.run_instances,
                    LaunchTemplate={
                        "LaunchTemplateId": infra.LaunchTemplateID[pool_name],
                        "Version": str(infra.LaunchTemplateVersion[pool_name]),
                    },
                    SubnetId=subnet,
                    MinCount=1,
                    MaxCount=1,
                    # Same token on a retry after a crash: AWS returns the first instance, not a new one.
                    ClientToken=f"{ctx.job_id}-{name}"[:64],
                    # Tagged here as well as in the template: tags must not depend on propagation.
                    TagSpecifications=[
                        *tag_spec("instance", ctx.tagger.tags("vm", name)),
                        *tag_spec("volume", ctx.tagger.tags("volume", f"{name}-root")),
                        *tag_spec("network-interface", ctx.tagger.tags("vm-eni", f"{name}-eni")),
                    ],
                )["Instances"][0]
            )
        except InvalidRequestError as err:
            # A new instance profile takes a few seconds to be usable by EC2 (IAM is eventually consistent).
            if "iaminstanceprofile" in str(err).lower().replace(" ", ""):
                raise TransientError(str(err), code=err.code, operation=err.operation) from err
            raise

    return retry(launch, what=f"launch {name}", timeout=IAM_PROPAGATION_TIMEOUT)


def _record_instance(rec: VMRecord, inst: dict[str, Any], lt_version: int | None) -> None:
    rec.ID = inst["InstanceId"]
    rec.PrivateIP = inst.get("PrivateIpAddress")
    rec.AZ = inst.get("Placement", {}).get("AvailabilityZone")
    rec.SubnetID = inst.get("SubnetId")
    rec.LaunchTemplateVersion = lt_version


# ---- ASG pools ------------------------------------------------------------------------------------


def _ensure_asg_pool(aws: AwsClients, ctx: Context, pool_name: str, pool: AsgPool) -> None:
    asg, infra, t = aws.autoscaling, ctx.infra, ctx.tagger
    name = resource_name(ctx, pool_name)
    infra.ScalingGroupID = {**infra.ScalingGroupID, pool_name: name}
    ctx.save()
    groups = aws_call(asg.describe_auto_scaling_groups, AutoScalingGroupNames=[name])["AutoScalingGroups"]
    if groups:
        owner = {x["Key"]: x["Value"] for x in groups[0].get("Tags", [])}.get(t.job_key)
        if owner != ctx.job_id:
            raise ConflictError(f"auto scaling group {name} exists and belongs to {owner or 'someone else'}")
    else:
        aws_call(
            asg.create_auto_scaling_group,
            AutoScalingGroupName=name,
            LaunchTemplate={"LaunchTemplateId": infra.LaunchTemplateID[pool_name], "Version": "$Latest"},
            MinSize=pool.min,
            MaxSize=pool.max,
            DesiredCapacity=pool.desired,
            VPCZoneIdentifier=",".join(infra.PrivateSubnetIDs),
            HealthCheckGracePeriod=300,
            Tags=[
                {
                    "Key": k,
                    "Value": v,
                    "PropagateAtLaunch": True,
                    "ResourceId": name,
                    "ResourceType": "auto-scaling-group",
                }
                for k, v in sorted(t.tags("vm", f"{ctx.spec.name}-{pool_name}").items())
            ],
        )

    def in_service() -> list[dict[str, Any]] | None:
        g = aws_call(asg.describe_auto_scaling_groups, AutoScalingGroupNames=[name])["AutoScalingGroups"][0]
        up = [i for i in g.get("Instances", []) if i["LifecycleState"] == "InService"]
        return up if len(up) >= pool.desired else None

    instances = poll(in_service, what=f"auto scaling group {name} capacity", timeout=RUNNING_TIMEOUT, first=0.1)
    by_id = {v.ID: v for v in infra.VMs}
    for i in instances:
        if i["InstanceId"] not in by_id:
            rec = VMRecord(Name=i["InstanceId"], Pool=pool_name, Index=-1, ID=i["InstanceId"], AZ=i["AvailabilityZone"])
            infra.VMs = [*infra.VMs, rec]
    ctx.save()
    ctx.log(f"pool {pool_name}: auto scaling group {name} with {len(instances)} in service")


# ---- readiness ------------------------------------------------------------------------------------


def _wait_running(aws: AwsClients, ctx: Context) -> None:
    infra = ctx.infra
    pending = {v.ID: v for v in infra.VMs if v.ID and v.State == VMState.pending}
    if not pending:
        return

    def all_running() -> bool | None:
        res = aws_call(aws.ec2.describe_instances, InstanceIds=sorted(pending))["Reservations"]
        for inst in (i for r in res for i in r["Instances"]):
            state = inst["State"]["Name"]
            if state in ("terminated", "shutting-down"):
                raise InvalidRequestError(f"instance {inst['InstanceId']} went {state} during launch")
            if state == "running" and inst["InstanceId"] in pending:
                rec = pending.pop(inst["InstanceId"])
                rec.PrivateIP = inst.get("PrivateIpAddress") or rec.PrivateIP
                rec.State = VMState.bootstrap
        return True if not pending else None

    try:
        poll(all_running, what="instances to be running", timeout=RUNNING_TIMEOUT)
    finally:
        ctx.save()


def _wait_bootstrapped(aws: AwsClients, ctx: Context) -> None:
    """Poll the sentinel through the exec channel until every VM is ready, or fail at the deadline."""
    infra = ctx.infra
    deadline = time.monotonic() + ctx.spec.bootstrap.timeout_seconds
    delay = 1.0
    while waiting := [v for v in infra.VMs if v.ID and v.State == VMState.bootstrap]:
        try:
            results = aws_exec.run(
                aws,
                [v.ID for v in waiting if v.ID],
                [SENTINEL_CHECK_COMMAND],
                comment="vmplane sentinel check",
                timeout=60,
            )
        except (TransientError, DeadlineExceededError):
            results = []  # agents still registering: try again
        by_id = {r.instance_id: r for r in results}
        for vm in waiting:
            r = by_id.get(vm.ID or "")
            if r is not None and r.ok:
                vm.State = VMState.ready
        ctx.save()
        if not any(v.State == VMState.bootstrap for v in infra.VMs):
            break
        if time.monotonic() >= deadline:
            late = [v.Name for v in infra.VMs if v.State == VMState.bootstrap]
            for v in infra.VMs:
                if v.State == VMState.bootstrap:
                    v.State = VMState.failed
            ctx.save()
            raise DeadlineExceededError(
                f"bootstrap sentinel not seen within {ctx.spec.bootstrap.timeout_seconds}s on {', '.join(late)}; "
                "see /var/log/vmplane-bootstrap.log on the VM (vmplane exec)"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 15)
    ctx.log(f"{sum(v.State == VMState.ready for v in infra.VMs)} VMs ready (sentinel seen)")


# ---- teardown -------------------------------------------------------------------------------------


def delete_vms(aws: AwsClients, ctx: Context) -> None:
    ec2, asg, t = aws.ec2, aws.autoscaling, ctx.tagger
    # ASG pools: min=max=desired=0 first (the seed's order), then delete.
    for name in _job_asg_names(aws, ctx):
        try:
            aws_call(asg.update_auto_scaling_group, AutoScalingGroupName=name, MinSize=0, MaxSize=0, DesiredCapacity=0)
            aws_call(asg.delete_auto_scaling_group, AutoScalingGroupName=name, ForceDelete=True)
        except NotFoundError:
            pass
        poll(
            lambda n=name: (
                True
                if not aws_call(asg.describe_auto_scaling_groups, AutoScalingGroupNames=[n])["AutoScalingGroups"]
                else None
            ),
            what=f"auto scaling group {name} deletion",
            timeout=TEARDOWN_TIMEOUT,
            first=0.1,
            cap=10,
        )
    ctx.infra.ScalingGroupID = {}
    ctx.save()

    res = aws_call(
        ec2.describe_instances,
        Filters=[*job_filters(t), {"Name": "instance-state-name", "Values": [*LIVE_STATES, "shutting-down"]}],
    )["Reservations"]
    ids = sorted(i["InstanceId"] for r in res for i in r["Instances"])
    if ids:
        aws_call(ec2.terminate_instances, InstanceIds=ids)
        for vm in ctx.infra.VMs:
            vm.State = VMState.terminated
        ctx.save()

        def terminated() -> bool | None:
            r = aws_call(ec2.describe_instances, InstanceIds=ids)["Reservations"]
            return True if all(i["State"]["Name"] == "terminated" for x in r for i in x["Instances"]) else None

        poll(terminated, what=f"{len(ids)} instances to terminate", timeout=TEARDOWN_TIMEOUT, first=0.1, cap=10)
    ctx.infra.VMs = []
    ctx.save()
    ctx.log(f"terminated {len(ids)} instances")


def _job_asg_names(aws: AwsClients, ctx: Context) -> list[str]:
    return sorted(set(ctx.infra.ScalingGroupID.values()) | set(job_scaling_groups(aws, ctx.tagger)))


def job_scaling_groups(aws: AwsClients, tagger: Tagger) -> list[str]:
    """Auto scaling groups tagged with the job, checked client-side over every page (tag filters on
    DescribeAutoScalingGroups are not supported everywhere)."""
    with aws_errors():
        pages = aws.autoscaling.get_paginator("describe_auto_scaling_groups").paginate()
        return [
            g["AutoScalingGroupName"]
            for page in pages
            for g in page["AutoScalingGroups"]
            if any(t["Key"] == tagger.job_key and t["Value"] == tagger.job_id for t in g.get("Tags", []))
        ]


def delete_launch_templates(aws: AwsClients, ctx: Context) -> None:
    ec2 = aws.ec2
    found = find_tagged(ec2.describe_launch_templates, "LaunchTemplates", job_filters(ctx.tagger))
    for lt in found:
        with contextlib.suppress(NotFoundError):
            aws_call(ec2.delete_launch_template, LaunchTemplateId=lt["LaunchTemplateId"])
    ctx.infra.LaunchTemplateID, ctx.infra.LaunchTemplateVersion = {}, {}
    ctx.save()
    ctx.log(f"deleted {len(found)} launch templates")


def delete_security_group(aws: AwsClients, ctx: Context) -> None:
    ec2 = aws.ec2
    groups = [
        g
        for g in find_tagged(ec2.describe_security_groups, "SecurityGroups", job_filters(ctx.tagger))
        if g["GroupName"] != "default"  # the VPC's own group goes with the VPC
    ]
    for sg in groups:

        def delete(gid: str = sg["GroupId"]) -> None:
            with contextlib.suppress(NotFoundError):
                aws_call(ec2.delete_security_group, GroupId=gid)

        # Interfaces of terminated instances release the group a little later: DependencyViolation till then.
        retry(delete, what=f"delete {sg['GroupId']}", timeout=TEARDOWN_TIMEOUT, retry_on=(DependencyViolationError,))
    ctx.infra.VMSecurityGroupID = None
    ctx.save()
    ctx.log(f"deleted {len(groups)} security groups")
