"""Readiness: the bootstrap writes the sentinel, then reports it as guest attribute `vmplane/bootstrap =
ready` (bootstrap/gcp_guest.py); the driver reads `instances.getGuestAttributes` until every VM says so.

Google allows about 10 guest-attribute queries per minute per VM, so the poll backs off 2 s -> 15 s
(8 queries in the first minute); one query per VM per round.
"""

from __future__ import annotations

from vmplane.clouds.base import Context
from vmplane.clouds.errors import NotFoundError
from vmplane.clouds.gcp.session import CALL_TIMEOUT, GcpClients
from vmplane.clouds.sentinel import Pace, Seen, wait_sentinels
from vmplane.state import VMRecord

NAMESPACE = "vmplane"
BOOTSTRAP_KEY = "bootstrap"
SIMULATED_KEY = "simulated"
FAILED_KEY = "bootstrap-failed"  # what the guest's bootstrap logged when it wrote no sentinel
# late=None: Google allows 10 guest-attribute queries a minute per VM, so the backoff alone paces them.
PACE = Pace(first=2.0, factor=1.5, cap=15.0, late=None)
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


def read_sentinel(gcp: GcpClients, vm: VMRecord) -> Seen:
    """One query of the VM's `vmplane/` guest attributes: ready, or what a failed bootstrap reported."""
    attrs = guest_attributes(gcp, str(vm.AZ), str(vm.ID), f"{NAMESPACE}/")
    if attrs.get(f"{NAMESPACE}/{BOOTSTRAP_KEY}") == "ready":
        return Seen(ready=True, simulated=attrs.get(f"{NAMESPACE}/{SIMULATED_KEY}") == "true")
    return Seen(failed=attrs.get(f"{NAMESPACE}/{FAILED_KEY}", "")[-1000:])


def wait_bootstrapped(gcp: GcpClients, ctx: Context, recs: list[VMRecord] | None = None) -> None:
    """Every VM in `bootstrap` becomes `ready` once its guest reports the sentinel; at the pool's
    `bootstrap.timeoutSeconds` the late ones become `failed` and the step fails, naming them."""
    wait_sentinels(
        ctx,
        ctx.infra.VMs if recs is None else recs,
        lambda vm: read_sentinel(gcp, vm),
        timeout=ctx.spec.bootstrap.timeout_seconds,
        pace=PACE,
        read_through="sentinel seen in guest attributes",
        emulator=gcp.target.sandbox,  # only the sandbox's guest marks its sentinel simulated
        simulated_note=SIMULATED_NOTE,
    )
