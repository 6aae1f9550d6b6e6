"""`vmplane rotate`: replace a pool's VMs that run an outdated launch template version, explicitly.

Fixed pools go one VM at a time (see `compute.rotate_fixed_vm`); ASG pools by an instance refresh that
keeps 100 % healthy capacity. Nothing here runs unless the user asks: a new template version alone
never replaces a VM.
"""

from __future__ import annotations

from vmplane.clouds.aws import compute
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.base import Context
from vmplane.clouds.errors import UnsupportedError
from vmplane.envspec.models import AsgPool


def health_timeout(ctx: Context) -> float:
    lb = ctx.spec.load_balancer
    if lb is None:
        return 0.0
    hc = lb.health_check
    return float(hc.interval_seconds * hc.healthy_threshold * 2 + 60)


def rotate_pool(aws: AwsClients, ctx: Context, pool_name: str) -> list[str]:
    pool = ctx.spec.pools[pool_name]
    outdated = [v for v in ctx.infra.outdated_vms() if v.Pool == pool_name]
    # A rotation interrupted after its replacement launched is finished too, whatever the versions say.
    resumed = [v for v in ctx.infra.VMs if v.Pool == pool_name and v.ReplacementID and v not in outdated]
    todo = sorted([*outdated, *resumed], key=lambda v: v.Index)
    if not todo:
        return [f"{pool_name}: every VM runs template v{ctx.infra.LaunchTemplateVersion.get(pool_name)}"]
    if isinstance(pool, AsgPool):
        return [_refresh(aws, ctx, pool_name, len(todo))]
    for vm in todo:
        compute.rotate_fixed_vm(aws, ctx, vm, health_timeout(ctx))
    return [f"{pool_name}: replaced {len(todo)} VMs one at a time ({', '.join(v.Name for v in todo)})"]


def _refresh(aws: AwsClients, ctx: Context, pool_name: str, outdated: int) -> str:
    group = ctx.infra.ScalingGroupID[pool_name]
    try:
        refresh_id = compute.start_instance_refresh(aws, ctx, pool_name)
    except UnsupportedError:
        # The sandbox (moto) does not implement StartInstanceRefresh. The request was sent as it would be
        # to AWS; nothing was replaced, and the outdated VMs stay listed as outdated.
        ctx.log(f"WARNING: the endpoint does not support StartInstanceRefresh; {group} was not refreshed")
        return (
            f"{pool_name}: the endpoint does not support instance refresh (StartInstanceRefresh); "
            f"{outdated} VMs of {group} still run an outdated version"
        )
    return f"{pool_name}: instance refresh {refresh_id} started on {group} for {outdated} outdated VMs"
