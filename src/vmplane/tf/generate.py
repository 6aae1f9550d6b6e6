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
from vmplane.envspec.models import EnvSpec, spec_json
from vmplane.envspec.schema import SCHEMA_FILENAME, env_json_schema
from vmplane.errors import UsageError
from vmplane.tf import vmconfig_files
from vmplane.tf.hcl import Item, render
from vmplane.tf.inputs import input_files
from vmplane.tf.stacks import STACKS

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
    stack = STACKS.get(spec.provider.cloud)
    if stack is None:
        supported = ", ".join(c.value for c in STACKS)
        raise GenerateError(f"provider.cloud: tf generate supports {supported}, not {spec.provider.cloud.value} (yet)")
    problem = stack.unsupported(spec)
    if problem:
        raise GenerateError(problem)
    doc = spec_json(spec)
    structure = stack.structure(spec)
    tf: dict[str, list[Item]] = {**structure, **input_files(spec, doc, stack.notes)}
    if spec.state is not None:
        tf["backend.tf"] = stack.backend(spec)
    if sandbox_endpoint:
        tf["sandbox_override.tf"] = [
            *stack.sandbox_override(spec, sandbox_endpoint),
            *vmconfig_files.sandbox_locals(spec),
        ]
    files = {f"{PREFIX}{name}": HEADER + render(items) for name, items in tf.items()}
    files[SCHEMA_FILENAME] = json.dumps(env_json_schema(), indent=2, sort_keys=True) + "\n"
    files.update(vmconfig_files.copies(spec))  # the pools' manifests, read by the user-data
    return dict(sorted(files.items()))


def is_managed(path: Path) -> bool:
    """A file vmplane owns: one of its names, starting with its header (else it is the user's)."""
    if vmconfig_files.is_copy(path):
        return True  # a manifest copy: JSON has no header; generating again replaces it
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
