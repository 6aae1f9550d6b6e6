"""The load balancer: an internet-facing ALB in the public subnets with its own security group, a target
group with the bootstrap's health check, an HTTPS listener with an ACM certificate (HTTP redirects to
HTTPS), and a Route53 alias record. `detach` removes every part and leaves the VMs running.

Every create finds its resource first (by name, then checked by tag) and records intent before acting,
like the rest of the driver. Route53 records cannot carry tags, so the ones vmplane wrote are listed in
`InfraConfig.DNSRecords` and removed from there.
"""

from __future__ import annotations

import contextlib
from typing import Any

from vmplane.clouds.aws import certs, compute, dns, naming
from vmplane.clouds.aws.errors import aws_call, aws_errors
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import find_tagged, job_filters, tag_list
from vmplane.clouds.aws.targets import DRAIN_SECONDS
from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.errors import (
    ConflictError,
    DependencyViolationError,
    InvalidRequestError,
    NotFoundError,
)
from vmplane.clouds.waits import poll, retry
from vmplane.envspec.models import AsgPool, CertSource, LoadBalancer
from vmplane.state import InfraConfig

HTTPS_PORT = 443
HTTP_PORT = 80
SSL_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
LB_TIMEOUT = 900.0
GONE_TIMEOUT = 600.0


def _lb(ctx: Context) -> LoadBalancer:
    if ctx.spec.load_balancer is None:
        raise InvalidRequestError("this environment has no loadBalancer block")
    return ctx.spec.load_balancer


def _elb_tags(t: Tagger, role: str, name: str) -> list[dict[str, str]]:
    return tag_list(t.tags(role, name))


def _find_ours(aws: AwsClients, t: Tagger, describe: Any, key: str, arn_key: str, name: str) -> dict[str, Any] | None:
    """An ELB resource found by its (account-unique) name: None if absent, refused if another owns it."""
    try:
        found = dict(aws_call(describe, Names=[name])[key][0])
    except NotFoundError:
        return None
    if not _owned_by_job(aws, found[arn_key], t):
        raise ConflictError(f"{name} exists and belongs to another job or owner; vmplane will not adopt it")
    return found


def _owned_by_job(aws: AwsClients, arn: str, t: Tagger) -> bool:
    desc = aws_call(aws.elbv2.describe_tags, ResourceArns=[arn])["TagDescriptions"]
    tags = {x["Key"]: x["Value"] for d in desc for x in d.get("Tags", [])}
    return tags.get(t.job_key) == t.job_id


# ---- hosted zone (stepValidate) -------------------------------------------------------------------


def preflight(aws: AwsClients, ctx: Context) -> None:
    lb = _lb(ctx)
    if lb.cert_source is not CertSource.AWSACM:
        raise InvalidRequestError(f"loadBalancer.certSource: {lb.cert_source.value} is not available on AWS (AWSACM)")
    zone = dns.resolve_hosted_zone(aws, lb)
    if zone is None and lb.certificate_arn is None:
        raise InvalidRequestError(
            f"loadBalancer.domain: no Route53 hosted zone in this account holds {lb.domain}; set "
            "loadBalancer.hostedZoneId, or give loadBalancer.certificateArn and write the DNS record yourself"
        )
    if lb.certificate_arn:
        status = aws_call(aws.acm.describe_certificate, CertificateArn=lb.certificate_arn)["Certificate"]["Status"]
        if status != "ISSUED":
            raise InvalidRequestError(f"loadBalancer.certificateArn: the certificate is {status}, not ISSUED")
    aws_ids(ctx.infra).HostedZoneID = zone
    ctx.log(f"load balancer domain {lb.domain}: hosted zone {zone or 'none (record written by the user)'}")


# ---- stepCreateLoadBalancer -----------------------------------------------------------------------


