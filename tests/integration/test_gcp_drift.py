"""Issue 24's ten drift cases on the GCP sandbox, through the real CLI: each drift is made out of band with
the official client (google-cloud-compute), found by `vmplane drift -o json` (exit 3: the resource's plan
address, kind, change and fields), shown by `vmplane plan` as repair lines, repaired by `vmplane apply
--yes`, and `vmplane drift` exits 0 after. Cases are grouped so each example pays for one repair:

- gcp-fixed: a VM deleted, a VM stopped with a label removed, a rule added (22 from 0.0.0.0/0 on the
  job's network, untagged), a vmplane rule deleted, the Cloud Router (with its NAT) deleted, the instance
  template deleted;
- gcp-web: the HTTPS forwarding rule deleted (the listener), the MIG's group removed from the backend
  service (the backend deregistered), an extra global address carrying the job's labels;
- gcp-fixed on an existing network (the user's): a rule someone added there aimed at the VMs is
  reported, not repairable, and left as it is by apply.

The sandbox keeps every compute operation it ran: that the drift check ran none is read from there (the
sandbox cannot count reads), with the job's record unchanged. IAM and DNS writes make no compute
operation; the check's code issues none (clouds/gcp/drift.py reads only).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from google.cloud import compute_v1 as c
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.gcp_drift_cases import break_fixed
from tests.integration.gcp_inventory import PROJECT, REGION, Gcp, job_resources

from vmplane.clouds.base import Tagger
from vmplane.clouds.gcp import naming, ownership
from vmplane.envspec.load import load_spec

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]


@pytest.fixture
def gcp(sandbox: Sandbox) -> Gcp:
    return Gcp(sandbox.gcp_endpoint)


def by_resource(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["resource"]: d for d in report["drift"]}


def fields(d: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {f["field"]: (f["wanted"], f["actual"]) for f in d["fields"]}


def operations(sandbox: Sandbox) -> int:
    return len(sandbox.gcp_control(f"state?project={PROJECT}", method="GET")["operations"])


def check_is_read_only(cli: Cli, sandbox: Sandbox, env: str) -> dict[str, Any]:
    """`vmplane drift` twice: exit 3 with the same report, no compute operation, the job's record as it was."""
    before, jobs = operations(sandbox), cli.json("jobs")
    report = cli.json("drift", env, expect=3)
    assert cli.json("drift", env, expect=3)["drift"] == report["drift"]
    assert operations(sandbox) == before, "the drift check ran a mutating compute call"
    assert cli.json("jobs") == jobs
    return report


def repair(cli: Cli, env_file: str, env: str, addresses: set[str]) -> None:
    """`plan --refresh false` sees no change (the record is unchanged); `plan` lists the repairs; `apply`
    repairs them all; `drift` is clean after."""
    assert cli.json("plan", "-f", env_file, "--sandbox", "--refresh", "false")["summary"] == "No changes."
    plan = cli.json("plan", "-f", env_file, "--sandbox")
    assert {r["resource"] for r in plan["repairs"]} == addresses
    assert plan["steps"][:2] == ["stepValidate", "stepRepairDrift"]
    applied = cli.json("apply", "-f", env_file, "--sandbox", "--yes")
    assert applied["status"] == "succeeded", applied.get("error")
    clean = cli.run("drift", env, "-o", "json")
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_fixed_vm_deleted_stopped_unlabelled_rules_router_and_template(
    cli: Cli, sandbox: Sandbox, gcp: Gcp, tmp_path
) -> None:
    env_file = write_env(tmp_path, "gdrift-fixed", example="gcp-fixed.jsonc")
    spec = load_spec(env_file)
    applied = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert applied["status"] == "succeeded", applied["error"]
    assert cli.run("drift", spec.name).returncode == 0  # a clean apply has no drift
    job = applied["id"]
    made = break_fixed(gcp, spec, job)

    report = check_is_read_only(cli, sandbox, spec.name)
    found = by_resource(report)
    want = made.expected(spec)
    assert {r: (d["kind"], d["change"]) for r, d in found.items()} == want, report
    assert all(d["repairable"] for d in report["drift"])
    team = ownership.labels(Tagger.for_spec(spec, job), "vm")["team"]
    assert fields(found[f"google_compute_instance.{made.stopped}"]) == {
        "status": ("RUNNING", "TERMINATED"),
        "tags.team": (team, None),
    }
    assert found[f"google_compute_instance.{made.gone}"]["id"] == made.gone
    assert found[f"google_compute_firewall.{made.world_rule}"]["id"] == made.world_rule
    text = cli.run("drift", spec.name)
    assert text.returncode == 3 and "7 resource(s) drifted" in text.stdout, text.stdout

    repair(cli, str(env_file), spec.name, set(want))
    after = job_resources(gcp, job)
    states = {v["name"]: v["status"] for v in after["instances"]}
    assert states == {made.gone: "RUNNING", made.stopped: "RUNNING"}  # the deleted VM is back under its name
    relabelled = next(v for v in after["instances"] if v["name"] == made.stopped)
    assert relabelled["labels"]["team"] == team
    rules = {r["name"] for r in gcp.dicts("Firewalls")}
    assert made.vpc_rule in rules and made.world_rule not in rules
    assert [r["name"] for r in after["routers"]] == [made.router] and after["routers"][0]["nats"]
    assert [t["name"] for t in after["region_templates"]] == [made.template]


