"""Issue 3's acceptance on the sandbox through the real CLI: examples/web.jsonc with its 11 steps, LB
detach/attach, scale, an update that only flags VMs outdated, rotate, and a destroy that leaves nothing.
Inspection uses boto3 against the sandbox, independent of vmplane's own records."""

from __future__ import annotations

import pytest
from tests.helpers import Cli, Sandbox, write_env
from tests.integration.test_apply_destroy import job_resources

pytestmark = pytest.mark.slow  # whole apply/destroy cycles through the CLI: started before the quick tests

ELEVEN = [
    "stepValidate",
    "stepCreateNetwork",
    "stepCreateIAM",
    "stepCreateLaunchTemplate",
    "stepCreateVMs",
    "stepCreateLoadBalancer",
    "stepCreateTargetGroup",
    "stepCreateListener",
    "stepCreateDNSRecord",
    "stepRegisterSpace",
    "stepFinalize",
]
ZONE = "sandbox.vmplane.test"


def lb_parts(sb: Sandbox, job_id: str, domain: str) -> dict[str, list]:
    """The load balancer's parts in the sandbox: found by the job's tag, DNS records by name."""
    elb, acm, r53, ec2 = sb.client("elbv2"), sb.client("acm"), sb.client("route53"), sb.client("ec2")

    def ours(arns: list[str]) -> list[str]:
        if not arns:
            return []
        desc = elb.describe_tags(ResourceArns=arns)["TagDescriptions"]
        return [d["ResourceArn"] for d in desc if {"Key": "zop:jobId", "Value": job_id} in d["Tags"]]

    lbs = ours([x["LoadBalancerArn"] for x in elb.describe_load_balancers()["LoadBalancers"]])
    certs = [
        c["CertificateArn"]
        for c in acm.list_certificates()["CertificateSummaryList"]
        if {"Key": "zop:jobId", "Value": job_id}
        in acm.list_tags_for_certificate(CertificateArn=c["CertificateArn"])["Tags"]
    ]
    zone = next(z["Id"] for z in r53.list_hosted_zones()["HostedZones"] if z["Name"] == ZONE + ".")
    records = [
        r
        for r in r53.list_resource_record_sets(HostedZoneId=zone)["ResourceRecordSets"]
        if r["Name"].rstrip(".").endswith(domain)
    ]
    f = [{"Name": "tag:zop:jobId", "Values": [job_id]}, {"Name": "tag:zop:role", "Values": ["lb-sg"]}]
    return {
        "lbs": lbs,
        "target_groups": ours([x["TargetGroupArn"] for x in elb.describe_target_groups()["TargetGroups"]]),
        "listeners": [x for a in lbs for x in elb.describe_listeners(LoadBalancerArn=a)["Listeners"]],
        "certificates": certs,
        "records": records,
        "lb_security_groups": ec2.describe_security_groups(Filters=f)["SecurityGroups"],
    }


def vm_ingress(sb: Sandbox, gid: str) -> set[tuple[int, str]]:
    group = sb.client("ec2").describe_security_groups(GroupIds=[gid])["SecurityGroups"][0]
    out = set()
    for p in group["IpPermissions"]:
        out |= {(p["FromPort"], r["CidrIp"]) for r in p["IpRanges"]}
        out |= {(p["FromPort"], g["GroupId"]) for g in p["UserIdGroupPairs"]}
    return out


def running(sb: Sandbox, job_id: str) -> list[dict]:
    return job_resources(sb, job_id)["instances"]


