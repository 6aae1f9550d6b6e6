"""The network: VPC, public and private subnets over the zones, one NAT gateway, the VPC defaults emptied."""

from __future__ import annotations

from vmplane.tf.aws.common import E, tag_map
from vmplane.tf.hcl import Block, Comment, Item


def network() -> list[Item]:
    out: list[Item] = [Comment("---- network: VPC, public and private subnets over the zones, one NAT ----")]
    out.append(_az_data())
    out.append(
        Block("resource", ["aws_vpc", "this"])
        .attr("cidr_block", E("local.identity.network.cidr"))
        .attr("enable_dns_support", True)
        .attr("enable_dns_hostnames", True)
        .attr("tags", tag_map("vpc", "local.identity.name"))
    )
    out.append(
        Block("resource", ["aws_internet_gateway", "this"])
        .attr("vpc_id", E("aws_vpc.this.id"))
        .attr("tags", tag_map("igw", '"${local.identity.name}-igw"'))
    )
    for kind, offset in (("public", "0"), ("private", "local.zones")):
        out.append(
            Block("resource", ["aws_subnet", kind])
            .attr("count", E("local.zones"))
            .attr("vpc_id", E("aws_vpc.this.id"))
            .attr("availability_zone", E("sort(data.aws_availability_zones.available.names)[count.index]"))
            .attr(
                "cidr_block",
                E(f"cidrsubnet(local.identity.network.cidr, local.subnet_bits, {offset} + count.index)"),
            )
            .attr("map_public_ip_on_launch", False)
            .attr("tags", tag_map(f"subnet-{kind}", f'"${{local.identity.name}}-{kind}-${{count.index}}"'))
        )
    out.append(
        Block("resource", ["aws_eip", "nat"])
        .attr("domain", "vpc")
        .attr("tags", tag_map("nat-eip", '"${local.identity.name}-nat"'))
    )
    out.append(
        Block("resource", ["aws_nat_gateway", "this"])
        .attr("allocation_id", E("aws_eip.nat.id"))
        .attr("subnet_id", E("aws_subnet.public[0].id"))
        .attr("tags", tag_map("nat", '"${local.identity.name}-nat"'))
        .attr("depends_on", E("[aws_internet_gateway.this]"))
    )
    targets = (
        ("public", "gateway_id", "aws_internet_gateway.this.id"),
        ("private", "nat_gateway_id", "aws_nat_gateway.this.id"),
    )
    for kind, key, ref in targets:
        rt = Block("resource", ["aws_route_table", kind]).attr("vpc_id", E("aws_vpc.this.id"))
        rt.block("route").attr("cidr_block", "0.0.0.0/0").attr(key, E(ref))
        rt.attr("tags", tag_map(f"rt-{kind}", f'"${{local.identity.name}}-rt-{kind}"'))
        out.append(rt)
        out.append(
            Block("resource", ["aws_route_table_association", kind])
            .attr("count", E("local.zones"))
            .attr("subnet_id", E(f"aws_subnet.{kind}[count.index].id"))
            .attr("route_table_id", E(f"aws_route_table.{kind}.id"))
        )
    out += _vpc_defaults()
    return out


def ingress(name: str, group: str, for_each: str, source_key: str, source: object, why: str) -> Block:
    """One TCP ingress rule per port in `for_each` (a set of port strings) into the `group` security group."""
    rule = Block("resource", ["aws_vpc_security_group_ingress_rule", name])
    rule.attr("for_each", E(for_each)).attr("security_group_id", E(f"aws_security_group.{group}.id"))
    rule.attr("ip_protocol", "tcp").attr("from_port", E("tonumber(each.value)")).attr(
        "to_port", E("tonumber(each.value)")
    )
    return rule.attr(source_key, source).attr("description", why)  # type: ignore[arg-type]


def egress_all(group: str, why: str) -> Block:
    rule = Block("resource", ["aws_vpc_security_group_egress_rule", group])
    rule.attr("security_group_id", E(f"aws_security_group.{group}.id")).attr("ip_protocol", "-1")
    return rule.attr("cidr_ipv4", "0.0.0.0/0").attr("description", why)


def _az_data() -> Block:
    data = Block("data", ["aws_availability_zones", "available"]).attr("state", "available")
    data.block("filter").attr("name", "zone-type").attr("values", ["availability-zone"])
    return data


def _vpc_defaults() -> list[Item]:
    """AWS's own main route table, default group and default ACL, adopted to carry the tags (as the
    direct pipeline tags them). The ACL keeps AWS's allow-all rules; the default group gets none."""
    defaults_tags = tag_map("vpc-default", '"${local.identity.name}-default"')
    rt = Block("resource", ["aws_default_route_table", "this"])
    rt.attr("default_route_table_id", E("aws_vpc.this.default_route_table_id")).attr("tags", defaults_tags)
    # No rules: nothing may use the default group (the direct pipeline empties it too).
    sg = Block("resource", ["aws_default_security_group", "this"]).attr("vpc_id", E("aws_vpc.this.id"))
    sg.attr("tags", defaults_tags)
    acl = Block("resource", ["aws_default_network_acl", "this"])
    acl.attr("default_network_acl_id", E("aws_vpc.this.default_network_acl_id"))
    for direction in ("ingress", "egress"):
        rule = acl.block(direction)
        rule.attr("protocol", -1).attr("rule_no", 100).attr("action", "allow")
        rule.attr("cidr_block", "0.0.0.0/0").attr("from_port", 0).attr("to_port", 0)
    acl.attr("tags", defaults_tags)
    acl.block("lifecycle").attr("ignore_changes", E("[subnet_ids]"))
    return [rt, sg, acl]
