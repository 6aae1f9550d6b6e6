"""Nothing is recorded for a request bound to fail, and no record blocks another target, through the real
CLI on the sandbox (moto knows EC2's instance types and their offerings per zone, and Route 53's zones).

A real-account job is made in-process here, as a stepValidate failure leaves it (an older vmplane's, or a
cloud that changed between the precheck and the job): the sandbox cannot stand in for a real account, and
this machine reaches none. Its `forget` and `destroy` run with credentials that would fail on any cloud
call (an unknown profile, a closed endpoint), so ending `deleted` shows that none was made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Cli, free_port, write_env

from vmplane.envspec.load import load_spec
from vmplane.jobs import service as svc
from vmplane.jobs.service import JobStatus, StepStatus
from vmplane.pipeline.plan import provision_steps
from vmplane.settings import Settings
from vmplane.store import db
from vmplane.target import Target

# Any cloud call under these fails at once: the profile does not exist, the endpoint refuses connections.
NO_CLOUD = {"AWS_PROFILE": "vmplane-test-no-such-profile", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}


def jobs_json(cli: Cli) -> str:
    proc = cli.run("jobs", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def refused(cli: Cli, *args: str) -> str:
    """Runs a command that must be refused with exit 2; returns its stderr."""
    proc = cli.run(*args)
    assert proc.returncode == 2, f"{args}: exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "to add" not in proc.stdout, proc.stdout  # never a plan as if the apply would go ahead
    return proc.stderr


def failed_real_job(cli: Cli, env_file: Path, endpoint: str | None = None) -> str:
    """A job on a real account (endpoint None) that failed at stepValidate, as one is recorded."""
    spec = load_spec(env_file)
    settings = Settings(home=cli.home)
    settings.ensure_home()
    with db.transaction(settings.db_url) as s:
        target = Target.for_spec(spec, None)
        if endpoint is not None:  # a job whose target refuses every connection
            target = target.model_copy(update={"endpoint_url": endpoint})
        row = svc.create_job(s, spec, target, provision_steps(spec))
        svc.update_step(s, row.id, "stepValidate", status=StepStatus.running)
        svc.update_step(s, row.id, "stepValidate", status=StepStatus.failed, error="Unsupported: refused")
        svc.set_status(s, row.id, JobStatus.failed, "stepValidate: Unsupported: refused")
        return row.id


@pytest.mark.sandbox
def test_an_instance_type_of_another_cloud_is_refused_by_plan_and_apply_with_nothing_recorded(
    cli: Cli, tmp_path: Path
) -> None:
    pool = {"mode": "fixed", "size": 2, "instanceType": "e2-small", "image": "al2023", "arch": "amd64"}
    env_file = write_env(tmp_path, "itest-e2", pools={"web": pool})
    before = jobs_json(cli)
    for args in (("plan", "-f", str(env_file), "--sandbox"), ("apply", "-f", str(env_file), "--sandbox", "--yes")):
        err = refused(cli, *args)
        assert "pools.web.instanceType: e2-small is not offered in us-east-1's zones" in err, err
        assert "nothing was recorded or created" in err
    err = refused(cli, "plan", "-f", str(env_file), "--sandbox", "--output", "json")
    assert "pools.web.instanceType" in err
    assert jobs_json(cli) == before


@pytest.mark.sandbox
def test_an_aws_instance_type_on_google_cloud_is_refused_naming_the_field(cli: Cli, tmp_path: Path) -> None:
    pool = {"mode": "fixed", "size": 1, "instanceType": "t3.small", "image": "ubuntu-24.04"}
    env_file = write_env(tmp_path, "itest-gcp-t3", example="gcp-fixed.jsonc", pools={"web": pool})
    before = jobs_json(cli)
    err = refused(cli, "apply", "-f", str(env_file), "--sandbox", "--yes")
    assert "pools.web.instanceType: t3.small is not offered in us-central1-a" in err, err
    assert jobs_json(cli) == before


@pytest.mark.sandbox
def test_a_domain_without_a_hosted_zone_is_refused_before_the_job(cli: Cli, tmp_path: Path) -> None:
    lb = {"domain": "app.no-zone-here.example", "certSource": "AWSACM"}
    env_file = write_env(tmp_path, "itest-nozone", example="web.jsonc", loadBalancer=lb)
    before = jobs_json(cli)
    for args in (("plan", "-f", str(env_file), "--sandbox"), ("apply", "-f", str(env_file), "--sandbox", "--yes")):
        err = refused(cli, *args)
        assert "loadBalancer.domain: no Route53 hosted zone in this account holds app.no-zone-here.example" in err
    assert jobs_json(cli) == before


@pytest.mark.sandbox
def test_a_failed_real_job_never_blocks_the_sandbox_and_is_forgotten_without_credentials(
    cli: Cli, tmp_path: Path
) -> None:
    name = "itest-targets"
    env_file = write_env(tmp_path, name, pools={"web": {"mode": "fixed", "size": 1, "instanceType": "t3.small"}})
    real = failed_real_job(cli, env_file)

    sandboxed: dict[str, Any] = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert sandboxed["status"] == "succeeded", sandboxed["error"]
    assert sandboxed["id"] != real

    # Two current jobs of one file: each command names which, or says it must be told.
    both = refused(cli, "status", "-f", str(env_file))
    assert real in both and sandboxed["id"] in both and "--sandbox or --real" in both
    assert cli.json("status", "-f", str(env_file), "--real")["id"] == real
    assert cli.json("status", "-f", str(env_file), "--sandbox")["id"] == sandboxed["id"]
    by_name = refused(cli, "status", name)
    assert real in by_name and sandboxed["id"] in by_name and "use a job id" in by_name

    # The sandbox job made VMs and a network: forget refuses, naming them and `destroy`.
    held = refused(cli, "forget", sandboxed["id"], "--yes")
    assert "VMs (" in held and f"vmplane destroy --job {sandboxed['id']}" in held
    assert cli.recorded_status(sandboxed["id"]) == "succeeded"

    # The real job made nothing: forgotten with no cloud call (any would fail under NO_CLOUD).
    gone = cli.json("forget", real, "--yes", extra_env=NO_CLOUD)
    assert gone["status"] == "deleted" and gone["teardownSteps"] == []
    assert gone["error"] == "stepValidate: Unsupported: refused"  # why it stopped stays on the record

    # `destroy -f FILE` of a real job that made nothing forgets it the same way.
    again = failed_real_job(cli, env_file)
    destroyed = cli.json("destroy", "-f", str(env_file), "--yes", extra_env=NO_CLOUD)
    assert destroyed["id"] == again and destroyed["status"] == "deleted" and destroyed["teardownSteps"] == []

    assert cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")["status"] == "deleted"
    assert {j["id"]: j["status"] for j in json.loads(jobs_json(cli))["jobs"]} == {
        real: "deleted",
        again: "deleted",
        sandboxed["id"]: "deleted",
    }
