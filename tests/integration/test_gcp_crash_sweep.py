"""The GCP crash sweep: kill -9 a real `vmplane apply` of examples/gcp-web.jsonc (a MIG behind the
global HTTPS load balancer) right after each distinct mutating Google API method it issues, resume it,
and require the sandbox project to hold what a clean apply leaves (normalised: names, ids, addresses
and fingerprints differ between runs, shapes must not). Then the same for `vmplane destroy` after each
distinct mutating method: the resumed destroy ends `deleted` and nothing of the job remains. Each case
kills one apply and then one destroy of what it converged to (tests/integration/sweep_cases.py).

The method lists are the clean reference run's, read from the per-step API-call tally the job records
(`steps[].apiCalls`); `test_the_gcp_sweep_covers_every_mutating_call` fails when they drift, printing
the lists to paste. The hook is `VMPLANE_TEST_HANG_AFTER_CALL=api.collection.verb[#N]`
(clouds/faults.py), inert outside the sandbox.
"""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.gcp_inventory import Gcp, job_resources, records
from tests.integration.sweep_cases import Reference, assert_cases, killed_apply_then_killed_destroy, paired_params

from vmplane.envspec.load import load_spec

MUTATING = re.compile(
    r"\.(insert|delete|patch|update|create|set[A-Z]\w*|resize|addInstances|removeInstances|recreateInstances"
    r"|deleteInstances|setIamPolicy)$"
)

APPLY_OPS = [
    "cloudresourcemanager.projects.setIamPolicy",
    "compute.backendServices.insert",
    "compute.firewalls.insert",
    "compute.globalAddresses.insert",
    "compute.globalForwardingRules.insert",
    "compute.healthChecks.insert",
    "compute.instances.setMetadata",
    "compute.networks.insert",
    "compute.regionAutoscalers.insert",
    "compute.regionInstanceGroupManagers.insert",
    "compute.regionInstanceGroupManagers.patch",  # autohealing on the LB's health check (stepCreateTargetGroup)
    "compute.regionInstanceTemplates.insert",
    "compute.routers.insert",
    "compute.sslCertificates.insert",
    "compute.subnetworks.insert",
    "compute.targetHttpProxies.insert",
    "compute.targetHttpsProxies.insert",
    "compute.urlMaps.insert",
    "dns.changes.create",
    "iam.projects.serviceAccounts.create",
]
# Later calls of a method that makes another resource (the IAP and health-check rules, the redirect's URL
# map and :80 rule): the steps that issue them run one after another, so the count is fixed.
LATER_CALLS = [
    "compute.firewalls.insert#2",
    "compute.firewalls.insert#3",
    "compute.globalForwardingRules.insert#2",
    "compute.urlMaps.insert#2",
]
DESTROY_OPS = [
    "cloudresourcemanager.projects.setIamPolicy",
    "compute.backendServices.delete",
    "compute.firewalls.delete",
    "compute.firewalls.delete#2",
    "compute.globalAddresses.delete",
    "compute.globalForwardingRules.delete",
    "compute.healthChecks.delete",
    "compute.networks.delete",
    "compute.regionAutoscalers.delete",
    "compute.regionInstanceGroupManagers.delete",
    "compute.regionInstanceGroupManagers.patch",  # autohealing off before the health check goes (detach)
    "compute.regionInstanceGroupManagers.resize",
    "compute.regionInstanceTemplates.delete",
    "compute.routers.delete",
    "compute.sslCertificates.delete",
    "compute.subnetworks.delete",
    "compute.targetHttpProxies.delete",
    "compute.targetHttpsProxies.delete",
    "compute.urlMaps.delete",
    "dns.changes.create",
    "iam.projects.serviceAccounts.delete",
]
XFAIL: dict[str, str] = {}


def _case(op: str) -> str | None:
    return op if MUTATING.search(op) else None


# Values that differ between two clean runs of the same file under another name.
VOLATILE_KEYS = {"id", "creationTimestamp", "etag", "uniqueId", "oauth2ClientId", "targetId"}
IP = re.compile(r"\b\d{1,3}(\.\d{1,3}){3}\b(?!/)")


