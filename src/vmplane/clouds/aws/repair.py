"""stepRepairDrift on AWS: the drift read again, and each fix made in an order that keeps find-by-tag working.

Tags first (a Fixed VM is found by its Name), then the extras deleted, rules set back on vmplane's groups,
the default routes and the target group's members restored, stopped VMs started; what is missing is
dropped from the record (`FORGET`), so the provisioning steps that follow create it again under its
name. Every fix is idempotent: killed anywhere, the next run reads the drift again and does what is left.
The user's resources (owned=False) are never touched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from vmplane.clouds.aws import network
from vmplane.clouds.aws.drift import default_name, drift, group_wants
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.resources import TABLE
from vmplane.clouds.aws.security_groups import diff_ingress
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import tag_list
from vmplane.clouds.base import Context
from vmplane.clouds.drift import Drift, DriftChange
from vmplane.clouds.errors import ConflictError, InvalidRequestError, NotFoundError
from vmplane.state import VMState


def repair_drift(aws: AwsClients, ctx: Context) -> None:
    found = [d for d in drift(aws, ctx) if d.repairable]
    if not found:
        ctx.log("no drift to repair")
        return
    for d in found:
        if d.change is DriftChange.changed and (
            wanted := {f.field[5:]: f.wanted for f in d.fields if f.field.startswith("tags.")}
        ):
            restore_tags(aws, d.kind, str(d.id), wanted)
            ctx.log(f"{d.resource} ({d.id}): tags {', '.join(sorted(wanted))} restored")
    for d in found:
        if d.change is DriftChange.extra and (delete := TABLE.kind(d.kind).delete) is not None:
            delete(aws, ctx, str(d.id))
            ctx.log(f"deleted {d.resource} ({d.id}): it carries the job's tags, the file does not ask for it")
    for d in found:
        if d.change is DriftChange.changed:
            for fix in dict.fromkeys(FIXES[(d.kind, f.field)] for f in d.fields if (d.kind, f.field) in FIXES):
                fix(aws, ctx, d)
    missing = [d for d in found if d.change is DriftChange.missing]
    for d in missing:
        forget = FORGET.get(d.kind)
        if forget is not None:
            forget(aws, ctx, d)
    if missing:
        ctx.save()
        ctx.log(f"{len(missing)} missing resource(s) forgotten: the next steps make them again under their names")


def restore_tags(aws: AwsClients, kind: str, rid: str, wanted: dict[str, str]) -> None:
    """Put back the job's tags a resource lost (or had changed); create-or-overwrite, so idempotent."""
    tags = tag_list(wanted)
    if kind in EC2_TAGGED:
        aws_call(aws.ec2.create_tags, Resources=[rid], Tags=tags)
    elif kind in ("load-balancer", "target-group", "listener"):
        aws_call(aws.elbv2.add_tags, ResourceArns=[rid], Tags=tags)
    elif kind == "auto-scaling-group":
        ref = {"ResourceId": rid, "ResourceType": "auto-scaling-group", "PropagateAtLaunch": True}
        aws_call(aws.autoscaling.create_or_update_tags, Tags=[{**ref, **t} for t in tags])
    elif kind == "iam-role":
        aws_call(aws.iam.tag_role, RoleName=rid, Tags=tags)
    elif kind == "iam-instance-profile":
        aws_call(aws.iam.tag_instance_profile, InstanceProfileName=rid, Tags=tags)
    elif kind == "certificate":
        aws_call(aws.acm.add_tags_to_certificate, CertificateArn=rid, Tags=tags)
    elif kind == "schedule-group":
        arn = aws_call(aws.scheduler.get_schedule_group, Name=rid)["Arn"]
        aws_call(aws.scheduler.tag_resource, ResourceArn=arn, Tags=tags)


EC2_TAGGED = frozenset(
    {
        "vpc",
        "subnet",
        "internet-gateway",
        "elastic-ip",
        "nat-gateway",
        "route-table",
        "security-group",
        "launch-template",
        "instance",
    }
)


# ---- changed fields -------------------------------------------------------------------------------


