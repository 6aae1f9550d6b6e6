"""`--sandbox` and `?sandbox=true` on a `gcp` file reach the Google Cloud sandbox (not moto): a spec
whose image cannot resolve fails stepValidate with the GCP driver's own answer, recorded against the
GCP endpoint, and nothing is created in the sandbox project."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.helpers import Cli, Sandbox, write_env
from tests.integration.test_api import Api, api, spec_doc, wait  # noqa: F401 (api is a fixture)

BAD_IMAGE = "projects/no-such-images/global/images/nope"


def gcp_overrides(project: str) -> dict[str, Any]:
    return {
        "provider": {"cloud": "gcp", "project": project, "region": "us-central1"},
        "pools": {"web": {"mode": "fixed", "size": 1, "image": BAD_IMAGE}},
    }


def compute_state(sandbox: Sandbox, project: str) -> Any:
    return sandbox.gcp_control(f"state?project={project}", method="GET").get("compute")


def test_cli_sandbox_on_a_gcp_file_runs_against_the_gcp_sandbox(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    project = f"target-{uuid.uuid4().hex[:8]}"
    env = write_env(tmp_path, "gcp-target", example="gcp-fixed.jsonc", **gcp_overrides(project))
    proc = cli.run("apply", "-f", str(env), "--sandbox", "--yes", "--output", "json")
    assert proc.returncode == 1, proc.stderr
    job = json.loads(proc.stdout)
    assert job["status"] == "failed"
    first = job["steps"][0]
    assert first["name"] == "stepValidate" and first["status"] == "failed"
    assert "pools.web.image" in job["error"] and "no-such-images" in job["error"]
    status = cli.run("status", "-f", str(env))
    assert f"sandbox at {sandbox.gcp_endpoint}" in " ".join(status.stdout.split()), status.stdout
    assert not compute_state(sandbox, project)  # stepValidate creates nothing

    plan = cli.json("plan", "-f", str(env), "--sandbox")
    assert {r["type"] for r in plan["resources"]} >= {"google_compute_network", "google_service_account"}


def test_api_sandbox_true_on_a_gcp_spec_runs_against_the_gcp_sandbox(api: Api, sandbox: Sandbox) -> None:  # noqa: F811
    project = f"target-{uuid.uuid4().hex[:8]}"
    doc = spec_doc("gcp-api-target", example="gcp-fixed.jsonc")
    doc.update(gcp_overrides(project))
    c = api.client()
    r = c.post("/provisioning-jobs", params={"sandbox": "true"}, json=doc)
    assert r.status_code == 201, r.text
    job = wait(c, r.json()["id"], "succeeded", "failed")
    assert job["status"] == "failed"
    assert "pools.web.image" in job["error"] and "no-such-images" in job["error"]
    assert not compute_state(sandbox, project)
