"""`vmplane tf state init` of a GCP file on the GCP sandbox: the bucket made or adopted (uniform access,
versioning, labels), the state object written once with ifGenerationMatch=0, the generated gcs backend
pointing at it, and Terraform's own gcs backend reading, locking and writing it on the sandbox."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from googleapiclient.errors import HttpError
from tests.helpers import Cli, Sandbox, write_env

from vmplane.clouds.gcp.session import GcpClients, GcpTarget
from vmplane.clouds.gcp.state_bucket import storage
from vmplane.envspec.load import load_spec
from vmplane.tf.generate import generate

PROJECT = "vmplane-sandbox"  # examples/gcp-fixed.jsonc's project


@pytest.fixture
def gcs(sandbox: Sandbox) -> Any:
    return storage(GcpClients(GcpTarget(PROJECT, "us-central1", sandbox.gcp_endpoint)))


def _env(tmp_path: Path, bucket: str, **state: Any) -> Path:
    name = f"st-{uuid.uuid4().hex[:8]}"
    return write_env(tmp_path, name, example="gcp-fixed.jsonc", state={"bucket": bucket, **state})


def _bucket() -> str:
    return f"acme-tfstate-{uuid.uuid4().hex[:10]}"


def test_init_creates_the_bucket_and_the_state_once(cli: Cli, gcs: Any, tmp_path: Path) -> None:
    bucket = _bucket()
    path = _env(tmp_path, bucket)
    spec = load_spec(path)
    key = f"vmplane/acme/{spec.name}/default.tfstate"

    first = cli.run("tf", "state", "init", "-f", str(path), "--sandbox", "-o", "json")
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert {k: out[k] for k in ("bucket", "key", "created")} == {"bucket": bucket, "key": key, "created": True}
    assert (out["bucketCreated"], out["location"]) == (True, "US-CENTRAL1")

    made = gcs.buckets().get(bucket=bucket).execute()
    assert made["iamConfiguration"]["uniformBucketLevelAccess"]["enabled"] is True
    assert made["iamConfiguration"]["publicAccessPrevention"] == "enforced"
    assert made["versioning"] == {"enabled": True}
    assert made["labels"] == {
        "zop_org_id": "acme",
        "zop_managed_by": "vmplane",
        "zop_role": "tfstate",
        "team": "platform",
        "cost_center": "cc-1234",
    }
    state = json.loads(gcs.objects().get_media(bucket=bucket, object=key).execute())
    assert (state["version"], state["serial"], state["resources"]) == (4, 0, [])
    generation = gcs.objects().get(bucket=bucket, object=key).execute()["generation"]

    again = cli.run("tf", "state", "init", "-f", str(path), "--sandbox")
    assert again.returncode == 2, again.stderr
    assert f"gs://{bucket}/{key} already exists (generation {generation})" in again.stderr
    assert "nothing was overwritten" in again.stderr
    assert gcs.objects().get(bucket=bucket, object=key).execute()["generation"] == generation
    assert len(gcs.objects().list(bucket=bucket, versions=True).execute()["items"]) == 1

    # Another environment of the org shares the bucket, with its own object; text output names it.
    other = _env(tmp_path, bucket)
    third = cli.run("tf", "state", "init", "-f", str(other), "--sandbox")
    assert third.returncode == 0, third.stderr
    other_key = f"vmplane/acme/{load_spec(other).name}/default.tfstate"
    assert f"created gs://{bucket}/{other_key}" in third.stdout and "adopted as it was" in third.stdout


def test_init_adopts_an_existing_bucket_setting_what_differs(cli: Cli, gcs: Any, tmp_path: Path) -> None:
    bucket = _bucket()
    gcs.buckets().insert(project=PROJECT, body={"name": bucket, "location": "EU", "labels": {"keep": "me"}}).execute()
    path = _env(tmp_path, bucket)
    done = cli.run("tf", "state", "init", "-f", str(path), "--sandbox", "-o", "json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["bucketCreated"], out["location"]) == (False, "EU")
    assert out["bucketChanged"] == ["iamConfiguration", "labels", "versioning"]
    adopted = gcs.buckets().get(bucket=bucket).execute()
    assert adopted["iamConfiguration"]["uniformBucketLevelAccess"]["enabled"] is True
    assert adopted["versioning"] == {"enabled": True}
    assert adopted["labels"]["keep"] == "me" and adopted["labels"]["zop_org_id"] == "acme"


def test_init_refuses_a_bucket_of_another_project_or_org(cli: Cli, gcs: Any, tmp_path: Path) -> None:
    theirs = _bucket()
    gcs.buckets().insert(project="someone-else-1", body={"name": theirs}).execute()
    refused = cli.run("tf", "state", "init", "-f", str(_env(tmp_path, theirs)), "--sandbox")
    assert refused.returncode == 2, refused.stderr
    assert f"gs://{theirs} belongs to another project" in refused.stderr
    untouched = gcs.buckets().get(bucket=theirs).execute()
    assert untouched["metageneration"] == "1" and "versioning" not in untouched
    assert gcs.objects().list(bucket=theirs).execute()["items"] == []

    other_org = _bucket()
    gcs.buckets().insert(project=PROJECT, body={"name": other_org, "labels": {"zop_org_id": "globex"}}).execute()
    refused = cli.run("tf", "state", "init", "-f", str(_env(tmp_path, other_org)), "--sandbox")
    assert refused.returncode == 2, refused.stderr
    assert "labelled zop_org_id=globex" in refused.stderr
    assert gcs.buckets().get(bucket=other_org).execute()["metageneration"] == "1"


def test_the_state_fields_follow_the_cloud(cli: Cli, gcs: Any, tmp_path: Path) -> None:
    bucket = _bucket()
    refused = cli.run("tf", "state", "init", "-f", str(_env(tmp_path, bucket, region="eu")), "--sandbox")
    assert refused.returncode == 2 and "state.location" in refused.stderr
    with pytest.raises(HttpError, match="404"):
        gcs.buckets().get(bucket=bucket).execute()  # nothing created for a refused request
    placed = cli.run("tf", "state", "init", "-f", str(_env(tmp_path, bucket, location="eu")), "--sandbox")
    assert placed.returncode == 0, placed.stderr
    assert gcs.buckets().get(bucket=bucket).execute()["location"] == "EU"
    aws = write_env(tmp_path, "st-aws", state={"bucket": bucket, "location": "eu"})
    refused = cli.run("tf", "state", "init", "-f", str(aws), "--sandbox")
    assert refused.returncode == 2 and "state.region" in refused.stderr


def test_the_generated_backend_is_the_object_init_writes(tmp_path: Path) -> None:
    spec = load_spec(_env(tmp_path, "acme-tfstate"))
    backend = generate(spec)["vmplane.env.backend.tf"]
    assert 'backend "gcs" {' in backend
    assert 'bucket = "acme-tfstate"' in backend and f'prefix = "vmplane/acme/{spec.name}"' in backend


def test_terraform_inits_plans_and_applies_the_gcs_backend_on_the_sandbox(
    cli: Cli, sandbox: Sandbox, gcs: Any, tmp_path: Path
) -> None:
    """The generated backend file, unchanged, with one builtin resource (the google provider is not in the
    offline mirror, and the sandbox's stack is not what is under test): Terraform's gcs backend reads the
    state `tf state init` wrote, locks it with `<prefix>/default.tflock` and writes the next serial."""
    if not shutil.which("terraform"):
        pytest.skip("terraform is not on PATH")
    bucket = _bucket()
    path = _env(tmp_path, bucket)
    spec = load_spec(path)
    assert cli.run("tf", "state", "init", "-f", str(path), "--sandbox").returncode == 0
    stack = tmp_path / "stack"
    stack.mkdir()
    (stack / "vmplane.env.backend.tf").write_text(generate(spec)["vmplane.env.backend.tf"])
    (stack / "probe.tf").write_text(
        'resource "terraform_data" "probe" {\n  input = "hello"\n}\n'
        'output "probe" {\n  value = terraform_data.probe.output\n}\n'
    )
    rc = tmp_path / "terraformrc"
    rc.write_text("")  # no user CLI configuration; nothing to download (builtin provider only)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "GOOGLE_", "VMPLANE_"))}
    env.update(
        TF_CLI_CONFIG_FILE=str(rc),
        TF_IN_AUTOMATION="1",
        CHECKPOINT_DISABLE="1",
        TF_DATA_DIR=str(tmp_path / "tfdata"),
        # The gcs backend's own overrides: the sandbox's JSON API and a static token (it checks none).
        GOOGLE_BACKEND_STORAGE_CUSTOM_ENDPOINT=f"{sandbox.gcp_endpoint}/storage/v1/",
        GOOGLE_OAUTH_ACCESS_TOKEN="sandbox-token",
    )
    key = f"vmplane/acme/{spec.name}/default.tfstate"
    lineage = json.loads(gcs.objects().get_media(bucket=bucket, object=key).execute())["lineage"]

    def terraform(*args: str) -> subprocess.CompletedProcess[str]:
        run = subprocess.run(
            ["terraform", *args, "-input=false", "-no-color"],
            cwd=stack,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        return run

    assert 'Successfully configured the backend "gcs"' in terraform("init").stdout
    assert "1 to add" in terraform("plan").stdout
    terraform("apply", "-auto-approve")
    state = json.loads(gcs.objects().get_media(bucket=bucket, object=key).execute())
    assert state["lineage"] == lineage  # terraform adopted the object init wrote, not a new state
    assert state["serial"] >= 1 and [r["type"] for r in state["resources"]] == ["terraform_data"]
    live = {o["name"] for o in gcs.objects().list(bucket=bucket).execute()["items"]}
    assert live == {key}  # the lock object is gone: terraform unlocked after the apply
    versions = gcs.objects().list(bucket=bucket, versions=True, prefix=key).execute()["items"]
    assert len(versions) >= 2  # versioning kept the state init wrote, noncurrent
    assert "No changes" in terraform("plan").stdout
