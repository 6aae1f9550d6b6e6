"""The cluster firewall security group on fakepve (which stores groups and rules): ingressPorts from the
network's range only, never 22, reconciled when the ports change, someone else's group refused, teardown
twice."""

from __future__ import annotations

from typing import Any

import pytest
from tests.proxmox.fakecluster import Serving
from tests.proxmox.netkit import Killed, cluster, ctx, forms, mark, new_job, pve, spec

from vmplane.clouds.base import Context
from vmplane.clouds.errors import ConflictError
from vmplane.clouds.proxmox import firewall, naming, network, ownership
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve
from vmplane.state import InfraConfig

__all__ = ["cluster", "pve"]  # fixtures


def _rules(pve: Pve, group: str) -> list[tuple[Any, ...]]:
    return sorted(
        (r["type"], r["action"], r.get("proto"), r.get("dport"), r.get("source"), r.get("enable"))
        for r in pve.get(f"cluster/firewall/groups/{group}")
    )


def _provisioned(pve: Pve, ports: list[int], job: str | None = None, infra: InfraConfig | None = None) -> Context:
    c = ctx(spec({"cidr": "10.40.0.0/16", "ingressPorts": ports}), job or new_job(), infra=infra)
    network.ensure_network(pve, c)
    firewall.ensure_security_group(pve, c)
    return c


def test_group_opens_ingress_ports_from_the_subnet_only(cluster: Serving, pve: Pve) -> None:
    c = _provisioned(pve, [80, 443])
    group = naming.security_group(c.job_id)
    assert c.infra.VMSecurityGroupID == group == pve_ids(c.infra).SecurityGroup
    assert _rules(pve, group) == [
        ("in", "ACCEPT", "tcp", "443", "10.40.0.0/16", 1),
        ("in", "ACCEPT", "tcp", "80", "10.40.0.0/16", 1),
    ]
    found = firewall.find_group(pve, group)
    assert found is not None and ownership.owned_by(found.get("comment"), c.tagger)


def test_changed_ports_converge_and_stray_rules_go(cluster: Serving, pve: Pve) -> None:
    c = _provisioned(pve, [80, 443])
    group = naming.security_group(c.job_id)
    # someone adds a rule by hand, and a copy of ours
    pve.post(f"cluster/firewall/groups/{group}", type="in", action="ACCEPT", proto="tcp", dport="22", enable=1)
    pve.post(
        f"cluster/firewall/groups/{group}", type="in", action="ACCEPT", proto="tcp", dport="80", source="10.40.0.0/16"
    )
    # The same job's next apply, from its record (the fake stores the SDN objects the first one made).
    c2 = _provisioned(pve, [8080, 80], job=c.job_id, infra=c.infra)
    assert _rules(pve, group) == [
        ("in", "ACCEPT", "tcp", "80", "10.40.0.0/16", 1),
        ("in", "ACCEPT", "tcp", "8080", "10.40.0.0/16", 1),
    ]
    start = mark(cluster)
    firewall.ensure_security_group(pve, c2)  # converged: a re-run changes nothing
    assert [m for m, p, _ in forms(cluster, start) if m != "GET"] == []


def test_existing_bridge_rules_use_its_range(cluster: Serving, pve: Pve) -> None:
    c = ctx(spec({"existingNetwork": "vmbr0", "ingressPorts": [8443]}), new_job())
    network.ensure_network(pve, c)
    firewall.ensure_security_group(pve, c)
    assert _rules(pve, naming.security_group(c.job_id)) == [("in", "ACCEPT", "tcp", "8443", "192.0.2.0/24", 1)]


def test_a_kill_after_intent_converges(cluster: Serving, pve: Pve) -> None:
    job = new_job()
    base = ctx(spec(), job)
    network.ensure_network(pve, base)
    c = ctx(spec(), job, infra=base.infra.model_copy(deep=True), kill_at=1)
    with pytest.raises(Killed):
        firewall.ensure_security_group(pve, c)
    assert firewall.find_group(pve, naming.security_group(job)) is None  # killed before the create
    c.save = lambda: None
    firewall.ensure_security_group(pve, c)
    assert len(_rules(pve, naming.security_group(job))) == 2


def test_someone_elses_group_is_a_conflict_and_left_in_teardown(cluster: Serving, pve: Pve) -> None:
    job = new_job()
    group = naming.security_group(job)
    pve.post("cluster/firewall/groups", group=group, comment="hand-made")
    c = ctx(spec(), job)
    network.ensure_network(pve, c)
    with pytest.raises(ConflictError, match="not vmplane"):
        firewall.ensure_security_group(pve, c)
    firewall.delete_security_group(pve, c)
    assert firewall.find_group(pve, group) is not None


def test_teardown_deletes_rules_then_group_and_twice_is_fine(cluster: Serving, pve: Pve) -> None:
    c = _provisioned(pve, [80, 443])
    group = naming.security_group(c.job_id)
    start = mark(cluster)
    firewall.delete_security_group(pve, c)
    deletes = [p for m, p, _ in forms(cluster, start) if m == "DELETE"]
    path = f"/cluster/firewall/groups/{group}"
    assert deletes == [f"{path}/1", f"{path}/0", path]  # the highest position first
    assert firewall.find_group(pve, group) is None and c.infra.VMSecurityGroupID is None
    firewall.delete_security_group(pve, c)
