"""`--sandbox` and `?sandbox=true` on a `gcp` file reach the Google Cloud sandbox (not moto): a spec
whose image cannot resolve is refused with the GCP driver's own answer, asked of the GCP endpoint
before any job exists (exit 2, HTTP 422), and nothing is recorded or created in the sandbox project."""

from __future__ import annotations

import uuid
from typing import Any

from tests.helpers import Cli, Sandbox, write_env
from tests.integration.test_api import Api, api, spec_doc  # noqa: F401 (api is a fixture)

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
    for args in (("apply", "-f", str(env), "--sandbox", "--yes"), ("plan", "-f", str(env), "--sandbox")):
        proc = cli.run(*args, "--output", "json")
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stdout == ""
        said = " ".join(proc.stderr.split())
        assert f"sandbox at {sandbox.gcp_endpoint}" in said, said  # asked of the GCP sandbox, not moto
        assert "pools.web.image" in said and "no-such-images" in said
    assert cli.json("jobs")["jobs"] == []
    assert not compute_state(sandbox, project)  # the check creates nothing

    good = write_env(tmp_path, "gcp-target-ok", example="gcp-fixed.jsonc", provider=gcp_overrides(project)["provider"])
    plan = cli.json("plan", "-f", str(good), "--sandbox")
    assert {r["type"] for r in plan["resources"]} >= {"google_compute_network", "google_service_account"}


def test_api_sandbox_true_on_a_gcp_spec_runs_against_the_gcp_sandbox(api: Api, sandbox: Sandbox) -> None:  # noqa: F811
    project = f"target-{uuid.uuid4().hex[:8]}"
    doc = spec_doc("gcp-api-target", example="gcp-fixed.jsonc")
    doc.update(gcp_overrides(project))
    c = api.client()
    r = c.post("/provisioning-jobs", params={"sandbox": "true"}, json=doc)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]["message"]
    assert "pools.web.image" in detail and "no-such-images" in detail
    assert all(j["env"] != "gcp-api-target" for j in c.get("/provisioning-jobs").json()["items"])
    assert not compute_state(sandbox, project)
