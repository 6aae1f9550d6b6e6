"""The AWS stack: the same shape the direct pipeline builds, as Terraform resources.

Everything here is structure. Values come from the inputs files (`local.identity`, `local.cloud`,
`local.vm`, `local.runtime`), so editing the spec changes an inputs file, not this one; only the
presence of a load balancer and which pool modes exist change the structure.
"""

from __future__ import annotations

from vmplane.clouds.aws.preflight import IMAGE_ALIASES
from vmplane.envspec.models import EnvSpec
from vmplane.tf.hcl import Block, Comment, Expr, Item

PROVIDER_VERSION = "5.100.0"
TF_VERSION = ">= 1.6"
E = Expr
# "vmplane-<org>-<env>": the prefix of the names the direct pipeline gives (security groups, templates, ...).
BASE = "vmplane-${local.identity.org}-${local.identity.name}"
OWNER = "${local.identity.org}/${local.identity.name}"


def _tags(role: str, name: str) -> dict[object, object]:
    return {E("(local.role_key)"): role, "Name": E(name)}


def main_tf(spec: EnvSpec) -> list[Item]:
    items: list[Item] = []
    tf = Block("terraform").attr("required_version", TF_VERSION)
    tf.block("required_providers").attr("aws", {"source": "hashicorp/aws", "version": PROVIDER_VERSION})
    items.append(tf)
    provider = Block("provider", ["aws"]).attr("region", E("local.identity.provider.region"))
    if spec.provider.profile:
        provider.attr("profile", E("local.identity.provider.profile"))
    # Every resource that takes tags gets the environment's tag set (ASGs and template specs set theirs).
    provider.block("default_tags").attr("tags", E("local.tags"))
    items.append(provider)
    items.append(_locals())
    items += _network()
    items += _compute(spec)
    if spec.load_balancer is not None:
        items += _load_balancer(spec)
    items.append(
        Block("resource", ["aws_ssm_parameter", "runtime"])
        .attr("name", E('"/vmplane/${local.identity.org}/${local.identity.name}/runtime"'))
        .attr("type", "SecureString")  # runtime values may be secrets
        .attr("value", E("jsonencode(local.runtime)"))
        .attr("tags", _tags("runtime", '"${local.identity.name}-runtime"'))
    )
    return items


def _locals() -> Block:
    params = {
        f"{alias}/{arch.value}": path for alias, by_arch in IMAGE_ALIASES.items() for arch, path in by_arch.items()
    }
    loc = Block("locals")
    loc.attr("prefix", E("local.identity.tagPrefix"))
    loc.attr("stack_id", E('"tf-${local.identity.org}-${local.identity.name}"'))
    loc.attr("role_key", E('"${local.prefix}role"'))
    loc.attr(
        "tags",
        E(
            "merge(local.cloud.tags, {\n"
            '    "${local.prefix}orgId"     = local.identity.org\n'
            '    "${local.prefix}jobId"     = local.stack_id\n'
            '    "${local.prefix}managedBy" = "vmplane"\n'
            '    "${local.prefix}env"       = local.identity.name\n'
            "  })"
        ),
    )
    loc.attr("zones", E("local.identity.network.zones"))
    loc.attr("root_devices", E("{ for k, a in data.aws_ami.pool : k => a.root_device_name }"))
    loc.attr("subnet_bits", E("max(1, ceil(log(2 * local.zones, 2)))"))
    loc.comment("Public SSM parameters that point at the current image of each distribution, per arch.")
    loc.attr("image_parameters", dict(sorted(params.items())))
    loc.attr(
        "image_ids",
        E(
            "{\n"
            "    for name, p in local.vm.pools : name => (\n"
            '      startswith(p.image, "ami-") ? p.image : nonsensitive(data.aws_ssm_parameter.image[name].value)\n'
            "    )\n"
            "  }"
        ),
    )
    loc.attr(
        "fixed_vms",
        E(
            "merge([\n"
            "    for name, p in local.cloud.pools : {\n"
            '      for i in range(p.size) : "${local.identity.name}-${name}-${i}" => { pool = name, index = i }\n'
            '    } if local.identity.pools[name].mode == "fixed"\n'
            "  ]...)"
        ),
    )
    loc.attr(
        "asg_pools",
        E('{ for name, p in local.identity.pools : name => local.cloud.pools[name] if p.mode == "asg" }'),
    )
    return loc


