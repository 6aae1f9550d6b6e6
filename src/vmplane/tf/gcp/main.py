"""The GCP stack's main file: Terraform and provider settings, the derived locals, then every area."""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.tf.gcp.common import IMAGE_FAMILIES, OWNER, PROVIDER_VERSION, TF_VERSION, E, label_locals, labels
from vmplane.tf.gcp.compute import compute
from vmplane.tf.gcp.lb import load_balancer
from vmplane.tf.gcp.network import network
from vmplane.tf.hcl import Block, Item
from vmplane.tf.inputs import pool_locals


def terraform_settings() -> Block:
    """The `terraform` block (Terraform and provider versions): also what `vmplane deps tf` mirrors and locks."""
    tf = Block("terraform").attr("required_version", TF_VERSION)
    tf.block("required_providers").attr("google", {"source": "hashicorp/google", "version": PROVIDER_VERSION})
    return tf


def main_tf(spec: EnvSpec) -> list[Item]:
    items: list[Item] = []
    items.append(terraform_settings())
    items.append(
        Block("provider", ["google"])
        .attr("project", E("local.identity.provider.project"))
        .attr("region", E("local.identity.provider.region"))
    )
    items.append(_locals())
    items += network(spec)
    items += compute(spec)
    if spec.load_balancer is not None:
        items += load_balancer(spec)
    items += _runtime()
    return items


def _runtime() -> list[Item]:
    """The runtime values as one secret: vmplane pushes them to the VMs; this is the stack's record of
    them (runtime values may be secrets). The VMs' identity cannot read it."""
    secret = Block("resource", ["google_secret_manager_secret", "runtime"])
    secret.attr("secret_id", E('"${local.base}-runtime"'))
    secret.attr("labels", labels("runtime"))
    secret.block("replication").block("auto")
    version = Block("resource", ["google_secret_manager_secret_version", "runtime"])
    version.attr("secret", E("google_secret_manager_secret.runtime.id"))
    version.attr("secret_data", E("jsonencode(local.runtime)"))
    return [secret, version]


def _locals() -> Block:
    images = {
        f"{alias}/{arch}": f"projects/{family.split('/')[0]}/global/images/family/{family.split('/')[1]}"
        for alias, by_arch in IMAGE_FAMILIES.items()
        for arch, family in by_arch.items()
    }
    loc = Block("locals")
    loc.attr("prefix", E("local.identity.tagPrefix"))
    loc.attr("stack_id", E('"tf-${local.identity.org}-${local.identity.name}"'))
    loc.attr("role_key", E('"${local.prefix}role"'))
    loc.attr("owner_hash", E(f'substr(sha1("{OWNER}"), 0, 6)'))
    loc.attr("base", E('"${local.identity.name}-${local.owner_hash}"'))
    # The network tag the firewall rules select the VMs by.
    loc.attr("vm_tag", E('"${local.base}-vm"'))
    for name, value in label_locals().items():
        loc.attr(name, value)
    loc.attr("zones", E("local.identity.network.zones"))
    loc.attr("zone_names", E("slice(sort(data.google_compute_zones.available.names), 0, local.zones)"))
    loc.comment("Public image families for the spec's image aliases, per arch; other values are used as written.")
    loc.attr("image_families", dict(sorted(images.items())))
    loc.attr(
        "images",
        E(
            "{\n"
            "    for name, p in local.vm.pools :\n"
            '    name => lookup(local.image_families, "${p.image}/${p.arch}", p.image)\n'
            "  }"
        ),
    )
    pool_locals(loc)
    return loc
