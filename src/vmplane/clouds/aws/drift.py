"""AWS drift: what the spec and the job's record say exists, against what the resource table observes.

Read-only (describe, get, list only; nothing saved). Compared fields: a group's rules (as sorted
one-source rules), a route table's routes, the VM role's secrets policy (its statements, against the
record's), a Fixed VM's power state, an auto scaling group's template
and target groups, a target group's members, the HTTPS listener's certificate, and on every resource the
job's tag set (the keys vmplane writes and the file's tags). An existing VPC's default group is the
user's: compared with what it was when the job adopted the VPC, reported and never changed.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from vmplane.clouds.aws import naming, scheduler_role, secret_policy
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.resources import EXTRA_KINDS, TABLE
from vmplane.clouds.aws.security_groups import HTTP_PORT, HTTPS_PORT, Source, desired_vm_ingress, perm_rules
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.base import MANAGED_BY, Context
from vmplane.clouds.drift import Drift, DriftChange, Expected, Observed, compare
from vmplane.clouds.errors import NotFoundError
from vmplane.envspec.models import FixedPool
from vmplane.state import VMState

ASG_MEMBER_TAG = "aws:autoscaling:groupName"
LB_INGRESS: frozenset[Source] = frozenset({(HTTP_PORT, "0.0.0.0/0"), (HTTPS_PORT, "0.0.0.0/0")})
# What repair does about a missing resource of these kinds is in `repair.FORGET`; the others are reported.
UNREPAIRABLE_MISSING = {"vpc": "reported only: a VPC deleted out of band took everything in it (destroy, then apply)"}


def default_name(ctx: Context) -> str:
    """The Name vmplane tags the VPC's own default group and main route table with (network.py)."""
    return f"{ctx.spec.name}-default"


def group_wants(ctx: Context) -> dict[str, tuple[set[Source], bool]]:
    """Group name -> (the ingress it must have exactly, whether its egress must be empty): vmplane's groups."""
    return {
        naming.vm_group_name(ctx.spec): (desired_vm_ingress(ctx), False),
        naming.lb_group_name(ctx.spec): (set(LB_INGRESS), False),
        default_name(ctx): (set(), True),  # emptied at create (CIS): nothing may use it
    }


def rules_of(sources: set[Source]) -> list[str]:
    return sorted(f"tcp/{port} {source}" for port, source in sources)


def should_run(ctx: Context, pool_name: str, now: datetime) -> bool:
    """A Fixed pool's VMs run unless `vmplane stop` holds the pool or its schedule says stopped now."""
    pool = ctx.spec.pools[pool_name]
    if pool_name in ctx.infra.StoppedPools:
        return False
    return pool.schedule is None or pool.schedule.is_running_at(now)


def drift(aws: AwsClients, ctx: Context, now: datetime | None = None) -> list[Drift]:
    aws_ids(ctx.infra)  # the record's AWS part exists before the lookups read it side by side
    observed = [o for o in TABLE.observe(aws, ctx) if o.fields.get("state") not in ("terminated", "deleting")]
    groups = {o.id for o in observed if o.kind == "auto-scaling-group"} | set(ctx.infra.ScalingGroupID.values())
    # A group's members come and go with the group (it replaces them itself): compared through the group.
    observed = [o for o in observed if not (o.kind == "instance" and o.tags.get(ASG_MEMBER_TAG) in groups)]
    observed += _user_groups(aws, ctx) + _secrets_policy(aws, ctx)
    wanted = expected(ctx, observed, now or datetime.now(UTC))
    found = compare(wanted, observed, extra_kinds=EXTRA_KINDS, address=TABLE.address)
    return [_repairability(d) for d in found]


def _repairability(d: Drift) -> Drift:
    if d.change is DriftChange.missing and d.kind in UNREPAIRABLE_MISSING and d.repairable:
        return replace(d, repair=UNREPAIRABLE_MISSING[d.kind], repairable=False)
    if d.change is DriftChange.extra and TABLE.kind(d.kind).delete is None:
        return replace(d, repair="reported only: vmplane does not delete this kind by itself", repairable=False)
    return d


def _user_groups(aws: AwsClients, ctx: Context) -> list[Observed]:
    """An existing VPC's default group: not tagged (not vmplane's), read by its recorded id."""
    recorded = aws_ids(ctx.infra).UserGroupRules
    if not recorded:
        return []
    try:
        found = aws_call(aws.ec2.describe_security_groups, GroupIds=sorted(recorded))["SecurityGroups"]
    except NotFoundError:  # deleted with the user's VPC: reported missing (the user's to say)
        return []
    return [
        Observed(
            "security-group",
            g["GroupId"],
            g.get("GroupName"),
            fields={
                "ingress": perm_rules(g.get("IpPermissions", [])),
                "egress": perm_rules(g.get("IpPermissionsEgress", [])),
            },
        )
        for g in found
    ]


