"""The parts a driver is composed of, declared once (`CloudDriver` sets them in its `__init__`)."""

from __future__ import annotations

from vmplane.clouds.errors import UnsupportedError
from vmplane.clouds.interfaces.exec import ExecChannel
from vmplane.clouds.interfaces.identity import Identity
from vmplane.clouds.interfaces.inventory import Inventory
from vmplane.clouds.interfaces.lb import LoadBalancer
from vmplane.clouds.interfaces.network import Network
from vmplane.clouds.interfaces.pools import Pools
from vmplane.clouds.interfaces.scheduler import Scheduler


class Parts:
    """A part the cloud lacks is None; `capabilities` says the same (tests/unit/test_driver_parts.py)."""

    network: Network
    identity: Identity | None
    pools: Pools
    lb: LoadBalancer | None
    exec_channel: ExecChannel
    scheduler: Scheduler | None
    inventory: Inventory
    # What stepCreateIAM / stepDeleteIAM log on a cloud without `identity`.
    no_identity: str = "this cloud gives its VMs no identity: nothing to make"

    def unsupported(self, what: str) -> UnsupportedError:
        """The typed refusal of something the driver cannot do (`CloudDriver` names its cloud)."""
        return UnsupportedError(f"{what}: not supported by this driver", code="Unsupported")
