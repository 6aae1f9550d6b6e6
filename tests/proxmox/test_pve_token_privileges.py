"""The token's privileges as the README gives them: the README's list is the driver's (privileges.py), the
end-to-end tests run with exactly it (test_pve_lifecycle.py, the crash sweep: privileges_kit.py), and one
privilege fewer is refused under the README's name of it, by vmplane's preflight before anything is made
and by the fake (PVE's 403 `Permission check failed (<path>, <privilege>)`) when a call needs it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.proxmox.conftest import make_spec
from tests.proxmox.fakecluster import Serving
from tests.proxmox.guest import GuestPlayer
from tests.proxmox.privileges_kit import grant_readme_privileges, readme_privileges
from tests.proxmox.pve_cli import mutating, pve_cli, write_pve_env

from vmplane.clouds.base import Context
from vmplane.clouds.errors import AuthError
from vmplane.clouds.proxmox import compute, privileges, templates
from vmplane.clouds.proxmox.session import Pve


def test_the_readme_lists_the_privileges_the_driver_checks() -> None:
    assert readme_privileges() == sorted(privileges.PRIVILEGES)


def test_one_privilege_fewer_is_refused_by_preflight_naming_it_before_anything_is_made(
    cluster: Serving, tmp_path: Path
) -> None:
    grant_readme_privileges(cluster, without=["SDN.Use"])
    cli = pve_cli(tmp_path)
    env_file = write_pve_env(tmp_path, cluster, "pvp")
    proc = cli.run("apply", "-f", str(env_file), "--yes")
    assert proc.returncode == 1, proc.stdout
    assert "lacks SDN.Use on /sdn" in proc.stderr, proc.stderr  # the README's name and path of it
    assert mutating(cluster) == []


@pytest.mark.parametrize(
    ("privilege", "path"),
    [("VM.Config.Disk", "/vms/{vmid}"), ("Datastore.AllocateSpace", "/storage/local-lvm")],
)
def test_a_resize_without_its_privilege_is_refused_by_the_fake(
    cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer, privilege: str, path: str
) -> None:
    """PVE's resize_vm checks VM.Config.Disk on the VM and Datastore.AllocateSpace on the disk's storage.
    Plain fakepve answered a resize from the schema alone: without Datastore.AllocateSpace it succeeded."""
    ctx.spec = make_spec(size=1)
    templates.ensure_templates(pve, ctx)
    compute.ensure_vms(pve, ctx)  # no grant yet: everything allowed
    rec = ctx.infra.VMs[0]
    grant_readme_privileges(cluster, without=[privilege])
    where = path.format(vmid=rec.ID)
    with pytest.raises(AuthError, match=re.escape(f"Permission check failed ({where}, {privilege})")):
        pve.run_task(
            "PUT", f"nodes/{rec.AZ}/qemu/{rec.ID}/resize", node=str(rec.AZ), what="resize", disk="scsi0", size="+1G"
        )
