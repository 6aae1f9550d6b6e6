"""The repair path's kill points on the GCP sandbox: on an applied gcp-fixed environment, the drift of
tests/integration/gcp_drift_cases.py is made out of band, the repairing `vmplane apply` is killed -9 right
after one mutating Google API call of the repair operation (stepRepairDrift's deletes, starts and
relabels, and the creates of the steps that follow it), and the re-run `vmplane apply` (a resume of the
repair) must end succeeded with `vmplane drift` clean: nothing duplicated, nothing left drifted.

The kill points are a clean repair's own calls, read from the per-step API-call tally the job records;
`test_the_repair_sweep_covers_every_mutating_call` fails when they change, printing the list to paste.
Each xdist worker repairs its own environment, case after case (each case starts from no drift).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Cli, Sandbox, module_env_name, write_env
from tests.integration.gcp_drift_cases import break_fixed
from tests.integration.gcp_inventory import Gcp
from tests.integration.test_crash_resume import kill_after
from tests.integration.test_gcp_crash_sweep import MUTATING as CHANGES

from vmplane.envspec.load import load_spec
from vmplane.envspec.models import EnvSpec

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

# The crash sweep's mutating verbs, and the power ones the repair adds (an apply never starts a VM).
MUTATING = re.compile(f"{CHANGES.pattern}|\\.(start|stop)$")

REPAIR_OPS = [
    "compute.firewalls.delete",  # stepRepairDrift: the rule someone added
    "compute.firewalls.insert",  # stepCreateNetwork: vmplane's rule again
    "compute.instances.insert",  # stepCreateVMs: the deleted VM, under its name
    "compute.instances.setLabels",  # stepRepairDrift: the labels (retag)
    "compute.instances.setMetadata",  # stepFinalize: the runtime settings pushed to the VM made again
    "compute.instances.start",  # stepRepairDrift: the stopped VM
    "compute.regionInstanceTemplates.insert",  # stepCreateLaunchTemplate: the template, under its name
    "compute.routers.insert",  # stepCreateNetwork: the router with its NAT
]


class Env:
    def __init__(self, cli: Cli, env_file: Path, spec: EnvSpec, job_id: str) -> None:
        self.cli, self.env_file, self.spec, self.job_id = cli, env_file, spec, job_id

    def apply(self) -> dict[str, Any]:
        return self.cli.json("apply", "-f", str(self.env_file), "--sandbox", "--yes")


@pytest.fixture(scope="module")
def env(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Env:
    tmp = tmp_path_factory.mktemp("grepair")
    cli = Cli(home=tmp / "home", sandbox_port=sandbox.port, gcp_port=sandbox.gcp_port)
    env_file = write_env(tmp, module_env_name(tmp, f"grs-{worker_id}"), example="gcp-fixed.jsonc")
    env = Env(cli, env_file, load_spec(env_file), "")
    applied = env.apply()
    assert applied["status"] == "succeeded", applied["error"]
    env.job_id = applied["id"]
    return env


def mutating_calls(job: dict[str, Any]) -> list[str]:
    """The distinct mutating calls of the job's last operation, the repair (its steps' tallies)."""
    op = job["config"]["operation"]
    assert op["kind"] == "repair" and op["steps"][1]["name"] == "stepRepairDrift", op["kind"]
    return sorted({call for s in op["steps"] for call in s["apiCalls"] if MUTATING.search(call)})


def test_the_repair_sweep_covers_every_mutating_call(env: Env, sandbox: Sandbox) -> None:
    assert env.cli.run("drift", env.spec.name).returncode == 0
    break_fixed(Gcp(sandbox.gcp_endpoint), env.spec, env.job_id)
    repaired = env.apply()
    assert repaired["status"] == "succeeded", repaired["error"]
    assert env.cli.run("drift", env.spec.name).returncode == 0
    assert mutating_calls(repaired) == REPAIR_OPS, f"REPAIR_OPS = {mutating_calls(repaired)!r}"


@pytest.mark.parametrize("op", REPAIR_OPS)
def test_a_repair_killed_after_each_call_converges(env: Env, sandbox: Sandbox, op: str) -> None:
    assert env.cli.run("drift", env.spec.name).returncode == 0  # each case starts from no drift
    break_fixed(Gcp(sandbox.gcp_endpoint), env.spec, env.job_id)
    kill_after(env.cli, op, "apply", "-f", str(env.env_file), "--sandbox", "--yes")
    assert env.cli.recorded_status(env.spec.name) == "running"
    resumed = env.apply()
    assert resumed["status"] == "succeeded", resumed["error"]
    clean = env.cli.run("drift", env.spec.name, "-o", "json")
    assert clean.returncode == 0, f"repair killed after {op}: {clean.stdout}{clean.stderr}"
