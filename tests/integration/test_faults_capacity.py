"""Capacity errors under a fault profile: a stock-out on every launch (capacity rate 1). The job fails
at stepCreateVMs with the cloud's sentence naming the zone plus vmplane's fix (another zone or type, or
`vmplane apply` again later), bounded (botocore's own attempts on AWS, none on GCP), and stays resumable.

Old sandbox: every launch had capacity. Old drivers: EC2's HTTP 500 InsufficientInstanceCapacity was
a TransientError, retried by run_instance for two minutes and then reported as a deadline; GCP's
ZONE_RESOURCE_POOL_EXHAUSTED operation error was a plain CloudError with no fix.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers import SESSION_GCP_PORTS, Cli, Sandbox, free_port, write_env

from vmplane.clouds.aws.session import MAX_ATTEMPTS
from vmplane.clouds.errors import CAPACITY_FIX

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stocked_out(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    from vmplane.sandbox import control
    from vmplane.settings import Settings

    home = tmp_path_factory.mktemp("stocked-out")
    profile = home / "capacity.jsonc"
    profile.write_text('{"seed": 3, "capacity": {"rate": 1}}  // every launch meets a stock-out')
    settings = Settings(home=home, sandbox_port=free_port(), gcp_sandbox_port=free_port())
    info = control.start(settings, profile)
    SESSION_GCP_PORTS[info.port] = settings.gcp_sandbox_port
    yield Sandbox(port=info.port, home=home, gcp_port=settings.gcp_sandbox_port)
    control.stop(settings)


def capacity_count(sb: Sandbox, cloud: str) -> int:
    with urllib.request.urlopen(f"{sb.endpoint}/_sandbox/faults", timeout=10) as r:
        return int(json.loads(r.read())["tally"].get(f"{cloud}.capacity", 0))


def failed_apply(tmp_path: Path, sb: Sandbox, name: str, example: str) -> dict:
    cli = Cli(home=tmp_path / "home", sandbox_port=sb.port, gcp_port=sb.gcp_port)
    env = write_env(tmp_path, name, example=example)
    job = cli.json("apply", "-f", str(env), "--sandbox", "-y", expect=1, timeout=600)
    assert job["status"] == "failed", job
    return job


def test_aws_capacity_error_names_the_zone_and_the_fix(tmp_path: Path, stocked_out: Sandbox) -> None:
    job = failed_apply(tmp_path, stocked_out, "cap-fixed", "fixed.jsonc")
    error = job["error"]
    assert "stepCreateVMs" in error and "InsufficientInstanceCapacity" in error, error
    assert "Availability Zone you requested (us-east-1" in error and CAPACITY_FIX in error, error
    # Bounded: botocore's attempts for each launch tried (two VMs in parallel at most), no retry loop on top.
    assert 0 < capacity_count(stocked_out, "aws") <= 2 * MAX_ATTEMPTS


def test_gcp_capacity_error_names_the_zone_and_the_fix(tmp_path: Path, stocked_out: Sandbox) -> None:
    job = failed_apply(tmp_path, stocked_out, "cap-gcp-fixed", "gcp-fixed.jsonc")
    error = job["error"]
    assert "stepCreateVMs" in error and "ZONE_RESOURCE_POOL_EXHAUSTED" in error, error
    # The fix in the GCP driver's words (clouds/gcp/errors.operation_error): another zone or machine type.
    assert "zone us-central1-" in error and "another zone or another machine type" in error, error
    once = capacity_count(stocked_out, "gcp")
    assert 0 < once <= 2  # each launch tried once: a stock-out is not retried
    # Resumable: the same job, applied again, resumes at the failed step (and fails the same bounded way).
    again = failed_apply(tmp_path, stocked_out, "cap-gcp-fixed", "gcp-fixed.jsonc")
    assert again["id"] == job["id"] and "ZONE_RESOURCE_POOL_EXHAUSTED" in again["error"]
    assert once < capacity_count(stocked_out, "gcp") <= 2 * once
