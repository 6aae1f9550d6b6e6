"""What each pipeline step needs before it may start, as the drivers declare it.

A dependency is a step name, or `step:milestone`: a milestone is a point inside a step after which what
its dependents read is saved (`Context.reached`), so they may start before it ends. Whatever starts
early, a step records success only after every step it needs has ended, so steps still complete in the
order the dependencies give (the listener after the target group, the network before the VMs).
"""

from __future__ import annotations

# stepCreateNetwork: the VPC, its public subnets and an attached internet gateway exist (what an
# internet-facing load balancer and a launch template need); the private side may still be pending.
PUBLIC_NETWORK = "public"
# stepCreateVMs: every pool's VMs (or scaling groups) exist and run; their bootstrap may still be going.
VMS_RUNNING = "running"


def step_of(dependency: str) -> str:
    """The step a dependency (`step` or `step:milestone`) belongs to."""
    return dependency.split(":", 1)[0]


def milestone(step: str, name: str) -> str:
    return f"{step}:{name}"


# Provisioning, on a cloud where nothing waits on anything not listed: IAM does not wait for the network,
# the LB is built while the launch template and the VMs are, the DNS record while the VMs boot. A driver
# whose steps announce no milestone gets "after the whole step" from the same table.
PROVISION_DEPENDS: dict[str, list[str]] = {
    "stepValidate": [],
    "stepCreateNetwork": ["stepValidate"],
    "stepCreateIAM": ["stepValidate"],
    "stepCreateLaunchTemplate": [milestone("stepCreateNetwork", PUBLIC_NETWORK), "stepCreateIAM"],
    # The VMs' bootstrap needs egress at first boot: the whole network, the NAT route included.
    "stepCreateVMs": ["stepCreateLaunchTemplate", "stepCreateNetwork"],
    # IAM too: a provision requests the certificate there, and the LB step must see that request.
    "stepCreateLoadBalancer": [milestone("stepCreateNetwork", PUBLIC_NETWORK), "stepCreateIAM"],
    # Registers the VMs, which need to exist and run, not to have finished their bootstrap.
    "stepCreateTargetGroup": ["stepCreateLoadBalancer", milestone("stepCreateVMs", VMS_RUNNING)],
    "stepCreateListener": ["stepCreateTargetGroup"],
    "stepCreateDNSRecord": ["stepCreateLoadBalancer"],
}

# Teardown: the LB first (it references the VMs' groups), then the VMs; what the VMs used goes side by
# side once they are gone; the network last.
TEARDOWN_DEPENDS: dict[str, list[str]] = {
    "stepDetachLoadBalancer": [],
    "stepTerminateVMs": ["stepDetachLoadBalancer"],
    "stepDeleteLaunchTemplate": ["stepTerminateVMs"],
    "stepDeleteSecurityGroup": ["stepTerminateVMs", "stepDetachLoadBalancer"],
    "stepDeleteIAM": ["stepTerminateVMs"],
    "stepDeleteNetwork": ["stepDeleteLaunchTemplate", "stepDeleteSecurityGroup", "stepDeleteIAM"],
}

DEFAULT_DEPENDS: dict[str, list[str]] = {**PROVISION_DEPENDS, **TEARDOWN_DEPENDS}
