"""The provisioning API through a real `vmplane serve` process on the sandbox: the HTTP flow, auth and
org isolation, the error codes, If-Match, and random bodies that must never produce a 5xx."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.helpers import EXAMPLES, Cli, Sandbox, free_port, vmplane_serve
from tests.integration.test_apply_destroy import job_resources
from tests.integration.test_load_balancer import lb_parts

from vmplane.envspec.load import load_spec


class Api:
    def __init__(self, url: str, cli: Cli, log: Path) -> None:
        self.url, self.cli, self.log = url, cli, log
        self.tokens: dict[tuple[str, str], str] = {}

    def token(self, org: str, role: str) -> str:
        if (org, role) not in self.tokens:
            self.tokens[org, role] = self.cli.json("tokens", "create", "--org", org, "--role", role)["token"]
        return self.tokens[org, role]

    def client(self, org: str = "acme", role: str = "admin") -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token(org, role)}"}, timeout=60)


@pytest.fixture(scope="module")
def api(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    home = tmp_path_factory.mktemp("api-home")
    cli = Cli(home=home, sandbox_port=sandbox.port)
    log = home / "serve.log"
    with vmplane_serve(cli, log) as url:
        yield Api(url, cli, log)


def spec_doc(name: str, example: str = "web.jsonc", org: str = "acme") -> dict[str, Any]:
    doc = load_spec(EXAMPLES / example).model_dump(mode="json", by_alias=True, exclude_none=True)
    doc.update(name=name, org=org)
    if "loadBalancer" in doc:
        doc["loadBalancer"]["domain"] = f"{name}.sandbox.vmplane.test"
    return doc


def wait(c: httpx.Client, job_id: str, *done: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = c.get(f"/provisioning-jobs/{job_id}").json()
        if job["status"] in done:
            return job
        assert time.monotonic() < deadline, f"job stayed {job['status']}"
        time.sleep(0.2)


@pytest.mark.sandbox
def test_create_get_detach_attach_delete(api: Api, sandbox: Sandbox) -> None:
    c = api.client()
    name = "api-flow"
    r = c.post("/provisioning-jobs", params={"sandbox": "true"}, json=spec_doc(name))
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    assert r.headers["Location"] == f"/provisioning-jobs/{job_id}" and r.headers["ETag"]
    job = wait(c, job_id, "succeeded", "failed")
    assert job["status"] == "succeeded", job["error"]
    assert len(job["steps"]) == 11 and job["config"]["infra"]["LoadBalancerID"]

    r = c.patch(f"/provisioning-jobs/{job_id}", json={"vmOp": "detach_lb"}, headers={"If-Match": f'"{job["version"]}"'})
    assert r.status_code == 202, r.text
    assert r.json()["impact"] == [{"path": "loadBalancer", "impact": "cloud", "consequence": "updated in place"}]
    job = wait(c, job_id, "succeeded", "failed")
    assert job["config"]["operation"]["status"] == "succeeded"
    assert not any(lb_parts(sandbox, job_id, f"{name}.sandbox.vmplane.test").values())

    r = c.patch(f"/provisioning-jobs/{job_id}", json={"vmOp": "attach_lb"})
    assert r.status_code == 202, r.text
    job = wait(c, job_id, "succeeded", "failed")
    assert job["status"] == "succeeded" and job["config"]["infra"]["LoadBalancerID"]

    r = c.delete(f"/provisioning-jobs/{job_id}")
    assert r.status_code == 202, r.text
    job = wait(c, job_id, "deleted", "delete_failed")
    assert job["status"] == "deleted", job["error"]
    assert c.delete(f"/provisioning-jobs/{job_id}").status_code == 409  # DELETE twice
    assert not any(job_resources(sandbox, job_id).values())
    assert not any(lb_parts(sandbox, job_id, f"{name}.sandbox.vmplane.test").values())


@pytest.mark.sandbox
def test_auth_roles_org_isolation_and_error_codes(api: Api) -> None:
    admin, viewer, operator, other = (
        api.client(),
        api.client(role="viewer"),
        api.client(role="operator"),
        api.client(org="globex"),
    )
    assert httpx.get(f"{api.url}/provisioning-jobs").status_code == 401
    openapi = httpx.get(f"{api.url}/openapi.json").json()
    assert {"/provisioning-jobs", "/provisioning-jobs/{job_id}", "/healthz"} <= set(openapi["paths"])
    assert set(openapi["paths"]["/provisioning-jobs/{job_id}"]) == {"get", "patch", "delete"}
    assert '"propertyName": "vmOp"' in json.dumps(openapi)  # one PATCH route, a typed vmOp discriminator
    bad = httpx.get(f"{api.url}/provisioning-jobs", headers={"Authorization": "Bearer vmp_not-a-token"})
    assert bad.status_code == 401 and bad.headers["WWW-Authenticate"] == "Bearer"

    doc = spec_doc("api-codes", example="fixed.jsonc")
    assert viewer.post("/provisioning-jobs", params={"sandbox": "true"}, json=doc).status_code == 403
    assert other.post("/provisioning-jobs", params={"sandbox": "true"}, json=doc).status_code == 403  # org mismatch
    invalid = operator.post(
        "/provisioning-jobs", params={"sandbox": "true"}, json={**doc, "pools": {"web": {"mode": "fixed", "size": 0}}}
    )
    assert invalid.status_code == 422
    assert any(e["loc"][:4] == ["body", "pools", "web", "fixed"] for e in invalid.json()["detail"])

    r = operator.post("/provisioning-jobs", params={"sandbox": "true"}, json=doc)
    assert r.status_code == 201
    job_id = r.json()["id"]
    assert operator.post("/provisioning-jobs", params={"sandbox": "true"}, json=doc).status_code == 409  # exists
    assert other.get(f"/provisioning-jobs/{job_id}").status_code == 404  # another org's job does not exist
    assert all(j["org"] == "globex" for j in other.get("/provisioning-jobs").json()["items"])
    assert viewer.get(f"/provisioning-jobs/{job_id}").status_code == 200
    job = wait(admin, job_id, "succeeded", "failed")
    assert job["status"] == "succeeded", job["error"]

    assert operator.patch(f"/provisioning-jobs/{job_id}", json={"vmOp": "reboot"}).status_code == 422
    assert (
        operator.patch(f"/provisioning-jobs/{job_id}", json={"vmOp": "scale", "pool": "nope", "desired": 1}).status_code
        == 422
    )
    stale = operator.patch(f"/provisioning-jobs/{job_id}", json={"vmOp": "rotate"}, headers={"If-Match": '"1"'})
    assert stale.status_code == 412
    identity = operator.patch(
        f"/provisioning-jobs/{job_id}", json={"vmOp": "update", "spec": {"network": {"cidr": "10.9.0.0/16"}}}
    )
    assert identity.status_code == 422 and identity.json()["detail"]["impact"][0]["impact"] == "identity"
    assert operator.delete(f"/provisioning-jobs/{job_id}").status_code == 403  # delete needs admin

    # Two writers with the same version: exactly one wins, the other is told so (412).
    version = admin.get(f"/provisioning-jobs/{job_id}").json()["version"]
    results: list[int] = []

    def scale(desired: int) -> None:
        body = {"vmOp": "scale", "pool": "web", "desired": desired}
        results.append(
            operator.patch(f"/provisioning-jobs/{job_id}", json=body, headers={"If-Match": f'"{version}"'}).status_code
        )

    threads = [threading.Thread(target=scale, args=(n,)) for n in (3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) in ([202, 409], [202, 412]), results
    busy = operator.patch(f"/provisioning-jobs/{job_id}", json={"vmOp": "rotate"})
    assert busy.status_code in (409, 202)  # 409 while the scale runs (PATCH while a step runs)
    job = wait(admin, job_id, "succeeded", "failed")
    assert admin.delete(f"/provisioning-jobs/{job_id}").status_code in (202, 409)
    wait(admin, job_id, "deleted", "delete_failed")

    log = api.log.read_text()
    assert all(token not in log for token in api.tokens.values())


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 70000) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.sandbox
@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    mutation=st.tuples(st.sampled_from(["name", "pools", "network", "provider", "loadBalancer", "tags", "zzz"]), JSON),
    patch=JSON,
)
def test_random_bodies_never_produce_a_5xx(api: Api, mutation: tuple[str, Any], patch: Any) -> None:
    # A token of an org no body uses: even a valid body is refused (403) before anything is created.
    c = api.client(org="fuzzorg", role="admin")
    key, value = mutation
    body = {**spec_doc("fuzz", example="fixed.jsonc"), key: value}
    assert c.post("/provisioning-jobs", json=body).status_code < 500
    assert c.post("/provisioning-jobs", content=json.dumps(value)).status_code < 500
    assert c.patch("/provisioning-jobs/job-x", json=patch).status_code < 500
    assert c.patch("/provisioning-jobs/job-x", json={"vmOp": "update", "spec": patch}).status_code < 500
    assert c.get("/provisioning-jobs", params={"limit": str(value)[:5]}).status_code < 500


@pytest.mark.sandbox
def test_admins_manage_their_orgs_tokens(api: Api) -> None:
    admin, operator = api.client(org="tokorg"), api.client(org="tokorg", role="operator")
    assert operator.post("/tokens", json={"role": "viewer"}).status_code == 403
    made = admin.post("/tokens", json={"role": "viewer"})
    assert made.status_code == 201 and made.json()["org"] == "tokorg" and made.json()["token"].startswith("vmp_")
    new = httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {made.json()['token']}"})
    assert new.get("/provisioning-jobs").status_code == 200
    listed = admin.get("/tokens").json()["items"]
    assert made.json()["id"] in [t["id"] for t in listed] and all("token" not in t for t in listed)
    assert api.client(org="other").delete(f"/tokens/{made.json()['id']}").status_code == 404  # not its org
    assert admin.delete(f"/tokens/{made.json()['id']}").status_code == 204
    assert new.get("/provisioning-jobs").status_code == 401  # revoked at once


@pytest.mark.sandbox
def test_a_file_its_driver_cannot_run_is_422_and_records_no_job(api: Api) -> None:
    # An asg pool on Proxmox VE (no cloud autoscaler): the driver's capabilities refuse it before a job
    # exists, so nothing runs and the cluster (pve.example, never reached) is not asked.
    c = api.client()
    doc = spec_doc("api-pve-asg", "proxmox.jsonc")
    doc["pools"]["web"] = {"mode": "asg", "min": 1, "max": 2, "desired": 1, "template": "debian-12-cloud"}
    r = c.post("/provisioning-jobs", json=doc)
    assert r.status_code == 422, r.text
    assert "pools.web.mode" in r.text and "no cloud autoscaler" in r.text
    assert all(j["env"] != "api-pve-asg" for j in c.get("/provisioning-jobs").json()["items"])


@pytest.mark.sandbox
def test_a_type_the_region_does_not_offer_is_422_naming_the_field_and_records_no_job(api: Api) -> None:
    c = api.client()
    doc = spec_doc("api-e2", "fixed.jsonc")
    doc["pools"]["web"]["instanceType"] = "e2-small"
    r = c.post("/provisioning-jobs", params={"sandbox": "true"}, json=doc)
    assert r.status_code == 422, r.text
    assert "pools.web.instanceType: e2-small is not offered in us-east-1's zones" in r.json()["detail"]["message"]
    assert all(j["env"] != "api-e2" for j in c.get("/provisioning-jobs").json()["items"])


@pytest.mark.sandbox
def test_delete_of_a_job_that_created_nothing_ends_deleted_with_no_cloud_call(api: Api) -> None:
    # The job's target refuses every connection: a teardown (or any cloud call) could not succeed.
    from tests.integration.test_refused_before_job import failed_real_job

    env_file = api.cli.home / "api-forget.jsonc"
    env_file.write_text(json.dumps(spec_doc("api-forget", "fixed.jsonc")))
    job_id = failed_real_job(api.cli, env_file, endpoint=f"http://127.0.0.1:{free_port()}")
    c = api.client()
    r = c.delete(f"/provisioning-jobs/{job_id}")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "deleted" and r.json()["teardownSteps"] == []
    time.sleep(0.5)  # no workflow was started: the record stays as it was left
    job = c.get(f"/provisioning-jobs/{job_id}").json()
    assert job["status"] == "deleted" and job["teardownSteps"] == [] and job["error"].startswith("stepValidate")
    assert c.delete(f"/provisioning-jobs/{job_id}").status_code == 409
