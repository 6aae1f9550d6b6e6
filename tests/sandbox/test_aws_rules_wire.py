"""The AWS catalogue through the wire: each rule's example against a strict sandbox served in this
process (moto reset before each), where the real call must raise ClientError with the rule's code, and
against the old sandbox (the same app built lenient: moto alone), which answered it otherwise: OK for
almost all (a leniency closed), or another code (listed in test_aws_rules.MOTO_REFUSES_TOO when moto
refuses with the same code). Also the extras: ACM issues once its record exists, a NAT gateway without
an internet gateway fails, the Ubuntu 24.04 parameter resolves, ELB takes 50 tags."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore import xform_name
from botocore.config import Config
from botocore.exceptions import ClientError
from tests.sandbox.test_aws_rules import MOTO_REFUSES_TOO

from vmplane.sandbox.aws.rule import AwsRequest, Clients, Rule
from vmplane.sandbox.aws.rules import RULES

# The old sandbox here shares this process's moto, extras installed: where an extra already gives AWS's
# answer, moto alone (the in-process test, no extras) is what showed the leniency.
ANSWERED_BY_AN_EXTRA = frozenset({"elbv2.tags-over-50"})


def _serve(lenient: bool) -> Iterator[str]:
    from vmplane.sandbox.aws import extras
    from vmplane.sandbox.aws.app import build_app, serve

    extras.install()
    server = serve(build_app(lenient=lenient))
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.fixture(scope="module")
def strict() -> Iterator[str]:
    yield from _serve(lenient=False)


@pytest.fixture(scope="module")
def old() -> Iterator[str]:
    """moto alone, as the sandbox was before issue 25 (same process, so the same moto state)."""
    yield from _serve(lenient=True)


def _clients(endpoint: str) -> Clients:
    config = Config(retries={"max_attempts": 1})
    made: dict[str, Any] = {}

    def make(service: str) -> Any:
        if service not in made:
            made[service] = boto3.client(
                service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                aws_secret_access_key="testing", config=config,
            )  # fmt: skip
        return made[service]

    return make


def _reset(endpoint: str) -> None:
    with urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=30):
        pass


def _answer(clients: Clients, req: AwsRequest) -> str:
    try:
        getattr(clients(req.service), xform_name(req.operation))(**req.params)
    except ClientError as e:
        return str(e.response["Error"]["Code"])
    return "OK"


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_the_sandbox_answers_as_aws(rule: Rule, strict: str, old: str) -> None:
    """Old sandbox: accepted each example (OK) or answered another code, except MOTO_REFUSES_TOO."""
    assert rule.example is not None
    _reset(strict)
    req = rule.example(_clients(strict))
    assert _answer(_clients(strict), req) == rule.code
    before = _answer(_clients(old), req)
    if rule.id in ANSWERED_BY_AN_EXTRA:
        return
    assert (before == rule.code) == (rule.id in MOTO_REFUSES_TOO), f"the old sandbox answered {before}"


def _network(c: Clients, gateway: bool) -> str:
    vpc = c("ec2").create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    if gateway:
        igw = c("ec2").create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
        c("ec2").attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    return str(c("ec2").create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"])


@pytest.mark.parametrize("gateway", [False, True])
def test_a_nat_gateway_without_an_internet_gateway_fails(strict: str, gateway: bool) -> None:
    """The old sandbox made it `available` either way."""
    _reset(strict)
    c = _clients(strict)
    alloc = c("ec2").allocate_address(Domain="vpc")["AllocationId"]
    nat = c("ec2").create_nat_gateway(SubnetId=_network(c, gateway), AllocationId=alloc)["NatGateway"]
    found = c("ec2").describe_nat_gateways(NatGatewayIds=[nat["NatGatewayId"]])["NatGateways"][0]
    assert found["State"] == ("available" if gateway else "failed")
    if not gateway:
        assert found.get("FailureCode") == "Gateway.NotAttached"


def test_a_certificate_is_issued_only_once_its_record_exists(strict: str) -> None:
    """The old sandbox (MOTO_ACM_VALIDATION_WAIT=0) answered ISSUED at once, with no record anywhere."""
    _reset(strict)
    c = _clients(strict)
    zone = c("route53").create_hosted_zone(Name="example.com", CallerReference="acm")["HostedZone"]["Id"]
    arn = c("acm").request_certificate(DomainName="web.example.com", ValidationMethod="DNS")["CertificateArn"]
    cert = c("acm").describe_certificate(CertificateArn=arn)["Certificate"]
    assert cert["Status"] == "PENDING_VALIDATION"
    record = cert["DomainValidationOptions"][0]["ResourceRecord"]
    rrset = {"Name": record["Name"], "Type": "CNAME", "TTL": 300, "ResourceRecords": [{"Value": record["Value"]}]}
    c("route53").change_resource_record_sets(
        HostedZoneId=zone, ChangeBatch={"Changes": [{"Action": "CREATE", "ResourceRecordSet": rrset}]}
    )
    assert c("acm").describe_certificate(CertificateArn=arn)["Certificate"]["Status"] == "ISSUED"


def test_the_ubuntu_2404_parameter_resolves_to_an_image(strict: str) -> None:
    """The old sandbox answered ParameterNotFound."""
    from vmplane.sandbox.aws.extras import UBUNTU_2404_PARAMETER

    c = _clients(strict)
    ami = c("ssm").get_parameter(Name=UBUNTU_2404_PARAMETER)["Parameter"]["Value"]
    assert c("ec2").describe_images(ImageIds=[ami])["Images"]


def test_a_target_group_takes_fifty_tags(strict: str) -> None:
    """The old sandbox refused the eleventh tag (TooManyTags) where AWS allows fifty."""
    _reset(strict)
    c = _clients(strict)
    vpc = c("ec2").create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    arn = c("elbv2").create_target_group(Name="web", Protocol="HTTP", Port=80, VpcId=vpc)["TargetGroups"][0]
    tags = [{"Key": f"k{i}", "Value": "v"} for i in range(50)]
    c("elbv2").add_tags(ResourceArns=[arn["TargetGroupArn"]], Tags=tags)
    with pytest.raises(ClientError) as e:
        c("elbv2").add_tags(ResourceArns=[arn["TargetGroupArn"]], Tags=[{"Key": "one-more", "Value": "v"}])
    assert e.value.response["Error"]["Code"] == "TooManyTags"


def test_scheduled_action_names_are_per_group(strict: str) -> None:
    """The old sandbox kept one action per name: the second group's `stop` replaced the first's."""
    _reset(strict)
    c = _clients(strict)
    subnet = _network(c, gateway=False)
    c("ec2").create_launch_template(LaunchTemplateName="web", LaunchTemplateData={"ImageId": "ami-12c6146b"})
    asg = c("autoscaling")
    for group in ("a", "b"):
        asg.create_auto_scaling_group(
            AutoScalingGroupName=group, LaunchTemplate={"LaunchTemplateName": "web"}, MinSize=0, MaxSize=1,
            VPCZoneIdentifier=subnet,
        )  # fmt: skip
        asg.put_scheduled_update_group_action(
            AutoScalingGroupName=group, ScheduledActionName="stop", Recurrence="0 20 * * *", MinSize=0
        )
    for group in ("a", "b"):
        found = asg.describe_scheduled_actions(AutoScalingGroupName=group)["ScheduledUpdateGroupActions"]
        assert [a["ScheduledActionName"] for a in found] == ["stop"]
    asg.delete_scheduled_action(AutoScalingGroupName="a", ScheduledActionName="stop")
    assert asg.describe_scheduled_actions(AutoScalingGroupName="a")["ScheduledUpdateGroupActions"] == []
    assert len(asg.describe_scheduled_actions(AutoScalingGroupName="b")["ScheduledUpdateGroupActions"]) == 1
