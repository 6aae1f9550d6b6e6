"""The network: a custom-mode VPC, one regional subnetwork, Cloud NAT for egress, the firewall rules.

GCP firewalls are deny-all for ingress unless a rule allows it; each rule here selects the VMs by their
network tag and names its sources. None admits 0.0.0.0/0: the VMs have no external address at all, and
the load balancer reaches them from Google's front-end ranges only.
"""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.tf.gcp.common import BASE, GFE_RANGES, IAP_RANGE, E, description, interactive
from vmplane.tf.hcl import Attr, Block, Comment, Item, Value


def network(spec: EnvSpec) -> list[Item]:
    out: list[Item] = [Comment("---- network: custom VPC, one regional subnetwork, Cloud NAT, firewall ----")]
    out.append(
        Block("data", ["google_compute_zones", "available"])
        .attr("region", E("local.identity.provider.region"))
        .attr("status", "UP")
    )
    out.append(
        Block("resource", ["google_compute_network", "this"])
        .attr("name", E("local.base"))
        .attr("description", description("network"))
        # No default subnets in every region, and no default firewall rules: only what follows exists.
        .attr("auto_create_subnetworks", False)
        .attr("routing_mode", "REGIONAL")
    )
    subnet = Block("resource", ["google_compute_subnetwork", "vms"])
    subnet.attr("name", E(f'"{BASE}-vms"'))
    subnet.attr("description", description("subnetwork"))
    subnet.attr("network", E("google_compute_network.this.id"))
    subnet.attr("region", E("local.identity.provider.region"))
    # GCP subnetworks are regional: one spans every zone, so it takes the whole CIDR.
    subnet.attr("ip_cidr_range", E("local.identity.network.cidr"))
    # The VMs have no external address; Google APIs (logging, monitoring, OS Config) are reached privately.
    subnet.attr("private_ip_google_access", True)
    logs = subnet.block("log_config")
    logs.attr("aggregation_interval", "INTERVAL_10_MIN").attr("flow_sampling", 0.5)
    logs.attr("metadata", "INCLUDE_ALL_METADATA")
    out.append(subnet)
    out.append(
        Block("resource", ["google_compute_router", "this"])
        .attr("name", E(f'"{BASE}-router"'))
        .attr("description", description("router"))
        .attr("network", E("google_compute_network.this.id"))
        .attr("region", E("local.identity.provider.region"))
    )
    nat = Block("resource", ["google_compute_router_nat", "this"])
    nat.attr("name", E(f'"{BASE}-nat"'))
    nat.attr("router", E("google_compute_router.this.name"))
    nat.attr("region", E("local.identity.provider.region"))
    nat.attr("nat_ip_allocate_option", "AUTO_ONLY")
    nat.attr("source_subnetwork_ip_ranges_to_nat", "ALL_SUBNETWORKS_ALL_IP_RANGES")
    nat.block("log_config").attr("enable", True).attr("filter", "ERRORS_ONLY")
    out.append(nat)
    out += firewall(spec, interactive(spec))
    return out


def _rule(name: str, what: str, ports: Value, sources: Value) -> Block:
    rule = Block("resource", ["google_compute_firewall", name])
    rule.attr("name", E(f'"{BASE}-{name.replace("_", "-")}"'))
    rule.attr("description", description(what))
    rule.attr("network", E("google_compute_network.this.id"))
    rule.attr("direction", "INGRESS")
    rule.attr("source_ranges", sources)
    rule.attr("target_tags", E("[local.vm_tag]"))
    rule.block("allow").attr("protocol", "tcp").attr("ports", ports)
    return rule


def firewall(spec: EnvSpec, interactive: bool) -> list[Item]:
    """Ingress to the VMs: ingressPorts from inside the network; with a load balancer, its ports from
    Google's front ends; port 22 from IAP only, and only while interactive sessions are allowed."""
    inside = _rule(
        "allow_internal",
        "firewall rule (ingressPorts from inside the network)",
        E("[for p in local.cloud.network.ingressPorts : tostring(p)]"),
        E("[local.identity.network.cidr]"),
    )
    # An `allow` block with no ports allows every port: with ingressPorts empty, there is no rule at all.
    inside.body.insert(0, Attr("count", E("length(local.cloud.network.ingressPorts) > 0 ? 1 : 0")))
    out: list[Item] = [inside]
    if spec.load_balancer is not None:
        # The global external Application Load Balancer's proxies and health checks both connect from
        # these ranges, so they get the serving port and the health-check port.
        out.append(
            _rule(
                "allow_lb",
                "firewall rule (load balancer and health checks)",
                E("local.lb_ports"),
                [*GFE_RANGES],
            )
        )
    if interactive:
        # `vmplane exec -i` opens a session through IAP TCP forwarding; OS Login decides who may log in.
        out.append(_rule("allow_iap_ssh", "firewall rule (SSH through IAP only)", ["22"], [IAP_RANGE]))
    return out
