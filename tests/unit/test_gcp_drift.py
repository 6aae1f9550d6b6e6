"""GCP drift without a cloud: the power state a Fixed VM should be in (a stopped pool, a schedule's hours),
and the resource table's shape (every kind once, each part not observed on its own or not made by the
direct pipeline says why). The drift found and repaired on the sandbox is tests/integration/test_gcp_drift.py."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests.unit.support import make_ctx, variant

from vmplane.clouds.gcp.drift import wanted_status
from vmplane.clouds.gcp.resources import TABLE
from vmplane.envspec.load import load_spec
from vmplane.state import InfraConfig, VMRecord

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OFFICE = {"timezone": "Europe/Berlin", "days": "Mon-Fri", "start": "08:00", "stop": "19:00"}
WEDNESDAY_NOON = datetime(2026, 12, 2, 11, 0, tzinfo=UTC)  # 12:00 in Berlin: inside the office hours
WEDNESDAY_NIGHT = datetime(2026, 12, 2, 22, 0, tzinfo=UTC)  # 23:00 in Berlin: outside them


def test_a_vm_should_run_unless_its_pool_is_stopped_or_its_schedule_has_it_off() -> None:
    spec = load_spec(EXAMPLES / "gcp-fixed.jsonc")
    vm = VMRecord(Name="demo-gcp-fixed-web-0", Pool="web", Index=0, ID="demo-gcp-fixed-web-0", AZ="us-central1-a")
    plain = make_ctx(spec, InfraConfig(VMs=[vm]))
    assert wanted_status(plain, vm, WEDNESDAY_NIGHT) == "RUNNING"
    stopped = make_ctx(spec, InfraConfig(VMs=[vm], StoppedPools=["web"]))
    assert wanted_status(stopped, vm, WEDNESDAY_NOON) == "TERMINATED"  # `vmplane stop` wins over the hours
    office = make_ctx(variant(spec, pools={"web": {"schedule": OFFICE}}), InfraConfig(VMs=[vm]))
    assert wanted_status(office, vm, WEDNESDAY_NOON) == "RUNNING"
    assert wanted_status(office, vm, WEDNESDAY_NIGHT) is None  # the schedule's to stop: not started, not drift


def test_every_kind_is_a_google_type_and_each_one_not_observed_or_not_made_directly_says_why() -> None:
    assert all(k.tf_type.startswith("google_") for k in TABLE.kinds)
    assert len(TABLE.tf_types()) == len(TABLE.kinds)  # one kind per Terraform type
    for k in TABLE.kinds:
        if k.observe is None or not k.direct:
            assert k.note, k.kind
    # Not observed on their own: parts of another resource, or what the direct pipeline does not make.
    unobserved = {k.kind for k in TABLE.kinds if k.observe is None}
    assert unobserved == {"router-nat", "iam-member", "secret", "secret-version", "secret-iam-member", "ssl-policy"}
    assert {k.kind for k in TABLE.kinds if not k.direct} == {"secret", "secret-version", "ssl-policy"}
