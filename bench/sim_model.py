"""The dependency model of examples/web.jsonc's resources: what must happen before what, on AWS, for an
apply and a destroy. The critical path (the limit of any tool) is its longest chain, each node weighted by
its dependent calls x the time of one call plus its simulated wait (cloud_sim.REAL_S x factor).

A node is (calls, wait, needs): `calls` API calls that must run one after another (independent calls of
one kind, such as the four CreateSubnet, count once), then `wait` (a cloud_sim.REAL_S key) if any.
Modelled as the simulation behaves (bench/README.md): moto deletes an auto scaling group and its
instances at once and the proxy cannot hold them back, so the destroy model has no termination wait.
What AWS itself requires is in the edges: a public NAT gateway and an internet-facing ALB need the
attached internet gateway, the VMs' bootstrap needs the NAT route (egress at first boot), and the
gateway cannot be detached while a public address (the NAT's, the ALB's) is mapped in the VPC.
"""

from __future__ import annotations

from cloud_sim import REAL_S

Node = tuple[int, str | None, list[str]]

APPLY: dict[str, Node] = {
    "preflight": (1, None, []),  # stepValidate's reads (image, zones, free names, the hosted zone): side by side
    "vpc": (1, None, ["preflight"]),
    "vpc.dns-attrs": (1, None, ["vpc"]),
    "subnets": (1, None, ["vpc"]),  # 2 public + 2 private
    "igw.create": (1, None, ["preflight"]),
    "igw.attach": (1, None, ["vpc", "igw.create"]),
    "eip": (1, None, ["preflight"]),
    "nat.create": (1, None, ["subnets", "eip", "igw.attach"]),  # a public NAT fails without an attached gateway
    "nat.available": (0, "nat", ["nat.create"]),
    "nat.seen": (1, None, ["nat.available"]),  # the DescribeNatGateways that sees it available
    "rt.public": (1, None, ["vpc"]),
    "rt.public.route": (1, None, ["rt.public", "igw.attach"]),
    "rt.public.assoc": (1, None, ["rt.public", "subnets"]),
    "rt.private": (1, None, ["vpc"]),
    "rt.private.assoc": (1, None, ["rt.private", "subnets"]),
    "rt.private.route": (1, None, ["rt.private", "nat.seen"]),  # 0.0.0.0/0 -> the NAT once available
    "iam.role": (1, None, ["preflight"]),
    "iam.policy": (1, None, ["iam.role"]),
    "iam.profile": (1, None, ["preflight"]),
    "iam.profile.role": (1, None, ["iam.role", "iam.profile"]),
    "sg.vm": (1, None, ["vpc"]),
    "sg.vm.rules": (1, None, ["sg.vm"]),
    "launch-template": (1, None, ["sg.vm", "iam.profile.role"]),
    # The bootstrap installs Docker and pulls NGINX at first boot: instances launch once egress exists.
    "asg": (1, None, ["launch-template", "subnets", "rt.private.route"]),
    "asg.policy": (1, None, ["asg"]),
    "instances.running": (0, "instance", ["asg"]),
    "bootstrap": (0, "bootstrap", ["instances.running"]),
    "sentinel.seen": (2, None, ["bootstrap"]),  # SendCommand + GetCommandInvocation
    "cert.request": (1, None, ["preflight"]),
    "cert.record": (1, None, ["cert.request"]),  # DescribeCertificate: the validation CNAME
    "cert.cname": (1, None, ["cert.record"]),  # ChangeResourceRecordSets in the zone
    "cert.issued": (0, "cert", ["cert.cname"]),
    "cert.seen": (1, None, ["cert.issued"]),
    "sg.lb": (1, None, ["vpc"]),
    "sg.lb.rules": (1, None, ["sg.lb"]),
    "sg.vm.from-lb": (1, None, ["sg.vm", "sg.lb"]),
    "alb.create": (1, None, ["subnets", "sg.lb", "igw.attach"]),  # internet-facing: the VPC needs its gateway
    "alb.active": (0, "alb", ["alb.create"]),
    "alb.seen": (1, None, ["alb.active"]),
    "target-group": (1, None, ["vpc"]),
    "tg.attach": (1, None, ["target-group", "asg"]),
    "listener.https": (1, None, ["cert.seen", "alb.create", "target-group"]),  # needs an ISSUED certificate
    "listener.http": (1, None, ["alb.create"]),
    "dns.alias": (1, None, ["alb.create"]),  # needs the ALB's DNS name only
    "dns.insync": (0, "dns", ["dns.alias"]),
    "dns.seen": (1, None, ["dns.insync"]),
}

