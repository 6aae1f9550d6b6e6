"""clouds/aws/lb.py against moto: the four LB steps, their idempotency, and detach leaving nothing."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from moto import settings as moto_settings
from pydantic import ValidationError

from vmplane.clouds.aws import certs, lb, naming
from vmplane.clouds.aws.driver import AwsDriver
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.resources import TABLE
from vmplane.clouds.aws.session import AwsTarget
from vmplane.clouds.base import API_CALLS
from vmplane.clouds.errors import InvalidRequestError
from vmplane.clouds.interfaces.composition import create_identity
from vmplane.state import VMState

from .support import JOB_ID, REGION, make_ctx, variant

DOMAIN = "app.example.test"


@pytest.fixture(autouse=True)
def _certificates_issue_at_once(monkeypatch):
    # moto marks a DNS-validated certificate ISSUED after ACM_VALIDATION_WAIT seconds (default 60).
    monkeypatch.setattr(moto_settings, "ACM_VALIDATION_WAIT", 0)


@pytest.fixture
def zone(aws):
    made = aws.route53.create_hosted_zone(Name="example.test", CallerReference="zone-1")
    return made["HostedZone"]["Id"].rsplit("/", 1)[-1]


def _provisioned(spec, **lb_block):
    """A driver and a context after the seven VM steps, for a spec with a load balancer."""
    driver = AwsDriver(AwsTarget(region=REGION))
    ctx = make_ctx(variant(spec, loadBalancer={"domain": DOMAIN, **lb_block}))
    aws_ids(ctx.infra).InstanceProfileArn = "arn:aws:iam::123456789012:instance-profile/vmplane-acme-demo-fixed-vm"
    for step in (driver.preflight, driver.network.ensure, driver.pools.ensure_templates, driver.pools.ensure_vms):
        step(ctx)
    return driver, ctx


def _attach(driver, ctx):
    for step in (driver.lb.ensure_frontend, driver.lb.ensure_backend, driver.lb.ensure_listener):
        step(ctx)
    driver.lb.ensure_dns_record(ctx)


def _records(aws, zone):
    sets = aws.route53.list_resource_record_sets(HostedZoneId=zone)["ResourceRecordSets"]
    return {(r["Name"].rstrip("."), r["Type"]): r for r in sets if r["Type"] not in ("NS", "SOA")}


def _vm_ingress(aws, gid):
    group = aws.ec2.describe_security_groups(GroupIds=[gid])["SecurityGroups"][0]
    out = set()
    for p in group["IpPermissions"]:
        out |= {(p["FromPort"], r["CidrIp"]) for r in p.get("IpRanges", [])}
        out |= {(p["FromPort"], g["GroupId"]) for g in p.get("UserIdGroupPairs", [])}
    return out


def _counts(aws):
    elb = aws.elbv2
    return {
        "lb": len(elb.describe_load_balancers()["LoadBalancers"]),
        "tg": len(elb.describe_target_groups()["TargetGroups"]),
        "cert": len(aws.acm.list_certificates()["CertificateSummaryList"]),
        "listeners": sum(
            len(elb.describe_listeners(LoadBalancerArn=x["LoadBalancerArn"])["Listeners"])
            for x in elb.describe_load_balancers()["LoadBalancers"]
        ),
    }


def test_the_four_steps_build_the_seed_shape(aws, spec, zone):
    driver, ctx = _provisioned(spec)
    aws = driver.aws
    infra = ctx.infra
    assert aws_ids(infra).HostedZoneID == zone  # found by the domain's suffix
    _attach(driver, ctx)

    alb = aws.elbv2.describe_load_balancers(LoadBalancerArns=[infra.LoadBalancerID])["LoadBalancers"][0]
    assert alb["Scheme"] == "internet-facing" and alb["Type"] == "application"
    assert sorted(z["SubnetId"] for z in alb["AvailabilityZones"]) == sorted(aws_ids(infra).PublicSubnetIDs)
    assert alb["SecurityGroups"] == [aws_ids(infra).LoadBalancerSecurityGroupID]
    assert aws_ids(infra).LoadBalancerSecurityGroupID != infra.VMSecurityGroupID
    attrs = aws.elbv2.describe_load_balancer_attributes(LoadBalancerArn=alb["LoadBalancerArn"])["Attributes"]
    assert {"Key": "routing.http.drop_invalid_header_fields.enabled", "Value": "true"} in attrs
    tags = {
        t["Key"]: t["Value"]
        for t in aws.elbv2.describe_tags(ResourceArns=[alb["LoadBalancerArn"]])["TagDescriptions"][0]["Tags"]
    }
    assert tags["zop:jobId"] == JOB_ID and tags["team"] == "platform"

    tg = aws.elbv2.describe_target_groups(TargetGroupArns=[aws_ids(infra).TargetGroupArn])["TargetGroups"][0]
    assert (tg["Protocol"], tg["Port"], tg["VpcId"]) == ("HTTP", 80, infra.NetworkID)
    assert (tg["HealthCheckPath"], tg["HealthCheckPort"], tg["HealthCheckProtocol"]) == ("/healthz", "80", "HTTP")
    health = aws.elbv2.describe_target_health(TargetGroupArn=aws_ids(infra).TargetGroupArn)["TargetHealthDescriptions"]
    assert sorted(h["Target"]["Id"] for h in health) == sorted(v.ID for v in infra.VMs)

    # Port 80 on the VMs admits the LB's group only, no longer the VPC CIDR.
    assert _vm_ingress(aws, infra.VMSecurityGroupID) == {(80, aws_ids(infra).LoadBalancerSecurityGroupID)}

    listeners = {x["Port"]: x for x in aws.elbv2.describe_listeners(LoadBalancerArn=infra.LoadBalancerID)["Listeners"]}
    assert set(listeners) == {80, 443}
    https = listeners[443]
    assert https["Protocol"] == "HTTPS" and https["SslPolicy"] == lb.SSL_POLICY
    assert https["Certificates"][0]["CertificateArn"] == aws_ids(infra).CertificateArn
    assert https["DefaultActions"][0]["TargetGroupArn"] == aws_ids(infra).TargetGroupArn
    redirect = listeners[80]["DefaultActions"][0]
    assert redirect["Type"] == "redirect" and redirect["RedirectConfig"]["Protocol"] == "HTTPS"

    cert = aws.acm.describe_certificate(CertificateArn=aws_ids(infra).CertificateArn)["Certificate"]
    assert cert["DomainName"] == DOMAIN and cert["Status"] == "ISSUED"
    validation = cert["DomainValidationOptions"][0]["ResourceRecord"]
    records = _records(aws, zone)
    assert (validation["Name"].rstrip("."), "CNAME") in records
    alias = records[(DOMAIN, "A")]["AliasTarget"]
    assert alias["DNSName"].rstrip(".") == alb["DNSName"]
    assert alias["HostedZoneId"] == alb["CanonicalHostedZoneId"]
    assert ctx.save.last == infra.model_dump(mode="json")


def test_running_the_steps_again_creates_nothing_new(aws, spec, zone):
    driver, ctx = _provisioned(spec)
    _attach(driver, ctx)
    before = _counts(driver.aws)
    _attach(driver, ctx)
    # Even with the records lost (a crash before the checkpoint), the parts are found, not duplicated.
    lost = make_ctx(
        ctx.spec, ctx.infra.model_copy(update={"LoadBalancerID": None, "TargetGroupArn": None, "CertificateArn": None})
    )
    _attach(driver, lost)
    assert _counts(driver.aws) == before == {"lb": 1, "tg": 1, "cert": 1, "listeners": 2}
    assert lost.infra.LoadBalancerID == ctx.infra.LoadBalancerID


def test_detach_removes_every_part_and_keeps_the_vms(aws, spec, zone):
    driver, ctx = _provisioned(spec)
    _attach(driver, ctx)
    vm_ids = sorted(v.ID for v in ctx.infra.VMs)
    lb_sg = aws_ids(ctx.infra).LoadBalancerSecurityGroupID
    driver.lb.detach(ctx, keep_vms=True)
    aws = driver.aws
    assert _counts(aws) == {"lb": 0, "tg": 0, "cert": 0, "listeners": 0}
    assert _records(aws, zone) == {}
    assert not aws.ec2.describe_security_groups(Filters=[{"Name": "group-id", "Values": [lb_sg]}])["SecurityGroups"]
    # The VMs keep running and get their VPC-internal ingress back.
    assert _vm_ingress(aws, ctx.infra.VMSecurityGroupID) == {(80, aws_ids(ctx.infra).VpcCidr)}
    running = aws.ec2.describe_instances(InstanceIds=vm_ids)["Reservations"]
    assert all(i["State"]["Name"] == "running" for r in running for i in r["Instances"])
    assert all(v.State is VMState.ready for v in ctx.infra.VMs)
    infra = ctx.infra
    assert (
        infra.LoadBalancerID,
        aws_ids(infra).TargetGroupArn,
        aws_ids(infra).CertificateArn,
        aws_ids(infra).DNSRecords,
    ) == (
        None,
        None,
        None,
        [],
    )
    lb_kinds = ["load-balancer", "target-group", "listener", "certificate", "dns-record"]
    assert TABLE.observe(aws, ctx, lb_kinds) == []

    # Attach again: a fresh set, the VMs registered again.
    _attach(driver, ctx)
    assert _counts(aws) == {"lb": 1, "tg": 1, "cert": 1, "listeners": 2}
    health = aws.elbv2.describe_target_health(TargetGroupArn=aws_ids(infra).TargetGroupArn)["TargetHealthDescriptions"]
    assert sorted(h["Target"]["Id"] for h in health) == vm_ids


def test_health_check_override_and_its_port_admitted_from_the_lb(aws, spec, zone):
    block = {"healthCheck": {"path": "/ready", "port": 8081, "healthyThreshold": 2, "intervalSeconds": 10}}
    driver, ctx = _provisioned(spec, **block)
    _attach(driver, ctx)
    tg = driver.aws.elbv2.describe_target_groups(TargetGroupArns=[aws_ids(ctx.infra).TargetGroupArn])["TargetGroups"][0]
    assert (tg["HealthCheckPath"], tg["HealthCheckPort"]) == ("/ready", "8081")
    assert (tg["HealthyThresholdCount"], tg["HealthCheckIntervalSeconds"]) == (2, 10)
    sg = aws_ids(ctx.infra).LoadBalancerSecurityGroupID
    assert _vm_ingress(driver.aws, ctx.infra.VMSecurityGroupID) == {(80, sg), (8081, sg)}


def test_preflight_needs_a_zone_or_a_certificate(aws, spec):
    driver = AwsDriver(AwsTarget(region=REGION))
    ctx = make_ctx(variant(spec, loadBalancer={"domain": "app.nowhere.test"}))
    with pytest.raises(InvalidRequestError, match=r"loadBalancer.domain: no Route53 hosted zone .* app.nowhere.test"):
        driver.preflight(ctx)


def test_preflight_refuses_a_zone_that_cannot_hold_the_domain(aws, spec):
    other = aws.route53.create_hosted_zone(Name="other.test", CallerReference="z2")["HostedZone"]["Id"]
    ctx = make_ctx(variant(spec, loadBalancer={"domain": DOMAIN, "hostedZoneId": other.rsplit("/", 1)[-1]}))
    with pytest.raises(
        InvalidRequestError, match=re.escape("hostedZoneId: zone other.test cannot hold app.example.test")
    ):
        lb.preflight(aws, ctx)


def test_another_clouds_certificate_source_is_refused_before_any_aws_call(aws, spec, zone):
    # The spec refuses it (naming the field); stepValidate's capability check would refuse it next.
    with pytest.raises(ValidationError, match="certSource"):
        variant(spec, loadBalancer={"domain": DOMAIN, "certSource": "GCPManaged"})


def test_the_longest_matching_zone_wins(aws, spec, zone):
    inner = aws.route53.create_hosted_zone(Name="app.example.test", CallerReference="z3")["HostedZone"]["Id"]
    ctx = make_ctx(variant(spec, loadBalancer={"domain": DOMAIN}))
    lb.preflight(aws, ctx)
    assert aws_ids(ctx.infra).HostedZoneID == inner.rsplit("/", 1)[-1] != zone


def test_a_load_balancer_of_another_owner_is_never_adopted(aws, spec, zone):
    from vmplane.clouds.errors import ConflictError

    driver, ctx = _provisioned(spec)
    # Someone else's ALB already has the name this environment would use.
    aws.elbv2.create_load_balancer(
        Name=naming.lb_base_name(ctx.spec),
        Subnets=aws_ids(ctx.infra).PublicSubnetIDs,
        Tags=[{"Key": "zop:jobId", "Value": "job-other"}],
    )
    with pytest.raises(ConflictError, match="belongs to another job or owner"):
        driver.lb.ensure_frontend(ctx)


def test_a_provision_requests_the_certificate_beside_the_identity_and_the_lb_step_reuses_it(aws_iam, spec):
    """stepCreateIAM (first wave after stepValidate, beside the network) requests the certificate and
    writes its validation record; stepCreateLoadBalancer then makes no ACM or Route53 call at all."""
    made = aws_iam.route53.create_hosted_zone(Name="example.test", CallerReference="zone-1")
    zone = made["HostedZone"]["Id"].rsplit("/", 1)[-1]
    driver = AwsDriver(AwsTarget(region=REGION))
    ctx = make_ctx(variant(spec, loadBalancer={"domain": DOMAIN}))
    driver.preflight(ctx)
    create_identity(driver, ctx)
    ids = aws_ids(ctx.infra)
    assert ids.CertificateReady and ids.CertificateRequested and ctx.infra.NetworkID is None
    assert [c["CertificateArn"] for c in driver.aws.acm.list_certificates()["CertificateSummaryList"]] == [
        ids.CertificateArn
    ]
    assert [t for _, t in _records(driver.aws, zone)] == ["CNAME"]
    assert [r.Type for r in ids.DNSRecords] == ["CNAME"]
    for step in (driver.network.ensure, driver.pools.ensure_templates, driver.pools.ensure_vms):
        step(ctx)
    tally: Counter[str] = Counter()
    token = API_CALLS.set(tally)
    try:
        driver.lb.ensure_frontend(ctx)
    finally:
        API_CALLS.reset(token)
    assert not [op for op in tally if op.startswith(("acm.", "route53."))]
    for step in (driver.lb.ensure_backend, driver.lb.ensure_listener, driver.lb.ensure_dns_record):
        step(ctx)
    assert _counts(driver.aws) == {"lb": 1, "tg": 1, "cert": 1, "listeners": 2}
    # Detach forgets the certificate, so a later attach requests a new one in stepCreateLoadBalancer.
    driver.lb.detach(ctx, keep_vms=True)
    assert not aws_ids(ctx.infra).CertificateReady
    _attach(driver, ctx)
    assert _counts(driver.aws)["cert"] == 1 and aws_ids(ctx.infra).CertificateReady


def test_a_crash_before_the_certificate_is_ready_redoes_the_request_without_a_second_certificate(aws, spec, zone):
    driver = AwsDriver(AwsTarget(region=REGION))
    ctx = make_ctx(variant(spec, loadBalancer={"domain": DOMAIN}))
    driver.preflight(ctx)
    certs.request(driver.aws, ctx)
    # As if killed after the request and the record, before the flag: the next run finds and finishes it.
    aws_ids(ctx.infra).CertificateReady = False
    arn = aws_ids(ctx.infra).CertificateArn
    certs.request(driver.aws, ctx)
    assert aws_ids(ctx.infra).CertificateArn == arn and aws_ids(ctx.infra).CertificateReady
    assert len(driver.aws.acm.list_certificates()["CertificateSummaryList"]) == 1
    assert [t for _, t in _records(driver.aws, zone)] == ["CNAME"]
