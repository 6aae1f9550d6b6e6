"""The Proxmox crash sweep: kill -9 a real `vmplane apply` of examples/proxmox.jsonc (one VM: every
distinct call is made, and a case costs less) right after each distinct mutating PVE API call it makes,
resume it, and require the cluster to hold what a clean apply leaves (normalised: VMIDs, MACs, uuids,
job-derived ids and digests differ between runs, shapes must not). Then the same for `vmplane destroy`:
the resumed destroy ends `deleted` and nothing of the job remains. Each case kills one apply and then one
destroy of what it converged to (tests/integration/sweep_cases.py), on a fake cluster of its own.

The call lists are the clean reference run's, read from the per-step API-call tally the job records
(`steps[].apiCalls`, names from `session.call_name`); `test_the_pve_sweep_covers_every_mutating_call`
fails when they drift, printing the lists to paste. The hook is `VMPLANE_TEST_HANG_AFTER_CALL="POST
/nodes/{node}/qemu/{vmid}/clone"` (clouds/faults.py), honoured only against a loopback endpoint.

The fake is the tests' fakepve (fakecluster.serve): SDN objects stored, `resize` applied, tasks that take
time (a clone 0.3 s), and the token holding exactly the README's privileges. The kill after `POST
.../clone` lands while the clone task still runs (the fake holds it until the resumed run reads the
locked VM: fakeqemu.hold, so no race); the kill after `PUT .../resize` lands with the resize task running
or just done, and the resumed run must not grow the disk twice or leave it ungrown. The snapshot lists
the disk volumes on the storages with their sizes, so a leaked or ungrown disk fails the case.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.sweep_cases import Reference, assert_cases, killed_apply_then_killed_destroy, paired_params
from tests.proxmox.fakecluster import Serving, serve
from tests.proxmox.guest import GuestPlayer
from tests.proxmox.privileges_kit import grant_readme_privileges
from tests.proxmox.pve_cli import PveCli, pve_cli, write_pve_env
from tests.proxmox.pve_view import cluster_state

from vmplane.clouds.proxmox import naming
from vmplane.envspec.load import load_spec

pytestmark = pytest.mark.slow

ENV = "pvs"
POOLS = {"web": {"mode": "fixed", "size": 1, "template": "debian-12-cloud", "cores": 2, "memoryMb": 2048}}

APPLY_OPS = [
    "POST /cluster/firewall/groups",
    "POST /cluster/firewall/groups/{group}",
    "POST /cluster/sdn/vnets",
    "POST /cluster/sdn/vnets/{vnet}/subnets",
    "POST /cluster/sdn/zones",
    "POST /nodes/{node}/qemu/{vmid}/agent/exec",
    "POST /nodes/{node}/qemu/{vmid}/clone",
    "POST /nodes/{node}/qemu/{vmid}/config",
    "POST /nodes/{node}/qemu/{vmid}/firewall/rules",
    "POST /nodes/{node}/qemu/{vmid}/status/start",
    "POST /nodes/{node}/storage/{storage}/upload",
    "POST /pools",
    "PUT /cluster/sdn",
    "PUT /nodes/{node}/qemu/{vmid}/firewall/options",
    "PUT /nodes/{node}/qemu/{vmid}/resize",
]
DESTROY_OPS = [
    "DELETE /cluster/firewall/groups/{group}",
    "DELETE /cluster/firewall/groups/{group}/{n}",
    "DELETE /cluster/sdn/vnets/{vnet}",
    "DELETE /cluster/sdn/vnets/{vnet}/subnets/{subnet}",
    "DELETE /cluster/sdn/zones/{zone}",
    "DELETE /nodes/{node}/qemu/{vmid}",
    "DELETE /nodes/{node}/storage/{storage}/content/{volume}",
    "DELETE /pools/{pool}",
    "POST /nodes/{node}/qemu/{vmid}/status/stop",
    "PUT /cluster/sdn",
]
XFAIL: dict[str, str] = {}
CLONE = "POST /nodes/{node}/qemu/{vmid}/clone"


def _case(op: str) -> str | None:
    return None if op.startswith("GET ") else op


VOLATILE_KEYS = {"digest", "vmgenid", "smbios1", "pos"}
MAC = re.compile(r"\b[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}\b")


def _norm(value: Any, subs: list[tuple[re.Pattern[str], str]]) -> Any:
    if isinstance(value, dict):
        return {_norm(k, subs): _norm(v, subs) for k, v in sorted(value.items()) if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return sorted((_norm(v, subs) for v in value), key=lambda x: json.dumps(x, sort_keys=True))
    if isinstance(value, int | str) and not isinstance(value, bool):
        text = str(value)
        for pattern, repl in subs:
            text = pattern.sub(repl, text)
        return text
    return value


def snapshot(serving: Serving, env_file: Path, job_id: str) -> dict[str, Any]:
    """The whole cluster (its only tenant is this case's job), with run-specific values replaced."""
    spec = load_spec(env_file)
    state = cluster_state(serving)
    subs = [
        (re.compile(rf"\b{vm['vmid']}\b"), f"VMID-{vm['name']}") for vm in state["vms"]
    ]  # disks, ISOs and members carry the VMID
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


def remaining(snap: dict[str, Any]) -> dict[str, Any]:
    left = {k: v for k, v in snap.items() if k != "sdn" and v}
    left.update({f"sdn.{k}": v for k, v in snap["sdn"].items() if v})
    return left


def _cluster(pki: Path) -> Iterator[tuple[Serving, GuestPlayer]]:
    pki.mkdir(exist_ok=True)
    with serve(pki) as serving:
        grant_readme_privileges(serving)  # the token holds exactly the README's privileges
        player = GuestPlayer(serving).start()
        try:
            yield serving, player
        finally:
            player.stop()


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[Serving, GuestPlayer]]:
    yield from _cluster(tmp_path / "pki")


