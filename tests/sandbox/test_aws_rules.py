"""The AWS catalogue in-process: under moto, each rule's example sets up its state and the offending
request, and the rule answers AWS's code for it; every rule is sourced, unique and has an example."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from vmplane.sandbox.aws.rule import AwsRequest, Rule
from vmplane.sandbox.aws.rules import RULES, rules_for

# Rules moto enforces as well (kept: the catalogue states AWS's whole answer); every other rule's
# example is accepted by moto alone, which the test checks, so each is a leniency closed.
MOTO_REFUSES_TOO = frozenset(
    {
        "ec2.tags-over-50",
        "elbv2.listener-certificate-unknown",
        "elbv2.target-group-port-required",
        "elbv2.target-group-vpc-required",
        "iam.detach-not-attached",
        "route53.name-outside-zone",
        "s3.tag-key-aws-prefix",
    }
)


@pytest.fixture
def clients() -> Iterator[Any]:
    import boto3
    from moto import mock_aws

    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        os.environ.setdefault(key, value)
    with mock_aws():
        session = boto3.session.Session(region_name="us-east-1")
        made: dict[str, Any] = {}
        yield lambda service: made.setdefault(service, session.client(service))


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_answers_its_code_for_its_example(rule: Rule, clients: Any) -> None:
    assert rule.example is not None
    req = rule.example(clients)
    assert req.service == rule.service and req.operation in rule.operations
    assert rule in rules_for(req.service, req.operation)
    got = rule.check(req)
    assert got is not None, f"{rule.id} let its own example through"
    assert got.code == rule.code
    # The leniency: moto alone (the old sandbox) answers the same request without AWS's error.
    code = _moto_answer(clients, req)
    if rule.id in MOTO_REFUSES_TOO:
        assert code == rule.code, f"{rule.id}: moto now accepts it ({code}): take it off MOTO_REFUSES_TOO"
    else:
        assert code != rule.code, f"{rule.id}: moto refuses it too: list it in MOTO_REFUSES_TOO"


def _moto_answer(clients: Any, req: AwsRequest) -> str | None:
    from botocore import xform_name
    from botocore.exceptions import ClientError

    try:
        getattr(clients(req.service), xform_name(req.operation))(**req.params)
    except ClientError as e:
        return str(e.response["Error"]["Code"])
    except Exception as e:  # moto's own failure (a 500 on the wire): not AWS's answer either
        return f"moto raised {type(e).__name__}"
    return None


def test_every_rule_is_sourced_unique_and_exemplified() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for r in RULES:
        assert r.id.startswith(f"{r.service}."), r.id
        assert r.source.startswith(("https://docs.aws.amazon.com/", "https://github.com/")), r.id
        assert r.example is not None and r.summary and r.code and r.operations, r.id


def test_the_readme_lists_the_catalogue_as_generated() -> None:
    from pathlib import Path

    from vmplane.sandbox.aws.rules import markdown

    text = (Path(__file__).parents[2] / "README.md").read_text()
    begin, end = "<!-- aws-rules:begin -->\n", "<!-- aws-rules:end -->"
    assert text[text.index(begin) + len(begin) : text.index(end)] == markdown(), (
        "regenerate with: python -m vmplane.sandbox.aws.rules --markdown"
    )


def test_what_aws_has_deleted_no_longer_blocks_a_teardown(clients: Any) -> None:
    """moto keeps a deleted NAT gateway's interface (its address still mapped) and a terminated
    instance's: the in-use rules must not count them, or a destroy would retry until its deadline."""
    from vmplane.sandbox.aws.rules import ec2_network, ec2_routes

    ec2 = clients("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="g", Description="d", VpcId=vpc)["GroupId"]
    alloc = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=subnet, AllocationId=alloc)["NatGateway"]["NatGatewayId"]
    iid = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, SubnetId=subnet, SecurityGroupIds=[group])
    iid = iid["Instances"][0]["InstanceId"]

    def refused(rules: tuple[Rule, ...], operation: str, **params: Any) -> set[str]:
        req = AwsRequest("ec2", operation, params)
        return {r.id for r in rules if operation in r.operations and r.check(req) is not None}

    detach = {"InternetGatewayId": igw, "VpcId": vpc}
    assert refused(ec2_network.RULES, "DetachInternetGateway", **detach) == {"ec2.detach-igw-with-mapped-address"}
    assert refused(ec2_network.RULES, "DeleteSecurityGroup", GroupId=group) == {"ec2.delete-group-attached"}
    ec2.delete_nat_gateway(NatGatewayId=nat)
    ec2.terminate_instances(InstanceIds=[iid])
    assert refused(ec2_network.RULES, "DetachInternetGateway", **detach) == set()
    assert refused(ec2_routes.RULES, "ReleaseAddress", AllocationId=alloc) == set()
    assert refused(ec2_network.RULES, "DeleteSecurityGroup", GroupId=group) == set()
    assert refused(ec2_network.RULES, "DeleteSubnet", SubnetId=subnet) == set()
