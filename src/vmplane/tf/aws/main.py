"""The stack's main file: Terraform and provider settings, the derived locals, then every area."""

from __future__ import annotations

from vmplane.clouds.aws.preflight import IMAGE_ALIASES
from vmplane.envspec.models import EnvSpec
from vmplane.tf.aws.common import PROVIDER_VERSION, TF_VERSION, E, tag_map
from vmplane.tf.aws.compute import compute
from vmplane.tf.aws.lb import load_balancer
from vmplane.tf.aws.network import network
from vmplane.tf.aws.schedules import schedules
from vmplane.tf.hcl import Block, Item
from vmplane.tf.inputs import pool_locals


def terraform_settings() -> Block:
    """The `terraform` block (Terraform and provider versions): also what `vmplane deps tf` mirrors and locks."""
    tf = Block("terraform").attr("required_version", TF_VERSION)
    tf.block("required_providers").attr("aws", {"source": "hashicorp/aws", "version": PROVIDER_VERSION})
    return tf


def main_tf(spec: EnvSpec) -> list[Item]:
    items: list[Item] = []
    items.append(terraform_settings())
    provider = Block("provider", ["aws"]).attr("region", E("local.identity.provider.region"))
    if spec.provider.profile:
        provider.attr("profile", E("local.identity.provider.profile"))
    # Every resource that takes tags gets the environment's tag set (ASGs and template specs set theirs).
    provider.block("default_tags").attr("tags", E("local.tags"))
    items.append(provider)
    items.append(_locals())
    items += network()
    items += compute(spec)
    items += schedules(spec)
    if spec.load_balancer is not None:
        items += load_balancer(spec)
    items.append(
        Block("resource", ["aws_ssm_parameter", "runtime"])
        .attr("name", E('"/vmplane/${local.identity.org}/${local.identity.name}/runtime"'))
        .attr("type", "SecureString")  # plain values named like secrets may be here (validate warns of them)
        .attr("value", E("jsonencode(local.runtime)"))
        .attr("tags", tag_map("runtime", '"${local.identity.name}-runtime"'))
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
    pool_locals(loc)
    return loc
