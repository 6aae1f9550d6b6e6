"""The load balancer: an internet-facing ALB in the public subnets with its own security group, a target
group with the bootstrap's health check, an HTTPS listener with an ACM certificate (HTTP redirects to
HTTPS), and a Route53 alias record. `lb_teardown.detach` removes every part and leaves the VMs running.

Every create finds its resource first (by name, then checked by tag) and records intent before acting,
like the rest of the driver. Route53 records cannot carry tags, so the ones vmplane wrote are listed in
`InfraConfig.DNSRecords` and removed from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vmplane.clouds.aws import certs, conflicts, dns, naming, security_groups
from vmplane.clouds.aws.errors import aws_call, aws_errors
from vmplane.clouds.aws.ids import aws_ids
from vmplane.clouds.aws.security_groups import HTTP_PORT, HTTPS_PORT
from vmplane.clouds.aws.session import AwsClients
from vmplane.clouds.aws.tags import TagList, owned_by, tag_list
from vmplane.clouds.aws.targets import DRAIN_SECONDS
from vmplane.clouds.base import Context, Tagger
from vmplane.clouds.errors import (
    ConflictError,
    InvalidRequestError,
    NotFoundError,
)
from vmplane.clouds.waits import poll
from vmplane.envspec.models import AsgPool, CertSource, LoadBalancer
from vmplane.state import VMState

SSL_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
LB_TIMEOUT = 900.0
# ELBv2 HTTP target groups: HealthCheckTimeoutSeconds is 2..120, 6 when not sent (botocore elbv2 model).
HTTP_HEALTH_TIMEOUT_DEFAULT, HTTP_HEALTH_TIMEOUT_MIN = 6, 2


def _lb(ctx: Context) -> LoadBalancer:
    if ctx.spec.load_balancer is None:
        raise InvalidRequestError("this environment has no loadBalancer block")
    return ctx.spec.load_balancer


def _elb_tags(t: Tagger, role: str, name: str) -> list[dict[str, str]]:
    return tag_list(t.tags(role, name))


def _find_ours(
    aws: AwsClients, t: Tagger, describe: Any, key: str, arn_key: str, name: str
) -> Mapping[str, Any] | None:
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
    return owned_by([x for d in desc for x in d.get("Tags", [])], t)


# ---- hosted zone (stepValidate) -------------------------------------------------------------------


def preflight(aws: AwsClients, ctx: Context) -> None:
    lb = _lb(ctx)
    if lb.cert_source is not CertSource.AWSACM:
        raise InvalidRequestError(f"loadBalancer.certSource: {lb.cert_source.value} is not available on AWS (AWSACM)")
    zone = dns.resolve_hosted_zone(aws, lb)
    if zone is None and lb.certificate_arn is None:
        raise InvalidRequestError(
            f"loadBalancer.domain: no Route53 hosted zone in this account holds {lb.domain}; set "
            "loadBalancer.aws.hostedZoneId, or give loadBalancer.certificateArn and write the DNS record yourself"
        )
    if lb.certificate_arn:
        status = aws_call(aws.acm.describe_certificate, CertificateArn=lb.certificate_arn)["Certificate"]["Status"]
        if status != "ISSUED":
            raise InvalidRequestError(f"loadBalancer.certificateArn: the certificate is {status}, not ISSUED")
    conflicts.check_lb_names(aws, ctx, zone)
    aws_ids(ctx.infra).HostedZoneID = zone
    ctx.log(f"load balancer domain {lb.domain}: hosted zone {zone or 'none (record written by the user)'}")


# ---- stepCreateLoadBalancer -----------------------------------------------------------------------


def ensure_load_balancer(aws: AwsClients, ctx: Context) -> None:
    """The LB security group, the certificate (already requested by stepCreateIAM in a provision; an
    attach requests it here), the ALB."""
    infra, t = ctx.infra, ctx.tagger
    name = naming.lb_base_name(ctx.spec)
    aws_ids(infra).LoadBalancerName = name
    ctx.save()  # the marker that teardown must look for LB parts (see `started`)
    security_groups.ensure_lb_security_group(aws, ctx)
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


# ---- stepCreateTargetGroup ------------------------------------------------------------------------


def health_check_timeout(interval: int) -> int:
    """ELB refuses a timeout not below the interval, and with none sent an HTTP target group takes 6 s:
    so an interval of 5 or 6 (the spec allows 5..300, as AWS does) needs an explicit, shorter one.
    Source: https://docs.aws.amazon.com/elasticloadbalancing/latest/application/target-group-health-checks.html
    Longer intervals keep AWS's default, so existing target groups see no change."""
    return max(HTTP_HEALTH_TIMEOUT_MIN, min(HTTP_HEALTH_TIMEOUT_DEFAULT, interval - 1))


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
        "HealthCheckTimeoutSeconds": health_check_timeout(hc.interval_seconds),
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
    security_groups.ensure_security_group(aws, ctx)
    # A stopped VM cannot be registered (ELB wants it running); once registered it stays, "unused" while stopped.
    fixed = [v.ID for v in infra.VMs if v.ID and v.Pool in _fixed_pools(ctx) and v.State is not VMState.stopped]
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

    poll(active, what="the load balancer to be active", timeout=LB_TIMEOUT, first=0.05)


# ---- stepCreateDNSRecord --------------------------------------------------------------------------


def ensure_dns_record(aws: AwsClients, ctx: Context) -> None:
    lb, infra = _lb(ctx), ctx.infra
    zone = aws_ids(infra).HostedZoneID
    if not zone:
        ctx.log(f"no hosted zone: point {lb.domain} at {infra.LoadBalancerDNSName} (CNAME or alias) yourself")
        return
    alias = {
        "HostedZoneId": aws_ids(infra).LoadBalancerZoneID,
        "DNSName": infra.LoadBalancerDNSName,
        "EvaluateTargetHealth": True,
    }
    dns.upsert(aws, ctx, zone, {"Name": lb.domain, "Type": "A", "AliasTarget": alias})
    ctx.log(f"DNS {lb.domain} A alias -> {infra.LoadBalancerDNSName}")


# ---- find by tag (teardown and the leftover check) ------------------------------------------------


def _tagged_elb(aws: AwsClients, t: Tagger, arns: list[str]) -> list[tuple[str, TagList]]:
    out: list[tuple[str, TagList]] = []
    for i in range(0, len(arns), 20):  # DescribeTags takes at most 20 ARNs
        for d in aws_call(aws.elbv2.describe_tags, ResourceArns=arns[i : i + 20])["TagDescriptions"]:
            tags = d.get("Tags", [])
            if owned_by(tags, t):
                out.append((d["ResourceArn"], tags))
    return out


def job_elb_resources(aws: AwsClients, t: Tagger) -> list[tuple[str, TagList]]:
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


def job_listeners(aws: AwsClients, t: Tagger, lb_arns: list[str]) -> list[tuple[str, TagList]]:
    """The listeners of these load balancers that carry the job's tag (ARN, tags)."""
    arns = [
        x["ListenerArn"]
        for a in lb_arns
        for x in aws_call(aws.elbv2.describe_listeners, LoadBalancerArn=a)["Listeners"]
    ]
    return _tagged_elb(aws, t, arns)
