"""The stack's outputs."""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.tf.aws.common import E
from vmplane.tf.hcl import Block, Item


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