@pytest.mark.sandbox
def test_web_example_lb_lifecycle(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, "itest-web", example="web.jsonc")
    domain = "itest-web.sandbox.vmplane.test"
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes", timeout=300)
    assert job["status"] == "succeeded", job["error"]
    assert [s["name"] for s in job["steps"]] == ELEVEN
    assert all(s["status"] == "succeeded" for s in job["steps"])
    infra, job_id = job["config"]["infra"], job["id"]
    elb = sandbox.client("elbv2")

    # The ALB is internet-facing in the public subnets; the VMs are private.
    alb = elb.describe_load_balancers(LoadBalancerArns=[infra["LoadBalancerID"]])["LoadBalancers"][0]
    assert alb["Scheme"] == "internet-facing"
    assert sorted(z["SubnetId"] for z in alb["AvailabilityZones"]) == sorted(infra["Cloud"]["PublicSubnetIDs"])
    vms = running(sandbox, job_id)
    assert len(vms) == 2
    for vm in vms:
        assert vm["SubnetId"] in infra["VMSubnetIDs"] and not vm.get("PublicIpAddress")

    # Health check /healthz on 80; HTTPS with the certificate; HTTP redirected; the DNS alias.
    tg = elb.describe_target_groups(TargetGroupArns=[infra["Cloud"]["TargetGroupArn"]])["TargetGroups"][0]
    assert (tg["HealthCheckPath"], tg["HealthCheckPort"]) == ("/healthz", "80")
    listeners = {x["Port"]: x for x in elb.describe_listeners(LoadBalancerArn=alb["LoadBalancerArn"])["Listeners"]}
    assert listeners[443]["Protocol"] == "HTTPS"
    assert listeners[443]["Certificates"][0]["CertificateArn"] == infra["Cloud"]["CertificateArn"]
    assert listeners[80]["DefaultActions"][0]["Type"] == "redirect"
    parts = lb_parts(sandbox, job_id, domain)
    alias = next(r for r in parts["records"] if r["Type"] == "A")
    assert alias["AliasTarget"]["DNSName"].rstrip(".") == alb["DNSName"]
    group = sandbox.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[infra["ScalingGroupID"]["web"]]
    )
    assert group["AutoScalingGroups"][0]["TargetGroupARNs"] == [infra["Cloud"]["TargetGroupArn"]]
    assert vm_ingress(sandbox, infra["VMSecurityGroupID"]) == {(80, infra["Cloud"]["LoadBalancerSecurityGroupID"])}

    # detach: no LB part remains, the VMs keep running with their VPC-internal ingress.
    vm_ids = sorted(v["InstanceId"] for v in vms)
    detached = cli.json("lb", "detach", "itest-web", "--yes")
    assert detached["status"] == "succeeded", detached["error"]
    assert detached["config"]["operation"]["kind"] == "detach_lb"
    assert {k: len(v) for k, v in lb_parts(sandbox, job_id, domain).items()} == dict.fromkeys(parts, 0)
    assert sorted(v["InstanceId"] for v in running(sandbox, job_id)) == vm_ids
    assert vm_ingress(sandbox, infra["VMSecurityGroupID"]) == {(80, infra["Cloud"]["VpcCidr"])}

    # attach again: exactly one of each part.
    attached = cli.json("lb", "attach", "itest-web", "--yes")
    assert attached["status"] == "succeeded", attached["error"]
    counts = {k: len(v) for k, v in lb_parts(sandbox, job_id, domain).items()}
    assert counts == {
        "lbs": 1,
        "target_groups": 1,
        "listeners": 2,
        "certificates": 1,
        "records": 2,
        "lb_security_groups": 1,
    }
    assert sorted(v["InstanceId"] for v in running(sandbox, job_id)) == vm_ids

    # scale: the group's sizes change, the running VMs stay.
    scaled = cli.json("scale", "itest-web", "web", "--min", "2", "--desired", "3", "--max", "5", "--yes")
    assert scaled["status"] == "succeeded", scaled["error"]
    g = sandbox.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[infra["ScalingGroupID"]["web"]]
    )
    g = g["AutoScalingGroups"][0]
    assert (g["MinSize"], g["DesiredCapacity"], g["MaxSize"]) == (2, 3, 5)
    now = sorted(v["InstanceId"] for v in running(sandbox, job_id))
    assert len(now) == 3 and set(vm_ids) <= set(now)

    # destroy: nothing tagged with the job remains, LB parts and DNS records included.
    gone = cli.json("destroy", "--job", job_id, "--yes", "--sandbox")
    assert gone["status"] == "deleted", gone["error"]
    assert not any(job_resources(sandbox, job_id).values())
    assert not any(lb_parts(sandbox, job_id, domain).values())


