"""The crash sweep: kill -9 a real `vmplane apply` of examples/web.jsonc (an ASG behind an HTTPS LB)
right after each distinct mutating AWS operation it issues, resume it, and require the sandbox to hold
exactly what a clean apply leaves (tests/integration/sweep_inventory.py: every kind, normalised).
Then the same for `vmplane destroy` after each distinct delete: the resumed destroy ends `deleted` and
nothing of the environment remains. Each case kills one apply and then one destroy of the environment
that apply converged to (tests/integration/sweep_cases.py), so every kill point is a case of its own.

The operation lists below are what the clean reference run issues, read from the per-step API-call
tally the job records (`steps[].apiCalls`). They are parameters (xdist spreads the cases over workers),
so they are written out, and `test_the_sweep_covers_every_mutating_call` fails when the pipeline's
calls drift from them, printing the lists to paste.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.sweep_cases import Reference, assert_cases, killed_apply_then_killed_destroy, paired_params
from tests.integration.sweep_inventory import inventory, remaining

from vmplane.clouds.aws import naming
from vmplane.envspec.load import load_spec

MUTATING = re.compile(
    r"^(Create|Delete|Modify|Put|Attach|Detach|Associate|Disassociate|Authorize|Revoke|Register|Deregister"
    r"|Request|Change|Run|Update|Add|Remove|Set|Start|Stop|Terminate|Allocate|Release|Tag|Untag|Send|Replace"
    r"|Enable|Disable|Import|Upload|Reboot)"
)

APPLY_OPS = [
    "AddRoleToInstanceProfile",
    "AllocateAddress",
    "AssociateRouteTable",
    "AttachInternetGateway",
    "AttachLoadBalancerTargetGroups",
    "AttachRolePolicy",
    "AuthorizeSecurityGroupIngress",
    "ChangeResourceRecordSets",
    "CreateAutoScalingGroup",
    "CreateInstanceProfile",
    "CreateInternetGateway",
    "CreateLaunchTemplate",
    "CreateListener",
    "CreateLoadBalancer",
    "CreateNatGateway",
    "CreateRole",
    "CreateRoute",
    "CreateRouteTable",
    "CreateSecurityGroup",
    "CreateSubnet",
    "CreateTags",
    "CreateTargetGroup",
    "CreateVpc",
    "ModifyLoadBalancerAttributes",
    "ModifyTargetGroupAttributes",
    "ModifyVpcAttribute",
    "PutScalingPolicy",
    "RequestCertificate",
    "RevokeSecurityGroupEgress",
    "RevokeSecurityGroupIngress",
    "SendCommand",
    "UpdateAutoScalingGroup",
]
# Teardown steps run one after another, so "the first call in a later step" is a fixed `#N`.
DESTROY_OPS = [
    "ChangeResourceRecordSets",
    "DeleteAutoScalingGroup",
    "DeleteCertificate",
    "DeleteInstanceProfile",
    "DeleteInternetGateway",
    "DeleteLaunchTemplate",
    "DeleteListener",
    "DeleteLoadBalancer",
    "DeleteNatGateway",
    "DeleteRole",
    "DeleteRouteTable",
    "DeleteSecurityGroup",
    "DeleteSecurityGroup#2",
    "DeleteSubnet",
    "DeleteTargetGroup",
    "DeleteVpc",
    "DetachInternetGateway",
    "DetachLoadBalancerTargetGroups",
    "DetachRolePolicy",
    "DisassociateAddress",
    "DisassociateRouteTable",
    "ReleaseAddress",
    "RemoveRoleFromInstanceProfile",
    "RevokeSecurityGroupIngress",
    "UpdateAutoScalingGroup",
]
# Emulator gaps that keep a case from converging (strict: an xpass means the gap closed).
XFAIL: dict[str, str] = {}


def _case(op: str) -> str | None:
    """`ec2.CreateVpc` -> `CreateVpc` when it mutates (the hook names AWS operations without the service)."""
    name = op.split(".", 1)[1]
    return name if MUTATING.match(name) else None


def snapshot(sandbox: Sandbox, env_file: Path, job_id: str) -> dict[str, Any]:
    spec = load_spec(env_file)
    assert spec.load_balancer is not None
    return inventory(
        sandbox,
        job_id=job_id,
        org=spec.org,
        name=spec.name,
        domain=spec.load_balancer.domain,
        lb_name=naming.lb_base_name(spec),
    )


@pytest.fixture(scope="session")
def sandbox(sweep_sandbox: Sandbox) -> Sandbox:
    """Every case runs under tests/fixtures/faults/sweep.jsonc: killed runs resume through not-yet-visible
    ids and throttling, as on the real cloud."""
    return sweep_sandbox


@pytest.fixture(scope="module")
def reference(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """One clean apply and destroy per worker: the inventory every resumed apply must equal, and the
    API-call tallies the operation lists are checked against."""
    tmp = tmp_path_factory.mktemp("sweep-ref")
    cli = Cli(home=tmp / "home", sandbox_port=sandbox.port)
    env_file = write_env(tmp, "sw-ref", example="web.jsonc")
    applied = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert applied["status"] == "succeeded", applied["error"]
    inv = snapshot(sandbox, env_file, applied["id"])
    destroyed = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert destroyed["status"] == "deleted", destroyed["error"]
    assert not remaining(snapshot(sandbox, env_file, applied["id"]))
    met = sandbox.fault_tally()
    for fault in ("aws.throttle", "aws.visibility"):
        assert met[fault] > 0, f"the sweep's profile never injected {fault}: {dict(met)}"
    return Reference(applied, inv, destroyed)


@pytest.mark.sandbox
@pytest.mark.slow
def test_the_sweep_covers_every_mutating_call(reference: Reference) -> None:
    assert_cases(reference.applied, reference.destroyed, _case, APPLY_OPS, DESTROY_OPS)


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize(("index", "apply_op", "destroy_op"), paired_params(APPLY_OPS, DESTROY_OPS, XFAIL))
def test_apply_then_destroy_killed_at_each_call_converge(
    cli: Cli, sandbox: Sandbox, reference: Reference, tmp_path: Path, index: int, apply_op: str | None,
    destroy_op: str | None,
) -> None:  # fmt: skip
    env_file = write_env(tmp_path, f"sw-{index:02d}", example="web.jsonc")
    snap = partial(snapshot, sandbox, env_file)
    killed_apply_then_killed_destroy(
        cli, env_file, apply_op, destroy_op, snap, reference.snapshot, lambda j: remaining(snap(j))
    )