def ensure_load_balancer(aws: AwsClients, ctx: Context) -> None:
    """The LB security group, the certificate request (early, so DNS validation runs while VMs boot), the ALB."""
    infra, t = ctx.infra, ctx.tagger
    name = naming.lb_base_name(ctx.spec)
    aws_ids(infra).LoadBalancerName = name
    ctx.save()  # the marker that teardown must look for LB parts (see `started`)
    _ensure_lb_security_group(aws, ctx)
    certs.request(aws, ctx)
    found = _find_ours(aws, t, aws.elbv2.describe_load_balancers, "LoadBalancers", "LoadBalancerArn", name)
    if found is None:
        found = aws_call(
            aws.elbv2.create_load_balancer,
            Name=name,
            Subnets=aws_ids(infra).PublicSubnetIDs,
            SecurityGroups=[aws_ids(infra).LoadBalancerSecurityGroupID],
            Scheme="internet-facing",
            Type="application",
            IpAddressType="ipv4",
            Tags=_elb_tags(t, "lb", name),
        )["LoadBalancers"][0]
    aws_call(  # requests with malformed headers never reach the VMs
        aws.elbv2.modify_load_balancer_attributes,
        LoadBalancerArn=found["LoadBalancerArn"],
        Attributes=[{"Key": "routing.http.drop_invalid_header_fields.enabled", "Value": "true"}],
    )
    infra.LoadBalancerID = found["LoadBalancerArn"]
    infra.LoadBalancerDNSName = found["DNSName"]
    aws_ids(infra).LoadBalancerZoneID = found["CanonicalHostedZoneId"]
    ctx.save()
    ctx.log(
        f"load balancer {name} ({found['DNSName']}), internet-facing in {len(aws_ids(infra).PublicSubnetIDs)} subnets"
    )


def _ensure_lb_security_group(aws: AwsClients, ctx: Context) -> None:
    ec2, infra = aws.ec2, ctx.infra
    group = compute.find_or_create_group(aws, ctx, "lb-sg", "lb", "HTTPS and HTTP from anywhere")
    gid, perms = group["GroupId"], group.get("IpPermissions", [])
    aws_ids(infra).LoadBalancerSecurityGroupID = gid
    ctx.save()
    have = {
        p.get("FromPort")
        for p in perms
        if p.get("IpProtocol") == "tcp" and any(r.get("CidrIp") == "0.0.0.0/0" for r in p.get("IpRanges", []))
    }
    missing = [p for p in (HTTP_PORT, HTTPS_PORT) if p not in have]
    if missing:
        with contextlib.suppress(ConflictError):
            aws_call(
                ec2.authorize_security_group_ingress,
                GroupId=gid,
                IpPermissions=[
                    {
                        "IpProtocol": "tcp",
                        "FromPort": p,
                        "ToPort": p,
                        "IpRanges": [{"CidrIp": "0.0.0.0/0", "Description": "public listener"}],
                    }
                    for p in missing
                ],
            )


# ---- stepCreateTargetGroup ------------------------------------------------------------------------


def ensure_target_group(aws: AwsClients, ctx: Context) -> None:
    """The target group with the health check; the pools' VMs registered; VM ingress from the LB only."""
    lb, infra, t = _lb(ctx), ctx.infra, ctx.tagger
    hc = lb.health_check
    name = naming.target_group_name(ctx.spec)
    health = {
        "HealthCheckProtocol": "HTTP",
        "HealthCheckPath": hc.path,
        "HealthCheckPort": str(hc.port),
        "HealthCheckIntervalSeconds": hc.interval_seconds,
        "HealthyThresholdCount": hc.healthy_threshold,
        "UnhealthyThresholdCount": hc.unhealthy_threshold,
        "Matcher": {"HttpCode": "200"},
    }
    tg = _find_ours(aws, t, aws.elbv2.describe_target_groups, "TargetGroups", "TargetGroupArn", name)
    if tg is None:
        tg = aws_call(
            aws.elbv2.create_target_group,
            Name=name,
            Protocol="HTTP",
            Port=lb.target_port,
            VpcId=infra.NetworkID,
            TargetType="instance",
            Tags=_elb_tags(t, "target-group", name),
            **health,
        )["TargetGroups"][0]
    elif any(str(tg.get(k)) != str(v) for k, v in health.items() if k != "Matcher"):
        # A health-check change is a cloud change: updated in place.
        aws_call(aws.elbv2.modify_target_group, TargetGroupArn=tg["TargetGroupArn"], **health)
    arn = tg["TargetGroupArn"]
    aws_ids(infra).TargetGroupArn = arn
    ctx.save()
    aws_call(
        aws.elbv2.modify_target_group_attributes,
        TargetGroupArn=arn,
        Attributes=[{"Key": "deregistration_delay.timeout_seconds", "Value": str(DRAIN_SECONDS)}],
    )
    # Port 80 (and the health-check port) on the VMs now admit the LB's group only.
    compute.ensure_security_group(aws, ctx)
    fixed = [v.ID for v in infra.VMs if v.ID and v.Pool in _fixed_pools(ctx)]
    if fixed:
        aws_call(aws.elbv2.register_targets, TargetGroupArn=arn, Targets=[{"Id": i} for i in sorted(fixed)])
    for pool_name, group in sorted(infra.ScalingGroupID.items()):
        _attach_group(aws, group, arn)
        ctx.log(f"auto scaling group {group} ({pool_name}) registers its instances with {name}")
    ctx.log(
        f"target group {name}: HTTP:{lb.target_port}, health GET {hc.path} on {hc.port}; "
        f"{len(fixed)} Fixed-pool VMs registered"
    )


