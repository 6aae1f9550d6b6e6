"""The VMs' identity: a service account of the environment's own, allowed to write logs and metrics."""

from __future__ import annotations

import json

from vmplane.envspec.models import EnvSpec
from vmplane.tf.gcp.common import VM_ROLES, E, description
from vmplane.tf.gcp.secrets import secrets_tf
from vmplane.tf.hcl import Block, Comment, Item


def roles_tf(spec: EnvSpec) -> list[Item]:
    """Never the project's default compute account (it has Editor): a dedicated one with two roles. The
    exec channel (OS Config) and OS Login need no role on the VM's account; people's access is their own IAM.
    With secret references, the account may read exactly those secrets."""
    roles: list[str] = sorted(VM_ROLES)
    return [
        Comment("The VMs' identity: logs and metrics, nothing broader. No SSH key exists anywhere."),
        Block("resource", ["google_service_account", "vm"])
        # 6-30 characters: the environment name cut to 22, then the 6 hex of org/env that local.base ends with.
        .attr("account_id", E('"${substr(local.identity.name, 0, 22)}-${local.owner_hash}"'))
        .attr("display_name", E('substr("vmplane VMs of ${local.identity.org}/${local.identity.name}", 0, 100)'))
        .attr("description", description("VM service account", 256)),
        Block("resource", ["google_project_iam_member", "vm"])
        .attr("for_each", E(f"toset({json.dumps(roles)})"))
        .attr("project", E("local.identity.provider.project"))
        .attr("role", E("each.value"))
        .attr("member", E('"serviceAccount:${google_service_account.vm.email}"')),
        *secrets_tf(spec),
    ]
