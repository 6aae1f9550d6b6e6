"""The VMs: the security group, launch templates, Fixed instances and auto-scaling groups."""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.tf import vmconfig_files
from vmplane.tf.aws.common import BASE, OWNER, E, tag_map
from vmplane.tf.aws.network import egress_all, ingress
from vmplane.tf.hcl import Block, Comment, Item


def compute(spec: EnvSpec) -> list[Item]:
    lb = spec.load_balancer is not None
    out: list[Item] = [Comment("---- VMs: security group, launch templates, Fixed instances, ASG pools ----")]
    out.append(
        Block("resource", ["aws_security_group", "vm"])
        .attr("name", E(f'"{BASE}-vm"'))
        .attr("description", E(f'"vmplane vm of {OWNER}: VPC-internal ingress only"'))
        .attr("vpc_id", E("aws_vpc.this.id"))
        .attr("tags", tag_map("vm-sg", f'"{BASE}-vm"'))
    )
    ports = "local.cloud.network.ingressPorts"
    if lb:
        # With a load balancer, its ports admit the LB's group only (as the direct pipeline does).
        ports = f"[for p in {ports} : p if !contains(local.lb_ports, p)]"
    out.append(
        ingress(
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
            ingress(
                "vm_from_lb",
                "vm",
                "toset([for p in local.lb_ports : tostring(p)])",
                "referenced_security_group_id",
                E("aws_security_group.lb.id"),
                "from the load balancer only",
            )
        )
    out.append(egress_all("vm", "egress through the NAT gateway"))
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
    lt.attr("user_data", E("base64encode(local.user_data[each.key])"))
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
    lt.attr("tags", tag_map("launch-template", f'"{BASE}-${{each.key}}"'))
    vmconfig_files.precondition(lt.block("lifecycle"))
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
        inst.attr("tags", tag_map("vm", "each.key"))
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
        out += _asg(lb, scheduled=any(p.mode == "asg" and p.schedule is not None for p in spec.pools.values()))
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


def _asg(lb: bool, *, scheduled: bool = False) -> list[Item]:
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
    if scheduled:
        asg.comment(
            "The schedule's actions own min and desired (0 at night): an apply out of hours must not size the\n"
            "group back up. A size change reaches the group through the start action, at the next start."
        )
        asg.block("lifecycle").attr("ignore_changes", E("[min_size, desired_capacity]"))
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
