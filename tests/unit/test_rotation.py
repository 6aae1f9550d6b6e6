"""Updates as the seed says: a new template version replaces nothing by itself; `rotate` replaces the
outdated VMs of a Fixed pool one at a time without the pool ever dropping below its size; ASG pools get
an instance refresh request."""

from __future__ import annotations

import pytest
from botocore.stub import Stubber
from moto import settings as moto_settings

from vmplane.clouds.aws import asg, instances, rotation
from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsTarget
from vmplane.envspec.models import EnvSpec
from vmplane.jobs.service import spec_json
from vmplane.state import VMState

from .support import JOB_ID, REGION, make_ctx, variant


@pytest.fixture(autouse=True)
def _certificates_issue_at_once(monkeypatch):
    monkeypatch.setattr(moto_settings, "ACM_VALIDATION_WAIT", 0)


def _provision(spec, pools=None, **changes):
    driver = AwsDriver(AwsTarget(region=REGION))
    spec = variant(spec, **changes)
    if pools is not None:  # replaced whole, not merged
        spec = EnvSpec.model_validate({**spec_json(spec), "pools": pools})
    ctx = make_ctx(spec)
    aws_ids(ctx.infra).InstanceProfileArn = "arn:aws:iam::123456789012:instance-profile/vmplane-acme-demo-fixed-vm"
    for step in (driver.preflight, driver.network.ensure, driver.pools.ensure_templates, driver.pools.ensure_vms):
        step(ctx)
    return driver, ctx


def _update(ctx, spec_changes):
    """What an `update` operation does for a vm change: the new spec over the recorded infra."""
    return make_ctx(variant(ctx.spec, **spec_changes), ctx.infra)


def _live(aws):
    f = [
        {"Name": "tag:zop:jobId", "Values": [JOB_ID]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]},
    ]
    return [i for r in aws.ec2.describe_instances(Filters=f)["Reservations"] for i in r["Instances"]]


def test_a_user_data_change_makes_a_new_version_and_marks_vms_outdated_without_replacing(aws, spec):
    driver, ctx = _provision(spec)
    before = sorted(i["InstanceId"] for i in _live(driver.aws))
    ctx = _update(ctx, {"bootstrap": {"mode": "bare"}})  # user-data changes
    driver.pools.ensure_templates(ctx)
    driver.pools.ensure_vms(ctx)
    assert ctx.infra.LaunchTemplateVersion["web"] == 2
    assert sorted(i["InstanceId"] for i in _live(driver.aws)) == before  # nothing rotated by itself
    assert [v.Name for v in ctx.infra.outdated_vms()] == ["demo-fixed-web-0", "demo-fixed-web-1"]


def test_rotate_replaces_one_at_a_time_never_below_the_pool_size(aws, spec):
    driver, ctx = _provision(spec)
    ctx = _update(ctx, {"bootstrap": {"mode": "bare"}})
    driver.pools.ensure_templates(ctx)
    old = {v.Name: v.ID for v in ctx.infra.VMs}

    # Follow every launch and termination as it is sent, counting the pool's live VMs after each.
    live = len(old)
    lowest, events = live, []

    def track(model, params, **_):
        nonlocal live, lowest
        if model.name == "RunInstances":
            live += 1
            events.append(("launch", params["ClientToken"]))
        elif model.name == "TerminateInstances":
            live -= len(params["InstanceIds"])
            events.append(("terminate", params["InstanceIds"]))
        lowest = min(lowest, live)

    driver.aws.ec2.meta.events.register("before-parameter-build.ec2.*", track)
    notes = driver.pools.rotate(ctx, "web")

    assert lowest == 2 and live == 2
    assert [e[0] for e in events] == ["launch", "terminate", "launch", "terminate"]
    assert events[1][1] == [old["demo-fixed-web-0"]] and events[3][1] == [old["demo-fixed-web-1"]]
    assert ctx.infra.outdated_vms() == []
    assert [v.Name for v in ctx.infra.VMs] == list(old)  # the same stable names
    for vm in ctx.infra.VMs:
        assert old[vm.Name] != vm.ID and vm.LaunchTemplateVersion == 2 and vm.State is VMState.ready
        assert vm.ReplacementID is None
    assert sorted(i["InstanceId"] for i in _live(driver.aws)) == sorted(v.ID for v in ctx.infra.VMs)
    assert "replaced 2 VMs one at a time" in notes[0]