def _env(tmp_path: Path, serving: Serving) -> Path:
    return write_pve_env(tmp_path, serving, ENV, pools=POOLS)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reference]:
    tmp = tmp_path_factory.mktemp("pve-sweep-ref")
    for serving, _ in _cluster(tmp / "pki"):
        cli = pve_cli(tmp)
        env_file = _env(tmp, serving)
        applied = cli.json("apply", "-f", str(env_file), "--yes")
        assert applied["status"] == "succeeded", applied["error"]
        snap = snapshot(serving, env_file, applied["id"])
        # What every case must reach: one of each, so an empty cluster can never pass for converged.
        assert [len(snap[k]) for k in ("vms", "pools", "groups", "isos", "volumes")] == [1, 1, 1, 1, 1], snap
        assert snap["volumes"][0]["size"] == str(20 * 1024**3), snap["volumes"]  # grown to the example's diskGb
        assert [len(snap["sdn"][k]) for k in ("zones", "vnets", "subnets")] == [1, 1, 1], snap["sdn"]
        destroyed = cli.json("destroy", "-f", str(env_file), "--yes")
        assert destroyed["status"] == "deleted", destroyed["error"]
        assert not remaining(snapshot(serving, env_file, applied["id"]))
        yield Reference(applied, snap, destroyed)


def test_the_pve_sweep_covers_every_mutating_call(reference: Reference) -> None:
    assert_cases(reference.applied, reference.destroyed, _case, APPLY_OPS, DESTROY_OPS)


@pytest.mark.parametrize(("index", "apply_op", "destroy_op"), paired_params(APPLY_OPS, DESTROY_OPS, XFAIL))
def test_pve_apply_then_destroy_killed_at_each_call_converge(
    fake: tuple[Serving, GuestPlayer],
    reference: Reference,
    tmp_path: Path,
    index: int,
    apply_op: str | None,
    destroy_op: str | None,
) -> None:
    serving, _ = fake
    cli: PveCli = pve_cli(tmp_path)
    env_file = _env(tmp_path, serving)

    def snap(job_id: str) -> dict[str, Any]:
        return snapshot(serving, env_file, job_id)

    during_clone = apply_op == CLONE
    if during_clone:  # the clone task runs until the resumed run looks at the VM: killed while it runs
        serving.run(serving.pve.hold, "qmclone")
    killed_apply_then_killed_destroy(
        cli, env_file, apply_op, destroy_op, snap, reference.snapshot, lambda j: remaining(snap(j)),
        flags=(),
    )  # fmt: skip
    if during_clone:
        assert serving.run(lambda: list(serving.pve.met_running)), "the resumed apply never met the running clone"
