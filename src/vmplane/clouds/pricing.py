"""The arithmetic every cloud's network lines share (clouds/<cloud>/pricing.py), and cost/estimate.py too."""

from __future__ import annotations

from typing import Any

from vmplane.clouds.descriptor import LineSink, NetworkUsage

HOURS_PER_MONTH = 730.0


def money(x: float) -> float:
    return round(x, 2)


def nat_data(out: LineSink, prices: Any, usage: NetworkUsage) -> None:
    """The data processed by NAT, per GB: billed alike on every priced cloud."""
    out.add(
        "natData", "NAT data processed", usage.nat_gb, prices.nat_gb, money(prices.nat_gb * usage.nat_gb), unit="GB"
    )


def public_ips(out: LineSink, prices: Any, ips: int) -> None:
    """`ips` in-use public IPv4 addresses, each billed by the hour."""
    h = HOURS_PER_MONTH
    out.add("publicIp", "public IPv4 address", ips, prices.public_ip_hour, money(prices.public_ip_hour * ips * h))
