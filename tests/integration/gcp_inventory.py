"""What the GCP sandbox holds for one environment, read with the official clients (google-cloud-compute,
google-api-python-client), independent of vmplane's own records and code.

A resource is the job's when its description carries the job id (vmplane's ownership record on GCP,
where most resources take no labels) or, for those with labels, its `zop_job_id` label.
"""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import inspection_client_info, inspection_http

PROJECT = "vmplane-sandbox"
REGION = "us-central1"

GLOBAL = {
    "networks": "Networks",
    "firewalls": "Firewalls",
    "instance_templates": "InstanceTemplates",
    "health_checks": "HealthChecks",
    "backend_services": "BackendServices",
    "url_maps": "UrlMaps",
    "ssl_certificates": "SslCertificates",
    "https_proxies": "TargetHttpsProxies",
    "http_proxies": "TargetHttpProxies",
    "addresses": "GlobalAddresses",
    "forwarding_rules": "GlobalForwardingRules",
}
REGIONAL = {
    "subnetworks": "Subnetworks",
    "routers": "Routers",
    "region_templates": "RegionInstanceTemplates",
    "migs": "RegionInstanceGroupManagers",
    "autoscalers": "RegionAutoscalers",
    "resource_policies": "ResourcePolicies",
}
ZONAL = {"instances": "Instances", "instance_groups": "InstanceGroups"}


class Gcp:
    """Official clients against the sandbox's Google Cloud endpoint."""

    def __init__(self, endpoint: str, project: str = PROJECT) -> None:
        self.endpoint, self.project = endpoint, project
        self._clients: dict[str, Any] = {}

    def compute(self, name: str) -> Any:
        if name not in self._clients:
            from google.api_core.client_options import ClientOptions
            from google.auth.credentials import AnonymousCredentials
            from google.cloud import compute_v1

            cls = getattr(compute_v1, f"{name}Client")
            self._clients[name] = cls(
                credentials=AnonymousCredentials(),
                client_options=ClientOptions(api_endpoint=self.endpoint),
                transport="rest",
                client_info=inspection_client_info(),  # never faulted under a fault profile
            )
        return self._clients[name]

    def api(self, name: str, version: str) -> Any:
        key = f"{name}.{version}"
        if key not in self._clients:
            from google.auth.credentials import AnonymousCredentials
            from googleapiclient import discovery

            self._clients[key] = discovery.build(
                name,
                version,
                http=inspection_http(AnonymousCredentials()),
                static_discovery=True,
                cache_discovery=False,
                client_options={"api_endpoint": self.endpoint},
            )
        return self._clients[key]

    def zones(self, region: str = REGION) -> list[str]:
        return sorted(z.name for z in self.compute("Zones").list(project=self.project) if z.region.endswith(region))

    def dicts(self, client: str, **scope: str) -> list[dict[str, Any]]:
        from google.protobuf.json_format import MessageToDict

        return [MessageToDict(type(x).pb(x)) for x in self.compute(client).list(project=self.project, **scope)]


def owned(resource: dict[str, Any], job_id: str) -> bool:
    try:
        tags = json.loads(resource.get("description") or "")
    except ValueError:
        tags = {}
    labels = resource.get("labels") or resource.get("properties", {}).get("labels") or {}
    return (isinstance(tags, dict) and tags.get("zop:jobId") == job_id) or labels.get("zop_job_id") == job_id.lower()


def job_resources(gcp: Gcp, job_id: str, region: str = REGION) -> dict[str, list[dict[str, Any]]]:
    """Every compute resource of the job by kind, plus its service accounts (by description)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for kind, client in GLOBAL.items():
        out[kind] = [r for r in gcp.dicts(client) if owned(r, job_id)]
    for kind, client in REGIONAL.items():
        out[kind] = [r for r in gcp.dicts(client, region=region) if owned(r, job_id)]
    for kind, client in ZONAL.items():
        out[kind] = [r for z in gcp.zones(region) for r in gcp.dicts(client, zone=z) if owned(r, job_id)]
    accounts = gcp.api("iam", "v1").projects().serviceAccounts().list(name=f"projects/{gcp.project}").execute()
    out["service_accounts"] = [a for a in accounts.get("accounts", []) if owned(a, job_id)]
    return out


def records(gcp: Gcp, domain: str, zone: str = "sandbox-vmplane-test") -> list[dict[str, Any]]:
    rrsets = gcp.api("dns", "v1").resourceRecordSets().list(project=gcp.project, managedZone=zone).execute()
    return [r for r in rrsets.get("rrsets", []) if r["name"].rstrip(".") == domain]


def ingress(firewalls: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(port, source range) pairs the rules allow."""
    out = set()
    for fw in firewalls:
        if fw.get("direction", "INGRESS") != "INGRESS":
            continue
        for allowed in fw.get("allowed", []):
            for port in allowed.get("ports", ["all"]):
                out |= {(port, src) for src in fw.get("sourceRanges", [])}
    return out