def _network() -> list[Item]:
    out: list[Item] = [Comment("---- network: VPC, public and private subnets over the zones, one NAT ----")]
    out.append(_az_data())
    out.append(
        Block("resource", ["aws_vpc", "this"])
        .attr("cidr_block", E("local.identity.network.cidr"))
        .attr("enable_dns_support", True)
        .attr("enable_dns_hostnames", True)
        .attr("tags", _tags("vpc", "local.identity.name"))
    )
    out.append(
        Block("resource", ["aws_internet_gateway", "this"])
        .attr("vpc_id", E("aws_vpc.this.id"))
        .attr("tags", _tags("igw", '"${local.identity.name}-igw"'))
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
            .attr("tags", _tags(f"subnet-{kind}", f'"${{local.identity.name}}-{kind}-${{count.index}}"'))
        )
    out.append(
        Block("resource", ["aws_eip", "nat"])
        .attr("domain", "vpc")
        .attr("tags", _tags("nat-eip", '"${local.identity.name}-nat"'))
    )
    out.append(
        Block("resource", ["aws_nat_gateway", "this"])
        .attr("allocation_id", E("aws_eip.nat.id"))
        .attr("subnet_id", E("aws_subnet.public[0].id"))
        .attr("tags", _tags("nat", '"${local.identity.name}-nat"'))
        .attr("depends_on", E("[aws_internet_gateway.this]"))
    )
    targets = (
        ("public", "gateway_id", "aws_internet_gateway.this.id"),
        ("private", "nat_gateway_id", "aws_nat_gateway.this.id"),
    )
    for kind, key, ref in targets:
        rt = Block("resource", ["aws_route_table", kind]).attr("vpc_id", E("aws_vpc.this.id"))
        rt.block("route").attr("cidr_block", "0.0.0.0/0").attr(key, E(ref))
        rt.attr("tags", _tags(f"rt-{kind}", f'"${{local.identity.name}}-rt-{kind}"'))
        out.append(rt)
        out.append(
            Block("resource", ["aws_route_table_association", kind])
            .attr("count", E("local.zones"))
            .attr("subnet_id", E(f"aws_subnet.{kind}[count.index].id"))
            .attr("route_table_id", E(f"aws_route_table.{kind}.id"))
        )
    out += _vpc_defaults()
    return out


def _ingress(name: str, group: str, for_each: str, source_key: str, source: object, why: str) -> Block:
    """One TCP ingress rule per port in `for_each` (a set of port strings) into the `group` security group."""
    rule = Block("resource", ["aws_vpc_security_group_ingress_rule", name])
    rule.attr("for_each", E(for_each)).attr("security_group_id", E(f"aws_security_group.{group}.id"))
    rule.attr("ip_protocol", "tcp").attr("from_port", E("tonumber(each.value)")).attr(
        "to_port", E("tonumber(each.value)")
    )
    return rule.attr(source_key, source).attr("description", why)  # type: ignore[arg-type]


def _egress_all(group: str, why: str) -> Block:
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
    defaults_tags = _tags("vpc-default", '"${local.identity.name}-default"')
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


