"""Issue 24's drift cases on Proxmox VE, through the real CLI on fakepve (with SDN objects stored,
tests/proxmox/fakesdn.py): examples/proxmox.jsonc applied, changed out of band through the PVE API
(proxmoxer), found by `vmplane drift -o json` (exit 3: the resource, kind, change and fields), repaired
by `vmplane apply --yes` (its plan shows the repair lines) and `vmplane drift` exits 0 after.

The cases, grouped so that each example pays for one apply and one repair:
1 a VM deleted (cloned again under its name and VMID), 2 a VM stopped, 3 port 22 opened from 0.0.0.0/0
(on a VM's own firewall, and on the environment's firewall group), 4 a vmplane rule deleted from the
group, 5 a tag token removed (Proxmox tags are tokens: `tags.<token>` wanted ""), 6 NAT: the subnet's
SNAT turned off (the node's masquerade for the subnet is its only route out), 9 a NoCloud ISO deleted
(repaired) and the template VM deleted (the user's: reported, never repaired), 10 an extra VM carrying the
job's tag token. Cases 7 and 8 (a load balancer's listener, a deregistered target) do not apply: Proxmox
VE has no load balancer vmplane can create.

What the fake cannot know: no guest boots (the guest player answers the agent once a clone runs with
vmplane's ISO), and SNAT off changes no packet; the SDN apply is a task that succeeds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.proxmox.conftest import make_ctx, make_spec
from tests.proxmox.drift_kit import Operator, T, apply_env, by_resource, drift_cluster, fields, iso_address
from tests.proxmox.fakecluster import TEMPLATE_NAME, TEMPLATE_VMID, Serving, add_template
from tests.proxmox.guest import GuestPlayer

from vmplane.clouds.proxmox import drift as pve_drift
from vmplane.state import InfraConfig, VMRecord


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[Serving, GuestPlayer]]:
    with drift_cluster(tmp_path / "pki") as served:
        yield served


def _repair_lines(out: str) -> list[str]:
    head = out.split("Drift: changed outside vmplane since the last apply (repaired by apply):", 1)
    assert len(head) == 2, out
    return [line.strip() for line in head[1].splitlines() if line.strip()]


@pytest.mark.slow
def test_vm_deleted_stopped_untagged_and_opened_on_22_are_found_and_repaired(
    fake: tuple[Serving, GuestPlayer], tmp_path: Path
) -> None:
    serving, _ = fake
    env = apply_env(serving, tmp_path, "pvd")
    op = Operator(serving)
    web0, web1 = env.vm("pvd-web-0"), env.vm("pvd-web-1")
    group = env.cloud["SecurityGroup"]
    op.destroy(web1["AZ"], web1["ID"])  # case 1
    op.stop(web0["AZ"], web0["ID"])  # case 2
    op.open_ssh_on_vm(web0["AZ"], web0["ID"])  # case 3, on the VM's own firewall
    op.drop_tag(web0["AZ"], web0["ID"], "team-platform")  # case 5
    subnet = env.cloud["Subnet"]
    op.delete_subnet(env.cloud["VNet"], subnet)  # case 6 again: the NAT'ed subnet gone as a whole

    before, jobs = op.mutations(serving), env.cli.json("jobs")
    code, report = env.drift()
    assert code == 3 and report["env"] == "pvd" and report["job"] == env.job["id"], report
    # The check is read-only: no request but GETs reached the cluster, and no job was recorded.
    assert op.mutations(serving) == before and env.cli.json("jobs") == jobs
    found = by_resource(report)
    gone = found.pop(f"{T}vm.pvd-web-1")
    assert (gone["kind"], gone["id"], gone["change"], gone["fields"]) == ("vm", web1["ID"], "missing", [])
    assert gone["repairable"] and f"VMID {web1['ID']}" in gone["repair"]
    changed = found.pop(f"{T}vm.pvd-web-0")
    assert (changed["kind"], changed["id"], changed["change"]) == ("vm", web0["ID"], "changed")
    assert fields(changed) == {
        "status": ("running", "stopped"),
        "firewall.rules": ([f"GROUP {group}"], sorted([f"GROUP {group}", "IN ACCEPT tcp 22 from 0.0.0.0/0"])),
        "tags.team-platform": ("", None),
    }
    net = found.pop(f"{T}sdn_subnet.{subnet}")
    assert (net["kind"], net["id"], net["change"], net["repairable"]) == ("sdn-subnet", subnet, "missing", True)
    # The deleted VM's ISO is a volume of the storage, not of the VM: the purge leaves it, so no more drift.
    assert found == {}, found
    # Without the refresh, the file matches the record: nothing to do.
    proc = env.cli.run("plan", "-f", str(env.file), "--refresh", "false")
    assert proc.returncode == 0 and "No changes" in proc.stdout, proc.stdout + proc.stderr

    lines = _repair_lines(env.apply())
    assert any(line.startswith(f"+ {T}vm.pvd-web-1") and "missing" in line for line in lines), lines
    assert any(line.startswith(f"~ {T}vm.pvd-web-0") and "changed" in line for line in lines), lines
    assert any(line.startswith(f"+ {T}sdn_subnet.{subnet}") for line in lines), lines
    code, report = env.drift()
    assert (code, report["drift"]) == (0, []), report
    # Cloned again under its name and its VMID; the other one started, untouched otherwise.
    assert env.vm("pvd-web-1")["ID"] == web1["ID"] and env.vm("pvd-web-0")["ID"] == web0["ID"]
    assert {v["Name"]: v["State"] for v in env.infra["VMs"]} == {"pvd-web-0": "ready", "pvd-web-1": "ready"}
    config = op.qemu(web0["AZ"], web0["ID"]).config.get()
    assert "team-platform" in config["tags"].split(";")
    rules = op.qemu(web0["AZ"], web0["ID"]).firewall.rules.get()
    assert [(r["type"], r["action"]) for r in rules] == [("group", group)]
    again = op.px.cluster.sdn.vnets(env.cloud["VNet"]).subnets(subnet).get()
    assert (again["cidr"], int(again["snat"])) == ("10.60.0.0/24", 1)
    # The text form says the same: nothing drifted.
    proc = env.cli.run("drift", "pvd")
    assert proc.returncode == 0 and "No drift" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.slow
def test_group_rules_snat_iso_and_a_stray_vm_are_found_and_repaired(
    fake: tuple[Serving, GuestPlayer], tmp_path: Path
) -> None:
    serving, _ = fake
    env = apply_env(serving, tmp_path, "pvn")
    op = Operator(serving)
    cloud, web1 = env.cloud, env.vm("pvn-web-1")
    group, iso = cloud["SecurityGroup"], cloud["Isos"]["pvn-web-1"]
    op.open_ssh_on_group(group)  # case 3, on the group vmplane made
    op.delete_group_rule(group, "80")  # case 4
    op.snat_off(cloud["VNet"], cloud["Subnet"])  # case 6
    op.stop(web1["AZ"], web1["ID"])  # PVE cannot start it before its ISO is back: stepCreateVMs does
    op.delete_iso(web1["AZ"], iso)  # case 9
    stray = op.stray_vm("pve1", "handmade", env.token())  # case 10

    code, report = env.drift()
    assert code == 3, report
    found = by_resource(report)
    rules = found.pop(f"{T}cluster_firewall_security_group.{group}")
    assert (rules["kind"], rules["id"], rules["change"]) == ("security-group", group, "changed")
    assert fields(rules) == {"rules": (["IN ACCEPT tcp 80 from 10.60.0.0/24"], ["IN ACCEPT tcp 22 from 0.0.0.0/0"])}
    subnet = found.pop(f"{T}sdn_subnet.{cloud['Subnet']}")
    assert (subnet["kind"], subnet["change"], fields(subnet)) == ("sdn-subnet", "changed", {"snat": (True, False)})
    assert fields(found.pop(f"{T}vm.pvn-web-1")) == {"status": ("running", "stopped")}
    missing = found.pop(iso_address(iso))
    assert (missing["kind"], missing["id"], missing["change"]) == ("iso", iso, "missing")
    extra = found.pop(f"{T}vm.handmade")
    assert (extra["kind"], extra["id"], extra["change"]) == ("vm", str(stray), "extra")
    assert found == {}, found

    start = len(op.mutations(serving))
    lines = _repair_lines(env.apply())
    assert sum(line.startswith(("~ ", "+ ", "- ")) for line in lines) == 5, lines
    # The stopped VM is started only after its ISO is uploaded again.
    sent = [p for _, p in op.mutations(serving)[start:]]
    upload = sent.index(f"/api2/json/nodes/{web1['AZ']}/storage/local/upload")
    started = sent.index(f"/api2/json/nodes/{web1['AZ']}/qemu/{web1['ID']}/status/start")
    assert upload < started, sent
    assert any(line.startswith(f"- {T}vm.handmade") for line in lines), lines
    code, report = env.drift()
    assert (code, report["drift"]) == (0, []), report
    group_rules = op.px.cluster.firewall.groups(group).get()
    assert [(r["dport"], r["source"]) for r in group_rules] == [("80", "10.60.0.0/24")]
    assert int(op.px.cluster.sdn.vnets(cloud["VNet"]).subnets(cloud["Subnet"]).get()["snat"]) == 1
    assert stray not in [int(v["vmid"]) for v in op.px.cluster.resources.get(type="vm")]
    assert iso in [c["volid"] for c in op.px.nodes(web1["AZ"]).storage("local").content.get(content="iso")]


@pytest.mark.slow
def test_a_deleted_template_is_reported_never_repaired(fake: tuple[Serving, GuestPlayer], tmp_path: Path) -> None:
    serving, _ = fake
    env = apply_env(serving, tmp_path, "pvt", pools={"web": {"mode": "fixed", "size": 1, "template": TEMPLATE_NAME}})
    op = Operator(serving)
    op.delete_template("pve1", TEMPLATE_VMID)  # case 9: the template the pool clones, the user's
    code, report = env.drift()
    assert code == 3, report
    (entry,) = report["drift"]
    assert entry["resource"] == f"data.{T}vm.{TEMPLATE_NAME}" and entry["kind"] == "template"
    assert (entry["id"], entry["change"], entry["repairable"]) == (str(TEMPLATE_VMID), "missing", False)
    proc = env.cli.run("plan", "-f", str(env.file))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Drift found; none of it is vmplane's." in proc.stdout, proc.stdout
    serving.run(add_template, serving.pve)  # the user makes it again, under the same VMID
    code, report = env.drift()
    assert (code, report["drift"]) == (0, []), report


def test_a_pool_stopped_by_vmplane_expects_its_vms_stopped() -> None:
    """The record's StoppedPools is the file's word on power (no cloud call: what drift expects). Proxmox has
    no `vmplane stop` yet (it needs schedules), so a stopped pool comes from another operation's record."""
    spec = make_spec(size=1)
    infra = InfraConfig(VMs=[VMRecord(Name="demo-web-0", Pool="web", Index=0, ID="101", AZ="pve1")])
    running = {e.name: e.fields["status"] for e in pve_drift.expected_vms(make_ctx(spec, infra))}
    infra.StoppedPools = ["web"]
    stopped = {e.name: e.fields["status"] for e in pve_drift.expected_vms(make_ctx(spec, infra))}
    assert (running, stopped) == ({"demo-web-0": "running"}, {"demo-web-0": "stopped"})
