"""Readiness: the bootstrap writes the sentinel, then reports it as guest attribute `vmplane/bootstrap =
ready` (bootstrap/gcp_guest.py); the driver reads `instances.getGuestAttributes` until every VM says so.

Google allows about 10 guest-attribute queries per minute per VM, so the poll backs off 2 s -> 15 s
(8 queries in the first minute); one query per VM per round.
"""

from __future__ import annotations

from vmplane.clouds.base import Context, bootstrap_timed_out
from vmplane.clouds.errors import DeadlineExceededError, NotFoundError
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.clouds.waits import poll
from vmplane.state import VMRecord, VMState

NAMESPACE = "vmplane"
BOOTSTRAP_KEY = "bootstrap"
SIMULATED_KEY = "simulated"
FAILED_KEY = "bootstrap-failed"  # what the guest's bootstrap logged when it wrote no sentinel
POLL_FIRST, POLL_FACTOR, POLL_CAP = 2.0, 1.5, 15.0
SIMULATED_NOTE = "sandbox: the sentinel was written by the sandbox's simulated guest; no VM booted"


def guest_attributes(gcp: GcpClients, zone: str, instance: str, query_path: str) -> dict[str, str]:
    """`{namespace/key: value}` under `query_path` ({} while the guest has written none: Google answers
    404 then)."""
    from google.cloud import compute_v1 as c

    client = gcp.compute("Instances")
    request = c.GetGuestAttributesInstanceRequest(
        project=gcp.project, zone=zone, instance=instance, query_path=query_path
    )
    try:
        got = gcp.call(
            "compute.instances.getGuestAttributes",
            lambda: client.get_guest_attributes(request=request, timeout=CALL_TIMEOUT),
        )
    except NotFoundError:
        return {}
    items = got.query_value.items if got.query_value else []
    return {f"{i.namespace}/{i.key}": i.value for i in items}


def wait_bootstrapped(gcp: GcpClients, ctx: Context, recs: list[VMRecord] | None = None) -> None:
    """Every VM in `bootstrap` becomes `ready` once its guest reports the sentinel; at the pool's
    `bootstrap.timeoutSeconds` the late ones become `failed` and the step fails, naming them."""
    vms = ctx.infra.VMs if recs is None else recs
    timeout = ctx.spec.bootstrap.timeout_seconds
    simulated: list[str] = []
    reasons: dict[str, str] = {}

    def all_ready() -> bool | None:
        for vm in [v for v in vms if v.ID and v.AZ and v.State is VMState.bootstrap]:
            attrs = guest_attributes(gcp, str(vm.AZ), str(vm.ID), f"{NAMESPACE}/")
            if attrs.get(f"{NAMESPACE}/{BOOTSTRAP_KEY}") == "ready":
                vm.State = VMState.ready
                if attrs.get(f"{NAMESPACE}/{SIMULATED_KEY}") == "true":
                    simulated.append(vm.Name)
            elif why := attrs.get(f"{NAMESPACE}/{FAILED_KEY}"):
                reasons[vm.Name] = why[-1000:]
        ctx.save()
        return None if any(v.State is VMState.bootstrap for v in vms) else True

    try:
        poll(
            all_ready,
            what="the bootstrap sentinel",
            timeout=timeout,
            first=POLL_FIRST,
            factor=POLL_FACTOR,
            cap=POLL_CAP,
            late=None,  # Google allows 10 guest-attribute queries a minute per VM: the backoff alone
        )
    except DeadlineExceededError as err:
        raise bootstrap_timed_out(ctx, vms, timeout, reasons) from err
    if simulated:
        ctx.log(f"{SIMULATED_NOTE} ({', '.join(simulated)})")
    ctx.log(f"{sum(v.State is VMState.ready for v in vms)} VMs ready (sentinel seen in guest attributes)")
