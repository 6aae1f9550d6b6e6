"""vmplane stop/start of a Fixed pool on fakepve."""

from __future__ import annotations

from tests.proxmox.guest import GuestPlayer

from vmplane.clouds.base import Context
from vmplane.clouds.proxmox import compute, power, templates
from vmplane.clouds.proxmox.session import Pve
from vmplane.clouds.proxmox.vms import status
from vmplane.state import VMState


def test_stop_then_start_a_pool_and_an_apply_in_between_keeps_it_stopped(
    pve: Pve, ctx: Context, guest: GuestPlayer
) -> None:
    templates.ensure_templates(pve, ctx)
    compute.ensure_vms(pve, ctx)
    power.stop_pool(pve, ctx, "web")
    power.stop_pool(pve, ctx, "web")  # idempotent
    assert ctx.infra.StoppedPools == ["web"]
    assert {status(pve, str(v.AZ), str(v.ID)) for v in ctx.infra.VMs} == {"stopped"}
    assert {v.State for v in ctx.infra.VMs} == {VMState.stopped}

    compute.ensure_vms(pve, ctx)  # an apply while stopped starts nothing
    assert {status(pve, str(v.AZ), str(v.ID)) for v in ctx.infra.VMs} == {"stopped"}

    power.start_pool(pve, ctx, "web")
    power.start_pool(pve, ctx, "web")
    assert ctx.infra.StoppedPools == []
    assert {status(pve, str(v.AZ), str(v.ID)) for v in ctx.infra.VMs} == {"running"}
    assert {v.State for v in ctx.infra.VMs} == {VMState.ready}
