"""Cloud DNS changes, IAM service accounts and project policies through googleapiclient, the catalogue,
and the sandbox's status and reset."""

from __future__ import annotations

import pytest
from googleapiclient.errors import HttpError
from tests.sandbox.conftest import Gcp

ZONE = "sandbox-vmplane-test"


def test_dns_changes(gcp: Gcp) -> None:
    dns = gcp.sandbox.gcp_discovery("dns")
    p = gcp.project
    a = {"name": "web.sandbox.vmplane.test.", "type": "A", "ttl": 300, "rrdatas": ["203.0.113.7"]}
    change = dns.changes().create(project=p, managedZone=ZONE, body={"additions": [a]}).execute()
    assert change["status"] == "pending"
    assert dns.changes().get(project=p, managedZone=ZONE, changeId=change["id"]).execute()["status"] == "done"
    with pytest.raises(HttpError) as info:
        dns.changes().create(project=p, managedZone=ZONE, body={"additions": [a]}).execute()
    assert info.value.resp.status == 409
    with pytest.raises(HttpError) as info:
        dns.changes().create(project=p, managedZone=ZONE, body={"deletions": [{**a, "rrdatas": ["1.2.3.4"]}]}).execute()
    assert info.value.resp.status == 412
    with pytest.raises(HttpError) as info:
        dns.changes().create(
            project=p, managedZone=ZONE, body={"additions": [{**a, "name": "web.example.com."}]}
        ).execute()
    assert info.value.resp.status == 400
    rrsets = dns.resourceRecordSets().list(project=p, managedZone=ZONE, name=a["name"]).execute()["rrsets"]
    assert rrsets == [{**a, "kind": "dns#resourceRecordSet"}]
    dns.changes().create(project=p, managedZone=ZONE, body={"deletions": [a]}).execute()
    types = {r["type"] for r in dns.resourceRecordSets().list(project=p, managedZone=ZONE).execute()["rrsets"]}
    assert types == {"NS", "SOA"}
    with pytest.raises(HttpError) as info:
        dns.managedZones().get(project=p, managedZone="other").execute()
    assert info.value.resp.status == 404


def test_service_accounts_and_policy(gcp: Gcp) -> None:
    iam = gcp.sandbox.gcp_discovery("iam").projects().serviceAccounts()
    crm = gcp.sandbox.gcp_discovery("cloudresourcemanager").projects()
    p = gcp.project
    for bad in ("ab", "Upper-case-1", "x" * 31):
        with pytest.raises(HttpError) as info:
            iam.create(name=f"projects/{p}", body={"accountId": bad}).execute()
        assert info.value.resp.status == 400
    account = iam.create(name=f"projects/{p}", body={"accountId": "vmp-vm"}).execute()
    email = account["email"]
    with pytest.raises(HttpError) as info:
        iam.create(name=f"projects/{p}", body={"accountId": "vmp-vm"}).execute()
    assert info.value.resp.status == 409
    assert iam.get(name=f"projects/-/serviceAccounts/{email}").execute()["uniqueId"] == account["uniqueId"]
    assert [a["email"] for a in iam.list(name=f"projects/{p}").execute()["accounts"]] == [email]

    policy = crm.getIamPolicy(resource=p, body={}).execute()
    # Only Google's Compute Engine Service Agent, as a fresh project has it; none of the project's accounts.
    accounts = [m for b in policy["bindings"] for m in b["members"] if m.startswith("serviceAccount:")]
    assert accounts == [
        f"serviceAccount:service-{crm.get(projectId=p).execute()['projectNumber']}@compute-system.iam.gserviceaccount.com"
    ]
    ghost = {"role": "roles/logging.logWriter", "members": [f"serviceAccount:ghost-1@{p}.iam.gserviceaccount.com"]}
    with pytest.raises(HttpError) as info:
        crm.setIamPolicy(resource=p, body={"policy": {**policy, "bindings": [*policy["bindings"], ghost]}}).execute()
    assert info.value.resp.status == 400
    binding = {"role": "roles/logging.logWriter", "members": [f"serviceAccount:{email}"]}
    updated = crm.setIamPolicy(
        resource=p, body={"policy": {**policy, "bindings": [*policy["bindings"], binding]}}
    ).execute()
    assert updated["etag"] != policy["etag"]
    with pytest.raises(HttpError) as info:  # the etag read before the update is stale now
        crm.setIamPolicy(resource=p, body={"policy": policy}).execute()
    assert info.value.resp.status == 409
    iam.delete(name=f"projects/{p}/serviceAccounts/{email}").execute()
    members = {m for b in crm.getIamPolicy(resource=p, body={}).execute()["bindings"] for m in b["members"]}
    assert f"deleted:serviceAccount:{email}?uid={account['uniqueId']}" in members
    assert crm.get(projectId=p).execute()["lifecycleState"] == "ACTIVE"


def test_catalogue(gcp: Gcp) -> None:
    p = gcp.project
    zones = {z.name for z in gcp.zones.list(project=p)}
    assert {"us-central1-a", "us-central1-f", "us-east1-b", "europe-west1-d"} <= zones
    assert gcp.regions.get(project=p, region="europe-west1").status == "UP"
    assert gcp.machine_types.get(project=p, zone="us-east1-c", machine_type="e2-standard-2").guest_cpus == 2
    for project, family in (
        ("debian-cloud", "debian-12"),
        ("debian-cloud", "debian-11"),
        ("ubuntu-os-cloud", "ubuntu-2404-lts-amd64"),
    ):
        assert gcp.images.get_from_family(project=project, family=family).family == family
    assert gcp.projects.get(project=p).name == p


def test_status_and_state(gcp: Gcp) -> None:
    status = gcp.sandbox.gcp_control("status", method="GET")
    assert set(status["revisions"]) == {"compute", "dns", "iam", "cloudresourcemanager", "storage", "secretmanager"}
    state = gcp.sandbox.gcp_control(f"state?project={gcp.project}", method="GET")
    assert state["project"] == gcp.project and state["guestMode"] in ("auto", "off")
