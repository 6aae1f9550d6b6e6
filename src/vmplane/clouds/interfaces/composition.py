"""The parts a driver is composed of, declared once (`CloudDriver` sets them in its `__init__`)."""

from __future__ import annotations

from vmplane.clouds.context import Context
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
    # What stepCreateIAM / stepDeleteIAM log on a cloud without `identity` (then ": nothing to delete").
    no_identity: str = "no instance identity on this cloud"
    no_identity_why: str = "nothing to make"

    def unsupported(self, what: str) -> UnsupportedError:
        """The typed refusal of something the driver cannot do (`CloudDriver` names its cloud)."""
        return UnsupportedError(f"{what}: not supported by this driver", code="Unsupported")


def create_identity(parts: Parts, ctx: Context) -> None:
    """stepCreateIAM: the identity (or the log line of a cloud without one), then what the LB starts early."""
    if parts.identity is None:
        ctx.log(f"{parts.no_identity}: {parts.no_identity_why}")
    else:
        parts.identity.ensure(ctx)
    if parts.lb is not None and ctx.spec.load_balancer is not None:
        parts.lb.prepare(ctx)  # needs only the spec: a certificate validates while the rest is built


def delete_identity(parts: Parts, ctx: Context) -> None:
    """stepDeleteIAM."""
    if parts.identity is None:
        ctx.log(f"{parts.no_identity}: nothing to delete")
    else:
        parts.identity.delete(ctx)
