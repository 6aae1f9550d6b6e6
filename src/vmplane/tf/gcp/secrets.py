"""roles.tf: the VMs' service account may read exactly the secrets `runtime` references.

One `roles/secretmanager.secretAccessor` binding per secret, on the secret itself (never the project's
policy), derived in HCL from the references in `local.runtime`. No data source: nothing here reads a
secret or its versions; the VM reads the value itself with its service account.
"""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.envspec.secrets import SecretStore, secret_refs
from vmplane.tf.gcp.common import E
from vmplane.tf.hcl import Block, Comment, Item
from vmplane.tf.inputs import SECRET_REFS, store_names

ACCESSOR = "roles/secretmanager.secretAccessor"


def secrets_tf(spec: EnvSpec) -> list[Item]:
    """The bindings; none at all without a reference."""
    if not any(r.store is SecretStore.gcp_sm for r in secret_refs(spec).values()):
        return []
    loc = (
        Block("locals").attr("secret_refs", E(SECRET_REFS)).attr("gcp_secrets", E(store_names("gcp-sm", "/versions/")))
    )
    full = 'startswith(each.key, "projects/")'
    member = Block("resource", ["google_secret_manager_secret_iam_member", "vm"])
    member.attr("for_each", E("local.gcp_secrets"))
    member.attr("project", E(f'{full} ? split("/", each.key)[1] : local.identity.provider.project'))
    member.attr("secret_id", E(f'{full} ? split("/", each.key)[3] : each.key'))
    member.attr("role", ACCESSOR)
    member.attr("member", E('"serviceAccount:${google_service_account.vm.email}"'))
    return [
        Comment("The VMs read their own secrets: secretAccessor on each referenced secret, for the VMs' account only."),
        loc,
        member,
    ]
