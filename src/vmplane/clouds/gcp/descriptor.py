"""Google Cloud, as the rest of vmplane sees it (clouds/descriptor.py). Nothing heavy at import."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmplane.clouds.descriptor import Descriptor, Entry
from vmplane.clouds.gcp.pricing import PRICING
from vmplane.envspec.base import Cloud

if TYPE_CHECKING:
    from vmplane.bootstrap.guest import GuestAddon
    from vmplane.clouds.base import CloudDriver
    from vmplane.envspec.models import EnvSpec
    from vmplane.settings import Settings
    from vmplane.target import Target


def _driver(target: Target) -> CloudDriver:
    from vmplane.clouds.gcp.driver import GcpDriver
    from vmplane.clouds.gcp.session import GcpTarget

    # Target.for_spec always sets the project from provider.project; only a hand-built Target lacks it,
    # and then the first call (stepValidate's projects.get) fails naming the empty project.
    return GcpDriver(GcpTarget(project=target.project or "", region=target.region, endpoint_url=target.endpoint_url))


def _static_problems(spec: EnvSpec) -> list[str]:
    from vmplane.clouds.gcp.capabilities import static_problems

    return static_problems(spec)


def _sandbox_port(settings: Settings) -> int:
    return settings.gcp_sandbox_port


def _guest() -> GuestAddon:
    # The sentinel reported through guest attributes, and the exec mailbox agent (bootstrap/gcp_guest.py).
    from vmplane.bootstrap import gcp_guest
    from vmplane.bootstrap.guest import GuestAddon

    return GuestAddon(files=gcp_guest.guest_files, runcmd=gcp_guest.guest_runcmd)


DESCRIPTOR = Descriptor(
    cloud=Cloud("gcp"),
    driver=_driver,
    static_problems=_static_problems,
    sandbox_port=_sandbox_port,
    pricing=PRICING,
    tf_stack=Entry("vmplane.tf.stacks", "GcpStack"),
    guest=_guest,
)