def _compute(spec: EnvSpec) -> list[Item]:
    lb = spec.load_balancer is not None
    out: list[Item] = [Comment("---- VMs: security group, launch templates, Fixed instances, ASG pools ----")]
    out.append(
        Block("resource", ["aws_security_group", "vm"])
        .attr("name", E(f'"{BASE}-vm"'))
        .attr("description", E(f'"vmplane vm of {OWNER}: VPC-internal ingress only"'))
        .attr("vpc_id", E("aws_vpc.this.id"))
        .attr("tags", _tags("vm-sg", f'"{BASE}-vm"'))
    )
    ports = "local.cloud.network.ingressPorts"
    if lb:
        # With a load balancer, its ports admit the LB's group only (as the direct pipeline does).
        ports = f"[for p in {ports} : p if !contains(local.lb_ports, p)]"
    out.append(
        _ingress(
            "vm",
            "vm",
            f"toset([for p in {ports} : tostring(p)])",
            "cidr_ipv4",
            E("aws_vpc.this.cidr_block"),
            "inside the VPC",
        )
    )
    if lb:
        out.append(
            _ingress(
                "vm_from_lb",
                "vm",
                "toset([for p in local.lb_ports : tostring(p)])",
                "referenced_security_group_id",
                E("aws_security_group.lb.id"),
                "from the load balancer only",
            )
        )
    out.append(_egress_all("vm", "egress through the NAT gateway"))
    image = Block("data", ["aws_ssm_parameter", "image"])
    image.attr("for_each", E('{ for name, p in local.vm.pools : name => p if !startswith(p.image, "ami-") }'))
    image.attr(
        "name",
        E(
            'startswith(each.value.image, "ssm:") ? trimprefix(each.value.image, "ssm:") : '
            'local.image_parameters["${each.value.image}/${each.value.arch}"]'
        ),
    )
    out.append(image)
    lt = Block("resource", ["aws_launch_template", "pool"])
    lt.attr("for_each", E("local.vm.pools"))
    lt.attr("name", E(f'"{BASE}-${{each.key}}"'))
    lt.attr("image_id", E("local.image_ids[each.key]"))
    lt.attr("instance_type", E("each.value.instanceType"))
    lt.attr("user_data", E("base64encode(local.vm.userData[each.key])"))
    lt.attr("vpc_security_group_ids", E("[aws_security_group.vm.id]"))
    lt.attr("update_default_version", True)
    lt.block("iam_instance_profile").attr("arn", E("aws_iam_instance_profile.vm.arn"))
    lt.comment("checkov:skip=CKV_AWS_341:hop limit 2 lets containers on the Docker bridge reach IMDSv2")
    _imdsv2(lt)
    ebs = lt.block("block_device_mappings").attr("device_name", E("local.root_devices[each.key]")).block("ebs")
    ebs.attr("volume_size", E("each.value.diskGb")).attr("volume_type", "gp3")
    ebs.attr("encrypted", True).attr("delete_on_termination", True)
    for rtype, role in (("instance", "vm"), ("volume", "volume"), ("network-interface", "vm-eni")):
        spec_block = lt.block("tag_specifications").attr("resource_type", rtype)
        spec_block.attr("tags", E(f'merge(local.tags, {{ (local.role_key) = "{role}" }})'))
    lt.attr("tags", _tags("launch-template", f'"{BASE}-${{each.key}}"'))
    out.append(lt)
    out.append(_ami_data())
    if any(p.mode == "fixed" for p in spec.pools.values()):
        inst = Block("resource", ["aws_instance", "vm"])
        inst.attr("for_each", E("local.fixed_vms"))
        inst.attr("subnet_id", E("aws_subnet.private[each.value.index % local.zones].id"))
        inst.attr("associate_public_ip_address", False)
        inst.attr("iam_instance_profile", E("aws_iam_instance_profile.vm.name"))
        tmpl = inst.block("launch_template")
        tmpl.attr("id", E("aws_launch_template.pool[each.value.pool].id"))
        tmpl.attr("version", E("aws_launch_template.pool[each.value.pool].latest_version"))
        # The template's settings, stated on the instance too so policy checks see them.
        _imdsv2(inst)
        root = inst.block("root_block_device")
        root.attr("volume_size", E("local.vm.pools[each.value.pool].diskGb")).attr("volume_type", "gp3")
        root.attr("encrypted", True).attr("delete_on_termination", True)
        inst.attr("tags", _tags("vm", "each.key"))
        inst.attr("volume_tags", E('merge(local.tags, { (local.role_key) = "volume", Name = "${each.key}-root" })'))
        inst.comment(
            "A new template version does not replace running VMs: replace them one at a time with\n"
            "`vmplane rotate`, or `terraform apply -replace='aws_instance.vm[\"NAME\"]'` per VM."
        )
        inst.block("lifecycle").attr("ignore_changes", E("[launch_template, user_data, ami, root_block_device]"))
        out.append(inst)
        if lb:
            out.append(
                Block("resource", ["aws_lb_target_group_attachment", "vm"])
                .attr("for_each", E("local.fixed_vms"))
                .attr("target_group_arn", E("aws_lb_target_group.this.arn"))
                .attr("target_id", E("aws_instance.vm[each.key].id"))
            )
    if any(p.mode == "asg" for p in spec.pools.values()):
        out += _asg(lb)
    return out


def _imdsv2(parent: Block) -> None:
    """IMDSv2 only; hop limit 2 so containers on the Docker bridge still reach it (as the direct pipeline)."""
    meta = parent.block("metadata_options")
    meta.attr("http_tokens", "required").attr("http_endpoint", "enabled").attr("http_put_response_hop_limit", 2)