DESTROY: dict[str, Node] = {
    "discover": (1, None, []),  # the job's tagged resources, side by side
    "dns.delete": (1, None, ["discover"]),  # alias + validation record
    "dns.insync": (0, "dns", ["dns.delete"]),
    "dns.seen": (1, None, ["dns.insync"]),
    "listeners.delete": (1, None, ["discover"]),
    "cert.delete": (1, None, ["listeners.delete"]),
    "alb.delete": (1, None, ["listeners.delete"]),
    "tg.detach": (1, None, ["discover"]),
    "tg.delete": (1, None, ["listeners.delete", "tg.detach"]),
    "asg.drain": (1, None, ["discover"]),
    "asg.delete": (1, None, ["asg.drain"]),
    "asg.gone": (1, None, ["asg.delete"]),  # moto: the group and its instances go at once (no wait)
    "launch-template.delete": (1, None, ["asg.gone"]),
    "sg.vm.delete": (1, None, ["asg.gone", "alb.delete"]),
    "sg.lb.delete": (1, None, ["alb.delete", "sg.vm.delete"]),  # the VM group's rule names the LB group
    "iam.profile.remove-role": (1, None, ["asg.gone"]),
    "iam.profile.delete": (1, None, ["iam.profile.remove-role"]),
    "iam.policy.detach": (1, None, ["discover"]),
    "iam.role.delete": (1, None, ["iam.policy.detach", "iam.profile.remove-role"]),
    "nat.delete": (1, None, ["discover"]),
    "nat.deleted": (0, "nat_delete", ["nat.delete"]),
    "nat.seen": (1, None, ["nat.deleted"]),
    "eip.release": (1, None, ["nat.seen"]),
    "rt.disassociate": (1, None, ["discover"]),
    "rt.delete": (1, None, ["rt.disassociate"]),
    "igw.detach": (1, None, ["nat.seen", "alb.delete"]),  # refused while a public address (NAT, ALB) is mapped
    "igw.delete": (1, None, ["igw.detach"]),
    "subnets.delete": (1, None, ["nat.seen", "asg.gone", "alb.delete", "rt.disassociate"]),
    "vpc.delete": (1, None, ["subnets.delete", "igw.detach", "sg.vm.delete", "sg.lb.delete", "rt.delete"]),
}


# Nodes that only read (or observe a wait): no lookup before them in the crash-safe variant.
READS = ("preflight", "discover", "cert.record")


def calls_of(name: str, node: Node, lookups: bool) -> int:
    """A crash-safe tool looks a resource up (by tag or name) before creating it; `lookups` counts that."""
    creates = node[0] > 0 and name not in READS and not name.endswith(".seen")
    return node[0] + (1 if lookups and creates else 0)


def critical_path(
    model: dict[str, Node], call_s: float, factor: float, *, lookups: bool = False
) -> tuple[float, list[str], int]:
    """(length in seconds, the chain of node names, the dependent calls on it)."""
    finish: dict[str, tuple[float, list[str], int]] = {}

    def done(name: str) -> tuple[float, list[str], int]:
        if name not in finish:
            node = model[name]
            before = max((done(n) for n in node[2]), default=(0.0, [], 0), key=lambda f: f[0])
            calls = calls_of(name, node, lookups)
            wait = REAL_S[node[1]] * factor if node[1] else 0.0
            finish[name] = (before[0] + calls * call_s + wait, [*before[1], name], before[2] + calls)
        return finish[name]

    return max((done(n) for n in model), key=lambda f: f[0])
