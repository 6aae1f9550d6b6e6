"""What the AWS steps create and delete, as plan resources named by `naming` (the names the steps use).

Pure: made from the spec and the recorded InfraConfig, no AWS calls. Resource types are Terraform's,
so the direct pipeline and the generated stack can be compared line for line.
"""

from __future__ import annotations

from vmplane.clouds.aws import naming, scheduler_role, secret_policy
from vmplane.clouds.aws.eventbridge import KINDS
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.base import Action, PlannedResource
from vmplane.envspec.models import AsgPool, EnvSpec, FixedPool
from vmplane.envspec.secrets import secret_refs
from vmplane.state import InfraConfig


def _zones(spec: EnvSpec, infra: InfraConfig) -> list[str]:
    """The zones stepValidate picked, or placeholders before it ran (the names then show the pattern)."""
    if len(infra.Zones) == spec.network.zones:
        return list(infra.Zones)
    return [f"<zone {i + 1}>" for i in range(spec.network.zones)]


def provision_resources(spec: EnvSpec, infra: InfraConfig) -> list[PlannedResource]:
    add: list[PlannedResource] = []

    def plus(type_: str, name: str, step: str, detail: str = "") -> None:
        add.append(PlannedResource(Action.create, type_, name, step, detail))

    net = spec.network
    step = "stepCreateNetwork"
    if not net.existing_vpc_id:
        zones = _zones(spec, infra)
        plus("aws_vpc", naming.vpc_name(spec), step, net.cidr)
        plus("aws_internet_gateway", naming.igw_name(spec), step)
        for zone in zones:
            plus("aws_subnet", naming.subnet_name(spec, "subnet-public", zone), step, "public (NAT, load balancer)")
        for zone in zones:
            plus("aws_subnet", naming.subnet_name(spec, "subnet-private", zone), step, "private (VMs), no public IPs")
        plus("aws_eip", naming.nat_name(spec), step)
        plus("aws_nat_gateway", naming.nat_name(spec), step, "egress for the private subnets")
        plus("aws_route_table", naming.route_table_name(spec, "rt-public"), step, "0.0.0.0/0 -> internet gateway")
        plus("aws_route_table", naming.route_table_name(spec, "rt-private"), step, "0.0.0.0/0 -> NAT gateway")
    step = "stepCreateIAM"
    role = naming.role_name(spec)
    plus("aws_iam_role", role, step, f"exec channel {spec.exec_mode.value} only")
    plus("aws_iam_role_policy_attachment", f"{role}/AmazonSSMManagedInstanceCore", step)
    plus("aws_iam_instance_profile", role, step)
    refs = secret_policy.aws_refs(secret_refs(spec))
    if refs:
        secrets = len({r.name for r in refs.values()})
        plus("aws_iam_role_policy", f"{role}/{secret_policy.POLICY_NAME}", step, f"reads its {secrets} secret(s) only")
    if scheduler_role.needed(spec):
        sched_role = naming.scheduler_role_name(spec)
        plus("aws_iam_role", sched_role, step, "EventBridge Scheduler: ec2:Start/StopInstances on this job's VMs only")
        plus("aws_iam_role_policy", f"{sched_role}/{scheduler_role.POLICY_NAME}", step)
    if spec.load_balancer is not None:
        add.append(_certificate(spec, step))  # requested beside the identity (certs.py says why)
    step = "stepCreateLaunchTemplate"
    group = naming.vm_group_name(spec)
    plus("aws_security_group", group, step, "ingress from inside the VPC only; no port 22")
    for port in net.ingress_ports:
        plus("aws_vpc_security_group_ingress_rule", f"{group}/tcp-{port}", step, f"tcp/{port} from the VPC CIDR")
    for pool_name, pool in spec.pools.items():
        plus(
            "aws_launch_template",
            naming.launch_template_name(spec, pool_name),
            step,
            f"{pool.image} {pool.instance_type} {pool.arch.value}, IMDSv2 required, encrypted {pool.disk_gb} GB",
        )
    step = "stepCreateVMs"
    for pool_name, pool in spec.pools.items():
        if isinstance(pool, FixedPool):
            for i in range(pool.size):
                plus(
                    "aws_instance",
                    naming.instance_name(spec, pool_name, i),
                    step,
                    f"bootstrap {spec.bootstrap.mode.value}",
                )
        elif isinstance(pool, AsgPool):
            plus(
                "aws_autoscaling_group",
                naming.asg_name(spec, pool_name),
                step,
                f"min {pool.min} / desired {pool.desired} / max {pool.max}",
            )
    add.extend(schedule_resources(spec))
    if spec.load_balancer is not None:
        add.extend(lb_resources(spec, certificate=False))
    return add


def schedule_resources(spec: EnvSpec) -> list[PlannedResource]:
    """The pools' schedules (stepCreateVMs makes them once the VMs exist)."""
    out: list[PlannedResource] = []

    def plus(type_: str, name: str, detail: str) -> None:
        out.append(PlannedResource(Action.create, type_, name, "stepCreateVMs", detail))

    if scheduler_role.needed(spec):
        plus("aws_scheduler_schedule_group", naming.schedule_group_name(spec), "EventBridge Scheduler (Fixed pools)")
    for pool_name, pool in spec.pools.items():
        sched = pool.schedule
        if sched is None:
            continue
        for kind in KINDS:
            if isinstance(pool, AsgPool):
                sizes = f"{pool.min}/{pool.desired}/{pool.max}" if kind == "start" else "0/0/unchanged"
                when = f"{sched.cron(kind, 'unix')} {sched.timezone}"
                name = naming.scheduled_action_name(spec, pool_name, kind)
                plus("aws_autoscaling_schedule", name, f"{when}: min/desired/max {sizes}")
            else:
                when = f"{sched.cron(kind, 'eventbridge')} {sched.timezone}"
                plus("aws_scheduler_schedule", naming.schedule_name(spec, pool_name, kind), f"{when}: {kind} its VMs")
    return out


