"""The load balancer: ALB in the public subnets, HTTPS with ACM, the DNS alias."""

from __future__ import annotations

from vmplane.clouds.aws.spec import AwsLoadBalancer
from vmplane.envspec.models import EnvSpec
from vmplane.tf.aws.common import BASE, OWNER, E, tag_map
from vmplane.tf.aws.network import egress_all, ingress
from vmplane.tf.hcl import Block, Comment, Item


def load_balancer(spec: EnvSpec) -> list[Item]:
    assert spec.load_balancer is not None
    given_cert = spec.load_balancer.certificate_arn is not None
    aws_lb = spec.load_balancer.options(AwsLoadBalancer)
    given_zone = aws_lb is not None and aws_lb.hosted_zone_id is not None
    out: list[Item] = [Comment("---- load balancer: ALB in the public subnets, HTTPS with ACM, DNS alias ----")]
    out.append(
        Block("locals")
        .attr("lb", E("local.cloud.loadBalancer"))
        .attr("lb_ports", E("distinct([local.lb.targetPort, local.lb.healthCheck.port])"))
        # The direct pipeline's ALB name: at most 32 chars, unique per org/env (clouds/aws/lb.py).
        .attr(
            "lb_name",
            E(f'"${{trimsuffix(substr(local.identity.name, 0, 19), "-")}}-${{substr(sha1("{OWNER}"), 0, 8)}}"'),
        )
    )
    zone = Block("data", ["aws_route53_zone", "this"])
    if given_zone:
        zone.attr("zone_id", E("local.lb.aws.hostedZoneId"))
    else:
        # The zone whose name is a suffix of the domain: the parent domain (one label up).
        zone.attr("name", E('join(".", slice(split(".", local.lb.domain), 1, length(split(".", local.lb.domain))))'))
        zone.attr("private_zone", False)
    out.append(zone)
    sg = Block("resource", ["aws_security_group", "lb"])
    sg.attr("name", E(f'"{BASE}-lb"'))
    sg.attr("description", E(f'"vmplane lb of {OWNER}: HTTPS and HTTP from anywhere"'))
    sg.attr("vpc_id", E("aws_vpc.this.id"))
    sg.attr("tags", tag_map("lb-sg", f'"{BASE}-lb"'))
    out.append(sg)
    lb_in = ingress("lb", "lb", 'toset(["80", "443"])', "cidr_ipv4", "0.0.0.0/0", "public listener")
    lb_in.body.insert(0, Comment("checkov:skip=CKV_AWS_260:port 80 on the LB only answers with a redirect to HTTPS"))
    out.append(lb_in)
    out.append(egress_all("lb", "to the VMs"))
    out.append(
        Block("resource", ["aws_lb", "this"])
        .attr("name", E("local.lb_name"))
        .attr("load_balancer_type", "application")
        .attr("internal", False)
        .attr("drop_invalid_header_fields", True)
        .attr("subnets", E("aws_subnet.public[*].id"))
        .attr("security_groups", E("[aws_security_group.lb.id]"))
        .attr("tags", tag_map("lb", "local.lb_name"))
    )
    tg = Block("resource", ["aws_lb_target_group", "this"])
    tg.attr("name", E('"${local.lb_name}-tg"'))
    tg.attr("port", E("local.lb.targetPort")).attr("protocol", "HTTP").attr("vpc_id", E("aws_vpc.this.id"))
    tg.attr("target_type", "instance").attr("deregistration_delay", 30)
    hc = tg.block("health_check")
    hc.attr("protocol", "HTTP").attr("path", E("local.lb.healthCheck.path"))
    hc.attr("port", E("tostring(local.lb.healthCheck.port)")).attr("matcher", "200")
    hc.attr("healthy_threshold", E("local.lb.healthCheck.healthyThreshold"))
    hc.attr("unhealthy_threshold", E("local.lb.healthCheck.unhealthyThreshold"))
    hc.attr("interval", E("local.lb.healthCheck.intervalSeconds"))
    # As the direct driver sends it (clouds/aws/lb.health_check_timeout): below the interval, else 6 s.
    hc.attr("timeout", E("min(6, local.lb.healthCheck.intervalSeconds - 1)"))
    tg.attr("tags", tag_map("target-group", '"${local.lb_name}-tg"'))
    out.append(tg)
    if given_cert:
        cert_arn = "local.lb.certificateArn"
    else:
        cert = Block("resource", ["aws_acm_certificate", "this"])
        cert.attr("domain_name", E("local.lb.domain")).attr("validation_method", "DNS")
        cert.attr("tags", tag_map("certificate", "local.lb.domain"))
        cert.block("lifecycle").attr("create_before_destroy", True)
        out.append(cert)
        val = Block("resource", ["aws_route53_record", "validation"])
        val.attr(
            "for_each",
            E(
                "{\n"
                "    for o in aws_acm_certificate.this.domain_validation_options : o.domain_name => {\n"
                "      name   = o.resource_record_name\n"
                "      type   = o.resource_record_type\n"
                "      record = o.resource_record_value\n"
                "    }\n"
                "  }"
            ),
        )
        val.attr("zone_id", E("data.aws_route53_zone.this.zone_id"))
        val.attr("name", E("each.value.name")).attr("type", E("each.value.type"))
        val.attr("ttl", 300).attr("records", E("[each.value.record]")).attr("allow_overwrite", True)
        out.append(val)
        out.append(
            Block("resource", ["aws_acm_certificate_validation", "this"])
            .attr("certificate_arn", E("aws_acm_certificate.this.arn"))
            .attr("validation_record_fqdns", E("[for r in aws_route53_record.validation : r.fqdn]"))
        )
        cert_arn = "aws_acm_certificate_validation.this.certificate_arn"
    https = Block("resource", ["aws_lb_listener", "https"])
    https.attr("load_balancer_arn", E("aws_lb.this.arn")).attr("port", 443).attr("protocol", "HTTPS")
    https.attr("ssl_policy", "ELBSecurityPolicy-TLS13-1-2-2021-06").attr("certificate_arn", E(cert_arn))
    https.block("default_action").attr("type", "forward").attr("target_group_arn", E("aws_lb_target_group.this.arn"))
    https.attr("tags", tag_map("listener", '"https"'))
    out.append(https)
    http = Block("resource", ["aws_lb_listener", "http"])
    http.attr("load_balancer_arn", E("aws_lb.this.arn")).attr("port", 80).attr("protocol", "HTTP")
    action = http.block("default_action").attr("type", "redirect")
    action.block("redirect").attr("protocol", "HTTPS").attr("port", "443").attr("status_code", "HTTP_301")
    http.attr("tags", tag_map("listener", '"http"'))
    out.append(http)
    alias = Block("resource", ["aws_route53_record", "alias"])
    alias.attr("zone_id", E("data.aws_route53_zone.this.zone_id")).attr("name", E("local.lb.domain")).attr("type", "A")
    target = alias.block("alias")
    target.attr("name", E("aws_lb.this.dns_name")).attr("zone_id", E("aws_lb.this.zone_id"))
    target.attr("evaluate_target_health", True)
    out.append(alias)
    return out