def _secrets_policy(aws: AwsClients, ctx: Context) -> list[Observed]:
    """The VM role's vmplane-secrets policy, read only when the record says it was put (an inline policy
    has no tags to find it by)."""
    ids = aws_ids(ctx.infra)
    if not ids.SecretsPolicy:
        return []
    role = ids.RoleName or naming.role_name(ctx.spec)
    try:
        doc = aws_call(aws.iam.get_role_policy, RoleName=role, PolicyName=secret_policy.POLICY_NAME)["PolicyDocument"]
    except NotFoundError:  # the policy or the whole role: reported missing
        return []
    name = f"{role}/{secret_policy.POLICY_NAME}"
    return [Observed("iam-role-policy", name, name, fields={"statements": secret_policy.summary(doc)})]


def job_tags(ctx: Context) -> dict[str, str]:
    """The tags every taggable resource of the job carries (its role and Name vary by resource)."""
    t = ctx.tagger
    return {
        **ctx.spec.tags,
        f"{t.prefix}orgId": t.org,
        f"{t.prefix}jobId": t.job_id,
        f"{t.prefix}managedBy": MANAGED_BY,
        f"{t.prefix}env": t.env,
    }


def _found(observed: list[Observed], kind: str, name: str) -> str | None:
    return next((o.id for o in observed if o.kind == kind and o.name == name), None)


def expected(ctx: Context, observed: list[Observed], now: datetime) -> list[Expected]:
    """From the spec, with the record's ids where it holds them (matched by id), else by the name the step
    gives it: what a repair forgot and a crash kept from being made again is then the step's to find, not
    an extra."""
    spec, infra, ids = ctx.spec, ctx.infra, aws_ids(ctx.infra)
    tags = job_tags(ctx)
    out: list[Expected] = []

    def want(kind: str, name: str, rid: str | None, fields: dict[str, Any] | None = None, **kw: Any) -> None:
        out.append(Expected(TABLE.kind(kind).address(name), kind, rid, name, fields or {}, kw.pop("tags", tags), **kw))

    if infra.NetworkCreated:
        want("vpc", naming.vpc_name(spec), infra.NetworkID)
        igw = ids.InternetGatewayID or _found(observed, "internet-gateway", naming.igw_name(spec))
        want("internet-gateway", naming.igw_name(spec), ids.InternetGatewayID)
        for role, subnets in (("subnet-public", ids.PublicSubnetIDs), ("subnet-private", infra.VMSubnetIDs)):
            whole = len(subnets) == len(infra.Zones)
            for i, zone in enumerate(infra.Zones):
                want("subnet", naming.subnet_name(spec, role, zone), subnets[i] if whole else None)
        want("elastic-ip", naming.nat_name(spec), next(iter(ids.ElasticIPAllocationIDs), None))
        nat = next(iter(ids.NatGatewayIDs), None)
        want("nat-gateway", naming.nat_name(spec), nat)
        nat = nat or _found(observed, "nat-gateway", naming.nat_name(spec))
        for role, rt, target in (
            ("rt-public", ids.PublicRouteTableID, igw),
            ("rt-private", ids.PrivateRouteTableID, nat),
        ):
            want("route-table", naming.route_table_name(spec, role), rt, {"routes": [f"0.0.0.0/0 -> {target}"]})
        # The VPC's own main route table and default group: found by the tag vmplane gave them.
        want("route-table", default_name(ctx), None, {"routes": []})
    recorded_group = {naming.vm_group_name(spec): infra.VMSecurityGroupID}
    recorded_group[naming.lb_group_name(spec)] = ids.LoadBalancerSecurityGroupID
    for name, (ingress, empty_egress) in group_wants(ctx).items():
        if name == default_name(ctx):
            if infra.NetworkCreated:
                want("security-group", name, None, {"ingress": [], "egress": []} if empty_egress else {})
        elif name != naming.lb_group_name(spec) or spec.load_balancer is not None:
            want("security-group", name, recorded_group[name], {"ingress": rules_of(ingress)})
    for gid, rules in ids.UserGroupRules.items():
        want("security-group", f"default-{gid}", gid, dict(rules), tags={}, owned=False)
    role = ids.RoleName or naming.role_name(spec)
    want("iam-role", role, role, repair_missing="created again under its name by stepCreateIAM")
    want("iam-instance-profile", role, role, repair_missing="created again under its name by stepCreateIAM")
    if ids.SecretsPolicy:
        policy, again = f"{role}/{secret_policy.POLICY_NAME}", "put back as the file's references want by stepCreateIAM"
        want("iam-role-policy", policy, policy, {"statements": ids.SecretsPolicy}, tags={}, repair_missing=again,
             repair_changed=again)  # fmt: skip
    if scheduler_role.needed(spec):
        sched = ids.SchedulerRoleName or naming.scheduler_role_name(spec)
        want("iam-role", sched, sched, repair_missing="created again under its name by stepCreateIAM")
    for pool_name in spec.pools:
        want("launch-template", naming.launch_template_name(spec, pool_name), infra.LaunchTemplateID.get(pool_name))
    out += _compute(ctx, observed, now, tags)
    out += _load_balancer(ctx, observed, tags)
    return out


