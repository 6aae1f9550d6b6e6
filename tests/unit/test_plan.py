"""pipeline/plan.py: plans as data, for `vmplane plan`, the apply/destroy confirmation and JSON output."""

from __future__ import annotations

from collections import Counter

import pytest

from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.aws.ids import AwsInfra
from vmplane.clouds.aws.session import AwsTarget
from vmplane.clouds.azure import AzureDriver
from vmplane.clouds.steps import step_of
from vmplane.pipeline.plan import (
    LB_STEPS,
    PROVISION_STEPS,
    TEARDOWN_STEPS,
    Action,
    Plan,
    PlanError,
    PlanKind,
    PlannedResource,
    provision_plan,
    provision_steps,
    step_graph,
    teardown_plan,
    waves,
)
from vmplane.pipeline.steps import DEFAULT_DEPENDS, step_dependencies
from vmplane.state import InfraConfig, VMRecord

from .support import variant

DRIVER = AwsDriver(AwsTarget(region="us-east-1"))
ZONES = InfraConfig(Zones=["us-east-1a", "us-east-1b"])


def provision(spec, target, infra=ZONES):
    return provision_plan(DRIVER, spec, infra, target)


def teardown(spec, infra, target):
    return teardown_plan(DRIVER, spec, infra, target)


def waves_of(names):
    return waves(names, step_dependencies(DRIVER))


SEVEN = [
    "stepValidate",
    "stepCreateNetwork",
    "stepCreateIAM",
    "stepCreateLaunchTemplate",
    "stepCreateVMs",
    "stepRegisterSpace",
    "stepFinalize",
]


def test_the_seed_step_names_in_order():
    assert PROVISION_STEPS == SEVEN
    assert LB_STEPS == ["stepCreateLoadBalancer", "stepCreateTargetGroup", "stepCreateListener", "stepCreateDNSRecord"]


def test_provision_plan_for_the_example(spec):
    plan = provision(spec, "sandbox")
    assert plan.kind == "provision" and plan.env == "demo-fixed" and plan.target == "sandbox"
    assert plan.steps == SEVEN
    assert Counter(r.type for r in plan.resources) == {
        "aws_vpc": 1,
        "aws_internet_gateway": 1,
        "aws_subnet": 4,
        "aws_eip": 1,
        "aws_nat_gateway": 1,
        "aws_route_table": 2,
        "aws_iam_role": 1,
        "aws_iam_role_policy_attachment": 1,
        "aws_iam_instance_profile": 1,
        "aws_security_group": 1,
        "aws_vpc_security_group_ingress_rule": 1,
        "aws_launch_template": 1,
        "aws_instance": 2,
    }
    assert all(r.action is Action.create for r in plan.resources)
    assert plan.summary == "Plan: 18 to add, 0 to change, 0 to destroy."
    assert plan.legend() == ["  + create"]
    assert plan.notes == []
    # Every resource belongs to a real step, and resources appear in step order.
    order = [plan.steps.index(r.step) for r in plan.resources]
    assert order == sorted(order)
    assert [r.name for r in plan.resources if r.type == "aws_instance"] == ["demo-fixed-web-0", "demo-fixed-web-1"]
    assert [r.name for r in plan.resources if r.type == "aws_iam_role"] == ["vmplane-acme-demo-fixed-vm"]
    ingress = [r for r in plan.resources if r.type == "aws_vpc_security_group_ingress_rule"]
    assert [r.name for r in ingress] == ["vmplane-acme-demo-fixed-vm/tcp-80"]
    subnets = [r.name for r in plan.resources if r.type == "aws_subnet"]
    assert subnets[0] == "demo-fixed-public-us-east-1a" and subnets[-1] == "demo-fixed-private-us-east-1b"


def test_before_validation_the_plan_shows_the_subnet_pattern(spec):
    plan = provision(spec, "aws", InfraConfig())
    subnets = [r.name for r in plan.resources if r.type == "aws_subnet"]
    assert subnets[:2] == ["demo-fixed-public-<zone 1>", "demo-fixed-public-<zone 2>"]