def _norm(value: Any, subs: list[tuple[re.Pattern[str], str]]) -> Any:
    if isinstance(value, dict):
        return {
            _norm(k, subs): _norm(v, subs)
            for k, v in sorted(value.items())
            if k not in VOLATILE_KEYS and "ingerprint" not in k and not k.endswith("Timestamp")
        }
    if isinstance(value, list):
        items = [_norm(v, subs) for v in value]
        return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))
    if isinstance(value, str):
        for pattern, repl in subs:
            value = pattern.sub(repl, value)
        return value
    return value


def snapshot(gcp: Gcp, env_file: Path, job_id: str) -> dict[str, Any]:
    """Everything of the job in the project, with run-specific names and values replaced."""
    spec = load_spec(env_file)
    assert spec.load_balancer is not None
    domain = spec.load_balancer.domain
    res: dict[str, Any] = job_resources(gcp, job_id)
    res["records"] = records(gcp, domain)
    emails = [a["email"] for a in res["service_accounts"]]
    policy = gcp.api("cloudresourcemanager", "v1").projects().getIamPolicy(resource=gcp.project, body={}).execute()
    res["bindings"] = sorted(
        b["role"] for b in policy.get("bindings", []) for m in b.get("members", []) if m.split(":", 1)[-1] in emails
    )
    subs = [
        (re.compile(re.escape(job_id)), "JOB"),
        (re.compile(re.escape(job_id.lower())), "job"),
        (re.compile(re.escape(spec.name)), "ENV"),
        (re.compile(r"ENV-(\w+)-[a-z0-9]{4}\b"), r"ENV-\1-XXXX"),  # a MIG's random instance suffix
        (re.compile(r"cert-[0-9a-f]{8}"), "cert-HASH"),
        (re.compile(r"vmp-ENV-[0-9a-f]{6}"), "vmp-ENV-HASH"),
        (IP, "IP"),
        (re.compile(r'"id": ?"[0-9a-f]{32}"'), '"id":"MAILBOX"'),  # an exec request's own id
    ]
    return {k: _norm(v, subs) for k, v in res.items()}


def remaining(snap: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in snap.items() if v}


@pytest.fixture(scope="session")
def sandbox(sweep_sandbox: Sandbox) -> Sandbox:
    """Every case runs under tests/fixtures/faults/sweep.jsonc: killed runs resume through not-yet-visible
    ids, throttling, as on the real cloud."""
    return sweep_sandbox


@pytest.fixture(scope="module")
def gcp(sandbox: Sandbox) -> Gcp:
    return Gcp(sandbox.gcp_endpoint)


@pytest.fixture(scope="module")
def reference(sandbox: Sandbox, gcp: Gcp, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    tmp = tmp_path_factory.mktemp("gsweep-ref")
    cli = Cli(home=tmp / "home", sandbox_port=sandbox.port, gcp_port=sandbox.gcp_port)
    env_file = write_env(tmp, "gsw-ref", example="gcp-web.jsonc")
    applied = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert applied["status"] == "succeeded", applied["error"]
    snap = snapshot(gcp, env_file, applied["id"])
    destroyed = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert destroyed["status"] == "deleted", destroyed["error"]
    assert not remaining(snapshot(gcp, env_file, applied["id"]))
    met = sandbox.fault_tally()
    for fault in ("gcp.throttle", "gcp.visibility"):
        assert met[fault] > 0, f"the sweep's profile never injected {fault}: {dict(met)}"
    return Reference(applied, snap, destroyed)


@pytest.mark.sandbox
@pytest.mark.slow
def test_the_gcp_sweep_covers_every_mutating_call(reference: Reference) -> None:
    assert_cases(reference.applied, reference.destroyed, _case, APPLY_OPS, DESTROY_OPS)


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize(
    ("index", "apply_op", "destroy_op"), paired_params(APPLY_OPS + LATER_CALLS, DESTROY_OPS, XFAIL)
)
def test_gcp_apply_then_destroy_killed_at_each_call_converge(
    cli: Cli, gcp: Gcp, reference: Reference, tmp_path: Path, index: int, apply_op: str | None, destroy_op: str | None
) -> None:
    env_file = write_env(tmp_path, f"gsw-{index:02d}", example="gcp-web.jsonc")
    snap = partial(snapshot, gcp, env_file)
    killed_apply_then_killed_destroy(
        cli, env_file, apply_op, destroy_op, snap, reference.snapshot, lambda j: remaining(snap(j))
    )