def _fixed_pools(ctx: Context) -> set[str]:
    return {n for n, p in ctx.spec.pools.items() if not isinstance(p, AsgPool)}


def _attach_group(aws: AwsClients, group: str, tg_arn: str) -> None:
    asg = aws.autoscaling
    g = aws_call(asg.describe_auto_scaling_groups, AutoScalingGroupNames=[group])["AutoScalingGroups"]
    if not g:
        raise NotFoundError(f"auto scaling group {group} not found")
    if tg_arn not in g[0].get("TargetGroupARNs", []):
        aws_call(asg.attach_load_balancer_target_groups, AutoScalingGroupName=group, TargetGroupARNs=[tg_arn])
    if g[0].get("HealthCheckType") != "ELB":
        # Instances the LB finds unhealthy get replaced, after the bootstrap's grace period.
        aws_call(asg.update_auto_scaling_group, AutoScalingGroupName=group, HealthCheckType="ELB")


# ---- stepCreateListener ---------------------------------------------------------------------------


def ensure_listener(aws: AwsClients, ctx: Context) -> None:
    """HTTPS with the certificate forwarding to the target group; HTTP answering with a redirect."""
    infra = ctx.infra
    arn, tg, cert = infra.LoadBalancerID, aws_ids(infra).TargetGroupArn, aws_ids(infra).CertificateArn
    if not (arn and tg and cert):
        raise InvalidRequestError("the load balancer, target group and certificate must exist before the listener")
    certs.wait_issued(aws, cert)
    _wait_active(aws, arn)
    current = {int(x["Port"]): x for x in aws_call(aws.elbv2.describe_listeners, LoadBalancerArn=arn)["Listeners"]}
    forward = [{"Type": "forward", "TargetGroupArn": tg}]
    redirect = [
        {
            "Type": "redirect",
            "RedirectConfig": {"Protocol": "HTTPS", "Port": str(HTTPS_PORT), "StatusCode": "HTTP_301"},
        }
    ]
    https = current.get(HTTPS_PORT)
    if https is None:
        https = aws_call(
            aws.elbv2.create_listener,
            LoadBalancerArn=arn,
            Protocol="HTTPS",
            Port=HTTPS_PORT,
            SslPolicy=SSL_POLICY,
            Certificates=[{"CertificateArn": cert}],
            DefaultActions=forward,
            Tags=_elb_tags(ctx.tagger, "listener", "https"),
        )["Listeners"][0]
    elif [c["CertificateArn"] for c in https.get("Certificates", [])] != [cert]:
        aws_call(aws.elbv2.modify_listener, ListenerArn=https["ListenerArn"], Certificates=[{"CertificateArn": cert}])
    http = (
        current.get(HTTP_PORT)
        or aws_call(
            aws.elbv2.create_listener,
            LoadBalancerArn=arn,
            Protocol="HTTP",
            Port=HTTP_PORT,
            DefaultActions=redirect,
            Tags=_elb_tags(ctx.tagger, "listener", "http"),
        )["Listeners"][0]
    )
    aws_ids(infra).ListenerArns = [https["ListenerArn"], http["ListenerArn"]]
    ctx.save()
    ctx.log(f"listeners: HTTPS:{HTTPS_PORT} ({SSL_POLICY}) -> target group; HTTP:{HTTP_PORT} -> 301 HTTPS")


def _wait_active(aws: AwsClients, arn: str) -> None:
    def active() -> bool | None:
        lb = aws_call(aws.elbv2.describe_load_balancers, LoadBalancerArns=[arn])["LoadBalancers"][0]
        state = lb["State"]["Code"]
        if state == "failed":
            raise InvalidRequestError(f"load balancer {arn} failed: {lb['State'].get('Reason', '')}")
        return True if state == "active" else None

    poll(active, what="the load balancer to be active", timeout=LB_TIMEOUT, first=0.05, cap=10)


