"""Plans as data: the ordered steps of a job and the resources each creates or destroys.

The same Plan object drives `vmplane plan`, the confirmation before `apply`/`destroy`, and
`--output json`. Resource types use Terraform's names so the direct pipeline and the generated
OpenTofu stack can be compared line for line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from vmplane.clouds.base import vm_role_name
from vmplane.envspec.models import AsgPool, EnvSpec, FixedPool
from vmplane.state import InfraConfig

# The seed's pipeline, names verbatim: 7 steps, 11 with a load balancer.
PROVISION_STEPS = [
    "stepValidate",
    "stepCreateNetwork",
    "stepCreateIAM",
    "stepCreateLaunchTemplate",
    "stepCreateVMs",
    "stepRegisterSpace",
    "stepFinalize",
]
LB_STEPS = ["stepCreateLoadBalancer", "stepCreateTargetGroup", "stepCreateListener", "stepCreateDNSRecord"]

# The seed's teardown order: LB, VMs, launch template, security group, IAM, network (if ours).
TEARDOWN_STEPS = [
    "stepDetachLoadBalancer",
    "stepTerminateVMs",
    "stepDeleteLaunchTemplate",
    "stepDeleteSecurityGroup",
    "stepDeleteIAM",
    "stepDeleteNetwork",
    "stepUnregisterSpace",
]


# What each provisioning step needs done first. Steps whose inputs are ready run side by side (a wave):
# IAM does not wait for the network, the LB is built while the launch template and the VMs are, and the
# DNS record while the VMs boot. Steps not listed here (teardown, operations) run one after another.
DEPENDS: dict[str, list[str]] = {
    "stepValidate": [],
    "stepCreateNetwork": ["stepValidate"],
    "stepCreateIAM": ["stepValidate"],
    "stepCreateLaunchTemplate": ["stepCreateNetwork", "stepCreateIAM"],
    "stepCreateVMs": ["stepCreateLaunchTemplate"],
    "stepCreateLoadBalancer": ["stepCreateNetwork"],
    "stepCreateTargetGroup": ["stepCreateLoadBalancer", "stepCreateVMs"],  # registers the VMs
    "stepCreateListener": ["stepCreateTargetGroup"],
    "stepCreateDNSRecord": ["stepCreateLoadBalancer"],
}
ALL_BEFORE = {"stepUpdateTags", "stepRegisterSpace"}  # after every earlier step


def waves(names: list[str]) -> list[list[str]]:
    """Group steps into waves: each step runs in the first wave after all of its dependencies.

    Dependencies outside `names` (already done, e.g. the network when an operation attaches an LB)
    count as met. Order inside a wave follows `names`, so the grouping is deterministic.
    """
    level: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in ALL_BEFORE:
            deps = names[:i]
        elif name in DEPENDS:
            deps = [d for d in DEPENDS[name] if d in level]
        else:
            deps = names[i - 1 : i]  # steps without declared inputs keep their order
        level[name] = 1 + max((level[d] for d in deps), default=-1)
    out: list[list[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for name in names:
        out[level[name]].append(name)
    return out


def provision_steps(spec: EnvSpec) -> list[str]:
    if spec.load_balancer is None:
        return list(PROVISION_STEPS)
    at = PROVISION_STEPS.index("stepCreateVMs") + 1
    return [*PROVISION_STEPS[:at], *LB_STEPS, *PROVISION_STEPS[at:]]


class Action(StrEnum):
    create = "+"
    update = "~"
    destroy = "-"
    replace = "-/+"


ACTION_WORDS = {
    Action.create: "create",
    Action.update: "update in place",
    Action.destroy: "destroy",
    Action.replace: "destroy and then create replacement",
}


@dataclass(frozen=True)
class PlannedResource:
    action: Action
    type: str
    name: str
    step: str
    detail: str = ""


@dataclass
class Plan:
    kind: str  # "provision" | "teardown" | "none"
    env: str
    target: str
    steps: list[str]
    resources: list[PlannedResource] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    headline: str | None = None  # the summary line when the plan is not a list of resources

    def count(self, *actions: Action) -> int:
        return sum(1 for r in self.resources if r.action in actions)

    @property
    def summary(self) -> str:
        if self.headline:
            return self.headline
        if not self.resources:
            return "No changes."
        add = self.count(Action.create, Action.replace)
        change = self.count(Action.update)
        destroy = self.count(Action.destroy, Action.replace)
        return f"Plan: {add} to add, {change} to change, {destroy} to destroy."

    def legend(self) -> list[str]:
        present = [a for a in Action if any(r.action is a for r in self.resources)]
        return [f"  {a.value} {ACTION_WORDS[a]}" for a in present]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "env": self.env,
            "target": self.target,
            "steps": self.steps,
            "resources": [
                {"action": r.action.value, "type": r.type, "name": r.name, "step": r.step, "detail": r.detail}
                for r in self.resources
            ],
            "notes": self.notes,
            "summary": self.summary,
        }


def provision_plan(spec: EnvSpec, target: str) -> Plan:
    """What applying `spec` to nothing creates (AWS shapes)."""
    add: list[PlannedResource] = []

    def plus(type_: str, name: str, step: str, detail: str = "") -> None:
        add.append(PlannedResource(Action.create, type_, name, step, detail))

    env, net = spec.name, spec.network
    step = "stepCreateNetwork"
    if net.existing_vpc_id:
        notes = [f"existing VPC {net.existing_vpc_id} is used as is and never modified or deleted"]
    else:
        notes = []
        plus("aws_vpc", env, step, net.cidr)
        plus("aws_internet_gateway", f"{env}-igw", step)
        for i in range(net.zones):
            plus("aws_subnet", f"{env}-public-{i}", step, "public (NAT, load balancer)")
        for i in range(net.zones):
            plus("aws_subnet", f"{env}-private-{i}", step, "private (VMs), no public IPs")
        plus("aws_eip", f"{env}-nat", step)
        plus("aws_nat_gateway", f"{env}-nat", step, "egress for the private subnets")
        plus("aws_route_table", f"{env}-rt-public", step, "0.0.0.0/0 -> internet gateway")
        plus("aws_route_table", f"{env}-rt-private", step, "0.0.0.0/0 -> NAT gateway")
    step = "stepCreateIAM"
    role = vm_role_name(spec.org, env)
    plus("aws_iam_role", role, step, f"exec channel {spec.exec_mode.value} only")
    plus("aws_iam_role_policy_attachment", f"{role}/AmazonSSMManagedInstanceCore", step)
    plus("aws_iam_instance_profile", role, step)
    step = "stepCreateLaunchTemplate"
    plus("aws_security_group", f"{env}-vm", step, "ingress from inside the VPC only; no port 22")
    for port in net.ingress_ports:
        plus("aws_vpc_security_group_ingress_rule", f"{env}-vm-tcp-{port}", step, f"tcp/{port} from the VPC CIDR")
    for pool_name, pool in spec.pools.items():
        plus(
            "aws_launch_template",
            f"{env}-{pool_name}",
            step,
            f"{pool.image} {pool.instance_type} {pool.arch.value}, IMDSv2 required, encrypted {pool.disk_gb} GB",
        )
    step = "stepCreateVMs"
    for pool_name, pool in spec.pools.items():
        if isinstance(pool, FixedPool):
            for i in range(pool.size):
                plus("aws_instance", f"{env}-{pool_name}-{i}", step, f"bootstrap {spec.bootstrap.mode.value}")
        elif isinstance(pool, AsgPool):
            plus(
                "aws_autoscaling_group",
                f"{env}-{pool_name}",
                step,
                f"min {pool.min} / desired {pool.desired} / max {pool.max}",
            )
    if spec.load_balancer is not None:
        add.extend(lb_resources(spec))
    return Plan("provision", env, target, provision_steps(spec), add, notes)


def lb_resources(spec: EnvSpec) -> list[PlannedResource]:
    """What the four load balancer steps create (also the plan of `vmplane lb attach`)."""
    lb, env = spec.load_balancer, spec.name
    assert lb is not None
    hc = lb.health_check
    out = [
        PlannedResource(
            Action.create, "aws_security_group", f"{env}-lb", "stepCreateLoadBalancer", "tcp/443, tcp/80 from anywhere"
        ),
        PlannedResource(
            Action.create,
            "aws_acm_certificate",
            lb.domain,
            "stepCreateLoadBalancer",
            "existing " + lb.certificate_arn if lb.certificate_arn else "requested, DNS validation",
        ),
        PlannedResource(
            Action.create, "aws_lb", env, "stepCreateLoadBalancer", "application, internet-facing, public subnets"
        ),
        PlannedResource(
            Action.create,
            "aws_lb_target_group",
            f"{env}-tg",
            "stepCreateTargetGroup",
            f"HTTP:{lb.target_port}, health GET {hc.path} on {hc.port}",
        ),
        PlannedResource(
            Action.update,
            "aws_security_group",
            f"{env}-vm",
            "stepCreateTargetGroup",
            f"tcp/{lb.target_port} from the LB's group only",
        ),
        PlannedResource(
            Action.create, "aws_lb_listener", f"{env}-https", "stepCreateListener", "HTTPS:443 -> target group"
        ),
        PlannedResource(Action.create, "aws_lb_listener", f"{env}-http", "stepCreateListener", "HTTP:80 -> 301 HTTPS"),
        PlannedResource(Action.create, "aws_route53_record", lb.domain, "stepCreateDNSRecord", "A alias -> the LB"),
    ]
    return out


def lb_teardown_resources(infra: InfraConfig) -> list[PlannedResource]:
    """What stepDetachLoadBalancer removes (also the plan of `vmplane lb detach`)."""
    step = "stepDetachLoadBalancer"
    out = [PlannedResource(Action.destroy, "aws_route53_record", r.Name, step, r.Type) for r in infra.DNSRecords]
    out += [PlannedResource(Action.destroy, "aws_lb_listener", a.rsplit("/", 1)[-1], step) for a in infra.ListenerArns]
    if infra.LoadBalancerID:
        out.append(PlannedResource(Action.destroy, "aws_lb", infra.LoadBalancerName or infra.LoadBalancerID, step))
    if infra.TargetGroupArn:
        out.append(
            PlannedResource(Action.destroy, "aws_lb_target_group", infra.TargetGroupArn.rsplit("/", 2)[-2], step)
        )
    if infra.LoadBalancerSecurityGroupID:
        out.append(PlannedResource(Action.destroy, "aws_security_group", infra.LoadBalancerSecurityGroupID, step))
    if infra.CertificateArn and infra.CertificateRequested:
        out.append(
            PlannedResource(Action.destroy, "aws_acm_certificate", infra.CertificateArn.rsplit("/", 1)[-1], step)
        )
    return out


def teardown_plan(spec: EnvSpec, infra: InfraConfig, target: str) -> Plan:
    """What destroying a recorded environment deletes, in teardown order."""
    out: list[PlannedResource] = []

    def minus(type_: str, name: str, step: str, detail: str = "") -> None:
        out.append(PlannedResource(Action.destroy, type_, name, step, detail))

    out.extend(lb_teardown_resources(infra))
    for vm in infra.VMs:
        if vm.ID:
            minus("aws_instance", vm.ID, "stepTerminateVMs", vm.Name)
    for pool, asg in infra.ScalingGroupID.items():
        minus("aws_autoscaling_group", asg, "stepTerminateVMs", pool)
    for pool, lt in infra.LaunchTemplateID.items():
        minus("aws_launch_template", lt, "stepDeleteLaunchTemplate", pool)
    if infra.VMSecurityGroupID:
        minus("aws_security_group", infra.VMSecurityGroupID, "stepDeleteSecurityGroup")
    if infra.RoleName:
        minus("aws_iam_instance_profile", infra.RoleName, "stepDeleteIAM")
        minus("aws_iam_role", infra.RoleName, "stepDeleteIAM")
    notes = []
    if infra.VpcCreated:
        for nat in infra.NatGatewayIDs:
            minus("aws_nat_gateway", nat, "stepDeleteNetwork")
        for eip in infra.ElasticIPAllocationIDs:
            minus("aws_eip", eip, "stepDeleteNetwork")
        for rt in filter(None, [infra.PublicRouteTableID, infra.PrivateRouteTableID]):
            minus("aws_route_table", rt, "stepDeleteNetwork")
        for sub in [*infra.PublicSubnetIDs, *infra.PrivateSubnetIDs]:
            minus("aws_subnet", sub, "stepDeleteNetwork")
        if infra.InternetGatewayID:
            minus("aws_internet_gateway", infra.InternetGatewayID, "stepDeleteNetwork")
        if infra.VpcID:
            minus("aws_vpc", infra.VpcID, "stepDeleteNetwork")
    elif infra.VpcID:
        notes.append(f"existing VPC {infra.VpcID} is not vmplane's and stays untouched")
    notes.append("anything else tagged with this job id is found by tag and deleted too")
    return Plan("teardown", spec.name, target, list(TEARDOWN_STEPS), out, notes)
