"""jobs/service.py on a temporary SQLite file, migrated by Alembic on first use."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from sqlalchemy import inspect, text

from vmplane.clouds.aws.ids import AwsInfra, aws_ids
from vmplane.jobs import service as svc
from vmplane.jobs.service import JobConflictError, JobNotFoundError, JobStatus, Phase, StepStatus
from vmplane.pipeline.plan import PROVISION_STEPS, TEARDOWN_STEPS
from vmplane.state import InfraConfig
from vmplane.store import db, job_rows
from vmplane.store.job_records import OperationStatus
from vmplane.target import Target

from .support import variant


@pytest.fixture
def url(tmp_path):
    url = "sqlite:///" + str(tmp_path / "x.db")
    yield url
    with db.transaction(url) as session:
        session.get_bind().dispose()


@pytest.fixture
def target(spec):
    return Target.for_spec(spec, "http://127.0.0.1:4566")


@pytest.fixture
def job_id(url, spec, target):
    with db.transaction(url) as s:
        return svc.create_job(s, spec, target, PROVISION_STEPS).id


def _row(url, job_id):
    with db.transaction(url) as s:
        return svc.view(svc.get_row(s, job_id))


def test_alembic_created_the_tables(url):
    with db.transaction(url) as s:
        insp = inspect(s.get_bind())
        tables = set(insp.get_table_names())
        assert {"jobs", "environments", "api_tokens", "alembic_version"} <= tables
        assert {c["name"] for c in insp.get_columns("jobs")} >= {
            "id",
            "org",
            "env_name",
            "status",
            "version",
            "config",
            "steps",
            "teardown_steps",
            "error",
            "created_at",
            "updated_at",
        }
        uniques = [u["column_names"] for u in insp.get_unique_constraints("environments")]
        assert ["org", "name"] in uniques
        assert s.execute(text("select version_num from alembic_version")).scalar_one() == "2026_12_01_0003"
        assert {c["name"] for c in insp.get_columns("api_tokens")} == {
            "id",
            "org",
            "role",
            "token_hash",
            "created_at",
            "revoked_at",
        }


def test_create_job(url, spec, target, job_id):
    job = _row(url, job_id)
    assert re.fullmatch(r"job-\d{8}-[0-9a-f]{8}", job.id)
    assert (job.org, job.env, job.status, job.version) == ("acme", "demo-fixed", JobStatus.pending, 1)
    assert [s.name for s in job.steps] == PROVISION_STEPS
    assert all(s.status is StepStatus.pending and s.started_at is None for s in job.steps)
    assert job.teardown_steps == []
    assert job.spec == spec
    assert job.infra == InfraConfig()
    assert job.target == target and job.target.sandbox
    assert job.error is None


def test_a_second_job_for_the_same_environment_is_refused(url, spec, target, job_id):
    for status in (JobStatus.pending, JobStatus.succeeded, JobStatus.failed, JobStatus.delete_failed):
        with db.transaction(url) as s:
            svc.set_status(s, job_id, status)
        with pytest.raises(JobConflictError, match=job_id), db.transaction(url) as s:
            svc.create_job(s, spec, target, PROVISION_STEPS)
    # Another environment name, or another org, is another environment.
    with db.transaction(url) as s:
        svc.create_job(s, variant(spec, name="demo-two"), target, PROVISION_STEPS)
        svc.create_job(s, variant(spec, org="other"), target, PROVISION_STEPS)
    # Once deleted, the name is free again.
    with db.transaction(url) as s:
        svc.set_status(s, job_id, JobStatus.deleted)
    with db.transaction(url) as s:
        again = svc.create_job(s, spec, target, PROVISION_STEPS).id
    assert again != job_id
    with db.transaction(url) as s:
        assert svc.find_current_job(s, "acme", "demo-fixed").id == again
        assert len(svc.list_jobs(s)) == 4
        assert len(svc.list_jobs(s, org="other")) == 1


def test_the_failed_create_left_nothing_behind(url, spec, target, job_id):
    with pytest.raises(JobConflictError), db.transaction(url) as s:
        svc.create_job(s, spec, target, PROVISION_STEPS)
    with db.transaction(url) as s:
        assert [r.id for r in svc.list_jobs(s)] == [job_id]


def test_unknown_job(url, job_id):
    with pytest.raises(JobNotFoundError), db.transaction(url) as s:
        svc.get_row(s, "job-nope")


def test_update_step_transitions_and_timestamps(url, job_id):
    with db.transaction(url) as s:
        svc.update_step(s, job_id, "stepValidate", status=StepStatus.running)
    step = _row(url, job_id).steps[0]
    assert step.status is StepStatus.running
    assert isinstance(step.started_at, datetime) and step.finished_at is None

    with db.transaction(url) as s:
        svc.update_step(
            s,
            job_id,
            "stepValidate",
            status=StepStatus.failed,
            error="boom",
            api_calls={"sts.GetCallerIdentity": 1, "ec2.DescribeImages": 2},
            log=["resolved"],
        )
    failed = _row(url, job_id).steps[0]
    assert failed.status is StepStatus.failed and failed.error == "boom"
    assert failed.started_at == step.started_at and failed.finished_at >= failed.started_at
    assert list(failed.api_calls) == ["ec2.DescribeImages", "sts.GetCallerIdentity"]  # sorted
    assert failed.log == ["resolved"]

    # A retry starts the step again: fresh start time, error and finish cleared.
    with db.transaction(url) as s:
        svc.update_step(s, job_id, "stepValidate", status=StepStatus.running)
    retried = _row(url, job_id).steps[0]
    assert retried.started_at >= failed.finished_at
    assert retried.finished_at is None and retried.error is None
    with db.transaction(url) as s:
        svc.update_step(s, job_id, "stepValidate", status=StepStatus.succeeded)
        svc.update_step(s, job_id, "stepCreateNetwork", status=StepStatus.skipped)
    steps = _row(url, job_id).steps
    assert [s.status for s in steps[:2]] == [StepStatus.succeeded, StepStatus.skipped]
    assert steps[1].finished_at is not None and steps[1].started_at is None
    assert all(s.status is StepStatus.pending for s in steps[2:])
    assert [s.name for s in steps] == PROVISION_STEPS  # updated in place, order kept


def test_version_increments_on_every_write(url, spec, job_id):
    def version():
        return _row(url, job_id).version

    writes = [
        lambda s: svc.update_step(s, job_id, "stepValidate", status=StepStatus.running),
        lambda s: svc.save_infra(s, job_id, InfraConfig(NetworkID="vpc-1")),
        lambda s: svc.set_status(s, job_id, JobStatus.running),
        lambda s: job_rows.next_workflow_attempt(s, job_id, "provision"),
        lambda s: svc.set_status(s, job_id, JobStatus.failed, error="x"),
        lambda s: svc.replace_spec(s, job_id, spec, PROVISION_STEPS),
        lambda s: svc.set_status(s, job_id, JobStatus.succeeded),
        lambda s: svc.begin_teardown(s, job_id, TEARDOWN_STEPS),
        lambda s: svc.update_step(s, job_id, "stepTerminateVMs", phase=Phase.teardown, status=StepStatus.running),
    ]
    before = _row(url, job_id)
    assert before.version == 1
    for n, write in enumerate(writes, start=2):
        with db.transaction(url) as s:
            write(s)
        assert version() == n
    after = _row(url, job_id)
    assert after.updated_at >= before.updated_at
    assert after.created_at == before.created_at
    assert after.infra.NetworkID == "vpc-1"


def test_save_infra_round_trips(url, job_id):
    infra = InfraConfig(NetworkID="vpc-1", Zones=["us-east-1a"], LaunchTemplateVersion={"web": 2})
    with db.transaction(url) as s:
        svc.save_infra(s, job_id, infra)
    job = _row(url, job_id)
    assert job.infra == infra
    assert job.config["spec"]["name"] == "demo-fixed"  # the rest of config is kept


def test_next_workflow_attempt_counts_per_kind(url, job_id):
    with db.transaction(url) as s:
        assert [job_rows.next_workflow_attempt(s, job_id, "provision") for _ in range(2)] == [1, 2]
        assert job_rows.next_workflow_attempt(s, job_id, "teardown") == 1
        assert job_rows.current_attempt(svc.get_row(s, job_id), "provision") == 2


@pytest.mark.parametrize("status", [JobStatus.pending, JobStatus.running])
def test_begin_teardown_refuses_an_active_job(url, job_id, status):
    with db.transaction(url) as s:
        svc.set_status(s, job_id, status)
    with pytest.raises(JobConflictError, match=status.value), db.transaction(url) as s:
        svc.begin_teardown(s, job_id, TEARDOWN_STEPS)
    assert _row(url, job_id).status is status


def test_begin_teardown_refuses_a_deleted_job(url, job_id):
    with db.transaction(url) as s:
        svc.set_status(s, job_id, JobStatus.deleted)
    with pytest.raises(JobConflictError, match="already deleted"), db.transaction(url) as s:
        svc.begin_teardown(s, job_id, TEARDOWN_STEPS)


@pytest.mark.parametrize("status", [JobStatus.succeeded, JobStatus.failed, JobStatus.delete_failed])
def test_begin_teardown_of_a_settled_job(url, job_id, status):
    with db.transaction(url) as s:
        svc.set_status(s, job_id, status, error="earlier failure")
    with db.transaction(url) as s:
        svc.begin_teardown(s, job_id, TEARDOWN_STEPS)
    job = _row(url, job_id)
    assert job.status is JobStatus.deleting and job.error is None
    assert [t.name for t in job.teardown_steps] == TEARDOWN_STEPS
    assert all(t.status is StepStatus.pending for t in job.teardown_steps)


def test_resuming_a_teardown_keeps_its_progress(url, job_id):
    with db.transaction(url) as s:
        svc.set_status(s, job_id, JobStatus.succeeded)
        svc.begin_teardown(s, job_id, TEARDOWN_STEPS)
        svc.update_step(s, job_id, "stepDetachLoadBalancer", phase=Phase.teardown, status=StepStatus.succeeded)
    with db.transaction(url) as s:
        svc.begin_teardown(s, job_id, TEARDOWN_STEPS)  # still deleting: a resume
    job = _row(url, job_id)
    assert job.teardown_steps[0].status is StepStatus.succeeded
    assert job.steps[0].status is StepStatus.pending  # the provision steps are untouched


def test_register_and_unregister_env(url, spec, job_id):
    with db.transaction(url) as s:
        svc.register_env(s, svc.get_row(s, job_id), {"vms": 2})
    with db.transaction(url) as s:
        (env,) = svc.list_envs(s)
        assert (env.org, env.name, env.job_id, env.cloud, env.region) == (
            "acme",
            "demo-fixed",
            job_id,
            "aws",
            "us-east-1",
        )
        assert env.outputs == {"vms": 2}
        # Registering again (a re-run of stepRegisterSpace) updates, never duplicates.
        svc.register_env(s, svc.get_row(s, job_id), {"vms": 3})
    with db.transaction(url) as s:
        assert [e.outputs for e in svc.list_envs(s)] == [{"vms": 3}]
        assert svc.list_envs(s, org="other") == []
        svc.unregister_env(s, "acme", "demo-fixed")
        svc.unregister_env(s, "acme", "demo-fixed")  # twice is fine
    with db.transaction(url) as s:
        assert svc.list_envs(s) == []


def test_a_failed_unit_of_work_is_rolled_back(url, job_id):
    with pytest.raises(RuntimeError), db.transaction(url) as s:
        svc.set_status(s, job_id, JobStatus.running)
        raise RuntimeError("crash inside the unit of work")
    job = _row(url, job_id)
    assert job.status is JobStatus.pending and job.version == 1


def test_side_by_side_steps_never_overwrite_each_others_infra(url, job_id):
    # Two steps of one wave read the record at the same moment, then each saves only what it changed.
    network = _row(url, job_id).infra
    identity = _row(url, job_id).infra
    base_network = network.model_dump(mode="json")
    base_identity = identity.model_dump(mode="json")
    network.NetworkID = "vpc-1"
    aws_ids(network).VpcCidr = "10.40.0.0/16"  # both write into the cloud's sub-model: merged key by key
    aws_ids(identity).RoleName = "role-1"
    with db.transaction(url) as s:
        svc.save_infra(s, job_id, network, base_network)
    with db.transaction(url) as s:
        svc.save_infra(s, job_id, identity, base_identity)
    infra = _row(url, job_id).infra
    assert (infra.NetworkID, aws_ids(infra).VpcCidr, aws_ids(infra).RoleName) == ("vpc-1", "10.40.0.0/16", "role-1")
    # A writer that clears a field clears it, and leaves the others' fields alone.
    base = infra.model_dump(mode="json")
    aws_ids(infra).RoleName = None
    with db.transaction(url) as s:
        svc.save_infra(s, job_id, infra, base)
    after = _row(url, job_id).infra
    assert aws_ids(after).RoleName is None and aws_ids(after).VpcCidr == "10.40.0.0/16"
    # Without a base the whole record is written: the last writer wins (what the merge prevents).
    with db.transaction(url) as s:
        svc.save_infra(s, job_id, InfraConfig(Cloud=AwsInfra(RoleName="role-1")))
    assert _row(url, job_id).infra.NetworkID is None


def test_an_operation_needs_a_provisioned_job_and_records_its_own_steps(url, job_id, spec):
    with db.transaction(url) as s:
        with pytest.raises(JobConflictError, match="is pending"):
            svc.begin_operation(s, job_id, "rotate", {}, ["stepRotateVMs"])
        svc.set_status(s, job_id, JobStatus.succeeded)
    with db.transaction(url) as s:
        op = svc.begin_operation(s, job_id, "scale", {"pool": "web"}, ["stepScalePool", "stepRegisterSpace"])
    job = _row(url, job_id)
    assert job.status is JobStatus.pending
    assert job.operation is not None and job.operation.id == op.id and job.operation.kind == "scale"
    assert [s.name for s in job.steps_of(Phase.operation)] == ["stepScalePool", "stepRegisterSpace"]
    with db.transaction(url) as s:
        svc.update_step(s, job_id, "stepScalePool", phase=Phase.operation, status=StepStatus.succeeded)
        svc.set_operation_status(s, job_id, OperationStatus.failed, error="boom")
        svc.set_status(s, job_id, JobStatus.failed, "boom")
    job = _row(url, job_id)
    assert job.steps_of(Phase.operation)[0].status is StepStatus.succeeded
    assert [s.status for s in job.steps] == [StepStatus.pending] * len(PROVISION_STEPS)
    # A failed operation does not block the next one; the previous goes to the history.
    with db.transaction(url) as s:
        svc.begin_operation(s, job_id, "rotate", {}, ["stepRotateVMs"])
    job = _row(url, job_id)
    assert job.operation.kind == "rotate"
    assert [h["kind"] for h in job.config["operationHistory"]] == ["scale"]
    assert job.config["operationHistory"][0]["status"] == "failed"


def test_an_operation_on_a_deleted_job_is_refused(url, job_id):
    with db.transaction(url) as s:
        svc.set_status(s, job_id, JobStatus.deleted)
    with db.transaction(url) as s, pytest.raises(JobConflictError, match="no environment to change"):
        svc.begin_operation(s, job_id, "detach_lb", {}, ["stepDetachLoadBalancer"])


def test_two_writers_of_the_same_version_never_lose_an_update(url, job_id):
    from sqlalchemy.orm.exc import StaleDataError

    # Both read version 1; the first write wins, the second fails instead of overwriting it.
    sessions = [db.transaction(url) for _ in range(2)]
    first, second = (cm.__enter__() for cm in sessions)
    a, b = svc.get_row(first, job_id), svc.get_row(second, job_id)
    assert a.version == b.version == 1
    a.error = "first"
    sessions[0].__exit__(None, None, None)
    b.error = "second"
    with pytest.raises(StaleDataError):
        second.flush()
    sessions[1].__exit__(StaleDataError, StaleDataError(), None)
    row = _row(url, job_id)
    assert (row.error, row.version) == ("first", 2)
