"""A teardown whose ISO delete did not take: the VMs' step fails naming the ISO (before, `delete_vms`
cleared the record of VMIDs and ISOs first, so the leftover scan could no longer name the ISO and the
destroy reported `deleted` with it still on the storage), and a re-run deletes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.proxmox.conftest import make_spec
from tests.proxmox.fakecluster import TEMPLATE_NAME, Serving
from tests.proxmox.guest import GuestPlayer
from tests.proxmox.pve_cli import pve_cli, write_pve_env
from tests.proxmox.pve_view import cluster_state

from vmplane.clouds.base import Context
from vmplane.clouds.errors import CloudError
from vmplane.clouds.proxmox import compute, inventory, templates
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve


def test_an_iso_still_there_after_its_delete_fails_the_step_and_a_rerun_deletes_it(
    cluster: Serving, pve: Pve, ctx: Context, guest: GuestPlayer
) -> None:
    """Old driver: `delete_vms` returned, the record was empty and `leftovers` was [] with the ISO still
    listed, so stepUnregisterSpace passed and the destroy ended `deleted`."""
    ctx.spec = make_spec(size=1)
    templates.ensure_templates(pve, ctx)
    compute.ensure_vms(pve, ctx)
    volid = next(iter(pve_ids(ctx.infra).Isos.values()))
    # The ISO's DELETE answers as done and removes nothing (how a delete that did not take looks to the
    # driver; the same holds for an error it reads as "already gone").
    cluster.run(cluster.pve.fail, "DELETE", f"/content/{volid}", 200, "ok", False, None, 1)
    with pytest.raises(CloudError, match=f"still on the cluster after their delete: {volid}"):
        compute.delete_vms(pve, ctx)
    listed = [c["volid"] for c in pve.get("nodes/pve1/storage/local/content", content="iso")]
    assert listed == [volid]
    assert [(x.kind, x.id) for x in inventory.leftovers(pve, ctx) if x.kind == "iso"] == [("iso", volid)]
    compute.delete_vms(pve, ctx)  # the re-run: the record still names it, the delete takes this time
    assert pve.get("nodes/pve1/storage/local/content", content="iso") == []
    assert [x for x in inventory.leftovers(pve, ctx) if x.kind == "iso"] == []


@pytest.mark.slow
def test_a_destroy_whose_iso_delete_did_not_take_is_not_deleted_and_names_it(
    cluster: Serving, guest: GuestPlayer, tmp_path: Path
) -> None:
    """Through the CLI: old driver, the destroy ended `deleted` with the ISO still on the storage."""
    cli = pve_cli(tmp_path)
    pools = {"web": {"mode": "fixed", "size": 1, "template": TEMPLATE_NAME}}
    env_file = write_pve_env(tmp_path, cluster, "pvi", pools=pools)
    applied = cli.json("apply", "-f", str(env_file), "--yes")
    assert applied["status"] == "succeeded", applied["error"]
    (volid,) = applied["config"]["infra"]["Cloud"]["Isos"].values()
    cluster.run(cluster.pve.fail, "DELETE", f"/content/{volid}", 200, "ok", False, None, 1)
    failed = cli.json("destroy", "-f", str(env_file), "--yes", expect=1)
    assert failed["status"] == "delete_failed" and volid in str(failed["error"]), failed["error"]
    done = cli.json("destroy", "-f", str(env_file), "--yes")  # the re-run deletes it
    assert done["status"] == "deleted", done["error"]
    assert cluster_state(cluster)["isos"] == []
