"""clouds/aws/retag.py on moto: a tags edit reaches every tagged resource of a job with a load balancer."""

from __future__ import annotations

import pytest
from moto import settings as moto_settings

from vmplane.clouds.aws import certs, inventory, lb, retag
from vmplane.clouds.base import Tagger
from vmplane.envspec.models import EnvSpec

from .support import JOB_ID, make_ctx, variant
from .test_aws_lb import _attach, _provisioned

NEW = {"team": "web-platform", "owner": "alice"}


@pytest.fixture(autouse=True)
def _certificates_issue_at_once(monkeypatch):
    monkeypatch.setattr(moto_settings, "ACM_VALIDATION_WAIT", 0)


@pytest.fixture
def zone(aws):
    return aws.route53.create_hosted_zone(Name="example.test", CallerReference="z")["HostedZone"]["Id"].split("/")[-1]


def _user(tags):
    return {t["Key"]: t["Value"] for t in tags if not t["Key"].startswith(("zop:", "aws:")) and t["Key"] != "Name"}


def test_retag_replaces_the_user_tags_everywhere(aws, spec, zone):
    driver, ctx = _provisioned(variant(spec, tags={"team": "platform", "costCenter": "cc-1234"}))
    _attach(driver, ctx)
    data = ctx.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    edited = make_ctx(EnvSpec.model_validate({**data, "tags": NEW}), ctx.infra)  # changed, added, removed
    assert retag.retag(aws, edited) > 0

    t = Tagger.for_spec(edited.spec, JOB_ID)
    elb = lb.job_elb_resources(aws, t)
    # EC2's tag API, not each Describe: moto's DescribeLaunchTemplates echoes the tags given at creation.
    ids = [rid for _, rid, _ in inventory.job_ec2_resources(aws, edited)]
    described = aws.ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": ids}])["Tags"]
    sets = {
        "ec2": [[t for t in described if t["ResourceId"] == rid] for rid in ids],
        "elb": [tags for _, tags in elb],
        "listeners": [tags for _, tags in lb.job_listeners(aws, t, [a for a, _ in elb if ":loadbalancer/" in a])],
        "certificates": [tags for _, tags in certs.job_certificates(aws, t)],
    }
    assert all(sets.values())
    assert {k: [_user(x) for x in v if _user(x) != NEW] for k, v in sets.items()} == {k: [] for k in sets}
