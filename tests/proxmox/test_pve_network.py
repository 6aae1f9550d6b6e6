"""The environment's pool and network on fakepve: SDN intent asserted from the recorded requests (the fake
stores SDN too: fakesdn.py), convergence after a kill at every intent record, teardown twice, an existing bridge that
vmplane never touches."""

from __future__ import annotations

import pytest
from tests.proxmox.fakecluster import Serving
from tests.proxmox.netkit import Killed, cluster, ctx, forms, mark, new_job, pve, spec

from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError, DeadlineExceededError, InvalidRequestError
from vmplane.clouds.proxmox import firewall, naming, network, ownership
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve

__all__ = ["cluster", "pve"]  # fixtures


def _provision(p: Pve, c: Context, with_group: bool = False) -> None:
    """stepCreateNetwork's work (the driver's ensure_network), optionally without the firewall group."""
    ownership.ensure_pool(p, c)
    network.ensure_network(p, c)
    if with_group:
        firewall.ensure_security_group(p, c)


def teardown(p: Pve, c: Context) -> None:
    firewall.delete_security_group(p, c)
    network.delete_network(p, c)
    ownership.delete_pool(p, c)


def test_sdn_requests_carry_snat_dhcp_the_cidr_and_gateway_then_apply(cluster: Serving, pve: Pve) -> None:
    job, start = new_job(), mark(cluster)
    c = ctx(spec(), job)
    _provision(pve, c)
    zone, vnet = naming.zone_id(job), naming.vnet_id(job)
    sdn = [(m, p, f) for m, p, f in forms(cluster, start, "/cluster/sdn") if m != "GET"]
    assert [(m, p) for m, p, _ in sdn] == [
        ("POST", "/cluster/sdn/zones"),
        ("POST", "/cluster/sdn/vnets"),
        ("POST", f"/cluster/sdn/vnets/{vnet}/subnets"),
        ("PUT", "/cluster/sdn"),
    ]
    z, v, s = sdn[0][2], sdn[1][2], sdn[2][2]
    assert z == {"zone": [zone], "type": ["simple"], "ipam": ["pve"], "dhcp": ["dnsmasq"], "nodes": ["pve1,pve2"]}
    assert v["vnet"] == [vnet] and v["zone"] == [zone] and job in v["alias"][0]
    assert s["subnet"] == ["10.40.0.0/16"] and s["type"] == ["subnet"] and s["gateway"] == ["10.40.0.1"]
    assert s["snat"] == ["1"] and s["dhcp-range"] == ["start-address=10.40.0.10,end-address=10.40.255.254"]
    ids = pve_ids(c.infra)
    assert c.infra.NetworkID == vnet and c.infra.NetworkCreated
    assert c.infra.VMSubnetIDs == [f"{zone}-10.40.0.0-16"] == [ids.Subnet]
    assert (ids.ZoneCreated, ids.VNetCreated, ids.SubnetCreated, ids.SdnPending) == (True, True, True, False)
    assert ids.SourceCidrs == ["10.40.0.0/16"]
    pool = naming.pool_id(c.spec, job)
    comment = cluster.run(lambda: cluster.pve.pool_info[pool]["comment"])
    assert ownership.owned_by(comment, c.tagger) and "\n" not in comment


def test_a_kill_after_any_intent_record_converges_on_rerun(cluster: Serving, pve: Pve) -> None:
    job = new_job()
    clean = ctx(spec(), job)
    _provision(pve, clean, with_group=True)
    want = clean.infra.model_dump(mode="json")
    teardown(pve, clean)  # the fake stores SDN: each killed run starts from an empty cluster, as the clean one
    kill_at = 1
    while True:
        c, start = ctx(spec(), job, kill_at=kill_at), mark(cluster)
        try:
            _provision(pve, c, with_group=True)
        except Killed:
            c.save = lambda: None
            _provision(pve, c, with_group=True)  # the step's re-run, on the record the killed run left
        else:
            break  # no save left to kill at
        assert c.infra.model_dump(mode="json") == want, f"killed at save {kill_at}"
        rules = pve.get(f"cluster/firewall/groups/{naming.security_group(job)}")
        assert sorted(r["dport"] for r in rules) == ["443", "80"], f"killed at save {kill_at}"
        sdn = [(m, p) for m, p, _ in forms(cluster, start, "/cluster/sdn") if m != "GET"]
        assert sdn[-1] == ("PUT", "/cluster/sdn"), f"killed at save {kill_at}: the last SDN change is applied"
        teardown(pve, c)
        kill_at += 1
    assert kill_at > 8  # every intent record of the pool, the three SDN objects and the group was a kill point


