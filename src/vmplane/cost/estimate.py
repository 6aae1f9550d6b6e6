"""What an environment costs a month from the pinned list prices (cost/prices.py), and what its
schedules save: instances x hours, root disks (GB-month), the load balancer's hours and capacity, NAT
hours and data, public IPv4 addresses. Every assumption is returned with the numbers.

A scheduled Fixed pool is stopped, so its disks are still billed; a scheduled auto-scaling pool is scaled
to 0, so its VMs and their disks are gone outside the schedule's hours.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vmplane.clouds.descriptor import NetworkUsage
from vmplane.clouds.pricing import HOURS_PER_MONTH, money
from vmplane.clouds.registry import descriptor_for
from vmplane.cost.prices import table_for
from vmplane.envspec.models import AsgPool, EnvSpec, FixedPool

DEFAULT_NAT_GB = 100.0  # data through NAT per month: package installs, image pulls, updates
DEFAULT_LB_CAPACITY_UNITS = 1.0  # ALB LCUs in use on average: a light web workload


@dataclass
class Line:
    kind: str  # instance, disk, loadBalancer, loadBalancerCapacity, nat, natData, publicIp
    pool: str | None
    type: str
    count: float
    hours: float
    unitPrice: float | None
    monthly: float | None
    scheduledMonthly: float | None = None
    unit: str = "hour"


@dataclass
class Estimate:
    currency: str
    lines: list[Line]
    assumptions: dict[str, Any]
    missing: list[str] = field(default_factory=list)

    @property
    def scheduled(self) -> bool:
        return any(line.scheduledMonthly is not None for line in self.lines)

    def add(
        self,
        kind: str,
        type: str,
        count: float,
        unit_price: float | None,
        monthly: float | None,
        scheduled: float | None = None,
        unit: str = "hour",
    ) -> None:
        """An environment-wide line (no pool) over the month's hours: what a cloud's network lines add."""
        self.lines.append(Line(kind, None, type, count, HOURS_PER_MONTH, unit_price, monthly, scheduled, unit))

    def total(self) -> float:
        return round(sum(line.monthly or 0.0 for line in self.lines), 2)

    def scheduled_total(self) -> float | None:
        if not self.scheduled:
            return None
        parts = (line.monthly if line.scheduledMonthly is None else line.scheduledMonthly for line in self.lines)
        return round(sum(p or 0.0 for p in parts), 2)

    def saving_percent(self) -> float | None:
        scheduled, total = self.scheduled_total(), self.total()
        if scheduled is None or not total:
            return None
        return round(100 * (total - scheduled) / total, 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "currency": self.currency,
            "monthly": {
                "total": self.total(),
                "scheduledTotal": self.scheduled_total(),
                "savingPercent": self.saving_percent(),
            },
            "lines": [asdict(line) for line in self.lines],
            "assumptions": self.assumptions,
            "missing": self.missing,
            "complete": not self.missing,
        }


def estimate(
    spec: EnvSpec, *, nat_gb: float = DEFAULT_NAT_GB, lb_capacity_units: float = DEFAULT_LB_CAPACITY_UNITS
) -> Estimate:
    cloud, region = spec.provider.cloud, spec.provider.region
    prices = table_for(cloud, region)
    assumptions: dict[str, Any] = {
        "hoursPerMonth": HOURS_PER_MONTH,
        "natGbPerMonth": nat_gb,
        "region": region,
        "pricing": "on-demand list prices, Linux, no discounts, taxes or free tiers",
        "asgPools": "priced at `desired` VMs",
        "schedules": "weekly hours x 730/168; a daylight-saving change (one hour, twice a year) is not counted",
    }
    described = descriptor_for(cloud)
    if described.unpriced:
        # Nothing is rented (Proxmox: the cluster's own hardware, whose cost vmplane cannot know).
        return Estimate("USD", [], assumptions, [described.unpriced])
    if prices is None:
        return Estimate("USD", [], assumptions, [f"no price table for {cloud.value} {region}"])
    assumptions |= {
        "prices": {"source": prices.source, "recorded": prices.recorded, "notes": prices.notes},
        "diskKind": prices.disk_kind,
    }
    out = Estimate("USD", [], assumptions)
    vm_hours = scheduled_vm_hours = 0.0
    for name, pool in sorted(spec.pools.items()):
        count = pool.size if isinstance(pool, FixedPool) else pool.desired
        share = pool.schedule.running_share() if pool.schedule else None
        hours = HOURS_PER_MONTH * (share if share is not None else 1.0)
        vm_hours += count * HOURS_PER_MONTH
        scheduled_vm_hours += count * hours
        unit = prices.instance_hour.get(pool.instance_type)
        if unit is None:
            out.missing.append(
                f"pools.{name}.instanceType: no price for {pool.instance_type} in {cloud.value} {region}"
            )
        monthly = money(unit * count * HOURS_PER_MONTH) if unit is not None else None
        scheduled = money(unit * count * hours) if unit is not None and share is not None else None
        out.lines.append(Line("instance", name, pool.instance_type, count, HOURS_PER_MONTH, unit, monthly, scheduled))
        disk = money(prices.disk_gb_month * count * pool.disk_gb)
        # Stopped VMs keep their disks; a group scaled to 0 has none.
        disk_scheduled = money(disk * share) if share is not None and isinstance(pool, AsgPool) else None
        if share is not None and disk_scheduled is None:
            disk_scheduled = disk
        out.lines.append(
            Line("disk", name, prices.disk_kind, count * pool.disk_gb, HOURS_PER_MONTH, prices.disk_gb_month, disk,
                 disk_scheduled, unit="GB-month")
        )  # fmt: skip
    if described.pricing is not None:
        # NAT, the load balancer and public addresses: each cloud bills them its own way.
        usage = NetworkUsage(vm_hours, scheduled_vm_hours, nat_gb, lb_capacity_units)
        described.pricing.network_lines(out, spec, prices, usage)
    return out
