"""Secret Manager v1 on the GCP sandbox: through googleapiclient as the driver builds it, and through plain
HTTP as a VM's fetcher reads a secret; every served route and answer checked against Google's own
discovery document."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from google.auth.credentials import AnonymousCredentials
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError
from tests.helpers import gcp_sandbox_alone, inspection_http

from vmplane.sandbox.gcp.discovery import documents_dir
from vmplane.sandbox.gcp.storage_media import crc32c

VALUE = b"hunter2-sandbox-only"
AUTO = {"replication": {"automatic": {}}}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    yield from gcp_sandbox_alone()


@pytest.fixture
def project() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def client(endpoint: str, api: str = "secretmanager") -> Any:
    return build(
        api,
        "v1",
        http=inspection_http(AnonymousCredentials()),  # type: ignore[no-untyped-call]
        static_discovery=True,
        client_options={"api_endpoint": endpoint},
    )


def raw(endpoint: str, http: str, path: str, body: Any = None, token: str = "") -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        endpoint + path, data=json.dumps(body).encode() if body is not None else None, method=http
    )
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def status_of(call: Any) -> tuple[int, str]:
    with pytest.raises(HttpError) as info:
        call.execute()
    return info.value.resp.status, json.loads(info.value.content)["error"]["status"]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_secrets_create_get_list_patch_delete(endpoint: str, project: str) -> None:
    secrets = client(endpoint).projects().secrets()
    parent = f"projects/{project}"
    made = secrets.create(parent=parent, secretId="db-password", body={**AUTO, "labels": {"env": "dev"}}).execute()
    number = made["name"].split("/")[1]
    assert made["name"] == f"projects/{number}/secrets/db-password" and number.isdigit()  # Google names by number
    assert made["labels"] == {"env": "dev"} and made["replication"] == {"automatic": {}} and made["createTime"]
    assert status_of(secrets.create(parent=parent, secretId="db-password", body=AUTO)) == (409, "ALREADY_EXISTS")
    for bad in ("has space", "x" * 256, "dot.ted", ""):
        assert status_of(secrets.create(parent=parent, secretId=bad, body=AUTO)) == (400, "INVALID_ARGUMENT"), bad
    assert status_of(secrets.create(parent=parent, secretId="norep", body={})) == (400, "INVALID_ARGUMENT")
    both = {"replication": {"automatic": {}, "userManaged": {"replicas": [{"location": "us-east1"}]}}}
    assert status_of(secrets.create(parent=parent, secretId="both", body=both)) == (400, "INVALID_ARGUMENT")
    user = {"replication": {"userManaged": {"replicas": [{"location": "us-east1"}, {"location": "europe-west1"}]}}}
    assert (
        secrets.create(parent=parent, secretId="api_key-2", body=user).execute()["replication"] == user["replication"]
    )

    # the project by number reads the same secret; an unknown one is Google's 404
    assert secrets.get(name=f"projects/{number}/secrets/db-password").execute() == made
    assert status_of(secrets.get(name=f"{parent}/secrets/nope")) == (404, "NOT_FOUND")

    # pages: the sandbox's page-size ceiling drives the client's pager past page one
    secrets.create(parent=parent, secretId="third", body={**AUTO, "labels": {"env": "prod"}}).execute()
    assert raw(endpoint, "POST", "/_sandbox/page-size", {"size": 2})[0] == 200
    try:
        first = secrets.list(parent=parent).execute()
        assert len(first["secrets"]) == 2 and first["totalSize"] == 3 and first["nextPageToken"]
        rest = secrets.list(parent=parent, pageToken=first["nextPageToken"]).execute()
        assert [s["name"].rsplit("/", 1)[1] for s in first["secrets"] + rest["secrets"]] == [
            "db-password",
            "api_key-2",
            "third",
        ]
        assert "nextPageToken" not in rest
    finally:
        raw(endpoint, "POST", "/_sandbox/page-size", {"size": 0})
    assert [s["name"] for s in secrets.list(parent=parent, filter="labels.env=prod").execute()["secrets"]] == [
        f"projects/{number}/secrets/third"
    ]

    name = made["name"]
    patched = secrets.patch(name=name, updateMask="labels", body={"labels": {"env": "prod"}}).execute()
    assert patched["labels"] == {"env": "prod"} and patched["etag"] != made["etag"]
    assert status_of(secrets.patch(name=name, updateMask="replication", body=user)) == (400, "INVALID_ARGUMENT")
    assert status_of(secrets.patch(name=name, body={"labels": {}})) == (400, "INVALID_ARGUMENT")  # no mask
    assert status_of(secrets.delete(name=name, etag=made["etag"])) == (409, "ABORTED")  # stale etag
    assert secrets.delete(name=name, etag=patched["etag"]).execute() == {}
    assert status_of(secrets.get(name=name)) == (404, "NOT_FOUND")
    assert status_of(secrets.delete(name=name)) == (404, "NOT_FOUND")


def test_versions_add_access_disable_enable_destroy(endpoint: str, project: str) -> None:
    secrets = client(endpoint).projects().secrets()
    versions = secrets.versions()
    name = secrets.create(parent=f"projects/{project}", secretId="token", body=AUTO).execute()["name"]
    assert status_of(versions.access(name=f"{name}/versions/latest")) == (404, "NOT_FOUND")  # no versions yet

    checked = {"payload": {"data": b64(VALUE), "dataCrc32c": str(crc32c(VALUE))}}
    one = secrets.addVersion(parent=name, body=checked).execute()
    assert one["name"] == f"{name}/versions/1" and one["state"] == "ENABLED" and one["clientSpecifiedPayloadChecksum"]
    wrong = {"payload": {"data": b64(VALUE), "dataCrc32c": str(crc32c(VALUE) ^ 1)}}
    assert status_of(secrets.addVersion(parent=name, body=wrong)) == (400, "INVALID_ARGUMENT")
    big = {"payload": {"data": b64(b"x" * (64 * 1024 + 1))}}
    assert status_of(secrets.addVersion(parent=name, body=big)) == (400, "INVALID_ARGUMENT")
    edge = secrets.addVersion(parent=name, body={"payload": {"data": b64(b"y" * 64 * 1024)}}).execute()
    assert edge["name"].endswith("/versions/2") and not edge["clientSpecifiedPayloadChecksum"]  # 64 KiB exactly

    got = versions.access(name=f"{name}/versions/1").execute()
    assert base64.b64decode(got["payload"]["data"]) == VALUE and got["name"] == f"{name}/versions/1"
    assert int(got["payload"]["dataCrc32c"]) == crc32c(VALUE)
    assert versions.access(name=f"{name}/versions/latest").execute()["name"] == f"{name}/versions/2"
    assert versions.get(name=f"{name}/versions/latest").execute()["name"] == f"{name}/versions/2"
    assert status_of(versions.get(name=f"{name}/versions/3")) == (404, "NOT_FOUND")

    # disabled: not readable, by number or as `latest` (Google's latest is the newest version, whatever its state)
    assert versions.disable(name=f"{name}/versions/2", body={}).execute()["state"] == "DISABLED"
    assert status_of(versions.access(name=f"{name}/versions/2")) == (400, "FAILED_PRECONDITION")
    assert status_of(versions.access(name=f"{name}/versions/latest")) == (400, "FAILED_PRECONDITION")
    listed = versions.list(parent=name).execute()
    assert [v["name"][-1] for v in listed["versions"]] == ["2", "1"] and listed["totalSize"] == 2  # newest first
    enabled = versions.list(parent=name, filter="state:ENABLED").execute()["versions"]
    assert [v["name"] for v in enabled] == [f"{name}/versions/1"]
    stale = versions.get(name=f"{name}/versions/2").execute()["etag"]
    assert versions.enable(name=f"{name}/versions/2", body={"etag": stale}).execute()["state"] == "ENABLED"
    assert status_of(versions.disable(name=f"{name}/versions/2", body={"etag": stale})) == (409, "ABORTED")
    assert versions.access(name=f"{name}/versions/latest").execute()["name"] == f"{name}/versions/2"

    # destroyed: the payload is gone and the state is final
    gone = versions.destroy(name=f"{name}/versions/1", body={}).execute()
    assert gone["state"] == "DESTROYED" and gone["destroyTime"]
    assert status_of(versions.access(name=f"{name}/versions/1")) == (400, "FAILED_PRECONDITION")
    assert status_of(versions.enable(name=f"{name}/versions/1", body={})) == (400, "FAILED_PRECONDITION")
    assert status_of(versions.destroy(name=f"{name}/versions/1", body={})) == (400, "FAILED_PRECONDITION")

    # an alias names a version as its number does
    secrets.patch(name=name, updateMask="versionAliases", body={"versionAliases": {"current": "2"}}).execute()
    assert versions.get(name=f"{name}/versions/current").execute()["name"] == f"{name}/versions/2"
    aliases = {"versionAliases": {"current": "9"}}
    assert status_of(secrets.patch(name=name, updateMask="versionAliases", body=aliases)) == (400, "INVALID_ARGUMENT")

    # the sandbox's state dump shows metadata, never a payload
    state = raw(endpoint, "GET", f"/_sandbox/state?project={project}")[1]
    assert [v["state"] for v in state["secrets"]["token"]["versions"]] == ["DESTROYED", "ENABLED"]
    assert b64(VALUE) not in json.dumps(state) and VALUE.decode() not in json.dumps(state)


def test_secret_iam_policy(endpoint: str, project: str) -> None:
    secrets = client(endpoint).projects().secrets()
    accounts = client(endpoint, "iam").projects().serviceAccounts()
    name = secrets.create(parent=f"projects/{project}", secretId="cert", body=AUTO).execute()["name"]
    email = accounts.create(name=f"projects/{project}", body={"accountId": "vmp-reader"}).execute()["email"]
    empty = secrets.getIamPolicy(resource=name).execute()
    assert empty == {"etag": "ACAB"}  # Google's answer for a policy never set
    binding = {"role": "roles/secretmanager.secretAccessor", "members": [f"serviceAccount:{email}"]}
    policy = {"policy": {"bindings": [binding], "etag": empty["etag"]}}
    stored = secrets.setIamPolicy(resource=name, body=policy).execute()
    assert stored["bindings"] == [binding] and stored["etag"] != empty["etag"]
    assert secrets.getIamPolicy(resource=name).execute() == stored
    assert status_of(secrets.setIamPolicy(resource=name, body=policy)) == (409, "ABORTED")  # stale etag
    for bad in (
        {"role": "roles/compute.admin", "members": [f"serviceAccount:{email}"]},  # not a role a secret takes
        {"role": "roles/secretmanager.secretAccessor", "members": ["serviceAccount:ghost@x.iam.gserviceaccount.com"]},
        {"role": "roles/secretmanager.secretAccessor", "members": ["nobody"]},
    ):
        assert status_of(secrets.setIamPolicy(resource=name, body={"policy": {"bindings": [bad]}})) == (
            400,
            "INVALID_ARGUMENT",
        ), bad
    asked = {"permissions": ["secretmanager.versions.access", "compute.instances.get"]}
    assert secrets.testIamPermissions(resource=name, body=asked).execute() == {
        "permissions": ["secretmanager.versions.access"]
    }
    # deleting the account leaves Google's deleted: member on the secret's policy too
    accounts.delete(name=f"projects/{project}/serviceAccounts/{email}").execute()
    members = secrets.getIamPolicy(resource=name).execute()["bindings"][0]["members"]
    assert members[0].startswith(f"deleted:serviceAccount:{email}?uid=")
    assert status_of(secrets.getIamPolicy(resource=f"projects/{project}/secrets/nope")) == (404, "NOT_FOUND")


def test_vm_reads_with_plain_http_and_is_recorded(endpoint: str, project: str) -> None:
    """The VM's fetcher: GET .../versions/V:access with its bearer token; only a service account with an
    accessor binding reads, and the sandbox records who read which version."""
    secrets = client(endpoint).projects().secrets()
    accounts = client(endpoint, "iam").projects().serviceAccounts()
    email = accounts.create(name=f"projects/{project}", body={"accountId": "vmp-vm-1"}).execute()["email"]
    name = secrets.create(parent=f"projects/{project}", secretId="db", body=AUTO).execute()["name"]
    secrets.addVersion(parent=name, body={"payload": {"data": b64(VALUE)}}).execute()
    path = f"/v1/projects/{project}/secrets/db/versions/latest:access"
    vm = f"sandbox-sa:{email}"
    status, answer = raw(endpoint, "GET", path, token=vm)
    assert status == 403 and answer["error"]["status"] == "PERMISSION_DENIED"
    test = f"/v1/projects/{project}/secrets/db:testIamPermissions"
    asked = {"permissions": ["secretmanager.versions.access", "secretmanager.secrets.delete"]}
    assert raw(endpoint, "POST", test, asked, token=vm) == (200, {})
    binding = {"role": "roles/secretmanager.secretAccessor", "members": [f"serviceAccount:{email}"]}
    secrets.setIamPolicy(resource=name, body={"policy": {"bindings": [binding]}}).execute()
    assert raw(endpoint, "POST", test, asked, token=vm) == (200, {"permissions": ["secretmanager.versions.access"]})
    status, answer = raw(endpoint, "GET", path, token=vm)
    assert status == 200 and base64.b64decode(answer["payload"]["data"]) == VALUE
    assert int(answer["payload"]["dataCrc32c"]) == crc32c(VALUE)
    other = "ya29.an-opaque-token"
    assert raw(endpoint, "GET", path, token=other)[0] == 200  # any other caller is the project's owner
    accesses = raw(endpoint, "GET", f"/_sandbox/secret-accesses?project={project}")[1]["accesses"]
    assert [(a["caller"], a["outcome"]) for a in accesses] == [
        (f"serviceAccount:{email}", "PERMISSION_DENIED"),
        (f"serviceAccount:{email}", "OK"),
        (accesses[2]["caller"], "OK"),
    ]
    assert accesses[1]["version"] == f"{name}/versions/1"
    assert accesses[2]["caller"].startswith("token:") and other not in json.dumps(accesses)  # a digest, not the token
    assert b64(VALUE) not in json.dumps(accesses)


def _document() -> dict[str, Any]:
    return dict(json.loads((documents_dir() / "secretmanager.v1.json").read_text()))


def _methods(resources: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for res in resources.values():
        yield from res.get("methods", {}).values()
        yield from _methods(res.get("resources", {}))


def _fields_in_schema(schemas: dict[str, Any], ref: str, value: Any, where: str) -> list[str]:
    """Every field of `value` the document's schema `ref` does not define (the test's own walk)."""
    spec = schemas[ref]
    wrong: list[str] = []
    for key, item in value.items() if isinstance(value, dict) else ():
        prop = spec.get("properties", {}).get(key)
        if prop is None:
            if "additionalProperties" not in spec:
                wrong.append(f"{where}.{key}")
            continue
        inner = prop.get("items", prop) if prop.get("type") == "array" else prop
        for sub in item if prop.get("type") == "array" else [item]:
            if "$ref" in inner:
                wrong += _fields_in_schema(schemas, inner["$ref"], sub, f"{where}.{key}")
    return wrong


def test_served_routes_and_answers_are_the_discovery_documents(endpoint: str, project: str) -> None:
    from vmplane.sandbox.gcp.compute import HANDLERS

    doc = _document()
    methods = {m["id"]: m for m in _methods(doc["resources"])}
    served = sorted(k for k in HANDLERS if k.startswith("secretmanager."))
    assert len(served) == 15, served
    assert not [m for m in served if m not in methods]  # every served method is in Google's document
    P, S = f"/v1/projects/{project}", f"/v1/projects/{project}/secrets/s1"
    calls = [  # (method id, HTTP, path, body): each answer must fit that method's response schema
        ("secretmanager.projects.secrets.create", "POST", f"{P}/secrets?secretId=s1", {**AUTO, "labels": {"a": "b"}}),
        ("secretmanager.projects.secrets.get", "GET", S, None),
        ("secretmanager.projects.secrets.list", "GET", f"{P}/secrets", None),
        ("secretmanager.projects.secrets.patch", "PATCH", f"{S}?updateMask=labels", {"labels": {"a": "c"}}),
        ("secretmanager.projects.secrets.addVersion", "POST", f"{S}:addVersion", {"payload": {"data": b64(VALUE)}}),
        ("secretmanager.projects.secrets.versions.get", "GET", f"{S}/versions/1", None),
        ("secretmanager.projects.secrets.versions.list", "GET", f"{S}/versions", None),
        ("secretmanager.projects.secrets.versions.access", "GET", f"{S}/versions/latest:access", None),
        ("secretmanager.projects.secrets.versions.disable", "POST", f"{S}/versions/1:disable", {}),
        ("secretmanager.projects.secrets.versions.enable", "POST", f"{S}/versions/1:enable", {}),
        ("secretmanager.projects.secrets.versions.destroy", "POST", f"{S}/versions/1:destroy", {}),
        ("secretmanager.projects.secrets.getIamPolicy", "GET", f"{S}:getIamPolicy", None),
        ("secretmanager.projects.secrets.setIamPolicy", "POST", f"{S}:setIamPolicy", {"policy": {"bindings": []}}),
        (
            "secretmanager.projects.secrets.testIamPermissions",
            "POST",
            f"{S}:testIamPermissions",
            {"permissions": ["secretmanager.secrets.get"]},
        ),
        ("secretmanager.projects.secrets.delete", "DELETE", S, None),
    ]
    root = "/" + doc["servicePath"]
    for method_id, http, path, body in calls:
        method = methods[method_id]
        assert method["httpMethod"] == http, method_id
        flat = method["flatPath"].replace("{projectsId}", project).replace("{secretsId}", "s1")
        assert path.split("?")[0] == root + flat.replace("{versionsId}", path.split("/versions/")[-1].split(":")[0])
        status, answer = raw(endpoint, http, path, body)
        assert status == 200, (method_id, answer)
        assert not _fields_in_schema(doc["schemas"], method["response"]["$ref"], answer, "response"), (
            method_id,
            answer,
        )
    assert {c[0] for c in calls} == set(served)


def test_vm_token_from_the_metadata_stand_in_reads_with_its_binding(endpoint: str, project: str) -> None:
    """A fetcher playing instance vm1 takes its token from the sandbox's metadata stand-in (as from the
    metadata server) and reads the secret as the instance's service account."""
    from vmplane.sandbox.gcp.rules.examples import ZONE, P, net, sub, vm_body

    accounts = client(endpoint, "iam").projects().serviceAccounts()
    email = accounts.create(name=f"projects/{project}", body={"accountId": "vmp-web-1"}).execute()["email"]
    for step in (net(), sub()):
        assert raw(endpoint, step.http, step.path.format(p=project), step.body)[0] == 200
    scopes = ["https://www.googleapis.com/auth/cloud-platform"]
    for name, extra in (("vm1", {"serviceAccounts": [{"email": email, "scopes": scopes}]}), ("vm2", {})):
        status, _ = raw(endpoint, "POST", f"{P}/zones/{ZONE}/instances".format(p=project), vm_body(name, **extra))
        assert status == 200

    def metadata(vm: str, what: str, flavor: bool = True) -> tuple[int, bytes]:
        url = f"{endpoint}/_sandbox/metadata/projects/{project}/zones/{ZONE}/instances/{vm}/computeMetadata/v1/{what}"
        req = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"} if flavor else {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    token_path = "instance/service-accounts/default/token"
    assert metadata("vm1", token_path, flavor=False)[0] == 403
    assert metadata("vm2", token_path)[0] == 404  # no service account, no token
    assert metadata("vm1", "instance/service-accounts/default/email") == (200, email.encode())
    status, body = metadata("vm1", token_path)
    token = json.loads(body)
    assert status == 200 and token["token_type"] == "Bearer" and token["expires_in"] > 0

    secrets = client(endpoint).projects().secrets()
    name = secrets.create(parent=f"projects/{project}", secretId="api-key", body=AUTO).execute()["name"]
    secrets.addVersion(parent=name, body={"payload": {"data": b64(VALUE)}}).execute()
    path = f"/v1/projects/{project}/secrets/api-key/versions/1:access"
    assert raw(endpoint, "GET", path, token=token["access_token"])[0] == 403
    binding = {"role": "roles/secretmanager.secretAccessor", "members": [f"serviceAccount:{email}"]}
    crm = client(endpoint, "cloudresourcemanager").projects()
    project_policy = crm.getIamPolicy(resource=project, body={}).execute()
    project_policy["bindings"] = [*project_policy.get("bindings", []), binding]
    crm.setIamPolicy(resource=project, body={"policy": project_policy}).execute()  # a project binding reads too
    status, answer = raw(endpoint, "GET", path, token=token["access_token"])
    assert status == 200 and base64.b64decode(answer["payload"]["data"]) == VALUE
    accesses = raw(endpoint, "GET", f"/_sandbox/secret-accesses?project={project}")[1]["accesses"]
    assert [(a["caller"], a["outcome"]) for a in accesses] == [
        (f"serviceAccount:{email}", "PERMISSION_DENIED"),
        (f"serviceAccount:{email}", "OK"),
    ]
