"""`vmplane tf generate|upgrade`: the environment as an OpenTofu/Terraform stack of managed files.

The generator owns a fixed set of file names (`vmplane.env.*.tf` and the schema), each starting with
a "managed by vmplane" header. It writes only those, removes only those of them it no longer produces
(recognised by name *and* header), and never touches any other file: users extend the stack with their
own `.tf` files and `terraform.tfvars`. Output is deterministic and `terraform fmt`-clean.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import vmplane
from vmplane.envspec.models import Cloud, EnvSpec, spec_json
from vmplane.envspec.schema import SCHEMA_FILENAME, env_json_schema
from vmplane.errors import UsageError
from vmplane.tf import aws, state
from vmplane.tf.hcl import Block, Item, render
from vmplane.tf.inputs import input_files

PREFIX = "vmplane.env."
HEADER = (
    f"# Managed by vmplane {vmplane.__version__} (`vmplane tf generate`). Do not edit: changes are overwritten.\n"
    "# Tune vmplane.env.jsonc and regenerate, set variables in terraform.tfvars, or add your own .tf files.\n\n"
)
SANDBOX_FILE = f"{PREFIX}sandbox_override.tf"


class GenerateError(UsageError):
    """The spec asks for something the generated stack does not support (exit code 2)."""


@dataclass(frozen=True)
class WriteResult:
    written: list[str]
    unchanged: list[str]
    removed: list[str]


def generate(spec: EnvSpec, sandbox_endpoint: str | None = None) -> dict[str, str]:
    """File name -> content for the whole managed set."""
    if spec.provider.cloud is not Cloud.aws:
        raise GenerateError(f"provider.cloud: tf generate supports aws, not {spec.provider.cloud.value} (yet)")
    if spec.network.existing_vpc_id:
        raise GenerateError("network.existingVpcId: the generated stack creates its own VPC; adopt one by hand")
    doc = spec_json(spec)
    tf: dict[str, list[Item]] = {
        "main.tf": aws.main_tf(spec),
        "roles.tf": aws.roles_tf(),
        **input_files(spec, doc),
        "outputs.tf": aws.outputs_tf(spec),
    }
    if spec.state is not None:
        tf["backend.tf"] = backend(spec)
    if sandbox_endpoint:
        tf["sandbox_override.tf"] = sandbox_override(spec, sandbox_endpoint)
    files = {f"{PREFIX}{name}": HEADER + render(items) for name, items in tf.items()}
    files[SCHEMA_FILENAME] = json.dumps(env_json_schema(), indent=2, sort_keys=True) + "\n"
    return dict(sorted(files.items()))


SANDBOX_SERVICES = ["acm", "autoscaling", "ec2", "elbv2", "iam", "route53", "s3", "ssm", "sts"]


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


def is_managed(path: Path) -> bool:
    """A file vmplane owns: one of its names, starting with its header (else it is the user's)."""
    if not (path.name.startswith(PREFIX) and path.name.endswith(".tf")) and path.name != SCHEMA_FILENAME:
        return False
    if path.name == SCHEMA_FILENAME:
        return True
    try:
        with path.open() as f:
            return f.readline().startswith("# Managed by vmplane")
    except OSError:
        return False


def write(files: dict[str, str], out_dir: Path) -> WriteResult:
    """Write the managed files (only those that differ) and drop managed files no longer produced."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written, unchanged, removed = [], [], []
    for name, content in files.items():
        path = out_dir / name
        if path.exists() and not is_managed(path):
            raise GenerateError(f"{path} exists and was not written by vmplane; move it away first")
        if path.exists() and path.read_text() == content:
            unchanged.append(name)
            continue
        tmp = path.with_name(path.name + ".vmplane-tmp")
        tmp.write_text(content)
        tmp.replace(path)  # atomic: a reader sees the old file or the new one
        written.append(name)
    for path in sorted(out_dir.glob(f"{PREFIX}*.tf")):
        if path.name not in files and is_managed(path):
            path.unlink()
            removed.append(path.name)
    return WriteResult(written, unchanged, removed)
