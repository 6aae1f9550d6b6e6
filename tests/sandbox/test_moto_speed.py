"""vmplane/sandbox/aws/moto_speed.py: moto's tag lookup by id answers exactly what moto's own scan does."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from vmplane.sandbox.aws import moto_speed


@pytest.fixture
def ec2() -> Iterator[tuple[Any, Any]]:
    """An in-process moto EC2 (boto3 client, backend) with tagged and untagged resources of several kinds."""
    pytest.importorskip("moto")
    import boto3
    from moto import mock_aws
    from moto.ec2.models import ec2_backends

    keys = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    try:
        with mock_aws():
            client = boto3.client("ec2", region_name="us-east-1")
            yield client, ec2_backends["123456789012"]["us-east-1"]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _populate(client: Any) -> str:
    """Two jobs' VPCs, subnets, groups and instances (some terminated), one of each untagged; returns job a's id."""
    ami = client.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    for job in ("job-a", "job-b", None):
        tags = [{"Key": "zop:jobId", "Value": job}, {"Key": "Name", "Value": f"{job}-x*?"}] if job else []

        def spec(kind: str, tags: list[dict[str, str]] = tags) -> list[dict[str, Any]]:
            return [{"ResourceType": kind, "Tags": tags}] if tags else []

        vpc = client.create_vpc(CidrBlock="10.0.0.0/16", TagSpecifications=spec("vpc"))["Vpc"]["VpcId"]
        client.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", TagSpecifications=spec("subnet"))
        client.create_security_group(
            GroupName=f"g-{job}", Description="d", VpcId=vpc, TagSpecifications=spec("security-group")
        )
        run = client.run_instances(ImageId=ami, MinCount=3, MaxCount=3, TagSpecifications=spec("instance"))
        client.terminate_instances(InstanceIds=[run["Instances"][0]["InstanceId"]])
    return "job-a"


def test_each_resources_tags_are_the_ones_moto_finds_by_scanning(ec2: tuple[Any, Any]) -> None:
    from moto.ec2.models.core import TaggedEC2Resource

    client, backend = ec2
    _populate(client)
    resources = [
        *(i for r in backend.reservations.values() for i in r.instances),
        *backend.vpcs.values(),
        *(s for by_zone in backend.subnets.values() for s in by_zone.values()),
        *(g for by_vpc in backend.groups.values() for g in by_vpc.values()),
    ]
    assert len(resources) > 12 and any(not backend.tags.get(r.id) for r in resources)
    for resource in resources:
        assert moto_speed.get_tags(resource) == TaggedEC2Resource.get_tags(resource), resource.id


def test_tag_filtered_describes_answer_as_before_once_installed(
    ec2: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.ec2.models.core import TaggedEC2Resource

    client, _ = ec2
    job = _populate(client)

    def answers() -> list[Any]:
        f = [{"Name": "tag:zop:jobId", "Values": [job]}]
        return [
            client.describe_instances(Filters=f)["Reservations"],
            client.describe_vpcs(Filters=f)["Vpcs"],
            client.describe_subnets(Filters=f)["Subnets"],
            client.describe_security_groups(Filters=f)["SecurityGroups"],
            client.describe_tags(Filters=[{"Name": "resource-type", "Values": ["instance"]}])["Tags"],
        ]

    before = answers()
    monkeypatch.setattr(TaggedEC2Resource, "get_tags", TaggedEC2Resource.get_tags)  # undone after the test
    moto_speed.install()
    assert TaggedEC2Resource.get_tags is moto_speed.get_tags
    after = answers()
    assert after == before
    assert len(after[0]) == 1 and len(after[0][0]["Instances"]) == 3 and len(after[1]) == 1