def test_teardown_deletes_in_order_applies_and_twice_is_fine(cluster: Serving, pve: Pve) -> None:
    job = new_job()
    c = ctx(spec(), job)
    _provision(pve, c)
    ids = pve_ids(c.infra)
    start = mark(cluster)
    network.delete_network(pve, c)
    ownership.delete_pool(pve, c)
    sdn = [(m, p) for m, p, _ in forms(cluster, start, "/cluster/sdn") if m != "GET"]
    assert sdn == [
        ("DELETE", f"/cluster/sdn/vnets/{ids.VNet}/subnets/{ids.Subnet}"),
        ("DELETE", f"/cluster/sdn/vnets/{ids.VNet}"),
        ("DELETE", f"/cluster/sdn/zones/{ids.Zone}"),
        ("PUT", "/cluster/sdn"),
    ]
    assert not cluster.run(lambda: ids.Pool in cluster.pve.pools)
    start = mark(cluster)
    network.delete_network(pve, c)
    ownership.delete_pool(pve, c)
    assert [m for m, _, _ in forms(cluster, start) if m != "GET"] == []
    assert not (c.infra.NetworkCreated or ids.ZoneCreated or ids.VNetCreated or ids.SubnetCreated or ids.PoolCreated)


def test_a_kill_between_sdn_deletes_and_apply_applies_on_rerun(cluster: Serving, pve: Pve) -> None:
    job = new_job()
    c = ctx(spec(), job)
    _provision(pve, c)
    c.save = ctx(spec(), job, kill_at=6).save  # after the zone's delete is recorded, before the apply
    with pytest.raises(Killed):
        network.delete_network(pve, c)
    c.save, start = (lambda: None), mark(cluster)
    network.delete_network(pve, c)
    assert [(m, p) for m, p, _ in forms(cluster, start, "/cluster/sdn") if m != "GET"] == [("PUT", "/cluster/sdn")]


def test_existing_bridge_touches_no_sdn_and_teardown_leaves_it(cluster: Serving, pve: Pve) -> None:
    job, start = new_job(), mark(cluster)
    c = ctx(spec({"existingNetwork": "vmbr0", "ingressPorts": [80]}), job)
    _provision(pve, c)
    network.delete_network(pve, c)
    assert c.infra.NetworkID == "vmbr0" and not c.infra.NetworkCreated and c.infra.VMSubnetIDs == []
    assert pve_ids(c.infra).SourceCidrs == ["192.0.2.0/24"]  # the fake's vmbr0 holds 192.0.2.11/24
    assert [p for m, p, _ in forms(cluster, start) if p.startswith("/cluster/sdn") and m != "GET"] == []
    assert [p for m, p, _ in forms(cluster, start) if "/network" in p and m != "GET"] == []


def test_existing_network_that_is_no_bridge_or_vnet_names_the_field(cluster: Serving, pve: Pve) -> None:
    c = ctx(spec({"existingNetwork": "eno1"}), new_job())  # a NIC, not a bridge
    with pytest.raises(InvalidRequestError, match=r"network\.existingNetwork: eno1 is neither"):
        network.ensure_network(pve, c)


def test_existing_network_without_a_range_takes_an_explicit_cidr(cluster: Serving, pve: Pve) -> None:
    # A VNet made by hand with no subnet: a network the cluster knows no range of.
    pve.post("cluster/sdn/zones", zone="vzbare", type="simple")
    pve.post("cluster/sdn/vnets", vnet="vnbare", zone="vzbare")
    with pytest.raises(InvalidRequestError, match=r"set network\.cidr"):
        network.ensure_network(pve, ctx(spec({"existingNetwork": "vnbare"}), new_job()))
    c = ctx(spec({"existingNetwork": "vnbare", "cidr": "172.16.5.0/24"}), new_job())
    network.ensure_network(pve, c)
    assert pve_ids(c.infra).SourceCidrs == ["172.16.5.0/24"] and not c.infra.NetworkCreated
    pve.delete("cluster/sdn/vnets/vnbare")
    pve.delete("cluster/sdn/zones/vzbare")


def test_a_pool_of_someone_else_is_a_conflict(cluster: Serving, pve: Pve) -> None:
    job = new_job()
    name = naming.pool_id(spec(), job)
    pve.post("pools", poolid=name, comment="the lab's")
    with pytest.raises(ConflictError, match="not vmplane"):
        ownership.ensure_pool(pve, ctx(spec(), job))


def test_a_pool_with_members_is_retried_until_the_deadline(cluster: Serving, pve: Pve) -> None:
    job = new_job()
    c = ctx(spec(), job)
    ownership.ensure_pool(pve, c)
    pool = pve_ids(c.infra).Pool
    pve.put(f"pools/{pool}", vms="9000")  # a member that is not going away
    with pytest.raises(DeadlineExceededError, match="delete pool"):
        ownership.delete_pool(pve, c, timeout=0.3)
    pve.put(f"pools/{pool}", vms="9000", delete=1)
    ownership.delete_pool(pve, c)
    assert ownership.find_pool(pve, str(pool)) is None


def test_subnet_layout_refuses_what_dhcp_cannot_serve() -> None:
    assert network.subnet_layout("10.9.8.0/24") == (
        "10.9.8.0/24",
        "10.9.8.1",
        "start-address=10.9.8.10,end-address=10.9.8.254",
    )
    with pytest.raises(InvalidRequestError, match=r"network\.cidr"):
        network.subnet_layout("10.9.8.0/28")
