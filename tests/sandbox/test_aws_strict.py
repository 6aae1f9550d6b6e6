"""The AWS sandbox checks every request against botocore's model before moto sees it (issue 25).

Each case sends, through boto3 with its own validation off (so the request reaches the wire), what AWS's
front end refuses, and asserts AWS's code and the member's path in the message; then the same request
against the old sandbox (moto alone: the layer built lenient, in this process) shows what it answered
instead (noted in each case as `moto`), so each case fails there.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError
from tests.helpers import Sandbox

pytestmark = pytest.mark.sandbox

ROLE_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
)
TARGET = {"Arn": "arn:aws:lambda:us-east-1:123456789012:function:f", "RoleArn": "arn:aws:iam::123456789012:role/r"}
Clients = Callable[[str], Any]


def _rrset(action: str = "CREATE", ttl: int = 300, name: str = "a.strict.example", kind: str = "A") -> dict[str, Any]:
    record = {"Name": name, "Type": kind, "TTL": ttl, "ResourceRecords": [{"Value": "192.0.2.1"}]}
    return {"Changes": [{"Action": action, "ResourceRecordSet": record}]}


def _zone(c: Clients) -> str:
    zone = c("route53").create_hosted_zone(Name="strict.example", CallerReference=f"z-{id(c)}")
    return str(zone["HostedZone"]["Id"]).rsplit("/", 1)[-1]


def _vpc(c: Clients) -> str:
    return str(c("ec2").create_vpc(CidrBlock="10.6.0.0/16")["Vpc"]["VpcId"])


def _bucket(c: Clients) -> str:
    c("s3").create_bucket(Bucket="strict-bucket")
    return "strict-bucket"


@dataclass(frozen=True)
class Case:
    id: str
    protocol: str
    call: Callable[[Clients], Any]
    code: str
    path: str  # the member's path as AWS names it in the message
    moto: str  # what the old sandbox answered


CASES = [
    Case(
        "ec2-required",
        "ec2",
        lambda c: c("ec2").create_tags(Resources=["vpc-12345678"]),
        "MissingParameter",
        "parameter Tag",
        "InvalidVpcID.NotFound: it looked the resource up, never saw that Tags is required",
    ),
    Case(
        "ec2-type",
        "ec2",
        lambda c: c("ec2").describe_instances(MaxResults="abc"),
        "InvalidParameterValue",
        "parameter MaxResults",
        "500 with an HTML page (ValueError in moto's parser)",
    ),
    Case(
        "ec2-enum",
        "ec2",
        lambda c: c("ec2").create_vpc(CidrBlock="10.9.0.0/16", InstanceTenancy="bogus"),
        "InvalidParameterValue",
        "parameter InstanceTenancy",
        "200: a VPC with InstanceTenancy 'bogus'",
    ),
    Case(
        "iam-required",
        "query",
        lambda c: c("iam").create_role(RoleName="strict-r1"),
        "ValidationError",
        "at 'assumeRolePolicyDocument'",
        "200: a role with no trust policy",
    ),
    Case(
        "iam-pattern",
        "query",
        lambda c: c("iam").create_role(RoleName="bad name", AssumeRolePolicyDocument=ROLE_POLICY),
        "ValidationError",
        "at 'roleName' failed to satisfy constraint: Member must satisfy regular expression pattern",
        "200: a role named 'bad name'",
    ),
    Case(
        "elbv2-range",
        "query",
        lambda c: c("elbv2").create_target_group(
            Name="strict-tg", Protocol="HTTP", Port=80, VpcId=_vpc(c), HealthyThresholdCount=11
        ),
        "ValidationError",
        "at 'healthyThresholdCount' failed to satisfy constraint: Member must have value less than or equal to 10",
        "200: a target group healthy after 11 checks",
    ),
    Case(
        "autoscaling-type",
        "query",
        lambda c: c("autoscaling").create_auto_scaling_group(AutoScalingGroupName="a", MinSize="x", MaxSize=1),
        "ValidationError",
        "at 'minSize'",
        "500 with an HTML page (ValueError in moto's parser)",
    ),
    Case(
        "autoscaling-length",
        "query",
        lambda c: c("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["a" * 256]),
        "ValidationError",
        "at 'autoScalingGroupNames.1.member' failed to satisfy constraint: Member must have length less than or equal to 255",  # noqa: E501
        "200: no groups",
    ),
    Case(
        "sts-range",
        "query",
        lambda c: c("sts").assume_role(
            RoleArn="arn:aws:iam::123456789012:role/r", RoleSessionName="strict", DurationSeconds=60
        ),
        "ValidationError",
        "at 'durationSeconds' failed to satisfy constraint: Member must have value greater than or equal to 900",
        "200: credentials for 60 seconds",
    ),
    Case(
        "acm-enum",
        "json",
        lambda c: c("acm").request_certificate(DomainName="strict.example", ValidationMethod="BOGUS"),
        "ValidationException",
        "at 'validationMethod' failed to satisfy constraint: Member must satisfy enum value set: [EMAIL, DNS, HTTP]",
        "200: a certificate requested with validation method BOGUS",
    ),
    Case(
        "acm-list-size",
        "json",
        lambda c: c("acm").request_certificate(
            DomainName="strict.example", SubjectAlternativeNames=[f"a{i}.strict.example" for i in range(101)]
        ),
        "ValidationException",
        "at 'subjectAlternativeNames' failed to satisfy constraint: Member must have length less than or equal to 100",
        "LimitExceededException (a quota, not the model's list size)",
    ),
    Case(
        "ssm-range",
        "json",
        lambda c: c("ssm").send_command(
            DocumentName="AWS-RunShellScript", InstanceIds=["i-12345678"], TimeoutSeconds=1
        ),
        "ValidationException",
        "at 'timeoutSeconds' failed to satisfy constraint: Member must have value greater than or equal to 30",
        "200: a command with a 1-second timeout",
    ),
    Case(
        "ssm-type",
        "json",
        lambda c: c("ssm").send_command(
            DocumentName="AWS-RunShellScript", InstanceIds=["i-12345678"], TimeoutSeconds="soon"
        ),
        "ValidationException",
        "at 'timeoutSeconds' failed to satisfy constraint: Member must be of type integer",
        "500 with an HTML page (ValueError in moto)",
    ),
    Case(
        "ssm-required",
        "json",
        lambda c: c("ssm").send_command(InstanceIds=["i-12345678"]),
        "ValidationException",
        "Value null at 'documentName' failed to satisfy constraint: Member must not be null",
        "200: a command with no document",
    ),
    Case(
        "route53-enum",
        "rest-xml",
        lambda c: c("route53").change_resource_record_sets(HostedZoneId=_zone(c), ChangeBatch=_rrset(kind="BOGUS")),
        "InvalidInput",
        "at 'changeBatch.changes.1.member.resourceRecordSet.type' failed to satisfy constraint: Member must satisfy",
        "200: a record of type BOGUS",
    ),
    Case(
        "route53-range",
        "rest-xml",
        lambda c: c("route53").change_resource_record_sets(HostedZoneId=_zone(c), ChangeBatch=_rrset(ttl=-5)),
        "InvalidInput",
        "at 'changeBatch.changes.1.member.resourceRecordSet.tTL' failed to satisfy constraint",
        "200: a record with TTL -5",
    ),
    Case(
        "route53-length",
        "rest-xml",
        lambda c: c("route53").create_hosted_zone(Name="strict.example", CallerReference=""),
        "InvalidInput",
        "at 'callerReference' failed to satisfy constraint: Member must have length greater than or equal to 1",
        "201: a zone with an empty caller reference",
    ),
    Case(
        "s3-enum",
        "rest-xml",
        lambda c: c("s3").put_bucket_versioning(Bucket=_bucket(c), VersioningConfiguration={"Status": "Sometimes"}),
        "MalformedXML",
        "versioningConfiguration.status",
        "200: versioning status 'Sometimes'",
    ),
    Case(
        "scheduler-pattern",
        "rest-json",
        lambda c: c("scheduler").create_schedule(
            Name="bad name!", ScheduleExpression="rate(1 hour)", FlexibleTimeWindow={"Mode": "OFF"}, Target=TARGET
        ),
        "ValidationException",
        "at 'name' failed to satisfy constraint: Member must satisfy regular expression pattern",
        "200: a schedule named 'bad name!'",
    ),
    Case(
        "scheduler-range",
        "rest-json",
        lambda c: c("scheduler").create_schedule(
            Name="strict-range",
            ScheduleExpression="rate(1 hour)",
            FlexibleTimeWindow={"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 0},
            Target=TARGET,
        ),
        "ValidationException",
        "at 'flexibleTimeWindow.maximumWindowInMinutes' failed to satisfy constraint",
        "200: a flexible window of 0 minutes",
    ),
    Case(
        "scheduler-required",
        "rest-json",
        lambda c: c("scheduler").create_schedule(Name="strict-req", FlexibleTimeWindow={"Mode": "OFF"}, Target=TARGET),
        "ValidationException",
        "Value null at 'scheduleExpression' failed to satisfy constraint: Member must not be null",
        "500 with an HTML page (AttributeError in moto)",
    ),
]


def _clients(endpoint: str) -> Clients:
    config = Config(parameter_validation=False, retries={"max_attempts": 1})

    def make(service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=config,
        )

    return make


def _serve(lenient: bool) -> Iterator[str]:
    from vmplane.sandbox.aws.app import build_app, serve

    server = serve(build_app(lenient=lenient))
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.fixture(scope="module")
def old_sandbox() -> Iterator[str]:
    """moto alone, as the sandbox was before issue 25 (the strict layer built lenient), in this process."""
    yield from _serve(lenient=True)


@pytest.fixture(scope="module")
def local_strict() -> Iterator[str]:
    """A strict sandbox of this process's own, for what would disturb the session's (moto's reset)."""
    yield from _serve(lenient=False)


def _answer(call: Callable[[Clients], Any], clients: Clients) -> tuple[str, str]:
    try:
        call(clients)
    except ClientError as e:
        return str(e.response["Error"]["Code"]), str(e.response["Error"].get("Message", ""))
    except ResponseParserError as e:  # the old sandbox's 500 HTML pages
        return "unparsable", str(e)[:80]
    return "OK", ""


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_model_refuses_what_aws_refuses(case: Case, sandbox: Sandbox, old_sandbox: str) -> None:
    code, message = _answer(case.call, _clients(sandbox.endpoint))
    assert (code, case.path in message) == (case.code, True), message
    if case.protocol not in ("ec2", "rest-xml") or case.code == "InvalidInput":
        assert message.startswith("1 validation error detected: "), message
    old_code, old_message = _answer(case.call, _clients(old_sandbox))
    assert old_code != code, f"moto answered the same code ({case.moto}): {old_message}"


def test_every_protocol_and_check_kind_has_a_case() -> None:
    kinds = {c.id.split("-", 1)[1].replace("list-", "") for c in CASES}
    assert {c.protocol for c in CASES} == {"ec2", "query", "json", "rest-xml", "rest-json"}
    assert {"required", "type", "enum", "pattern", "length", "size", "range"} <= kinds


def test_valid_requests_still_reach_moto(sandbox: Sandbox) -> None:
    """The layer refuses only what the model does: ordinary calls of each protocol are answered by moto."""
    c = _clients(sandbox.endpoint)
    vpc = c("ec2").create_vpc(
        CidrBlock="10.8.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": [{"Key": "k", "Value": "v é"}]}]
    )
    assert vpc["Vpc"]["Tags"] == [{"Key": "k", "Value": "v é"}]
    c("iam").create_role(RoleName="strict-ok", AssumeRolePolicyDocument=ROLE_POLICY, Tags=[{"Key": "a", "Value": "b"}])
    assert c("acm").request_certificate(DomainName="ok.strict.example", ValidationMethod="DNS")["CertificateArn"]
    zone = c("route53").create_hosted_zone(Name="ok.strict.example", CallerReference="strict-ok")["HostedZone"]["Id"]
    c("route53").change_resource_record_sets(
        HostedZoneId=zone.rsplit("/", 1)[-1], ChangeBatch=_rrset(name="a.ok.strict.example")
    )
    c("s3").create_bucket(Bucket="strict-ok")
    c("s3").put_object(Bucket="strict-ok", Key="a/b c+d.txt", Body=b"x")
    assert c("s3").get_object(Bucket="strict-ok", Key="a/b c+d.txt")["Body"].read() == b"x"
    c("s3").copy_object(Bucket="strict-ok", Key="copy", CopySource="strict-ok/a/b c+d.txt")
    c("scheduler").create_schedule(
        Name="strict-ok", ScheduleExpression="rate(1 hour)", FlexibleTimeWindow={"Mode": "OFF"}, Target=TARGET
    )