def test_provision_plan_follows_the_spec(spec):
    bigger = variant(
        spec,
        network={"zones": 3, "ingressPorts": [80, 443]},
        pools={
            "web": {"size": 3},
            "workers": {"mode": "asg", "min": 1, "max": 4, "desired": 2},
        },
    )
    counts = Counter(r.type for r in provision(bigger, "aws").resources)
    assert counts["aws_subnet"] == 6
    assert counts["aws_instance"] == 3
    assert counts["aws_autoscaling_group"] == 1
    assert counts["aws_launch_template"] == 2
    assert counts["aws_vpc_security_group_ingress_rule"] == 2


def test_provision_plan_for_an_existing_vpc_creates_no_network(spec):
    existing = variant(spec, network={"existingVpcId": "vpc-0abc", "existingPrivateSubnetIds": ["subnet-1"]})
    plan = provision(existing, "aws")
    assert not any(r.step == "stepCreateNetwork" for r in plan.resources)
    assert plan.summary == "Plan: 8 to add, 0 to change, 0 to destroy."
    assert any("vpc-0abc" in n and "never modified or deleted" in n for n in plan.notes)
    assert provision_plan(AzureDriver(), existing, InfraConfig(), "azure").resources == []


def test_a_load_balancer_adds_its_four_steps_right_after_the_vms(spec):
    with_lb = variant(spec, loadBalancer={"domain": "app.example.com"})
    steps = provision_steps(with_lb)
    assert len(steps) == 11
    at = steps.index("stepCreateVMs")
    assert steps[at + 1 : at + 5] == LB_STEPS
    assert [s for s in steps if s not in LB_STEPS] == SEVEN
    plan = provision(with_lb, "aws")
    assert plan.steps == steps
    lb_parts = {(r.type, r.step) for r in plan.resources if r.step in LB_STEPS}
    assert ("aws_lb", "stepCreateLoadBalancer") in lb_parts
    assert ("aws_lb_target_group", "stepCreateTargetGroup") in lb_parts
    assert ("aws_lb_listener", "stepCreateListener") in lb_parts
    assert ("aws_route53_record", "stepCreateDNSRecord") in lb_parts
    assert provision_steps(spec) == SEVEN


def test_an_empty_plan_says_no_changes():
    plan = Plan(PlanKind.none, "demo-fixed", "aws", [])
    assert plan.summary == "No changes."
    assert plan.legend() == []
    assert plan.to_json()["summary"] == "No changes."


def test_summary_and_legend_list_only_actions_present():
    def res(action):
        return PlannedResource(action, "aws_instance", "x", "stepCreateVMs")

    plan = Plan(PlanKind.provision, "e", "aws", [], [res(Action.recreate), res(Action.create), res(Action.create)])
    assert plan.summary == "Plan: 3 to add, 0 to change, 1 to destroy."  # a replacement adds and destroys
    assert plan.legend() == ["  + create", "  -/+ destroy and then create replacement"]
    plan = Plan(PlanKind.provision, "e", "aws", [], [res(Action.update), res(Action.destroy)])
    assert plan.summary == "Plan: 0 to add, 1 to change, 1 to destroy."
    assert plan.legend() == ["  ~ update in place", "  - destroy"]


def test_to_json_shape(spec):
    data = provision(spec, "sandbox").to_json()
    assert set(data) == {"kind", "env", "target", "steps", "resources", "notes", "summary", "counts", "cost", "repairs"}
    assert data["counts"] == {"add": len(data["resources"]), "change": 0, "destroy": 0}
    assert data["resources"][0] == {
        "action": "+",
        "type": "aws_vpc",
        "name": "demo-fixed",
        "step": "stepCreateNetwork",
        "detail": "10.40.0.0/16",
    }


