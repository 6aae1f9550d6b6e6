"""The one list of the clouds a spec file can name: each cloud's `CloudSpec`, in `provider.cloud`'s order.

`vmplane.envspec` reads this (its one import from above: `[tool.importlinter]`), so these modules and the
specs they list import no SDK and no driver. A plugin, or a test's toy cloud, adds its own with `register`;
the configured plugins (`clouds/plugins.py`) are loaded by the first read of the list.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from vmplane.clouds import azure_spec
from vmplane.clouds.aws import spec as aws_spec
from vmplane.clouds.gcp import spec as gcp_spec
from vmplane.clouds.plugins import load_plugins
from vmplane.clouds.proxmox import spec as proxmox_spec
from vmplane.envspec.cloudspec import CloudSpec

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_keys, dict_values


class _Specs(dict[str, CloudSpec]):
    """The list, read through the plugin loader: whoever reads it first (a file's validation, the schema,
    `vmplane init`) sees the plugins' clouds too; a look-up raises a plugin that failed, a listing goes on
    without it. Writes (`register`) do not load."""

    def __getitem__(self, name: str) -> CloudSpec:
        load_plugins()
        return super().__getitem__(name)

    def get(self, name: str, default: CloudSpec | None = None) -> CloudSpec | None:  # type: ignore[override]
        load_plugins()
        return super().get(name, default)

    def __contains__(self, name: object) -> bool:
        load_plugins()
        return super().__contains__(name)

    def __iter__(self) -> Iterator[str]:
        load_plugins(strict=False)
        return super().__iter__()

    def __len__(self) -> int:
        load_plugins(strict=False)
        return super().__len__()

    def keys(self) -> dict_keys[str, CloudSpec]:
        load_plugins(strict=False)
        return super().keys()

    def values(self) -> dict_values[str, CloudSpec]:
        load_plugins(strict=False)
        return super().values()

    def items(self) -> dict_items[str, CloudSpec]:
        load_plugins(strict=False)
        return super().items()


SPECS: dict[str, CloudSpec] = _Specs(
    {s.name: s for s in (aws_spec.SPEC, gcp_spec.SPEC, azure_spec.SPEC, proxmox_spec.SPEC)}
)


def register(spec: CloudSpec) -> None:
    """Add a cloud at run time: its provider shape validates from then on (options need it before
    `vmplane.envspec.models` is imported: the sections' fields are built once)."""
    if dict.get(SPECS, spec.name, spec) is not spec:  # dict's own: a plugin registers while they load
        raise ValueError(f"a cloud named {spec.name!r} is already registered")
    SPECS[spec.name] = spec


def unregister(name: str) -> None:
    """Remove a cloud `register` added (tests put the list back as they found it)."""
    SPECS.pop(name, None)