def _status(endpoint: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{endpoint}/_vmplane/strict", timeout=10) as r:
        return dict(json.loads(r.read()))


def test_refusals_are_tallied_by_rule_id(sandbox: Sandbox) -> None:
    before = _status(sandbox.endpoint)["refusals"].get("scheduler.model.pattern", 0)
    code, _ = _answer(CASES[[c.id for c in CASES].index("scheduler-pattern")].call, _clients(sandbox.endpoint))
    status = _status(sandbox.endpoint)
    assert status["checked"]["scheduler"] >= 1
    assert (code, status["refusals"]["scheduler.model.pattern"], status["lenient"]) == (
        "ValidationException",
        before + 1,
        False,
    )


def test_moto_api_reset_passes_untouched(local_strict: str) -> None:
    c = _clients(local_strict)
    c("ec2").create_vpc(
        CidrBlock="10.7.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": [{"Key": "reset", "Value": "me"}]}]
    )
    req = urllib.request.Request(f"{local_strict}/moto-api/reset", method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200
    assert c("ec2").describe_vpcs(Filters=[{"Name": "tag:reset", "Values": ["me"]}])["Vpcs"] == []


def _signed(endpoint: str, service: str, body: str, headers: dict[str, str]) -> tuple[int, bytes]:
    request = AWSRequest(method="POST", url=f"{endpoint}/", data=body.encode(), headers=headers)
    SigV4Auth(Credentials("testing", "testing"), service, "us-east-1").add_auth(request)
    prepared = urllib.request.Request(request.url, data=body.encode(), headers=dict(request.headers), method="POST")
    try:
        with urllib.request.urlopen(prepared, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_unknown_operations_and_services_pass_to_moto(local_strict: str) -> None:
    """An action the model does not know, and a service the layer does not check (SQS), reach moto as sent:
    what moto answers for them is its own (no refusal of the layer's, counted as passed)."""
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    _signed(local_strict, "ec2", "Action=NoSuchAction&Version=2016-11-15", form)
    c = _clients(local_strict)
    queue = c("sqs").create_queue(QueueName="strict-passes")["QueueUrl"]
    assert queue.endswith("/strict-passes")
    status = _status(local_strict)
    assert (status["refusals"], status["passed"].get("not a checked service's operation", 0) >= 2) == ({}, True)


def test_lenient_only_by_explicit_env(monkeypatch: pytest.MonkeyPatch) -> None:
    from vmplane.sandbox.aws.app import StrictLayer, build_app

    for value, lenient in (("1", True), ("0", False), ("true", False), (None, False)):
        if value is None:
            monkeypatch.delenv("VMPLANE_SANDBOX_LENIENT", raising=False)
        else:
            monkeypatch.setenv("VMPLANE_SANDBOX_LENIENT", value)
        app = build_app()
        assert isinstance(app, StrictLayer) and app.lenient is lenient, value