def _recorded(vpc_created: bool) -> InfraConfig:
    return InfraConfig(
        VMs=[VMRecord(Name="demo-fixed-web-0", Pool="web", Index=0, ID="i-0"), VMRecord(Name="x", Pool="web", Index=1)],
        LaunchTemplateID={"web": "lt-1"},
        VMSecurityGroupID="sg-1",
        NetworkID="vpc-1",
        NetworkCreated=vpc_created,
        VMSubnetIDs=["subnet-c", "subnet-d"],
        Cloud=AwsInfra(
            RoleName="vmplane-acme-demo-fixed-vm",
            InternetGatewayID="igw-1",
            NatGatewayIDs=["nat-1"],
            ElasticIPAllocationIDs=["eipalloc-1"],
            PublicSubnetIDs=["subnet-a", "subnet-b"],
            PublicRouteTableID="rtb-1",
            PrivateRouteTableID="rtb-2",
        ),
    )


def test_teardown_plan_of_a_created_network(spec):
    plan = teardown(spec, _recorded(vpc_created=True), "aws")
    assert plan.kind == "teardown" and plan.steps == TEARDOWN_STEPS
    assert all(r.action is Action.destroy for r in plan.resources)
    ids = [r.name for r in plan.resources]
    assert "i-0" in ids and "x" not in ids  # a VM never launched has nothing to destroy
    counts = Counter(r.type for r in plan.resources)
    assert counts["aws_subnet"] == 4 and counts["aws_vpc"] == 1 and counts["aws_nat_gateway"] == 1
    assert plan.summary == f"Plan: 0 to add, 0 to change, {len(plan.resources)} to destroy."
    assert len(plan.resources) == 15
    assert plan.legend() == ["  - destroy"]
    order = [TEARDOWN_STEPS.index(r.step) for r in plan.resources]
    assert order == sorted(order)
    # Inside stepDeleteNetwork the VPC goes last.
    assert plan.resources[-1].type == "aws_vpc"


def test_teardown_plan_never_lists_an_existing_vpc(spec):
    plan = teardown(spec, _recorded(vpc_created=False), "aws")
    assert not any(r.step == "stepDeleteNetwork" for r in plan.resources)
    assert {r.type for r in plan.resources} == {
        "aws_instance",
        "aws_launch_template",
        "aws_security_group",
        "aws_iam_instance_profile",
        "aws_iam_role",
    }
    assert any("vpc-1" in n and "untouched" in n for n in plan.notes)


@pytest.mark.parametrize("vpc_created", [True, False])
def test_teardown_plan_of_nothing_says_no_changes(spec, vpc_created):
    plan = teardown(spec, InfraConfig(NetworkCreated=vpc_created), "aws")
    assert plan.resources == []
    assert plan.summary == "No changes."


def test_plan_names_the_role_iam_will_create(spec):
    long = variant(spec, name="a" * 32, org="b" * 32)
    roles = [r.name for r in provision(long, "aws").resources if r.type == "aws_iam_role"]
    assert roles == [f"vmplane-{'b' * 32}-{'a' * 32}-vm"[:64]]


def test_independent_steps_share_a_wave_and_every_step_follows_its_inputs(spec):
    with_lb = variant(spec, loadBalancer={"domain": "app.example.com"})
    assert waves_of(provision_steps(with_lb)) == [
        ["stepValidate"],
        ["stepCreateNetwork", "stepCreateIAM"],
        ["stepCreateLaunchTemplate", "stepCreateLoadBalancer"],
        ["stepCreateVMs", "stepCreateDNSRecord"],
        ["stepCreateTargetGroup"],
        ["stepCreateListener"],
        ["stepRegisterSpace"],
        ["stepFinalize"],
    ]
    flat = [s for wave in waves_of(provision_steps(with_lb)) for s in wave]
    assert sorted(flat) == sorted(provision_steps(with_lb))
    for name, deps in DEFAULT_DEPENDS.items():
        if name in flat:  # a milestone counts as its whole step in the waves
            assert all(flat.index(step_of(d)) < flat.index(name) for d in deps)


