"""Google Cloud in the driver contract: vmplane's GCP sandbox, examples/gcp-web.jsonc (a MIG behind the global
HTTPS load balancer) for the crash sweep under tests/fixtures/faults/sweep.jsonc, and one repair scenario on
the session sandbox: gcp-fixed drifted as tests/integration/gcp_drift_cases.py does it (google-cloud-compute).
The snapshot is everything of the job in the project, normalised: names, ids, addresses and fingerprints
differ between runs, shapes must not. The hook names calls `api.collection.verb[#N]`."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from tests.contract.adapter import RepairEnv, SandboxAdapter
from tests.integration.gcp_drift_cases import break_fixed
from tests.integration.gcp_inventory import Gcp, job_resources, records

from vmplane.envspec.load import load_spec

MUTATING = re.compile(
    r"\.(insert|delete|patch|update|create|set[A-Z]\w*|resize|addInstances|removeInstances|recreateInstances"
    r"|deleteInstances|setIamPolicy)$"
)
# The repair adds the power verbs (an apply never starts a VM).
REPAIR_MUTATING = re.compile(f"{MUTATING.pattern}|\\.(start|stop)$")

# Values that differ between two clean runs of the same file under another name.
VOLATILE_KEYS = {"id", "creationTimestamp", "etag", "uniqueId", "oauth2ClientId", "targetId"}
IP = re.compile(r"\b\d{1,3}(\.\d{1,3}){3}\b(?!/)")


@cache
def gcp(endpoint: str) -> Gcp:
    """The official clients for one sandbox endpoint, built once per process (a client is slow to make)."""
    return Gcp(endpoint)


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


class GcpAdapter(SandboxAdapter):
    name = "gcp"
    marks = (pytest.mark.sandbox, pytest.mark.slow)
    EXAMPLE = "gcp-web.jsonc"
    REPAIR_EXAMPLES = {"fixed": "gcp-fixed.jsonc"}
    FAULTS = ("gcp.throttle", "gcp.visibility")
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
    REPAIR_OPS = {
        "fixed": [
            "compute.firewalls.delete",  # stepRepairDrift: the rule someone added
            "compute.firewalls.insert",  # stepCreateNetwork: vmplane's rule again
            "compute.instances.insert",  # stepCreateVMs: the deleted VM, under its name
            "compute.instances.setLabels",  # stepRepairDrift: the labels (retag)
            "compute.instances.setMetadata",  # stepFinalize: the runtime settings pushed to the VM made again
            "compute.instances.start",  # stepRepairDrift: the stopped VM
            "compute.regionInstanceTemplates.insert",  # stepCreateLaunchTemplate: the template, under its name
            "compute.routers.insert",  # stepCreateNetwork: the router with its NAT
        ],
    }

    def case(self, op: str) -> str | None:
        return op if MUTATING.search(op) else None

    def snapshot(self, emu: Any, env_file: Path, job_id: str) -> dict[str, Any]:
        """Everything of the job in the project, with run-specific names and values replaced."""
        client = gcp(emu.gcp_endpoint)
        spec = load_spec(env_file)
        assert spec.load_balancer is not None
        res: dict[str, Any] = job_resources(client, job_id)
        res["records"] = records(client, spec.load_balancer.domain)
        emails = [a["email"] for a in res["service_accounts"]]
        policy = (
            client.api("cloudresourcemanager", "v1").projects().getIamPolicy(resource=client.project, body={}).execute()
        )
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

    def make_drift(self, scenario: str, env: RepairEnv) -> None:
        break_fixed(gcp(env.emu.gcp_endpoint), load_spec(env.env_file), env.job_id)

    def repair_ops(self, job: dict[str, Any]) -> list[str]:
        op = job["config"]["operation"]
        assert op["kind"] == "repair" and op["steps"][1]["name"] == "stepRepairDrift", op["kind"]
        return sorted({call for s in op["steps"] for call in s["apiCalls"] if REPAIR_MUTATING.search(call)})
