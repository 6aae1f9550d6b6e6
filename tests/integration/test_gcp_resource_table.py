"""The GCP resource table (clouds/gcp/resources.py) agrees, for every GCP example, with the three places a
resource set shows: the plan's "+" addresses (`vmplane plan`), what the sandbox holds after `vmplane apply`
(read through `TABLE.observe`, the drift check's reader) and the generated stack's resources (the
Terraform module's render, `tf.generate`). Each disagreement is named below, with why; anything else
fails the test (the template scope, once global in the stack and regional in the driver, now agrees).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.gcp_inventory import PROJECT, REGION

from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.gcp.resources import TABLE
from vmplane.clouds.gcp.session import GcpClients, GcpTarget
from vmplane.envspec.load import load_spec
from vmplane.jobs.listings import find_job
from vmplane.settings import Settings
from vmplane.tf.generate import generate

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

EXAMPLES = ["gcp-fixed.jsonc", "gcp-web.jsonc"]
# Planned and made, but not observed on their own: parts of another resource.
NOT_OBSERVED = {
    "google_compute_router_nat",  # a part of its router (drift reads the router's NATs)
    "google_project_iam_member",  # a binding in the project's IAM policy, not a resource
}
# In the generated stack only: the known gaps between the two pipelines.
STACK_ONLY = {
    "google_compute_ssl_policy",  # a real gap: the direct pipeline leaves Google's default TLS policy
    "google_secret_manager_secret",  # the stack's record of the runtime settings (vmplane pushes them)
    "google_secret_manager_secret_version",
}
# Held but not planned: a managed instance group's members (the plan shows the group, which makes them).
MIG_MEMBERS = {"google_compute_instance"}
RESOURCE = re.compile(r'^resource "(\w+)" "\w+"', re.M)


def stack_types(example: Path) -> set[str]:
    files = generate(load_spec(example))
    return {t for name, text in files.items() if name.endswith(".tf") for t in RESOURCE.findall(text)}


@pytest.mark.parametrize("example", EXAMPLES)
def test_plan_sandbox_and_stack_agree_with_the_table(cli: Cli, sandbox: Sandbox, tmp_path: Path, example: str) -> None:
    env_file = write_env(tmp_path, f"gtable-{example.split('.')[0].removeprefix('gcp-')}", example=example)
    plan = cli.json("plan", "-f", str(env_file), "--sandbox")
    planned = {r["type"] for r in plan["resources"] if r["action"] == "+"}
    assert planned and planned <= TABLE.direct_types(), planned - TABLE.direct_types()

    applied = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert applied["status"] == "succeeded", applied["error"]
    job = find_job(Settings(home=cli.home), applied["id"])
    ctx = Context(job_id=job.id, spec=job.spec, infra=job.infra, tagger=Tagger.for_spec(job.spec, job.id))
    gcp = GcpClients(GcpTarget(project=PROJECT, region=REGION, endpoint_url=sandbox.gcp_endpoint))
    held = {TABLE.tf_type(o.kind) for o in TABLE.observe(gcp, ctx)}
    members = MIG_MEMBERS if any(p.mode == "asg" for p in job.spec.pools.values()) else set()
    assert held == (planned - NOT_OBSERVED) | members, (sorted(held - planned), sorted(planned - NOT_OBSERVED - held))

    stack = stack_types(env_file)
    assert stack <= TABLE.stack_types(), stack - TABLE.stack_types()
    assert planned - stack == set(), "the direct pipeline makes what the stack does not"
    assert stack - planned == STACK_ONLY & stack
    # The allow-list is the table's own: what it declares stack-only is exactly what is named above.
    assert {k.tf_type for k in TABLE.kinds if not k.direct} == STACK_ONLY