# ---- stepCreateDNSRecord --------------------------------------------------------------------------


def ensure_dns_record(aws: AwsClients, ctx: Context) -> None:
    lb, infra = _lb(ctx), ctx.infra
    if not aws_ids(infra).HostedZoneID:
        ctx.log(f"no hosted zone: point {lb.domain} at {infra.LoadBalancerDNSName} (CNAME or alias) yourself")
        return
    alias = {
        "HostedZoneId": aws_ids(infra).LoadBalancerZoneID,
        "DNSName": infra.LoadBalancerDNSName,
        "EvaluateTargetHealth": True,
    }
    dns.upsert(aws, ctx, aws_ids(infra).HostedZoneID, {"Name": lb.domain, "Type": "A", "AliasTarget": alias})
    ctx.log(f"DNS {lb.domain} A alias -> {infra.LoadBalancerDNSName}")


# ---- detach (vmOp detach_lb, and the first teardown step) -----------------------------------------


def detach(aws: AwsClients, ctx: Context, *, keep_vms: bool) -> None:
    """Remove the LB and everything that belongs to it, found by record and by tag; the VMs stay.

    With `keep_vms` the VM security group gets its VPC-internal rules back (the LB-only rule goes);
    in teardown the group is deleted next anyway.
    """
    infra, t = ctx.infra, ctx.tagger
    if not started(infra):
        ctx.log("no load balancer was created for this job")
        return
    for rec in [r for r in aws_ids(infra).DNSRecords if r.Type == "A"]:
        dns.delete_record(aws, rec)
        aws_ids(infra).DNSRecords = [r for r in aws_ids(infra).DNSRecords if r != rec]
        ctx.save()
    # One scan of the job's ELB resources serves the whole detach.
    arns = [a for a, _ in job_elb_resources(aws, t)]
    lbs = [a for a in arns if ":loadbalancer/" in a]
    tgs = [a for a in arns if ":targetgroup/" in a]
    for arn in lbs:
        for listener in aws_call(aws.elbv2.describe_listeners, LoadBalancerArn=arn)["Listeners"]:
            with contextlib.suppress(NotFoundError):
                aws_call(aws.elbv2.delete_listener, ListenerArn=listener["ListenerArn"])
    aws_ids(infra).ListenerArns = []
    ctx.save()
    for group in compute.job_scaling_groups(aws, t):
        for tg in tgs:
            with contextlib.suppress(NotFoundError, InvalidRequestError):
                aws_call(
                    aws.autoscaling.detach_load_balancer_target_groups, AutoScalingGroupName=group, TargetGroupARNs=[tg]
                )
    for arn in lbs:
        with contextlib.suppress(NotFoundError):
            aws_call(aws.elbv2.delete_load_balancer, LoadBalancerArn=arn)
    for arn in lbs:
        poll(lambda a=arn: True if _lb_gone(aws, a) else None, what="load balancer deletion", timeout=GONE_TIMEOUT)
    infra.LoadBalancerID = infra.LoadBalancerDNSName = aws_ids(infra).LoadBalancerZoneID = aws_ids(
        infra
    ).LoadBalancerName = None
    ctx.save()
    for tg in tgs:

        def delete_tg(a: str = tg) -> None:
            with contextlib.suppress(NotFoundError):
                aws_call(aws.elbv2.delete_target_group, TargetGroupArn=a)

        # "ResourceInUse" until the LB and the groups' attachments are gone.
        retry(delete_tg, what=f"delete {tg}", timeout=GONE_TIMEOUT, retry_on=(ConflictError,))
    aws_ids(infra).TargetGroupArn = None
    lb_sgs = [
        g["GroupId"] for g in find_tagged(aws.ec2.describe_security_groups, "SecurityGroups", job_filters(t, "lb-sg"))
    ]
    aws_ids(infra).LoadBalancerSecurityGroupID = None
    ctx.save()
    _drop_vm_ingress_from(aws, ctx, lb_sgs, restore=keep_vms)
    for gid in lb_sgs:

        def delete_sg(g: str = gid) -> None:
            with contextlib.suppress(NotFoundError):
                aws_call(aws.ec2.delete_security_group, GroupId=g)

        # The ALB's network interfaces release the group a little after the ALB is gone.
        retry(delete_sg, what=f"delete {gid}", timeout=GONE_TIMEOUT, retry_on=(DependencyViolationError,))
    for rec in list(aws_ids(infra).DNSRecords):  # the certificate's validation records
        dns.delete_record(aws, rec)
        aws_ids(infra).DNSRecords = [r for r in aws_ids(infra).DNSRecords if r != rec]
        ctx.save()
    certs.delete_job_certificates(aws, ctx)
    ctx.log(f"load balancer removed: {len(lbs)} ALB, {len(tgs)} target groups, {len(lb_sgs)} security groups")


