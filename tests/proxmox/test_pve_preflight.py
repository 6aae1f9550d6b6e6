"""stepValidate's cluster checks on fakepve: only GETs; each refusal names its field (or the token and
init-node); the datacenter firewall being off is a note, never a change."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from tests.proxmox.fakecluster import TEMPLATE_NAME, TOKEN_NAME, TOKEN_USER, Serving
from tests.proxmox.netkit import cluster, ctx, forms, mark, new_job, pve, spec

from vmplane.clouds.errors import AuthError, ConflictError, InvalidRequestError
from vmplane.clouds.proxmox import naming, preflight, privileges
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.clouds.proxmox.session import Pve

__all__ = ["cluster", "pve"]  # fixtures


@contextmanager
def changed(cluster: Serving, do: Callable[[Any], None], undo: Callable[[Any], None]) -> Iterator[None]:
    """A change to the fake's model for one test (the fake is shared by the module)."""
    cluster.run(do, cluster.pve)
    try:
        yield
    finally:
        cluster.run(undo, cluster.pve)


def test_a_good_cluster_passes_with_only_gets_and_records_what_it_resolved(cluster: Serving, pve: Pve) -> None:
    start = mark(cluster)
    c = ctx(spec(web={"mode": "fixed", "size": 1, "template": TEMPLATE_NAME}), new_job())
    preflight.preflight(pve, c)
    assert {m for m, _, _ in forms(cluster, start)} == {"GET"}
    ids = pve_ids(c.infra)
    assert (ids.TemplateVmid, ids.TemplateNode, ids.IsoStorage) == ({"web": 9000}, {"web": "pve1"}, "local")
    assert ids.ClusterFirewallOff and any("datacenter firewall is off" in n for n in c.notes)


def test_the_firewall_on_gives_no_note(cluster: Serving, pve: Pve) -> None:
    pve.put("cluster/firewall/options", enable=1)
    try:
        c = ctx(spec(), new_job())
        preflight.preflight(pve, c)
        assert not [n for n in c.notes if "firewall" in n] and not pve_ids(c.infra).ClusterFirewallOff
    finally:
        pve.put("cluster/firewall/options", enable=0)


@pytest.mark.parametrize(
    ("template", "why"),
    [(9999, "no VM 9999"), ("nosuch", "no VM nosuch"), (120, "is not a template"), (121, "guest agent off")],
)
def test_a_bad_template_names_the_pool_field(cluster: Serving, pve: Pve, template: Any, why: str) -> None:
    def add(p: Any) -> None:
        if p.vm(120) is None:
            p.add_vm(120, "plain-vm", node="pve1", config={"agent": "1"})
            p.add_vm(121, "no-agent", node="pve1", template=True, config={"agent": "enabled=0,fstrim_cloned_disks=1"})

    cluster.run(add, cluster.pve)
    c = ctx(spec(app={"mode": "fixed", "size": 1, "template": template}), new_job())
    with pytest.raises(InvalidRequestError, match=rf"^pools\.app\.proxmox\.template: .*{why}"):
        preflight.preflight(pve, c)


def test_an_offline_node_names_the_placement(cluster: Serving, pve: Pve) -> None:
    def off(p: Any) -> None:
        p.nodes["pve2"]["online"] = False

    def on(p: Any) -> None:
        p.nodes["pve2"]["online"] = True

    with changed(cluster, off, on), pytest.raises(InvalidRequestError, match=r"^provider\.nodes: node pve2 is"):
        preflight.preflight(pve, ctx(spec(), new_job()))


def test_no_iso_storage_is_refused(cluster: Serving, pve: Pve) -> None:
    def no_iso(p: Any) -> None:
        p.storages["local"]["content"] = "backup,vztmpl"

    def iso(p: Any) -> None:
        p.storages["local"]["content"] = "iso,vztmpl,backup"

    with changed(cluster, no_iso, iso), pytest.raises(InvalidRequestError, match="no storage takes iso content"):
        preflight.preflight(pve, ctx(spec(), new_job()))


def test_a_missing_privilege_is_named_with_init_node(cluster: Serving, pve: Pve) -> None:
    held = [p for p in privileges.PRIVILEGES if p != "VM.GuestAgent.Unrestricted"]

    def grant(p: Any) -> None:
        p.grant(f"{TOKEN_USER}!{TOKEN_NAME}", "/", *held)

    def ungrant(p: Any) -> None:
        p.acl = None

    with changed(cluster, grant, ungrant), pytest.raises(AuthError) as err:
        preflight.preflight(pve, ctx(spec(), new_job()))
    assert "VM.GuestAgent.Unrestricted on /vms" in str(err.value) and "vmplane proxmox init-node" in str(err.value)
    assert "VM.Clone" not in str(err.value)


def test_someone_elses_pool_with_our_name_is_a_conflict(cluster: Serving, pve: Pve) -> None:
    job = new_job()
    pve.post("pools", poolid=naming.pool_id(spec(), job), comment="hand-made")
    with pytest.raises(ConflictError, match="not vmplane"):
        preflight.preflight(pve, ctx(spec(), job))


def test_missing_counts_grants_on_parents_only() -> None:
    everything = dict.fromkeys(privileges.PRIVILEGES, 1)
    assert privileges.missing({"/": everything}) == []
    split = {"/vms": everything, "/storage": everything, "/pool": everything, "/sdn": everything, "/": {}}
    assert privileges.missing(split) == [p for p in privileges.PRIVILEGES if p.startswith("Sys.")]
    assert "VM.Clone" in privileges.missing({"/vms/100": everything})  # one VM's grant is not /vms
    assert set(privileges.PVE8_DIFFERENCES) <= set(privileges.PRIVILEGES)
    pve8 = {p: 1 for p in privileges.PRIVILEGES if not p.startswith("VM.GuestAgent.")} | {"VM.Monitor": 1}
    assert privileges.missing({"/": pve8}) == []  # PVE 8's one agent privilege stands for PVE 9's two


@pytest.mark.parametrize(
    ("value", "on"), [("1", True), ("enabled=1,fstrim_cloned_disks=1", True), ("0", False), (None, False)]
)
def test_agent_enabled_reads_the_option_string(value: Any, on: bool) -> None:
    assert preflight.agent_enabled(value) is on


def test_a_spread_from_a_template_on_local_storage_is_noted(cluster: Serving, pve: Pve) -> None:
    c = ctx(spec(web={"mode": "fixed", "size": 2, "template": 9000}), new_job())
    preflight.preflight(pve, c)
    assert any(
        n.startswith("pools.web.proxmox.template: template 9000 has disks on local storage (local-lvm)")
        for n in c.notes
    )
    one = ctx(spec(web={"mode": "fixed", "size": 1, "template": 9000}), new_job())
    preflight.preflight(pve, one)
    assert not [n for n in one.notes if "local storage" in n]  # one VM goes on the template's node