def _ami_data() -> Block:
    ami = Block("data", ["aws_ami", "pool"]).attr("for_each", E("local.vm.pools"))
    ami.attr("owners", ["self", "amazon", "aws-marketplace"])
    ami.block("filter").attr("name", "image-id").attr("values", E("[local.image_ids[each.key]]"))
    return ami


def _asg(lb: bool) -> list[Item]:
    asg = Block("resource", ["aws_autoscaling_group", "pool"])
    asg.attr("for_each", E("local.asg_pools"))
    asg.attr("name", E(f'"{BASE}-${{each.key}}"'))
    asg.attr("min_size", E("each.value.min"))
    asg.attr("max_size", E("each.value.max"))
    asg.attr("desired_capacity", E("each.value.desired"))
    asg.attr("vpc_zone_identifier", E("aws_subnet.private[*].id"))
    asg.attr("health_check_grace_period", E("local.cloud.bootstrap.timeoutSeconds"))
    if lb:
        asg.attr("target_group_arns", E("[aws_lb_target_group.this.arn]"))
        asg.attr("health_check_type", "ELB")
    tmpl = asg.block("launch_template")
    tmpl.attr("id", E("aws_launch_template.pool[each.key].id"))
    tmpl.attr(
        "version",
        E(
            "try(each.value.pinTemplateVersion, false)"
            ' ? tostring(aws_launch_template.pool[each.key].latest_version) : "$Latest"'
        ),
    )
    dyn = asg.block("dynamic", "tag")
    dyn.attr(
        "for_each",
        E('merge(local.tags, { (local.role_key) = "vm", Name = "${local.identity.name}-${each.key}" })'),
    )
    content = dyn.block("content")
    content.attr("key", E("tag.key")).attr("value", E("tag.value")).attr("propagate_at_launch", True)
    policy = Block("resource", ["aws_autoscaling_policy", "cpu"])
    policy.attr(
        "for_each", E("{ for name, p in local.asg_pools : name => p if try(p.targetCpuPercent, null) != null }")
    )
    policy.attr("name", "vmplane-cpu-target")
    policy.attr("autoscaling_group_name", E("aws_autoscaling_group.pool[each.key].name"))
    policy.attr("policy_type", "TargetTrackingScaling")
    tt = policy.block("target_tracking_configuration")
    tt.block("predefined_metric_specification").attr("predefined_metric_type", "ASGAverageCPUUtilization")
    tt.attr("target_value", E("each.value.targetCpuPercent"))
    return [asg, policy]