def started(infra: InfraConfig) -> bool:
    """Whether any LB part may exist: stepCreateLoadBalancer records the name before creating anything,
    and detach clears the certificate last. Saves a tag scan of ELB and ACM on every other teardown."""
    return bool(
        aws_ids(infra).LoadBalancerName
        or infra.LoadBalancerID
        or aws_ids(infra).TargetGroupArn
        or aws_ids(infra).LoadBalancerSecurityGroupID
        or aws_ids(infra).ListenerArns
        or aws_ids(infra).CertificateArn
        or aws_ids(infra).CertificateRequested
        or aws_ids(infra).DNSRecords
    )


def _drop_vm_ingress_from(aws: AwsClients, ctx: Context, lb_sgs: list[str], *, restore: bool) -> None:
    vm_groups = find_tagged(aws.ec2.describe_security_groups, "SecurityGroups", job_filters(ctx.tagger, "vm-sg"))
    if restore and vm_groups and aws_ids(ctx.infra).VpcCidr:
        compute.ensure_security_group(aws, ctx)  # desired rules without an LB: ingress ports from the VPC
        return
    for g in vm_groups:
        refs = [
            {**{k: p[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in p}, "UserIdGroupPairs": pairs}
            for p in g.get("IpPermissions", [])
            if (pairs := [compute.revoke_pair(x) for x in p.get("UserIdGroupPairs", []) if x["GroupId"] in lb_sgs])
        ]
        if refs:
            with contextlib.suppress(NotFoundError):
                aws_call(aws.ec2.revoke_security_group_ingress, GroupId=g["GroupId"], IpPermissions=refs)


def _lb_gone(aws: AwsClients, arn: str) -> bool:
    try:
        aws_call(aws.elbv2.describe_load_balancers, LoadBalancerArns=[arn])
    except NotFoundError:
        return True
    return False


# ---- find by tag (teardown and the leftover check) ------------------------------------------------


def _tagged_elb(aws: AwsClients, t: Tagger, arns: list[str]) -> list[tuple[str, list[dict[str, str]]]]:
    out: list[tuple[str, list[dict[str, str]]]] = []
    for i in range(0, len(arns), 20):  # DescribeTags takes at most 20 ARNs
        for d in aws_call(aws.elbv2.describe_tags, ResourceArns=arns[i : i + 20])["TagDescriptions"]:
            tags = d.get("Tags", [])
            if any(x["Key"] == t.job_key and x["Value"] == t.job_id for x in tags):
                out.append((d["ResourceArn"], tags))
    return out


def job_elb_resources(aws: AwsClients, t: Tagger) -> list[tuple[str, list[dict[str, str]]]]:
    """The job's load balancers and target groups (ARN, tags), load balancers first."""
    with aws_errors():
        lbs = [
            x["LoadBalancerArn"]
            for p in aws.elbv2.get_paginator("describe_load_balancers").paginate()
            for x in p["LoadBalancers"]
        ]
        tgs = [
            x["TargetGroupArn"]
            for p in aws.elbv2.get_paginator("describe_target_groups").paginate()
            for x in p["TargetGroups"]
        ]
    return _tagged_elb(aws, t, lbs) + _tagged_elb(aws, t, tgs)


def leftovers(aws: AwsClients, t: Tagger, infra: InfraConfig) -> list[tuple[str, str]]:
    out = [("load-balancer" if ":loadbalancer/" in a else "target-group", a) for a, _ in job_elb_resources(aws, t)]
    out += [("certificate", a) for a, _ in certs.job_certificates(aws, t)]
    out += [
        ("dns-record", f"{r.Name} {r.Type}") for r in aws_ids(infra).DNSRecords if dns.find_record(aws, r) is not None
    ]
    return out
