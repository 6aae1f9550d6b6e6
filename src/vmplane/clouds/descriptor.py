"""What the rest of vmplane needs to know of a cloud at run time, in one record per cloud.

Each cloud's `clouds/<cloud>/descriptor.py` builds one `Descriptor`; `clouds/registry.py` is the one list of
them. A descriptor module imports nothing heavy: every field that needs the cloud's SDK or driver is a
function importing it when called (boto3 alone costs ~0.3 s of CLI start-up, and the registry is on that path).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from vmplane.bootstrap.guest import GuestAddon
    from vmplane.clouds.base import CloudDriver
    from vmplane.clouds.price_api import Fetcher
    from vmplane.envspec.base import Cloud
    from vmplane.envspec.models import EnvSpec
    from vmplane.settings import Settings
    from vmplane.target import Target


class LineSink(Protocol):
    """The estimate being built (cost/estimate.py `Estimate`), which a cloud's network lines are added to."""

    assumptions: dict[str, Any]

    @property
    def scheduled(self) -> bool: ...

    def add(
        self,
        kind: str,
        type: str,
        count: float,
        unit_price: float | None,
        monthly: float | None,
        scheduled: float | None = None,
        unit: str = "hour",
    ) -> None: ...


@dataclass(frozen=True)
class NetworkUsage:
    """What the estimate measured before the network lines: VM-hours (always-on and as scheduled), the
    assumed NAT data and load balancer capacity. A cloud's `network_lines` prices them its own way."""

    vm_hours: float
    scheduled_vm_hours: float
    nat_gb: float
    lb_capacity_units: float


@dataclass(frozen=True)
class Pricing:
    """How vmplane prices a cloud: its pinned list-price tables, the network lines (NAT, load balancer,
    public addresses) it bills, and the price API `vmplane prices refresh` reads."""

    # The pinned tables, each the fields of a cost/prices.py PriceTable but its cloud (plain data).
    pinned: Sequence[dict[str, Any]]
    # (estimate, spec, price table, usage): appends the NAT, load balancer and public address lines.
    network_lines: Callable[[LineSink, EnvSpec, Any, NetworkUsage], None]
    source: str  # the price API, as `vmplane prices` names it
    default_region: str
    # () -> the price API's reader (clouds/<cloud>/price_api.py `fetch`); imports the SDK, so only at a refresh.
    fetcher: Callable[[], Fetcher]
    # NAT billed per VM-hour: the history splits the NAT line per pool, so it follows each pool's schedule.
    nat_per_vm_hour: bool = False


@dataclass(frozen=True)
class Entry:
    """An object in a layer above the clouds (the CLI, the Terraform stacks), named by module path because a
    descriptor may not import it; `load` imports it when the upper layer asks."""

    module: str
    attr: str

    def load(self) -> Any:
        return getattr(importlib.import_module(self.module), self.attr)


@dataclass(frozen=True)
class CliGroup:
    """A cloud's own `vmplane <name> ...` sub-commands: `app` is a Typer app."""

    name: str
    app: Entry


@dataclass(frozen=True)
class Descriptor:
    cloud: Cloud
    driver: Callable[[Target], CloudDriver]
    # What a spec asks that the driver cannot do, with no target, credentials or SDK (`vmplane validate`).
    static_problems: Callable[[EnvSpec], list[str]]
    # The embedded sandbox's port for this cloud's API; None when the sandbox does not emulate it (its
    # driver then answers with its own refusal, given the AWS endpoint as before the GCP sandbox).
    sandbox_port: Callable[[Settings], int] | None = None
    # The pool field that picks a VM's OS, as messages name it (Proxmox: a `template` VM, not an `image`).
    image_field: str = "image"
    # How the sandbox's emulator treats a pushed exec command, for the push's log (" (moto records ...)").
    sandbox_exec_note: str = ""
    # How `vmplane cost` prices it; `unpriced`: why nothing is estimated (nothing rented). Neither: no price table.
    pricing: Pricing | None = None
    unpriced: str = ""
    # Files and boot commands this cloud's guest side adds to every VM's cloud-init user-data.
    guest: Callable[[], GuestAddon] | None = None
    cli: CliGroup | None = None
    # Its generated Terraform stack (tf/stacks.py `CloudStack`), a class built with no arguments; None: `vmplane
    # tf generate` refuses the cloud.
    tf_stack: Entry | None = None

    @property
    def name(self) -> str:
        return self.cloud.value
