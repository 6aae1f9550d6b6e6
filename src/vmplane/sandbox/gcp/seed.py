"""What a sandbox project holds from the start, like a real project that owns a domain: a public Cloud
DNS zone `sandbox-vmplane-test` for `sandbox.vmplane.test.` (the AWS sandbox seeds the same domain in
Route53), and an IAM policy with one human owner and the Compute Engine Service Agent in its default role
(Google binds it when the Compute Engine API is enabled; it is Google's account, not the project's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vmplane.sandbox.gcp.store import Project, State

SANDBOX_ZONE = "sandbox-vmplane-test"
SANDBOX_DOMAIN = "sandbox.vmplane.test."
NAME_SERVERS = [f"ns-cloud-a{i}.googledomains.com." for i in range(1, 5)]
OWNER = "user:sandbox@vmplane.test"


def seed_project(state: State, project: Project) -> None:
    from vmplane.sandbox.gcp.store import now

    project.dns_zones[SANDBOX_ZONE] = {
        "kind": "dns#managedZone",
        "name": SANDBOX_ZONE,
        "dnsName": SANDBOX_DOMAIN,
        "description": "the sandbox project's domain",
        "id": state.new_id(),
        "nameServers": NAME_SERVERS,
        "creationTime": now(),
        "visibility": "public",
    }
    soa = f"{NAME_SERVERS[0]} cloud-dns-hostmaster.google.com. 1 21600 3600 259200 300"
    project.dns_records[SANDBOX_ZONE] = {
        (SANDBOX_DOMAIN, "NS"): _rrset(SANDBOX_DOMAIN, "NS", 21600, NAME_SERVERS),
        (SANDBOX_DOMAIN, "SOA"): _rrset(SANDBOX_DOMAIN, "SOA", 21600, [soa]),
    }
    project.dns_changes[SANDBOX_ZONE] = {}
    project.policy = {
        "version": 1,
        "etag": "BwYAAAAAAAA=",
        "bindings": [
            {"role": "roles/compute.serviceAgent", "members": [f"serviceAccount:{compute_agent(project.number)}"]},
            {"role": "roles/owner", "members": [OWNER]},
        ],
    }


def compute_agent(project_number: str) -> str:
    """The project's Compute Engine Service Agent (Google-managed: it exists without being created)."""
    return f"service-{project_number}@compute-system.iam.gserviceaccount.com"


def _rrset(name: str, kind: str, ttl: int, rrdatas: list[str]) -> dict[str, object]:
    return {"kind": "dns#resourceRecordSet", "name": name, "type": kind, "ttl": ttl, "rrdatas": rrdatas}