def test_web_listener_backend_and_an_extra_labelled_address(cli: Cli, sandbox: Sandbox, gcp: Gcp, tmp_path) -> None:
    env_file = write_env(tmp_path, "gdrift-web", example="gcp-web.jsonc")
    spec = load_spec(env_file)
    applied = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert applied["status"] == "succeeded", applied["error"]
    job = applied["id"]
    assert cli.run("drift", spec.name).returncode == 0  # a clean apply has no drift
    https = naming.https_rule(spec)
    gcp.compute("GlobalForwardingRules").delete_unary(project=PROJECT, forwarding_rule=https)
    services = gcp.compute("BackendServices")
    backend = naming.backend_service(spec)
    svc = services.get(project=PROJECT, backend_service=backend)
    groups = sorted(b.group.rsplit("/", 1)[-1] for b in svc.backends)
    svc.backends = []
    services.update_unary(project=PROJECT, backend_service=backend, backend_service_resource=svc)
    extra = f"{spec.name}-spare-ip"  # the environment's prefix and the job's labels, not in the file
    address = c.Address(name=extra, labels=ownership.labels(Tagger.for_spec(spec, job), "address"))
    gcp.compute("GlobalAddresses").insert_unary(project=PROJECT, address_resource=address)

    report = check_is_read_only(cli, sandbox, spec.name)
    found = by_resource(report)
    want = {
        f"google_compute_global_forwarding_rule.{https}": ("global-forwarding-rule", "missing"),
        f"google_compute_backend_service.{backend}": ("backend-service", "changed"),
        f"google_compute_global_address.{extra}": ("global-address", "extra"),
    }
    assert {r: (d["kind"], d["change"]) for r, d in found.items()} == want, report
    assert groups == [naming.mig(spec, "web")]
    assert fields(found[f"google_compute_backend_service.{backend}"]) == {"backends": (groups, [])}

    repair(cli, str(env_file), spec.name, set(want))
    assert https in {r["name"] for r in gcp.dicts("GlobalForwardingRules")}
    assert extra not in {a["name"] for a in gcp.dicts("GlobalAddresses")}
    svc = services.get(project=PROJECT, backend_service=backend)
    assert sorted(b.group.rsplit("/", 1)[-1] for b in svc.backends) == groups


def test_a_rule_on_the_users_network_aimed_at_the_vms_is_reported_and_never_changed(
    cli: Cli, sandbox: Sandbox, gcp: Gcp, tmp_path
) -> None:
    shared = f"shared-{uuid.uuid4().hex[:8]}"  # the user's network, made before vmplane runs
    net_link = f"projects/{PROJECT}/global/networks/{shared}"
    gcp.compute("Networks").insert_unary(
        project=PROJECT, network_resource=c.Network(name=shared, auto_create_subnetworks=False)
    )
    subnet = c.Subnetwork(name=f"{shared}-vms", network=net_link, ip_cidr_range="10.60.0.0/20")
    gcp.compute("Subnetworks").insert_unary(project=PROJECT, region=REGION, subnetwork_resource=subnet)
    network = {
        "cidr": "10.60.0.0/16",
        "zones": 2,
        "ingressPorts": [80],
        "existingVpcId": shared,
        "existingPrivateSubnetIds": [f"{shared}-vms"],
    }
    env_file = write_env(tmp_path, "gdrift-byo", example="gcp-fixed.jsonc", network=network)
    spec = load_spec(env_file)
    applied = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert applied["status"] == "succeeded", applied["error"]
    assert cli.run("drift", spec.name).returncode == 0  # the user's network itself is not the job's drift
    world = c.Firewall(
        name=f"{shared}-ssh",
        network=net_link,
        source_ranges=["0.0.0.0/0"],
        target_tags=[naming.network_tag(spec)],  # aimed at the environment's VMs
        allowed=[c.Allowed(I_p_protocol="tcp", ports=["22"])],
    )
    elsewhere = c.Firewall(  # the user's own business: not about the environment's VMs
        name=f"{shared}-web", network=net_link, target_tags=["other"], allowed=[c.Allowed(I_p_protocol="tcp")]
    )
    firewalls = gcp.compute("Firewalls")
    for rule in (world, elsewhere):
        firewalls.insert_unary(project=PROJECT, firewall_resource=rule)

    (d,) = check_is_read_only(cli, sandbox, spec.name)["drift"]
    assert (d["resource"], d["kind"], d["change"], d["repairable"]) == (
        f"google_compute_firewall.{world.name}",
        "firewall",
        "extra",
        False,
    )
    assert "not vmplane's" in d["repair"]
    applied = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert applied["status"] == "succeeded", applied.get("error")
    assert {world.name, elsewhere.name} <= {r["name"] for r in gcp.dicts("Firewalls")}  # never changed
    assert cli.json("drift", spec.name, expect=3)["drift"] == [d]  # and still reported
