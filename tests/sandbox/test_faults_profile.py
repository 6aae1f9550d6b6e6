"""Fault profiles (sandbox/faults.py): the file's errors name the file and the field; the AWS middleware
answers each fault in the protocol's shape; the same seed and the same requests give the same faults.

The old sandbox had no fault profile at all: every request below got moto's (or the GCP sandbox's)
plain answer, so each of these tests fails against it."""

from __future__ import annotations

import io
import json
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from vmplane.sandbox.aws.request import service_model
from vmplane.sandbox.faults import Injector, Profile, ProfileError, load
from vmplane.sandbox.faults_aws import AwsFaults

CI = Path(__file__).parents[1] / "fixtures" / "faults" / "ci.jsonc"
EXAMPLE = Path(__file__).parents[2] / "examples" / "faults" / "realistic.jsonc"
SCOPE = "AWS4-HMAC-SHA256 Credential=testing/20261203/us-east-1/{}/aws4_request, SignedHeaders=host, Signature=x"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def moto_stub(answer: bytes) -> Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]:
    """A stand-in for moto's app: 200 with a fixed body, recording that it was reached."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "text/xml")])
        return [answer]

    return app


def call(app: AwsFaults, service: str, params: dict[str, str], path: str = "/") -> tuple[str, bytes]:
    """One signed form request, as boto3 sends EC2's and the query services' (their API version included)."""
    version = {"Version": service_model(service).api_version} if service else {}
    body = urllib.parse.urlencode({**params, **version}).encode()
    environ = {
        "PATH_INFO": path,
        "REQUEST_METHOD": "POST",
        "CONTENT_TYPE": "application/x-www-form-urlencoded; charset=utf-8",
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_AUTHORIZATION": SCOPE.format(service),
        "QUERY_STRING": "",
        "wsgi.input": io.BytesIO(body),
    }
    seen: dict[str, str] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        seen["status"] = status

    out = b"".join(app(environ, start_response))
    return seen["status"], out


def test_shipped_profiles_load() -> None:
    assert load(CI).seed == 25
    realistic = load(EXAMPLE)
    assert realistic.throttle is not None and realistic.capacity is not None and realistic.iam_propagation is not None


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"seed": 1, "throttle": {"rate": 2}}', "throttle.rate"),
        ('{"seed": 1, "capacity": {"rate": 0.1, "zone": "a"}}', "capacity.zone"),
        ('{"throttle": {"rate": 0.1}}', "seed"),
        ('{"seed": 1, "visibility": {"seconds": 1, "kinds": ["bucket"]}}', "visibility.kinds"),
    ],
)
def test_profile_errors_name_the_file_and_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "bad.jsonc"
    path.write_text(text)
    with pytest.raises(ProfileError) as err:
        load(path)
    assert str(path) in str(err.value) and field in str(err.value)


def test_throttle_answers_in_each_protocols_shape() -> None:
    """EC2: 503 RequestLimitExceeded; query services: 400 Throttling. (Old sandbox: 200 from moto.)"""
    app = AwsFaults(moto_stub(b"<ok/>"), Injector(Profile(seed=1, throttle={"rate": 1.0, "burst": 1})))
    status, body = call(app, "ec2", {"Action": "DescribeVpcs"})
    assert status.startswith("503") and b"<Code>RequestLimitExceeded</Code>" in body
    status, body = call(app, "iam", {"Action": "GetRole", "RoleName": "r"})
    assert status.startswith("400") and b"<Code>Throttling</Code>" in body
    assert app.faults.tally == {"aws.throttle": 2}


def test_control_paths_are_never_faulted() -> None:
    app = AwsFaults(moto_stub(b"<html>moto</html>"), Injector(Profile(seed=1, throttle={"rate": 1.0})))
    status, body = call(app, "", {}, path="/moto-api/reset")
    assert status.startswith("200") and body == b"<html>moto</html>"
    status, body = call(app, "", {}, path="/_sandbox/faults")
    assert json.loads(body)["tally"] == {}


def test_a_new_vpc_is_not_found_until_its_visibility_delay_passed() -> None:
    """Old sandbox: the VPC is visible to the very next request."""
    clock = Clock()
    injector = Injector(Profile(seed=1, visibility={"seconds": 2, "kinds": ["vpc"]}), clock=clock)
    app = AwsFaults(
        moto_stub(b"<CreateVpcResponse><vpc><vpcId>vpc-0a1b2c3d</vpcId></vpc></CreateVpcResponse>"), injector
    )
    assert call(app, "ec2", {"Action": "CreateVpc", "CidrBlock": "10.0.0.0/16"})[0].startswith("200")
    status, body = call(app, "ec2", {"Action": "CreateSubnet", "VpcId": "vpc-0a1b2c3d"})
    assert status.startswith("400") and b"<Code>InvalidVpcID.NotFound</Code>" in body
    # A filter naming it matches nothing on EC2 rather than failing: left to moto.
    assert call(
        app, "ec2", {"Action": "DescribeSubnets", "Filter.1.Name": "vpc-id", "Filter.1.Value.1": "vpc-0a1b2c3d"}
    )[0].startswith("200")
    clock.now += 2
    assert call(app, "ec2", {"Action": "CreateSubnet", "VpcId": "vpc-0a1b2c3d"})[0].startswith("200")


def test_a_new_instance_profile_is_refused_through_its_launch_template() -> None:
    """Old sandbox: CreateAutoScalingGroup accepted a template naming a profile made a moment before."""
    clock = Clock()
    injector = Injector(Profile(seed=1, iamPropagation={"seconds": 5}), clock=clock)
    app = AwsFaults(moto_stub(b"<r><launchTemplateId>lt-0123456789abcdef0</launchTemplateId></r>"), injector)
    call(app, "iam", {"Action": "CreateInstanceProfile", "InstanceProfileName": "p"})
    call(
        app,
        "ec2",
        {
            "Action": "CreateLaunchTemplate",
            "LaunchTemplateName": "t",
            "LaunchTemplateData.IamInstanceProfile.Name": "p",
        },
    )
    asg = {"Action": "CreateAutoScalingGroup", "LaunchTemplate.LaunchTemplateId": "lt-0123456789abcdef0"}
    status, body = call(app, "autoscaling", asg)
    assert status.startswith("400") and b"<Code>ValidationError</Code>" in body
    assert b"Invalid IAM Instance Profile name" in body
    status, body = call(app, "ec2", {"Action": "RunInstances", "LaunchTemplate.LaunchTemplateName": "t"})
    assert b"<Code>InvalidParameterValue</Code>" in body
    clock.now += 5
    assert call(app, "autoscaling", asg)[0].startswith("200")


def test_first_uses_are_refused_however_late_they_come() -> None:
    """The CI profile's `firstUses`: with `seconds` alone, a machine slow enough to reach RunInstances after
    the delay never met the fault (the lifecycle test then failed on a tally of 0)."""
    clock = Clock()
    injector = Injector(Profile(seed=1, iamPropagation={"seconds": 5, "firstUses": 1}), clock=clock)
    app = AwsFaults(moto_stub(b"<ok/>"), injector)
    call(app, "iam", {"Action": "CreateInstanceProfile", "InstanceProfileName": "p"})
    clock.now += 60
    run = {"Action": "RunInstances", "IamInstanceProfile.Name": "p"}
    status, body = call(app, "ec2", run)
    assert status.startswith("400") and b"<Code>InvalidParameterValue</Code>" in body
    assert call(app, "ec2", run)[0].startswith("200")
    assert injector.tally["aws.iamPropagation"] == 1


def test_capacity_names_the_zone_of_the_subnet() -> None:
    """Old sandbox: RunInstances always had capacity."""
    injector = Injector(Profile(seed=1, capacity={"rate": 1.0}))
    subnet = (
        b"<r><subnet><subnetId>subnet-0123abcd</subnetId><availabilityZone>us-east-1b</availabilityZone></subnet></r>"
    )
    app = AwsFaults(moto_stub(subnet), injector)
    call(app, "ec2", {"Action": "CreateSubnet", "VpcId": "vpc-1", "AvailabilityZone": "us-east-1b"})
    status, body = call(
        app, "ec2", {"Action": "RunInstances", "SubnetId": "subnet-0123abcd", "InstanceType": "t3.small"}
    )
    assert status.startswith("500") and b"<Code>InsufficientInstanceCapacity</Code>" in body
    assert b"t3.small capacity in the Availability Zone you requested (us-east-1b)" in body


def _faults_of(seed: int) -> list[dict[str, Any]]:
    app = AwsFaults(
        moto_stub(b"<ok/>"), Injector(Profile(seed=seed, throttle={"rate": 0.3, "burst": 2}, capacity={"rate": 0.3}))
    )
    for i in range(60):
        call(app, "ec2", {"Action": "RunInstances" if i % 3 == 0 else "DescribeVpcs"})
    return app.faults.events


def test_the_same_seed_gives_the_same_faults() -> None:
    first = _faults_of(7)
    assert first and first == _faults_of(7)
    assert {e["fault"] for e in first} == {"throttle", "capacity"}
    assert _faults_of(8) != first
