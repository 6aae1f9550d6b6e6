"""The provisioning API on the GCP sandbox: POST /provisioning-jobs?sandbox=true with a `gcp` file, PATCH
detach/attach of the load balancer and scale, DELETE; the project is read with google-cloud-compute."""

from __future__ import annotations

import pytest
from tests.helpers import Sandbox
from tests.integration.gcp_inventory import Gcp, job_resources, records
from tests.integration.test_api import Api, api, spec_doc, wait

__all__ = ["api"]  # the module-scoped `vmplane serve` fixture


@pytest.mark.sandbox
@pytest.mark.slow
def test_gcp_create_detach_attach_scale_delete(api: Api, sandbox: Sandbox) -> None:
    gcp = Gcp(sandbox.gcp_endpoint)
    c = api.client()
    name = "api-gcp"
    domain = f"{name}.sandbox.vmplane.test"
    r = c.post("/provisioning-jobs", params={"sandbox": "true"}, json=spec_doc(name, "gcp-web.jsonc"))
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]
    job = wait(c, job_id, "succeeded", "failed", timeout=240)
    assert job["status"] == "succeeded", job["error"]
    assert len(job["steps"]) == 11 and job["config"]["infra"]["LoadBalancerID"]
    assert len(job_resources(gcp, job_id)["forwarding_rules"]) == 2

    r = c.patch(f"/provisioning-jobs/{job_id}", json={"vmOp": "detach_lb"}, headers={"If-Match": f'"{job["version"]}"'})
    assert r.status_code == 202, r.text
    job = wait(c, job_id, "succeeded", "failed", timeout=240)
    assert job["config"]["operation"]["status"] == "succeeded"
    assert not job_resources(gcp, job_id)["forwarding_rules"] and not records(gcp, domain)

    r = c.patch(f"/provisioning-jobs/{job_id}", json={"vmOp": "attach_lb"})
    assert r.status_code == 202, r.text
    job = wait(c, job_id, "succeeded", "failed", timeout=240)
    assert job["status"] == "succeeded" and job["config"]["infra"]["LoadBalancerID"]
    assert len(job_resources(gcp, job_id)["forwarding_rules"]) == 2

    r = c.delete(f"/provisioning-jobs/{job_id}")
    assert r.status_code == 202, r.text
    job = wait(c, job_id, "deleted", "delete_failed", timeout=240)
    assert job["status"] == "deleted", job["error"]
    assert not any(job_resources(gcp, job_id).values()) and not records(gcp, domain)
