"""Pinned list prices (USD, on-demand, Linux) per cloud and region, for what vmplane creates.

Each table names where its numbers come from and when they were recorded. They are the vendors'
published list prices as of the date given; they were written down, not fetched (this machine reaches
no price API), so check them against the source before relying on a total. A type or region missing
here is reported by `vmplane cost` (and fails `--strict`); it is never counted as 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vmplane.envspec.models import Cloud


@dataclass(frozen=True)
class PriceTable:
    cloud: Cloud
    region: str
    source: str
    recorded: str  # when the numbers were written down
    instance_hour: dict[str, float]
    disk_gb_month: float
    disk_kind: str
    lb_hour: float  # AWS: ALB hour; GCP: a global forwarding rule's hour (the first five, each)
    lb_capacity_unit_hour: float  # AWS: one ALB LCU-hour; GCP: none (data is priced per GB)
    nat_hour: float  # AWS: a NAT gateway hour; GCP: Cloud NAT per VM-hour (<= 32 VMs)
    nat_gb: float  # data processed by NAT, per GB
    public_ip_hour: float  # an in-use public IPv4 address
    notes: list[str] = field(default_factory=list)


AWS_US_EAST_1 = PriceTable(
    cloud=Cloud.aws,
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

GCP_US_CENTRAL1 = PriceTable(
    cloud=Cloud.gcp,
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
    public_ip_hour=0.0,
    notes=[
        "Cloud NAT is billed per VM-hour (0.0014 USD up to 32 VMs), not per gateway",
        "the load balancer's address is not billed while a forwarding rule uses it; its data is (not counted)",
    ],
)

TABLES: dict[tuple[Cloud, str], PriceTable] = {(t.cloud, t.region): t for t in (AWS_US_EAST_1, GCP_US_CENTRAL1)}


def table_for(cloud: Cloud, region: str) -> PriceTable | None:
    return TABLES.get((cloud, region))
