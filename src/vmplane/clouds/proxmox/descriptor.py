"""Proxmox VE, as the rest of vmplane sees it (clouds/descriptor.py). Nothing heavy at import."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmplane.clouds.descriptor import CliGroup, Descriptor, Entry
from vmplane.envspec.base import Cloud

if TYPE_CHECKING:
    from vmplane.clouds.base import CloudDriver
    from vmplane.envspec.models import EnvSpec
    from vmplane.target import Target


def _driver(target: Target) -> CloudDriver:
    from vmplane.clouds.errors import UnsupportedError
    from vmplane.clouds.proxmox.driver import ProxmoxDriver
    from vmplane.clouds.proxmox.session import PveTarget

    if target.sandbox:
        raise UnsupportedError(
            "the sandbox emulates AWS and Google Cloud only; a Proxmox environment needs a Proxmox VE API "
            "(provider.endpoint)"
        )
    # A job recorded before Target.placement existed carries its nodes only in `region`, comma-joined.
    nodes = target.placement or tuple(n for n in target.region.split(",") if n)
    return ProxmoxDriver(
        PveTarget(endpoint=target.api_endpoint or "", nodes=nodes, ca_file=target.ca_file, verify_tls=target.verify_tls)
    )


def _static_problems(spec: EnvSpec) -> list[str]:
    from vmplane.clouds.proxmox.capabilities import static_problems

    return static_problems(spec)


DESCRIPTOR = Descriptor(
    cloud=Cloud("proxmox"),
    driver=_driver,
    static_problems=_static_problems,
    image_field="proxmox.template",
    unpriced="proxmox: the VMs run on your own Proxmox VE hardware, which has no list price to estimate",
    cli=CliGroup("proxmox", Entry("vmplane.cli.proxmox", "proxmox_app")),
)
