"""The teardown rule (clouds/aws/deletes.py) and the deletes that use it, against moto with injected
AWS errors: NotFound is done, DependencyViolation / "in use" retries until a deadline."""

from __future__ import annotations

import pytest

from vmplane.clouds import deletes, waits
from vmplane.clouds.aws import compute, network, network_teardown
from vmplane.clouds.aws.errors import aws_call
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.errors import DeadlineExceededError, InvalidRequestError
from vmplane.state import InfraConfig

from .faults import FakeClock, Inject, inject
from .support import job_tag_filter, make_ctx, network_ctx


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(waits, "time", fake)
    return fake


def _vpc(aws) -> str:
    return str(aws.ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"])


def test_a_missing_resource_is_done(aws, clock):
    gone = "vpc-0123456789abcdef0"
    assert deletes.delete(lambda: aws_call(aws.ec2.delete_vpc, VpcId=gone), what="delete") is False
    assert clock.sleeps == []


def test_in_use_is_retried_then_deleted(aws, clock):
    vpc = _vpc(aws)
    fault = inject(aws.ec2, Inject("DeleteVpc", "DependencyViolation", times=3))
    assert deletes.delete(lambda: aws_call(aws.ec2.delete_vpc, VpcId=vpc), what="delete") is True
    assert fault.calls == 4 and len(clock.sleeps) == 3
    assert not aws.ec2.describe_vpcs(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Vpcs"]


@pytest.mark.parametrize("code", ["ResourceInUse", "ResourceInUseException", "InvalidIPAddress.InUse"])
def test_every_spelling_of_in_use_is_retried(aws, clock, code):
    vpc = _vpc(aws)
    fault = inject(aws.ec2, Inject("DeleteVpc", code, times=1))
    deletes.delete(lambda: aws_call(aws.ec2.delete_vpc, VpcId=vpc), what="delete")
    assert fault.calls == 2


def test_in_use_past_the_deadline_fails_and_the_default_deadline_is_at_least_15_minutes(aws, clock):
    assert deletes.TEARDOWN_TIMEOUT >= 15 * 60
    vpc = _vpc(aws)
    inject(aws.ec2, Inject("DeleteVpc", "DependencyViolation", times=10_000))
    start = clock.now
    with pytest.raises(DeadlineExceededError, match="gave up on delete"):
        deletes.delete(lambda: aws_call(aws.ec2.delete_vpc, VpcId=vpc), what="delete")
    assert clock.now - start == pytest.approx(deletes.TEARDOWN_TIMEOUT)


def test_other_errors_fail_at_once(aws, clock):
    inject(aws.ec2, Inject("DeleteVpc", "InvalidParameterValue", times=1))
    with pytest.raises(InvalidRequestError):
        deletes.delete(lambda: aws_call(aws.ec2.delete_vpc, VpcId="vpc-1"), what="delete")
    assert clock.sleeps == []


# ---- C: the internet gateway while the NAT's EIP is still being released -----------------------------


@pytest.mark.parametrize("operation", ["DetachInternetGateway", "DeleteInternetGateway"])
def test_delete_network_retries_the_internet_gateway_through_dependency_violation(aws, spec, clock, operation):
    ctx = network_ctx(spec)
    network.ensure_network(aws, ctx)
    igw = aws_ids(ctx.infra).InternetGatewayID
    fault = inject(
        aws.ec2,
        Inject(operation, "DependencyViolation", message="Network vpc-1 has some mapped public address(es)", times=2),
    )
    network_teardown.delete_network(aws, ctx)
    assert fault.calls == 3  # two refusals, then the real call
    assert all(p["body"]["InternetGatewayId"] == igw for p in fault.params)  # the same request each time
    assert not aws.ec2.describe_internet_gateways(Filters=job_tag_filter())["InternetGateways"]
    assert not aws.ec2.describe_vpcs(Filters=[{"Name": "vpc-id", "Values": [ctx.infra.NetworkID or "x"]}])["Vpcs"]


# ---- B: a crash right after DeleteAutoScalingGroup ----------------------------------------------------


def test_delete_vms_treats_a_recorded_but_deleted_group_as_done(aws, spec, clock):
    # The record still names the group (the crash came before the checkpoint); AWS no longer has it.
    ctx = make_ctx(spec, InfraConfig(ScalingGroupID={"web": "vmplane-acme-gone-web"}))
    compute.delete_vms(aws, ctx)
    assert ctx.infra.ScalingGroupID == {}
