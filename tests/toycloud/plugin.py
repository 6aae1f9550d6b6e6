"""The toy cloud's plugin module: importing it registers the cloud (what `VMPLANE_CLOUD_PLUGINS` names)."""

from __future__ import annotations

from tests.toycloud.descriptor import DESCRIPTOR
from tests.toycloud.spec import SPEC

from vmplane.clouds import registry, specs


def register() -> None:
    """Also an entry point's target (`vmplane.clouds = toy = tests.toycloud.plugin:register`)."""
    specs.register(SPEC)
    registry.register(DESCRIPTOR)


register()