@pytest.mark.sandbox
def test_update_flags_outdated_vms_and_rotate_replaces_them(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, "itest-rotate")
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    before = {v["Name"]: v["ID"] for v in job["config"]["infra"]["VMs"]}

    # A user-data change (bootstrap mode) is a vm change: a new template version, nothing replaced.
    changed = write_env(tmp_path, "itest-rotate", bootstrap={"mode": "bare"}, network={"ingressPorts": [80, 8080]})
    plan = cli.json("plan", "-f", str(changed), "--sandbox")
    assert plan["decision"] == "update"
    assert {c["path"]: c["impact"] for c in plan["changes"]} == {
        "bootstrap.mode": "vm",
        "network.ingressPorts": "cloud",
    }
    updated = cli.json("apply", "-f", str(changed), "--sandbox", "--yes")
    assert updated["status"] == "succeeded", updated["error"]
    assert updated["config"]["operation"]["kind"] == "update"
    infra = updated["config"]["infra"]
    assert infra["LaunchTemplateVersion"]["web"] == 2
    assert {v["Name"]: v["ID"] for v in infra["VMs"]} == before
    assert any("vmplane rotate itest-rotate" in n for n in updated["config"]["operation"]["notes"])
    # The security group change is applied at once, in place.
    assert vm_ingress(sandbox, infra["VMSecurityGroupID"]) == {
        (80, infra["Cloud"]["VpcCidr"]),
        (8080, infra["Cloud"]["VpcCidr"]),
    }
    envs = cli.json("envs")["environments"]
    assert next(e for e in envs if e["name"] == "itest-rotate")["outputs"]["outdatedVms"] == sorted(before)

    rotated = cli.json("rotate", "itest-rotate", "--yes")
    assert rotated["status"] == "succeeded", rotated["error"]
    vms = {v["Name"]: v for v in rotated["config"]["infra"]["VMs"]}
    assert set(vms) == set(before)  # stable names
    assert all(vms[n]["ID"] != before[n] and vms[n]["LaunchTemplateVersion"] == 2 for n in before)
    live = sorted(i["InstanceId"] for i in running(sandbox, job["id"]))
    assert live == sorted(v["ID"] for v in vms.values())

    gone = cli.json("destroy", "-f", str(changed), "--sandbox", "--yes")
    assert gone["status"] == "deleted", gone["error"]
    assert not any(job_resources(sandbox, job["id"]).values())


@pytest.mark.sandbox
def test_asg_rotate_says_the_sandbox_lacks_instance_refresh(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    pools = {"web": {"mode": "asg", "min": 1, "max": 2, "desired": 1}}
    env_file = write_env(tmp_path, "itest-refresh", pools=pools)
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    changed = write_env(tmp_path, "itest-refresh", pools={"web": {**pools["web"], "diskGb": 30}})
    assert cli.json("apply", "-f", str(changed), "--sandbox", "--yes")["status"] == "succeeded"
    proc = cli.run("rotate", "itest-refresh", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert "does not support instance refresh (StartInstanceRefresh)" in proc.stdout
    status = cli.json("status", "itest-refresh")
    assert len(status["config"]["infra"]["VMs"]) == 1
    assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes")["status"] == "deleted"


@pytest.mark.sandbox
def test_identity_changes_are_refused_and_nothing_changes(cli: Cli, sandbox: Sandbox, tmp_path) -> None:
    env_file = write_env(tmp_path, "itest-identity")
    job = cli.json("apply", "-f", str(env_file), "--sandbox", "--yes")
    changed = write_env(tmp_path, "itest-identity", network={"cidr": "10.50.0.0/16"})
    proc = cli.run("apply", "-f", str(changed), "--sandbox", "--yes")
    assert proc.returncode == 2
    assert "network.cidr: cannot change in place" in proc.stderr
    after = cli.json("status", job["id"])
    assert after["version"] == job["version"] and after["config"]["spec"]["network"]["cidr"] == "10.40.0.0/16"
    assert cli.json("destroy", "--job", job["id"], "--sandbox", "--yes")["status"] == "deleted"
