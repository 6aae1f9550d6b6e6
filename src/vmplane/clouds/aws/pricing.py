"""What vmplane's cost estimate prices on AWS (clouds/descriptor.py `Pricing`): the pinned list prices and
the network lines, a NAT gateway and an ALB. Plain data and arithmetic: no SDK, no driver."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vmplane.clouds.descriptor import LineSink, NetworkUsage, Pricing
from vmplane.clouds.pricing import HOURS_PER_MONTH, money, nat_data, public_ips

if TYPE_CHECKING:
    from vmplane.clouds.price_api import Fetcher


def network_lines(out: LineSink, spec: Any, prices: Any, usage: NetworkUsage) -> None:
    h = HOURS_PER_MONTH
    out.add("nat", "NAT gateway", 1, prices.nat_hour, money(prices.nat_hour * h))
    nat_data(out, prices, usage)
    ips = 1  # the NAT gateway's Elastic IP
    if spec.load_balancer is not None:
        units = usage.lb_capacity_units
        out.assumptions["lbCapacityUnits"] = units
        out.add("loadBalancer", "ALB", 1, prices.lb_hour, money(prices.lb_hour * h))
        out.add(
            "loadBalancerCapacity", "ALB LCU", units, prices.lb_capacity_unit_hour,
            money(prices.lb_capacity_unit_hour * units * h),
        )  # fmt: skip
        ips += spec.network.zones  # an internet-facing ALB holds one public address per zone
    public_ips(out, prices, ips)


PINNED = [
    dict(
        region="us-east-1",
        source="aws.amazon.com/ec2/pricing/on-demand, /ebs/pricing, /elasticloadbalancing/pricing, /vpc/pricing",
        recorded="2026-12-01",
        instance_hour={
            "t3.micro": 0.0104,
            "t3.small": 0.0208,
            "t3.medium": 0.0416,
            "t3.large": 0.0832,
            "t3.xlarge": 0.1664,
            "t4g.small": 0.0168,
            "t4g.medium": 0.0336,
            "m5.large": 0.096,
            "m6i.large": 0.096,
            "c6i.large": 0.085,
        },
        disk_gb_month=0.08,
        disk_kind="gp3",
        lb_hour=0.0225,
        lb_capacity_unit_hour=0.008,
        nat_hour=0.045,
        nat_gb=0.045,
        public_ip_hour=0.005,
        notes=["every public IPv4 address is billed hourly (since 2024-02-01): the NAT's EIP and the ALB's"],
    )
]


def _fetcher() -> Fetcher:
    from vmplane.clouds.aws import price_api

    return price_api.fetch


PRICING = Pricing(
    pinned=PINNED,
    network_lines=network_lines,
    fetcher=_fetcher,
    source="AWS Price List API",
    default_region="us-east-1",
)
