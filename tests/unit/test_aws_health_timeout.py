"""The target group's health-check timeout is always below its interval, as ELB requires.

The old driver sent no HealthCheckTimeoutSeconds, so an HTTP target group took AWS's 6 s default: with
`intervalSeconds` 5 or 6 (which the spec allows, as AWS does) AWS answers ValidationError (the timeout
must be smaller than the interval); moto accepted it."""

from __future__ import annotations

import re
from pathlib import Path

import botocore.session
import pytest
from moto import settings as moto_settings

from vmplane.clouds.aws import lb
from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsTarget
from vmplane.envspec.load import load_spec
from vmplane.envspec.models import HealthCheck
from vmplane.tf.generate import generate

from .support import REGION, make_ctx, variant


def _range(member: str) -> tuple[int, int]:
    model = botocore.session.get_session().get_service_model("elbv2").operation_model("CreateTargetGroup")
    meta = model.input_shape.members[member].metadata
    return int(meta["min"]), int(meta["max"])


def test_every_interval_the_spec_allows_gets_a_valid_shorter_timeout():
    low, high = _range("HealthCheckTimeoutSeconds")
    interval = HealthCheck.model_fields["interval_seconds"].metadata
    spec_low = next(m.ge for m in interval if hasattr(m, "ge"))
    spec_high = next(m.le for m in interval if hasattr(m, "le"))
    assert (spec_low, spec_high) == _range("HealthCheckIntervalSeconds")  # the spec allows what AWS does
    for seconds in range(spec_low, spec_high + 1):
        timeout = lb.health_check_timeout(seconds)
        assert low <= timeout <= high and timeout < seconds
    assert lb.health_check_timeout(30) == 6  # AWS's own default where it is valid: no change for old groups


def test_the_target_group_is_created_with_the_timeout(aws, spec, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(moto_settings, "ACM_VALIDATION_WAIT", 0)
    aws.route53.create_hosted_zone(Name="example.test", CallerReference="zone-1")
    driver = AwsDriver(AwsTarget(region=REGION))
    ctx = make_ctx(variant(spec, loadBalancer={"domain": "app.example.test", "healthCheck": {"intervalSeconds": 5}}))
    aws_ids(ctx.infra).InstanceProfileArn = "arn:aws:iam::123456789012:instance-profile/vmplane-acme-demo-fixed-vm"
    sent: list[dict[str, object]] = []
    driver.aws.elbv2.meta.events.register(
        "before-parameter-build.elastic-load-balancing-v2.CreateTargetGroup", lambda params, **_: sent.append(params)
    )
    for step in (driver.preflight, driver.network.ensure, driver.pools.ensure_templates):
        step(ctx)
    driver.lb.ensure_frontend(ctx)
    driver.lb.ensure_backend(ctx)
    assert len(sent) == 1 and sent[0]["HealthCheckIntervalSeconds"] == 5
    assert sent[0].get("HealthCheckTimeoutSeconds") == 4


def test_the_terraform_stack_sends_the_same_timeout():
    """The generated stack set no `timeout` either: the provider then sends none and AWS takes 6 s."""
    files = generate(load_spec(Path(__file__).resolve().parents[2] / "examples" / "web.jsonc"))
    text = "\n".join(str(body) for body in files.values())
    assert re.search(r"timeout\s*=\s*min\(6, local\.lb\.healthCheck\.intervalSeconds - 1\)", text)
