"""A Fixed pool's rotation on the GCP sandbox never drops below the pool's size: each replacement is
inserted beside the old VM, seen RUNNING with its bootstrap sentinel (simulated by the sandbox's guest:
no VM boots) and in its zone's instance group behind the load balancer before the old VM leaves the
group and is deleted. The order is read back from the sandbox's own operation log (`/_sandbox/state`,
one compute#operation per mutating call, in the order the calls came); what was serving at each delete
is read from the sandbox at the moment of the delete. Every assertion reads the sandbox, not vmplane."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from google.cloud import compute_v1 as c
from tests.helpers import EXAMPLES, Cli, Sandbox, write_env
from tests.integration.gcp_inventory import Gcp, job_resources
from tests.integration.test_crash_resume import kill_after
from tests.integration.test_gcp_compute import ZONES, Env, make_env

from vmplane.clouds.gcp import compute, lb, lb_teardown, naming, rotation, templates
from vmplane.clouds.gcp.readiness import SIMULATED_NOTE
from vmplane.envspec.load import load_spec
from vmplane.state import InfraConfig, VMState

DOMAIN = "demo.sandbox.vmplane.test"
LB = {"loadBalancer": {"domain": DOMAIN, "certSource": "GCPManaged"}}


@pytest.fixture(autouse=True)
def _one_certificate_look(monkeypatch: pytest.MonkeyPatch) -> None:
    from vmplane.clouds.gcp import certs

    monkeypatch.setattr(certs, "SANDBOX_CERT_DEADLINE", 0.0)  # the sandbox never activates it alone


def sandbox_state(env: Env) -> dict[str, Any]:
    url = f"{env.sandbox.gcp_endpoint}/_sandbox/state?project={env.project}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return dict(json.load(resp))


def ready_vms(env: Env) -> set[str]:
    """Instances RUNNING with the bootstrap sentinel among their guest attributes."""
    out = set()
    for key, r in sandbox_state(env)["compute"].items():
        if (
            "/instances/" in key
            and r["status"] == "RUNNING"
            and r.get("_guest", {}).get("vmplane/bootstrap") == "ready"
        ):
            out.add(r["name"])
    return out


def serving(env: Env) -> set[str]:
    """The members of the zones' unmanaged instance groups: what the backend service sends to."""
    client = env.client(c.InstanceGroupsClient)
    body = c.InstanceGroupsListInstancesRequest(instance_state="ALL")
    out = set()
    for zone in ZONES:
        group = naming.instance_group(env.ctx().spec, zone)
        found = client.list_instances(
            project=env.project, zone=zone, instance_group=group, instance_groups_list_instances_request_resource=body
        )
        out |= {m.instance.rsplit("/", 1)[1] for m in found}
    return out


def instance_ops(state: dict[str, Any], after: int) -> list[tuple[str, str]]:
    """(verb, target) of the instance inserts/deletes and group adds/removes, in the order they came."""
    out = []
    for op in list(state["operations"].values())[after:]:
        kind, target = op["operationType"], op["targetLink"].rsplit("/", 1)[1]
        of_instance = "/instances/" in op["targetLink"] and kind in ("insert", "delete")
        if of_instance or kind in ("addInstances", "removeInstances"):
            out.append((kind, target))
    return out


def build(env: Env) -> None:
    templates.ensure_templates(env.gcp, env.ctx())
    compute.ensure_vms(env.gcp, env.ctx())
    for step in (lb.ensure_frontend, lb.ensure_backend, lb.ensure_listeners, lb.ensure_dns_record):
        step(env.gcp, env.ctx())