def _compute(ctx: Context, observed: list[Observed], now: datetime, tags: dict[str, str]) -> list[Expected]:
    spec, infra, ids = ctx.spec, ctx.infra, aws_ids(ctx.infra)
    out: list[Expected] = []

    def want(kind: str, name: str, rid: str | None, fields: dict[str, Any] | None = None, **kw: Any) -> None:
        out.append(Expected(TABLE.kind(kind).address(name), kind, rid, name, fields or {}, kw.pop("tags", tags), **kw))

    for pool_name, pool in spec.pools.items():
        if isinstance(pool, FixedPool):
            for index in range(pool.size):
                name = naming.instance_name(spec, pool_name, index)
                rec = infra.vm(name)
                if (rec is None or rec.ID is None) and pool_name in infra.StoppedPools:
                    continue  # a held pool launches it when it starts
                rid = rec.ID if rec is not None and rec.State is not VMState.terminated else None
                state = {"state": "running"} if should_run(ctx, pool_name, now) else {}
                want(
                    "instance", name, rid, state,
                    repair_missing="launched again under its name", repair_changed="started (no schedule stops it now)",
                )  # fmt: skip
            continue
        group = infra.ScalingGroupID.get(pool_name) or naming.asg_name(spec, pool_name)
        lt = infra.LaunchTemplateID.get(pool_name) or _found(
            observed, "launch-template", naming.launch_template_name(spec, pool_name)
        )
        tg = [ids.TargetGroupArn] if ids.TargetGroupArn and spec.load_balancer is not None else []
        want("auto-scaling-group", group, group, {"launchTemplate": lt, "targetGroups": tg})
    # Schedules from the record: `vmplane stop` pauses a pool's, and the record says which are in place.
    for pool_name, actions in ids.ScheduledActions.items():
        group = infra.ScalingGroupID.get(pool_name, naming.asg_name(spec, pool_name))
        for action in actions:
            want("scheduled-action", action, f"{group}/{action}", tags={})
    if ids.ScheduleGroupName:
        want("schedule-group", ids.ScheduleGroupName, ids.ScheduleGroupName)
        for name in ids.Schedules:
            want("schedule", name, f"{ids.ScheduleGroupName}/{name}", tags={})
    return out


def _load_balancer(ctx: Context, observed: list[Observed], tags: dict[str, str]) -> list[Expected]:
    spec, infra, ids = ctx.spec, ctx.infra, aws_ids(ctx.infra)
    lb = spec.load_balancer
    if lb is None:
        return []
    out: list[Expected] = []

    def want(kind: str, name: str, rid: str | None, fields: dict[str, Any] | None = None, **kw: Any) -> None:
        out.append(Expected(TABLE.kind(kind).address(name), kind, rid, name, fields or {}, kw.pop("tags", tags), **kw))

    name = ids.LoadBalancerName or naming.lb_base_name(spec)
    want("load-balancer", name, infra.LoadBalancerID)
    members = {"targets": wanted_targets(ctx, observed)}
    repaired = "its members registered again (and strangers removed)"
    want("target-group", naming.target_group_name(spec), ids.TargetGroupArn, members, repair_changed=repaired)
    # Listeners by name (`<lb>/<protocol>`): stepCreateListener makes what is missing by port.
    cert = ids.CertificateArn or lb.certificate_arn
    want("listener", f"{name}/https", None, {"certificates": [cert]} if cert else {})
    want("listener", f"{name}/http", None)
    if ids.CertificateArn and ids.CertificateRequested:
        want("certificate", lb.domain, ids.CertificateArn)
    for r in ids.DNSRecords:
        want("dns-record", r.Name.rstrip("."), f"{r.Name} {r.Type}", tags={})
    return out


def wanted_targets(ctx: Context, observed: list[Observed]) -> list[str]:
    """The target group's members: the Fixed pools' VMs not stopped, and the auto scaling groups' members
    (the groups register them; what a group holds is read, not recorded)."""
    infra = ctx.infra
    fixed = {
        v.ID
        for v in infra.VMs
        if v.ID
        and isinstance(ctx.spec.pools.get(v.Pool), FixedPool)
        and v.State not in (VMState.stopped, VMState.terminated)
    }
    ours = set(infra.ScalingGroupID.values())
    members = {
        i for o in observed if o.kind == "auto-scaling-group" and o.id in ours for i in o.fields.get("instances", [])
    }
    return sorted(fixed | members)