def test_rotate_behind_a_load_balancer_registers_the_new_vm_and_drains_the_old(aws, spec):
    aws.route53.create_hosted_zone(Name="example.test", CallerReference="z")
    driver, ctx = _provision(spec, loadBalancer={"domain": "app.example.test"})
    for step in (driver.lb.ensure_frontend, driver.lb.ensure_backend, driver.lb.ensure_listener):
        step(ctx)
    ctx = _update(ctx, {"pools": {"web": {"diskGb": 30}}})
    driver.pools.ensure_templates(ctx)
    driver.pools.rotate(ctx, "web")
    health = driver.aws.elbv2.describe_target_health(TargetGroupArn=aws_ids(ctx.infra).TargetGroupArn)
    registered = {h["Target"]["Id"]: h["TargetHealth"]["State"] for h in health["TargetHealthDescriptions"]}
    assert registered == {v.ID: "healthy" for v in ctx.infra.VMs}


def test_a_rotation_interrupted_after_the_launch_does_not_launch_twice(aws, spec):
    driver, ctx = _provision(spec)
    ctx = _update(ctx, {"bootstrap": {"mode": "bare"}})
    driver.pools.ensure_templates(ctx)
    vm = ctx.infra.VMs[0]
    # The crash: the replacement was launched, then the process died before recording it.
    instances.run_instance(driver.aws, ctx, "web", vm.Name, vm.SubnetID, token_suffix="v2")
    assert len(_live(driver.aws)) == 3
    driver.pools.rotate(ctx, "web")
    assert len(_live(driver.aws)) == 2
    assert all(v.LaunchTemplateVersion == 2 for v in ctx.infra.VMs)


def test_nothing_outdated_means_nothing_replaced(aws, spec):
    driver, ctx = _provision(spec)
    ids = sorted(i["InstanceId"] for i in _live(driver.aws))
    notes = driver.pools.rotate(ctx, "web")
    assert notes == ["web: every VM runs template v1"]
    assert sorted(i["InstanceId"] for i in _live(driver.aws)) == ids


def test_an_asg_pool_is_rotated_by_an_instance_refresh_request(aws, spec):
    asg_pool = {"web": {"mode": "asg", "min": 1, "max": 3, "desired": 2}}
    driver, ctx = _provision(spec, pools=asg_pool)
    ctx = _update(ctx, {"bootstrap": {"mode": "bare"}})
    driver.pools.ensure_templates(ctx)
    assert len(ctx.infra.outdated_vms()) == 2
    group = ctx.infra.ScalingGroupID["web"]
    expected = {
        "AutoScalingGroupName": group,
        "Strategy": "Rolling",
        "DesiredConfiguration": {
            "LaunchTemplate": {"LaunchTemplateId": ctx.infra.LaunchTemplateID["web"], "Version": "$Latest"}
        },
        "Preferences": {
            "MinHealthyPercentage": 100,
            "MaxHealthyPercentage": 200,
            "InstanceWarmup": ctx.spec.bootstrap.timeout_seconds,
            "SkipMatching": True,
        },
    }
    # moto does not implement StartInstanceRefresh: the request is checked here, answered by a stub.
    with Stubber(driver.aws.autoscaling) as stub:
        stub.add_response("start_instance_refresh", {"InstanceRefreshId": "ir-1"}, expected)
        notes = rotation.rotate_pool(driver.aws, ctx, "web")
        stub.assert_no_pending_responses()
    assert notes == [f"web: instance refresh ir-1 started on {group} for 2 outdated VMs"]

    # Where the endpoint lacks the API (the sandbox), the user is told so and nothing claims success.
    with Stubber(driver.aws.autoscaling) as stub:
        stub.add_client_error(
            "start_instance_refresh", "NotImplemented", http_status_code=501, expected_params=expected
        )
        notes = rotation.rotate_pool(driver.aws, ctx, "web")
    assert "does not support instance refresh" in notes[0] and "2 VMs" in notes[0]
    assert len(ctx.infra.outdated_vms()) == 2


def test_a_pinned_group_launches_from_its_version_and_a_refresh_moves_it_on(aws, spec):
    pools = {"web": {"mode": "asg", "min": 1, "max": 2, "desired": 1, "pinTemplateVersion": True}}
    driver, ctx = _provision(spec, pools=pools)
    group = driver.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[ctx.infra.ScalingGroupID["web"]])
    assert group["AutoScalingGroups"][0]["LaunchTemplate"]["Version"] == "1"
    ctx = _update(ctx, {"bootstrap": {"mode": "bare"}})
    driver.pools.ensure_templates(ctx)
    driver.pools.ensure_vms(ctx)
    group = driver.aws.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[ctx.infra.ScalingGroupID["web"]])
    assert group["AutoScalingGroups"][0]["LaunchTemplate"]["Version"] == "1"  # not moved by the update
    request = asg.instance_refresh_request(ctx, "web")
    assert request["DesiredConfiguration"]["LaunchTemplate"]["Version"] == "2"