def _load_balancer(spec: EnvSpec) -> list[Item]:
    assert spec.load_balancer is not None
    given_cert = spec.load_balancer.certificate_arn is not None
    given_zone = spec.load_balancer.hosted_zone_id is not None
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
        zone.attr("zone_id", E("local.lb.hostedZoneId"))
    else:
        # The zone whose name is a suffix of the domain: the parent domain (one label up).
        zone.attr("name", E('join(".", slice(split(".", local.lb.domain), 1, length(split(".", local.lb.domain))))'))
        zone.attr("private_zone", False)
    out.append(zone)
    sg = Block("resource", ["aws_security_group", "lb"])
    sg.attr("name", E(f'"{BASE}-lb"'))
    sg.attr("description", E(f'"vmplane lb of {OWNER}: HTTPS and HTTP from anywhere"'))
    sg.attr("vpc_id", E("aws_vpc.this.id"))
    sg.attr("tags", _tags("lb-sg", f'"{BASE}-lb"'))
    out.append(sg)
    lb_in = _ingress("lb", "lb", 'toset(["80", "443"])', "cidr_ipv4", "0.0.0.0/0", "public listener")
    lb_in.body.insert(0, Comment("checkov:skip=CKV_AWS_260:port 80 on the LB only answers with a redirect to HTTPS"))
    out.append(lb_in)
    out.append(_egress_all("lb", "to the VMs"))
    out.append(
        Block("resource", ["aws_lb", "this"])
        .attr("name", E("local.lb_name"))
        .attr("load_balancer_type", "application")
        .attr("internal", False)
        .attr("drop_invalid_header_fields", True)
        .attr("subnets", E("aws_subnet.public[*].id"))
        .attr("security_groups", E("[aws_security_group.lb.id]"))
        .attr("tags", _tags("lb", "local.lb_name"))
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
    tg.attr("tags", _tags("target-group", '"${local.lb_name}-tg"'))
    out.append(tg)
    if given_cert:
        cert_arn = "local.lb.certificateArn"
    else:
        cert = Block("resource", ["aws_acm_certificate", "this"])
        cert.attr("domain_name", E("local.lb.domain")).attr("validation_method", "DNS")
        cert.attr("tags", _tags("certificate", "local.lb.domain"))
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
    https.attr("tags", _tags("listener", '"https"'))
    out.append(https)
    http = Block("resource", ["aws_lb_listener", "http"])
    http.attr("load_balancer_arn", E("aws_lb.this.arn")).attr("port", 80).attr("protocol", "HTTP")
    action = http.block("default_action").attr("type", "redirect")
    action.block("redirect").attr("protocol", "HTTPS").attr("port", "443").attr("status_code", "HTTP_301")
    http.attr("tags", _tags("listener", '"http"'))
    out.append(http)
    alias = Block("resource", ["aws_route53_record", "alias"])
    alias.attr("zone_id", E("data.aws_route53_zone.this.zone_id")).attr("name", E("local.lb.domain")).attr("type", "A")
    target = alias.block("alias")
    target.attr("name", E("aws_lb.this.dns_name")).attr("zone_id", E("aws_lb.this.zone_id"))
    target.attr("evaluate_target_health", True)
    out.append(alias)
    return out


def roles_tf() -> list[Item]:
    """IAM: the VMs' role with the exec channel's managed policy only, and its instance profile."""
    name = f'"{BASE}-vm"'
    assume = (
        "jsonencode({\n"
        '    Version = "2012-10-17"\n'
        "    Statement = [{\n"
        '      Effect    = "Allow"\n'
        '      Principal = { Service = "ec2.amazonaws.com" }\n'
        '      Action    = "sts:AssumeRole"\n'
        "    }]\n"
        "  })"
    )
    return [
        Comment("The VMs' identity: the exec channel (SSM) and nothing broader. No SSH key pair exists."),
        Block("resource", ["aws_iam_role", "vm"])
        .attr("name", E(f"substr({name}, 0, 64)"))
        .attr("assume_role_policy", E(assume))
        .attr("tags", _tags("iam-role", f"substr({name}, 0, 64)")),
        Block("resource", ["aws_iam_role_policy_attachment", "ssm"])
        .attr("role", E("aws_iam_role.vm.name"))
        .attr("policy_arn", "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"),
        Block("resource", ["aws_iam_instance_profile", "vm"])
        .attr("name", E("aws_iam_role.vm.name"))
        .attr("role", E("aws_iam_role.vm.name"))
        .attr("tags", _tags("instance-profile", "aws_iam_role.vm.name")),
    ]


def outputs_tf(spec: EnvSpec) -> list[Item]:
    outs: list[tuple[str, str, str]] = [
        ("vpc_id", "aws_vpc.this.id", "The environment's VPC."),
        ("public_subnet_ids", "aws_subnet.public[*].id", "Public subnets: the NAT gateway and the load balancer."),
        ("private_subnet_ids", "aws_subnet.private[*].id", "Private subnets: the VMs, no public IPs."),
        ("vm_security_group_id", "aws_security_group.vm.id", "The VMs' security group."),
        ("launch_template_ids", "{ for k, t in aws_launch_template.pool : k => t.id }", "Launch template per pool."),
        ("vm_role_name", "aws_iam_role.vm.name", "The VMs' IAM role (exec channel only)."),
    ]
    if any(p.mode == "fixed" for p in spec.pools.values()):
        outs.append(("instance_ids", "{ for k, i in aws_instance.vm : k => i.id }", "Fixed-pool VMs by stable name."))
    if any(p.mode == "asg" for p in spec.pools.values()):
        outs.append(("autoscaling_groups", "{ for k, g in aws_autoscaling_group.pool : k => g.name }", "ASG per pool."))
    if spec.load_balancer is not None:
        outs.append(("lb_dns_name", "aws_lb.this.dns_name", "The load balancer's DNS name."))
        outs.append(("url", '"https://${local.lb.domain}"', "Where the environment answers."))
    return [Block("output", [n]).attr("description", d).attr("value", E(v)) for n, v, d in outs]
