"""The VMs' IAM role and instance profile (exec channel only)."""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.tf.aws.common import BASE, E, tag_map
from vmplane.tf.aws.schedules import scheduler_role
from vmplane.tf.aws.secrets import secrets_tf
from vmplane.tf.hcl import Block, Comment, Item


def roles_tf(spec: EnvSpec) -> list[Item]:
    """IAM: the VMs' role with the exec channel's managed policy, its instance profile and, with secret
    references, read access to exactly those secrets; with a scheduled Fixed pool, the scheduler's role."""
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
        .attr("tags", tag_map("iam-role", f"substr({name}, 0, 64)")),
        Block("resource", ["aws_iam_role_policy_attachment", "ssm"])
        .attr("role", E("aws_iam_role.vm.name"))
        .attr("policy_arn", "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"),
        Block("resource", ["aws_iam_instance_profile", "vm"])
        .attr("name", E("aws_iam_role.vm.name"))
        .attr("role", E("aws_iam_role.vm.name"))
        .attr("tags", tag_map("instance-profile", "aws_iam_role.vm.name")),
        *scheduler_role(spec),
        *secrets_tf(spec),
    ]
