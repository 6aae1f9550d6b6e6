"""The ProxmoxDriver's VM-side methods reach the modules behind them (one lifecycle through the driver)."""

from __future__ import annotations

import pytest
from tests.proxmox.conftest import make_ctx, make_spec
from tests.proxmox.fakecluster import Serving
from tests.proxmox.guest import GuestPlayer

from vmplane.clouds.base import Context
from vmplane.clouds.errors import UnsupportedError
from vmplane.clouds.interfaces.composition import create_identity, delete_identity
from vmplane.clouds.proxmox.driver import ProxmoxDriver
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve
from vmplane.state import VMState


def test_a_lifecycle_through_the_driver(cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer) -> None:
    driver = ProxmoxDriver(pve.target)
    driver.pools.ensure_templates(ctx)
    driver.pools.ensure_vms(ctx)
    ids = [str(v.ID) for v in ctx.infra.VMs]
    assert {v.State for v in ctx.infra.VMs} == {VMState.ready}
    assert all(r.ok for r in driver.exec_channel.run(ids, ["true"], timeout=10))
    with pytest.raises(UnsupportedError, match="qm terminal"):
        driver.exec_channel.session_hint(ids[0])
    assert driver.pools.rotate(ctx, "web") == ["web: every VM runs config v1"]
    driver.pools.stop(ctx, "web")
    driver.pools.start(ctx, "web")
    driver.pools.delete_vms(ctx)
    driver.pools.delete_templates(ctx)
    assert ctx.infra.VMs == [] and ctx.infra.LaunchTemplateID == {} and pve_ids(ctx.infra).TemplateVmid == {}
    assert cluster.run(lambda: [vm.vmid for vm in cluster.pve.vms]) == [9000]  # the template stays


def test_the_whole_driver_on_the_fake_leaves_nothing(cluster: Serving, pve: Pve, guest: GuestPlayer) -> None:
    """Every provisioning step's driver call in pipeline order, then the teardown's: no leftovers."""
    ctx = make_ctx(make_spec())
    driver = ProxmoxDriver(pve.target)
    driver.preflight(ctx)
    driver.network.ensure(ctx)
    create_identity(driver, ctx)
    driver.pools.ensure_templates(ctx)
    driver.pools.ensure_vms(ctx)
    assert {v.State for v in ctx.infra.VMs} == {VMState.ready}
    config = pve.get(f"nodes/pve1/qemu/{ctx.infra.VMs[0].ID}/config")
    assert f"bridge={ctx.infra.NetworkID}," in config["net0"]
    assert driver.inventory.leftovers(ctx)
    driver.pools.delete_vms(ctx)
    driver.pools.delete_templates(ctx)
    driver.network.delete_firewall(ctx)
    delete_identity(driver, ctx)
    driver.network.delete(ctx)
    assert driver.inventory.leftovers(ctx) == []
