"""Leftovers and retag on fakepve: what is the job's (tag token, pool membership, comments, ISO names,
recorded SDN ids), what is not (another job's VM, the template), nothing after a teardown; a tag change
reaches the VMs' tags and description (keeping the user's own tokens), the pool and the group."""

from __future__ import annotations

from typing import Any

import pytest
from tests.proxmox.fakecluster import Serving, token_env
from tests.proxmox.netkit import NODES, cluster, ctx, new_job, pve, spec

from vmplane.clouds.base import Context, Leftover
from vmplane.clouds.proxmox import firewall, inventory, naming, network, ownership, retag
from vmplane.clouds.proxmox.driver import ProxmoxDriver
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve, PveTarget

__all__ = ["cluster", "pve"]  # fixtures


def _provision(pve: Pve, c: Context) -> None:
    ownership.ensure_pool(pve, c)
    network.ensure_network(pve, c)
    firewall.ensure_security_group(pve, c)


def _add_vm(cluster: Serving, vmid: int, name: str, tags: list[str], pool: str | None = None, desc: str = "") -> None:
    def add(p: Any) -> None:
        p.add_vm(vmid, name, node="pve2", pool=pool, config={"tags": ";".join(tags), "description": desc})

    cluster.run(add, cluster.pve)


def _add_iso(cluster: Serving, name: str) -> None:
    cluster.run(lambda p: p.storages["local"]["files"].add(name), cluster.pve)


def test_leftovers_list_the_jobs_objects_only_and_none_after_teardown(cluster: Serving, pve: Pve) -> None:
    job = new_job()
    c = ctx(spec(), job)
    _provision(pve, c)
    ids = pve_ids(c.infra)
    ids.IsoStorage = "local"
    token = inventory.job_token(c)
    _add_vm(cluster, 301, "demo-pve-web-0", [token, "team-platform"])
    _add_vm(cluster, 302, "demo-pve-web-1", ["other"], pool=ids.Pool)  # untagged, but in the job's pool
    _add_vm(cluster, 303, "someone-else", [inventory.job_token(ctx(spec(), new_job()))])
    ids.Vmids = {"301": "pve2", "302": "pve2"}
    _add_iso(cluster, naming.iso_name(301))
    _add_iso(cluster, naming.iso_name(303))  # another job's VMID
    left = inventory.leftovers(pve, c)
    kinds = sorted((x.kind, x.id.split(" ")[0]) for x in left)
    assert kinds == [
        ("iso", f"local:iso/{naming.iso_name(301)}"),
        ("pool", str(ids.Pool)),
        ("sdn-subnet", str(ids.Subnet)),
        ("sdn-vnet", str(ids.VNet)),
        ("sdn-zone", str(ids.Zone)),
        ("security-group", naming.security_group(job)),
        ("vm", "301"),
        ("vm", "302"),
    ]  # SDN: what the fake stored for the ids the record holds
    for vmid in (301, 302):
        pve.delete(f"nodes/pve2/qemu/{vmid}", purge=1)
    pve.delete(f"nodes/pve1/storage/local/content/local:iso/{naming.iso_name(301)}")
    firewall.delete_security_group(pve, c)
    network.delete_network(pve, c)
    ownership.delete_pool(pve, c)
    assert inventory.leftovers(pve, c) == []


def test_recorded_sdn_objects_found_by_exact_id_are_leftovers(cluster: Serving, pve: Pve) -> None:
    c = ctx(spec(), new_job())
    ids = pve_ids(c.infra)
    for zone in ("vzmine", "vzother"):  # the record names one; the other is someone else's
        pve.post("cluster/sdn/zones", zone=zone, type="simple")
    pve.post("cluster/sdn/vnets", vnet="vnmine", zone="vzmine")
    pve.post("cluster/sdn/vnets/vnmine/subnets", subnet="10.99.0.0/24", type="subnet")
    ids.Zone, ids.VNet, ids.Subnet = "vzmine", "vnmine", "vzmine-10.99.0.0-24"
    found = [x for x in inventory.leftovers(pve, c) if x.kind.startswith("sdn")]
    assert found == [
        Leftover("sdn-subnet", "vzmine-10.99.0.0-24"),
        Leftover("sdn-vnet", "vnmine"),
        Leftover("sdn-zone", "vzmine"),
    ]
    pve.delete("cluster/sdn/vnets/vnmine/subnets/vzmine-10.99.0.0-24")
    pve.delete("cluster/sdn/vnets/vnmine")
    for zone in ("vzmine", "vzother"):
        pve.delete(f"cluster/sdn/zones/{zone}")


def test_retag_rewrites_vm_tags_and_description_pool_and_group_comments(cluster: Serving, pve: Pve) -> None:
    job = new_job()
    c = ctx(spec(), job)
    _provision(pve, c)
    old = c.tagger.tags("vm", "demo-pve-web-0")
    description = naming.description(old, "cloned from 9000")
    _add_vm(cluster, 311, "demo-pve-web-0", [*naming.tag_tokens(old), "pinned"], desc=description)
    s = spec()
    s.tags.clear()
    s.tags["team"] = "data"
    new = ctx(s, job, infra=c.infra)
    retag.retag(pve, new)
    config = pve.get("nodes/pve2/qemu/311/config")
    tokens = config["tags"].split(";")
    assert "team-data" in tokens and "team-platform" not in tokens and "pinned" in tokens
    assert inventory.job_token(c) in tokens
    assert naming.tags_from_description(config["description"])["team"] == "data"
    assert config["description"].endswith("cloned from 9000")
    pool = ownership.find_pool(pve, str(pve_ids(c.infra).Pool))
    group = firewall.find_group(pve, naming.security_group(job))
    assert pool is not None and ownership.tags_of_comment(pool.get("comment"))["team"] == "data"
    assert group is not None and ownership.tags_of_comment(group.get("comment"))["team"] == "data"
    pve.delete("nodes/pve2/qemu/311", purge=1)


def test_the_drivers_network_half_applies_and_destroys_to_nothing(
    cluster: Serving, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in token_env().items():
        monkeypatch.setenv(key, value)
    driver = ProxmoxDriver(PveTarget(cluster.pve.url, NODES, ca_file=cluster.cafile))  # type: ignore[attr-defined]
    c = ctx(spec(), new_job())
    driver.preflight(c)
    driver.network.ensure(c)
    driver.inventory.retag(c)
    assert {x.kind for x in driver.inventory.leftovers(c)} == {
        "pool",
        "security-group",
        "sdn-zone",
        "sdn-vnet",
        "sdn-subnet",
    }
    driver.network.delete_firewall(c)
    driver.network.delete(c)
    assert driver.inventory.leftovers(c) == []
    assert driver.outputs(c.spec, c.infra)["subnet"] == "10.40.0.0/16"