def _group_rules(aws: AwsClients, ctx: Context, d: Drift) -> None:
    """A group vmplane made back to exactly its rules: what was added out of band is revoked (the default
    group's included), what was removed is authorized again."""
    name = d.resource.split(".", 1)[1]
    wants = group_wants(ctx).get(name)
    if wants is None:
        return
    desired, empty_egress = wants
    try:
        group = aws_call(aws.ec2.describe_security_groups, GroupIds=[str(d.id)])["SecurityGroups"][0]
    except NotFoundError:
        return  # gone meanwhile: the next drift says missing
    diff = diff_ingress(desired, group.get("IpPermissions", []))
    if diff.revoke:
        with contextlib.suppress(NotFoundError):  # InvalidPermission.NotFound: revoked before a crash
            aws_call(aws.ec2.revoke_security_group_ingress, GroupId=d.id, IpPermissions=diff.revoke)
    if diff.authorize and name != default_name(ctx):
        with contextlib.suppress(ConflictError):  # InvalidPermission.Duplicate: authorized before a crash
            aws_call(aws.ec2.authorize_security_group_ingress, GroupId=d.id, IpPermissions=diff.authorize)
    egress = group.get("IpPermissionsEgress", [])
    if empty_egress and egress:
        with contextlib.suppress(NotFoundError):
            aws_call(aws.ec2.revoke_security_group_egress, GroupId=d.id, IpPermissions=egress)
    ctx.log(f"{d.resource} ({d.id}): rules set back ({len(diff.revoke)} revoked, {len(diff.authorize)} authorized)")


def _default_route(aws: AwsClients, ctx: Context, d: Drift) -> None:
    """0.0.0.0/0 back to the internet gateway (public) or the NAT gateway (private), created or replaced."""
    ids = aws_ids(ctx.infra)
    target = (
        {"GatewayId": str(ids.InternetGatewayID)}
        if d.id == ids.PublicRouteTableID
        else {"NatGatewayId": ids.NatGatewayIDs[0]}
        if d.id == ids.PrivateRouteTableID and ids.NatGatewayIDs
        else None
    )
    if target is None:
        return  # the main route table: nothing vmplane routes through it
    try:
        table = aws_call(aws.ec2.describe_route_tables, RouteTableIds=[str(d.id)])["RouteTables"][0]
    except NotFoundError:
        return
    if network.ensure_default_route(aws, str(d.id), table.get("Routes", []), target):
        ctx.log(f"{d.resource} ({d.id}): 0.0.0.0/0 -> {next(iter(target.values()))} restored")


def _targets(aws: AwsClients, ctx: Context, d: Drift) -> None:
    """The target group's members registered again; instances vmplane did not put there deregistered."""
    f = next(f for f in d.fields if f.field == "targets")
    want, have = set(f.wanted or []), set(f.actual or [])
    if want - have:
        aws_call(aws.elbv2.register_targets, TargetGroupArn=d.id, Targets=[{"Id": i} for i in sorted(want - have)])
    if have - want:
        with contextlib.suppress(NotFoundError, InvalidRequestError):  # already deregistered
            aws_call(
                aws.elbv2.deregister_targets, TargetGroupArn=d.id, Targets=[{"Id": i} for i in sorted(have - want)]
            )
    ctx.log(f"{d.resource}: {len(want - have)} target(s) registered, {len(have - want)} deregistered")


def _start(aws: AwsClients, ctx: Context, d: Drift) -> None:
    """A VM stopped out of band while nothing says it should be: started (starting a running one is a
    no-op to EC2); the next step follows it through readiness."""
    aws_call(aws.ec2.start_instances, InstanceIds=[str(d.id)])
    ctx.log(f"{d.resource} ({d.id}) started: it was stopped and no schedule stops it now")


Fix = Callable[[AwsClients, Context, Drift], None]
FIXES: dict[tuple[str, str], Fix] = {
    ("security-group", "ingress"): _group_rules,
    ("security-group", "egress"): _group_rules,
    ("route-table", "routes"): _default_route,
    ("target-group", "targets"): _targets,
    ("instance", "state"): _start,
    # An auto scaling group's template and target groups, and the HTTPS listener's certificate, are set
    # back by the steps that follow (ensure_asg_pool, ensure_target_group, ensure_listener).
}


# ---- missing: dropped from the record -------------------------------------------------------------


def _forget_vm(aws: AwsClients, ctx: Context, d: Drift) -> None:
    """The record keeps the gone instance's id: the relaunch's token derives from it (instances.py)."""
    if d.id is None:
        return  # never recorded: stepCreateVMs launches it by name
    for vm in ctx.infra.VMs:
        if d.id == vm.ID:
            vm.State = VMState.terminated
    tg = aws_ids(ctx.infra).TargetGroupArn
    if tg:
        with contextlib.suppress(NotFoundError, InvalidRequestError):
            aws_call(aws.elbv2.deregister_targets, TargetGroupArn=tg, Targets=[{"Id": str(d.id)}])


