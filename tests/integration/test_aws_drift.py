"""AWS drift through the CLI on the sandbox: the issue's ten cases made out of band with boto3, each found by
`vmplane drift -o json` (exit 3: its resource, kind, change and fields), repaired by `vmplane apply --yes`
(the plan lists the repairs), and `vmplane drift` exits 0 after. Cases are grouped so that one apply
repairs several: Fixed VMs and the network on examples/fixed.jsonc, the load balancer and the scaling
group's template on examples/web.jsonc. The sandbox (moto) holds everything drift reads; it never fires a
schedule, so a scheduled pool's power is checked on the expectation alone (tests/unit/test_aws_drift.py).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pytest
from tests.helpers import Cli, Sandbox, write_env

from vmplane.clouds.aws import naming
from vmplane.envspec.load import load_spec

pytestmark = pytest.mark.sandbox

MUTATING = re.compile(
    r"^(Create|Delete|Modify|Put|Attach|Detach|Associate|Disassociate|Authorize|Revoke|Register|Deregister"
    r"|Request|Change|Run|Update|Add|Remove|Set|Start|Stop|Terminate|Allocate|Release|Tag|Untag|Send|Replace)"
)


def job_filter(job_id: str, role: str | None = None) -> list[dict[str, Any]]:
    f: list[dict[str, Any]] = [{"Name": "tag:zop:jobId", "Values": [job_id]}]
    return f + ([{"Name": "tag:zop:role", "Values": [role]}] if role else [])


def drift(cli: Cli, env: str, expect: int = 3) -> list[dict[str, Any]]:
    report = cli.json("drift", env, expect=expect)
    assert report["env"] == env
    return list(report["drift"])


def entry(report: list[dict[str, Any]], resource: str) -> dict[str, Any]:
    found = [d for d in report if d["resource"] == resource]
    assert len(found) == 1, f"{resource} not once in {json.dumps(report, indent=1)}"
    return found[0]


def fields(d: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {f["field"]: (f["wanted"], f["actual"]) for f in d["fields"]}


def live_instances(ec2: Any, job_id: str) -> dict[str, dict[str, Any]]:
    res = ec2.describe_instances(
        Filters=[
            *job_filter(job_id, "vm"),
            {"Name": "instance-state-name", "Values": ["pending", "running", "stopped"]},
        ]
    )["Reservations"]
    return {next(t["Value"] for t in i["Tags"] if t["Key"] == "Name"): i for r in res for i in r["Instances"]}


def in_process_calls(cli: Cli, env: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], int]:
    """One drift check in this process with the per-call tally every AWS client feeds: what it called."""
    from vmplane.clouds.base import API_CALLS
    from vmplane.jobs import drift as jobs_drift
    from vmplane.jobs.listings import find_job
    from vmplane.settings import Settings

    for k, v in cli.env.items():
        if k.startswith("VMPLANE_"):
            monkeypatch.setenv(k, v)
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    try:
        report = jobs_drift.check(find_job(Settings(home=cli.home), env))
    finally:
        API_CALLS.reset(token)
    return tally, len(report.drift)


def test_fixed_pool_and_network_drift_found_then_repaired(
    cli: Cli, sandbox: Sandbox, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = write_env(tmp_path, "dr-fixed")
    spec = load_spec(env_file)
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert job["status"] == "succeeded", job["error"]
    job_id = job["id"]
    assert drift(cli, "dr-fixed", expect=0) == []
    ec2 = sandbox.client("ec2")

    # Out of band: the two (a Fixed VM terminated, 22 open to the world on the VPC's default
    # group), then a VM stopped, a rule vmplane made revoked, a tag removed, the NAT route deleted and a
    # security group carrying the job's tags.
    vms = live_instances(ec2, job_id)
    gone, stopped = vms["dr-fixed-web-0"]["InstanceId"], vms["dr-fixed-web-1"]["InstanceId"]
    ec2.terminate_instances(InstanceIds=[gone])
    ec2.stop_instances(InstanceIds=[stopped])
    vpc = ec2.describe_vpcs(Filters=job_filter(job_id, "vpc"))["Vpcs"][0]["VpcId"]
    default = ec2.describe_security_groups(
        Filters=[{"Name": "vpc-id", "Values": [vpc]}, {"Name": "group-name", "Values": ["default"]}]
    )["SecurityGroups"][0]["GroupId"]
    world_ssh = {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}
    ec2.authorize_security_group_ingress(GroupId=default, IpPermissions=[world_ssh])
    vm_group = ec2.describe_security_groups(Filters=job_filter(job_id, "vm-sg"))["SecurityGroups"][0]
    ec2.revoke_security_group_ingress(GroupId=vm_group["GroupId"], IpPermissions=vm_group["IpPermissions"])
    ec2.delete_tags(Resources=[vpc], Tags=[{"Key": "team"}])
    private = ec2.describe_route_tables(Filters=job_filter(job_id, "rt-private"))["RouteTables"][0]
    nat = next(r["NatGatewayId"] for r in private["Routes"] if r.get("DestinationCidrBlock") == "0.0.0.0/0")
    ec2.delete_route(RouteTableId=private["RouteTableId"], DestinationCidrBlock="0.0.0.0/0")
    stray = ec2.create_security_group(
        GroupName="dr-fixed-stray",
        Description="made by hand",
        VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": [{"Key": "zop:jobId", "Value": job_id}]}],
    )["GroupId"]

    report = drift(cli, "dr-fixed")
    lost = entry(report, "aws_instance.dr-fixed-web-0")
    assert (lost["kind"], lost["id"], lost["change"], lost["repairable"]) == ("instance", gone, "missing", True)
    power = entry(report, "aws_instance.dr-fixed-web-1")
    assert (power["id"], power["change"], fields(power)) == (stopped, "changed", {"state": ("running", "stopped")})
    ssh = entry(report, "aws_security_group.dr-fixed-default")
    assert (ssh["id"], ssh["change"], fields(ssh)) == (default, "changed", {"ingress": ([], ["tcp/22 0.0.0.0/0"])})
    rule = entry(report, f"aws_security_group.{naming.vm_group_name(spec)}")
    assert fields(rule) == {"ingress": (["tcp/80 10.40.0.0/16"], [])}
    tag = entry(report, "aws_vpc.dr-fixed")
    assert (tag["kind"], tag["id"], fields(tag)) == ("vpc", vpc, {"tags.team": ("platform", None)})
    route = entry(report, "aws_route_table.dr-fixed-rt-private")
    assert fields(route) == {"routes": ([f"0.0.0.0/0 -> {nat}"], [])}
    extra = entry(report, f"aws_security_group.{stray}")
    assert (extra["kind"], extra["id"], extra["change"]) == ("security-group", stray, "extra")
    assert len(report) == 7, json.dumps(report, indent=1)

    # Reading drift changed nothing: no mutating AWS call, and the record is as it was.
    before = cli.json("status", "dr-fixed")
    calls, found = in_process_calls(cli, "dr-fixed", monkeypatch)
    assert found == 7 and calls, calls
    assert not [op for op in calls if MUTATING.match(op.split(".", 1)[1])], calls
    assert cli.json("status", "dr-fixed") == before
    # Without the refresh the file matches the record: nothing to do.
    plan = cli.run("plan", "-f", str(env_file), "--sandbox", "--refresh", "false")
    assert plan.returncode == 0 and "No changes" in plan.stdout, plan.stdout + plan.stderr

    applied = cli.run("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    out = applied.stdout
    assert "Drift: changed outside vmplane" in out, out
    for d in report:
        assert d["resource"] in out, d["resource"]
    assert drift(cli, "dr-fixed", expect=0) == []

    vms = live_instances(ec2, job_id)
    assert set(vms) == {"dr-fixed-web-0", "dr-fixed-web-1"}  # relaunched under its name
    assert vms["dr-fixed-web-0"]["InstanceId"] != gone
    assert vms["dr-fixed-web-1"]["State"]["Name"] == "running"
    group = ec2.describe_security_groups(GroupIds=[default])["SecurityGroups"][0]
    assert group["IpPermissions"] == []
    assert ec2.describe_security_groups(Filters=[{"Name": "group-id", "Values": [stray]}])["SecurityGroups"] == []
    done = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert done["status"] == "deleted", done["error"]


def test_load_balancer_and_template_drift_found_then_repaired(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, "dr-web", example="web.jsonc")
    spec = load_spec(env_file)
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert job["status"] == "succeeded", job["error"]
    assert drift(cli, "dr-web", expect=0) == []
    elb, ec2, asg = sandbox.client("elbv2"), sandbox.client("ec2"), sandbox.client("autoscaling")
    group_name = naming.asg_name(spec, "web")
    lb_arn = elb.describe_load_balancers(Names=[naming.lb_base_name(spec)])["LoadBalancers"][0]["LoadBalancerArn"]
    tg_arn = elb.describe_target_groups(Names=[naming.target_group_name(spec)])["TargetGroups"][0]["TargetGroupArn"]
    https = next(x for x in elb.describe_listeners(LoadBalancerArn=lb_arn)["Listeners"] if x["Port"] == 443)
    members = sorted(
        h["Target"]["Id"] for h in elb.describe_target_health(TargetGroupArn=tg_arn)["TargetHealthDescriptions"]
    )
    assert len(members) == 2
    group = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[group_name])["AutoScalingGroups"][0]
    template = group["LaunchTemplate"]["LaunchTemplateId"]

    elb.delete_listener(ListenerArn=https["ListenerArn"])
    elb.deregister_targets(TargetGroupArn=tg_arn, Targets=[{"Id": members[0]}])
    ec2.delete_launch_template(LaunchTemplateId=template)

    report = drift(cli, "dr-web")
    alb = naming.lb_base_name(spec)
    listener = entry(report, f"aws_lb_listener.{alb}/https")
    assert (listener["kind"], listener["change"]) == ("listener", "missing")
    target = entry(report, f"aws_lb_target_group.{naming.target_group_name(spec)}")
    assert (target["id"], target["change"], fields(target)) == (tg_arn, "changed", {"targets": (members, members[1:])})
    lt = entry(report, f"aws_launch_template.{naming.launch_template_name(spec, 'web')}")
    assert (lt["kind"], lt["id"], lt["change"]) == ("launch-template", template, "missing")
    assert len(report) == 3, json.dumps(report, indent=1)

    applied = cli.run("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "Drift: changed outside vmplane" in applied.stdout
    assert drift(cli, "dr-web", expect=0) == []

    listeners = {x["Port"]: x for x in elb.describe_listeners(LoadBalancerArn=lb_arn)["Listeners"]}
    assert set(listeners) == {80, 443} and listeners[443]["Certificates"]
    health = elb.describe_target_health(TargetGroupArn=tg_arn)["TargetHealthDescriptions"]
    assert sorted(h["Target"]["Id"] for h in health) == members
    group = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[group_name])["AutoScalingGroups"][0]
    made_again = ec2.describe_launch_templates(LaunchTemplateNames=[naming.launch_template_name(spec, "web")])
    new_id = made_again["LaunchTemplates"][0]["LaunchTemplateId"]
    assert new_id != template and group["LaunchTemplate"]["LaunchTemplateId"] == new_id
    done = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert done["status"] == "deleted", done["error"]


def test_an_existing_vpcs_group_is_reported_never_changed(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    ec2 = sandbox.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.61.0.0/16")["Vpc"]["VpcId"]
    zones = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]][:2]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.61.{i}.0/24", AvailabilityZone=z)["Subnet"]["SubnetId"]
        for i, z in enumerate(zones)
    ]
    env_file = write_env(
        tmp_path,
        "dr-own",
        network={"zones": 2, "ingressPorts": [80], "existingVpcId": vpc, "existingPrivateSubnetIds": subnets},
    )
    spec = load_spec(env_file)
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert job["status"] == "succeeded", job["error"]
    assert drift(cli, "dr-own", expect=0) == []
    theirs = ec2.describe_security_groups(
        Filters=[{"Name": "vpc-id", "Values": [vpc]}, {"Name": "group-name", "Values": ["default"]}]
    )["SecurityGroups"][0]["GroupId"]
    ours = ec2.describe_security_groups(Filters=job_filter(job["id"], "vm-sg"))["SecurityGroups"][0]["GroupId"]
    world_ssh = {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}
    for gid in (theirs, ours):
        ec2.authorize_security_group_ingress(GroupId=gid, IpPermissions=[world_ssh])

    report = drift(cli, "dr-own")
    user = next(d for d in report if d["id"] == theirs)
    assert (user["change"], user["repairable"]) == ("changed", False)
    assert "tcp/22 0.0.0.0/0" in fields(user)["ingress"][1] and "not vmplane's" in user["repair"]
    mine = entry(report, f"aws_security_group.{naming.vm_group_name(spec)}")
    assert (mine["id"], mine["repairable"]) == (ours, True)
    assert len(report) == 2, json.dumps(report, indent=1)

    applied = cli.run("apply", "-f", str(env_file), "--sandbox", "--yes")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    after = drift(cli, "dr-own")
    assert [d["id"] for d in after] == [theirs]  # reported again, never changed
    rules = ec2.describe_security_groups(GroupIds=[theirs])["SecurityGroups"][0]["IpPermissions"]
    assert any(p.get("FromPort") == 22 for p in rules)
    done = cli.json("destroy", "-f", str(env_file), "--sandbox", "--yes")
    assert done["status"] == "deleted", done["error"]
    assert ec2.describe_vpcs(VpcIds=[vpc])["Vpcs"]  # the user's VPC stays
