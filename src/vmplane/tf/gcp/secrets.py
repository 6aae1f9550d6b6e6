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
SECRET_IDS = (
    "{\n"
    "    for n in local.gcp_secrets : n => {\n"
    '      project   = startswith(n, "projects/") ? split("/", n)[1] : local.identity.provider.project\n'
    '      secret_id = startswith(n, "projects/") ? split("/", n)[3] : n\n'
    "    }\n"
    "  }"
)


def secrets_tf(spec: EnvSpec) -> list[Item]:
    """The bindings; none at all without a reference."""
    if not any(r.store is SecretStore.gcp_sm for r in secret_refs(spec).values()):
        return []
    loc = Block("locals").attr("secret_refs", E(SECRET_REFS))
    loc.attr("gcp_secrets", E(store_names("gcp-sm", "/versions/")))
    loc.comment("A secret of another project is named in full (projects/P/secrets/ID).")
    loc.attr("gcp_secret_ids", E(SECRET_IDS))
    member = Block("resource", ["google_secret_manager_secret_iam_member", "vm"])
    member.attr("for_each", E("local.gcp_secret_ids"))
    member.attr("project", E("each.value.project"))
    member.attr("secret_id", E("each.value.secret_id"))
    member.attr("role", ACCESSOR)
    member.attr("member", E('"serviceAccount:${google_service_account.vm.email}"'))
    return [
        Comment("The VMs read their own secrets: secretAccessor on each referenced secret, for the VMs' account only."),
        loc,
        member,
    ]