def _forget_template(_aws: AwsClients, ctx: Context, d: Drift) -> None:
    infra = ctx.infra
    pools = [p for p, lt in infra.LaunchTemplateID.items() if lt == d.id]
    # Made again under a new token: AWS answers the old one with the template that was deleted.
    attempts = aws_ids(infra).LaunchTemplateAttempts
    aws_ids(infra).LaunchTemplateAttempts = {**attempts, **{p: attempts.get(p, 0) + 1 for p in pools}}
    infra.LaunchTemplateID = {p: lt for p, lt in infra.LaunchTemplateID.items() if p not in pools}
    infra.LaunchTemplateVersion = {p: v for p, v in infra.LaunchTemplateVersion.items() if p not in pools}


def _forget_network(_aws: AwsClients, ctx: Context, d: Drift) -> None:
    """A network part made again: the route tables are found again by tag and reconcile their routes and
    subnet associations (network.py)."""
    infra, ids = ctx.infra, aws_ids(ctx.infra)
    if d.kind == "nat-gateway":
        network.forget_nat(ctx)
    elif d.kind == "elastic-ip" and not ids.NatGatewayIDs:
        ids.ElasticIPAllocationIDs = []
    elif d.kind == "internet-gateway":
        ids.InternetGatewayID = None
    elif d.kind == "subnet":  # one short: the network step finds the others by tag and makes it again
        ids.PublicSubnetIDs = [s for s in ids.PublicSubnetIDs if s != d.id]
        infra.VMSubnetIDs = [s for s in infra.VMSubnetIDs if s != d.id]
    ids.PublicRouteTableID = None if d.kind != "nat-gateway" else ids.PublicRouteTableID
    ids.PrivateRouteTableID = None


def _forget_group(_aws: AwsClients, ctx: Context, d: Drift) -> None:
    infra, ids = ctx.infra, aws_ids(ctx.infra)
    if infra.VMSecurityGroupID == d.id:
        infra.VMSecurityGroupID = None
    if ids.LoadBalancerSecurityGroupID == d.id:
        ids.LoadBalancerSecurityGroupID = None


def _forget_lb_part(_aws: AwsClients, ctx: Context, d: Drift) -> None:
    ids = aws_ids(ctx.infra)
    if d.kind in ("load-balancer", "target-group", "listener"):
        ids.ListenerArns = []  # ensure_listener makes what is missing by port and records both again
    if d.kind == "load-balancer":
        ctx.infra.LoadBalancerID = None
    elif d.kind == "target-group":
        ids.TargetGroupArn = None
    elif d.kind == "certificate":
        ids.CertificateArn, ids.CertificateReady, ids.CertificateRequestToken = None, False, None
    elif d.kind == "dns-record":
        ids.DNSRecords = [r for r in ids.DNSRecords if f"{r.Name} {r.Type}" != d.id]
        ids.CertificateReady = ids.CertificateReady and not str(d.id).endswith(" CNAME")


def _forget_group_of_pool(_aws: AwsClients, ctx: Context, d: Drift) -> None:
    ctx.infra.ScalingGroupID = {p: g for p, g in ctx.infra.ScalingGroupID.items() if g != d.id}


def _forget_schedule(_aws: AwsClients, ctx: Context, d: Drift) -> None:
    ids = aws_ids(ctx.infra)
    name = str(d.id).rsplit("/", 1)[-1]
    ids.Schedules = {k: v for k, v in ids.Schedules.items() if k != name}
    ids.ScheduledActions = {p: [a for a in acts if a != name] for p, acts in ids.ScheduledActions.items()}


def _nothing(_aws: AwsClients, _ctx: Context, _d: Drift) -> None:
    """Made again by its step from the spec alone (IAM reconciles by name; the schedule group by name)."""


FORGET: dict[str, Fix] = {
    "instance": _forget_vm,
    "launch-template": _forget_template,
    "nat-gateway": _forget_network,
    "elastic-ip": _forget_network,
    "internet-gateway": _forget_network,
    "subnet": _forget_network,
    "route-table": _forget_network,
    "security-group": _forget_group,
    "load-balancer": _forget_lb_part,
    "target-group": _forget_lb_part,
    "listener": _forget_lb_part,
    "certificate": _forget_lb_part,
    "dns-record": _forget_lb_part,
    "auto-scaling-group": _forget_group_of_pool,
    "scheduled-action": _forget_schedule,
    "schedule": _forget_schedule,
    "schedule-group": _nothing,
    "iam-role": _nothing,
    "iam-instance-profile": _nothing,
}