def _certificate(spec: EnvSpec, step: str) -> PlannedResource:
    lb = spec.load_balancer
    assert lb is not None
    cert = f"existing {lb.certificate_arn}" if lb.certificate_arn else "requested, DNS validation"
    return PlannedResource(Action.create, "aws_acm_certificate", lb.domain, step, cert)


def lb_resources(spec: EnvSpec, *, certificate: bool = True) -> list[PlannedResource]:
    """The LB's parts; `certificate=False` when a provision requests it in stepCreateIAM."""
    lb = spec.load_balancer
    assert lb is not None
    hc = lb.health_check
    first, tg, listener, dns = (
        "stepCreateLoadBalancer",
        "stepCreateTargetGroup",
        "stepCreateListener",
        "stepCreateDNSRecord",
    )
    alb = naming.lb_base_name(spec)
    return [
        PlannedResource(
            Action.create, "aws_security_group", naming.lb_group_name(spec), first, "tcp/443, tcp/80 from anywhere"
        ),
        *([_certificate(spec, first)] if certificate else []),
        PlannedResource(Action.create, "aws_lb", alb, first, "application, internet-facing, public subnets"),
        PlannedResource(
            Action.create,
            "aws_lb_target_group",
            naming.target_group_name(spec),
            tg,
            f"HTTP:{lb.target_port}, health GET {hc.path} on {hc.port}",
        ),
        PlannedResource(
            Action.update,
            "aws_security_group",
            naming.vm_group_name(spec),
            tg,
            f"tcp/{lb.target_port} from the LB's group only",
        ),
        PlannedResource(Action.create, "aws_lb_listener", f"{alb}/https", listener, "HTTPS:443 -> target group"),
        PlannedResource(Action.create, "aws_lb_listener", f"{alb}/http", listener, "HTTP:80 -> 301 HTTPS"),
        PlannedResource(Action.create, "aws_route53_record", lb.domain, dns, "A alias -> the LB"),
    ]


def lb_teardown_resources(infra: InfraConfig) -> list[PlannedResource]:
    step = "stepDetachLoadBalancer"
    ids = aws_ids(infra)

    def minus(type_: str, name: str, detail: str = "") -> PlannedResource:
        return PlannedResource(Action.destroy, type_, name, step, detail)

    out = [minus("aws_route53_record", r.Name, r.Type) for r in ids.DNSRecords]
    out += [minus("aws_lb_listener", arn.rsplit("/", 1)[-1]) for arn in ids.ListenerArns]
    if infra.LoadBalancerID:
        out.append(minus("aws_lb", ids.LoadBalancerName or infra.LoadBalancerID))
    if ids.TargetGroupArn:
        out.append(minus("aws_lb_target_group", ids.TargetGroupArn.rsplit("/", 2)[-2]))
    if ids.LoadBalancerSecurityGroupID:
        out.append(minus("aws_security_group", ids.LoadBalancerSecurityGroupID))
    if ids.CertificateArn and ids.CertificateRequested:
        out.append(minus("aws_acm_certificate", ids.CertificateArn.rsplit("/", 1)[-1]))
    return out


def teardown_resources(infra: InfraConfig) -> list[PlannedResource]:
    ids = aws_ids(infra)
    out = lb_teardown_resources(infra)

    def minus(type_: str, name: str, step: str, detail: str = "") -> None:
        out.append(PlannedResource(Action.destroy, type_, name, step, detail))

    for pool, actions in sorted(ids.ScheduledActions.items()):
        for action in actions:
            minus("aws_autoscaling_schedule", action, "stepTerminateVMs", pool)
    for schedule in sorted(ids.Schedules):
        minus("aws_scheduler_schedule", schedule, "stepTerminateVMs")
    if ids.ScheduleGroupName:
        minus("aws_scheduler_schedule_group", ids.ScheduleGroupName, "stepTerminateVMs")
    for vm in infra.VMs:
        if vm.ID:
            minus("aws_instance", vm.ID, "stepTerminateVMs", vm.Name)
    for pool, asg in infra.ScalingGroupID.items():
        minus("aws_autoscaling_group", asg, "stepTerminateVMs", pool)
    for pool, lt in infra.LaunchTemplateID.items():
        minus("aws_launch_template", lt, "stepDeleteLaunchTemplate", pool)
    if infra.VMSecurityGroupID:
        minus("aws_security_group", infra.VMSecurityGroupID, "stepDeleteSecurityGroup")
    if ids.RoleName:
        minus("aws_iam_instance_profile", ids.RoleName, "stepDeleteIAM")
        minus("aws_iam_role", ids.RoleName, "stepDeleteIAM")
    if ids.SchedulerRoleName:
        minus("aws_iam_role", ids.SchedulerRoleName, "stepDeleteIAM", "the scheduler's role")
    if infra.NetworkCreated:
        step = "stepDeleteNetwork"
        for nat in ids.NatGatewayIDs:
            minus("aws_nat_gateway", nat, step)
        for eip in ids.ElasticIPAllocationIDs:
            minus("aws_eip", eip, step)
        for rt in filter(None, [ids.PublicRouteTableID, ids.PrivateRouteTableID]):
            minus("aws_route_table", rt, step)
        for sub in [*ids.PublicSubnetIDs, *infra.VMSubnetIDs]:
            minus("aws_subnet", sub, step)
        if ids.InternetGatewayID:
            minus("aws_internet_gateway", ids.InternetGatewayID, step)
        if infra.NetworkID:
            minus("aws_vpc", infra.NetworkID, step)
    return out
