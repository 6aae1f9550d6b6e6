"""The repair path's kill points on Proxmox VE: one applied environment (examples/proxmox.jsonc, two VMs)
on a fake cluster that stores its SDN objects, drifted out of band in every way the repair makes a call
for (DRIFT below), then `vmplane apply --yes` killed -9 right after each distinct mutating call
stepRepairDrift makes (the hook of clouds/faults.py: its first call of that name in the process is the
repair's, stepValidate only reads) and run again. Each case must end where a clean repair does: drift
clean, and the cluster equal (normalised as the crash sweep does: VMIDs, MACs, job-derived ids and
digests differ between runs) to what the apply left before the drift. The cases share the environment:
each drifts it again, so a case pays for one repair, not for an apply.

`test_the_repair_sweep_covers_every_mutating_call` fails when the repair's calls change, printing the
list to paste (read from the clean repair's step tally, `steps[].apiCalls`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from tests.integration.sweep_cases import differences
from tests.integration.test_crash_resume import kill_after
from tests.proxmox.drift_kit import Env, Operator, apply_env, drift_cluster
from tests.proxmox.fakecluster import TEMPLATE_NAME
from tests.proxmox.pve_view import cluster_state
from tests.proxmox.test_pve_crash_sweep import MAC, _norm

from vmplane.clouds.proxmox import naming, ownership
from vmplane.envspec.load import load_spec

pytestmark = pytest.mark.slow

REPAIR_STEP = "stepRepairDrift"
REPAIR_OPS = [
    "DELETE /cluster/firewall/groups/{group}/{n}",
    "DELETE /nodes/{node}/qemu/{vmid}",
    "DELETE /nodes/{node}/qemu/{vmid}/firewall/rules/{pos}",
    "POST /cluster/firewall/groups",
    "POST /cluster/firewall/groups/{group}",
    "POST /nodes/{node}/qemu/{vmid}/firewall/rules",
    "POST /nodes/{node}/qemu/{vmid}/status/start",
    "POST /nodes/{node}/qemu/{vmid}/status/stop",
    "PUT /cluster/sdn",
    "PUT /cluster/sdn/vnets/{vnet}/subnets/{subnet}",
    "PUT /nodes/{node}/qemu/{vmid}/config",
    "PUT /nodes/{node}/qemu/{vmid}/firewall/options",
    "PUT /pools/{pool}",
]


def drift_everything(env: Env, op: Operator) -> None:
    """Every drift the repair has a call for, and a VM deleted (the repair only records that one)."""
    cloud, web0, web1 = env.cloud, env.vm("pvk-web-0"), env.vm("pvk-web-1")
    node, vmid, group = web0["AZ"], web0["ID"], cloud["SecurityGroup"]
    stray = op.stray_vm(node, "handmade", env.token())
    op.wait(node, op.qemu(node, stray).status.start.post())  # running: the repair stops it, then destroys it
    op.destroy(web1["AZ"], web1["ID"])
    op.stop(node, vmid)
    op.drop_tag(node, vmid, "team-platform")
    rules = op.qemu(node, vmid).firewall.rules
    rules(next(r["pos"] for r in rules.get() if r["type"] == "group")).delete()
    op.open_ssh_on_vm(node, vmid)
    op.qemu(node, vmid).firewall.options.put(enable=0)
    op.open_ssh_on_group(group)
    op.delete_group_rule(group, "80")
    # A tag dropped from the set the group's and the pool's comments carry (the job id stays: still ours).
    groups = op.px.cluster.firewall.groups
    comment = next(g for g in groups.get() if g["group"] == group)["comment"]
    groups.post(group=group, rename=group, comment=_without_team(comment))
    comment = next(p for p in op.px.pools.get() if p["poolid"] == cloud["Pool"])["comment"]
    op.px.pools(cloud["Pool"]).put(comment=_without_team(comment))
    op.snat_off(cloud["VNet"], cloud["Subnet"])


def _without_team(comment: str) -> str:
    tags = ownership.tags_of_comment(comment)
    assert tags.pop("team") == "platform"
    return ownership.comment(tags)


def snapshot(env: Env) -> dict[str, Any]:
    """The cluster as the crash sweep normalises it, with the SDN objects the fake stored (not replayed)."""
    serving, job_id = env.serving, env.job["id"]
    state = cluster_state(serving)
    state["sdn"] = serving.run(
        lambda: {
            kind: {k: {f: v for f, v in o.items() if f != "digest"} for k, o in objects.items()}
            for kind, objects in (
                ("zones", serving.pve.sdn_zones),
                ("vnets", serving.pve.sdn_vnets),
                ("subnets", serving.pve.sdn_subnets),
            )
        }
    )
    spec = load_spec(env.file)
    subs = [(re.compile(rf"\b{vm['vmid']}\b"), f"VMID-{vm['name']}") for vm in state["vms"]]
    for value, name in (
        (naming.pool_id(spec, job_id), "POOL"),
        (naming.security_group(job_id), "GROUP"),
        (naming.zone_id(job_id), "ZONE"),
        (naming.vnet_id(job_id), "VNET"),
        (job_id, "JOB"),
        (job_id.lower(), "job"),
    ):
        subs.append((re.compile(re.escape(value)), name))
    subs.append((MAC, "MAC"))
    return {k: _norm(v, subs) for k, v in state.items()}


@dataclass
class Shared:
    """The module's environment, the cluster as its apply left it, and the clean repair's job."""

    env: Env
    clean: dict[str, Any]
    repaired: dict[str, Any]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    tmp = tmp_path_factory.mktemp("pve-repair")
    with drift_cluster(tmp / "pki") as (serving, _):
        pools = {"web": {"mode": "fixed", "size": 2, "template": TEMPLATE_NAME}}
        env = apply_env(serving, tmp, "pvk", pools=pools)
        clean = snapshot(env)
        # The reference repair: no kill. Its step's tally is the list of kill points.
        drift_everything(env, Operator(serving))
        assert env.drift()[0] == 3
        env.apply()
        repaired = dict(env.cli.json("status", "pvk"))
        code, report = env.drift()
        assert (code, report["drift"]) == (0, []), report
        got = snapshot(env)
        assert got == clean, "\n".join(differences(got, clean)[:40])
        yield Shared(env, clean, repaired)


def _repair_calls(job: dict[str, Any]) -> list[str]:
    step = next(s for s in job["config"]["operation"]["steps"] if s["name"] == REPAIR_STEP)
    return sorted(op for op in step["apiCalls"] if not op.startswith("GET "))


def test_the_repair_sweep_covers_every_mutating_call(shared: Shared) -> None:
    got = _repair_calls(shared.repaired)
    assert got == REPAIR_OPS, f"REPAIR_OPS = {got!r}"


@pytest.mark.parametrize("op", REPAIR_OPS)
def test_a_repair_killed_after_each_call_converges(shared: Shared, op: str) -> None:
    env = shared.env
    assert env.drift()[0] == 0  # the case before this one converged
    drift_everything(env, Operator(env.serving))
    kill_after(env.cli, op, "apply", "-f", str(env.file), "--yes")
    assert env.cli.recorded_status("pvk") == "running"
    env.apply()
    code, report = env.drift()
    assert (code, report["drift"]) == (0, []), f"killed after {op}: {report['drift']}"
    got = snapshot(env)
    assert got == shared.clean, f"killed after {op}:\n" + "\n".join(differences(got, shared.clean)[:40])
