"""What is checked before a job exists (jobs/precheck.py, CloudDriver.precheck), what a job that created
nothing is (jobs/forget.py, InfraConfig.created_ids), the sandbox and a real account as two targets
(store/job_rows.find_current_job), and messages shown as written, never as Rich markup."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from vmplane.cli.common import print_error
from vmplane.cli.render import show_job
from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.aws.session import AwsTarget
from vmplane.clouds.base import Context
from vmplane.clouds.errors import AuthError, InvalidRequestError
from vmplane.envspec.models import EnvSpec
from vmplane.jobs import precheck
from vmplane.jobs import service as svc
from vmplane.jobs.forget import forget, forgettable, holdings
from vmplane.jobs.service import JobConflictError, JobStatus, StepStatus
from vmplane.pipeline.plan import PROVISION_STEPS
from vmplane.settings import Settings
from vmplane.state import InfraConfig, VMRecord
from vmplane.store import db
from vmplane.target import Target

from .support import variant

REAL = "real"
SANDBOX = "http://127.0.0.1:4566"


class Refusing(AwsDriver):
    """The AWS driver with a preflight that fails as told, recording the context it was given."""

    def __init__(self, error: Exception | None) -> None:
        super().__init__(AwsTarget(region="us-east-1", endpoint_url=SANDBOX))
        self.error, self.seen = error, []  # type: ignore[var-annotated]

    def preflight(self, ctx: Context) -> None:
        self.seen.append(ctx)
        ctx.infra.Region = "written-by-preflight"
        if self.error is not None:
            raise self.error


def test_precheck_returns_the_refusal_and_leaves_the_recorded_infra_alone(spec: EnvSpec) -> None:
    driver = Refusing(InvalidRequestError("pools.web.instanceType: e2-small is not offered in us-east-1's zones"))
    recorded = InfraConfig(Region="us-east-1")
    assert driver.precheck(spec, "job-1", recorded) == [
        "pools.web.instanceType: e2-small is not offered in us-east-1's zones"
    ]
    assert recorded.Region == "us-east-1"  # preflight wrote into a copy
    (ctx,) = driver.seen
    assert ctx.job_id == "job-1" and ctx.tagger.job_id == "job-1"


def test_a_cloud_that_refuses_the_credentials_raises_instead_of_refusing_the_file(spec: EnvSpec) -> None:
    with pytest.raises(AuthError, match="expired"):
        Refusing(AuthError("the token expired")).precheck(spec, precheck.UNBORN_JOB)
    assert Refusing(None).precheck(spec, precheck.UNBORN_JOB) == []


def test_static_problems_read_no_target(spec: EnvSpec) -> None:
    assert precheck.static_problems(spec) == []
    pve = EnvSpec.model_validate(
        {
            "name": "p",
            "org": "acme",
            "provider": {"cloud": "proxmox", "endpoint": "https://pve.invalid:8006", "node": "pve1"},
            "pools": {"web": {"mode": "asg", "min": 1, "desired": 1, "max": 2, "template": "t"}},
        }
    )
    (problem,) = precheck.static_problems(pve)
    assert problem.startswith("pools.web.mode: Proxmox VE has no cloud autoscaler")


def test_issues_are_placed_at_the_field_or_its_parent() -> None:
    text = '{\n  "pools": {\n    "web": {\n      "mode": "asg"\n    }\n  }\n}\n'
    mode, pool, root = precheck.issues_at(text, ["pools.web.mode: no", "pools.web.schedule: no", "no field here"])
    assert (mode.path, mode.line, mode.col) == ("pools.web.mode", 4, 15)
    assert (pool.path, pool.line) == ("pools.web.schedule", 3)  # absent: its pool's position
    assert (root.path, root.message, root.line) == ("$", "no field here", 1)


def test_an_error_message_keeps_its_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    print_error("instance types do not exist: [e2-small] [InvalidInstanceType]")
    assert "[e2-small] [InvalidInstanceType]" in capsys.readouterr().err


# ---- records ----------------------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Any:
    s = Settings(home=tmp_path / "home")
    yield s
    with db.transaction(s.db_url) as session:
        session.get_bind().dispose()


def _job(settings: Settings, spec: EnvSpec, where: str, *, failed_at_validate: bool = True) -> svc.JobView:
    target = Target.for_spec(spec, None if where == REAL else where)
    with db.transaction(settings.db_url) as s:
        row = svc.create_job(s, spec, target, PROVISION_STEPS)
        if failed_at_validate:
            svc.update_step(s, row.id, "stepValidate", status=StepStatus.running)
            svc.update_step(s, row.id, "stepValidate", status=StepStatus.failed, error="refused")
            svc.set_status(s, row.id, JobStatus.failed, "stepValidate: refused")
        return svc.view(row)


def test_the_sandbox_and_a_real_account_each_have_their_current_job(settings: Settings, spec: EnvSpec) -> None:
    real = _job(settings, spec, REAL)
    sandboxed = _job(settings, spec, SANDBOX)  # the real job's failure does not block it
    with db.transaction(settings.db_url) as s:
        assert svc.find_current_job(s, spec.org, spec.name, False).id == real.id  # type: ignore[union-attr]
        assert svc.find_current_job(s, spec.org, spec.name, True).id == sandboxed.id  # type: ignore[union-attr]
    with pytest.raises(JobConflictError, match=f"already has job {real.id}"):
        _job(settings, spec, REAL)


def test_a_job_refused_at_validate_holds_nothing_and_is_forgotten(settings: Settings, spec: EnvSpec) -> None:
    job = _job(settings, spec, REAL)
    assert holdings(job) == [] and forgettable(job)
    gone = forget(settings, job)
    assert gone.status is JobStatus.deleted and gone.error == "stepValidate: refused"
    assert gone.config["forgottenAt"]
    with pytest.raises(JobConflictError, match="already deleted"):
        forget(settings, gone)


def test_a_job_that_recorded_a_vm_or_ran_a_creating_step_is_not_forgotten(settings: Settings, spec: EnvSpec) -> None:
    job = _job(settings, spec, REAL)
    with db.transaction(settings.db_url) as s:
        infra = InfraConfig(VMs=[VMRecord(Name="demo-web-0", Pool="web", Index=0)], NetworkID="vpc-1")
        infra.NetworkCreated = True
        svc.save_infra(s, job.id, infra)
        svc.update_step(s, job.id, "stepCreateNetwork", status=StepStatus.failed, error="x")
        job = svc.view(svc.get_row(s, job.id))
    held = holdings(job)
    assert held[0] == "VMs (demo-web-0)" and "NetworkID vpc-1" in held
    assert "steps that create ran (stepCreateNetwork)" in held
    with pytest.raises(JobConflictError, match=rf"may hold cloud resources: .*`vmplane destroy --job {job.id}`"):
        forget(settings, job)


def test_a_pending_job_is_never_forgotten(settings: Settings, spec: EnvSpec) -> None:
    job = _job(settings, variant(spec, name="pending"), REAL, failed_at_validate=False)
    assert not forgettable(job)
    with pytest.raises(JobConflictError, match="pending"):
        forget(settings, job)


def test_show_job_prints_the_error_as_written(settings: Settings, spec: EnvSpec) -> None:
    job = _job(settings, spec, REAL)
    with db.transaction(settings.db_url) as s:
        svc.set_status(s, job.id, JobStatus.failed, "stepValidate: do not exist: [e2-small]")
        job = svc.view(svc.get_row(s, job.id))
    con = Console(record=True, width=200)
    show_job(con, job)
    assert "do not exist: [e2-small]" in con.export_text()


def test_the_static_check_loads_no_cloud_sdk() -> None:
    # `vmplane validate` must stay fast (bench/startup.py fails when it loads boto3): the capabilities are
    # read from clouds/<cloud>/capabilities.py, not from the drivers.
    import subprocess
    import sys

    code = (
        "import sys; from vmplane.clouds import registry; from vmplane.envspec.load import load_spec\n"
        "for ex in ('fixed', 'gcp-fixed', 'proxmox'):\n"
        "    assert registry.static_problems(load_spec(f'examples/{ex}.jsonc')) == [], ex\n"
        "heavy = [m for m in ('boto3', 'botocore', 'googleapiclient', 'proxmoxer', 'sqlalchemy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