def test_the_graph_lets_the_lb_and_templates_start_at_the_network_milestone(spec):
    with_lb = variant(spec, loadBalancer={"domain": "app.example.com"})
    graph = step_graph(provision_steps(with_lb), step_dependencies(DRIVER))
    assert graph["stepCreateLoadBalancer"] == ["stepCreateNetwork:public", "stepCreateIAM"]
    assert graph["stepCreateLaunchTemplate"] == ["stepCreateNetwork:public", "stepCreateIAM"]
    assert graph["stepCreateVMs"] == ["stepCreateLaunchTemplate", "stepCreateNetwork"]
    assert graph["stepCreateTargetGroup"] == ["stepCreateLoadBalancer", "stepCreateVMs:running"]
    assert graph["stepRegisterSpace"] == provision_steps(with_lb)[: provision_steps(with_lb).index("stepRegisterSpace")]
    # Attaching an LB later: the network is done, so nothing of it is waited for.
    assert step_graph([*LB_STEPS, "stepRegisterSpace"], step_dependencies(DRIVER))["stepCreateLoadBalancer"] == []


def test_teardown_removes_what_the_vms_used_side_by_side_and_operations_keep_their_order():
    assert waves_of(TEARDOWN_STEPS) == [
        ["stepDetachLoadBalancer"],
        ["stepTerminateVMs"],
        ["stepDeleteLaunchTemplate", "stepDeleteSecurityGroup", "stepDeleteIAM"],
        ["stepDeleteNetwork"],
        ["stepUnregisterSpace"],
    ]
    assert waves_of(["stepRotateVMs", "stepRegisterSpace"]) == [["stepRotateVMs"], ["stepRegisterSpace"]]
    # Attaching an LB later: the network and VMs exist already, so only the LB steps' own order counts.
    assert waves_of([*LB_STEPS, "stepRegisterSpace"]) == [
        ["stepCreateLoadBalancer"],
        ["stepCreateTargetGroup", "stepCreateDNSRecord"],
        ["stepCreateListener"],
        ["stepRegisterSpace"],
    ]


def test_waves_refuse_a_dependency_listed_after_its_dependent():
    # A dependency listed after its dependent would silently count as met; it is a bug in the plan.
    with pytest.raises(PlanError, match="stepCreateTargetGroup needs stepCreateVMs, which the plan lists after"):
        waves_of(["stepCreateTargetGroup", "stepCreateVMs"])


def test_waves_refuse_a_cycle_and_an_unknown_step():
    cyclic = {"stepCreateNetwork": ["stepCreateIAM"], "stepCreateIAM": ["stepCreateNetwork"]}
    with pytest.raises(PlanError, match="cycle"):
        waves(["stepCreateNetwork", "stepCreateIAM"], cyclic)
    with pytest.raises(PlanError, match="unknown step"):
        waves_of(["stepValidate", "stepMakeCoffee"])


def test_records_written_before_the_cloud_sub_model_still_tear_down(spec):
    # An environment applied by an older vmplane kept the AWS ids at the top level of config.infra.
    legacy = InfraConfig.model_validate(
        {"VpcID": "vpc-1", "VpcCreated": True, "PrivateSubnetIDs": ["subnet-c"], "InternetGatewayID": "igw-1"}
    )
    assert (legacy.NetworkID, legacy.NetworkCreated, legacy.VMSubnetIDs) == ("vpc-1", True, ["subnet-c"])
    names = {(r.type, r.name) for r in teardown(spec, legacy, "aws").resources}
    assert {("aws_vpc", "vpc-1"), ("aws_internet_gateway", "igw-1"), ("aws_subnet", "subnet-c")} <= names
    assert "InternetGatewayID" not in legacy.model_dump()  # moved into the sub-model
