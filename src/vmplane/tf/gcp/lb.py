"""The load balancer: a global external Application Load Balancer, HTTPS with a Google-managed
certificate, HTTP answered with a redirect to HTTPS, and the A record in Cloud DNS."""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.tf.gcp.common import BASE, E, description, labels
from vmplane.tf.hcl import Block, Comment, Item


def load_balancer(spec: EnvSpec) -> list[Item]:
    assert spec.load_balancer is not None
    fixed = any(p.mode == "fixed" for p in spec.pools.values())
    asg = any(p.mode == "asg" for p in spec.pools.values())
    out: list[Item] = [Comment("---- load balancer: global external ALB, managed certificate, Cloud DNS ----")]
    out.append(
        Block("variable", ["dns_zone"])
        .attr("type", E("string"))
        .attr("default", None)
        .attr(
            "description",
            "The Cloud DNS managed zone (its name) that holds loadBalancer.domain, when the spec does not "
            "set loadBalancer.gcp.dnsZone; set it in terraform.tfvars.",
        )
    )
    out.append(
        Block("locals")
        .attr("lb", E("local.cloud.loadBalancer"))
        .attr("lb_ports", E("distinct([tostring(local.lb.targetPort), tostring(local.lb.healthCheck.port)])"))
        # The spec's zone wins; the variable covers a spec that leaves it out (no lookup by domain here).
        .attr("dns_zone", E("try(local.lb.gcp.dnsZone, var.dns_zone)"))
    )
    zone = Block("data", ["google_dns_managed_zone", "this"]).attr("name", E("local.dns_zone"))
    check = zone.block("lifecycle").block("precondition")
    check.attr("condition", E("local.dns_zone != null"))
    check.attr(
        "error_message",
        "Give the Cloud DNS managed zone of loadBalancer.domain: loadBalancer.gcp.dnsZone in the environment "
        "file, or dns_zone in terraform.tfvars.",
    )
    out.append(zone)
    hc = Block("resource", ["google_compute_health_check", "this"])
    hc.attr("name", E(f'"{BASE}-hc"')).attr("description", description("health check"))
    hc.attr("check_interval_sec", E("local.lb.healthCheck.intervalSeconds"))
    hc.attr("timeout_sec", 5)  # the smallest interval the spec allows
    hc.attr("healthy_threshold", E("local.lb.healthCheck.healthyThreshold"))
    hc.attr("unhealthy_threshold", E("local.lb.healthCheck.unhealthyThreshold"))
    http_hc = hc.block("http_health_check")
    http_hc.attr("port", E("local.lb.healthCheck.port")).attr("request_path", E("local.lb.healthCheck.path"))
    out.append(hc)
    groups = []
    if asg:
        groups.append("{ for k, g in google_compute_region_instance_group_manager.pool : k => g.instance_group }")
    if fixed:
        groups.append("{ for k, g in google_compute_instance_group.fixed : k => g.self_link }")
    backend = Block("resource", ["google_compute_backend_service", "this"])
    backend.attr("name", E(f'"{BASE}-backend"')).attr("description", description("backend service"))
    backend.attr("load_balancing_scheme", "EXTERNAL_MANAGED").attr("protocol", "HTTP").attr("port_name", "http")
    backend.attr("timeout_sec", 30).attr("health_checks", E("[google_compute_health_check.this.id]"))
    dyn = backend.block("dynamic", "backend")
    dyn.attr("for_each", E(groups[0] if len(groups) == 1 else f"merge({', '.join(groups)})"))
    content = dyn.block("content").attr("group", E("backend.value"))
    content.attr("balancing_mode", "UTILIZATION").attr("capacity_scaler", 1.0)
    backend.block("log_config").attr("enable", True).attr("sample_rate", 1.0)
    out.append(backend)
    out.append(
        Block("resource", ["google_compute_url_map", "https"])
        .attr("name", E(f'"{BASE}-https"'))
        .attr("description", description("url map"))
        .attr("default_service", E("google_compute_backend_service.this.id"))
    )
    cert = Block("resource", ["google_compute_managed_ssl_certificate", "this"])
    # A certificate cannot change in place: a new domain makes a new one (named by its hash) before the old goes.
    cert.attr("name", E(f'"{BASE}-${{substr(sha1(local.lb.domain), 0, 6)}}"'))
    cert.attr("description", description("certificate"))
    cert.block("managed").attr("domains", E("[local.lb.domain]"))
    cert.block("lifecycle").attr("create_before_destroy", True)
    out.append(cert)
    policy = Block("resource", ["google_compute_ssl_policy", "this"])
    policy.attr("name", E(f'"{BASE}-tls"')).attr("description", description("TLS policy"))
    policy.attr("profile", "MODERN").attr("min_tls_version", "TLS_1_2")
    out.append(policy)
    out.append(
        Block("resource", ["google_compute_target_https_proxy", "this"])
        .attr("name", E(f'"{BASE}-https"'))
        .attr("description", description("HTTPS proxy"))
        .attr("url_map", E("google_compute_url_map.https.id"))
        .attr("ssl_certificates", E("[google_compute_managed_ssl_certificate.this.id]"))
        .attr("ssl_policy", E("google_compute_ssl_policy.this.id"))
    )
    # Port 80 only answers with a redirect to HTTPS: its URL map has no backend.
    redirect = Block("resource", ["google_compute_url_map", "http_redirect"])
    redirect.attr("name", E(f'"{BASE}-http"')).attr("description", description("url map (HTTP to HTTPS)"))
    to_https = redirect.block("default_url_redirect").attr("https_redirect", True).attr("strip_query", False)
    to_https.attr("redirect_response_code", "MOVED_PERMANENTLY_DEFAULT")
    out.append(redirect)
    out.append(
        Block("resource", ["google_compute_target_http_proxy", "this"])
        .attr("name", E(f'"{BASE}-http"'))
        .attr("description", description("HTTP proxy (redirect only)"))
        .attr("url_map", E("google_compute_url_map.http_redirect.id"))
    )
    out.append(
        Block("resource", ["google_compute_global_address", "this"])
        .attr("name", E(f'"{BASE}-lb"'))
        .attr("description", description("load balancer address"))
        .attr("labels", labels("lb-address"))
    )
    for name, port, proxy in (("https", 443, "target_https_proxy"), ("http", 80, "target_http_proxy")):
        out.append(
            Block("resource", ["google_compute_global_forwarding_rule", name])
            .attr("name", E(f'"{BASE}-{name}"'))
            .attr("description", description(f"forwarding rule ({name})"))
            .attr("load_balancing_scheme", "EXTERNAL_MANAGED")
            .attr("ip_protocol", "TCP")
            .attr("ip_address", E("google_compute_global_address.this.id"))
            .attr("port_range", str(port))
            .attr("target", E(f"google_compute_{proxy}.this.id"))
            .attr("labels", labels(f"lb-{name}"))
        )
    out.append(
        Block("resource", ["google_dns_record_set", "this"])
        .attr("managed_zone", E("data.google_dns_managed_zone.this.name"))
        .attr("name", E('"${local.lb.domain}."'))
        .attr("type", "A")
        .attr("ttl", 300)
        .attr("rrdatas", E("[google_compute_global_address.this.address]"))
    )
    return out
