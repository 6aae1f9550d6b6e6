"""The GCP stack's state: a `gcs` backend when the spec names a state bucket (as the AWS stack's S3 one),
else Terraform's default local state. There is no GCP sandbox to point the provider at."""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.errors import UsageError
from vmplane.tf.hcl import Block, Item


def backend(spec: EnvSpec) -> list[Item]:
    """Remote state in GCS under the same per-environment path as the S3 key; GCS locks natively. A
    backend block cannot read locals, so its values are written here literally; they are identity values.
    The bucket must exist (versioned, uniform access): `vmplane tf state init` creates S3 state only."""
    assert spec.state is not None
    tf = Block("terraform")
    tf.block("backend", "gcs").attr("bucket", spec.state.bucket).attr("prefix", f"vmplane/{spec.org}/{spec.name}")
    return [tf]


def sandbox_override(spec: EnvSpec, endpoint: str) -> list[Item]:
    raise UsageError("--sandbox: the sandbox emulates AWS only; generate the GCP stack without it")
