"""The one list of the clouds a spec file can name: each cloud's `CloudSpec`, in `provider.cloud`'s order.

`vmplane.envspec` reads this (its one import from above: `[tool.importlinter]`), so these modules and the
specs they list import no SDK and no driver. A plugin, or a test's toy cloud, adds its own with `register`.
"""

from __future__ import annotations

from vmplane.clouds import azure_spec
from vmplane.clouds.aws import spec as aws_spec
from vmplane.clouds.gcp import spec as gcp_spec
from vmplane.clouds.proxmox import spec as proxmox_spec
from vmplane.envspec.cloudspec import CloudSpec

SPECS: dict[str, CloudSpec] = {s.name: s for s in (aws_spec.SPEC, gcp_spec.SPEC, azure_spec.SPEC, proxmox_spec.SPEC)}


def register(spec: CloudSpec) -> None:
    """Add a cloud at run time: its provider shape validates from then on (options need it before
    `vmplane.envspec.models` is imported: the sections' fields are built once)."""
    if spec.name in SPECS and SPECS[spec.name] is not spec:
        raise ValueError(f"a cloud named {spec.name!r} is already registered")
    SPECS[spec.name] = spec


def unregister(name: str) -> None:
    """Remove a cloud `register` added (tests put the list back as they found it)."""
    SPECS.pop(name, None)
