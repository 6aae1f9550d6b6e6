"""The GCP stack's state: a `gcs` backend when the spec names a state bucket (as the AWS stack's S3 one),
else Terraform's default local state. The provider is not pointed at the sandbox (`--sandbox` refused)."""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.errors import UsageError
from vmplane.tf import state_gcs
from vmplane.tf.hcl import Block, Item


def backend(spec: EnvSpec) -> list[Item]:
    """Remote state in GCS under the same per-environment path as the S3 key: terraform reads
    `<prefix>/default.tfstate`, the object `vmplane tf state init` writes (creating or adopting the
    versioned, uniform-access bucket), and locks with `<prefix>/default.tflock`. A backend block cannot
    read locals, so its values are written here literally; they are identity values."""
    loc = state_gcs.location(spec)
    tf = Block("terraform")
    tf.block("backend", "gcs").attr("bucket", loc.bucket).attr("prefix", loc.prefix)
    return [tf]


def sandbox_override(spec: EnvSpec, endpoint: str) -> list[Item]:
    raise UsageError("--sandbox: the sandbox emulates AWS only; generate the GCP stack without it")
