"""The ProxmoxDriver's VM-side methods reach the modules behind them (one lifecycle through the driver)."""

from __future__ import annotations

import pytest
from tests.proxmox.conftest import make_ctx, make_spec
from tests.proxmox.fakecluster import Serving
from tests.proxmox.guest import GuestPlayer

from vmplane.clouds.base import Context
from vmplane.clouds.errors import UnsupportedError
from vmplane.clouds.proxmox.driver import ProxmoxDriver
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve
from vmplane.state import VMState


def test_a_lifecycle_through_the_driver(cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer) -> None:
    driver = ProxmoxDriver(pve.target)
    driver.ensure_launch_templates(ctx)
    driver.ensure_vms(ctx)
    ids = [str(v.ID) for v in ctx.infra.VMs]
    assert {v.State for v in ctx.infra.VMs} == {VMState.ready}
    assert all(r.ok for r in driver.run_command(ids, ["true"], timeout=10))
    with pytest.raises(UnsupportedError, match="qm terminal"):
        driver.session_hint(ids[0])
    assert driver.rotate_pool(ctx, "web") == ["web: every VM runs config v1"]
    driver.stop_pool(ctx, "web")
    driver.start_pool(ctx, "web")
    driver.delete_vms(ctx)
    driver.delete_launch_templates(ctx)
    assert ctx.infra.VMs == [] and ctx.infra.LaunchTemplateID == {} and pve_ids(ctx.infra).TemplateVmid == {}
    assert cluster.run(lambda: [vm.vmid for vm in cluster.pve.vms]) == [9000]  # the template stays


def test_the_whole_driver_on_the_fake_leaves_nothing(cluster: Serving, pve: Pve, guest: GuestPlayer) -> None:
    """Every provisioning step's driver call in pipeline order, then the teardown's: no leftovers."""
    ctx = make_ctx(make_spec())
    driver = ProxmoxDriver(pve.target)
    driver.preflight(ctx)
    driver.ensure_network(ctx)
    driver.ensure_identity(ctx)
    driver.ensure_launch_templates(ctx)
    driver.ensure_vms(ctx)
    assert {v.State for v in ctx.infra.VMs} == {VMState.ready}
    config = pve.get(f"nodes/pve1/qemu/{ctx.infra.VMs[0].ID}/config")
    assert f"bridge={ctx.infra.NetworkID}," in config["net0"]
    assert driver.leftovers(ctx)
    driver.delete_vms(ctx)
    driver.delete_launch_templates(ctx)
    driver.delete_security_group(ctx)
    driver.delete_identity(ctx)
    driver.delete_network(ctx)
    assert driver.leftovers(ctx) == []
