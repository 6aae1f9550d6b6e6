"""vmplane rotate on Proxmox: outdated VMs replaced one at a time, crash-safe."""

from __future__ import annotations

from tests.proxmox.conftest import make_spec
from tests.proxmox.fakecluster import Serving
from tests.proxmox.guest import GuestPlayer

from vmplane.clouds.base import Context
from vmplane.clouds.proxmox import compute, rotation, templates
from vmplane.clouds.proxmox.session import Pve
from vmplane.state import VMState


def live_clones(cluster: Serving) -> list[tuple[str, int]]:
    return sorted(cluster.run(lambda: [(vm.name, vm.vmid) for vm in cluster.pve.vms if not vm.template]))


def test_outdated_vms_are_replaced_and_a_resumed_rotation_finishes(
    cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer
) -> None:
    templates.ensure_templates(pve, ctx)
    compute.ensure_vms(pve, ctx)
    assert rotation.rotate_pool(pve, ctx, "web") == ["web: every VM runs config v1"]
    ctx.spec = make_spec(memoryMb=4096)
    templates.ensure_templates(pve, ctx)
    assert len(ctx.infra.outdated_vms()) == 2

    # A rotation killed right after demo-web-0's intent was saved: the re-run finishes it, then the rest.
    first = ctx.infra.VMs[0]
    first.ReplacementID = f"{first.ID}@v2"
    notes = rotation.rotate_pool(pve, ctx, "web")
    assert notes == ["web: replaced 2 VMs one at a time (demo-web-0, demo-web-1)"]
    assert ctx.infra.outdated_vms() == [] and all(v.ReplacementID is None for v in ctx.infra.VMs)
    assert {v.State for v in ctx.infra.VMs} == {VMState.ready}
    assert [name for name, _ in live_clones(cluster)] == ["demo-web-0", "demo-web-1"]
    for rec in ctx.infra.VMs:
        assert str(pve.get(f"nodes/pve1/qemu/{rec.ID}/config")["memory"]) == "4096"
    isos = {c["volid"] for c in pve.get("nodes/pve1/storage/local/content", content="iso")}
    assert len(isos) == 2
