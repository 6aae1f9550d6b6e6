"""Autohealing of ASG pools: a MIG behind the load balancer recreates a VM that fails the LB's health check.

The health check exists only with the load balancer (stepCreateLoadBalancer makes it, `lb detach`
deletes it), so the policy follows the LB: stepCreateTargetGroup sets it on every MIG it puts in the
backend service (`vmplane lb attach` and every apply, scale and update run that step), and the LB's
removal clears it before the health check goes (Google refuses to delete a health check a MIG uses).
A MIG without a load balancer keeps Google's default repair, which recreates a VM that stops running
but does not look into it.
"""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.gcp import mig, naming, ownership
from vmplane.clouds.gcp.lb_refs import tail
from vmplane.clouds.gcp.session import GcpClients
from vmplane.envspec.models import AsgPool

MAX_INITIAL_DELAY_SEC = 3600  # Google's bound on initialDelaySec (0..3600)


def initial_delay(ctx: Context) -> int:
    """How long a new VM's failed health checks are ignored: the bootstrap timeout, the time the VM step
    itself gives a VM to write its sentinel (nginx serves the health check only once the bootstrap is
    through), so the MIG never recreates a VM vmplane would still wait for. A VM that passes the check
    sooner ends its delay then (Google's rule), so a long delay costs a healthy VM nothing. Capped at
    Google's hour, as the generated Terraform stack does (tf/gcp/compute.py)."""
    return min(ctx.spec.bootstrap.timeout_seconds, MAX_INITIAL_DELAY_SEC)


def ensure(gcp: GcpClients, ctx: Context, pool_name: str, health_check: str | None) -> None:
    """The pool's MIG heals on `health_check` (a `projects/...` reference) with `initial_delay`, or on
    nothing when None; patched only when it differs, so a re-run sends nothing."""
    from google.cloud import compute_v1 as c

    name = ctx.infra.ScalingGroupID.get(pool_name) or naming.mig(ctx.spec, pool_name)
    group = mig.get_mig(gcp, name)
    if group is None:
        return  # no group, nothing heals: the VM step makes it, and this step runs after it
    if pool_name not in ctx.infra.ScalingGroupID and not ownership.owned_by(group, ctx.tagger):
        return  # found by name only, and not this job's: left alone
    delay = initial_delay(ctx)
    have = [(tail(p.health_check), p.initial_delay_sec) for p in group.auto_healing_policies if p.health_check]
    want = [(tail(health_check), delay)] if health_check else []
    if have == want:
        return
    # One empty policy turns health-check autohealing off (gcloud's --clear-autohealing sends the same):
    # an empty list would not reach Google, the client leaves empty repeated fields out of the JSON.
    policy = (
        c.InstanceGroupManagerAutoHealingPolicy(health_check=health_check, initial_delay_sec=delay)
        if health_check
        else c.InstanceGroupManagerAutoHealingPolicy()
    )
    mig.patch(gcp, name, c.InstanceGroupManager(auto_healing_policies=[policy]), what=f"autohealing of {name}")
    if health_check:
        ctx.log(f"pool {pool_name}: {name} recreates VMs failing {health_check.rsplit('/', 1)[-1]} after {delay}s")
    else:
        ctx.log(f"pool {pool_name}: {name} no longer heals on the load balancer's health check")


def clear_all(gcp: GcpClients, ctx: Context) -> None:
    """Before the health check is deleted: every MIG of the job (recorded, or by its name for the spec's
    ASG pools) stops healing on it."""
    pools = set(ctx.infra.ScalingGroupID) | {n for n, p in ctx.spec.pools.items() if isinstance(p, AsgPool)}
    for pool_name in sorted(pools):
        ensure(gcp, ctx, pool_name, None)
