"""What vmplane's cost estimate prices on Google Cloud (clouds/descriptor.py `Pricing`): the pinned list
prices and the network lines, Cloud NAT per VM-hour and global forwarding rules. No SDK, no driver."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vmplane.clouds.descriptor import LineSink, NetworkUsage, Pricing
from vmplane.clouds.pricing import HOURS_PER_MONTH, money, nat_data, public_ips

if TYPE_CHECKING:
    from vmplane.clouds.price_api import Fetcher


def network_lines(out: LineSink, spec: Any, prices: Any, usage: NetworkUsage) -> None:
    h = HOURS_PER_MONTH
    # Cloud NAT bills each VM that uses it by the hour: a stopped VM costs nothing.
    sched = money(prices.nat_hour * usage.scheduled_vm_hours) if out.scheduled else None
    out.add(
        "nat", "Cloud NAT (per VM-hour)", usage.vm_hours / h, prices.nat_hour, money(prices.nat_hour * usage.vm_hours),
        sched,
    )  # fmt: skip
    nat_data(out, prices, usage)
    ips = 1  # Cloud NAT's first auto-allocated address
    if spec.load_balancer is not None:
        out.assumptions["loadBalancer"] = "two global forwarding rules (HTTPS 443, HTTP 80 redirect)"
        rules = 2
        out.add("loadBalancer", "global forwarding rule", rules, prices.lb_hour, money(prices.lb_hour * rules * h))
    out.assumptions["natAddresses"] = "Cloud NAT allocates addresses as ports run out: one is assumed"
    public_ips(out, prices, ips)


PINNED = [
    dict(
        region="us-central1",
        source="cloud.google.com/compute/vm-instance-pricing, /compute/disks-image-pricing, /vpc/network-pricing, "
        "/nat/pricing",
        recorded="2026-12-01",
        instance_hour={
            "e2-micro": 0.008376,
            "e2-small": 0.016751,
            "e2-medium": 0.033503,
            "e2-standard-2": 0.067006,
            "e2-standard-4": 0.134012,
            "n2-standard-2": 0.097118,
        },
        disk_gb_month=0.10,
        disk_kind="pd-balanced",
        lb_hour=0.025,
        lb_capacity_unit_hour=0.0,
        nat_hour=0.0014,
        nat_gb=0.045,
        public_ip_hour=0.005,  # an external address used by a Cloud NAT gateway (cloud.google.com/nat/pricing)
        notes=[
            "Cloud NAT is billed per VM-hour (0.0014 USD up to 32 VMs), not per gateway, plus its addresses",
            "the load balancer's address is not billed while a forwarding rule uses it; its data is (not counted)",
        ],
    )
]


def _fetcher() -> Fetcher:
    from vmplane.clouds.gcp import price_api

    return price_api.fetch


PRICING = Pricing(
    pinned=PINNED,
    network_lines=network_lines,
    fetcher=_fetcher,
    source="Cloud Billing Catalog API",
    default_region="us-central1",
    nat_per_vm_hour=True,
)
