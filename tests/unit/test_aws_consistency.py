"""EC2's "not found yet" (clouds/aws/consistency.py): a NotFound naming an id this client's create
answered with moments ago is retried with backoff; one naming an unknown or old id is not.

The old driver had no such retry: CreateSubnet right after CreateVpc failed the step with
InvalidVpcID.NotFound under the fault profile's `visibility`."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from vmplane.clouds.aws import consistency
from vmplane.clouds.aws.consistency import RecentIds


def not_found(code: str = "InvalidVpcID.NotFound") -> tuple[Any, dict[str, Any]]:
    return SimpleNamespace(status_code=400), {"Error": {"Code": code, "Message": "does not exist"}}


def test_a_young_id_is_retried_and_an_unknown_one_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(consistency.time, "monotonic", lambda: now[0])
    recent = RecentIds()
    recent.after_call(parsed={"Vpc": {"VpcId": "vpc-0a1b2c3d4e5f60718"}}, model=SimpleNamespace(name="CreateVpc"))
    young = {"body": {"Action": "CreateSubnet", "VpcId": "vpc-0a1b2c3d4e5f60718"}}
    other = {"body": {"Action": "CreateSubnet", "VpcId": "vpc-00000000000000000"}}
    assert recent.needs_retry(response=not_found(), request_dict=young, attempts=1) == pytest.approx(0.2)
    assert recent.needs_retry(response=not_found(), request_dict=young, attempts=9) == consistency.MAX_DELAY
    assert recent.needs_retry(response=not_found(), request_dict=other, attempts=1) is None
    # Another error, or an id named only in a filter, is no "not yet".
    assert recent.needs_retry(response=not_found("InvalidParameterValue"), request_dict=young, attempts=1) is None
    filtered = {"body": {"Action": "DescribeSubnets", "Filter.1.Value.1": "vpc-0a1b2c3d4e5f60718"}}
    assert recent.needs_retry(response=not_found(), request_dict=filtered, attempts=1) is None
    # Bounded: past the window the id is really gone and the NotFound stands.
    now[0] += consistency.NOT_YET_WINDOW
    assert recent.needs_retry(response=not_found(), request_dict=young, attempts=1) is None


def test_describes_record_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    recent = RecentIds()
    recent.after_call(parsed={"Vpcs": [{"VpcId": "vpc-0a1b2c3d4e5f60718"}]}, model=SimpleNamespace(name="DescribeVpcs"))
    young = {"body": {"VpcId": "vpc-0a1b2c3d4e5f60718"}}
    assert recent.needs_retry(response=not_found(), request_dict=young, attempts=1) is None
