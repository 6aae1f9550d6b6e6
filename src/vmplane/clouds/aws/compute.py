"""The VM security group, launch templates, Fixed-pool instances and ASG pools."""

from __future__ import annotations

import base64
import contextlib
import time
from functools import partial
from typing import Any

from vmplane.bootstrap.cloudinit import SENTINEL_CHECK_COMMAND, render_user_data
from vmplane.clouds.aws import deletes, naming, targets
from vmplane.clouds.aws import exec as aws_exec
from vmplane.clouds.aws.errors import aws_call, aws_errors
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import find_tagged, job_filters, tag_list, tag_spec
from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.errors import (
    ConflictError,
    DeadlineExceededError,
    InvalidRequestError,
    NotFoundError,
    TransientError,
)
from vmplane.clouds.waits import poll, retry
from vmplane.envspec.models import AsgPool, FixedPool
from vmplane.state import InfraConfig, VMRecord, VMState

LIVE_STATES = ["pending", "running", "stopping", "stopped"]
RUNNING_TIMEOUT = 600.0
IAM_PROPAGATION_TIMEOUT = 120.0
TEARDOWN_TIMEOUT = 900.0


# ---- security group -------------------------------------------------------------------------------


def ensure_security_group(aws: AwsClients, ctx: Context) -> str:
    """The VM group: the configured TCP ports from inside the VPC only, and with a load balancer its
    target and health-check ports from the LB's group only. Never 22, never 0.0.0.0/0."""
    ec2, infra = aws.ec2, ctx.infra
    sg = find_or_create_group(aws, ctx, "vm-sg", "vm", "VPC-internal ingress only")
    infra.VMSecurityGroupID = sg["GroupId"]
    ctx.save()

    desired = desired_vm_ingress(ctx)
    current: set[Source] = set()
    stale: list[dict[str, Any]] = []
    for perm in sg.get("IpPermissions", []):
        single_tcp = perm.get("IpProtocol") == "tcp" and perm.get("FromPort") == perm.get("ToPort")
        port = perm.get("FromPort")
        keep_ranges = [r for r in perm.get("IpRanges", []) if single_tcp and (port, r["CidrIp"]) in desired]
        keep_pairs = [p for p in perm.get("UserIdGroupPairs", []) if single_tcp and (port, p["GroupId"]) in desired]
        current.update((port, r["CidrIp"]) for r in keep_ranges)
        current.update((port, p["GroupId"]) for p in keep_pairs)
        # Anything else (other ports or protocols, other CIDRs or groups, IPv6, prefix lists) was not asked for.
        extra: dict[str, list[Any]] = {
            "IpRanges": [r for r in perm.get("IpRanges", []) if r not in keep_ranges],
            "UserIdGroupPairs": [revoke_pair(p) for p in perm.get("UserIdGroupPairs", []) if p not in keep_pairs],
            "Ipv6Ranges": perm.get("Ipv6Ranges", []),
            "PrefixListIds": perm.get("PrefixListIds", []),
        }
        if any(extra.values()):
            rule = {k: perm[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in perm}
            stale.append({**rule, **{k: v for k, v in extra.items() if v}})
    to_add = sorted(desired - current)
    if to_add:
        with contextlib.suppress(ConflictError):  # InvalidPermission.Duplicate: added before a crash
            aws_call(
                ec2.authorize_security_group_ingress,
                GroupId=sg["GroupId"],
                IpPermissions=[_tcp_rule(port, source) for port, source in to_add],
            )
    # Security groups are mutable in place (the seed): drop whatever the spec does not ask for.
    if stale:
        aws_call(ec2.revoke_security_group_ingress, GroupId=sg["GroupId"], IpPermissions=stale)
    ctx.log(f"vm security group {sg['GroupId']}: " + ", ".join(f"tcp/{p} from {s}" for p, s in sorted(desired)))
    return str(sg["GroupId"])


def find_or_create_group(aws: AwsClients, ctx: Context, role: str, suffix: str, purpose: str) -> dict[str, Any]:
    """The job's security group with `role`, found by tag or created in the VPC; returns it as described."""
    found = find_tagged(aws.ec2.describe_security_groups, "SecurityGroups", job_filters(ctx.tagger, role))
    if found:
        return found[0]
    name = naming.account_unique(ctx.spec, suffix)
    gid = aws_call(
        aws.ec2.create_security_group,
        GroupName=name,
        Description=f"vmplane {suffix} of {ctx.spec.org}/{ctx.spec.name}: {purpose}",
        VpcId=ctx.infra.NetworkID,
        TagSpecifications=tag_spec("security-group", ctx.tagger.tags(role, name)),
    )["GroupId"]
    return {"GroupId": gid, "IpPermissions": []}


Source = tuple[int, str]  # (port, CIDR or security group id)


def revoke_pair(pair: dict[str, Any]) -> dict[str, Any]:
    """A group reference as revoke wants it. AWS matches on GroupId; the sandbox (moto) matches the whole
    pair as it was authorized, description included, so send it back as described."""
    return {k: pair[k] for k in ("GroupId", "UserId", "Description") if k in pair}


def desired_vm_ingress(ctx: Context) -> set[Source]:
    infra, lb = ctx.infra, ctx.spec.load_balancer
    lb_sg = aws_ids(infra).LoadBalancerSecurityGroupID if lb is not None else None
    lb_ports = {lb.target_port, lb.health_check.port} if lb is not None and lb_sg else set()
    out: set[Source] = {(p, str(aws_ids(infra).VpcCidr)) for p in ctx.spec.network.ingress_ports if p not in lb_ports}
    out.update((p, str(lb_sg)) for p in lb_ports)
    return out


def _tcp_rule(port: int, source: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"IpProtocol": "tcp", "FromPort": port, "ToPort": port}
    if source.startswith("sg-"):
        rule["UserIdGroupPairs"] = [{"GroupId": source, "Description": "from the load balancer only"}]
    else:
        rule["IpRanges"] = [{"CidrIp": source, "Description": "inside the VPC"}]
    return rule


# ---- launch templates -----------------------------------------------------------------------------


def launch_template_data(ctx: Context, pool_name: str) -> dict[str, Any]:
    spec, infra, t = ctx.spec, ctx.infra, ctx.tagger
    pool = spec.pools[pool_name]
    image = aws_ids(infra).Images[pool_name]
    user_data = render_user_data(spec, pool_name)
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
        name = naming.instance_name(ctx.spec, pool_name, index)
        rec = infra.vm(name)
        if rec is None:
            rec = VMRecord(Name=name, Pool=pool_name, Index=index)
            infra.VMs = [*infra.VMs, rec]
            ctx.save()  # intent first: a crash from here on leaves a record to reconcile
        live = _find_instance(aws, ctx, name, rec.ID)
        if live is None:
            subnet = infra.VMSubnetIDs[index % len(infra.VMSubnetIDs)]
            live = _run_instance(aws, ctx, pool_name, name, subnet)
        _record_instance(rec, live)
        ctx.save()
    _shrink_fixed_pool(aws, ctx, pool_name, pool.size)
    ctx.log(f"pool {pool_name}: {pool.size} VMs launched")


def _shrink_fixed_pool(aws: AwsClients, ctx: Context, pool_name: str, size: int) -> None:
    """A smaller `size` removes the highest-numbered VMs (drained from the LB first)."""
    extra = [v for v in ctx.infra.VMs if v.Pool == pool_name and v.Index >= size]
    for vm in extra:
        if vm.ID:
            targets.drain_target(aws, ctx, vm.ID)
            _terminate(aws, [vm.ID])
        ctx.infra.VMs = [v for v in ctx.infra.VMs if v.Name != vm.Name]
        ctx.save()
        ctx.log(f"pool {pool_name}: removed {vm.Name} (size is {size})")


def _find_instance(aws: AwsClients, ctx: Context, name: str, known_id: str | None = None) -> dict[str, Any] | None:
    """The live instance named `name`; the recorded one first (during a rotation two share the name)."""
    instances = _instances_named(aws, ctx, name)
    instances.sort(key=lambda i: (i["InstanceId"] != known_id, i.get("LaunchTime", "")))
    return instances[0] if instances else None


def _run_instance(
    aws: AwsClients, ctx: Context, pool_name: str, name: str, subnet: str, token_suffix: str = ""
) -> dict[str, Any]:
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
                    ClientToken=f"{ctx.job_id}-{name}{token_suffix}"[:64],
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


def _record_instance(rec: VMRecord, inst: dict[str, Any]) -> None:
    rec.ID = inst["InstanceId"]
    rec.PrivateIP = inst.get("PrivateIpAddress")
    rec.AZ = inst.get("Placement", {}).get("AvailabilityZone")
    rec.SubnetID = inst.get("SubnetId")
    rec.LaunchTemplateVersion = launched_version(inst)


def launched_version(inst: dict[str, Any]) -> int | None:
    """The template version an instance was launched from (EC2 tags every instance launched from one)."""
    tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
    version = tags.get("aws:ec2launchtemplate:version")
    return int(version) if version and version.isdigit() else None


# ---- ASG pools ------------------------------------------------------------------------------------


def _ensure_asg_pool(aws: AwsClients, ctx: Context, pool_name: str, pool: AsgPool) -> None:
    asg, infra, t = aws.autoscaling, ctx.infra, ctx.tagger
    name = naming.asg_name(ctx.spec, pool_name)
    infra.ScalingGroupID = {**infra.ScalingGroupID, pool_name: name}
    ctx.save()
    groups = aws_call(asg.describe_auto_scaling_groups, AutoScalingGroupNames=[name])["AutoScalingGroups"]
    if groups:
        owner = {x["Key"]: x["Value"] for x in groups[0].get("Tags", [])}.get(t.job_key)
        if owner != ctx.job_id:
            raise ConflictError(f"auto scaling group {name} exists and belongs to {owner or 'someone else'}")
        g = groups[0]
        if (g["MinSize"], g["MaxSize"], g["DesiredCapacity"]) != (pool.min, pool.max, pool.desired):
            # Sizes are a cloud change, applied in place; instances that stay in range are kept.
            aws_call(
                asg.update_auto_scaling_group,
                AutoScalingGroupName=name,
                MinSize=pool.min,
                MaxSize=pool.max,
                DesiredCapacity=pool.desired,
            )
            ctx.log(f"pool {pool_name}: sizes now min {pool.min} / desired {pool.desired} / max {pool.max}")
    else:
        aws_call(
            asg.create_auto_scaling_group,
            AutoScalingGroupName=name,
            # $Latest: a new template version applies to instances launched from now on; running ones are
            # replaced only by `vmplane rotate` (an instance refresh), never silently. Pinned: even new
            # instances keep the version until a rotate moves the group on.
            LaunchTemplate={
                "LaunchTemplateId": infra.LaunchTemplateID[pool_name],
                "Version": group_version(ctx, pool_name),
            },
            MinSize=pool.min,
            MaxSize=pool.max,
            DesiredCapacity=pool.desired,
            VPCZoneIdentifier=",".join(infra.VMSubnetIDs),
            HealthCheckGracePeriod=ctx.spec.bootstrap.timeout_seconds,
            Tags=[
                {
                    "Key": k,
                    "Value": v,
                    "PropagateAtLaunch": True,
                    "ResourceId": name,
                    "ResourceType": "auto-scaling-group",
                }
                for k, v in sorted(t.tags("vm", naming.asg_instance_name(ctx.spec, pool_name)).items())
            ],
        )
    _ensure_scaling_policy(aws, name, pool)

    def at_capacity() -> list[dict[str, Any]] | None:
        g = aws_call(asg.describe_auto_scaling_groups, AutoScalingGroupNames=[name])["AutoScalingGroups"][0]
        up = [i for i in g.get("Instances", []) if i["LifecycleState"] == "InService"]
        return up if len(up) == pool.desired and len(g.get("Instances", [])) == pool.desired else None

    instances = poll(at_capacity, what=f"auto scaling group {name} capacity", timeout=RUNNING_TIMEOUT, first=0.1)
    _sync_group_records(aws, ctx, pool_name, [i["InstanceId"] for i in instances])
    ctx.log(f"pool {pool_name}: auto scaling group {name} with {len(instances)} in service")


TARGET_TRACKING_POLICY = "vmplane-cpu-target"


def group_version(ctx: Context, pool_name: str) -> str:
    pool = ctx.spec.pools[pool_name]
    if isinstance(pool, AsgPool) and pool.pin_template_version:
        return str(ctx.infra.LaunchTemplateVersion[pool_name])
    return "$Latest"


def _ensure_scaling_policy(aws: AwsClients, group: str, pool: AsgPool) -> None:
    asg = aws.autoscaling
    if pool.target_cpu_percent is None:
        with contextlib.suppress(NotFoundError):
            policies = aws_call(asg.describe_policies, AutoScalingGroupName=group, PolicyNames=[TARGET_TRACKING_POLICY])
            if policies["ScalingPolicies"]:
                aws_call(asg.delete_policy, AutoScalingGroupName=group, PolicyName=TARGET_TRACKING_POLICY)
        return
    aws_call(  # PutScalingPolicy creates or replaces: idempotent by name
        asg.put_scaling_policy,
        AutoScalingGroupName=group,
        PolicyName=TARGET_TRACKING_POLICY,
        PolicyType="TargetTrackingScaling",
        TargetTrackingConfiguration={
            "PredefinedMetricSpecification": {"PredefinedMetricType": "ASGAverageCPUUtilization"},
            "TargetValue": float(pool.target_cpu_percent),
        },
    )


def _sync_group_records(aws: AwsClients, ctx: Context, pool_name: str, ids: list[str]) -> None:
    """The pool's VM records follow the group: new instances are added, gone ones dropped."""
    infra = ctx.infra
    described = {}
    if ids:
        res = aws_call(aws.ec2.describe_instances, InstanceIds=sorted(ids))["Reservations"]
        described = {i["InstanceId"]: i for r in res for i in r["Instances"]}
    kept = [v for v in infra.VMs if v.Pool != pool_name or v.ID in described]
    known = {v.ID for v in kept}
    for iid in sorted(described):
        if iid not in known:
            rec = VMRecord(Name=iid, Pool=pool_name, Index=-1)
            _record_instance(rec, described[iid])
            kept.append(rec)
    infra.VMs = kept
    ctx.save()


# ---- rotation -------------------------------------------------------------------------------------


def rotate_fixed_vm(aws: AwsClients, ctx: Context, rec: VMRecord, health_timeout: float) -> None:
    """Replace one VM with one from the pool's current template version, under the same stable name.

    Order keeps the pool at full size: the replacement is launched, bootstrapped and healthy behind the
    LB before the old VM is drained and terminated. `ReplacementID` is the intent that makes a crash at
    any point resumable: the next run finds the replacement by name and carries on.
    """
    infra = ctx.infra
    old_id = rec.ID
    version = infra.LaunchTemplateVersion[rec.Pool]
    if rec.ReplacementID is None:
        live = [i for i in _instances_named(aws, ctx, rec.Name) if i["InstanceId"] != old_id]
        fresh = next((i for i in live if launched_version(i) == version), None)
        if fresh is None:
            subnet = rec.SubnetID or infra.VMSubnetIDs[rec.Index % len(infra.VMSubnetIDs)]
            fresh = _run_instance(aws, ctx, rec.Pool, rec.Name, subnet, token_suffix=f"v{version}")
        rec.ReplacementID = fresh["InstanceId"]
        ctx.save()
    new = VMRecord(Name=rec.Name, Pool=rec.Pool, Index=rec.Index, ID=rec.ReplacementID)
    probe = InfraConfig(VMs=[new])
    sub = Context(job_id=ctx.job_id, spec=ctx.spec, infra=probe, tagger=ctx.tagger, log=ctx.log)
    _wait_running(aws, sub)
    _wait_bootstrapped(aws, sub)
    if new.State is not VMState.ready:
        raise DeadlineExceededError(f"replacement {new.ID} for {rec.Name} did not become ready")
    targets.register_target(aws, ctx, str(new.ID))
    targets.wait_healthy(aws, ctx, str(new.ID), timeout=health_timeout)
    if old_id:
        targets.drain_target(aws, ctx, old_id)
        _terminate(aws, [old_id])
    res = aws_call(aws.ec2.describe_instances, InstanceIds=[str(new.ID)])["Reservations"]
    _record_instance(rec, res[0]["Instances"][0])
    rec.State, rec.ReplacementID = VMState.ready, None
    ctx.save()
    ctx.log(f"{rec.Name}: {old_id} -> {rec.ID} (template v{rec.LaunchTemplateVersion})")


def _instances_named(aws: AwsClients, ctx: Context, name: str) -> list[dict[str, Any]]:
    reservations = aws_call(
        aws.ec2.describe_instances,
        Filters=[*job_filters(ctx.tagger, "vm", name), {"Name": "instance-state-name", "Values": LIVE_STATES}],
    )["Reservations"]
    return [i for r in reservations for i in r["Instances"]]


def instance_refresh_request(ctx: Context, pool_name: str) -> dict[str, Any]:
    """StartInstanceRefresh for an ASG pool: rolling, never below full healthy capacity."""
    infra = ctx.infra
    return {
        "AutoScalingGroupName": infra.ScalingGroupID[pool_name],
        "Strategy": "Rolling",
        # On success the group takes this configuration (a pinned group moves to the current version).
        "DesiredConfiguration": {
            "LaunchTemplate": {
                "LaunchTemplateId": infra.LaunchTemplateID[pool_name],
                "Version": group_version(ctx, pool_name),
            }
        },
        "Preferences": {
            "MinHealthyPercentage": 100,  # launch before terminate: the pool never drops below its size
            "MaxHealthyPercentage": 200,
            "InstanceWarmup": ctx.spec.bootstrap.timeout_seconds,
            "SkipMatching": True,  # instances already on the latest version stay
        },
    }


def start_instance_refresh(aws: AwsClients, ctx: Context, pool_name: str) -> str:
    """Start (or find the running) instance refresh; returns its id. Raises UnsupportedError where the
    endpoint does not implement it (the sandbox)."""
    request = instance_refresh_request(ctx, pool_name)
    try:
        return str(aws_call(aws.autoscaling.start_instance_refresh, **request)["InstanceRefreshId"])
    except ConflictError:  # InstanceRefreshInProgress: one is already running for this group
        running = aws_call(
            aws.autoscaling.describe_instance_refreshes, AutoScalingGroupName=request["AutoScalingGroupName"]
        )["InstanceRefreshes"]
        return str(running[0]["InstanceRefreshId"])


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


def _terminate(aws: AwsClients, ids: list[str]) -> None:
    with contextlib.suppress(NotFoundError):
        aws_call(aws.ec2.terminate_instances, InstanceIds=ids)


# ---- teardown -------------------------------------------------------------------------------------


def delete_vms(aws: AwsClients, ctx: Context) -> None:
    ec2, asg, t = aws.ec2, aws.autoscaling, ctx.tagger
    # ASG pools: min=max=desired=0 first (the seed's order), then delete.
    # A recorded group may be gone already (a crash right after DeleteAutoScalingGroup): NotFound is done.
    for name in _job_asg_names(aws, ctx):
        drain = partial(
            aws_call, asg.update_auto_scaling_group, AutoScalingGroupName=name, MinSize=0, MaxSize=0, DesiredCapacity=0
        )
        if deletes.delete(drain, what=f"scale {name} to 0"):
            # ScalingActivityInProgress/ResourceInUse while the scale-in starts: retried as in use.
            drop = partial(aws_call, asg.delete_auto_scaling_group, AutoScalingGroupName=name, ForceDelete=True)
            deletes.delete(drop, what=f"delete {name}")
        poll(
            partial(_asg_gone, aws, name),
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


def _asg_gone(aws: AwsClients, name: str) -> bool | None:
    groups = aws_call(aws.autoscaling.describe_auto_scaling_groups, AutoScalingGroupNames=[name])["AutoScalingGroups"]
    return True if not groups else None


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
        lt_id = lt["LaunchTemplateId"]
        deletes.delete(partial(aws_call, ec2.delete_launch_template, LaunchTemplateId=lt_id), what=f"delete {lt_id}")
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
        # Interfaces of terminated instances release the group a little later: DependencyViolation till then.
        gid = sg["GroupId"]
        deletes.delete(partial(aws_call, ec2.delete_security_group, GroupId=gid), what=f"delete {gid}")
    ctx.infra.VMSecurityGroupID = None
    ctx.save()
    ctx.log(f"deleted {len(groups)} security groups")
