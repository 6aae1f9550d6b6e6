"""The Proxmox plans are pure, name objects as the steps name them (from the record once there is one),
put each under a step the pipeline runs, never open 22, and destroy only what vmplane made."""

from __future__ import annotations

from tests.proxmox.netkit import spec

from vmplane.clouds.base import Action
from vmplane.clouds.proxmox import naming, plan
from vmplane.clouds.proxmox.ids import pve_ids
from vmplane.pipeline.runner import STEPS
from vmplane.state import InfraConfig, VMRecord

T = "proxmox_virtual_environment_"


def test_apply_plan_lists_pool_sdn_group_vms_and_isos_under_their_steps() -> None:
    s = spec(web={"mode": "fixed", "size": 3, "template": 9000, "cores": 4})
    out = plan.provision_resources(s, InfraConfig())
    assert all(r.action is Action.create and r.step in STEPS for r in out)
    kinds = [(r.type.removeprefix(T), r.step) for r in out]
    assert kinds[:6] == [
        ("pool", "stepCreateNetwork"),
        ("sdn_zone_simple", "stepCreateNetwork"),
        ("sdn_vnet", "stepCreateNetwork"),
        ("sdn_subnet", "stepCreateNetwork"),
        ("sdn_applier", "stepCreateNetwork"),
        ("cluster_firewall_security_group", "stepCreateNetwork"),
    ]
    subnet = next(r for r in out if r.type == T + "sdn_subnet")
    assert "10.40.0.0/16, gateway 10.40.0.1, SNAT" in subnet.detail
    group = next(r for r in out if r.type == T + "cluster_firewall_security_group")
    assert "tcp/80,443 from 10.40.0.0/16 only" in group.detail and "22" in group.detail.split("nothing on ")[1]
    vms = [r for r in out if r.type == T + "vm"]
    assert [r.name for r in vms] == [naming.vm_name(s, "web", i) for i in range(3)]
    assert [r.detail.split(" on ")[1].split(",")[0] for r in vms] == ["pve1", "pve2", "pve1"]  # spread in order
    assert "4 cores, 2048 MiB, 20 GB" in vms[0].detail
    assert len([r for r in out if r.type == T + "file"]) == 3


def test_recorded_names_replace_the_patterns() -> None:
    job = "job-plan-1"
    infra = InfraConfig()
    ids = pve_ids(infra)
    ids.Pool, ids.Zone, ids.VNet = naming.pool_id(spec(), job), naming.zone_id(job), naming.vnet_id(job)
    ids.SecurityGroup = naming.security_group(job)
    names = {r.type.removeprefix(T): r.name for r in plan.provision_resources(spec(), infra)}
    assert names["pool"] == ids.Pool and names["sdn_zone_simple"] == ids.Zone and names["sdn_vnet"] == ids.VNet
    assert names["cluster_firewall_security_group"] == ids.SecurityGroup
    assert names["sdn_subnet"] == f"{ids.Zone}-10.40.0.0-16"


def test_existing_network_plans_no_sdn() -> None:
    out = plan.provision_resources(spec({"existingNetwork": "vmbr0"}), InfraConfig())
    assert not [r for r in out if "sdn" in r.type]
    assert "net0 on vmbr0" in next(r for r in out if r.type == T + "vm").detail


def _recorded(created: bool) -> InfraConfig:
    infra = InfraConfig(
        NetworkID="vnabc123",
        NetworkCreated=created,
        VMs=[VMRecord(Name="demo-pve-web-0", Pool="web", Index=0, ID="101", AZ="pve1")],
        VMSecurityGroupID="vmplane-abcd1234",
    )
    ids = pve_ids(infra)
    ids.Pool, ids.PoolCreated, ids.SecurityGroup, ids.SecurityGroupCreated = (
        "vmplane-demo-abc",
        True,
        "vmplane-abcd1234",
        True,
    )
    ids.Isos = {"demo-pve-web-0": "local:iso/vmplane-101-cidata.iso"}
    if created:
        ids.Zone, ids.VNet, ids.Subnet = "vzabc123", "vnabc123", "vzabc123-10.40.0.0-16"
        ids.ZoneCreated = ids.VNetCreated = ids.SubnetCreated = True
    return infra


def test_destroy_plan_goes_vms_isos_group_then_sdn_in_order_and_pool_last() -> None:
    out = plan.teardown_resources(_recorded(created=True))
    assert all(r.action is Action.destroy and r.step in STEPS for r in out)
    assert [(r.type.removeprefix(T), r.name) for r in out] == [
        ("vm", "demo-pve-web-0"),
        ("file", "local:iso/vmplane-101-cidata.iso"),
        ("cluster_firewall_security_group", "vmplane-abcd1234"),
        ("sdn_subnet", "vzabc123-10.40.0.0-16"),
        ("sdn_vnet", "vnabc123"),
        ("sdn_zone_simple", "vzabc123"),
        ("sdn_applier", "cluster/sdn"),
        ("pool", "vmplane-demo-abc"),
    ]


def test_destroy_plan_of_an_existing_network_leaves_it() -> None:
    out = plan.teardown_resources(_recorded(created=False))
    assert not [r for r in out if "sdn" in r.type]
    assert out[-1].type == T + "pool"