def test_a_fixed_rotation_behind_the_lb_never_has_fewer_ready_vms_than_its_size(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(sandbox, {"web": {"mode": "fixed", "size": 2}}, **LB)
    build(env)
    old = {v.Name: v.ID for v in env.infra.VMs}
    old_ips = {v.Name: v.PrivateIP for v in env.infra.VMs}
    assert serving(env) == set(old.values()) == {"demo-web-0", "demo-web-1"}
    env.spec_data["pools"]["web"]["diskGb"] = 30
    templates.ensure_templates(env.gcp, env.ctx())
    assert env.infra.LaunchTemplateVersion == {"web": 2}

    # At each delete of an old VM: what runs with its sentinel, and what the backend sends to.
    at_delete: list[tuple[str, set[str], set[str]]] = []
    real_delete = rotation.delete_instance

    def watched(gcp: Any, zone: str, name: str) -> bool:
        at_delete.append((name, ready_vms(env), serving(env)))
        return real_delete(gcp, zone, name)

    monkeypatch.setattr(rotation, "delete_instance", watched)
    before = len(sandbox_state(env)["operations"])
    [note] = rotation.rotate_pool(env.gcp, env.ctx(), "web")

    new = {"demo-web-0": "demo-web-0-v2", "demo-web-1": "demo-web-1-v2"}
    assert "demo-web-0 -> demo-web-0-v2" in note and "demo-web-1 -> demo-web-1-v2" in note
    # Per slot: the replacement is inserted and joins the group, then the old VM leaves it and goes.
    assert instance_ops(sandbox_state(env), before) == [
        ("insert", "demo-web-0-v2"),
        ("addInstances", naming.instance_group(env.ctx().spec, ZONES[0])),
        ("removeInstances", naming.instance_group(env.ctx().spec, ZONES[0])),
        ("delete", "demo-web-0"),
        ("insert", "demo-web-1-v2"),
        ("addInstances", naming.instance_group(env.ctx().spec, ZONES[1])),
        ("removeInstances", naming.instance_group(env.ctx().spec, ZONES[1])),
        ("delete", "demo-web-1"),
    ]
    assert [name for name, _, _ in at_delete] == ["demo-web-0", "demo-web-1"]
    for name, ready, members in at_delete:
        slot = name
        assert new[slot] in ready and name in ready  # the replacement was ready; the old VM still ran
        assert len(ready) == 3  # size 2 plus the replacement: never fewer than 2 ready
        assert new[slot] in members and name not in members and len(members) == 2  # never fewer than 2 serving
    # The slots keep their record names; the instances, and so their private IPs, are new.
    assert {v.Name: v.ID for v in env.infra.VMs} == new
    assert all(v.State is VMState.ready and v.LaunchTemplateVersion == 2 for v in env.infra.VMs)
    assert all(v.ReplacementID is None for v in env.infra.VMs)
    assert all(v.PrivateIP and v.PrivateIP != old_ips[v.Name] for v in env.infra.VMs)
    live = {i.name: i for i in env.instances()}
    assert set(live) == set(new.values()) and all(i.disks[0].disk_size_gb == 30 for i in live.values())
    assert serving(env) == set(new.values())
    assert any(SIMULATED_NOTE in line for line in env.logs)  # the sandbox's sentinel is said to be simulated

    # A re-run changes nothing; the next version rotates to -v3 names.
    assert rotation.rotate_pool(env.gcp, env.ctx(), "web") == ["web: every VM runs template v2"]
    compute.ensure_vms(env.gcp, env.ctx())  # an apply finds the rotated VMs by their recorded names
    assert {i.name for i in env.instances()} == set(new.values())

    lb_teardown.detach(env.gcp, env.ctx(), keep_vms=False)
    compute.delete_vms(env.gcp, env.ctx())
    templates.delete_templates(env.gcp, env.ctx())
    assert env.instances() == []


class Killed(BaseException):
    """Stands for kill -9 right after a cloud call: nothing after it in the process runs."""


def at_v2(sandbox: Sandbox, lb_too: bool) -> Env:
    """A Fixed pool of 2 built from template v1 (behind the LB if `lb_too`), its template now v2."""
    env = make_env(sandbox, {"web": {"mode": "fixed", "size": 2}}, **(LB if lb_too else {}))
    if lb_too:
        build(env)
    else:
        templates.ensure_templates(env.gcp, env.ctx())
        compute.ensure_vms(env.gcp, env.ctx())
    env.spec_data["pools"]["web"]["diskGb"] = 30
    templates.ensure_templates(env.gcp, env.ctx())
    return env


def rotate_killed(env: Env, monkeypatch: pytest.MonkeyPatch, module: Any, where: str, nth: int = 1) -> None:
    """Rotate until the `nth` call of `module.where` has returned, then stop as kill -9 would; `env.infra`
    becomes the record as it was last saved (a copy is taken at every save), as `vmplane resume` reads it."""
    saved = [env.infra.model_dump_json()]
    ctx = env.ctx()
    ctx.save = lambda: saved.append(env.infra.model_dump_json())
    real = getattr(module, where)
    calls = {"n": 0}

    def then_killed(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        calls["n"] += 1
        if calls["n"] == nth:
            raise Killed
        return out

    monkeypatch.setattr(module, where, then_killed)
    with pytest.raises(Killed):
        rotation.rotate_pool(env.gcp, ctx, "web")
    monkeypatch.setattr(module, where, real)
    env.infra = InfraConfig.model_validate_json(saved[-1])


@pytest.mark.parametrize(
    ("where", "nth"),
    [
        ("insert_instance", 1),  # the first replacement inserted, not yet waited for
        ("add_members", 1),  # it joined the group; the old VM still serves
        ("remove_members", 1),  # the old VM left the group, not yet deleted
        ("delete_instance", 1),  # the old VM deleted, the record not yet swapped
        ("delete_instance", 2),  # the second slot's old VM deleted, the record not yet swapped
    ],
)
def test_a_rotation_killed_after_any_call_then_rerun_ends_as_a_clean_one(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, where: str, nth: int
) -> None:
    """The record is what was saved when the process died (a copy taken at every save); the re-run
    starts from it, as `vmplane resume` does. The end state equals a clean rotation's: the same
    instances, group members and records, no duplicate replacement, no slot left out."""
    from vmplane.clouds.gcp import lb_backend

    env = at_v2(sandbox, lb_too=True)
    rotate_killed(env, monkeypatch, lb_backend if where.endswith("_members") else rotation, where, nth)
    assert env.infra.vms_to_rotate("web")  # the record says a rotation is unfinished
    rotation.rotate_pool(env.gcp, env.ctx(), "web")
    new = {"demo-web-0": "demo-web-0-v2", "demo-web-1": "demo-web-1-v2"}
    assert {v.Name: v.ID for v in env.infra.VMs} == new
    assert all(v.State is VMState.ready and v.LaunchTemplateVersion == 2 for v in env.infra.VMs)
    assert all(v.ReplacementID is None for v in env.infra.VMs)
    assert sorted(i.name for i in env.instances()) == sorted(new.values())
    assert serving(env) == set(new.values())
    assert rotation.rotate_pool(env.gcp, env.ctx(), "web") == ["web: every VM runs template v2"]

    lb_teardown.detach(env.gcp, env.ctx(), keep_vms=False)
    compute.delete_vms(env.gcp, env.ctx())
    templates.delete_templates(env.gcp, env.ctx())


def test_an_apply_after_a_rotation_killed_past_the_old_vms_delete_adopts_the_replacement(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old VM is gone and the record still names it: the VM step takes the recorded replacement as
    the slot's VM (no second insert), and the next rotation only has the other slot left."""
    env = at_v2(sandbox, lb_too=False)
    rotate_killed(env, monkeypatch, rotation, "delete_instance")
    assert (env.infra.VMs[0].ID, env.infra.VMs[0].ReplacementID) == ("demo-web-0", "demo-web-0-v2")

    before = len(sandbox_state(env)["operations"])
    compute.ensure_vms(env.gcp, env.ctx())
    assert instance_ops(sandbox_state(env), before) == []  # nothing inserted, nothing deleted
    assert [(v.Name, v.ID, v.ReplacementID, v.State) for v in env.infra.VMs] == [
        ("demo-web-0", "demo-web-0-v2", None, VMState.ready),
        ("demo-web-1", "demo-web-1", None, VMState.ready),
    ]
    assert [v.Name for v in env.infra.vms_to_rotate("web")] == ["demo-web-1"]
    rotation.rotate_pool(env.gcp, env.ctx(), "web")
    assert sorted(i.name for i in env.instances()) == ["demo-web-0-v2", "demo-web-1-v2"]
    compute.delete_vms(env.gcp, env.ctx())
    templates.delete_templates(env.gcp, env.ctx())


# kill -9 of a real `vmplane rotate` right after a call (clouds/faults.py), then `vmplane resume`: the
# first replacement's insert, the first old VM's exit from its group, and the second old VM's delete.
KILLS = ["compute.instances.insert", "compute.instanceGroups.removeInstances", "compute.instances.delete#2"]


@pytest.mark.sandbox
@pytest.mark.parametrize("kill", KILLS)
def test_kill_9_mid_gcp_rotation_behind_the_lb_then_resume_converges(
    cli: Cli, sandbox: Sandbox, tmp_path: Path, kill: str
) -> None:
    name = f"grot-{KILLS.index(kill)}"
    lb_block = load_spec(EXAMPLES / "gcp-web.jsonc").model_dump(mode="json", by_alias=True, exclude_none=True)
    lb_spec = {**lb_block["loadBalancer"], "domain": f"{name}.sandbox.vmplane.test"}
    env_file = write_env(tmp_path, name, example="gcp-fixed.jsonc", loadBalancer=lb_spec)
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes", timeout=300)
    assert job["status"] == "succeeded", job["error"]
    pools = {"web": {"mode": "fixed", "size": 2, "diskGb": 30}}
    changed = write_env(tmp_path, name, example="gcp-fixed.jsonc", loadBalancer=lb_spec, pools=pools)
    assert cli.json("apply", "-f", str(changed), "--sandbox", "--yes", timeout=300)["status"] == "succeeded"

    kill_after(cli, kill, "rotate", name, "--yes")
    assert cli.json("status", job["id"])["status"] == "running"
    done = cli.json("resume", job["id"], timeout=300)
    assert done["status"] == "succeeded", done["error"]
    slots = [f"{name}-web-0", f"{name}-web-1"]
    new = [f"{s}-v2" for s in slots]
    vms = done["config"]["infra"]["VMs"]
    assert sorted((v["Name"], v["ID"]) for v in vms) == list(zip(slots, new, strict=True))
    assert all(v["LaunchTemplateVersion"] == 2 and v["State"] == "ready" and v["ReplacementID"] is None for v in vms)
    gcp = Gcp(sandbox.gcp_endpoint)
    res = job_resources(gcp, job["id"])
    assert sorted(i["name"] for i in res["instances"]) == new  # no duplicate, no slot left out
    members = set()
    for group in res["instance_groups"]:
        zone = group["zone"].rsplit("/", 1)[1]
        listed = sandbox.gcp_compute(c.InstanceGroupsClient).list_instances(
            project=gcp.project, zone=zone, instance_group=group["name"],
            instance_groups_list_instances_request_resource=c.InstanceGroupsListInstancesRequest(),
        )  # fmt: skip
        members |= {m.instance.rsplit("/", 1)[1] for m in listed}
    assert members == set(new)
    assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes", timeout=300)["status"] == "deleted"


def test_a_replacement_left_by_a_rotation_to_an_older_version_goes_before_the_new_one(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after inserting the v2 replacement, then the template moved to v3: the re-run deletes the
    v2 replacement (neither the serving VM nor the wanted one) and replaces each slot from v3."""
    env = at_v2(sandbox, lb_too=False)
    rotate_killed(env, monkeypatch, rotation, "insert_instance")
    assert sorted(i.name for i in env.instances()) == ["demo-web-0", "demo-web-0-v2", "demo-web-1"]

    env.spec_data["pools"]["web"]["diskGb"] = 40
    templates.ensure_templates(env.gcp, env.ctx())
    assert env.infra.LaunchTemplateVersion == {"web": 3}
    rotation.rotate_pool(env.gcp, env.ctx(), "web")
    live = {i.name: i for i in env.instances()}
    assert sorted(live) == ["demo-web-0-v3", "demo-web-1-v3"]
    assert all(i.disks[0].disk_size_gb == 40 for i in live.values())
    assert [(v.ID, v.LaunchTemplateVersion, v.ReplacementID) for v in env.infra.VMs] == [
        ("demo-web-0-v3", 3, None),
        ("demo-web-1-v3", 3, None),
    ]
    compute.delete_vms(env.gcp, env.ctx())
    templates.delete_templates(env.gcp, env.ctx())


def test_a_replacement_that_never_gets_ready_leaves_the_old_vm_serving(sandbox: Sandbox) -> None:
    """No sentinel from the replacement (the sandbox's guest plays a bootstrap that never finishes): the
    rotation fails at the bootstrap timeout with the old VM still running and in its group, so the pool
    keeps its size; once the replacement reports ready, the re-run finishes the swap."""
    from vmplane.clouds.errors import DeadlineExceededError

    env = at_v2(sandbox, lb_too=True)
    sandbox.gcp_control("guest", {"mode": "off"})
    try:
        with pytest.raises(DeadlineExceededError, match="demo-web-0-v2"):
            rotation.rotate_pool(env.gcp, env.ctx(), "web")
    finally:
        sandbox.gcp_control("guest", {"mode": "auto"})
    assert serving(env) == {"demo-web-0", "demo-web-1"} and ready_vms(env) == {"demo-web-0", "demo-web-1"}
    assert [(v.ID, v.ReplacementID, v.State) for v in env.infra.VMs] == [
        ("demo-web-0", "demo-web-0-v2", VMState.ready),
        ("demo-web-1", None, VMState.ready),
    ]
    written = {"project": env.project, "zone": ZONES[0], "instance": "demo-web-0-v2"}
    sandbox.gcp_control("guest-attributes", {**written, "namespace": "vmplane", "key": "bootstrap", "value": "ready"})
    rotation.rotate_pool(env.gcp, env.ctx(), "web")
    assert serving(env) == {"demo-web-0-v2", "demo-web-1-v2"}
    lb_teardown.detach(env.gcp, env.ctx(), keep_vms=False)
    compute.delete_vms(env.gcp, env.ctx())
    templates.delete_templates(env.gcp, env.ctx())
