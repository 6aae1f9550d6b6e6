"""The stack's S3 backend (remote state created by `vmplane tf state init`) and the sandbox override."""

from __future__ import annotations

from vmplane.envspec.models import EnvSpec
from vmplane.tf import state
from vmplane.tf.hcl import Block, Item

SANDBOX_SERVICES = [
    "acm",
    "autoscaling",
    "ec2",
    "elbv2",
    "iam",
    "kms",
    "route53",
    "s3",
    "scheduler",
    "secretsmanager",
    "ssm",
    "sts",
]


def _backend_block(spec: EnvSpec) -> Block:
    loc = state.location(spec)
    b = Block("backend", ["s3"]).attr("bucket", loc.bucket).attr("key", loc.key).attr("region", loc.region)
    return b.attr("encrypt", True).attr("use_lockfile", True)


def backend(spec: EnvSpec) -> list[Item]:
    """Remote state in S3 (created by `vmplane tf state init` with a conditional put). A backend block
    cannot read locals, so its values are written here literally; they are identity values."""
    tf = Block("terraform")
    tf.body.append(_backend_block(spec))
    return [tf]


def sandbox_override(spec: EnvSpec, endpoint: str) -> list[Item]:
    """Points the provider (and the S3 backend) at the sandbox; an override file merges into main.tf's
    provider block and replaces the backend block."""
    provider = Block("provider", ["aws"])
    provider.comment("The sandbox: an emulated AWS account on 127.0.0.1. Fixed dummy credentials.")
    provider.attr("access_key", "testing").attr("secret_key", "testing")
    provider.attr("skip_credentials_validation", True).attr("skip_requesting_account_id", True)
    provider.attr("skip_metadata_api_check", True)
    endpoints = provider.block("endpoints")
    for service in SANDBOX_SERVICES:
        endpoints.attr(service, endpoint)
    items: list[Item] = [provider]
    if spec.state is not None:
        b = _backend_block(spec)
        b.attr("endpoints", {"s3": endpoint}).attr("use_path_style", True)
        b.attr("access_key", "testing").attr("secret_key", "testing")
        b.attr("skip_credentials_validation", True).attr("skip_requesting_account_id", True)
        b.attr("skip_region_validation", True).attr("skip_metadata_api_check", True)
        tf = Block("terraform")
        tf.body.append(b)
        items.append(tf)
    return items
